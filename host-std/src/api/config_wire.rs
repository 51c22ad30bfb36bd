//! A [`SessionConfig`](crate::SessionConfig) as the params of
//! `session.create` or `session.resume`; the core adds which waits the
//! session answers, and the defaults.

use std::path::PathBuf;

use copilot_core::{ClientMode, OptionScope};
use serde_json::{json, Map, Value};

use super::config::SessionConfig;
use super::config_mode::{system_message_for_mode, with_mode_default};
use super::config_parts::{
    mcp_servers_json, CanvasProviderIdentity, CustomAgentConfig, InfiniteSessionConfig, LargeToolOutputConfig,
    ProviderConfig, SystemMessage,
};
use crate::answering::{Canvas, Tool};

impl SessionConfig {
    pub(crate) fn to_params(&self, id: Option<&str>, resuming: bool, mode: ClientMode) -> crate::Result<Value> {
        let mut p = Map::new();
        let mut set = |key: &str, v: Value| {
            p.insert(key.to_owned(), v);
        };
        let path = |d: &PathBuf| Value::from(d.to_string_lossy().into_owned());
        let paths = |ds: &[PathBuf]| Value::Array(ds.iter().map(path).collect());
        if let Some(id) = id {
            set("sessionId", id.into());
        }
        let h = &self.handlers;
        if !h.tools.is_empty() {
            set("tools", h.tools.iter().map(Tool::definition).collect::<Vec<_>>().into());
        }
        if !h.commands.is_empty() {
            let commands: Vec<Value> =
                h.commands.iter().map(|c| json!({ "name": c.name, "description": c.description })).collect();
            set("commands", commands.into());
        }
        let text = |v: &Option<String>| v.clone().map(Value::from);
        let flag = |v: &Option<bool>| v.map(Value::from);
        let list = |v: &[String]| (!v.is_empty()).then(|| json!(v));
        let options: Vec<(&str, Option<Value>)> = vec![
            ("streaming", Some(self.streaming.into())),
            ("includeSubAgentStreamingEvents", Some(self.include_sub_agent_streaming_events.into())),
            ("clientName", text(&self.client_name)),
            ("model", text(&self.model)),
            ("reasoningEffort", self.reasoning_effort.map(|e| e.wire_name().into())),
            ("reasoningSummary", text(&self.reasoning_summary)),
            ("contextTier", text(&self.context_tier)),
            ("modelCapabilities", self.model_capabilities.clone()),
            ("enableExperimentalMode", flag(&self.enable_experimental_mode)),
            ("workingDirectory", self.working_directory.as_ref().map(path)),
            (
                "additionalDirectories",
                (!self.additional_directories.is_empty()).then(|| paths(&self.additional_directories)),
            ),
            ("configDirectory", self.config_directory.as_ref().map(path)),
            ("enableConfigDiscovery", flag(&self.enable_config_discovery)),
            ("systemMessage", system_message_for_mode(mode, self.system_message.as_ref().map(SystemMessage::to_json))),
            ("availableTools", self.available_tools.as_ref().map(|t| json!(t))),
            ("excludedTools", list(&self.excluded_tools)),
            ("toolSearch", self.tool_search.clone()),
            ("excludedBuiltinAgents", list(&self.excluded_builtin_agents)),
            ("provider", self.provider.as_ref().map(ProviderConfig::to_json)),
            ("capi", self.capi.clone()),
            ("providers", (!self.providers.is_empty()).then(|| json!(self.providers))),
            ("models", (!self.models.is_empty()).then(|| json!(self.models))),
            ("mcpServers", (!self.mcp_servers.is_empty()).then(|| mcp_servers_json(&self.mcp_servers))),
            ("mcpOAuthTokenStorage", text(&self.mcp_oauth_token_storage)),
            ("disabledMcpServers", list(&self.disabled_mcp_servers)),
            ("enableMcpApps", Some(self.enable_mcp_apps.into())),
            ("githubMcpToolConfig", self.github_mcp_tool_config.clone()),
            (
                "customAgents",
                (!self.custom_agents.is_empty())
                    .then(|| self.custom_agents.iter().map(CustomAgentConfig::to_json).collect()),
            ),
            ("customAgentsLocalOnly", flag(&self.custom_agents_local_only)),
            ("defaultAgent", self.default_agent.as_ref().map(|d| json!({ "excludedTools": d.excluded_tools }))),
            ("agent", text(&self.agent)),
            ("skillDirectories", (!self.skill_directories.is_empty()).then(|| paths(&self.skill_directories))),
            ("disabledSkills", list(&self.disabled_skills)),
            ("pluginDirectories", (!self.plugin_directories.is_empty()).then(|| paths(&self.plugin_directories))),
            (
                "instructionDirectories",
                (!self.instruction_directories.is_empty()).then(|| paths(&self.instruction_directories)),
            ),
            ("infiniteSessions", self.infinite_sessions.as_ref().map(InfiniteSessionConfig::to_json)),
            ("memory", self.memory.clone()),
            ("largeOutput", self.large_output.as_ref().map(LargeToolOutputConfig::to_json)),
            ("sessionLimits", self.session_limits.clone()),
            ("enableSessionTelemetry", flag(&self.enable_session_telemetry)),
            ("enableCitations", flag(&self.enable_citations)),
            ("enableFileChangeTracking", flag(&self.enable_file_change_tracking)),
            ("gitHubToken", text(&self.github_token)),
            ("enableManagedSettings", flag(&self.enable_managed_settings)),
            ("managedSettings", self.managed_settings.clone()),
            ("skipEmbeddingRetrieval", flag(&self.skip_embedding_retrieval)),
            ("embeddingCacheStorage", text(&self.embedding_cache_storage)),
            ("organizationCustomInstructions", text(&self.organization_custom_instructions)),
            ("enableOnDemandInstructionDiscovery", flag(&self.enable_on_demand_instruction_discovery)),
            ("enableFileHooks", flag(&self.enable_file_hooks)),
            ("enableHostGitOperations", flag(&self.enable_host_git_operations)),
            ("enableSessionStore", flag(&self.enable_session_store)),
            ("enableSkills", flag(&self.enable_skills)),
            ("remoteSession", text(&self.remote_session)),
            ("expAssignments", self.exp_assignments.clone()),
            ("skipCustomInstructions", flag(&self.skip_custom_instructions)),
            ("coauthorEnabled", flag(&self.coauthor_enabled)),
            ("manageScheduleEnabled", flag(&self.manage_schedule_enabled)),
            ("canvases", (!self.canvases.is_empty()).then(|| self.canvases.iter().map(Canvas::declaration).collect())),
            ("requestCanvasRenderer", flag(&self.request_canvas_renderer)),
            ("requestExtensions", flag(&self.request_extensions)),
            ("extensionSdkPath", self.extension_sdk_path.as_ref().map(path)),
            ("extensionInfo", self.extension_info.as_ref().map(|e| json!({ "source": e.source, "name": e.name }))),
            ("canvasProvider", self.canvas_provider.as_ref().map(CanvasProviderIdentity::to_json)),
            ("cloud", self.cloud.clone()),
            ("suppressResumeEvent", Some(self.suppress_resume_event.into())),
            ("continuePendingWork", Some(self.continue_pending_work.into())),
            ("openCanvases", (!self.open_canvases.is_empty()).then(|| json!(self.open_canvases))),
        ];
        // Each option goes under the core's wire name, to the request the
        // core says takes it (`check` has refused one set for the other),
        // the mode's default where the user set none.
        for (name, value) in options {
            let Some(option) = copilot_core::open_option(name) else {
                return Err(crate::Error::Config(format!("{name} is not a session option of the core")));
            };
            let scoped = match option.scope {
                OptionScope::Both => true,
                OptionScope::CreateOnly => !resuming,
                OptionScope::ResumeOnly => resuming,
            };
            let value = with_mode_default(mode, name, value);
            let value = value.filter(|v| !option.only_when_true || *v == Value::Bool(true));
            if let (true, Some(wire), Some(v)) = (scoped, option.wire, value) {
                p.insert(wire.to_owned(), v);
            }
        }
        // The core adds which waits this session answers, and the defaults.
        let options = serde_json::to_vec(&p).map_err(|e| crate::Error::Config(format!("the session options: {e}")))?;
        let mut params = Vec::with_capacity(options.len() + 320);
        copilot_core::write_open_params(&options, |k| self.handlers.has(k), &mut |b: &[u8]| {
            params.extend_from_slice(b)
        })
        .map_err(|e| crate::Error::Config(e.message().to_owned()))?;
        serde_json::from_slice(&params).map_err(|e| crate::Error::Config(format!("the session options: {e}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use copilot_core::OPEN_OPTIONS;

    /// `snake_case` -> `camelCase`.
    fn camel(snake: &str) -> String {
        let mut parts = snake.split('_');
        let first = parts.next().unwrap_or_default().to_owned();
        parts.fold(first, |mut out, p| {
            let mut chars = p.chars();
            out.extend(chars.next().map(|c| c.to_ascii_uppercase()));
            out.push_str(chars.as_str());
            out
        })
    }

    #[test]
    fn the_options_of_one_request_only_are_the_cores() {
        let scoped = |scope| -> Vec<String> {
            OPEN_OPTIONS.iter().filter(|o| o.scope == scope).map(|o| o.name.to_owned()).collect()
        };
        let create: Vec<String> = SessionConfig::CREATE_ONLY.iter().map(|n| camel(n)).collect();
        let resume: Vec<String> = SessionConfig::RESUME_ONLY.iter().map(|n| camel(n)).collect();
        assert_eq!(create, scoped(OptionScope::CreateOnly));
        assert_eq!(resume, scoped(OptionScope::ResumeOnly));
    }

    #[test]
    fn every_option_goes_under_the_cores_wire_name() {
        let config = SessionConfig {
            enable_experimental_mode: Some(true),
            config_directory: Some("/c".into()),
            enable_mcp_apps: true,
            suppress_resume_event: true,
            ..SessionConfig::default()
        };
        let params = config.to_params(Some("s"), true, ClientMode::CopilotCli).expect("params");
        for key in ["isExperimentalMode", "configDir", "requestMcpApps", "disableResume", "streaming"] {
            assert!(params.get(key).is_some(), "{key} in {params}");
        }
        let created = SessionConfig::default().to_params(Some("s"), false, ClientMode::CopilotCli).expect("params");
        assert!(created.get("requestMcpApps").is_none() && created.get("disableResume").is_none(), "{created}");
    }
}
