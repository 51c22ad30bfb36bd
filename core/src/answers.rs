//! The answer table: every wait of the agent that this client must answer,
//! as data. One row per obligation kind says what triggers it (an event type
//! or a server request method), which user handler answers it, how the
//! answer travels, and what the engine sends when nobody can answer.
//!
//! The rows come from the pinned CLI's own schemas (vendored under
//! `core/schemas/<version>/`): every `clientSession`/`clientGlobal` method
//! that expects a result, every event whose `data.requestId` the agent waits
//! on, plus the server requests the schema lacks (`userInput.request`,
//! `exitPlanMode.request`, `autoModeSwitch.request`,
//! `systemMessage.transform`). A test fails when the schema grows a kind
//! this table lacks.
//!
//! Two events are deliberately not rows: `user_input.requested` and
//! `exit_plan_mode.requested` arrive together with the server requests
//! `userInput.request` and `exitPlanMode.request` for the same wait. The
//! request is the one answered (as the official SDKs do); the event is
//! delivered but is not an obligation, so the wait is answered once.
//! A `permission.requested` whose `data.resolvedByHook` is `true` was
//! already answered inside the CLI and is not an obligation either.
//!
//! Several clients may share one session (one resumes the session another
//! keeps open). The CLI sends a waiting event to every client of the
//! session and takes the first answer; a server request goes to one
//! client only. So each row says what a client without the handler does
//! ([`Unhandled`]): an event is left to the client that has the handler
//! (as the official SDKs do: a tool is answered by the client that
//! registered it), a request is refused, since nobody else can answer it.

use crate::envelope::{INTERNAL_ERROR, METHOD_NOT_FOUND};
use crate::json::{JsonStr, Kind, Value};

/// What raises an obligation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trigger {
    /// A `session.event` of this type, carrying `data.requestId`.
    Event(&'static str),
    /// A server-to-client JSON-RPC request with this method.
    Request(&'static str),
}

/// Which user handler answers an obligation. Hosts dispatch on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum HandlerKind {
    /// `permission.requested`.
    Permission,
    /// `external_tool.requested`.
    Tool,
    /// `userInput.request`.
    UserInput,
    /// `elicitation.requested`.
    Elicitation,
    /// `mcp.oauth_required`.
    McpOAuth,
    /// `mcp.headers_refresh_required`.
    McpHeadersRefresh,
    /// `exitPlanMode.request`.
    ExitPlanMode,
    /// `autoModeSwitch.request` and `auto_mode_switch.requested`.
    AutoModeSwitch,
    /// `sampling.requested`.
    Sampling,
    /// `session_limits_exhausted.requested`.
    SessionLimits,
    /// `command.execute`.
    Command,
    /// `command.queued`.
    QueuedCommand,
    /// `hooks.invoke`.
    Hooks,
    /// `systemMessage.transform`.
    SystemMessageTransform,
    /// `providerToken.getToken`.
    ProviderToken,
    /// `gitHubToken.getToken`.
    GitHubToken,
    /// `sessionFs.*`: the client-provided session filesystem.
    SessionFs,
    /// `skillProvider.*`.
    SkillProvider,
    /// `workflow.*`.
    Workflow,
    /// `tasks.*`.
    Tasks,
    /// `canvas.*`.
    Canvas,
    /// `host.*` requests of a supervising host.
    Host,
    /// `extensionLaunchProvider.resolve`.
    ExtensionLaunch,
    /// `llmInference.*`: model HTTP requests served by the client.
    LlmInference,
    /// `uiThread.run`.
    UiThread,
    /// `installations.confirm`.
    Installations,
}

