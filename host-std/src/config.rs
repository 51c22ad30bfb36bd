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
//! Options of surfaces this client does not serve (canvases, extensions,
//! a client-provided session filesystem) are left out, as are options the
//! SDKs apply through other calls after the create.

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;

use serde_json::{json, Map, Value};

use crate::error::{Error, Result};
use crate::handlers::{
    Command, ElicitationHandler, ExitPlanModeHandler, McpOAuthHandler, PermissionHandler, ProviderTokenHandler,
    SectionTransform, SessionHandlers, Tool, UserInputHandler,
};
use crate::hooks::SessionHooks;
use crate::requests::RequestHandler;

const REDACTED: &str = "<redacted>";

// ---------------------------------------------------------------------------
// System message.

/// How the session's system prompt is made.
#[derive(Clone)]
pub enum SystemMessage {
    /// The CLI's prompt, with this text appended.
    Append(String),
    /// This text is the whole system prompt.
    Replace(String),
    /// The CLI's prompt with sections changed (by section id: `identity`,
    /// `tone`, `safety`, `environment_context`, ...), and `content`
    /// appended.
    Customize {
        /// What happens to each section.
        sections: BTreeMap<String, SectionOverride>,
        /// Text appended after the sections.
        content: Option<String>,
    },
}

impl SystemMessage {
    /// A customized prompt with no change yet; add some with
    /// [`section`](Self::section) and [`transform`](Self::transform).
    pub fn customize() -> Self {
        SystemMessage::Customize { sections: BTreeMap::new(), content: None }
    }

    /// Sets what happens to section `id` (customize only; a no-op on the
    /// other modes).
    pub fn section(mut self, id: impl Into<String>, action: SectionAction, content: Option<String>) -> Self {
        if let SystemMessage::Customize { sections, .. } = &mut self {
            sections.insert(id.into(), SectionOverride { action, content });
        }
        self
    }

    /// Rewrites section `id` with `transform`, called with the section's
    /// text when the CLI builds the prompt (once, at the first message).
    /// A transform that panics keeps the original text.
    pub fn transform(self, id: impl Into<String>, transform: impl SectionTransform + 'static) -> Self {
        self.section(id, SectionAction::Transform(Arc::new(transform)), None)
    }

    fn to_json(&self) -> Value {
        match self {
            SystemMessage::Append(c) => json!({ "mode": "append", "content": c }),
            SystemMessage::Replace(c) => json!({ "mode": "replace", "content": c }),
            SystemMessage::Customize { sections, content } => {
                let sections: Map<String, Value> = sections
                    .iter()
                    .map(|(id, s)| {
                        let mut v = json!({ "action": s.action.wire_name() });
                        if let (Some(c), false) = (&s.content, matches!(s.action, SectionAction::Transform(_))) {
                            v["content"] = c.clone().into();
                        }
                        (id.clone(), v)
                    })
                    .collect();
                let mut v = json!({ "mode": "customize", "sections": sections });
                if let Some(c) = content {
                    v["content"] = c.clone().into();
                }
                v
            }
        }
    }

    fn transforms(&self) -> BTreeMap<String, Arc<dyn SectionTransform>> {
        match self {
            SystemMessage::Customize { sections, .. } => sections
                .iter()
                .filter_map(|(id, s)| match &s.action {
                    SectionAction::Transform(t) => Some((id.clone(), Arc::clone(t))),
                    _ => None,
                })
                .collect(),
            _ => BTreeMap::new(),
        }
    }
}

impl fmt::Debug for SystemMessage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SystemMessage::Append(c) => f.debug_tuple("Append").field(c).finish(),
            SystemMessage::Replace(c) => f.debug_tuple("Replace").field(c).finish(),
            SystemMessage::Customize { sections, content } => {
                f.debug_struct("Customize").field("sections", sections).field("content", content).finish()
            }
        }
    }
}

/// What happens to one section of the system prompt.
#[derive(Debug, Clone)]
pub struct SectionOverride {
    /// The action.
    pub action: SectionAction,
    /// The text for `Replace`, `Append` and `Prepend`.
    pub content: Option<String>,
}

