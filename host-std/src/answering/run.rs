//! Answering a wait of the agent: the user's handler is called on the
//! handler pool, and the core decides what is sent from its outcome.

use std::collections::BTreeMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

use copilot_core::{Cause, HandlerKind};
use serde::de::DeserializeOwned;
use serde_json::{json, Value};

use super::handlers::{
    ElicitationResponse, ExitPlanModeRequest, ProviderTokenRequest, SectionTransform, SessionHandlers, Tool,
    ToolInvocation, ToolResult, UserInputRequest,
};
use super::hook_call::{invoke, HookAnswer};
use super::hooks::HookFailure;
use super::outcome::{answer, json, Outcome};
use super::permission::PermissionRequest;
use super::requests::{event_data, is_event, IncomingRequest, RequestHandlers};
use crate::driver::{Job, Replier};
use crate::events::{
    CommandExecuteData, ElicitationRequestedData, ExternalToolRequestedData, McpOauthRequiredData,
    PermissionRequestedData,
};
use crate::generated::events::{
    LenientCommandExecuteData, LenientElicitationRequestedData, LenientExternalToolRequestedData,
    LenientMcpOauthRequiredData, LenientPermissionRequestedData,
};
use crate::pool::panic_text;

/// Calls the user's handler for `job` and passes its answer on. Runs on the
/// handler pool.
pub(crate) fn run(job: Job, handlers: &SessionHandlers, session_id: &str) {
    let Job { kind, name, data, reply } = job;
    let outcome =
        match reply.scope(|| catch_unwind(AssertUnwindSafe(|| decide(kind, name, &data, handlers, session_id)))) {
            Ok(o) => o,
            Err(panic) => Outcome::Fail(format!("the handler panicked: {}", panic_text(&*panic))),
        };
    send(&reply, name, outcome);
}

