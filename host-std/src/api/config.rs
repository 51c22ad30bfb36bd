//! The options of `session.create` and `session.resume`, typed.
//!
//! Every option the official SDKs expose on a session is here, under the
//! same name (snake_case of the JavaScript package's camelCase key), with
//! the same default. What the SDKs always send is sent too:
//! `includeSubAgentStreamingEvents` (default `true`), `envValueMode:
//! "direct"` (MCP environment values are the values, not variable names),
//! `toolFilterPrecedence: "excluded"` (an excluded tool stays excluded even
//! if it is also available), and the `request*` flags, `true` exactly when a
//! handler answers what they ask for.
//!
//! Options of surfaces this client does not serve (a client-provided
//! session filesystem) are left out. The options the CLI takes only once
//! a session is open (`skip_custom_instructions`, `coauthor_enabled`,
//! `manage_schedule_enabled`, and `custom_agents_local_only` again) go in
//! `session.options.update` after the open, and the client's mode
//! ([`ClientMode`](crate::ClientMode)) fills in what a session leaves unset
//! (the core's rules).

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;

use serde_json::value::RawValue;
use serde_json::Value;

use super::config_parts::{
    CanvasProviderIdentity, CustomAgentConfig, DefaultAgentConfig, ExtensionInfo, InfiniteSessionConfig,
    LargeToolOutputConfig, McpServerConfig, ProviderConfig, ReasoningEffort, SystemMessage, REDACTED,
};
use super::replies::raw_json;
use crate::answering::{
    run, Canvas, Command, ElicitationHandler, ExitPlanModeHandler, McpOAuthHandler, PermissionHandler, RequestHandler,
    SessionHandlers, SessionHooks, Tool, UserInputHandler,
};
use crate::delivery::Answerer;
use crate::error::{Error, Result};

// ---------------------------------------------------------------------------
// The session config.

