//! Answers to what the agent waits on: permission prompts, client tools,
//! user input, elicitation, MCP OAuth, exit-plan-mode and slash commands.
//!
//! Each waiting event or server request is answered on a thread of its own,
//! never on the reader thread, so a slow handler holds up nothing else. A
//! handler that panics still produces an answer (a refusal or a failure the
//! model can read); a request without a handler is refused explicitly. No
//! wait of the agent is ever left unanswered by this client.

use std::fmt;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

use serde_json::{json, Value};

use crate::connection::Connection;
use crate::events::{
    CommandExecuteData, ElicitationRequestedData, EventKind, ExternalToolRequestedData, McpOauthRequiredData,
    PermissionRequestedData, SessionEvent,
};
use crate::session::SessionInner;

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
}

impl PermissionDecision {
    /// A rejection with feedback for the model.
    pub fn reject(feedback: impl Into<String>) -> Self {
        PermissionDecision::Reject { feedback: Some(feedback.into()) }
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

/// What a tool returns to the model.
#[derive(Debug, Clone, PartialEq)]
pub enum ToolResult {
    /// Success, with text for the model.
    Text(String),
    /// Failure, with text the model reads (the CLI passes a failure's text
    /// on; an RPC `error` would reach the model only as a generic message).
    Failure(String),
    /// A result object as the CLI's schema describes it
    /// (`{textResultForLlm, resultType, sessionLog, binaryResultsForLlm, ...}`).
    Structured(Value),
}

impl ToolResult {
    fn to_json(&self) -> Value {
        match self {
            ToolResult::Text(t) => json!({ "textResultForLlm": t, "resultType": "success" }),
            ToolResult::Failure(t) => json!({ "textResultForLlm": t, "resultType": "failure" }),
            ToolResult::Structured(v) => v.clone(),
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
            Err(e) => ToolResult::Failure(e.to_string()),
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
    handler: Arc<ToolFn>,
}

impl fmt::Debug for Tool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tool").field("name", &self.name).field("skip_permission", &self.skip_permission).finish()
    }
}

impl Tool {
    /// A tool whose calls `handler` answers. Return text, a
    /// `Result<String, E>` (an error becomes a failure the model reads), or
    /// a [`ToolResult`].
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
            handler: Arc::new(move |call| handler(call).into()),
        }
    }

    /// The same tool, run without a permission prompt.
    pub fn skip_permission(mut self) -> Tool {
        self.skip_permission = true;
        self
    }

    pub(crate) fn definition(&self) -> Value {
        let mut d = json!({ "name": self.name, "description": self.description, "parameters": self.parameters });
        if self.skip_permission {
            d["skipPermission"] = true.into();
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
            .finish()
    }
}

// ---------------------------------------------------------------------------
// Answering.

/// Runs `f`, turning a panic into `None` (reported).
fn guarded<T>(what: &str, f: impl FnOnce() -> T) -> Option<T> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(v) => Some(v),
        Err(_) => {
            log::error!("the {what} handler panicked; the agent gets a refusal");
            None
        }
    }
}

/// Answers a waiting event on a thread of its own.
pub(crate) fn answer_event(conn: &Arc<Connection>, session: &Arc<SessionInner>, event: &[u8]) {
    let (conn, session, event) = (Arc::clone(conn), Arc::clone(session), event.to_vec());
    let spawned = std::thread::Builder::new().name("copilot-handler".into()).spawn(move || {
        let event = match SessionEvent::from_json(&event) {
            Ok(e) => e,
            Err(e) => return log::error!("unreadable waiting event: {e}"),
        };
        answer_event_now(&conn, &session, &event);
    });
    if let Err(e) = spawned {
        log::error!("cannot start a handler thread: {e}");
    }
}