/// Calls the client's generic handler for a client-wide request (one that
/// names no session) and passes its answer on. Runs on the handler pool.
pub(crate) fn run_client_wide(job: Job, requests: &RequestHandlers, inference: Option<&Arc<super::Inference>>) {
    if let (HandlerKind::LlmInference, Some(inference)) = (job.kind, inference) {
        return inference.take(job);
    }
    let Job { kind, name, data, reply } = job;
    let outcome =
        match reply.scope(|| catch_unwind(AssertUnwindSafe(|| generic(kind, name, &data, requests, None, false)))) {
            Ok(o) => o,
            Err(panic) => Outcome::Fail(format!("the handler panicked: {}", panic_text(&*panic))),
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
    if !kind.is_generic() || requests.is_empty() {
        return Outcome::Refuse(Cause::NoHandler);
    }
    let params = if event { event_data(data) } else { serde_json::from_slice(data).ok() };
    let Some(params) = params else { return Outcome::Refuse(Cause::Unreadable) };
    let request = IncomingRequest { name, session_id: session_id.map(str::to_owned), params };
    match requests.handle(&request) {
        None => Outcome::Refuse(Cause::NoHandler),
        Some(Ok(v)) => Outcome::Answer(json(&v)),
        Some(Err(e)) => Outcome::Fail(e),
    }
}

fn send(reply: &Replier, name: &str, outcome: Outcome) {
    match outcome {
        Outcome::Answer(v) => reply.answer(&v),
        Outcome::Shaped(v, siblings) => reply.answer_shaped(&v, siblings.as_ref()),
        Outcome::Decline => reply.decline(),
        Outcome::Refuse(cause) => reply.refuse(cause),
        Outcome::Fail(detail) => {
            log::error!("the {name} handler failed ({detail}); the agent is told only that it failed");
            reply.fail(&detail)
        }
        Outcome::FailCoded(code, detail) => {
            log::warn!("the {name} handler failed ({code}: {detail})");
            reply.fail_coded(&code, &detail)
        }
    }
}

/// The answer to an elicitation, shaped by the core (an accept without
/// content, or with `null`, carries `{}`; content that is not an object
/// fails the handler).
fn elicitation_answer(response: ElicitationResponse) -> Outcome {
    let given = match response {
        ElicitationResponse::Accept(content) => json!({ "action": "accept", "content": content }),
        ElicitationResponse::Decline => json!({ "action": "decline" }),
        ElicitationResponse::Cancel => json!({ "action": "cancel" }),
    };
    answer(HandlerKind::Elicitation.name(), Some(&given))
}

/// The `data` of a waiting event as its handler reads it (`L`, the
/// lenient reading of the struct `T`: the core refused the wait if a member
/// the handler reads is unreadable, and every other member missing or of
/// another kind is its empty value), or why it has none.
fn wait_data<L: DeserializeOwned + Into<T>, T>(event: &[u8]) -> Result<T, Outcome> {
    #[derive(serde::Deserialize)]
    struct Event<L> {
        data: L,
    }
    match serde_json::from_slice::<Event<L>>(event) {
        Ok(e) => Ok(e.data.into()),
        Err(_) => Err(Outcome::Refuse(Cause::Unreadable)),
    }
}

fn decide(kind: HandlerKind, name: &'static str, data: &[u8], handlers: &SessionHandlers, session_id: &str) -> Outcome {
    use Outcome::{Answer, Refuse};
    let unreadable = Refuse(Cause::Unreadable);
    match kind {
        HandlerKind::Permission => {
            let Some(h) = &handlers.permission else { return Refuse(Cause::NoHandler) };
            let data = match wait_data::<LenientPermissionRequestedData, PermissionRequestedData>(data) {
                Ok(d) => d,
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
            let data = match wait_data::<LenientExternalToolRequestedData, ExternalToolRequestedData>(data) {
                Ok(d) => d,
                Err(o) => return o,
            };
            match handlers.tools.iter().find(|t| t.name == data.tool_name) {
                Some(tool) => run_tool(tool, session_id, &data).outcome(),
                None => Refuse(Cause::NoHandler),
            }
        }
        HandlerKind::Elicitation => {
            let Some(h) = &handlers.elicitation else { return Refuse(Cause::NoHandler) };
            let data = match wait_data::<LenientElicitationRequestedData, ElicitationRequestedData>(data) {
                Ok(d) => d,
                Err(o) => return o,
            };
            elicitation_answer(h.answer(&data))
        }
        HandlerKind::McpOAuth => {
            let Some(h) = &handlers.mcp_oauth else { return Refuse(Cause::NoHandler) };
            let data = match wait_data::<LenientMcpOauthRequiredData, McpOauthRequiredData>(data) {
                Ok(d) => d,
                Err(o) => return o,
            };
            let given = h.token(&data).map(
                |t| json!({ "accessToken": t.access_token, "tokenType": t.token_type, "expiresIn": t.expires_in }),
            );
            answer(kind.name(), given.as_ref())
        }
        HandlerKind::Command => {
            let data = match wait_data::<LenientCommandExecuteData, CommandExecuteData>(data) {
                Ok(d) => d,
                Err(o) => return o,
            };
            match handlers.commands.iter().find(|c| c.name == data.command_name) {
                Some(c) => match (c.handler)(&data) {
                    Ok(()) => Answer(b"null".to_vec()),
                    Err(e) => Answer(json(&Value::String(e))),
                },
                None => Refuse(Cause::NoHandler),
            }
        }
        HandlerKind::UserInput => {
            let Some(h) = &handlers.user_input else { return Refuse(Cause::NoHandler) };
            let Ok(request) = serde_json::from_slice::<UserInputRequest>(data) else { return unreadable };
            let given = h.answer(&request).map(|r| json!({ "answer": r.answer, "wasFreeform": r.was_freeform }));
            answer(kind.name(), given.as_ref())
        }
        HandlerKind::ExitPlanMode => {
            let Some(h) = &handlers.exit_plan_mode else { return Refuse(Cause::NoHandler) };
            let Ok(request) = serde_json::from_slice::<ExitPlanModeRequest>(data) else { return unreadable };
            let r = h.answer(&request);
            let given = json!({ "approved": r.approved, "selectedAction": r.selected_action, "feedback": r.feedback });
            answer(kind.name(), Some(&given))
        }
        HandlerKind::SystemMessageTransform => {
            if handlers.transforms.is_empty() {
                return Refuse(Cause::NoHandler);
            }
            let Ok(request) = serde_json::from_slice::<TransformRequest>(data) else { return unreadable };
            let given = json!({ "sections": transform_sections(&request.sections, &handlers.transforms) });
            answer(kind.name(), Some(&given))
        }
        HandlerKind::ProviderToken => {
            let Some(h) = &handlers.provider_token else { return Refuse(Cause::NoHandler) };
            let Ok(request) = serde_json::from_slice::<ProviderTokenRequest>(data) else { return unreadable };
            // One callback: the session's single provider, by the core's name.
            if request.provider_name != copilot_core::PROVIDER_TOKEN_NAME {
                return Refuse(Cause::NoHandler);
            }
            let given = h.token(&request).map(|token| json!({ "token": token }));
            answer(kind.name(), given.as_ref())
        }
        HandlerKind::Canvas if handlers.canvases.is_empty() => Refuse(Cause::NoHandler),
        HandlerKind::Canvas => super::canvas::answer(&handlers.canvases, name, data),
        HandlerKind::Hooks => match invoke(&handlers.hooks, data, session_id) {
            HookAnswer::Answer(v) => Answer(json(&v)),
            HookAnswer::NoHook => Refuse(Cause::NoHandler),
            HookAnswer::Failed(HookFailure::Unreadable) => unreadable,
            HookAnswer::Failed(HookFailure::Unwritable) => Refuse(Cause::HandlerFailed),
        },
        // The other kinds: a generic handler by name, or the engine's refusal.
        _ => {
            let event = is_event(name);
            generic(kind, name, data, &handlers.requests, Some(session_id), event)
        }
    }
}

/// `systemMessage.transform` params (the core checked that `sections` is
/// an object).
#[derive(serde::Deserialize)]
struct TransformRequest {
    sections: BTreeMap<String, Value>,
}

/// A section's text: a section that is not an object, or has no string
/// `content`, has the text `""`.
#[derive(serde::Serialize)]
struct SectionText {
    content: String,
}

/// Every section, rewritten by its transform if it has one; a section
/// without one, or whose transform panics, keeps its text.
fn transform_sections(
    sections: &BTreeMap<String, Value>,
    transforms: &BTreeMap<String, Arc<dyn SectionTransform>>,
) -> BTreeMap<String, SectionText> {
    sections
        .iter()
        .map(|(id, s)| {
            let text = s.get("content").and_then(Value::as_str).unwrap_or_default();
            let content = match transforms.get(id) {
                Some(t) => catch_unwind(AssertUnwindSafe(|| t.transform(text))).unwrap_or_else(|_| {
                    log::error!("the transform of system prompt section {id} panicked; the section is kept");
                    text.to_owned()
                }),
                None => text.to_owned(),
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
        traceparent: data.traceparent.clone(),
        tracestate: data.tracestate.clone(),
    };
    // A tool that panics fails as a tool that returns an error does (the
    // panic is caught around the whole decision).
    #[cfg(feature = "tracing")]
    let _span = {
        let span = tracing::info_span!(
            "copilot.tool",
            session_id = %call.session_id,
            tool_name = %call.tool_name,
            tool_call_id = %call.tool_call_id,
            traceparent = call.traceparent.as_deref(),
        );
        // The tool's span joins the trace of the CLI's span for the call
        // (its parent is set before it starts).
        #[cfg(feature = "opentelemetry")]
        join_remote_parent(&span, call.traceparent.as_deref(), call.tracestate.as_deref());
        span.entered()
    };
    (tool.handler)(&call)
}

/// Makes `span`'s OpenTelemetry parent the remote span `traceparent` names
/// (with `tracestate`), if it names one (feature `opentelemetry`).
#[cfg(feature = "opentelemetry")]
fn join_remote_parent(span: &tracing::Span, traceparent: Option<&str>, tracestate: Option<&str>) {
    use opentelemetry::trace::{SpanContext, SpanId, TraceContextExt, TraceFlags, TraceId, TraceState};
    use tracing_opentelemetry::OpenTelemetrySpanExt;
    let Some(parts) = traceparent.map(|t| t.split('-').collect::<Vec<_>>()) else { return };
    let [_, trace, parent, flags] = parts[..] else { return };
    let (Ok(trace), Ok(parent), Ok(flags)) =
        (TraceId::from_hex(trace), SpanId::from_hex(parent), u8::from_str_radix(flags, 16))
    else {
        return;
    };
    let state = tracestate.and_then(|s| s.parse::<TraceState>().ok()).unwrap_or_default();
    let remote = SpanContext::new(trace, parent, TraceFlags::new(flags), true, state);
    if remote.is_valid() {
        let _ = span.set_parent(opentelemetry::Context::new().with_remote_span_context(remote));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::answering::OFFERED_HANDLER_KINDS;
    use crate::answering::{approve_all, generic_request_names, Command, ExitPlanModeResponse, HookType, SessionHooks};
    use crate::events::{CommandExecuteData, ElicitationRequestedData, McpOauthRequiredData};

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
        h.hooks = SessionHooks::new().on_hook(HookType::PreToolUse, |_, _| None);
        h.canvases = vec![crate::Canvas::new("c", "C", "", |_: &crate::CanvasContext| Ok(Value::Null))];
        for name in generic_request_names() {
            h.requests.insert(name, Arc::new(|_: &IncomingRequest| Ok(json!({}))));
        }
        h
    }

    #[test]
    fn the_offered_kinds_are_the_kinds_a_handler_is_called_for() {
        let all = every_handler();
        for row in copilot_core::ANSWERS {
            let kind = row.handler;
            if kind == HandlerKind::LlmInference {
                // A client option, never a session's: `run_client_wide`
                // hands it to the client's inference state (inference.rs).
                continue;
            }
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
