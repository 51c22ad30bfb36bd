//! Answers to what the agent waits on: permission prompts, client tools,
//! user input, elicitation, MCP OAuth, exit-plan-mode and slash commands.
//!
//! The protocol engine decides which waits are obligations and which handler
//! kind answers each; this module only calls the user's handler, on the
//! connection's handler pool (never on the reader thread), and passes its
//! answer on through the [`Replier`]. Without a handler, when the handler
//! panics, or when the data does not fit the handler's types, the engine's
//! refusal for that kind goes instead; past the handler deadline the engine
//! has already refused and a late answer is not sent.

use std::collections::BTreeMap;
use std::fmt;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

use serde_json::{json, Value};

use copilot_core::{Cause, HandlerKind};

use crate::connection::{Job, Replier};
use crate::events::{
    CommandExecuteData, ElicitationRequestedData, EventKind, ExternalToolRequestedData, McpOauthRequiredData,
    PermissionRequestedData, SessionEvent,
};
use crate::hooks::{HookAnswer, HookFailure, SessionHooks};
use crate::requests::{IncomingRequest, RequestHandlers};

// ---------------------------------------------------------------------------
// Permissions.

/// The answer to a permission prompt.
#[derive(Debug, Clone, PartialEq)]
pub enum PermissionDecision {
    /// Allow this once.
    ApproveOnce,
    /// Allow for the rest of the session. `approval` narrows what is
    /// approved (for example `{"kind":"custom-tool","toolName":"x"}`); the
    /// CLI treats it as once without one.
    ApproveForSession {
        /// What to approve, as the CLI's schema describes it.
        approval: Option<Value>,
    },
    /// Refuse. The model reads the feedback and carries on; without
    /// feedback the CLI ends the turn.
    Reject {
        /// Why, for the model.
        feedback: Option<String>,
    },
    /// Nobody can answer: the CLI denies and tells the model so.
    UserNotAvailable,
    /// Any other decision object the CLI accepts, sent as is.
    Custom(Value),
    /// A decision with context on how and where it was made (sent as the
    /// answer's `decisionContext`; telemetry, it changes nothing).
    WithContext {
        /// The decision.
        decision: Box<PermissionDecision>,
        /// How it was made.
        context: PermissionDecisionContext,
    },
    /// No decision from this client: the prompt is left to another client
    /// connected to the same session. Nothing is sent; if no other client
    /// answers, the turn waits (until it is aborted).
    NoResult,
}

/// How and where a permission decision was made (the CLI's
/// `PermissionDecisionContext`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PermissionDecisionContext {
    /// `auto_approved`, `autopilot_denied` or `prompted_user`.
    pub outcome: String,
    /// `assisted_approval`, `human_response`, `host_policy`,
    /// `unattended_fallback` or `authorization_carry_forward`.
    pub source: String,
    /// The client's surface; `sdk` for this one.
    pub surface: String,
    /// `interactive`, `headless` or `none`, when known.
    pub response_capability: Option<String>,
    /// The user's own words on the decision.
    pub user_feedback: Option<String>,
}

impl PermissionDecisionContext {
    /// A context with `outcome` and `source`, from the `sdk` surface.
    pub fn new(outcome: impl Into<String>, source: impl Into<String>) -> Self {
        PermissionDecisionContext {
            outcome: outcome.into(),
            source: source.into(),
            surface: "sdk".into(),
            response_capability: None,
            user_feedback: None,
        }
    }

    fn to_json(&self) -> Value {
        let mut v = json!({ "outcome": self.outcome, "source": self.source, "surface": self.surface });
        if let Some(c) = &self.response_capability {
            v["responseCapability"] = c.clone().into();
        }
        if let Some(f) = &self.user_feedback {
            v["userFeedback"] = f.clone().into();
        }
        v
    }
}

impl PermissionDecision {
    /// A rejection with feedback for the model.
    pub fn reject(feedback: impl Into<String>) -> Self {
        PermissionDecision::Reject { feedback: Some(feedback.into()) }
    }

