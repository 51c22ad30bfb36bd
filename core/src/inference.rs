//! The inference request handler (`CopilotRequestHandler` in the official
//! SDKs, experimental): the client carries the CLI's model HTTP requests.
//!
//! On the wire (CLI 1.0.102, seen here): after `connect` the client sends
//! `llmInference.setProvider` (`{}` -> `{success: true}`); from then on the
//! CLI sends each model request to this client as the request
//! `llmInference.httpRequestStart` (the head: `requestId`, `method`,
//! `url`, `headers` as lower-case name -> values, `transport`, `sessionId`
//! and the agent's ids) and one or more `llmInference.httpRequestChunk`
//! (`data`, `binary`, `end`; or `cancel: true` with a `cancelReason` when
//! the turn is aborted), both acknowledged with `{}` at once. The client
//! answers with its own requests: `llmInference.httpResponseStart`
//! (`status`, `statusText`, `headers`) once, then
//! `llmInference.httpResponseChunk`s, the last with `end: true`, or one
//! with `error: {message, code?}` (the CLI retries, then ends the turn
//! with a `session.error` that quotes the message). The CLI answers each
//! `{accepted}`.
//!
//! A request whose head has `transport: "websocket"` is a WebSocket the
//! CLI would open (seen here: the Responses API of a model whose catalogue
//! entry lists `ws:/responses`). It lives as long as the CLI keeps it
//! (across turns: one `response.create` message per turn): each
//! `httpRequestChunk` is one message from the CLI (`binary` for a binary
//! frame), each `httpResponseChunk` one message to it, after a head of
//! status 101 (the CLI sends no message before it); `end` closes it
//! (the CLI closes it with `cancel: true`, "runtime closed the websocket",
//! when the session ends). A head of another status makes the CLI drop the
//! WebSocket and send the same request over HTTP (`POST .../responses`);
//! so does an error chunk after the 101.
//!
//! This module is the rule both hosts follow: which requests are
//! inference frames, the acknowledgement, the answer when the handler
//! fails, is cancelled or returns without finishing (as the official SDKs
//! answer: a 502 or 499 head if none was sent, then an error chunk), the
//! bounds on requests in flight and on request body chunks the handler
//! has not read yet, and which headers are secrets (never logged).

use crate::json::Value;

/// Registers the client as the CLI's inference provider (sent after the
/// handshake when a handler is set, and again after a recovery).
pub const INFERENCE_SET_PROVIDER: &str = "llmInference.setProvider";
/// The CLI's request announcing a model request (its head).
pub const INFERENCE_REQUEST_START: &str = "llmInference.httpRequestStart";
/// The CLI's request carrying a request body chunk, or a cancellation.
pub const INFERENCE_REQUEST_CHUNK: &str = "llmInference.httpRequestChunk";
/// The client's request carrying the response head.
pub const INFERENCE_RESPONSE_START: &str = "llmInference.httpResponseStart";
/// The client's request carrying a response body chunk, the end, or an
/// error.
pub const INFERENCE_RESPONSE_CHUNK: &str = "llmInference.httpResponseChunk";

/// Whether the CLI's request `method` is one of the inference requests:
/// client-global requests whose `sessionId` is payload, not a routing key
/// (the model catalogue has none, and a turn's names the session it
/// serves, which may be another client's); the router never routes them
/// by session.
pub fn is_client_global(method: &str) -> bool {
    method == INFERENCE_REQUEST_START || method == INFERENCE_REQUEST_CHUNK
}

/// The answer to both of the CLI's inference requests, sent as soon as
/// the frame is taken (the handler's work is not awaited).
pub const INFERENCE_ACK: &str = "{}";

/// Model requests a client serves at once; past it a new request is
/// answered at once with [`INFERENCE_BUSY`] (the CLI retries it).
pub const MAX_INFERENCE_IN_FLIGHT: usize = 16;

/// Request body chunks one request holds that its handler has not read
/// yet; past it the request fails with [`INFERENCE_OVERFLOW`].
pub const MAX_INFERENCE_BUFFERED_CHUNKS: usize = 1024;

/// The head sent before a failure when the handler sent none, and the
/// failure's message: a handler that failed (its error's text follows
/// the message), was cancelled, returned without ending its response, or
/// could not be started.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InferenceFailure {
    /// The status of the head sent first, if none was sent.
    pub status: u16,
    /// The error's message (a handler's failure: its own text instead).
    pub message: &'static str,
    /// The error's machine code, if any.
    pub code: Option<&'static str>,
}

/// A handler that failed (returned an error, threw, panicked): its text is
/// the message.
pub const INFERENCE_FAILED: InferenceFailure =
    InferenceFailure { status: 502, message: "the request handler failed", code: None };
