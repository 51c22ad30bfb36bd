//! A [`SessionConfig`](crate::SessionConfig) as the params of
//! `session.create` or `session.resume`; the core adds which waits the
//! session answers, and the defaults.

use std::path::PathBuf;

use serde_json::{json, Map, Value};

use super::config::SessionConfig;
use super::config_parts::{mcp_servers_json, CustomAgentConfig, InfiniteSessionConfig, ProviderConfig, SystemMessage};
use crate::answering::Tool;

impl SessionConfig {
    pub(crate) fn to_params(&self, id: Option<&str>, resuming: bool) -> crate::Result<Value> {
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
        set("streaming", self.streaming.into());
        set("includeSubAgentStreamingEvents", self.include_sub_agent_streaming_events.into());
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
            ("clientName", text(&self.client_name)),
            ("model", text(&self.model)),
            ("reasoningEffort", self.reasoning_effort.map(|e| e.wire_name().into())),
            ("reasoningSummary", text(&self.reasoning_summary)),
            ("contextTier", text(&self.context_tier)),
            ("modelCapabilities", self.model_capabilities.clone()),
            ("isExperimentalMode", flag(&self.enable_experimental_mode)),
            ("workingDirectory", self.working_directory.as_ref().map(path)),
            (
                "additionalDirectories",
                (!self.additional_directories.is_empty()).then(|| paths(&self.additional_directories)),
            ),
            ("configDir", self.config_directory.as_ref().map(path)),
            ("enableConfigDiscovery", flag(&self.enable_config_discovery)),
            ("systemMessage", self.system_message.as_ref().map(SystemMessage::to_json)),
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
            ("requestMcpApps", self.enable_mcp_apps.then_some(true.into())),
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
            ("largeOutput", self.large_output.clone()),
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
        ];
        for (key, value) in options {
            if let Some(v) = value {
                p.insert(key.to_owned(), v);
            }
        }
        if resuming {
            if self.suppress_resume_event {
                p.insert("disableResume".into(), true.into());
            }
            if self.continue_pending_work {
                p.insert("continuePendingWork".into(), true.into());
            }
        } else if let Some(c) = &self.cloud {
            p.insert("cloud".into(), c.clone());
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