/// Options of `session.create` and `session.resume`. Every option left
/// unset is left out of the request, so the CLI's own default applies,
/// except where a default is named.
#[derive(Clone)]
pub struct SessionConfig {
    /// The session id to use (create). `None`: a fresh UUID v4 chosen by
    /// the client, so that the session is known before the CLI answers.
    pub session_id: Option<String>,
    /// Send no id and let the CLI name the session (create). Frames for
    /// unknown sessions are then held until the answer names it.
    pub server_assigned_id: bool,
    /// A name for this application (shown by `session.list`, sent in the
    /// User-Agent).
    pub client_name: Option<String>,
    /// The model, such as `claude-sonnet-4.5`. Pass it: without it the CLI
    /// picks its own default.
    pub model: Option<String>,
    /// The reasoning effort, for models that support it.
    pub reasoning_effort: Option<ReasoningEffort>,
    /// `none` suppresses reasoning summaries, for models that have them.
    pub reasoning_summary: Option<String>,
    /// `default` or `long_context`, for models that have tiers.
    pub context_tier: Option<String>,
    /// Overrides of the model's capabilities, as the CLI's schema describes them.
    pub model_capabilities: Option<Value>,
    /// Experimental features of the CLI (`isExperimentalMode` on the wire).
    pub enable_experimental_mode: Option<bool>,
    /// The directory tools run in.
    pub working_directory: Option<PathBuf>,
    /// More directories the agent may use.
    pub additional_directories: Vec<PathBuf>,
    /// The CLI's configuration and state directory (`configDir` on the wire).
    pub config_directory: Option<PathBuf>,
    /// Let the CLI discover configuration (MCP servers, agents, ...) by itself.
    pub enable_config_discovery: Option<bool>,
    /// Deliver `assistant.message_delta` events as the reply streams.
    /// Default `false`.
    pub streaming: bool,
    /// Deliver the streaming deltas of sub-agents too. Default `true`, as
    /// the official SDKs send.
    pub include_sub_agent_streaming_events: bool,
    /// How the system prompt is made.
    pub system_message: Option<SystemMessage>,
    /// The only tools offered to the model (`builtin:*`, `mcp:<name>`,
    /// `custom:*` or bare names); `None`: all.
    pub available_tools: Option<Vec<String>>,
    /// Tools never offered, even if available.
    pub excluded_tools: Vec<String>,
    /// The CLI's tool-search settings, as its schema describes them.
    pub tool_search: Option<Value>,
    /// Built-in agents to hide.
    pub excluded_builtin_agents: Vec<String>,
    /// A model provider of the user's own (BYOK).
    pub provider: Option<ProviderConfig>,
    /// Options of the built-in Copilot API, as the CLI's schema describes them.
    pub capi: Option<Value>,
    /// Named BYOK providers (experimental), as the CLI's schema describes them.
    pub providers: Vec<Value>,
    /// BYOK models of the named providers (experimental).
    pub models: Vec<Value>,
    /// MCP servers, by name.
    pub mcp_servers: BTreeMap<String, McpServerConfig>,
    /// `in-memory` or `persistent` storage of MCP OAuth tokens.
    pub mcp_oauth_token_storage: Option<String>,
    /// MCP servers not to start.
    pub disabled_mcp_servers: Vec<String>,
    /// MCP Apps UI passthrough (`requestMcpApps` on the wire). Default `false`.
    pub enable_mcp_apps: bool,
    /// Settings of the built-in GitHub MCP server.
    pub github_mcp_tool_config: Option<Value>,
    /// Agents of the session's own.
    pub custom_agents: Vec<CustomAgentConfig>,
    /// Run custom agents locally only.
    pub custom_agents_local_only: Option<bool>,
    /// Settings of the built-in agent.
    pub default_agent: Option<DefaultAgentConfig>,
    /// The custom agent the session starts as.
    pub agent: Option<String>,
    /// Directories to load skills from.
    pub skill_directories: Vec<PathBuf>,
    /// Skills not to load.
    pub disabled_skills: Vec<String>,
    /// Open Plugins directories to load.
    pub plugin_directories: Vec<PathBuf>,
    /// More directories of instruction files.
    pub instruction_directories: Vec<PathBuf>,
    /// Persistent workspaces and automatic compaction.
    pub infinite_sessions: Option<InfiniteSessionConfig>,
    /// Memory settings, as the CLI's schema describes them.
    pub memory: Option<Value>,
    /// Large tool outputs written to files.
    pub large_output: Option<LargeToolOutputConfig>,
    /// Limits of the session's accounting window (experimental).
    pub session_limits: Option<Value>,
    /// The CLI's session telemetry.
    pub enable_session_telemetry: Option<bool>,
    /// Native model citations (experimental).
    pub enable_citations: Option<bool>,
    /// Track file changes for rewind and diffs.
    pub enable_file_change_tracking: Option<bool>,
    /// A GitHub token for this session's identity; a secret, never logged.
    pub github_token: Option<String>,
    /// Fetch enterprise managed settings with `github_token`.
    pub enable_managed_settings: Option<bool>,
    /// Enterprise managed settings given by the host.
    pub managed_settings: Option<Value>,
    /// Skip embedding-based retrieval.
    pub skip_embedding_retrieval: Option<bool>,
    /// `in-memory` or `persistent` embedding cache.
    pub embedding_cache_storage: Option<String>,
    /// Organization instructions for the system prompt.
    pub organization_custom_instructions: Option<String>,
    /// Discover instruction files as files are viewed.
    pub enable_on_demand_instruction_discovery: Option<bool>,
    /// Load hooks from `.github/hooks/`.
    pub enable_file_hooks: Option<bool>,
    /// Git operations on the host filesystem.
    pub enable_host_git_operations: Option<bool>,
    /// The cross-session store.
    pub enable_session_store: Option<bool>,
    /// Skills at all.
    pub enable_skills: Option<bool>,
    /// `off`, `export` or `on`.
    pub remote_session: Option<String>,
    /// Skip custom instructions (`AGENTS.md`, `.github/copilot-instructions.md`,
    /// ...); sent once the session is open, in `session.options.update`,
    /// as the next two. Empty mode: `true` unless set.
    pub skip_custom_instructions: Option<bool>,
    /// A `Co-authored-by` trailer in the agent's commits. Empty mode:
    /// `false` unless set.
    pub coauthor_enabled: Option<bool>,
    /// The `manage_schedule` tool. Empty mode: `false` unless set.
    pub manage_schedule_enabled: Option<bool>,
    /// Canvases this session declares and serves (experimental): each
    /// declared on the open, and its handlers answer the CLI's requests
    /// for it.
    pub canvases: Vec<Canvas>,
    /// Offer the agent the canvas tools (`open_canvas`, ...) on this
    /// connection (experimental): the client renders canvases.
    pub request_canvas_renderer: Option<bool>,
    /// Wire extension management tools onto the session for this
    /// connection (experimental).
    pub request_extensions: Option<bool>,
    /// A `copilot-sdk/` folder given to extension processes in place of
    /// the CLI's own (experimental).
    pub extension_sdk_path: Option<PathBuf>,
    /// A stable extension identity for this connection's canvases
    /// (experimental), sent as the official SDKs send it (which say the
    /// CLI names their provider `source:name`; the CLI 1.0.102 still lists
    /// a session's canvases under the connection's id with only this set:
    /// [`canvas_provider`](Self::canvas_provider) names them).
    pub extension_info: Option<ExtensionInfo>,
    /// A stable provider identity for this connection's canvases
    /// (experimental), used as their provider id as given.
    pub canvas_provider: Option<CanvasProviderIdentity>,
    /// A cloud session in place of a local one (create), as the CLI's
    /// schema describes it.
    pub cloud: Option<Value>,
    /// Resume without a `session.resume` event (`disableResume` on the
    /// wire). Default `false`.
    pub suppress_resume_event: bool,
    /// On resume, continue the tool calls and prompts pending when the
    /// session stopped: the client asks the CLI which are pending (the CLI
    /// does not send their events again) and answers each once, with this
    /// config's handlers. Default `false`: the CLI lists none, and marks
    /// them interrupted at the next send.
    pub continue_pending_work: bool,
    /// On resume, the canvases open in this client (their instances as the
    /// CLI lists them), handed back as the official SDKs do; the CLI
    /// 1.0.102's schema does not name it.
    pub open_canvases: Vec<Value>,
    /// Experiment assignments of the integrator's own (the CLI's feature
    /// flags), as the CLI's schema describes them.
    pub exp_assignments: Option<Value>,
    /// What the session answers the agent's requests with.
    pub handlers: SessionHandlers,
}