/// The CLI cancelled the request (`cancel: true`).
pub const INFERENCE_CANCELLED: InferenceFailure =
    InferenceFailure { status: 499, message: "Request cancelled by runtime", code: Some("cancelled") };
/// A handler that returned without ending or failing its response.
pub const INFERENCE_UNFINISHED: InferenceFailure =
    InferenceFailure { status: 502, message: "the request handler returned without ending the response", code: None };
/// More than [`MAX_INFERENCE_IN_FLIGHT`] requests at once.
pub const INFERENCE_BUSY: InferenceFailure =
    InferenceFailure { status: 503, message: "too many model requests in flight", code: Some("busy") };
/// More than [`MAX_INFERENCE_BUFFERED_CHUNKS`] unread body chunks.
pub const INFERENCE_OVERFLOW: InferenceFailure = InferenceFailure {
    status: 502,
    message: "the request body arrived faster than the handler read it",
    code: Some("overflow"),
};

/// The head's `transport` of a WebSocket request (`http` when absent).
pub const INFERENCE_WEBSOCKET: &str = "websocket";

/// The head a served WebSocket request gets once the handler opened it,
/// before any message (the CLI sends none before it).
pub const INFERENCE_WEBSOCKET_OPENED: u16 = 101;

/// A WebSocket request whose handler does not serve WebSockets: refused
/// with a head of this status (not 101), then the error; the CLI sends the
/// request over HTTP instead.
pub const INFERENCE_WEBSOCKET_UNSUPPORTED: InferenceFailure = InferenceFailure {
    status: 501,
    message: "the request handler does not serve WebSocket model requests",
    code: Some("websocket_unsupported"),
};

/// How a WebSocket request ended, for [`websocket_end`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WebSocketEnd {
    /// The handler has no WebSocket support.
    Unsupported,
    /// The CLI closed its side (`end`).
    ClientClosed,
    /// The CLI cancelled it (`cancel`; also how it closes it at a
    /// session's end).
    ClientCancelled,
    /// The handler closed it.
    HandlerClosed,
    /// The handler failed (an error, a throw, a panic) or closed it with
    /// an error: its text is the message.
    HandlerFailed,
    /// Past [`MAX_INFERENCE_BUFFERED_CHUNKS`] messages the handler had not
    /// taken.
    Overflow,
}

/// What ends a WebSocket request (sent once, whichever end comes first):
/// `None`, the end chunk; or the failure (its head first if none went).
pub const fn websocket_end(end: WebSocketEnd) -> Option<InferenceFailure> {
    match end {
        WebSocketEnd::Unsupported => Some(INFERENCE_WEBSOCKET_UNSUPPORTED),
        WebSocketEnd::ClientClosed | WebSocketEnd::HandlerClosed => None,
        WebSocketEnd::ClientCancelled => Some(INFERENCE_CANCELLED),
        WebSocketEnd::HandlerFailed => Some(INFERENCE_FAILED),
        WebSocketEnd::Overflow => Some(INFERENCE_OVERFLOW),
    }
}

/// Headers that carry credentials: hosts show `<redacted>` for their
/// values in Debug output and logs (names are lower case on the wire).
pub const INFERENCE_SECRET_HEADERS: &[&str] =
    &["authorization", "proxy-authorization", "cookie", "set-cookie", "x-api-key", "api-key", "x-github-token"];

/// Whether header `name` (any case) carries a credential.
pub fn is_secret_header(name: &str) -> bool {
    INFERENCE_SECRET_HEADERS.iter().any(|s| s.eq_ignore_ascii_case(name))
}

/// Headers of the CLI's request that belong to its connection, not to the
/// request: a forwarding handler drops them (its HTTP client sets its own),
/// as the official SDKs drop them.
pub const INFERENCE_HOP_HEADERS: &[&str] = &[
    "host",
    "connection",
    "content-length",
    "transfer-encoding",
    "keep-alive",
    "upgrade",
    "proxy-connection",
    "te",
    "trailer",
];

/// One of the CLI's inference requests, as read from its params.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InferenceFrame<'a> {
    /// A new request's head (`requestId`).
    Start {
        /// The request's id.
        request_id: &'a str,
    },
    /// A body chunk (`end` on the last), or the request's cancellation.
    Chunk {
        /// The request's id.
        request_id: &'a str,
        /// The last chunk.
        end: bool,
        /// The CLI cancelled the request (implies the end).
        cancel: bool,
    },
}

