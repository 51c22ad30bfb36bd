//! Typed session events: the `params.event` object of a `session.event`
//! notification, and the params of a `session.lifecycle` notification.
//!
//! The CLI's event schema grows with every release, so parsing never loses an
//! event: a type without a typed variant, or a typed one whose `data` no
//! longer fits its struct, becomes [`EventKind::Other`] with the data kept.
//! Only an envelope that is not an object with a string `type` is an error.
//!
//! Field lists follow the generated `session-events.ts` of the official SDKs
//! (protocol version 3). Fields the schema marks optional are `Option`s;
//! unknown fields are ignored. Enumerations (abort reasons, modes, ...) stay
//! strings, so a new value does not turn a whole event into `Other`.

use std::borrow::Cow;
use std::fmt;

use serde::de::{self, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::Value;

/// One event of a session: the `params.event` object of a `session.event`
/// notification.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionEvent {
    /// `id`: the event's UUID (empty if the event has none).
    pub id: String,
    /// `parentId`: the event this one follows, `None` for the first.
    pub parent_id: Option<String>,
    /// `timestamp`: ISO 8601 (empty if the event has none).
    pub timestamp: String,
    /// `ephemeral`: the event is not persisted to the session's log.
    pub ephemeral: bool,
    /// `agentId`: the sub-agent that produced the event, `None` for the root agent.
    pub agent_id: Option<String>,
    /// The `type` and its `data`.
    pub kind: EventKind,
}

impl SessionEvent {
    /// The wire `type` of the event, such as `assistant.message`.
    pub fn event_type(&self) -> &str {
        self.kind.event_type()
    }

    /// An event that serde cannot read (a lone surrogate in a string, a
    /// number out of range) though it is valid on the wire: delivered as
    /// [`EventKind::Other`] with its raw `data` text as a JSON string.
    pub(crate) fn raw(event: &[u8]) -> SessionEvent {
        let v = copilot_core::Value::parse(event).ok();
        let text = |key: &str| {
            let s = v.as_ref().and_then(|v| v.get(key)).and_then(|s| s.as_str())?;
            let mut buf = vec![0; s.raw().len()];
            s.decode_into(&mut buf).map(str::to_owned)
        };
        let data = v.as_ref().and_then(|v| v.get("data")).map(|d| String::from_utf8_lossy(d.as_bytes()).into_owned());
        SessionEvent {
            id: text("id").unwrap_or_default(),
            parent_id: text("parentId"),
            timestamp: text("timestamp").unwrap_or_default(),
            ephemeral: false,
            agent_id: text("agentId"),
            kind: EventKind::Other {
                event_type: text("type").unwrap_or_default(),
                data: data.map_or(serde_json::Value::Null, serde_json::Value::String),
            },
        }
    }

    /// Parses the JSON of a `params.event` object
    /// (`{type, data, id, timestamp, parentId, ephemeral?, agentId?}`).
    ///
    /// Fails only when `event` is not a JSON object with a string `type`.
    /// Data that does not fit the typed variant of its type gives
    /// [`EventKind::Other`]; an absent `data` is read as `{}`; an absent or
    /// non-string `id` or `timestamp` gives an empty string.
    pub fn from_json(event: &[u8]) -> Result<SessionEvent, serde_json::Error> {
        let envelope: Envelope<'_> = serde_json::from_slice(event)?;
        let kind = match envelope.data {
            // `Some` only when a repeated `type` named a typed one after the
            // data was read for an untyped one.
            EventData::Parsed(data) => match EventKind::parse_typed_value(&envelope.event_type, &data) {
                Some(kind) => kind,
                None => EventKind::Other { event_type: envelope.event_type.into_owned(), data },
            },
            EventData::Raw(raw) => {
                // Every event type's data is an object in the schema, and an
                // object lets the structs whose fields are all optional parse.
                let data = raw.map_or("{}", RawValue::get);
                match EventKind::parse_typed(&envelope.event_type, data) {
                    Some(kind) => kind,
                    None => EventKind::Other {
                        event_type: envelope.event_type.into_owned(),
                        data: serde_json::from_str(data)?,
                    },
                }
            }
        };
        Ok(SessionEvent {
            id: envelope.id.unwrap_or_default(),
            parent_id: envelope.parent_id,
            timestamp: envelope.timestamp.unwrap_or_default(),
            ephemeral: envelope.ephemeral,
            agent_id: envelope.agent_id,
            kind,
        })
    }
}