impl Default for SessionConfig {
    fn default() -> Self {
        SessionConfig {
            session_id: None,
            server_assigned_id: false,
            client_name: None,
            model: None,
            reasoning_effort: None,
            reasoning_summary: None,
            context_tier: None,
            model_capabilities: None,
            enable_experimental_mode: None,
            working_directory: None,
            additional_directories: Vec::new(),
            config_directory: None,
            enable_config_discovery: None,
            streaming: false,
            include_sub_agent_streaming_events: true,
            system_message: None,
            available_tools: None,
            excluded_tools: Vec::new(),
            tool_search: None,
            excluded_builtin_agents: Vec::new(),
            provider: None,
            capi: None,
            providers: Vec::new(),
            models: Vec::new(),
            mcp_servers: BTreeMap::new(),
            mcp_oauth_token_storage: None,
            disabled_mcp_servers: Vec::new(),
            enable_mcp_apps: false,
            github_mcp_tool_config: None,
            custom_agents: Vec::new(),
            custom_agents_local_only: None,
            default_agent: None,
            agent: None,
            skill_directories: Vec::new(),
            disabled_skills: Vec::new(),
            plugin_directories: Vec::new(),
            instruction_directories: Vec::new(),
            infinite_sessions: None,
            memory: None,
            large_output: None,
            session_limits: None,
            enable_session_telemetry: None,
            enable_citations: None,
            enable_file_change_tracking: None,
            github_token: None,
            enable_managed_settings: None,
            managed_settings: None,
            skip_embedding_retrieval: None,
            embedding_cache_storage: None,
            organization_custom_instructions: None,
            enable_on_demand_instruction_discovery: None,
            enable_file_hooks: None,
            enable_host_git_operations: None,
            enable_session_store: None,
            enable_skills: None,
            remote_session: None,
            skip_custom_instructions: None,
            coauthor_enabled: None,
            manage_schedule_enabled: None,
            canvases: Vec::new(),
            request_canvas_renderer: None,
            request_extensions: None,
            extension_sdk_path: None,
            extension_info: None,
            canvas_provider: None,
            cloud: None,
            suppress_resume_event: false,
            continue_pending_work: false,
            open_canvases: Vec::new(),
            exp_assignments: None,
            handlers: SessionHandlers::default(),
        }
    }
}

impl SessionConfig {
    /// A config for `model`.
    pub fn with_model(model: impl Into<String>) -> Self {
        SessionConfig { model: Some(model.into()), ..Self::default() }
    }

    /// Answers permission prompts with `handler` (and asks the CLI for
    /// prompts: without a handler it denies every tool that needs one).
    pub fn on_permission(mut self, handler: impl PermissionHandler + 'static) -> Self {
        self.handlers.permission = Some(Arc::new(handler));
        self
    }

    /// Answers permission prompts with a shared handler such as
    /// [`approve_all`](crate::approve_all).
    pub fn on_permission_shared(mut self, handler: Arc<dyn PermissionHandler>) -> Self {
        self.handlers.permission = Some(handler);
        self
    }