impl HandlerKind {
    /// A stable camel-case name, as the JavaScript binding reports it.
    pub const fn name(self) -> &'static str {
        match self {
            HandlerKind::Permission => "permission",
            HandlerKind::Tool => "tool",
            HandlerKind::UserInput => "userInput",
            HandlerKind::Elicitation => "elicitation",
            HandlerKind::McpOAuth => "mcpOAuth",
            HandlerKind::McpHeadersRefresh => "mcpHeadersRefresh",
            HandlerKind::ExitPlanMode => "exitPlanMode",
            HandlerKind::AutoModeSwitch => "autoModeSwitch",
            HandlerKind::Sampling => "sampling",
            HandlerKind::SessionLimits => "sessionLimits",
            HandlerKind::Command => "command",
            HandlerKind::QueuedCommand => "queuedCommand",
            HandlerKind::Hooks => "hooks",
            HandlerKind::SystemMessageTransform => "systemMessageTransform",
            HandlerKind::ProviderToken => "providerToken",
            HandlerKind::GitHubToken => "gitHubToken",
            HandlerKind::SessionFs => "sessionFs",
            HandlerKind::SkillProvider => "skillProvider",
            HandlerKind::Workflow => "workflow",
            HandlerKind::Tasks => "tasks",
            HandlerKind::Canvas => "canvas",
            HandlerKind::Host => "host",
            HandlerKind::ExtensionLaunch => "extensionLaunch",
            HandlerKind::LlmInference => "llmInference",
            HandlerKind::UiThread => "uiThread",
            HandlerKind::Installations => "installations",
        }
    }
}

impl HandlerKind {
    /// Whether a user's generic request handler (set by name: the
    /// request's method or the event's type) answers this kind; the others
    /// have typed handlers or options of their own in every host
    /// ([`TYPED_HANDLER_KINDS`]).
    pub const fn is_generic(self) -> bool {
        !matches!(
            self,
            HandlerKind::Permission
                | HandlerKind::Tool
                | HandlerKind::UserInput
                | HandlerKind::Elicitation
                | HandlerKind::McpOAuth
                | HandlerKind::ExitPlanMode
                | HandlerKind::Command
                | HandlerKind::SystemMessageTransform
                | HandlerKind::ProviderToken
                | HandlerKind::Hooks
                | HandlerKind::Canvas
                | HandlerKind::LlmInference
        )
    }
}

/// The members of a wait's data (an event's `data`, a request's `params`)
/// that a kind's handler reads to decide, with their JSON kind: a wait
/// whose data lacks one, or has it of another kind, is unreadable and the
/// engine refuses it before any host sees it. Every other member is read
/// leniently by every host (missing or of another kind, it is absent or
/// empty for the handler), as the official SDKs read them.
pub static HANDLER_READS: &[(HandlerKind, &str, Kind)] = &[
    (HandlerKind::Permission, "permissionRequest", Kind::Object),
    (HandlerKind::Tool, "toolName", Kind::String),
    (HandlerKind::UserInput, "question", Kind::String),
    (HandlerKind::Elicitation, "message", Kind::String),
    (HandlerKind::McpOAuth, "serverName", Kind::String),
    (HandlerKind::McpOAuth, "serverUrl", Kind::String),
    (HandlerKind::Command, "commandName", Kind::String),
    (HandlerKind::SystemMessageTransform, "sections", Kind::Object),
    (HandlerKind::ProviderToken, "providerName", Kind::String),
    (HandlerKind::Hooks, "hookType", Kind::String),
    (HandlerKind::Canvas, "canvasId", Kind::String),
];

impl HandlerKind {
    /// The members this kind's handler reads ([`HANDLER_READS`]).
    pub fn reads(self) -> impl Iterator<Item = (&'static str, Kind)> {
        HANDLER_READS.iter().filter(move |r| r.0 == self).map(|r| (r.1, r.2))
    }

    /// Whether `data` is a wait of this kind that its handler can read: an
    /// object (or, for a request, no params where the kind reads nothing)
    /// with every member of [`reads`](Self::reads).
    pub fn can_read(self, data: Option<Value<'_>>) -> bool {
        match data {
            None => self.reads().next().is_none(),
            Some(d) => {
                d.kind() == Kind::Object
                    && self.reads().all(|(name, kind)| d.get(name).is_some_and(|m| m.kind() == kind))
            }
        }
    }
}

/// The handler kinds with typed handlers (or options) of their own in
/// every host. Together with [`GENERIC_HANDLER_KINDS`], every kind of
/// [`ANSWERS`], once.
pub static TYPED_HANDLER_KINDS: &[HandlerKind] = &[
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
    HandlerKind::Canvas,
    HandlerKind::LlmInference,
];

