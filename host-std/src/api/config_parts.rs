//! The parts of a [`SessionConfig`](crate::SessionConfig): the system
//! message, the model's provider, MCP servers, custom agents and infinite
//! sessions, each with its JSON on the wire.

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;

use serde_json::{json, Map, Value};

use crate::answering::{ProviderTokenHandler, SectionTransform};

pub(super) const REDACTED: &str = "<redacted>";

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

    pub(super) fn to_json(&self) -> Value {
        match self {
            SystemMessage::Append(c) => json!({ "mode": copilot_core::SYSTEM_MESSAGE_DEFAULT_MODE, "content": c }),
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

    pub(super) fn transforms(&self) -> BTreeMap<String, Arc<dyn SectionTransform>> {
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
    pub(super) fn wire_name(&self) -> &'static str {
        match self {
            SectionAction::Replace => "replace",
            SectionAction::Remove => "remove",
            SectionAction::Append => "append",
            SectionAction::Prepend => "prepend",
            SectionAction::Preserve => "preserve",
            SectionAction::Transform(_) => copilot_core::SECTION_TRANSFORM_ACTION,
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
    pub(super) fn wire_name(self) -> &'static str {
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

    pub(super) fn to_json(&self) -> Value {
        let mut v = json!({
            "type": match self.provider_type {
                ProviderType::OpenAi => copilot_core::PROVIDER_DEFAULT_TYPE,
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
            v[copilot_core::PROVIDER_TOKEN_CALLBACK_FLAG] = true.into();
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

pub(super) fn put<T: serde::Serialize>(v: &mut Value, key: &str, value: &Option<T>) {
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

    pub(super) fn to_json(&self) -> Value {
        match self {
            McpServerConfig::Local { command, args, env, working_directory, tools, timeout } => {
                let ty = copilot_core::mcp_server_type(|m| m == "command");
                let mut v = json!({ "type": ty, "command": command, "args": args });
                if !env.is_empty() {
                    v["env"] = json!(env);
                }
                let cwd = copilot_core::MCP_WORKING_DIRECTORY.1;
                put(&mut v, cwd, &working_directory.as_ref().map(|d| d.to_string_lossy()));
                put(&mut v, "tools", tools);
                put(&mut v, "timeout", timeout);
                v
            }
            McpServerConfig::Http { url, sse, headers, tools, timeout } => {
                let ty = if *sse { "sse" } else { copilot_core::mcp_server_type(|m| m == "url") };
                let mut v = json!({ "type": ty, "url": url });
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

pub(super) fn mcp_servers_json(servers: &BTreeMap<String, McpServerConfig>) -> Value {
    Value::Object(servers.iter().map(|(name, s)| (name.clone(), s.to_json())).collect())
}

/// An agent of the session's own, which the model can hand work to (or
/// the session can start as, with [`SessionConfig::agent`](crate::SessionConfig::agent)).
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

    pub(super) fn to_json(&self) -> Value {
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
    pub(super) fn to_json(&self) -> Value {
        let mut v = json!({});
        put(&mut v, "enabled", &self.enabled);
        put(&mut v, "backgroundCompactionThreshold", &self.background_compaction_threshold);
        put(&mut v, "bufferExhaustionThreshold", &self.buffer_exhaustion_threshold);
        v
    }
}

/// Large tool outputs written to a file, the model given a reference to it
/// in place of the whole output (on by default in the CLI).
#[derive(Debug, Clone, Default)]
pub struct LargeToolOutputConfig {
    /// On or off; `None`: the CLI's default (on).
    pub enabled: Option<bool>,
    /// The size in bytes over which an output goes to a file; `None`: the
    /// CLI's default (50 KB).
    pub max_size_bytes: Option<u64>,
    /// Where the files go (`outputDir` on the wire: the core's
    /// `LARGE_OUTPUT_RENAMES`); `None`: the system's temporary folder.
    pub output_directory: Option<PathBuf>,
}

impl LargeToolOutputConfig {
    pub(super) fn to_json(&self) -> Value {
        let wire = |name: &'static str| {
            copilot_core::LARGE_OUTPUT_RENAMES.iter().find(|(n, _)| *n == name).map_or(name, |(_, w)| w)
        };
        let mut v = json!({});
        put(&mut v, wire("enabled"), &self.enabled);
        put(&mut v, wire("maxSizeBytes"), &self.max_size_bytes);
        let dir = self.output_directory.as_ref().map(|d| d.to_string_lossy().into_owned());
        put(&mut v, wire("outputDirectory"), &dir);
        v
    }
}

// ---------------------------------------------------------------------------
// Canvas providers (experimental).

/// A stable extension identity for the canvases of a connection
/// (`{source, name}` on the wire; see
/// [`SessionConfig::extension_info`](crate::SessionConfig::extension_info)).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExtensionInfo {
    /// The namespace, such as `github-app`.
    pub source: String,
    /// The provider's name within it.
    pub name: String,
}

/// A stable identity of a host that supplies canvases: the CLI uses `id`
/// as their provider id as given (so they survive a reconnect or a CLI
/// restart); an id starting `connection:` is ignored by the CLI.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CanvasProviderIdentity {
    /// The provider id, such as `app:builtin:window-1`.
    pub id: String,
    /// A name to show for it.
    pub name: Option<String>,
}

impl CanvasProviderIdentity {
    pub(super) fn to_json(&self) -> Value {
        let mut v = json!({ "id": self.id });
        if let Some(name) = &self.name {
            v["name"] = name.clone().into();
        }
        v
    }
}