/// An action on a section of the system prompt.
#[derive(Clone)]
pub enum SectionAction {
    /// Its text becomes the override's content.
    Replace,
    /// It is left out.
    Remove,
    /// The content goes after it.
    Append,
    /// The content goes before it.
    Prepend,
    /// Kept, even when its group is removed.
    Preserve,
    /// Rewritten by this client (the CLI's `systemMessage.transform` request).
    Transform(Arc<dyn SectionTransform>),
}

impl SectionAction {
    fn wire_name(&self) -> &'static str {
        match self {
            SectionAction::Replace => "replace",
            SectionAction::Remove => "remove",
            SectionAction::Append => "append",
            SectionAction::Prepend => "prepend",
            SectionAction::Preserve => "preserve",
            SectionAction::Transform(_) => "transform",
        }
    }
}

impl fmt::Debug for SectionAction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.wire_name())
    }
}

// ---------------------------------------------------------------------------
// Model and provider.

/// How hard a model that supports it reasons.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReasoningEffort {
    /// `low`.
    Low,
    /// `medium`.
    Medium,
    /// `high`.
    High,
    /// `xhigh`.
    XHigh,
    /// `max`.
    Max,
}

impl ReasoningEffort {
    fn wire_name(self) -> &'static str {
        match self {
            ReasoningEffort::Low => "low",
            ReasoningEffort::Medium => "medium",
            ReasoningEffort::High => "high",
            ReasoningEffort::XHigh => "xhigh",
            ReasoningEffort::Max => "max",
        }
    }
}

/// The API of a BYOK provider.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ProviderType {
    /// An OpenAI-compatible API (the CLI's default).
    #[default]
    OpenAi,
    /// Azure OpenAI.
    Azure,
    /// Anthropic.
    Anthropic,
}

/// A model provider of the user's own (BYOK) in place of the Copilot API.
/// Its `Debug` output hides the API key, the bearer token and header values.
#[derive(Clone, Default)]
pub struct ProviderConfig {
    /// The provider's API (`type` on the wire).
    pub provider_type: ProviderType,
    /// `completions` (the default) or `responses` (OpenAI and Azure).
    pub wire_api: Option<String>,
    /// `http` (the default) or `websockets`, for the responses API.
    pub transport: Option<String>,
    /// The API endpoint.
    pub base_url: String,
    /// The API key; a secret, never logged.
    pub api_key: Option<String>,
    /// A fixed bearer token (wins over the API key); a secret, never logged.
    pub bearer_token: Option<String>,
    /// Gives a bearer token for each request the CLI makes to the provider
    /// (the CLI's `providerToken.getToken` request); wins over both.
    pub bearer_token_provider: Option<Arc<dyn ProviderTokenHandler>>,
    /// The Azure API version.
    pub azure_api_version: Option<String>,
    /// HTTP headers for every request to the provider.
    pub headers: BTreeMap<String, String>,
    /// The well-known model name the CLI configures itself for.
    pub model_id: Option<String>,
    /// The model name sent to the provider, if not `model_id`.
    pub wire_model: Option<String>,
    /// Prompt tokens at most (the CLI compacts before).
    pub max_prompt_tokens: Option<u64>,
    /// Output tokens at most.
    pub max_output_tokens: Option<u64>,
}

impl ProviderConfig {
    /// A provider of `provider_type` at `base_url`.
    pub fn new(provider_type: ProviderType, base_url: impl Into<String>) -> Self {
        ProviderConfig { provider_type, base_url: base_url.into(), ..Self::default() }
    }

    /// The same provider with `api_key`.
    pub fn api_key(mut self, api_key: impl Into<String>) -> Self {
        self.api_key = Some(api_key.into());
        self
    }

    /// The same provider, asking `provider` for a bearer token per request.
    pub fn bearer_token_provider(mut self, provider: impl ProviderTokenHandler + 'static) -> Self {
        self.bearer_token_provider = Some(Arc::new(provider));
        self
    }