/// The handler kinds answered by a user's generic request handler, by name
/// ([`HandlerKind::is_generic`]).
pub static GENERIC_HANDLER_KINDS: &[HandlerKind] = &[
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
    HandlerKind::Host,
    HandlerKind::ExtensionLaunch,
    HandlerKind::UiThread,
    HandlerKind::Installations,
];

/// The names a generic request handler can be set for: the event type or
/// request method of every row of [`ANSWERS`] whose kind is generic, in
/// the table's order.
pub fn generic_request_names() -> impl Iterator<Item = &'static str> {
    ANSWERS.iter().filter(|r| r.handler.is_generic()).map(|r| match r.trigger {
        Trigger::Event(name) | Trigger::Request(name) => name,
    })
}

/// How an answer travels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AnswerVia {
    /// A request `method` with params `{sessionId, requestId, <key>: answer}`.
    Rpc {
        /// The answering method, such as
        /// `session.permissions.handlePendingPermissionRequest`.
        method: &'static str,
        /// The member the answer goes under (`result`, `response`, `error`).
        key: &'static str,
    },
    /// The JSON-RPC response to the server's request: its `result` is the
    /// answer, or with a `member`, `{"<member>": answer}` (`{}` when the
    /// answer is `null`), as `hooks.invoke` is answered with `{output?}`.
    Response {
        /// The member of the result the answer goes under, if any.
        member: Option<&'static str>,
    },
}

/// What the engine sends when nobody answers: no handler, the handler
/// failed or ran past its deadline, the data is unreadable, the session is
/// gone, parking overflowed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// This JSON under the answer's key (or as the response's `result`).
    Payload(&'static str),
    /// The answering RPC with the key left out (`{sessionId, requestId}`).
    Omit,
    /// A JSON-RPC error response.
    Error {
        /// The error code.
        code: i64,
        /// The error message.
        message: &'static str,
    },
}

/// What a client without the handler does with a wait.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unhandled {
    /// Send the refusal at once: the wait is this client's only.
    Refuse,
    /// Leave it to another client of the session, while another client
    /// can answer it ([`Capabilities::others_may_answer`](crate::Capabilities::others_may_answer));
    /// otherwise the refusal goes at once. A wait left is kept, unanswered,
    /// until the CLI reports it answered (the event `reported_by` with the
    /// same `requestId`), until the handler deadline, or until the session
    /// is released here. At the deadline, no client having answered, the
    /// refusal goes then (counted as [`Cause::Deadline`](crate::Cause)), so
    /// a wait is never left to clients that do not exist; released here, it
    /// is forgotten (another client of the session may still answer it).
    /// The outcomes are counted
    /// ([`EngineStats::left_answered`](crate::EngineStats::left_answered),
    /// [`EngineStats::left_unanswered`](crate::EngineStats::left_unanswered)).
    Leave {
        /// The event type by which the CLI reports the wait answered.
        reported_by: &'static str,
    },
}

/// One obligation kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AnswerRow {
    /// What raises it.
    pub trigger: Trigger,
    /// Which handler answers it.
    pub handler: HandlerKind,
    /// How the answer travels.
    pub via: AnswerVia,
    /// What goes when nobody answers.
    pub refusal: Refusal,
    /// What a client without the handler does.
    pub unhandled: Unhandled,
}

impl AnswerRow {
    /// Where the text of a failed handler (threw, panicked, returned an
    /// error) goes: the member of the answering RPC that carries it in
    /// place of the answer, as a JSON string (a tool's `error`, so the call
    /// is `{sessionId, requestId, error}`, as the official SDKs send it;
    /// the CLI then tells the model in its own words that the tool failed,
    /// and the text stays out of the model's view). `None`: the refusal
    /// goes.
    pub const fn failure(&self) -> Option<&'static str> {
        match (self.handler, self.via) {
            (HandlerKind::Tool, AnswerVia::Rpc { .. }) => Some("error"),
            _ => None,
        }
    }

    /// For a row whose failed handler is answered by a JSON-RPC error
    /// carrying a machine-readable code (the canvas requests, as the
    /// official SDKs answer them): the error's `code`, and the machine
    /// code (`data.code`) when the handler names none. The error's
    /// `message` and `data.message` are the handler's text. `None`: see
    /// [`failure`](Self::failure).
    pub const fn failure_error(&self) -> Option<(i64, &'static str)> {
        match (self.handler, self.via) {
            (HandlerKind::Canvas, AnswerVia::Response { member: None }) => {
                Some((INTERNAL_ERROR, crate::canvas::CANVAS_HANDLER_ERROR))
            }
            _ => None,
        }
    }

    /// Whether a client without the handler leaves the wait to another
    /// client of the session ([`Unhandled::Leave`]).
    pub const fn leaves_unhandled(&self) -> bool {
        matches!(self.unhandled, Unhandled::Leave { .. })
    }
}