fn answer_event_now(conn: &Connection, session: &SessionInner, event: &SessionEvent) {
    let Some(session_id) = session.id().map(str::to_owned) else { return };
    let handlers = session.handlers();
    let (method, answer) = match &event.kind {
        EventKind::PermissionRequested(data) => {
            if data.resolved_by_hook == Some(true) {
                return;
            }
            let decision = match &handlers.permission {
                Some(h) => {
                    let request = PermissionRequest {
                        session_id: session_id.clone(),
                        kind: data.kind().unwrap_or_default().to_owned(),
                        tool_call_id: data
                            .permission_request
                            .get("toolCallId")
                            .and_then(Value::as_str)
                            .map(String::from),
                        data: data.clone(),
                    };
                    guarded("permission", || h.decide(&request)).unwrap_or(PermissionDecision::UserNotAvailable)
                }
                None => PermissionDecision::UserNotAvailable,
            };
            (
                "session.permissions.handlePendingPermissionRequest",
                json!({ "requestId": data.request_id, "result": decision.to_json() }),
            )
        }
        EventKind::ExternalToolRequested(data) => (
            "session.tools.handlePendingToolCall",
            json!({ "requestId": data.request_id, "result": run_tool(handlers, &session_id, data).to_json() }),
        ),
        EventKind::ElicitationRequested(data) => {
            let response = handlers
                .elicitation
                .as_ref()
                .and_then(|h| guarded("elicitation", || h.answer(data)))
                .unwrap_or(ElicitationResponse::Cancel);
            let result = match response {
                ElicitationResponse::Accept(content) => json!({ "action": "accept", "content": content }),
                ElicitationResponse::Decline => json!({ "action": "decline" }),
                ElicitationResponse::Cancel => json!({ "action": "cancel" }),
            };
            ("session.ui.handlePendingElicitation", json!({ "requestId": data.request_id, "result": result }))
        }
        EventKind::McpOauthRequired(data) => {
            let token = handlers.mcp_oauth.as_ref().and_then(|h| guarded("MCP OAuth", || h.token(data)).flatten());
            let result = match token {
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
            };
            ("session.mcp.oauth.handlePendingRequest", json!({ "requestId": data.request_id, "result": result }))
        }
        EventKind::CommandExecute(data) => {
            let outcome = match handlers.commands.iter().find(|c| c.name == data.command_name) {
                Some(c) => guarded("command", || (c.handler)(data))
                    .unwrap_or_else(|| Err(format!("the handler of /{} failed", data.command_name))),
                None => Err(format!("Unknown command: {}", data.command_name)),
            };
            let params = match outcome {
                Ok(()) => json!({ "requestId": data.request_id }),
                Err(e) => json!({ "requestId": data.request_id, "error": e }),
            };
            ("session.commands.handlePendingCommand", params)
        }
        // Both come as a server request too, which is where they are answered.
        EventKind::UserInputRequested(_) | EventKind::ExitPlanModeRequested(_) => return,
        EventKind::Other { event_type, data } => {
            let Some(request_id) = data.get("requestId").and_then(Value::as_str) else { return };
            // Interest-gated requests this client has no handler for:
            // refuse each in the form its answer takes.
            match event_type.as_str() {
                "sampling.requested" => ("session.ui.handlePendingSampling", json!({ "requestId": request_id })),
                "auto_mode_switch.requested" => {
                    ("session.ui.handlePendingAutoModeSwitch", json!({ "requestId": request_id, "response": "no" }))
                }
                "session_limits_exhausted.requested" => (
                    "session.ui.handlePendingSessionLimitsExhausted",
                    json!({ "requestId": request_id, "response": { "action": "cancel" } }),
                ),
                "command.queued" => (
                    "session.commands.respondToQueuedCommand",
                    json!({ "requestId": request_id, "result": { "handled": false } }),
                ),
                other => {
                    log::warn!("no answer is known for a waiting {other} event ({request_id})");
                    return;
                }
            }
        }
        _ => return,
    };
    let mut params = answer;
    params["sessionId"] = session_id.into();
    if let Err(e) = conn.request(method, &params, None) {
        log::warn!("{method} failed: {e}");
    }
}

fn run_tool(handlers: &SessionHandlers, session_id: &str, data: &ExternalToolRequestedData) -> ToolResult {
    let Some(tool) = handlers.tools.iter().find(|t| t.name == data.tool_name) else {
        return ToolResult::Failure(format!("this client has no tool named {}", data.tool_name));
    };
    let call = ToolInvocation {
        session_id: session_id.to_owned(),
        tool_call_id: data.tool_call_id.clone(),
        tool_name: data.tool_name.clone(),
        arguments: data.arguments.clone().unwrap_or(Value::Null),
        working_directory: data.working_directory.clone(),
    };
    guarded("tool", || (tool.handler)(&call))
        .unwrap_or_else(|| ToolResult::Failure(format!("the tool {} failed (its handler panicked)", tool.name)))
}

/// Answers a server request (one that names a known session) on a thread
/// of its own. `id` is the request id's JSON text.
pub(crate) fn answer_request(
    conn: &Arc<Connection>,
    session: &Arc<SessionInner>,
    method: String,
    id: Vec<u8>,
    params: Vec<u8>,
) {
    let (conn, session) = (Arc::clone(conn), Arc::clone(session));
    let spawned = std::thread::Builder::new().name("copilot-handler".into()).spawn(move || {
        let handlers = session.handlers();
        let outcome: Result<Value, (i64, String)> = match method.as_str() {
            "userInput.request" => match (&handlers.user_input, serde_json::from_slice::<UserInputRequest>(&params)) {
                (Some(h), Ok(request)) => match guarded("user input", || h.answer(&request)) {
                    Some(Some(r)) => Ok(json!({ "answer": r.answer, "wasFreeform": r.was_freeform })),
                    Some(None) => Err((copilot_core::INTERNAL_ERROR, "the user did not answer".into())),
                    None => Err((copilot_core::INTERNAL_ERROR, "the user input handler failed".into())),
                },
                (None, _) => Err((copilot_core::INTERNAL_ERROR, "this client has no user input handler".into())),
                (_, Err(e)) => Err((copilot_core::INVALID_PARAMS, format!("unreadable userInput.request: {e}"))),
            },
            "exitPlanMode.request" => {
                match (&handlers.exit_plan_mode, serde_json::from_slice::<ExitPlanModeRequest>(&params)) {
                    (Some(h), Ok(request)) => match guarded("exit plan mode", || h.answer(&request)) {
                        Some(r) => {
                            let mut v = json!({ "approved": r.approved });
                            if let Some(a) = r.selected_action {
                                v["selectedAction"] = a.into();
                            }
                            if let Some(f) = r.feedback {
                                v["feedback"] = f.into();
                            }
                            Ok(v)
                        }
                        None => Err((copilot_core::INTERNAL_ERROR, "the exit plan mode handler failed".into())),
                    },
                    (None, _) => {
                        Err((copilot_core::INTERNAL_ERROR, "this client has no exit plan mode handler".into()))
                    }
                    (_, Err(e)) => Err((copilot_core::INVALID_PARAMS, format!("unreadable exitPlanMode.request: {e}"))),
                }
            }
            "autoModeSwitch.request" => Ok(json!({ "response": "no" })),
            other => Err((copilot_core::METHOD_NOT_FOUND, format!("Method not found: {other}"))),
        };
        let sent = match outcome {
            Ok(result) => conn.respond_raw_id(&id, &result),
            Err((code, message)) => conn.respond_error_raw_id(&id, code, &message),
        };
        if let Err(e) = sent {
            log::warn!("answering {method} failed: {e}");
        }
    });
    if let Err(e) = spawned {
        log::error!("cannot start a handler thread: {e}");
    }
}