// Declares the typed variants once, so the enum, the wire names and the parse
// dispatch cannot disagree.
macro_rules! event_kinds {
    ($( $(#[$attr:meta])* $variant:ident($data:ty) = $wire:literal, )*) => {
        /// The `type` of a session event and its `data`, typed where this crate
        /// knows the type.
        #[derive(Debug, Clone, PartialEq)]
        #[non_exhaustive]
        pub enum EventKind {
            $( $(#[$attr])* $variant($data), )*
            /// Any other type, or a typed one whose data did not fit its struct
            /// (schema drift). Nothing of the event is lost.
            Other {
                /// The wire `type`.
                event_type: String,
                /// The `data`, as received.
                data: Value,
            },
        }

        impl EventKind {
            /// The wire `type`, such as `assistant.message`.
            pub fn event_type(&self) -> &str {
                match self {
                    $( EventKind::$variant(_) => $wire, )*
                    EventKind::Other { event_type, .. } => event_type,
                }
            }

            // Whether `event_type` has a typed variant.
            fn is_typed(event_type: &str) -> bool {
                matches!(event_type, $( $wire )|*)
            }

            // `None` when the type has no typed variant or the data does not
            // fit it; the caller then keeps the data as `Other`.
            fn parse_typed(event_type: &str, data: &str) -> Option<EventKind> {
                match event_type {
                    $( $wire => serde_json::from_str(data).ok().map(EventKind::$variant), )*
                    _ => None,
                }
            }

            // As `parse_typed`, for data already parsed into a `Value`.
            fn parse_typed_value(event_type: &str, data: &Value) -> Option<EventKind> {
                match event_type {
                    $( $wire => <$data>::deserialize(data).ok().map(EventKind::$variant), )*
                    _ => None,
                }
            }
        }

        #[cfg(test)]
        // The wire types that have a typed variant.
        const TYPED_EVENT_TYPES: &[&str] = &[$($wire),*];
    };
}

event_kinds! {
    /// `session.start`: the session was created.
    SessionStart(StartData) = "session.start",
    /// `session.resume`: the session was resumed from its log.
    SessionResume(ResumeData) = "session.resume",
    /// `session.idle`: the session finished processing and waits for input.
    SessionIdle(IdleData) = "session.idle",
    /// `session.error`: the session hit an error.
    SessionError(ErrorData) = "session.error",
    /// `session.title_changed`: the session got a new title.
    SessionTitleChanged(TitleChangedData) = "session.title_changed",
    /// `session.shutdown`: the session ended; its usage summary, as received.
    SessionShutdown(Value) = "session.shutdown",
    /// `user.message`: a message from the user entered the conversation.
    UserMessage(UserMessageData) = "user.message",
    /// `assistant.turn_start`: the agent began a turn.
    AssistantTurnStart(TurnStartData) = "assistant.turn_start",
    /// `assistant.message`: a complete assistant message.
    AssistantMessage(AssistantMessageData) = "assistant.message",
    /// `assistant.message_delta`: a streamed piece of an assistant message.
    AssistantMessageDelta(AssistantMessageDeltaData) = "assistant.message_delta",
    /// `assistant.reasoning`: a complete reasoning block.
    AssistantReasoning(AssistantReasoningData) = "assistant.reasoning",
    /// `assistant.reasoning_delta`: a streamed piece of a reasoning block.
    AssistantReasoningDelta(AssistantReasoningDeltaData) = "assistant.reasoning_delta",
    /// `assistant.turn_end`: the agent finished a turn.
    AssistantTurnEnd(TurnEndData) = "assistant.turn_end",
    /// `assistant.idle`: the assistant stopped producing output.
    AssistantIdle(IdleData) = "assistant.idle",
    /// `abort`: the current turn was aborted.
    Abort(AbortData) = "abort",
    /// `tool.execution_start`: a tool began running.
    ToolExecutionStart(ToolExecutionStartData) = "tool.execution_start",
    /// `tool.execution_complete`: a tool finished.
    ToolExecutionComplete(ToolExecutionCompleteData) = "tool.execution_complete",
    /// `permission.requested`: the agent waits for a permission decision
    /// (unless `resolved_by_hook`).
    PermissionRequested(PermissionRequestedData) = "permission.requested",
    /// `permission.completed`: a permission request was decided.
    PermissionCompleted(PermissionCompletedData) = "permission.completed",
    /// `external_tool.requested`: the agent waits for the client to run one
    /// of its tools.
    ExternalToolRequested(ExternalToolRequestedData) = "external_tool.requested",
    /// `external_tool.completed`: an external tool request was answered.
    ExternalToolCompleted(ExternalToolCompletedData) = "external_tool.completed",
    /// `user_input.requested`: the agent waits for the user to answer a question.
    UserInputRequested(UserInputRequestedData) = "user_input.requested",
    /// `user_input.completed`: a user input request was answered.
    UserInputCompleted(UserInputCompletedData) = "user_input.completed",
    /// `elicitation.requested`: the agent waits for the user to fill in a
    /// form or visit a URL.
    ElicitationRequested(ElicitationRequestedData) = "elicitation.requested",
    /// `mcp.oauth_required`: an MCP server needs OAuth credentials from the host.
    McpOauthRequired(McpOauthRequiredData) = "mcp.oauth_required",
    /// `command.execute`: the agent waits for the client to run a slash command.
    CommandExecute(CommandExecuteData) = "command.execute",
    /// `exit_plan_mode.requested`: the agent waits for approval of its plan.
    ExitPlanModeRequested(ExitPlanModeRequestedData) = "exit_plan_mode.requested",
}

impl EventKind {
    /// `data.requestId`: the id that correlates a request-like event, the
    /// client's answer to it and its `*.completed` event.
    ///
    /// For [`EventKind::Other`] it is read from the raw data, so a request
    /// without a typed variant (such as `sampling.requested`) or one whose
    /// data drifted still yields the id its answer must carry.
    pub fn request_id(&self) -> Option<&str> {
        match self {
            EventKind::PermissionRequested(d) => Some(&d.request_id),
            EventKind::PermissionCompleted(d) => Some(&d.request_id),
            EventKind::ExternalToolRequested(d) => Some(&d.request_id),
            EventKind::ExternalToolCompleted(d) => Some(&d.request_id),
            EventKind::UserInputRequested(d) => Some(&d.request_id),
            EventKind::UserInputCompleted(d) => Some(&d.request_id),
            EventKind::ElicitationRequested(d) => Some(&d.request_id),
            EventKind::McpOauthRequired(d) => Some(&d.request_id),
            EventKind::CommandExecute(d) => Some(&d.request_id),
            EventKind::ExitPlanModeRequested(d) => Some(&d.request_id),
            EventKind::Other { data, .. } => data.get("requestId").and_then(Value::as_str),
            _ => None,
        }
    }
}

/// The data of `session.start`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct StartData {
    /// The session's id.
    pub session_id: String,
    /// The version of the session log format.
    pub version: u64,
    /// What produced the session, such as `copilot-agent`.
    pub producer: String,
    /// The CLI version.
    pub copilot_version: String,
    /// When the session started (ISO 8601).
    pub start_time: String,
    /// The model chosen for the session.
    #[serde(default)]
    pub selected_model: Option<String>,
    /// The working directory context (`{cwd, gitRoot?, repository?, branch?, ...}`).
    #[serde(default)]
    pub context: Option<Value>,
    /// The reasoning effort setting.
    #[serde(default)]
    pub reasoning_effort: Option<String>,
    /// The session log was already in use by another process.
    #[serde(default)]
    pub already_in_use: Option<bool>,
    /// The session can be steered remotely.
    #[serde(default)]
    pub remote_steerable: Option<bool>,
}

/// The data of `session.resume`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct ResumeData {
    /// When the session was resumed (ISO 8601).
    pub resume_time: String,
    /// How many events the resumed log held.
    pub event_count: u64,
    /// The model chosen for the session.
    #[serde(default)]
    pub selected_model: Option<String>,
    /// The working directory context (`{cwd, gitRoot?, repository?, branch?, ...}`).
    #[serde(default)]
    pub context: Option<Value>,
    /// The reasoning effort setting.
    #[serde(default)]
    pub reasoning_effort: Option<String>,
    /// The session log was already in use by another process.
    #[serde(default)]
    pub already_in_use: Option<bool>,
    /// The session can be steered remotely.
    #[serde(default)]
    pub remote_steerable: Option<bool>,
    /// The session was still processing when it was resumed.
    #[serde(default)]
    pub session_was_active: Option<bool>,
    /// Work pending at the time of the resume continues.
    #[serde(default)]
    pub continue_pending_work: Option<bool>,
}

/// The data of `session.idle` and `assistant.idle`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct IdleData {
    /// The turn ended because it was aborted.
    #[serde(default)]
    pub aborted: Option<bool>,
}

/// The data of `session.error`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct ErrorData {
    /// The category of error, such as `authentication` or `rate_limit`.
    pub error_type: String,
    /// A human-readable description.
    pub message: String,
    /// A machine-readable code from the provider.
    #[serde(default)]
    pub error_code: Option<String>,
    /// The HTTP status of the failed request.
    #[serde(default)]
    pub status_code: Option<u64>,
    /// The stack trace.
    #[serde(default)]
    pub stack: Option<String>,
    /// A URL with more information.
    #[serde(default)]
    pub url: Option<String>,
    /// The provider's id of the failed call.
    #[serde(default)]
    pub provider_call_id: Option<String>,
    /// The service's id of the failed request.
    #[serde(default)]
    pub service_request_id: Option<String>,
    /// Switching to another model might get past the error.
    #[serde(default)]
    pub eligible_for_auto_switch: Option<bool>,
}