    fn to_json(&self) -> Value {
        let mut v = json!({
            "type": match self.provider_type {
                ProviderType::OpenAi => "openai",
                ProviderType::Azure => "azure",
                ProviderType::Anthropic => "anthropic",
            },
            "baseUrl": self.base_url,
        });
        put(&mut v, "wireApi", &self.wire_api);
        put(&mut v, "transport", &self.transport);
        put(&mut v, "apiKey", &self.api_key);
        put(&mut v, "bearerToken", &self.bearer_token);
        if self.bearer_token_provider.is_some() {
            v["hasBearerTokenProvider"] = true.into();
        }
        if let Some(a) = &self.azure_api_version {
            v["azure"] = json!({ "apiVersion": a });
        }
        if !self.headers.is_empty() {
            v["headers"] = json!(self.headers);
        }
        put(&mut v, "modelId", &self.model_id);
        put(&mut v, "wireModel", &self.wire_model);
        put(&mut v, "maxPromptTokens", &self.max_prompt_tokens);
        put(&mut v, "maxOutputTokens", &self.max_output_tokens);
        v
    }
}

impl fmt::Debug for ProviderConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ProviderConfig")
            .field("provider_type", &self.provider_type)
            .field("wire_api", &self.wire_api)
            .field("transport", &self.transport)
            .field("base_url", &self.base_url)
            .field("api_key", &self.api_key.as_ref().map(|_| REDACTED))
            .field("bearer_token", &self.bearer_token.as_ref().map(|_| REDACTED))
            .field("bearer_token_provider", &self.bearer_token_provider.is_some())
            .field("azure_api_version", &self.azure_api_version)
            .field("headers", &redacted_values(&self.headers))
            .field("model_id", &self.model_id)
            .field("wire_model", &self.wire_model)
            .finish_non_exhaustive()
    }
}

fn redacted_values(map: &BTreeMap<String, String>) -> BTreeMap<&str, &str> {
    map.keys().map(|k| (k.as_str(), REDACTED)).collect()
}

fn put<T: serde::Serialize>(v: &mut Value, key: &str, value: &Option<T>) {
    if let Some(x) = value {
        v[key] = json!(x);
    }
}

// ---------------------------------------------------------------------------
// MCP servers, agents, infinite sessions.

/// An MCP server of the session. `Debug` hides environment and header values.
#[derive(Clone)]
pub enum McpServerConfig {
    /// A local server the CLI starts and talks to over stdio.
    Local {
        /// The program.
        command: String,
        /// Its arguments.
        args: Vec<String>,
        /// Its environment, as values (not variable names).
        env: BTreeMap<String, String>,
        /// Its working directory (`cwd` on the wire).
        working_directory: Option<PathBuf>,
        /// The tools to take from it; `None` takes all.
        tools: Option<Vec<String>>,
        /// A timeout for its tool calls (ms).
        timeout: Option<u64>,
    },
    /// A remote server over streamable HTTP (or SSE).
    Http {
        /// Its URL.
        url: String,
        /// `true` for the older SSE transport.
        sse: bool,
        /// HTTP headers for every request.
        headers: BTreeMap<String, String>,
        /// The tools to take from it; `None` takes all.
        tools: Option<Vec<String>>,
        /// A timeout for its tool calls (ms).
        timeout: Option<u64>,
    },
}

impl McpServerConfig {
    /// A local server running `command args..`.
    pub fn local(command: impl Into<String>, args: impl IntoIterator<Item = impl Into<String>>) -> Self {
        McpServerConfig::Local {
            command: command.into(),
            args: args.into_iter().map(Into::into).collect(),
            env: BTreeMap::new(),
            working_directory: None,
            tools: None,
            timeout: None,
        }
    }

    /// A remote server at `url`.
    pub fn http(url: impl Into<String>) -> Self {
        McpServerConfig::Http { url: url.into(), sse: false, headers: BTreeMap::new(), tools: None, timeout: None }
    }