/// The inference frame of request `method` with `params`, or `None` for
/// another method or params without a plain `requestId` (unreadable: the
/// engine refused it already).
pub fn read_inference_frame<'a>(method: &str, params: Value<'a>) -> Option<InferenceFrame<'a>> {
    // An id with escapes is not one a host could match: none is minted so.
    let request_id = params.get("requestId")?.as_str()?.as_plain()?;
    let flag = |name| params.get(name).and_then(|v| v.as_bool()).unwrap_or(false);
    match method {
        INFERENCE_REQUEST_START => Some(InferenceFrame::Start { request_id }),
        INFERENCE_REQUEST_CHUNK => {
            Some(InferenceFrame::Chunk { request_id, end: flag("end") || flag("cancel"), cancel: flag("cancel") })
        }
        _ => None,
    }
}

/// What a host does with a body chunk for a request holding `buffered`
/// unread chunks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChunkAdmission {
    /// Hand it to the request's handler.
    Keep,
    /// Fail the request with [`INFERENCE_OVERFLOW`] (the chunk is dropped).
    Overflow,
}

/// Whether a request holding `buffered` unread chunks takes one more.
pub const fn admit_chunk(buffered: usize) -> ChunkAdmission {
    if buffered < MAX_INFERENCE_BUFFERED_CHUNKS {
        ChunkAdmission::Keep
    } else {
        ChunkAdmission::Overflow
    }
}

/// Whether a new request is served when `in_flight` are.
pub const fn admit_request(in_flight: usize) -> bool {
    in_flight < MAX_INFERENCE_IN_FLIGHT
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Trigger, ANSWERS};

    #[cfg_attr(not(target_arch = "wasm32"), test)]
    #[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
    fn the_inference_requests_are_rows_of_the_answer_table() {
        for m in [INFERENCE_REQUEST_START, INFERENCE_REQUEST_CHUNK] {
            let row = ANSWERS.iter().find(|r| r.trigger == Trigger::Request(m)).expect(m);
            assert_eq!(row.handler, crate::HandlerKind::LlmInference);
        }
    }

    #[cfg_attr(not(target_arch = "wasm32"), test)]
    #[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
    fn frames_are_read_with_their_request_id() {
        let p = |s: &'static str| Value::parse(s.as_bytes()).unwrap();
        assert_eq!(
            read_inference_frame(INFERENCE_REQUEST_START, p(r#"{"requestId":"r1","method":"GET"}"#)),
            Some(InferenceFrame::Start { request_id: "r1" })
        );
        assert_eq!(
            read_inference_frame(INFERENCE_REQUEST_CHUNK, p(r#"{"requestId":"r1","data":"","end":true}"#)),
            Some(InferenceFrame::Chunk { request_id: "r1", end: true, cancel: false })
        );
        assert_eq!(
            read_inference_frame(INFERENCE_REQUEST_CHUNK, p(r#"{"requestId":"r1","data":"","cancel":true}"#)),
            Some(InferenceFrame::Chunk { request_id: "r1", end: true, cancel: true })
        );
        assert_eq!(read_inference_frame(INFERENCE_REQUEST_CHUNK, p(r#"{"requestId":5}"#)), None);
        assert_eq!(read_inference_frame(INFERENCE_REQUEST_CHUNK, p(r#"{"requestId":"a\"b"}"#)), None);
        assert_eq!(read_inference_frame("canvas.open", p(r#"{"requestId":"r1"}"#)), None);
        assert_eq!(admit_chunk(MAX_INFERENCE_BUFFERED_CHUNKS - 1), ChunkAdmission::Keep);
        assert_eq!(admit_chunk(MAX_INFERENCE_BUFFERED_CHUNKS), ChunkAdmission::Overflow);
        assert!(admit_request(MAX_INFERENCE_IN_FLIGHT - 1) && !admit_request(MAX_INFERENCE_IN_FLIGHT));
        assert!(is_secret_header("Authorization") && !is_secret_header("content-type"));
    }

    #[cfg_attr(not(target_arch = "wasm32"), test)]
    #[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
    fn a_websocket_ends_cleanly_only_when_either_side_closed_it() {
        assert_eq!(websocket_end(WebSocketEnd::ClientClosed), None);
        assert_eq!(websocket_end(WebSocketEnd::HandlerClosed), None);
        assert_eq!(websocket_end(WebSocketEnd::ClientCancelled), Some(INFERENCE_CANCELLED));
        assert_eq!(websocket_end(WebSocketEnd::HandlerFailed), Some(INFERENCE_FAILED));
        assert_eq!(websocket_end(WebSocketEnd::Overflow), Some(INFERENCE_OVERFLOW));
        // Refused with another head than 101: the CLI falls back to HTTP.
        let refusal = websocket_end(WebSocketEnd::Unsupported).unwrap();
        assert_ne!(refusal.status, INFERENCE_WEBSOCKET_OPENED);
    }
}
