//! Canvases: panels a client declares on a session (`canvases` in the
//! open's params) and serves when the CLI asks (`canvas.open`,
//! `canvas.close`, `canvas.action.invoke`, requests to this client only).
//! Which handler a request reaches is the host's lookup (by `canvasId`,
//! then `actionName`); what goes back is decided here, as the official
//! SDKs answer: a handler's result as it is (`{}` for an open that gives
//! nothing, `null` for a close), and every failure a JSON-RPC error
//! `{code: -32603, message, data: {code, message}}`
//! ([`AnswerRow::failure_error`](crate::AnswerRow::failure_error),
//! [`Engine::fail_coded`](crate::Engine::fail_coded)). A session that
//! declares no canvas refuses the three as before (method not served).
//! And the rule that keeps a session's open canvas instances current
//! ([`read_canvas_change`], [`open_answer_canvases`]).

use crate::json::{JsonStr, Value};

/// What a canvas request asks of the canvas it names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CanvasCall {
    /// Open (or focus) an instance: the canvas's `open` handler.
    Open,
    /// An instance closed: the canvas's optional `on_close` handler.
    Close,
    /// Run one of the canvas's actions (`actionName`): its handler.
    Action,
}

/// One canvas request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CanvasRequest {
    /// The server request's method.
    pub method: &'static str,
    /// What it asks.
    pub call: CanvasCall,
    /// The result (JSON) when the handler gives nothing, or when there is
    /// no handler to call (a close without `on_close`).
    pub nothing: &'static str,
}

/// Every canvas request (each a row of [`ANSWERS`](crate::ANSWERS)).
pub static CANVAS_REQUESTS: &[CanvasRequest] = &[
    CanvasRequest { method: "canvas.open", call: CanvasCall::Open, nothing: "{}" },
    CanvasRequest { method: "canvas.close", call: CanvasCall::Close, nothing: "null" },
    CanvasRequest { method: "canvas.action.invoke", call: CanvasCall::Action, nothing: "null" },
];

/// The canvas request of `method`, if it is one.
pub fn canvas_request(method: &str) -> Option<&'static CanvasRequest> {
    CANVAS_REQUESTS.iter().find(|r| r.method == method)
}

/// The member of a canvas request's params naming the action.
pub const CANVAS_ACTION_MEMBER: &str = "actionName";

/// The machine code of a failed canvas handler that names none (it threw,
/// panicked or returned an error without a code).
pub const CANVAS_HANDLER_ERROR: &str = "canvas_handler_error";

/// The machine code and message of an action the canvas has no handler for.
pub const CANVAS_ACTION_NO_HANDLER: (&str, &str) =
    ("canvas_action_no_handler", "No handler implemented for this canvas action");

/// The message of a request naming a canvas this session did not declare,
/// before the id in double quotes (`No canvas registered with id "x"`);
/// its machine code is [`CANVAS_HANDLER_ERROR`].
pub const CANVAS_UNKNOWN_PREFIX: &str = "No canvas registered with id ";

/// The session events that keep a session's open canvas instances current,
/// as the official SDKs keep them: an instance (`data`, with `instanceId`)
/// opened or replaced, and one closed (by `data.instanceId`).
pub const CANVAS_OPENED_EVENT: &str = "session.canvas.opened";
/// See [`CANVAS_OPENED_EVENT`].
pub const CANVAS_CLOSED_EVENT: &str = "session.canvas.closed";

/// The members an open instance must have, each a non-empty string (an
/// instance or event without them is skipped, as the official SDKs skip
/// it); the first is its key.
pub const OPEN_CANVAS_MEMBERS: &[&str] = &["instanceId", "extensionId", "canvasId"];

/// The member of an open's answer (a resume's) listing the instances open.
pub const OPEN_ANSWER_CANVASES: &str = "openCanvases";

/// A change to a session's open canvas instances.
#[derive(Debug, Clone, Copy)]
pub enum CanvasChange<'a> {
    /// `instance` (an object with [`OPEN_CANVAS_MEMBERS`]) opened: it
    /// replaces the instance of the same `instanceId`, or is added last.
    Opened {
        /// Its `instanceId`.
        instance_id: JsonStr<'a>,
        /// The instance, as the CLI wrote it.
        instance: Value<'a>,
    },
    /// The instance of this `instanceId` closed: it is removed.
    Closed {
        /// Its `instanceId`.
        instance_id: JsonStr<'a>,
    },
}