/// The data of `session.title_changed`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct TitleChangedData {
    /// The new title.
    pub title: String,
}

/// The data of `user.message`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct UserMessageData {
    /// The text the user sent.
    pub content: String,
    /// The text as given to the model (with injected context).
    #[serde(default)]
    pub transformed_content: Option<String>,
    /// The message's id.
    #[serde(default)]
    pub message_id: Option<String>,
    /// Files, selections and other attachments, as received.
    #[serde(default)]
    pub attachments: Option<Value>,
    /// Where the message came from.
    #[serde(default)]
    pub source: Option<String>,
    /// The agent mode when it was sent (`interactive`, `plan`, `autopilot`, ...).
    #[serde(default)]
    pub agent_mode: Option<String>,
    /// How the message was delivered (`idle`, ...).
    #[serde(default)]
    pub delivery: Option<String>,
    /// The interaction the message started.
    #[serde(default)]
    pub interaction_id: Option<String>,
    /// The turn the message belongs to.
    #[serde(default)]
    pub turn_id: Option<String>,
}

/// The data of `assistant.turn_start`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct TurnStartData {
    /// The turn's id.
    pub turn_id: String,
    /// The interaction the turn belongs to.
    #[serde(default)]
    pub interaction_id: Option<String>,
    /// The model of the turn.
    #[serde(default)]
    pub model: Option<String>,
}

/// The data of `assistant.turn_end`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct TurnEndData {
    /// The turn's id.
    pub turn_id: String,
    /// The model of the turn.
    #[serde(default)]
    pub model: Option<String>,
}

/// The data of `assistant.message`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct AssistantMessageData {
    /// The message's id.
    pub message_id: String,
    /// The text of the message (empty when it only requests tools).
    pub content: String,
    /// The tool calls the message requests.
    #[serde(default)]
    pub tool_requests: Vec<ToolRequest>,
    /// The model's readable reasoning.
    #[serde(default)]
    pub reasoning_text: Option<String>,
    /// The model's opaque reasoning token.
    #[serde(default)]
    pub reasoning_opaque: Option<String>,
    /// The model's encrypted reasoning.
    #[serde(default)]
    pub encrypted_content: Option<String>,
    /// The generation phase of the message.
    #[serde(default)]
    pub phase: Option<String>,
    /// The model that wrote the message.
    #[serde(default)]
    pub model: Option<String>,
    /// The turn the message belongs to.
    #[serde(default)]
    pub turn_id: Option<String>,
    /// The interaction the message belongs to.
    #[serde(default)]
    pub interaction_id: Option<String>,
    /// The tool call of the sub-agent that wrote the message, if any.
    #[serde(default)]
    pub parent_tool_call_id: Option<String>,
    /// How many tokens the message cost.
    #[serde(default)]
    pub output_tokens: Option<u64>,
}

/// A tool call requested by an assistant message.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct ToolRequest {
    /// The call's id.
    pub tool_call_id: String,
    /// The tool's name.
    pub name: String,
    /// The call's arguments.
    #[serde(default)]
    pub arguments: Option<Value>,
    /// `type`: `function` or `custom`.
    #[serde(default, rename = "type")]
    pub call_type: Option<String>,
    /// A title for the call to show the user.
    #[serde(default)]
    pub tool_title: Option<String>,
    /// A short summary of what the call is for.
    #[serde(default)]
    pub intention_summary: Option<String>,
    /// The MCP server that provides the tool.
    #[serde(default)]
    pub mcp_server_name: Option<String>,
    /// The tool's name on its MCP server.
    #[serde(default)]
    pub mcp_tool_name: Option<String>,
}

/// The data of `assistant.message_delta`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct AssistantMessageDeltaData {
    /// The message the piece belongs to.
    pub message_id: String,
    /// The text to append.
    pub delta_content: String,
    /// The tool call of the sub-agent that writes the message, if any.
    #[serde(default)]
    pub parent_tool_call_id: Option<String>,
}

/// The data of `assistant.reasoning`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct AssistantReasoningData {
    /// The reasoning block's id.
    pub reasoning_id: String,
    /// The reasoning text.
    pub content: String,
}

/// The data of `assistant.reasoning_delta`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct AssistantReasoningDeltaData {
    /// The reasoning block the piece belongs to.
    pub reasoning_id: String,
    /// The text to append.
    pub delta_content: String,
}

/// The data of `abort`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct AbortData {
    /// Why: `user_initiated`, `remote_command`, `user_abort`, `autopilot_credit_limit`, ...
    pub reason: String,
}

/// The data of `tool.execution_start`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct ToolExecutionStartData {
    /// The call's id.
    pub tool_call_id: String,
    /// The tool's name.
    pub tool_name: String,
    /// The call's arguments.
    #[serde(default)]
    pub arguments: Option<Value>,
    /// The MCP server that provides the tool.
    #[serde(default)]
    pub mcp_server_name: Option<String>,
    /// The tool's name on its MCP server.
    #[serde(default)]
    pub mcp_tool_name: Option<String>,
    /// The tool call of the sub-agent that runs the tool, if any.
    #[serde(default)]
    pub parent_tool_call_id: Option<String>,
    /// The model that requested the call.
    #[serde(default)]
    pub model: Option<String>,
    /// The turn the call belongs to.
    #[serde(default)]
    pub turn_id: Option<String>,
}

/// The data of `tool.execution_complete`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct ToolExecutionCompleteData {
    /// The call's id.
    pub tool_call_id: String,
    /// The tool succeeded.
    pub success: bool,
    /// What the tool returned, on success.
    #[serde(default)]
    pub result: Option<ToolResult>,
    /// What went wrong, on failure.
    #[serde(default)]
    pub error: Option<ToolError>,
    /// The user, not the model, asked for the call.
    #[serde(default)]
    pub is_user_requested: Option<bool>,
    /// The tool call of the sub-agent that ran the tool, if any.
    #[serde(default)]
    pub parent_tool_call_id: Option<String>,
    /// The model that requested the call.
    #[serde(default)]
    pub model: Option<String>,
    /// The turn the call belongs to.
    #[serde(default)]
    pub turn_id: Option<String>,
    /// The interaction the call belongs to.
    #[serde(default)]
    pub interaction_id: Option<String>,
    /// Telemetry about the call, as received.
    #[serde(default)]
    pub tool_telemetry: Option<Value>,
}