    fn to_json(&self) -> Value {
        match self {
            McpServerConfig::Local { command, args, env, working_directory, tools, timeout } => {
                let mut v = json!({ "type": "local", "command": command, "args": args });
                if !env.is_empty() {
                    v["env"] = json!(env);
                }
                put(&mut v, "cwd", &working_directory.as_ref().map(|d| d.to_string_lossy()));
                put(&mut v, "tools", tools);
                put(&mut v, "timeout", timeout);
                v
            }
            McpServerConfig::Http { url, sse, headers, tools, timeout } => {
                let mut v = json!({ "type": if *sse { "sse" } else { "http" }, "url": url });
                if !headers.is_empty() {
                    v["headers"] = json!(headers);
                }
                put(&mut v, "tools", tools);
                put(&mut v, "timeout", timeout);
                v
            }
        }
    }
}

impl fmt::Debug for McpServerConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            McpServerConfig::Local { command, args, env, working_directory, tools, timeout } => f
                .debug_struct("Local")
                .field("command", command)
                .field("args", args)
                .field("env", &redacted_values(env))
                .field("working_directory", working_directory)
                .field("tools", tools)
                .field("timeout", timeout)
                .finish(),
            McpServerConfig::Http { url, sse, headers, tools, timeout } => f
                .debug_struct("Http")
                .field("url", url)
                .field("sse", sse)
                .field("headers", &redacted_values(headers))
                .field("tools", tools)
                .field("timeout", timeout)
                .finish(),
        }
    }
}

fn mcp_servers_json(servers: &BTreeMap<String, McpServerConfig>) -> Value {
    Value::Object(servers.iter().map(|(name, s)| (name.clone(), s.to_json())).collect())
}

/// An agent of the session's own, which the model can hand work to (or
/// the session can start as, with [`SessionConfig::agent`]).
#[derive(Debug, Clone, Default)]
pub struct CustomAgentConfig {
    /// Its unique name.
    pub name: String,
    /// A name to show.
    pub display_name: Option<String>,
    /// What it does (the model reads it to choose).
    pub description: Option<String>,
    /// The tools it may use; `None`: all.
    pub tools: Option<Vec<String>>,
    /// Its prompt.
    pub prompt: String,
    /// MCP servers of its own.
    pub mcp_servers: BTreeMap<String, McpServerConfig>,
    /// Whether the model may pick it by itself (the CLI's default: yes).
    pub infer: Option<bool>,
    /// Skills loaded into its context.
    pub skills: Vec<String>,
    /// Its model, if not the session's.
    pub model: Option<String>,
    /// Its reasoning effort.
    pub reasoning_effort: Option<ReasoningEffort>,
}

impl CustomAgentConfig {
    /// An agent `name` with `prompt`.
    pub fn new(name: impl Into<String>, prompt: impl Into<String>) -> Self {
        CustomAgentConfig { name: name.into(), prompt: prompt.into(), ..Self::default() }
    }

    fn to_json(&self) -> Value {
        let mut v = json!({ "name": self.name, "prompt": self.prompt });
        put(&mut v, "displayName", &self.display_name);
        put(&mut v, "description", &self.description);
        put(&mut v, "tools", &self.tools);
        if !self.mcp_servers.is_empty() {
            v["mcpServers"] = mcp_servers_json(&self.mcp_servers);
        }
        put(&mut v, "infer", &self.infer);
        if !self.skills.is_empty() {
            v["skills"] = json!(self.skills);
        }
        put(&mut v, "model", &self.model);
        put(&mut v, "reasoningEffort", &self.reasoning_effort.map(ReasoningEffort::wire_name));
        v
    }
}

/// The built-in agent's settings.
#[derive(Debug, Clone, Default)]
pub struct DefaultAgentConfig {
    /// Tools hidden from it (still there for custom agents).
    pub excluded_tools: Vec<String>,
}

/// Persistent workspaces and automatic compaction (on by default in the CLI).
#[derive(Debug, Clone, Default)]
pub struct InfiniteSessionConfig {
    /// On or off; `None`: the CLI's default (on).
    pub enabled: Option<bool>,
    /// Context use (0 to 1) at which compaction starts in the background.
    pub background_compaction_threshold: Option<f64>,
    /// Context use (0 to 1) at which the session waits for compaction.
    pub buffer_exhaustion_threshold: Option<f64>,
}