/// `v`'s member `name`, a non-empty string.
fn named<'a>(v: Value<'a>, name: &str) -> Option<JsonStr<'a>> {
    v.get(name).and_then(|m| m.as_str()).filter(|s| s.decoded_len() > 0)
}

fn opened(instance: Value<'_>) -> Option<CanvasChange<'_>> {
    if !OPEN_CANVAS_MEMBERS.iter().all(|m| named(instance, m).is_some()) {
        return None;
    }
    Some(CanvasChange::Opened { instance_id: named(instance, OPEN_CANVAS_MEMBERS[0])?, instance })
}

/// The change a session event of type `event_type` with `data` makes to
/// the session's open canvases, if any: none for another type, or for data
/// without the members the change needs.
pub fn read_canvas_change<'a>(event_type: JsonStr<'_>, data: Option<Value<'a>>) -> Option<CanvasChange<'a>> {
    if event_type == CANVAS_OPENED_EVENT {
        opened(data?)
    } else if event_type == CANVAS_CLOSED_EVENT {
        Some(CanvasChange::Closed { instance_id: named(data?, OPEN_CANVAS_MEMBERS[0])? })
    } else {
        None
    }
}

/// The instances an open's answer (`result`, JSON) lists as open, in its
/// order, as [`CanvasChange::Opened`] to a session that has none; an
/// answer without the list has none.
pub fn open_answer_canvases(result: &[u8]) -> impl Iterator<Item = CanvasChange<'_>> {
    let list = Value::parse(crate::json::trim_ws(result)).ok().and_then(|r| r.get(OPEN_ANSWER_CANVASES));
    list.into_iter().flat_map(|l| l.elements()).filter_map(opened)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{AnswerVia, HandlerKind, Trigger, ANSWERS};

    #[cfg_attr(not(target_arch = "wasm32"), test)]
    #[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
    fn the_canvas_requests_are_the_canvas_rows_of_the_answer_table() {
        let rows = ANSWERS.iter().filter(|r| r.handler == HandlerKind::Canvas);
        let mut n = 0;
        for row in rows {
            let Trigger::Request(method) = row.trigger else { panic!("{row:?}: a request") };
            assert_eq!(row.via, AnswerVia::Response { member: None }, "{method}: answered by the response");
            assert!(canvas_request(method).is_some(), "{method}");
            assert!(row.failure_error().is_some(), "{method}: a failure is a coded error");
            n += 1;
        }
        assert_eq!(n, CANVAS_REQUESTS.len());
    }

    #[cfg_attr(not(target_arch = "wasm32"), test)]
    #[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
    fn open_instances_change_by_the_events_and_the_open_answer() {
        let change = |ty: &str, data: &'static str| {
            let ty = Value::parse(ty.as_bytes()).unwrap().as_str().unwrap();
            match read_canvas_change(ty, Some(Value::parse(data.as_bytes()).unwrap())) {
                Some(CanvasChange::Opened { instance_id, instance }) => {
                    Some(("opened", instance_id.raw(), instance.raw()))
                }
                Some(CanvasChange::Closed { instance_id }) => Some(("closed", instance_id.raw(), "")),
                None => None,
            }
        };
        let full = r#"{"instanceId":"c1","extensionId":"e","canvasId":"c","title":"T"}"#;
        assert_eq!(change(r#""session.canvas.opened""#, full), Some(("opened", "c1", full)));
        assert_eq!(change(r#""session.canvas.opened""#, r#"{"instanceId":"c1","canvasId":"c"}"#), None);
        assert_eq!(change(r#""session.canvas.opened""#, r#"{"instanceId":"","extensionId":"e","canvasId":"c"}"#), None);
        assert_eq!(change(r#""session.canvas.closed""#, r#"{"instanceId":"c1"}"#), Some(("closed", "c1", "")));
        assert_eq!(change(r#""session.canvas.closed""#, r#"{"instanceId":5}"#), None);
        assert_eq!(change(r#""session.canvas.recorded""#, full), None);
        let answer = br#"{"sessionId":"s","openCanvases":[{"instanceId":"a","extensionId":"e","canvasId":"c"},{"instanceId":"b"}]}"#;
        let ids: heapless::Vec<&str, 4> = open_answer_canvases(answer)
            .map(|c| match c {
                CanvasChange::Opened { instance_id, .. } => instance_id.raw(),
                CanvasChange::Closed { .. } => "closed",
            })
            .collect();
        assert_eq!(ids, ["a"], "the one without its members is skipped");
        assert_eq!(open_answer_canvases(br#"{"sessionId":"s"}"#).count(), 0);
    }
}
