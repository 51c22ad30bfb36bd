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
}
