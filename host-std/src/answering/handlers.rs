//! What a session answers the agent with: client tools, user input,
//! elicitation, MCP OAuth, exit-plan-mode, slash commands, system message
//! transforms and provider tokens (permission prompts are `permission.rs`),
//! and [`SessionHandlers`], the set of them a session has.
//!
//! The protocol engine decides which waits are obligations and which handler
//! kind answers each; the handlers are called on the connection's handler
//! pool (never on the reader thread, see `run.rs`). When the handler
//! panics, or when the data does not fit the handler's types, the engine's
//! refusal for that kind goes instead; past the handler deadline the engine
//! has already refused and a late answer is not sent. Without a handler,
//! the core's answer table decides ([`copilot_core::Unhandled`]): a wait
//! the CLI sends to every client of the session (a tool call, a permission
//! prompt, ...) is left to the client that has the handler, and nothing is
//! sent; a request to this client gets the refusal.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use copilot_core::HandlerKind;
use serde_json::{json, Value};

use super::canvas::Canvas;
use super::hooks::SessionHooks;
use super::outcome::{answer, Outcome};
use super::permission::PermissionHandler;
use super::requests::RequestHandlers;
use crate::events::{CommandExecuteData, ElicitationRequestedData, McpOauthRequiredData};

// ---------------------------------------------------------------------------
// Client tools.

/// A call of a client tool.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ToolInvocation {
    /// The session calling.
    pub session_id: String,
    /// The call's id.
    pub tool_call_id: String,
    /// The tool's name.
    pub tool_name: String,
    /// The arguments, already parsed (`null` if none).
    pub arguments: Value,
    /// The session's working directory, if given.
    pub working_directory: Option<String>,
    /// The W3C `traceparent` of the CLI's span for this call, when its
    /// telemetry is on: a handler's own spans can join the trace.
    pub traceparent: Option<String>,
    /// The W3C `tracestate` beside it.
    pub tracestate: Option<String>,
}

/// What a tool returns to the model.
#[derive(Debug, Clone, PartialEq)]
pub enum ToolResult {
    /// Success, with text for the model.
    Text(String),
    /// Failure, with text meant for the model (the CLI passes a failure's
    /// text on). Make it with [`ToolResult::failure`].
    Failure(String),
    /// The handler failed with this error: it is logged and sent to the CLI
    /// as the call's `error` (no result), as the official SDKs do; the CLI
    /// logs it and tells the model, in its own words, only that the tool
    /// failed. An `Err` of a handler (or a panic) becomes this.
    Error(String),
    /// A result object as the CLI's schema describes it
    /// (`{textResultForLlm, resultType, sessionLog, binaryResultsForLlm, ...}`);
    /// `resultType` is `success` unless given. A value that is not such an
    /// object (no string `textResultForLlm`) goes as its JSON text, a
    /// string as the text, `null` as empty text (as the official SDKs do).
    Structured(Value),
}

impl ToolResult {
    /// A failure whose `text` the model reads.
    pub fn failure(text: impl Into<String>) -> Self {
        ToolResult::Failure(text.into())
    }

    /// What goes to the agent: the result the core shapes (`resultType`
    /// is `success` unless given; a structured value that is no result
    /// object goes as its JSON text), or the engine's failure answer.
    pub(super) fn outcome(self) -> Outcome {
        let given = match self {
            ToolResult::Text(t) => Value::String(t),
            ToolResult::Failure(t) => json!({ "textResultForLlm": t, "resultType": "failure" }),
            ToolResult::Error(e) => return Outcome::Fail(e),
            ToolResult::Structured(v) => v,
        };
        answer(TOOL, Some(&given))
    }
}

/// The name of a tool's answer shape.
const TOOL: &str = HandlerKind::Tool.name();

impl From<String> for ToolResult {
    fn from(text: String) -> Self {
        ToolResult::Text(text)
    }
}

impl From<&str> for ToolResult {
    fn from(text: &str) -> Self {
        ToolResult::Text(text.to_owned())
    }
}

impl<T: Into<ToolResult>, E: fmt::Display> From<Result<T, E>> for ToolResult {
    fn from(r: Result<T, E>) -> Self {
        match r {
            Ok(v) => v.into(),
            Err(e) => ToolResult::Error(e.to_string()),
        }
    }
}

type ToolFn = dyn Fn(&ToolInvocation) -> ToolResult + Send + Sync;