impl InfiniteSessionConfig {
    fn to_json(&self) -> Value {
        let mut v = json!({});
        put(&mut v, "enabled", &self.enabled);
        put(&mut v, "backgroundCompactionThreshold", &self.background_compaction_threshold);
        put(&mut v, "bufferExhaustionThreshold", &self.buffer_exhaustion_threshold);
        v
    }
}

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
    /// Large tool outputs written to files, as the CLI's schema describes it.
    pub large_output: Option<Value>,
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
    /// A cloud session in place of a local one (create), as the CLI's
    /// schema describes it.
    pub cloud: Option<Value>,
    /// Resume without a `session.resume` event (`disableResume` on the
    /// wire). Default `false`.
    pub suppress_resume_event: bool,
    /// On resume, continue the tool calls and prompts pending when the
    /// session stopped. Default `false`.
    pub continue_pending_work: bool,
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
            cloud: None,
            suppress_resume_event: false,
            continue_pending_work: false,
            handlers: SessionHandlers::default(),
        }
    }
}

/// Lists the fields of [`SessionConfig`] by destructuring it without `..`:
/// a field added to the struct and not here fails to compile.
macro_rules! option_names {
    ($($field:ident),* $(,)?) => {
        /// The name of every option (every field but `handlers`), as written
        /// here; the JavaScript package names each the same in camelCase.
        pub fn option_names() -> Vec<&'static str> {
            let SessionConfig { $($field: _,)* handlers: _ } = SessionConfig::default();
            vec![$(stringify!($field)),*]
        }
    };
}

impl SessionConfig {
    option_names!(
        session_id,
        server_assigned_id,
        client_name,
        model,
        reasoning_effort,
        reasoning_summary,
        context_tier,
        model_capabilities,
        enable_experimental_mode,
        working_directory,
        additional_directories,
        config_directory,
        enable_config_discovery,
        streaming,
        include_sub_agent_streaming_events,
        system_message,
        available_tools,
        excluded_tools,
        tool_search,
        excluded_builtin_agents,
        provider,
        capi,
        providers,
        models,
        mcp_servers,
        mcp_oauth_token_storage,
        disabled_mcp_servers,
        enable_mcp_apps,
        github_mcp_tool_config,
        custom_agents,
        custom_agents_local_only,
        default_agent,
        agent,
        skill_directories,
        disabled_skills,
        plugin_directories,
        instruction_directories,
        infinite_sessions,
        memory,
        large_output,
        session_limits,
        enable_session_telemetry,
        enable_citations,
        enable_file_change_tracking,
        github_token,
        enable_managed_settings,
        managed_settings,
        skip_embedding_retrieval,
        embedding_cache_storage,
        organization_custom_instructions,
        enable_on_demand_instruction_discovery,
        enable_file_hooks,
        enable_host_git_operations,
        enable_session_store,
        enable_skills,
        remote_session,
        cloud,
        suppress_resume_event,
        continue_pending_work,
    );

    /// Options only `session.create` takes.
    pub const CREATE_ONLY: &'static [&'static str] = &["session_id", "server_assigned_id", "cloud"];
    /// Options only `session.resume` takes.
    pub const RESUME_ONLY: &'static [&'static str] = &["suppress_resume_event", "continue_pending_work"];

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
        self.on_request(M::NAME, crate::requests::typed::<M>(handler))
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
        Ok(())
    }

    /// What answers the agent for a session of this config: the handlers,
    /// the section transforms and the provider's token callback.
    pub(crate) fn answerers(&self) -> SessionHandlers {
        let mut h = self.handlers.clone();
        h.transforms = self.system_message.as_ref().map(SystemMessage::transforms).unwrap_or_default();
        h.provider_token = self.provider.as_ref().and_then(|p| p.bearer_token_provider.clone());
        h
    }

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
        let params = SessionConfig::default().to_params(None, false).unwrap();
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
        assert_eq!(with_permission.to_params(Some("s"), true).unwrap()["requestPermission"], true);
    }
}