    /// The same decision, with `context` on how it was made.
    pub fn with_context(self, context: PermissionDecisionContext) -> Self {
        match self {
            PermissionDecision::NoResult => PermissionDecision::NoResult,
            PermissionDecision::WithContext { decision, .. } => PermissionDecision::WithContext { decision, context },
            decision => PermissionDecision::WithContext { decision: Box::new(decision), context },
        }
    }

    /// What goes to the CLI: the decision and the context beside it, or
    /// nothing (declined).
    fn outcome(&self) -> Outcome {
        match self {
            PermissionDecision::NoResult => Outcome::Decline,
            PermissionDecision::WithContext { decision, context } => match decision.outcome() {
                Outcome::Answer(v) => Outcome::AnswerWith(v, json!({ "decisionContext": context.to_json() })),
                other => other,
            },
            other => Outcome::Answer(other.to_json()),
        }
    }

    fn to_json(&self) -> Value {
        match self {
            PermissionDecision::ApproveOnce => json!({ "kind": "approve-once" }),
            PermissionDecision::ApproveForSession { approval: Some(a) } => {
                json!({ "kind": "approve-for-session", "approval": a })
            }
            PermissionDecision::ApproveForSession { approval: None } => json!({ "kind": "approve-for-session" }),
            PermissionDecision::Reject { feedback: Some(f) } => json!({ "kind": "reject", "feedback": f }),
            PermissionDecision::Reject { feedback: None } => json!({ "kind": "reject" }),
            PermissionDecision::UserNotAvailable => json!({ "kind": "user-not-available" }),
            PermissionDecision::Custom(v) => v.clone(),
            PermissionDecision::WithContext { decision, .. } => decision.to_json(),
            PermissionDecision::NoResult => Value::Null,
        }
    }
}

/// A permission prompt.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct PermissionRequest {
    /// The session asking.
    pub session_id: String,
    /// What is asked: `shell`, `write`, `read`, `mcp`, `url`, `custom-tool`, ...
    pub kind: String,
    /// The tool call it is for, if any.
    pub tool_call_id: Option<String>,
    /// The event's data, with every detail (`permissionRequest` holds the
    /// command text, paths, tool name and arguments).
    pub data: PermissionRequestedData,
}

/// Decides permission prompts. Closures `Fn(&PermissionRequest) -> PermissionDecision` are handlers.
pub trait PermissionHandler: Send + Sync {
    /// The decision; may block (a person may be asked).
    fn decide(&self, request: &PermissionRequest) -> PermissionDecision;
}

impl<F: Fn(&PermissionRequest) -> PermissionDecision + Send + Sync> PermissionHandler for F {
    fn decide(&self, request: &PermissionRequest) -> PermissionDecision {
        self(request)
    }
}

/// A handler that approves every prompt once.
pub fn approve_all() -> Arc<dyn PermissionHandler> {
    Arc::new(|_: &PermissionRequest| PermissionDecision::ApproveOnce)
}

/// A handler that rejects every prompt with `feedback` (so the model
/// carries on instead of the turn ending).
pub fn deny_all(feedback: impl Into<String>) -> Arc<dyn PermissionHandler> {
    let feedback = feedback.into();
    Arc::new(move |_: &PermissionRequest| PermissionDecision::reject(feedback.clone()))
}

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
}

/// What the model reads when a tool's handler fails (returns `Err`,
/// panics): the error itself may hold what the model should not see, so it
/// goes to the logs (and the result's `error`, which the model does not
/// read), as the official SDKs do. The engine sends it.
pub use copilot_core::TOOL_FAILED_TEXT;

/// What a tool returns to the model.
#[derive(Debug, Clone, PartialEq)]
pub enum ToolResult {
    /// Success, with text for the model.
    Text(String),
    /// Failure, with text meant for the model (the CLI passes a failure's
    /// text on). Make it with [`ToolResult::failure`].
    Failure(String),
    /// The handler failed with this error: it is logged, and the model reads
    /// only [`TOOL_FAILED_TEXT`]. An `Err` of a handler becomes this.
    Error(String),
    /// A result object as the CLI's schema describes it
    /// (`{textResultForLlm, resultType, sessionLog, binaryResultsForLlm, ...}`).
    Structured(Value),
}