/// A tool the model can call, run by this client.
#[derive(Clone)]
pub struct Tool {
    /// Its name, as the model calls it.
    pub name: String,
    /// What it does, for the model.
    pub description: String,
    /// A JSON schema of its arguments.
    pub parameters: Value,
    /// Run without a permission prompt.
    pub skip_permission: bool,
    /// Take the place of the built-in tool of the same name (the CLI refuses
    /// a tool named like a built-in one without it).
    pub overrides_built_in_tool: bool,
    pub(super) handler: Arc<ToolFn>,
}

impl fmt::Debug for Tool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tool")
            .field("name", &self.name)
            .field("skip_permission", &self.skip_permission)
            .field("overrides_built_in_tool", &self.overrides_built_in_tool)
            .finish()
    }
}

impl Tool {
    /// A tool whose calls `handler` answers. Return text, a
    /// `Result<String, E>` (an error is logged and sent as the call's
    /// `error`: the model is told only that the tool failed, see
    /// [`ToolResult::Error`]), or a [`ToolResult`] (such as
    /// [`ToolResult::failure`] for a failure the model reads).
    pub fn new<R: Into<ToolResult>>(
        name: impl Into<String>,
        description: impl Into<String>,
        parameters: Value,
        handler: impl Fn(&ToolInvocation) -> R + Send + Sync + 'static,
    ) -> Tool {
        Tool {
            name: name.into(),
            description: description.into(),
            parameters,
            skip_permission: false,
            overrides_built_in_tool: false,
            handler: Arc::new(move |call| handler(call).into()),
        }
    }

    /// The same tool, run without a permission prompt.
    pub fn skip_permission(mut self) -> Tool {
        self.skip_permission = true;
        self
    }

    /// The same tool, in place of the built-in tool of the same name.
    pub fn overrides_built_in_tool(mut self) -> Tool {
        self.overrides_built_in_tool = true;
        self
    }

    pub(crate) fn definition(&self) -> Value {
        let mut d = json!({ "name": self.name, "description": self.description, "parameters": self.parameters });
        if self.skip_permission {
            d["skipPermission"] = true.into();
        }
        if self.overrides_built_in_tool {
            d["overridesBuiltInTool"] = true.into();
        }
        d
    }
}

// ---------------------------------------------------------------------------
// User input, elicitation, MCP OAuth, exit plan mode, commands.

/// A question for the user (`ask_user`).
#[derive(Debug, Clone, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct UserInputRequest {
    /// The session asking.
    #[serde(default, deserialize_with = "crate::events::lenient")]
    pub session_id: String,
    /// The question.
    pub question: String,
    /// Choices offered, if any.
    #[serde(default, deserialize_with = "crate::events::lenient")]
    pub choices: Vec<String>,
    /// Whether a free-form answer is allowed.
    #[serde(default, deserialize_with = "crate::events::lenient")]
    pub allow_freeform: Option<bool>,
}

/// The user's answer.
#[derive(Debug, Clone, PartialEq)]
pub struct UserInputResponse {
    /// The answer.
    pub answer: String,
    /// Whether it was typed rather than chosen.
    pub was_freeform: bool,
}

/// Answers user questions; closures are handlers. `None` refuses (the
/// model is told the user could not respond).
pub trait UserInputHandler: Send + Sync {
    /// The answer; may block.
    fn answer(&self, request: &UserInputRequest) -> Option<UserInputResponse>;
}

impl<F: Fn(&UserInputRequest) -> Option<UserInputResponse> + Send + Sync> UserInputHandler for F {
    fn answer(&self, request: &UserInputRequest) -> Option<UserInputResponse> {
        self(request)
    }
}

/// The answer to an elicitation (a form or URL an MCP server asks for).
#[derive(Debug, Clone, PartialEq)]
pub enum ElicitationResponse {
    /// Accepted, with the form's content.
    Accept(Value),
    /// Declined.
    Decline,
    /// Cancelled.
    Cancel,
}

/// Answers elicitations; closures `Fn(&ElicitationRequestedData) -> ElicitationResponse` are handlers.
pub trait ElicitationHandler: Send + Sync {
    /// The answer; may block.
    fn answer(&self, request: &ElicitationRequestedData) -> ElicitationResponse;
}