/// What a failed handler's text is when it has none: the CLI reads an
/// empty `error` as no error.
pub(crate) const FAILED_WITHOUT_TEXT: &str = "the handler failed";

const fn event(
    ty: &'static str,
    handler: HandlerKind,
    method: &'static str,
    key: &'static str,
    refusal: Refusal,
    unhandled: Unhandled,
) -> AnswerRow {
    AnswerRow { trigger: Trigger::Event(ty), handler, via: AnswerVia::Rpc { method, key }, refusal, unhandled }
}

/// A server request: sent to this client only, so refused without a handler.
const fn request(method: &'static str, handler: HandlerKind, refusal: Refusal) -> AnswerRow {
    AnswerRow {
        trigger: Trigger::Request(method),
        handler,
        via: AnswerVia::Response { member: None },
        refusal,
        unhandled: Unhandled::Refuse,
    }
}

/// Left to the client of the session that has the handler; the CLI
/// reports the wait answered with the event `reported_by`.
const fn leave(reported_by: &'static str) -> Unhandled {
    Unhandled::Leave { reported_by }
}

/// A request this client does not serve: -32601, as for an unknown method.
const NOT_SERVED: Refusal =
    Refusal::Error { code: METHOD_NOT_FOUND, message: "this client does not serve this method" };

const NO_ANSWER: Refusal = Refusal::Error { code: INTERNAL_ERROR, message: "no answer from this client" };

use HandlerKind as H;
use Refusal::Payload as P;