impl ToolResult {
    /// A failure whose `text` the model reads.
    pub fn failure(text: impl Into<String>) -> Self {
        ToolResult::Failure(text.into())
    }

    /// What goes to the agent: the result, or the engine's failure answer.
    fn outcome(self) -> Outcome {
        match self {
            ToolResult::Text(t) => Outcome::Answer(json!({ "textResultForLlm": t, "resultType": "success" })),
            ToolResult::Failure(t) => Outcome::Answer(json!({ "textResultForLlm": t, "resultType": "failure" })),
            ToolResult::Error(e) => Outcome::Fail(e),
            ToolResult::Structured(v) => Outcome::Answer(v),
        }
    }
}

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
    handler: Arc<ToolFn>,
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
    /// `Result<String, E>` (an error is logged and the model reads only
    /// [`TOOL_FAILED_TEXT`]), or a [`ToolResult`] (such as
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
    #[serde(default)]
    pub session_id: String,
    /// The question.
    pub question: String,
    /// Choices offered, if any.
    #[serde(default)]
    pub choices: Vec<String>,
    /// Whether a free-form answer is allowed.
    #[serde(default)]
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
    #[serde(default)]
    pub session_id: String,
    /// A summary of the plan.
    #[serde(default)]
    pub summary: String,
    /// The plan itself.
    #[serde(default)]
    pub plan_content: String,
    /// Actions offered (`exit_only`, `interactive`, `autopilot`, ...).
    #[serde(default)]
    pub actions: Vec<String>,
    /// The action the agent recommends.
    #[serde(default)]
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
    handler: Arc<CommandFn>,
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
    #[serde(default)]
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

/// The kinds of wait this client has handlers for: every kind of the core's
/// answer table. The first [`TYPED_KINDS`] have typed handlers or options
/// of their own; the rest are answered by generic handlers, by name
/// ([`SessionConfig::on_request`](crate::SessionConfig::on_request)). The
/// JavaScript package offers the same.
pub const OFFERED_HANDLER_KINDS: &[HandlerKind] = &[
    HandlerKind::Permission,
    HandlerKind::Tool,
    HandlerKind::UserInput,
    HandlerKind::Elicitation,
    HandlerKind::McpOAuth,
    HandlerKind::ExitPlanMode,
    HandlerKind::Command,
    HandlerKind::SystemMessageTransform,
    HandlerKind::ProviderToken,
    HandlerKind::Hooks,
    // Generic from here on.
    HandlerKind::McpHeadersRefresh,
    HandlerKind::AutoModeSwitch,
    HandlerKind::Sampling,
    HandlerKind::SessionLimits,
    HandlerKind::QueuedCommand,
    HandlerKind::GitHubToken,
    HandlerKind::SessionFs,
    HandlerKind::SkillProvider,
    HandlerKind::Workflow,
    HandlerKind::Tasks,
    HandlerKind::Canvas,
    HandlerKind::Host,
    HandlerKind::ExtensionLaunch,
    HandlerKind::LlmInference,
    HandlerKind::UiThread,
    HandlerKind::Installations,
];

/// How many of [`OFFERED_HANDLER_KINDS`] come first with typed handlers.
pub(crate) const TYPED_KINDS: usize = 10;

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
            .field("requests", &self.requests)
            .finish()
    }
}

// ---------------------------------------------------------------------------
// Answering.

/// What a handler made of a wait.
enum Outcome {
    /// This answer goes (JSON; `null` leaves the answer's key out).
    Answer(Value),
    /// This answer goes, with these members beside it (a JSON object).
    AnswerWith(Value, Value),
    /// Nothing goes: the wait is left to another client of the session.
    Decline,
    /// The engine's refusal goes, for this reason.
    Refuse(Cause),
    /// The handler failed with this text: the engine's failure answer goes
    /// (the refusal, or for a tool the generic failure with the text in
    /// `error`).
    Fail(String),
}