impl<F: Fn(&ElicitationRequestedData) -> ElicitationResponse + Send + Sync> ElicitationHandler for F {
    fn answer(&self, request: &ElicitationRequestedData) -> ElicitationResponse {
        self(request)
    }
}

/// An OAuth token for an MCP server. Its `Debug` output hides the token.
#[derive(Clone, PartialEq)]
pub struct OAuthToken {
    /// The access token.
    pub access_token: String,
    /// Its type, `Bearer` if `None`.
    pub token_type: Option<String>,
    /// Seconds until it expires.
    pub expires_in: Option<u64>,
}

impl fmt::Debug for OAuthToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OAuthToken")
            .field("access_token", &"<redacted>")
            .field("token_type", &self.token_type)
            .field("expires_in", &self.expires_in)
            .finish()
    }
}

/// Provides MCP OAuth tokens; closures are handlers. `None` cancels.
pub trait McpOAuthHandler: Send + Sync {
    /// The token; may block (a browser flow may run).
    fn token(&self, request: &McpOauthRequiredData) -> Option<OAuthToken>;
}

impl<F: Fn(&McpOauthRequiredData) -> Option<OAuthToken> + Send + Sync> McpOAuthHandler for F {
    fn token(&self, request: &McpOauthRequiredData) -> Option<OAuthToken> {
        self(request)
    }
}

/// A plan the agent asks to leave plan mode with.
#[derive(Debug, Clone, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct ExitPlanModeRequest {
    /// The session asking.
    #[serde(default, deserialize_with = "crate::events::lenient")]
    pub session_id: String,
    /// A summary of the plan.
    #[serde(default, deserialize_with = "crate::events::lenient")]
    pub summary: String,
    /// The plan itself.
    #[serde(default, deserialize_with = "crate::events::lenient")]
    pub plan_content: String,
    /// Actions offered (`exit_only`, `interactive`, `autopilot`, ...).
    #[serde(default, deserialize_with = "crate::events::lenient")]
    pub actions: Vec<String>,
    /// The action the agent recommends.
    #[serde(default, deserialize_with = "crate::events::lenient")]
    pub recommended_action: Option<String>,
}

/// The answer to an exit-plan-mode request.
#[derive(Debug, Clone, PartialEq)]
pub struct ExitPlanModeResponse {
    /// Whether the plan is approved.
    pub approved: bool,
    /// The action chosen, if approved.
    pub selected_action: Option<String>,
    /// Feedback for the model.
    pub feedback: Option<String>,
}

/// Answers exit-plan-mode requests; closures are handlers.
pub trait ExitPlanModeHandler: Send + Sync {
    /// The answer; may block.
    fn answer(&self, request: &ExitPlanModeRequest) -> ExitPlanModeResponse;
}

impl<F: Fn(&ExitPlanModeRequest) -> ExitPlanModeResponse + Send + Sync> ExitPlanModeHandler for F {
    fn answer(&self, request: &ExitPlanModeRequest) -> ExitPlanModeResponse {
        self(request)
    }
}

type CommandFn = dyn Fn(&CommandExecuteData) -> Result<(), String> + Send + Sync;

/// A slash command this client runs (`/name args`).
#[derive(Clone)]
pub struct Command {
    /// Its name, without the slash.
    pub name: String,
    /// What it does.
    pub description: String,
    pub(super) handler: Arc<CommandFn>,
}

impl fmt::Debug for Command {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Command").field("name", &self.name).finish()
    }
}

impl Command {
    /// A command run by `handler`; an `Err` is reported to the caller.
    pub fn new(
        name: impl Into<String>,
        description: impl Into<String>,
        handler: impl Fn(&CommandExecuteData) -> Result<(), String> + Send + Sync + 'static,
    ) -> Command {
        Command { name: name.into(), description: description.into(), handler: Arc::new(handler) }
    }
}

/// Rewrites a section of the system prompt; closures `Fn(&str) -> String`
/// are transforms. See [`SystemMessage::transform`](crate::SystemMessage::transform).
pub trait SectionTransform: Send + Sync {
    /// The new text of the section whose text is `content`.
    fn transform(&self, content: &str) -> String;
}

impl<F: Fn(&str) -> String + Send + Sync> SectionTransform for F {
    fn transform(&self, content: &str) -> String {
        self(content)
    }
}