    /// Offers `tool` to the model; this client runs it.
    pub fn tool(mut self, tool: Tool) -> Self {
        self.handlers.tools.push(tool);
        self
    }

    /// Answers the agent's questions to the user (adds the `ask_user` tool).
    pub fn on_user_input(mut self, handler: impl UserInputHandler + 'static) -> Self {
        self.handlers.user_input = Some(Arc::new(handler));
        self
    }

    /// Answers elicitations (forms and URLs MCP servers ask for).
    pub fn on_elicitation(mut self, handler: impl ElicitationHandler + 'static) -> Self {
        self.handlers.elicitation = Some(Arc::new(handler));
        self
    }

    /// Provides OAuth tokens to MCP servers that need them.
    pub fn on_mcp_oauth(mut self, handler: impl McpOAuthHandler + 'static) -> Self {
        self.handlers.mcp_oauth = Some(Arc::new(handler));
        self
    }

    /// Answers requests to leave plan mode.
    pub fn on_exit_plan_mode(mut self, handler: impl ExitPlanModeHandler + 'static) -> Self {
        self.handlers.exit_plan_mode = Some(Arc::new(handler));
        self
    }

    /// Declares a slash command this client runs.
    pub fn command(mut self, command: Command) -> Self {
        self.handlers.commands.push(command);
        self
    }

    /// Runs `hooks` at points of the agent loop (and asks the CLI to call
    /// them, if any is set).
    pub fn hooks(mut self, hooks: SessionHooks) -> Self {
        self.handlers.hooks = hooks;
        self
    }

    /// Answers the request or awaited event `name` of this session with
    /// `handler`: for the kinds without a typed handler (see
    /// [`RequestHandlers`](crate::RequestHandlers) and [`generic_request_names`](crate::generic_request_names)).
    /// Creating the session fails for a name no generic handler can answer.
    pub fn on_request(mut self, name: impl Into<String>, handler: impl RequestHandler + 'static) -> Self {
        self.handlers.requests.insert(name, Arc::new(handler));
        self
    }

    /// Answers the server request `M` of this session with typed params and
    /// result (feature `rpc-types`), such as
    /// `on_rpc::<rpc::methods::SessionFsReadFile>(|p| ...)`.
    #[cfg(feature = "rpc-types")]
    pub fn on_rpc<M: crate::rpc::RpcMethod + 'static>(
        self,
        handler: impl Fn(M::Params) -> std::result::Result<M::Result, String> + Send + Sync + 'static,
    ) -> Self
    where
        M::Params: serde::de::DeserializeOwned,
        M::Result: serde::Serialize,
    {
        self.on_request(M::NAME, crate::answering::typed::<M>(handler))
    }

    /// Declares and serves `canvas` (experimental).
    pub fn canvas(mut self, canvas: Canvas) -> Self {
        self.canvases.push(canvas);
        self
    }

    /// Adds MCP server `name`.
    pub fn mcp_server(mut self, name: impl Into<String>, server: McpServerConfig) -> Self {
        self.mcp_servers.insert(name.into(), server);
        self
    }

    /// Adds a custom agent.
    pub fn custom_agent(mut self, agent: CustomAgentConfig) -> Self {
        self.custom_agents.push(agent);
        self
    }

    /// Refuses configurations that cannot work.
    pub(crate) fn check(&self, resuming: bool) -> Result<()> {
        let misplaced = |names: &[&str], set: &dyn Fn(&str) -> bool, method: &str| {
            names.iter().find(|n| set(n)).map(|n| Error::Config(format!("{n} is not an option of {method}")))
        };
        let create_only_set = |n: &str| match n {
            "session_id" => self.session_id.is_some(),
            "server_assigned_id" => self.server_assigned_id,
            "cloud" => self.cloud.is_some(),
            _ => false,
        };
        let resume_only_set = |n: &str| match n {
            "suppress_resume_event" => self.suppress_resume_event,
            "continue_pending_work" => self.continue_pending_work,
            "open_canvases" => !self.open_canvases.is_empty(),
            _ => false,
        };
        let wrong = if resuming {
            misplaced(Self::CREATE_ONLY, &create_only_set, "session.resume")
        } else {
            misplaced(Self::RESUME_ONLY, &resume_only_set, "session.create")
        };
        if let Some(e) = wrong {
            return Err(e);
        }
        self.handlers.requests.check()?;
        let mut names = std::collections::HashSet::new();
        if let Some(t) = self.handlers.tools.iter().find(|t| !names.insert(t.name.as_str())) {
            return Err(Error::Config(format!("two tools are named {}", t.name)));
        }
        let mut ids = std::collections::HashSet::new();
        if let Some(c) = self.canvases.iter().find(|c| !ids.insert(c.id.as_str())) {
            return Err(Error::Config(format!("two canvases have the id {}", c.id)));
        }
        Ok(())
    }

    /// What answers the agent for a session of this config: the handlers,
    /// the section transforms and the provider's token callback.
    pub(crate) fn answerers(&self) -> SessionHandlers {
        let mut h = self.handlers.clone();
        h.transforms = self.system_message.as_ref().map(SystemMessage::transforms).unwrap_or_default();
        h.provider_token = self.provider.as_ref().and_then(|p| p.bearer_token_provider.clone());
        h.canvases = self.canvases.clone();
        h
    }

    /// The requests to send, in order, after an open of a session of this
    /// config answers and before the session is handed over: the core's
    /// follow-ups ([`write_follow_ups`](copilot_core::write_follow_ups))
    /// for the handlers it has, their params as the core wrote them.
    pub(crate) fn follow_ups(&self, session_id: &str) -> Result<Vec<(&'static str, Box<RawValue>)>> {
        let handlers = self.answerers();
        let mut written = Vec::new();
        let mut send = |method: &'static str, params: &[u8]| written.push((method, params.to_vec()));
        copilot_core::write_follow_ups(session_id, |kind| handlers.has(kind), &mut send)
            .map_err(|e| Error::Protocol(format!("session id {session_id:?}: {}", e.message())))?;
        written.into_iter().map(|(method, params)| Ok((method, raw_json(params)?))).collect()
    }

    /// What the delivery layer hands a session's waits to: its
    /// [`answerers`](Self::answerers), run by the answering layer.
    pub(crate) fn answerer(&self) -> Answerer {
        let handlers = self.answerers();
        Arc::new(move |job, session_id| run(job, &handlers, session_id))
    }
}