/// Calls the user's handler for `job` and passes its answer on. Runs on the
/// handler pool.
pub(crate) fn run(job: Job, handlers: &SessionHandlers, session_id: &str) {
    let Job { kind, name, data, reply } = job;
    let outcome =
        match reply.scope(|| catch_unwind(AssertUnwindSafe(|| decide(kind, name, &data, handlers, session_id)))) {
            Ok(o) => o,
            Err(panic) => Outcome::Fail(format!("the handler panicked: {}", crate::connection::panic_text(&*panic))),
        };
    send(&reply, name, outcome);
}

/// Calls the client's generic handler for a client-wide request (one that
/// names no session) and passes its answer on. Runs on the handler pool.
pub(crate) fn run_client_wide(job: Job, requests: &RequestHandlers) {
    let Job { kind, name, data, reply } = job;
    let outcome =
        match reply.scope(|| catch_unwind(AssertUnwindSafe(|| generic(kind, name, &data, requests, None, false)))) {
            Ok(o) => o,
            Err(panic) => Outcome::Fail(format!("the handler panicked: {}", crate::connection::panic_text(&*panic))),
        };
    send(&reply, name, outcome);
}

/// Runs the generic handler of `name`, if the kind is generic and one is set.
fn generic(
    kind: HandlerKind,
    name: &'static str,
    data: &[u8],
    requests: &RequestHandlers,
    session_id: Option<&str>,
    event: bool,
) -> Outcome {
    if !crate::requests::is_generic(kind) || requests.is_empty() {
        return Outcome::Refuse(Cause::NoHandler);
    }
    let params = if event { crate::requests::event_data(data) } else { serde_json::from_slice(data).ok() };
    let Some(params) = params else { return Outcome::Refuse(Cause::Unreadable) };
    let request = IncomingRequest { name, session_id: session_id.map(str::to_owned), params };
    match requests.handle(&request) {
        None => Outcome::Refuse(Cause::NoHandler),
        Some(Ok(v)) => Outcome::Answer(v),
        Some(Err(e)) => Outcome::Fail(e),
    }
}

fn send(reply: &Replier, name: &str, outcome: Outcome) {
    match outcome {
        Outcome::Answer(v) => reply.answer(&v, None),
        Outcome::AnswerWith(v, siblings) => reply.answer(&v, Some(&siblings)),
        Outcome::Decline => reply.decline(),
        Outcome::Refuse(cause) => reply.refuse(cause),
        Outcome::Fail(detail) => {
            log::error!("the {name} handler failed ({detail}); the agent is told only that it failed");
            reply.fail(&detail)
        }
    }
}

/// The typed data of a waiting event, or why it has none.
fn event_kind(data: &[u8]) -> Result<EventKind, Outcome> {
    match SessionEvent::from_json(data) {
        Ok(e) => Ok(e.kind),
        Err(_) => Err(Outcome::Refuse(Cause::Unreadable)),
    }
}