/// The result of a successful tool call.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct ToolResult {
    /// The result as given to the model.
    pub content: String,
    /// The full result, for display.
    #[serde(default)]
    pub detailed_content: Option<String>,
    /// Structured output (MCP `structuredContent`), as received.
    #[serde(default)]
    pub structured_content: Option<Value>,
}

/// The error of a failed tool call.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct ToolError {
    /// A human-readable description.
    pub message: String,
    /// A machine-readable code.
    #[serde(default)]
    pub code: Option<String>,
}

/// The data of `permission.requested`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct PermissionRequestedData {
    /// The id the decision must carry.
    pub request_id: String,
    /// What is asked, as received: a union on `kind` (`shell`, `write`,
    /// `read`, `mcp`, `url`, `memory`, `custom-tool`, `hook`, ...).
    pub permission_request: Value,
    /// What to show the user, as received.
    #[serde(default)]
    pub prompt_request: Option<Value>,
    /// A hook already decided: the client must not answer.
    #[serde(default)]
    pub resolved_by_hook: Option<bool>,
}

impl PermissionRequestedData {
    /// `permissionRequest.kind`, such as `shell` or `custom-tool`.
    pub fn kind(&self) -> Option<&str> {
        self.permission_request.get("kind").and_then(Value::as_str)
    }
}

/// The data of `permission.completed`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct PermissionCompletedData {
    /// The id of the request that was decided.
    pub request_id: String,
    /// The tool call the permission was for.
    #[serde(default)]
    pub tool_call_id: Option<String>,
    /// The decision, as received: a union on `kind`.
    pub result: Value,
}

impl PermissionCompletedData {
    /// `result.kind`, such as `approved` or `denied-interactively-by-user`.
    pub fn result_kind(&self) -> Option<&str> {
        self.result.get("kind").and_then(Value::as_str)
    }
}

/// The data of `external_tool.requested`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct ExternalToolRequestedData {
    /// The id the tool's result must carry.
    pub request_id: String,
    /// The session the call belongs to.
    pub session_id: String,
    /// The call's id.
    pub tool_call_id: String,
    /// The tool's name, as the client registered it.
    pub tool_name: String,
    /// The call's arguments.
    #[serde(default)]
    pub arguments: Option<Value>,
    /// The directory the tool should run in.
    #[serde(default)]
    pub working_directory: Option<String>,
    /// The provider of the tool.
    #[serde(default)]
    pub provider_id: Option<String>,
    /// W3C trace context `traceparent`.
    #[serde(default)]
    pub traceparent: Option<String>,
    /// W3C trace context `tracestate`.
    #[serde(default)]
    pub tracestate: Option<String>,
}

/// The data of `external_tool.completed`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct ExternalToolCompletedData {
    /// The id of the request that was answered.
    pub request_id: String,
}

/// The data of `user_input.requested`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct UserInputRequestedData {
    /// The id the answer must carry.
    pub request_id: String,
    /// The question to ask.
    pub question: String,
    /// Answers to offer.
    #[serde(default)]
    pub choices: Vec<String>,
    /// Whether an answer outside `choices` is allowed.
    #[serde(default)]
    pub allow_freeform: Option<bool>,
    /// The tool call that asks.
    #[serde(default)]
    pub tool_call_id: Option<String>,
}

/// The data of `user_input.completed`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct UserInputCompletedData {
    /// The id of the request that was answered.
    pub request_id: String,
    /// The answer.
    #[serde(default)]
    pub answer: Option<String>,
    /// The answer was typed rather than picked from the choices.
    #[serde(default)]
    pub was_freeform: Option<bool>,
}

/// The data of `elicitation.requested`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct ElicitationRequestedData {
    /// The id the answer must carry.
    pub request_id: String,
    /// What to tell the user.
    pub message: String,
    /// The form's JSON schema (`{type: "object", properties, required?}`), as received.
    #[serde(default)]
    pub requested_schema: Option<Value>,
    /// `form` (the default) or `url`.
    #[serde(default)]
    pub mode: Option<String>,
    /// The URL to open, in `url` mode.
    #[serde(default)]
    pub url: Option<String>,
    /// Who asks, such as an MCP server.
    #[serde(default)]
    pub elicitation_source: Option<String>,
    /// The tool call that asks.
    #[serde(default)]
    pub tool_call_id: Option<String>,
}

/// The data of `mcp.oauth_required`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct McpOauthRequiredData {
    /// The id the credentials must carry.
    pub request_id: String,
    /// The MCP server's name.
    pub server_name: String,
    /// The MCP server's URL.
    pub server_url: String,
    /// Why: `initial`, `refresh`, `reauth`, `upscope`, ...
    pub reason: String,
    /// The URL of the server's OAuth protected resource metadata.
    #[serde(default)]
    pub resource_metadata: Option<String>,
    /// The server's HTTP response that demanded authorization, as received.
    #[serde(default)]
    pub http_response: Option<Value>,
    /// A configured OAuth client for the server, as received.
    #[serde(default)]
    pub static_client_config: Option<Value>,
    /// The parameters of the server's `WWW-Authenticate` header, as received.
    #[serde(default)]
    pub www_authenticate_params: Option<Value>,
}

/// The data of `command.execute`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct CommandExecuteData {
    /// The id the outcome must carry.
    pub request_id: String,
    /// The whole command line, such as `/deploy prod`.
    pub command: String,
    /// The command's name, such as `deploy`.
    pub command_name: String,
    /// The text after the name.
    pub args: String,
}

/// The data of `exit_plan_mode.requested`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct ExitPlanModeRequestedData {
    /// The id the answer must carry.
    pub request_id: String,
    /// A summary of the plan.
    pub summary: String,
    /// The full plan.
    pub plan_content: String,
    /// The actions to offer: `exit_only`, `interactive`, `autopilot`, `autopilot_fleet`, ...
    pub actions: Vec<String>,
    /// The action the agent recommends.
    pub recommended_action: String,
    /// The model that wrote the plan.
    #[serde(default)]
    pub model: Option<String>,
}

/// A change to a session's life: the params of a `session.lifecycle`
/// notification.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LifecycleEvent {
    /// `type`: `session.created`, `session.updated`, `session.deleted`,
    /// `session.foreground`, `session.background`, ...
    #[serde(rename = "type")]
    pub kind: String,
    /// The session it concerns.
    pub session_id: String,
    /// `{startTime, modifiedTime, summary?}`, as received.
    #[serde(default)]
    pub metadata: Option<Value>,
}

impl LifecycleEvent {
    /// Parses the JSON of a `session.lifecycle` notification's params
    /// (`{type, sessionId, metadata?}`). Fails when `type` or `sessionId` is
    /// not a string.
    pub fn from_json(params: &[u8]) -> Result<LifecycleEvent, serde_json::Error> {
        serde_json::from_slice(params)
    }
}