/// A BYOK provider's request for a bearer token.
#[derive(Debug, Clone, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct ProviderTokenRequest {
    /// The session asking.
    #[serde(default, deserialize_with = "crate::events::lenient")]
    pub session_id: String,
    /// The provider (`default` for the session's
    /// [`provider`](crate::SessionConfig::provider)).
    pub provider_name: String,
}

/// Gives bearer tokens for a BYOK provider, one per model request (the CLI
/// caches nothing); closures are handlers. `None` (or a panic) fails the
/// request. The token is never logged.
pub trait ProviderTokenHandler: Send + Sync {
    /// The token, without the `Bearer ` prefix; may block.
    fn token(&self, request: &ProviderTokenRequest) -> Option<String>;
}

impl<F: Fn(&ProviderTokenRequest) -> Option<String> + Send + Sync> ProviderTokenHandler for F {
    fn token(&self, request: &ProviderTokenRequest) -> Option<String> {
        self(request)
    }
}

/// Everything a session answers the agent with. Set it with the
/// `SessionConfig::on_*`, `tool` and `command` methods, or directly.
#[derive(Clone, Default)]
pub struct SessionHandlers {
    /// Permission prompts. Setting one also asks the CLI for prompts.
    pub permission: Option<Arc<dyn PermissionHandler>>,
    /// Client tools offered to the model.
    pub tools: Vec<Tool>,
    /// Questions to the user (`ask_user`).
    pub user_input: Option<Arc<dyn UserInputHandler>>,
    /// Elicitations of MCP servers.
    pub elicitation: Option<Arc<dyn ElicitationHandler>>,
    /// OAuth tokens for MCP servers.
    pub mcp_oauth: Option<Arc<dyn McpOAuthHandler>>,
    /// Requests to leave plan mode.
    pub exit_plan_mode: Option<Arc<dyn ExitPlanModeHandler>>,
    /// Slash commands.
    pub commands: Vec<Command>,
    /// Section transforms of the system message, by section id (from
    /// [`SessionConfig::system_message`](crate::SessionConfig::system_message)).
    pub(crate) transforms: BTreeMap<String, Arc<dyn SectionTransform>>,
    /// The BYOK provider's token callback (from
    /// [`SessionConfig::provider`](crate::SessionConfig::provider)).
    pub(crate) provider_token: Option<Arc<dyn ProviderTokenHandler>>,
    /// Hooks of the agent loop. Setting one also asks the CLI to call them.
    pub hooks: SessionHooks,
    /// Canvases the session declares and serves (from
    /// [`SessionConfig::canvases`](crate::SessionConfig::canvases)).
    pub(crate) canvases: Vec<Canvas>,
    /// Handlers of the other requests and awaited events, by name.
    pub requests: RequestHandlers,
}

impl SessionHandlers {
    /// Whether a handler of `kind` is set (the generic handlers, set by
    /// name, are not asked about).
    pub(crate) fn has(&self, kind: HandlerKind) -> bool {
        match kind {
            HandlerKind::Permission => self.permission.is_some(),
            HandlerKind::Tool => !self.tools.is_empty(),
            HandlerKind::UserInput => self.user_input.is_some(),
            HandlerKind::Elicitation => self.elicitation.is_some(),
            HandlerKind::McpOAuth => self.mcp_oauth.is_some(),
            HandlerKind::ExitPlanMode => self.exit_plan_mode.is_some(),
            HandlerKind::Command => !self.commands.is_empty(),
            HandlerKind::SystemMessageTransform => !self.transforms.is_empty(),
            HandlerKind::ProviderToken => self.provider_token.is_some(),
            HandlerKind::Hooks => !self.hooks.is_empty(),
            HandlerKind::Canvas => !self.canvases.is_empty(),
            _ => false,
        }
    }
}

impl fmt::Debug for SessionHandlers {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SessionHandlers")
            .field("permission", &self.permission.is_some())
            .field("tools", &self.tools)
            .field("user_input", &self.user_input.is_some())
            .field("elicitation", &self.elicitation.is_some())
            .field("mcp_oauth", &self.mcp_oauth.is_some())
            .field("exit_plan_mode", &self.exit_plan_mode.is_some())
            .field("commands", &self.commands)
            .field("transforms", &self.transforms.keys().collect::<Vec<_>>())
            .field("provider_token", &self.provider_token.is_some())
            .field("hooks", &self.hooks)
            .field("canvases", &self.canvases)
            .field("requests", &self.requests)
            .finish()
    }
}