fn decide(kind: HandlerKind, name: &'static str, data: &[u8], handlers: &SessionHandlers, session_id: &str) -> Outcome {
    use Outcome::{Answer, Refuse};
    let unreadable = Refuse(Cause::Unreadable);
    match kind {
        HandlerKind::Permission => {
            let Some(h) = &handlers.permission else { return Refuse(Cause::NoHandler) };
            let data = match event_kind(data) {
                Ok(EventKind::PermissionRequested(d)) => d,
                Ok(_) => return unreadable,
                Err(o) => return o,
            };
            let request = PermissionRequest {
                session_id: session_id.to_owned(),
                kind: data.kind().unwrap_or_default().to_owned(),
                tool_call_id: data.permission_request.get("toolCallId").and_then(Value::as_str).map(String::from),
                data,
            };
            h.decide(&request).outcome()
        }
        HandlerKind::Tool => {
            let data = match event_kind(data) {
                Ok(EventKind::ExternalToolRequested(d)) => d,
                Ok(_) => return unreadable,
                Err(o) => return o,
            };
            match handlers.tools.iter().find(|t| t.name == data.tool_name) {
                Some(tool) => run_tool(tool, session_id, &data).outcome(),
                None => Refuse(Cause::NoHandler),
            }
        }
        HandlerKind::Elicitation => {
            let Some(h) = &handlers.elicitation else { return Refuse(Cause::NoHandler) };
            let data = match event_kind(data) {
                Ok(EventKind::ElicitationRequested(d)) => d,
                Ok(_) => return unreadable,
                Err(o) => return o,
            };
            Answer(match h.answer(&data) {
                ElicitationResponse::Accept(content) => json!({ "action": "accept", "content": content }),
                ElicitationResponse::Decline => json!({ "action": "decline" }),
                ElicitationResponse::Cancel => json!({ "action": "cancel" }),
            })
        }
        HandlerKind::McpOAuth => {
            let Some(h) = &handlers.mcp_oauth else { return Refuse(Cause::NoHandler) };
            let data = match event_kind(data) {
                Ok(EventKind::McpOauthRequired(d)) => d,
                Ok(_) => return unreadable,
                Err(o) => return o,
            };
            Answer(match h.token(&data) {
                Some(t) => {
                    let mut r = json!({ "kind": "token", "accessToken": t.access_token });
                    if let Some(tt) = t.token_type {
                        r["tokenType"] = tt.into();
                    }
                    if let Some(e) = t.expires_in {
                        r["expiresIn"] = e.into();
                    }
                    r
                }
                None => json!({ "kind": "cancelled" }),
            })
        }
        HandlerKind::Command => {
            let data = match event_kind(data) {
                Ok(EventKind::CommandExecute(d)) => d,
                Ok(_) => return unreadable,
                Err(o) => return o,
            };
            match handlers.commands.iter().find(|c| c.name == data.command_name) {
                Some(c) => match (c.handler)(&data) {
                    Ok(()) => Answer(Value::Null),
                    Err(e) => Answer(Value::String(e)),
                },
                None => Refuse(Cause::NoHandler),
            }
        }
        HandlerKind::UserInput => {
            let Some(h) = &handlers.user_input else { return Refuse(Cause::NoHandler) };
            let Ok(request) = serde_json::from_slice::<UserInputRequest>(data) else { return unreadable };
            match h.answer(&request) {
                Some(r) => Answer(json!({ "answer": r.answer, "wasFreeform": r.was_freeform })),
                None => Refuse(Cause::NoHandler),
            }
        }
        HandlerKind::ExitPlanMode => {
            let Some(h) = &handlers.exit_plan_mode else { return Refuse(Cause::NoHandler) };
            let Ok(request) = serde_json::from_slice::<ExitPlanModeRequest>(data) else { return unreadable };
            let r = h.answer(&request);
            let mut v = json!({ "approved": r.approved });
            if let Some(a) = r.selected_action {
                v["selectedAction"] = a.into();
            }
            if let Some(f) = r.feedback {
                v["feedback"] = f.into();
            }
            Answer(v)
        }
        HandlerKind::SystemMessageTransform => {
            if handlers.transforms.is_empty() {
                return Refuse(Cause::NoHandler);
            }
            let Ok(request) = serde_json::from_slice::<TransformRequest>(data) else { return unreadable };
            Answer(json!({ "sections": transform_sections(&request.sections, &handlers.transforms) }))
        }
        HandlerKind::ProviderToken => {
            let Some(h) = &handlers.provider_token else { return Refuse(Cause::NoHandler) };
            let Ok(request) = serde_json::from_slice::<ProviderTokenRequest>(data) else { return unreadable };
            // One callback: the session's single provider, named `default`.
            if request.provider_name != "default" {
                return Refuse(Cause::NoHandler);
            }
            match h.token(&request) {
                Some(token) => Answer(json!({ "token": token })),
                None => Refuse(Cause::HandlerFailed),
            }
        }
        HandlerKind::Hooks => match crate::hooks::invoke(&handlers.hooks, data, session_id) {
            HookAnswer::Answer(v) => Answer(v),
            HookAnswer::NoHook => Refuse(Cause::NoHandler),
            HookAnswer::Failed(HookFailure::Unreadable) => unreadable,
            HookAnswer::Failed(HookFailure::Unwritable) => Refuse(Cause::HandlerFailed),
        },
        // The other kinds: a generic handler by name, or the engine's refusal.
        _ => {
            let event = crate::requests::is_event(name);
            generic(kind, name, data, &handlers.requests, Some(session_id), event)
        }
    }
}