// The outer event object, read in one pass. `type` borrows from the input
// unless it has escapes.
struct Envelope<'a> {
    event_type: Cow<'a, str>,
    data: EventData<'a>,
    id: Option<String>,
    timestamp: Option<String>,
    parent_id: Option<String>,
    ephemeral: bool,
    agent_id: Option<String>,
}

// The event's `data`. When `type` comes first (as the CLI writes it) and has
// no typed variant, the data is parsed straight into a `Value`, in one pass.
// Otherwise it stays raw text (`None` if absent), parsed once the type is
// known and parsed again as a `Value` only if it does not fit its struct.
enum EventData<'a> {
    Raw(Option<&'a RawValue>),
    Parsed(Value),
}

#[derive(Deserialize)]
#[serde(field_identifier, rename_all = "camelCase")]
enum EnvelopeField {
    Type,
    Data,
    Id,
    Timestamp,
    ParentId,
    Ephemeral,
    AgentId,
    #[serde(other)]
    Unknown,
}

impl<'de: 'a, 'a> Deserialize<'de> for Envelope<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(EnvelopeVisitor(std::marker::PhantomData))
    }
}

struct EnvelopeVisitor<'a>(std::marker::PhantomData<&'a ()>);

impl<'de: 'a, 'a> Visitor<'de> for EnvelopeVisitor<'a> {
    type Value = Envelope<'a>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a session event object with a string \"type\"")
    }

    // A repeated key keeps its last value, as a generic JSON parser would,
    // instead of failing the event.
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Envelope<'a>, A::Error> {
        let mut event_type: Option<Cow<'a, str>> = None;
        let mut envelope = Envelope {
            event_type: Cow::Borrowed(""),
            data: EventData::Raw(None),
            id: None,
            timestamp: None,
            parent_id: None,
            ephemeral: false,
            agent_id: None,
        };
        while let Some(field) = map.next_key::<EnvelopeField>()? {
            // Metadata of the wrong JSON type is dropped rather than failing
            // the event: only `type` is needed to deliver it.
            match field {
                EnvelopeField::Type => event_type = Some(map.next_value::<EventTypeStr<'a>>()?.0),
                EnvelopeField::Data => {
                    envelope.data = match &event_type {
                        Some(known) if !EventKind::is_typed(known) => EventData::Parsed(map.next_value()?),
                        _ => EventData::Raw(Some(map.next_value()?)),
                    }
                }
                EnvelopeField::Id => envelope.id = map.next_value::<LenientScalar>()?.into_string(),
                EnvelopeField::Timestamp => envelope.timestamp = map.next_value::<LenientScalar>()?.into_string(),
                EnvelopeField::ParentId => envelope.parent_id = map.next_value::<LenientScalar>()?.into_string(),
                EnvelopeField::AgentId => envelope.agent_id = map.next_value::<LenientScalar>()?.into_string(),
                EnvelopeField::Ephemeral => {
                    envelope.ephemeral = matches!(map.next_value::<LenientScalar>()?, LenientScalar::Bool(true))
                }
                EnvelopeField::Unknown => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        envelope.event_type = event_type.ok_or_else(|| de::Error::missing_field("type"))?;
        Ok(envelope)
    }
}

// The event `type`, borrowed from the input when it has no escapes.
struct EventTypeStr<'a>(Cow<'a, str>);

impl<'de: 'a, 'a> Deserialize<'de> for EventTypeStr<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct EventTypeVisitor<'a>(std::marker::PhantomData<&'a ()>);

        impl<'de: 'a, 'a> Visitor<'de> for EventTypeVisitor<'a> {
            type Value = EventTypeStr<'a>;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("the event type as a string")
            }

            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(EventTypeStr(Cow::Borrowed(v)))
            }

            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(EventTypeStr(Cow::Owned(v.to_owned())))
            }

            fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
                Ok(EventTypeStr(Cow::Owned(v)))
            }
        }

        deserializer.deserialize_str(EventTypeVisitor(std::marker::PhantomData))
    }
}

// An envelope metadata value read without failing: strings and booleans are
// kept, any other JSON value is skipped.
enum LenientScalar {
    Str(String),
    Bool(bool),
    Other,
}

impl LenientScalar {
    fn into_string(self) -> Option<String> {
        match self {
            LenientScalar::Str(s) => Some(s),
            _ => None,
        }
    }
}

impl<'de> Deserialize<'de> for LenientScalar {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(LenientScalarVisitor)
    }
}

struct LenientScalarVisitor;

impl<'de> Visitor<'de> for LenientScalarVisitor {
    type Value = LenientScalar;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<LenientScalar, E> {
        Ok(LenientScalar::Str(v.to_owned()))
    }

    fn visit_string<E: de::Error>(self, v: String) -> Result<LenientScalar, E> {
        Ok(LenientScalar::Str(v))
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<LenientScalar, E> {
        Ok(LenientScalar::Bool(v))
    }

    fn visit_i64<E: de::Error>(self, _: i64) -> Result<LenientScalar, E> {
        Ok(LenientScalar::Other)
    }

    fn visit_u64<E: de::Error>(self, _: u64) -> Result<LenientScalar, E> {
        Ok(LenientScalar::Other)
    }

    fn visit_f64<E: de::Error>(self, _: f64) -> Result<LenientScalar, E> {
        Ok(LenientScalar::Other)
    }

    fn visit_unit<E: de::Error>(self) -> Result<LenientScalar, E> {
        Ok(LenientScalar::Other)
    }

    fn visit_none<E: de::Error>(self) -> Result<LenientScalar, E> {
        Ok(LenientScalar::Other)
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<LenientScalar, D::Error> {
        deserializer.deserialize_any(self)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<LenientScalar, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(LenientScalar::Other)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<LenientScalar, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(LenientScalar::Other)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use serde_json::json;

    use super::*;

    const TRANSCRIPTS: [(&str, &str); 6] = [
        ("client_tool-stdio", include_str!("../../tests/fixtures/transcripts/client_tool-stdio.jsonl")),
        ("client_tool-tcp", include_str!("../../tests/fixtures/transcripts/client_tool-tcp.jsonl")),
        ("permission-stdio", include_str!("../../tests/fixtures/transcripts/permission-stdio.jsonl")),
        ("permission-tcp", include_str!("../../tests/fixtures/transcripts/permission-tcp.jsonl")),
        ("reply-stdio", include_str!("../../tests/fixtures/transcripts/reply-stdio.jsonl")),
        ("reply-tcp", include_str!("../../tests/fixtures/transcripts/reply-tcp.jsonl")),
    ];

    // One transcript line: `{direction, t_ms, message}`. `params` stays raw
    // so the parsers see the bytes the CLI sent.
    #[derive(Deserialize)]
    struct Line<'a> {
        #[serde(borrow)]
        message: Message<'a>,
    }

    #[derive(Deserialize)]
    struct Message<'a> {
        #[serde(default)]
        method: Option<String>,
        #[serde(borrow, default)]
        params: Option<&'a RawValue>,
    }

    #[derive(Deserialize)]
    struct EventParams<'a> {
        #[serde(borrow)]
        event: &'a RawValue,
    }