impl fmt::Debug for SessionConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let set = |v: &Option<Value>| v.as_ref().map(|_| "<set>");
        f.debug_struct("SessionConfig")
            .field("session_id", &self.session_id)
            .field("server_assigned_id", &self.server_assigned_id)
            .field("client_name", &self.client_name)
            .field("model", &self.model)
            .field("reasoning_effort", &self.reasoning_effort)
            .field("working_directory", &self.working_directory)
            .field("config_directory", &self.config_directory)
            .field("streaming", &self.streaming)
            .field("include_sub_agent_streaming_events", &self.include_sub_agent_streaming_events)
            .field("system_message", &self.system_message)
            .field("available_tools", &self.available_tools)
            .field("excluded_tools", &self.excluded_tools)
            .field("provider", &self.provider)
            .field("providers", &self.providers.len())
            .field("mcp_servers", &self.mcp_servers)
            .field("custom_agents", &self.custom_agents)
            .field("agent", &self.agent)
            .field("skill_directories", &self.skill_directories)
            .field("disabled_skills", &self.disabled_skills)
            .field("infinite_sessions", &self.infinite_sessions)
            .field("github_token", &self.github_token.as_ref().map(|_| REDACTED))
            .field("managed_settings", &set(&self.managed_settings))
            .field("canvases", &self.canvases)
            .field("handlers", &self.handlers)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use copilot_core::{Announce, OPEN_ANNOUNCEMENTS};

    /// What the typed config sends itself (its `bool` fields) is what the
    /// engine would send for an option left out: both languages' sessions
    /// open alike.
    #[test]
    fn the_typed_defaults_are_the_engines() {
        let params = SessionConfig::default().to_params(None, false, copilot_core::ClientMode::CopilotCli).unwrap();
        let mut compared = 0;
        for (key, announce) in OPEN_ANNOUNCEMENTS {
            match announce {
                Announce::Default(v) => {
                    let engine: Value = serde_json::from_str(v).expect("JSON");
                    assert_eq!(params[*key], engine, "{key}");
                    compared += 1;
                }
                Announce::Handler(_) => assert_eq!(params[*key], false, "{key}: no handler is set"),
                Announce::HandlerIfSet(_) => assert!(params.get(*key).is_none(), "{key}"),
            }
        }
        assert!(compared >= 2);
        let with_permission = SessionConfig::default()
            .on_permission(|_: &crate::PermissionRequest| crate::PermissionDecision::ApproveOnce);
        assert_eq!(
            with_permission.to_params(Some("s"), true, copilot_core::ClientMode::CopilotCli).unwrap()
                ["requestPermission"],
            true
        );
    }
}