/// `systemMessage.transform` params.
#[derive(serde::Deserialize)]
struct TransformRequest {
    sections: BTreeMap<String, SectionText>,
}

#[derive(serde::Deserialize, serde::Serialize)]
struct SectionText {
    content: String,
}

/// Every section, rewritten by its transform if it has one; a section
/// without one, or whose transform panics, keeps its text.
fn transform_sections(
    sections: &BTreeMap<String, SectionText>,
    transforms: &BTreeMap<String, Arc<dyn SectionTransform>>,
) -> BTreeMap<String, SectionText> {
    sections
        .iter()
        .map(|(id, s)| {
            let content = match transforms.get(id) {
                Some(t) => catch_unwind(AssertUnwindSafe(|| t.transform(&s.content))).unwrap_or_else(|_| {
                    log::error!("the transform of system prompt section {id} panicked; the section is kept");
                    s.content.clone()
                }),
                None => s.content.clone(),
            };
            (id.clone(), SectionText { content })
        })
        .collect()
}

fn run_tool(tool: &Tool, session_id: &str, data: &ExternalToolRequestedData) -> ToolResult {
    let call = ToolInvocation {
        session_id: session_id.to_owned(),
        tool_call_id: data.tool_call_id.clone(),
        tool_name: data.tool_name.clone(),
        arguments: data.arguments.clone().unwrap_or(Value::Null),
        working_directory: data.working_directory.clone(),
    };
    // A tool that panics fails as a tool that returns an error does (the
    // panic is caught around the whole decision).
    (tool.handler)(&call)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A session with a handler of every type this client has.
    fn every_handler() -> SessionHandlers {
        let mut h = SessionHandlers {
            permission: Some(approve_all()),
            tools: vec![Tool::new("t", "", json!({}), |_: &ToolInvocation| "ok")],
            user_input: Some(Arc::new(|_: &UserInputRequest| None)),
            elicitation: Some(Arc::new(|_: &ElicitationRequestedData| ElicitationResponse::Cancel)),
            mcp_oauth: Some(Arc::new(|_: &McpOauthRequiredData| None)),
            exit_plan_mode: Some(Arc::new(|_: &ExitPlanModeRequest| ExitPlanModeResponse {
                approved: false,
                selected_action: None,
                feedback: None,
            })),
            commands: vec![Command::new("c", "", |_: &CommandExecuteData| Ok(()))],
            ..SessionHandlers::default()
        };
        h.transforms.insert("identity".into(), Arc::new(|s: &str| s.to_owned()));
        h.provider_token = Some(Arc::new(|_: &ProviderTokenRequest| None));
        h.hooks = crate::hooks::SessionHooks::new().on_hook(crate::hooks::HookType::PreToolUse, |_, _| None);
        for name in crate::requests::generic_request_names() {
            h.requests.insert(name, Arc::new(|_: &crate::requests::IncomingRequest| Ok(json!({}))));
        }
        h
    }

    #[test]
    fn the_offered_kinds_are_the_kinds_a_handler_is_called_for() {
        let all = every_handler();
        for row in copilot_core::ANSWERS {
            let kind = row.handler;
            let (copilot_core::Trigger::Event(name) | copilot_core::Trigger::Request(name)) = row.trigger;
            // Data no handler can read: a kind with a handler says so; a
            // kind without one is refused for that.
            let no_handler = matches!(decide(kind, name, b"{}", &all, "s"), Outcome::Refuse(Cause::NoHandler));
            assert_eq!(no_handler, !OFFERED_HANDLER_KINDS.contains(&kind), "{}", kind.name());
            let bare = decide(kind, name, b"{}", &SessionHandlers::default(), "s");
            assert!(matches!(bare, Outcome::Refuse(Cause::NoHandler | Cause::Unreadable)), "{}", kind.name());
        }
    }
}