    // The raw `params` of every notification with this method in a transcript.
    fn params_of<'a>(transcript: &'a str, method: &str) -> Vec<&'a RawValue> {
        let mut found = Vec::new();
        for line in transcript.lines().filter(|l| !l.trim().is_empty()) {
            let line: Line<'_> = serde_json::from_str(line).expect("transcript line is JSON");
            if line.message.method.as_deref() == Some(method) {
                found.push(line.message.params.expect("notification has params"));
            }
        }
        found
    }

    fn events_of(transcript: &str) -> Vec<(Value, SessionEvent)> {
        params_of(transcript, "session.event")
            .into_iter()
            .map(|params| {
                let params: EventParams<'_> = serde_json::from_str(params.get()).expect("params has event");
                let raw = event_json(params.event);
                let event = SessionEvent::from_json(params.event.get().as_bytes())
                    .unwrap_or_else(|e| panic!("event {raw} does not parse: {e}"));
                (raw, event)
            })
            .collect()
    }

    fn event_json(raw: &RawValue) -> Value {
        serde_json::from_str(raw.get()).expect("event is JSON")
    }

    fn transcript(name: &str) -> &'static str {
        TRANSCRIPTS.iter().find(|(n, _)| *n == name).map(|(_, t)| *t).expect("known transcript")
    }

    fn parse(event: Value) -> SessionEvent {
        SessionEvent::from_json(event.to_string().as_bytes()).expect("event parses")
    }

    fn event_with(event_type: &str, data: Value) -> SessionEvent {
        parse(json!({"type": event_type, "data": data, "id": "e-1", "timestamp": "t", "parentId": null}))
    }

    #[test]
    fn every_transcript_event_parses_into_its_typed_variant() {
        let mut typed_seen = BTreeSet::new();
        let mut total = 0;
        for (name, text) in TRANSCRIPTS {
            for (raw, event) in events_of(text) {
                total += 1;
                let wire_type = raw["type"].as_str().expect("type is a string");
                assert_eq!(event.event_type(), wire_type, "{name}");
                assert_eq!(event.id, raw["id"].as_str().expect("id"), "{name}");
                assert_eq!(event.timestamp, raw["timestamp"].as_str().expect("timestamp"), "{name}");
                assert_eq!(event.parent_id.as_deref(), raw["parentId"].as_str(), "{name}");
                assert_eq!(event.ephemeral, raw["ephemeral"].as_bool().unwrap_or(false), "{name}");
                assert_eq!(event.agent_id.as_deref(), raw["agentId"].as_str(), "{name}");
                if TYPED_EVENT_TYPES.contains(&wire_type) {
                    assert!(
                        !matches!(event.kind, EventKind::Other { .. }),
                        "{name}: {wire_type} fell back to Other; its data no longer fits: {}",
                        raw["data"]
                    );
                    typed_seen.insert(wire_type.to_owned());
                } else {
                    match &event.kind {
                        EventKind::Other { event_type, data } => {
                            assert_eq!(event_type, wire_type);
                            assert_eq!(data, &raw["data"], "{name}: {wire_type} data must be kept");
                        }
                        other => panic!("{name}: {wire_type} parsed as {other:?}"),
                    }
                }
            }
        }
        assert_eq!(total, 334, "the six transcripts hold 334 session.event notifications");
        // Guards against the loop passing because nothing typed was seen.
        let expected: BTreeSet<String> = [
            "session.start",
            "session.idle",
            "session.title_changed",
            "session.shutdown",
            "user.message",
            "assistant.turn_start",
            "assistant.message",
            "assistant.turn_end",
            "assistant.idle",
            "tool.execution_start",
            "tool.execution_complete",
            "permission.requested",
            "permission.completed",
            "external_tool.requested",
            "external_tool.completed",
        ]
        .into_iter()
        .map(String::from)
        .collect();
        assert_eq!(typed_seen, expected);
    }

    #[test]
    fn reply_transcript_values() {
        let events = events_of(transcript("reply-stdio"));
        let messages: Vec<_> = events
            .iter()
            .filter_map(|(_, e)| match &e.kind {
                EventKind::AssistantMessage(m) => Some(m),
                _ => None,
            })
            .collect();
        assert_eq!(messages.len(), 1);
        assert_eq!(messages[0].content, "Hello! This reply came from the scripted fake model.");
        assert!(messages[0].tool_requests.is_empty());
        assert_eq!(messages[0].turn_id.as_deref(), Some("0"));

        let start = events
            .iter()
            .find_map(|(_, e)| match &e.kind {
                EventKind::SessionStart(s) => Some(s),
                _ => None,
            })
            .expect("session.start");
        assert_eq!(start.session_id, "03758533-fcc5-4377-9de0-183050632a93");
        assert_eq!(start.version, 1);
        assert_eq!(start.producer, "copilot-agent");
        assert_eq!(start.copilot_version, "1.0.102");
        assert_eq!(start.selected_model.as_deref(), Some("claude-sonnet-4.5"));
        assert_eq!(start.already_in_use, Some(false));
        assert_eq!(start.context.as_ref().and_then(|c| c["cwd"].as_str()), Some("/tmp/X/work/reply"));

        let user = events
            .iter()
            .find_map(|(_, e)| match &e.kind {
                EventKind::UserMessage(u) => Some(u),
                _ => None,
            })
            .expect("user.message");
        assert_eq!(user.content, "Say hello.");

        let (_, idle) = events.iter().find(|(_, e)| e.event_type() == "session.idle").expect("session.idle");
        assert!(idle.ephemeral);
        assert!(matches!(&idle.kind, EventKind::SessionIdle(IdleData { aborted: None })));
    }

    #[test]
    fn client_tool_transcript_values() {
        let events = events_of(transcript("client_tool-stdio"));
        let kinds: Vec<&EventKind> = events.iter().map(|(_, e)| &e.kind).collect();

        let tool_request = kinds
            .iter()
            .find_map(|k| match k {
                EventKind::AssistantMessage(m) => m.tool_requests.first(),
                _ => None,
            })
            .expect("an assistant.message with a tool request");
        assert_eq!(tool_request.tool_call_id, "call_weather_1");
        assert_eq!(tool_request.name, "get_weather");
        assert_eq!(tool_request.arguments, Some(json!({"city": "Paris"})));
        assert_eq!(tool_request.call_type.as_deref(), Some("function"));

        let permission = kinds
            .iter()
            .find_map(|k| match k {
                EventKind::PermissionRequested(p) => Some(p),
                _ => None,
            })
            .expect("permission.requested");
        assert_eq!(permission.kind(), Some("custom-tool"));
        assert_eq!(permission.request_id, "2f5ea881-1c9a-4664-95e1-9bba9fc48bb9");
        assert_eq!(permission.resolved_by_hook, None);

        let decided = kinds
            .iter()
            .find_map(|k| match k {
                EventKind::PermissionCompleted(p) => Some(p),
                _ => None,
            })
            .expect("permission.completed");
        assert_eq!(decided.request_id, permission.request_id);
        assert_eq!(decided.result_kind(), Some("approved"));
        assert_eq!(decided.tool_call_id.as_deref(), Some("call_weather_1"));

        let tool_kind =
            kinds.iter().find(|k| matches!(k, EventKind::ExternalToolRequested(_))).expect("external_tool.requested");
        let EventKind::ExternalToolRequested(tool) = tool_kind else { unreachable!() };
        assert_eq!(tool.tool_name, "get_weather");
        assert_eq!(tool.arguments.as_ref().and_then(|a| a["city"].as_str()), Some("Paris"));
        assert_eq!(tool.tool_call_id, "call_weather_1");
        assert_eq!(tool.session_id, "287ad97a-462d-456c-8108-7451595136b8");
        assert_eq!(tool.working_directory.as_deref(), Some("/tmp/X/work/client_tool"));
        assert_eq!(tool_kind.request_id(), Some("efa7f97d-aea1-43e8-90e1-32134ec08931"));

        let completed =
            kinds.iter().find(|k| matches!(k, EventKind::ExternalToolCompleted(_))).expect("external_tool.completed");
        assert_eq!(completed.request_id(), tool_kind.request_id());

        let done = kinds
            .iter()
            .find_map(|k| match k {
                EventKind::ToolExecutionComplete(c) => Some(c),
                _ => None,
            })
            .expect("tool.execution_complete");
        assert!(done.success);
        assert_eq!(done.result.as_ref().map(|r| r.content.as_str()), Some("Sunny, 22 C, light wind from the west."));
        assert!(done.error.is_none());
    }

    #[test]
    fn permission_transcript_asks_for_shell() {
        for name in ["permission-stdio", "permission-tcp"] {
            let events = events_of(transcript(name));
            let permission = events
                .iter()
                .find_map(|(_, e)| match &e.kind {
                    EventKind::PermissionRequested(p) => Some(p),
                    _ => None,
                })
                .expect("permission.requested");
            assert_eq!(permission.kind(), Some("shell"), "{name}");
            assert_eq!(
                permission.permission_request["fullCommandText"].as_str(),
                Some("echo fake-capi-proof-1234 > proof.txt && cat proof.txt")
            );
            let start = events
                .iter()
                .find_map(|(_, e)| match &e.kind {
                    EventKind::ToolExecutionStart(s) => Some(s),
                    _ => None,
                })
                .expect("tool.execution_start");
            assert_eq!(start.tool_name, "bash");
        }
    }

    #[test]
    fn every_transcript_lifecycle_notification_parses() {
        let mut kinds = BTreeSet::new();
        for (name, text) in TRANSCRIPTS {
            for params in params_of(text, "session.lifecycle") {
                let raw = event_json(params);
                let event = LifecycleEvent::from_json(params.get().as_bytes())
                    .unwrap_or_else(|e| panic!("{name}: lifecycle {raw} does not parse: {e}"));
                assert_eq!(event.kind, raw["type"].as_str().expect("type"));
                assert_eq!(event.session_id, raw["sessionId"].as_str().expect("sessionId"));
                assert_eq!(event.metadata.as_ref(), raw.get("metadata"));
                kinds.insert(event.kind);
            }
        }
        assert_eq!(kinds, BTreeSet::from(["session.created".to_owned(), "session.updated".to_owned()]));

        let first = params_of(transcript("client_tool-stdio"), "session.lifecycle")[0];
        let first = LifecycleEvent::from_json(first.get().as_bytes()).expect("parses");
        assert_eq!(first.kind, "session.created");
        assert_eq!(first.session_id, "287ad97a-462d-456c-8108-7451595136b8");
        assert_eq!(first.metadata.as_ref().and_then(|m| m["startTime"].as_str()), Some("2026-11-29T15:13:07.696Z"));
    }

    #[test]
    fn lifecycle_without_session_id_is_an_error() {
        assert!(LifecycleEvent::from_json(br#"{"type":"session.deleted"}"#).is_err());
        assert!(LifecycleEvent::from_json(br#"{"type":7,"sessionId":"s"}"#).is_err());
        assert!(LifecycleEvent::from_json(b"[]").is_err());
        let deleted = LifecycleEvent::from_json(br#"{"type":"session.deleted","sessionId":"s","extra":1}"#)
            .expect("metadata is optional");
        assert_eq!(deleted.metadata, None);
    }

    #[test]
    fn data_that_does_not_fit_becomes_other_with_the_data_kept() {
        let data = json!({"messageId": "m-1", "content": 42});
        let event = event_with("assistant.message", data.clone());
        assert_eq!(event.event_type(), "assistant.message");
        assert_eq!(event.kind, EventKind::Other { event_type: "assistant.message".into(), data });
        assert_eq!(event.id, "e-1");
    }

    #[test]
    fn drifted_request_keeps_its_request_id() {
        // `permissionRequest` is required; without it the event cannot be
        // typed, but the client must still be able to answer it.
        let event = event_with("permission.requested", json!({"requestId": "r-9"}));
        assert!(matches!(event.kind, EventKind::Other { .. }));
        assert_eq!(event.kind.request_id(), Some("r-9"));
    }

    #[test]
    fn unknown_type_becomes_other() {
        let data = json!({"requestId": "r-1", "serverName": "s", "mcpRequestId": 3});
        let event = event_with("sampling.requested", data.clone());
        assert_eq!(event.kind, EventKind::Other { event_type: "sampling.requested".into(), data });
        assert_eq!(event.event_type(), "sampling.requested");
        assert_eq!(event.kind.request_id(), Some("r-1"));

        let event = event_with("brand.new_type", json!({"x": [1, 2]}));
        assert_eq!(event.kind.request_id(), None);
        assert!(matches!(&event.kind, EventKind::Other { event_type, .. } if event_type == "brand.new_type"));
    }

    #[test]
    fn an_envelope_that_is_not_an_object_with_a_string_type_is_an_error() {
        for bad in [
            &b"[]"[..],
            b"\"session.idle\"",
            b"null",
            b"42",
            b"",
            b"{",
            br#"{"data":{}}"#,
            br#"{"type":null,"data":{}}"#,
            br#"{"type":5,"data":{}}"#,
            br#"{"type":"session.idle","data":{}} trailing"#,
        ] {
            assert!(SessionEvent::from_json(bad).is_err(), "{}", String::from_utf8_lossy(bad));
        }
    }

    #[test]
    fn envelope_metadata_is_lenient() {
        let event = SessionEvent::from_json(br#"{"type":"session.idle","data":{"aborted":true}}"#).expect("parses");
        assert_eq!(event.id, "");
        assert_eq!(event.timestamp, "");
        assert_eq!(event.parent_id, None);
        assert!(!event.ephemeral);
        assert_eq!(event.agent_id, None);
        assert_eq!(event.kind, EventKind::SessionIdle(IdleData { aborted: Some(true) }));

        let event = SessionEvent::from_json(
            br#"{"id":7,"timestamp":{"a":[1]},"parentId":false,"ephemeral":"yes","agentId":[null],"type":"abort","data":{"reason":"user_initiated"}}"#,
        )
        .expect("wrong-typed metadata does not lose the event");
        assert_eq!((event.id.as_str(), event.timestamp.as_str()), ("", ""));
        assert_eq!((event.parent_id, event.agent_id, event.ephemeral), (None, None, false));
        assert_eq!(event.kind, EventKind::Abort(AbortData { reason: "user_initiated".into() }));

        let event = SessionEvent::from_json(
            br#"{"type":"assistant.idle","id":"a","timestamp":"t","parentId":"p","ephemeral":true,"agentId":"sub-1","extra":{"k":1}}"#,
        )
        .expect("parses");
        assert_eq!(event.kind, EventKind::AssistantIdle(IdleData { aborted: None }), "absent data reads as {{}}");
        assert_eq!(event.parent_id.as_deref(), Some("p"));
        assert_eq!(event.agent_id.as_deref(), Some("sub-1"));
        assert!(event.ephemeral);
    }

    #[test]
    fn escaped_type_and_repeated_keys() {
        let event = SessionEvent::from_json(
            br#"{"type":"x","type":"session.title_changed","data":{"title":"a\"b"},"id":"1","id":"2"}"#,
        )
        .expect("parses");
        assert_eq!(event.kind, EventKind::SessionTitleChanged(TitleChangedData { title: "a\"b".into() }));
        assert_eq!(event.id, "2");

        let event =
            SessionEvent::from_json(br#"{"type":"session.title\u005fchanged","data":{"title":"t"}}"#).expect("parses");
        assert_eq!(event.event_type(), "session.title_changed");

        // The data is read for an untyped type, then `type` changes to a typed one.
        let event =
            SessionEvent::from_json(br#"{"type":"brand.new","data":{"title":"t"},"type":"session.title_changed"}"#)
                .expect("parses");
        assert_eq!(event.kind, EventKind::SessionTitleChanged(TitleChangedData { title: "t".into() }));
        let event = SessionEvent::from_json(br#"{"type":"brand.new","data":{"x":1},"type":"session.title_changed"}"#)
            .expect("parses");
        assert_eq!(event.kind, EventKind::Other { event_type: "session.title_changed".into(), data: json!({"x": 1}) });

        // `data` before `type` takes the raw path, typed or not.
        let event =
            SessionEvent::from_json(br#"{"data":{"title":"t"},"type":"session.title_changed"}"#).expect("parses");
        assert_eq!(event.kind, EventKind::SessionTitleChanged(TitleChangedData { title: "t".into() }));
        let event = SessionEvent::from_json(br#"{"data":{"x":[1]},"type":"brand.new"}"#).expect("parses");
        assert_eq!(event.kind, EventKind::Other { event_type: "brand.new".into(), data: json!({"x": [1]}) });
    }

    #[test]
    fn null_data_of_a_typed_event_becomes_other() {
        let event = event_with("session.idle", Value::Null);
        assert_eq!(event.kind, EventKind::Other { event_type: "session.idle".into(), data: Value::Null });
    }

    // Samples shaped after the schema for typed variants the transcripts do
    // not exercise, with only the required fields and with optional ones.
    #[test]
    fn schema_shaped_samples_parse_into_their_variants() {
        let samples = [
            ("session.resume", json!({"resumeTime": "t", "eventCount": 12, "sessionWasActive": true})),
            (
                "session.error",
                json!({"errorType": "rate_limit", "message": "slow down", "statusCode": 429, "errorCode": "x"}),
            ),
            ("session.shutdown", json!({"shutdownType": "routine"})),
            ("assistant.message_delta", json!({"messageId": "m", "deltaContent": "He"})),
            ("assistant.reasoning", json!({"reasoningId": "r", "content": "think", "rte": false})),
            ("assistant.reasoning_delta", json!({"reasoningId": "r", "deltaContent": "th"})),
            ("assistant.idle", json!({"aborted": true})),
            ("abort", json!({"reason": "user_initiated"})),
            (
                "tool.execution_complete",
                json!({"toolCallId": "c", "success": false, "error": {"message": "boom", "code": "E1"}}),
            ),
            (
                "user_input.requested",
                json!({"requestId": "r", "question": "Which?", "choices": ["a", "b"], "allowFreeform": false}),
            ),
            ("user_input.completed", json!({"requestId": "r", "answer": "a", "wasFreeform": false})),
            (
                "elicitation.requested",
                json!({"requestId": "r", "message": "Fill in", "mode": "form",
                       "requestedSchema": {"type": "object", "properties": {"name": {"type": "string"}}}}),
            ),
            (
                "mcp.oauth_required",
                json!({"requestId": "r", "serverName": "s", "serverUrl": "https://s", "reason": "initial"}),
            ),
            (
                "command.execute",
                json!({"requestId": "r", "command": "/deploy prod", "commandName": "deploy", "args": "prod"}),
            ),
            (
                "exit_plan_mode.requested",
                json!({"requestId": "r", "summary": "s", "planContent": "p",
                       "actions": ["exit_only", "autopilot"], "recommendedAction": "autopilot"}),
            ),
        ];
        for (event_type, data) in samples {
            let event = event_with(event_type, data);
            assert!(!matches!(event.kind, EventKind::Other { .. }), "{event_type} fell back to Other");
            assert_eq!(event.event_type(), event_type);
            let awaits_answer = event_type.ends_with(".requested")
                || event_type.ends_with(".completed")
                || matches!(event_type, "mcp.oauth_required" | "command.execute");
            assert_eq!(event.kind.request_id().is_some(), awaits_answer, "{event_type}");
        }

        let EventKind::SessionError(error) =
            event_with("session.error", json!({"errorType": "a", "message": "b"})).kind
        else {
            panic!("session.error is typed");
        };
        assert_eq!((error.status_code, error.stack), (None, None));
    }

    #[test]
    fn typed_event_types_are_unique() {
        let unique: BTreeSet<_> = TYPED_EVENT_TYPES.iter().collect();
        assert_eq!(unique.len(), TYPED_EVENT_TYPES.len());
    }
}