/// Every obligation kind. Refusals are what the official SDKs send without
/// a handler (or when it fails), else the schema's "not handled" variant.
/// A client without the handler sends the refusal only where the row's
/// [`Unhandled`] says so: the events are left to the client of the session
/// that has the handler (the official SDKs send nothing for them: no tool
/// of theirs, no permission, elicitation or MCP OAuth handler, and the
/// kinds they have no handler for at all: sampling, auto-mode switch,
/// session limits, MCP headers, queued commands). The refusal still goes
/// for unreadable data, a failed handler, a session gone.
// A static, not a const: a const slice is copied into each function that
// reads it (two copies of the table in the WebAssembly module).
pub static ANSWERS: &[AnswerRow] = &[
    // Events answered by an RPC.
    event(
        "permission.requested",
        H::Permission,
        "session.permissions.handlePendingPermissionRequest",
        "result",
        P(r#"{"kind":"user-not-available"}"#),
        leave("permission.completed"),
    ),
    event(
        "external_tool.requested",
        H::Tool,
        "session.tools.handlePendingToolCall",
        "result",
        P(r#"{"textResultForLlm":"This client could not run the tool.","resultType":"failure"}"#),
        leave("external_tool.completed"),
    ),
    event(
        "elicitation.requested",
        H::Elicitation,
        "session.ui.handlePendingElicitation",
        "result",
        P(r#"{"action":"cancel"}"#),
        leave("elicitation.completed"),
    ),
    event(
        "sampling.requested",
        H::Sampling,
        "session.ui.handlePendingSampling",
        "response",
        Refusal::Omit,
        leave("sampling.completed"),
    ),
    // `autoModeSwitch.request` may come for the same wait (not seen on the
    // wire with CLI 1.0.102); both stay rows, as the hosts answered both
    // before. A second answer would be acknowledged with `success:false`
    // and counted in `EngineStats::acks_refused`.
    event(
        "auto_mode_switch.requested",
        H::AutoModeSwitch,
        "session.ui.handlePendingAutoModeSwitch",
        "response",
        P(r#""no""#),
        leave("auto_mode_switch.completed"),
    ),
    event(
        "session_limits_exhausted.requested",
        H::SessionLimits,
        "session.ui.handlePendingSessionLimitsExhausted",
        "response",
        P(r#"{"action":"cancel"}"#),
        leave("session_limits_exhausted.completed"),
    ),
    event(
        "mcp.oauth_required",
        H::McpOAuth,
        "session.mcp.oauth.handlePendingRequest",
        "result",
        P(r#"{"kind":"cancelled"}"#),
        leave("mcp.oauth_completed"),
    ),
    event(
        "mcp.headers_refresh_required",
        H::McpHeadersRefresh,
        "session.mcp.headers.handlePendingHeadersRefreshRequest",
        "result",
        P(r#"{"kind":"none"}"#),
        leave("mcp.headers_refresh_completed"),
    ),
    // The CLI routes a command to the client that registered it (the
    // schema: "routed to the owning client"; seen with two clients in
    // tests/tests/multi_client.rs), so no other client can answer; the
    // official SDKs answer every one ("Unknown command: X").
    event(
        "command.execute",
        H::Command,
        "session.commands.handlePendingCommand",
        "error",
        P(r#""This client has no handler for this command.""#),
        Unhandled::Refuse,
    ),
    event(
        "command.queued",
        H::QueuedCommand,
        "session.commands.respondToQueuedCommand",
        "result",
        P(r#"{"handled":false}"#),
        leave("command.completed"),
    ),
    // Server requests the schema lacks.
    request(
        "userInput.request",
        H::UserInput,
        Refusal::Error { code: INTERNAL_ERROR, message: "the user is not available" },
    ),
    // The SDKs approve without a handler; a refusal here does not approve a
    // plan nobody saw (the model is told the plan was not approved).
    request("exitPlanMode.request", H::ExitPlanMode, P(r#"{"approved":false}"#)),
    request("autoModeSwitch.request", H::AutoModeSwitch, P(r#"{"response":"no"}"#)),
    request(
        "systemMessage.transform",
        H::SystemMessageTransform,
        Refusal::Error { code: INTERNAL_ERROR, message: "no transform: keep the original text" },
    ),
    // clientGlobal.
    // A hook that gives no output (or none is set) answers `{}`.
    AnswerRow {
        via: AnswerVia::Response { member: Some("output") },
        ..request("hooks.invoke", H::Hooks, Refusal::Omit)
    },
    request("host.unregisterSession", H::Host, NOT_SERVED),
    request("host.registerSession", H::Host, NOT_SERVED),
    request("host.materializeSession", H::Host, NOT_SERVED),
    request("host.shutdown", H::Host, NOT_SERVED),
    request("extensionLaunchProvider.resolve", H::ExtensionLaunch, NOT_SERVED),
    request("llmInference.httpRequestStart", H::LlmInference, NOT_SERVED),
    request("llmInference.httpRequestChunk", H::LlmInference, NOT_SERVED),
    request("gitHubToken.getToken", H::GitHubToken, NO_ANSWER),
    request("uiThread.run", H::UiThread, NOT_SERVED),
    request("installations.confirm", H::Installations, NOT_SERVED),
    // clientSession.
    request("skillProvider.list", H::SkillProvider, NOT_SERVED),
    request("skillProvider.read", H::SkillProvider, NOT_SERVED),
    request("providerToken.getToken", H::ProviderToken, NO_ANSWER),
    request("workflow.execute", H::Workflow, NOT_SERVED),
    request("workflow.abort", H::Workflow, NOT_SERVED),
    request("tasks.cancel", H::Tasks, NOT_SERVED),
    request("sessionFs.readFile", H::SessionFs, NOT_SERVED),
    request("sessionFs.readFileBytes", H::SessionFs, NOT_SERVED),
    request("sessionFs.writeFile", H::SessionFs, NOT_SERVED),
    request("sessionFs.writeFileBytes", H::SessionFs, NOT_SERVED),
    request("sessionFs.appendFile", H::SessionFs, NOT_SERVED),
    request("sessionFs.exists", H::SessionFs, NOT_SERVED),
    request("sessionFs.stat", H::SessionFs, NOT_SERVED),
    request("sessionFs.mkdir", H::SessionFs, NOT_SERVED),
    request("sessionFs.readdir", H::SessionFs, NOT_SERVED),
    request("sessionFs.readdirWithTypes", H::SessionFs, NOT_SERVED),
    request("sessionFs.rm", H::SessionFs, NOT_SERVED),
    request("sessionFs.rename", H::SessionFs, NOT_SERVED),
    request("sessionFs.sqliteQuery", H::SessionFs, NOT_SERVED),
    request("sessionFs.sqliteTransaction", H::SessionFs, NOT_SERVED),
    request("sessionFs.sqliteExists", H::SessionFs, NOT_SERVED),
    request("canvas.open", H::Canvas, NOT_SERVED),
    request("canvas.close", H::Canvas, NOT_SERVED),
    request("canvas.action.invoke", H::Canvas, NOT_SERVED),
];

/// Events that carry a `data.requestId` but are not obligations, with the
/// reason. Together with the event rows of [`ANSWERS`] they cover every
/// event of the schema that has a `requestId`.
pub const NOT_OBLIGATIONS: &[(&str, &str)] = &[
    ("user_input.requested", "answered through the userInput.request server request"),
    ("exit_plan_mode.requested", "answered through the exitPlanMode.request server request"),
    ("permission.completed", "reports an answer"),
    ("permission.carriedForward", "reports a decision already made"),
    ("permission.assentDetected", "telemetry"),
    ("permission.contextualAuthorization", "telemetry"),
    ("user_input.completed", "reports an answer"),
    ("elicitation.completed", "reports an answer"),
    ("sampling.completed", "reports an answer"),
    ("mcp.oauth_completed", "reports an answer"),
    ("mcp.oauth_recovery_completed", "reports an outcome"),
    ("mcp.headers_refresh_completed", "reports an answer"),
    ("ui.ephemeral_query", "a query phase report; nothing waits on the client"),
    ("external_tool.completed", "reports an answer"),
    ("command.completed", "reports an answer"),
    ("auto_mode_switch.completed", "reports an answer"),
    ("session_limits_exhausted.completed", "reports an answer"),
    ("exit_plan_mode.completed", "reports an answer"),
    ("human_response.recorded", "reports an answer"),
    ("session.autopilot_stopped", "a report; the request id is informational"),
    ("session.compaction_complete", "a report"),
    ("assistant.message", "a message; its request id names the model call"),
];

/// The row of an awaited event type.
pub fn row_for_event(event_type: JsonStr<'_>) -> Option<(u16, &'static AnswerRow)> {
    // Every event is looked up: compare plain bytes when there are no
    // escapes (always, in practice), decoded characters otherwise.
    match event_type.as_plain() {
        Some(plain) => find(|t| matches!(t, Trigger::Event(e) if plain == *e)),
        None => find(|t| matches!(t, Trigger::Event(e) if event_type == *e)),
    }
}

/// The row whose waits the event type `event_type` reports answered
/// ([`Unhandled::Leave`]), if any.
pub(crate) fn row_reported_by(event_type: JsonStr<'_>) -> Option<u16> {
    let reports = |r: &AnswerRow| matches!(r.unhandled, Unhandled::Leave { reported_by } if event_type == reported_by);
    ANSWERS.iter().position(reports).map(|i| i as u16)
}

/// The row of a server request method.
pub fn row_for_request(method: JsonStr<'_>) -> Option<(u16, &'static AnswerRow)> {
    match method.as_plain() {
        Some(plain) => find(|t| matches!(t, Trigger::Request(m) if plain == *m)),
        None => find(|t| matches!(t, Trigger::Request(m) if method == *m)),
    }
}

fn find(mut f: impl FnMut(&Trigger) -> bool) -> Option<(u16, &'static AnswerRow)> {
    ANSWERS.iter().enumerate().find(|(_, r)| f(&r.trigger)).map(|(i, r)| (i as u16, r))
}
