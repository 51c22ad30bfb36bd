//! JSON-RPC 2.0 envelopes: requests, notifications, responses and error
//! responses, read in one pass over the frame body together with the fields
//! that route a Copilot `session.event` or `session.lifecycle`.

use core::fmt;

use crate::json::{self, JsonError, JsonNumber, JsonStr, Kind, Value};
use crate::scan::{self, Visitor};

/// The JSON-RPC error code for text that is not JSON.
pub const PARSE_ERROR: i64 = -32700;
/// The JSON-RPC error code for JSON that is not a valid request.
pub const INVALID_REQUEST: i64 = -32600;
/// The JSON-RPC error code for a method the receiver does not know.
pub const METHOD_NOT_FOUND: i64 = -32601;
/// The JSON-RPC error code for parameters the receiver cannot use.
pub const INVALID_PARAMS: i64 = -32602;
/// The JSON-RPC error code for a failure inside the receiver.
pub const INTERNAL_ERROR: i64 = -32603;

/// Event types whose `data.requestId` the agent waits on: the client must
/// answer each with an RPC, or the session hangs.
pub const REQUEST_EVENT_TYPES: [&str; 12] = [
    "permission.requested",
    "external_tool.requested",
    "user_input.requested",
    "elicitation.requested",
    "sampling.requested",
    "exit_plan_mode.requested",
    "auto_mode_switch.requested",
    "session_limits_exhausted.requested",
    "mcp.oauth_required",
    "mcp.headers_refresh_required",
    "command.execute",
    "command.queued",
];

/// A JSON-RPC id as received: kept as written, so an answer echoes it exactly.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Id<'a> {
    /// `null` (only in error responses to unreadable requests).
    Null,
    /// A number, in its original text (`7`, `1e400`).
    Number(JsonNumber<'a>),
    /// A string, escapes kept.
    String(JsonStr<'a>),
}

impl Id<'_> {
    /// The id as a `u64` when it is a plain non-negative integer: the form
    /// of every id this crate allocates.
    pub fn as_u64(&self) -> Option<u64> {
        match self {
            Id::Number(n) => n.as_u64(),
            _ => None,
        }
    }

    /// Writes the id's JSON text.
    pub(crate) fn write(&self, out: &mut [u8], at: &mut usize) -> Option<()> {
        match self {
            Id::Null => json::put(out, at, b"null"),
            Id::Number(n) => json::put(out, at, n.raw().as_bytes()),
            Id::String(s) => {
                json::put(out, at, b"\"")?;
                json::put(out, at, s.raw().as_bytes())?;
                json::put(out, at, b"\"")
            }
        }
    }
}

impl fmt::Display for Id<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Id::Null => f.write_str("null"),
            Id::Number(n) => f.write_str(n.raw()),
            Id::String(s) => write!(f, "{s:?}"),
        }
    }
}

/// The `error` member of an error response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RpcError<'a> {
    /// The error code (for example -32601).
    pub code: i64,
    /// The error message.
    pub message: JsonStr<'a>,
    /// Optional extra data.
    pub data: Option<Value<'a>>,
}

/// A decoded JSON-RPC message, borrowing from the frame body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Message<'a> {
    /// A call that expects an answer.
    Request {
        /// The id to echo in the answer.
        id: Id<'a>,
        /// The method name.
        method: JsonStr<'a>,
        /// The parameters, an object or array.
        params: Option<Value<'a>>,
    },
    /// A call without an id: no answer.
    Notification {
        /// The method name.
        method: JsonStr<'a>,
        /// The parameters, an object or array.
        params: Option<Value<'a>>,
    },
    /// The answer to a request.
    Response {
        /// The id of the request it answers.
        id: Id<'a>,
        /// `result`, or `error`.
        result: Result<Value<'a>, RpcError<'a>>,
    },
}

/// The routing fields of a `session.event` notification.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EventInfo<'a> {
    /// `params.event.type`, such as `assistant.message`.
    pub event_type: JsonStr<'a>,
    /// `params.event.id`.
    pub id: Option<JsonStr<'a>>,
    /// `params.event.ephemeral` (absent means false).
    pub ephemeral: bool,
    /// `params.event.data.requestId`, for the event types in
    /// [`REQUEST_EVENT_TYPES`]: the id the client's answer must carry.
    /// `None` for other types, and for an awaited event that lacks one
    /// (which no answer can reach: report it).
    pub request_id: Option<JsonStr<'a>>,
    /// The whole `params.event` object.
    pub event: Value<'a>,
    /// `params.event.data`, if present.
    pub data: Option<Value<'a>>,
}

impl EventInfo<'_> {
    /// Whether the agent waits for the client to answer this event: its
    /// type is one of [`REQUEST_EVENT_TYPES`].
    pub fn awaits_answer(&self) -> bool {
        REQUEST_EVENT_TYPES.iter().any(|t| self.event_type == *t)
    }
}

/// A decoded message and the Copilot fields that route it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Envelope<'a> {
    /// The JSON-RPC message.
    pub message: Message<'a>,
    /// `params.sessionId`, when it is a string. Session-scoped notifications
    /// and server requests carry it.
    pub session_id: Option<JsonStr<'a>>,
    /// For `session.event`: the event's routing fields.
    pub event: Option<EventInfo<'a>>,
    /// For `session.lifecycle`: `params.type` (`session.created`, ...).
    pub lifecycle: Option<JsonStr<'a>>,
}

/// What makes a body an invalid message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum DecodeErrorKind {
    /// Not JSON at all (-32700).
    Json(JsonError),
    /// The JSON is not an object (a batch array is not supported).
    NotAnObject,
    /// `jsonrpc` is missing or not `"2.0"`.
    BadVersion,
    /// `method` is not a string.
    BadMethod,
    /// `id` is not a number, string or null, or a response has none.
    BadId,
    /// `params` is neither an object nor an array.
    BadParams,
    /// Neither `method` nor `result`/`error`; or both `result` and `error`.
    NotAMessage,
    /// `error` is not `{code: integer, message: string, data?}`.
    BadErrorObject,
    /// A `session.event` without a string `sessionId` and an `event` object
    /// with a string `type`.
    BadEvent,
    /// A `session.lifecycle` without string `type` and `sessionId`.
    BadLifecycle,
}

/// A body that is not a valid message. If it was a request whose id could be
/// read, `reply_to` holds that id: answer it with an error of [`code`](Self::code).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DecodeError<'a> {
    /// What is wrong.
    pub kind: DecodeErrorKind,
    /// The id of the request that must still be answered, if any.
    pub reply_to: Option<Id<'a>>,
}

impl DecodeError<'_> {
    /// The JSON-RPC error code: -32700 for text that is not JSON, -32600 for
    /// JSON that is not a valid message.
    pub const fn code(&self) -> i64 {
        match self.kind {
            DecodeErrorKind::Json(_) => PARSE_ERROR,
            _ => INVALID_REQUEST,
        }
    }
}

impl DecodeError<'_> {
    /// Writes the message that [`Display`](fmt::Display) shows, in parts,
    /// without `core::fmt` (for builds that leave it out).
    pub fn write_message(&self, out: &mut dyn FnMut(&str)) {
        match self.kind {
            DecodeErrorKind::Json(e) => {
                out(crate::messages::DECODE_PARSE_ERROR);
                e.write_message(out);
            }
            DecodeErrorKind::NotAnObject => out(crate::messages::DECODE_NOT_AN_OBJECT),
            DecodeErrorKind::BadVersion => out(crate::messages::DECODE_BAD_VERSION),
            DecodeErrorKind::BadMethod => out(crate::messages::DECODE_BAD_METHOD),
            DecodeErrorKind::BadId => out(crate::messages::DECODE_BAD_ID),
            DecodeErrorKind::BadParams => out(crate::messages::DECODE_BAD_PARAMS),
            DecodeErrorKind::NotAMessage => out(crate::messages::DECODE_NOT_A_MESSAGE),
            DecodeErrorKind::BadErrorObject => out(crate::messages::DECODE_BAD_ERROR_OBJECT),
            DecodeErrorKind::BadEvent => out(crate::messages::DECODE_BAD_EVENT),
            DecodeErrorKind::BadLifecycle => out(crate::messages::DECODE_BAD_LIFECYCLE),
        }
    }
}

impl fmt::Display for DecodeError<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        crate::text::fmt_parts(f, |out| self.write_message(out))
    }
}

impl core::error::Error for DecodeError<'_> {}

// Fields the one-pass scan remembers. Each path step is only followed under
// the parent it belongs to.
const JSONRPC: u8 = 1;
const ID: u8 = 2;
const METHOD: u8 = 3;
const PARAMS: u8 = 4;
const RESULT: u8 = 5;
const ERROR: u8 = 6;
const P_SESSION_ID: u8 = 7;
const P_EVENT: u8 = 8;
const P_TYPE: u8 = 9;
const E_CODE: u8 = 10;
const E_MESSAGE: u8 = 11;
const E_DATA: u8 = 12;
const EV_TYPE: u8 = 13;
const EV_ID: u8 = 14;
const EV_DATA: u8 = 15;
const EV_EPHEMERAL: u8 = 16;
const D_REQUEST_ID: u8 = 17;
/// The parent of the root object's members; its slot holds the root's span.
const ROOT: u8 = 18;
const FIELDS: usize = 19;

struct Fields {
    /// The field each open level is inside (0: none of interest; the root
    /// level is `ROOT`).
    path: [u8; 5],
    spans: [(u32, u32); FIELDS],
}

impl Fields {
    fn get<'a>(&self, body: &'a [u8], field: u8) -> Option<Value<'a>> {
        let (start, end) = self.spans[usize::from(field)];
        (end > 0).then(|| Value::from_validated(&body[start as usize..end as usize]))
    }
}

impl Visitor for Fields {
    /// Inlined into the scan: most keys lie deeper than the path or under a
    /// member of no interest, and are passed over without a call (not in
    /// builds sized for space: wasm, bare metal).
    #[cfg_attr(not(any(target_arch = "wasm32", target_os = "none")), inline(always))]
    fn key(&mut self, depth: usize, key: &[u8], escaped: bool) {
        if depth > 4 {
            return;
        }
        let parent = self.path[depth - 1];
        self.path[depth] = if parent == 0 { 0 } else { field_named(parent, key, escaped) };
    }

    #[inline]
    fn element(&mut self, depth: usize) {
        if depth <= 4 {
            self.path[depth] = 0;
        }
    }

    #[inline]
    fn value(&mut self, depth: usize, start: usize, end: usize) {
        // Without a branch on the depth: past the path, or at the root
        // (whose span goes to a slot of its own), nothing is of interest.
        let field = self.path.get(depth).copied().unwrap_or(0);
        if field != 0 {
            // Last duplicate wins, as in JavaScript's JSON.parse.
            self.spans[usize::from(field)] = (start as u32, end as u32);
        }
    }
}

/// The field a member named `key` is, under the field `parent`; 0 for none.
/// Each field of interest sits under one parent only, so the parent alone
/// (`ROOT` for the root object) tells which names to look for.
fn field_named(parent: u8, key: &[u8], escaped: bool) -> u8 {
    let key = JsonStr::from_validated(key);
    match parent {
        ROOT => match_key(
            key,
            escaped,
            &[
                ("jsonrpc", JSONRPC),
                ("id", ID),
                ("method", METHOD),
                ("params", PARAMS),
                ("result", RESULT),
                ("error", ERROR),
            ],
        ),
        PARAMS => match_key(key, escaped, &[("sessionId", P_SESSION_ID), ("event", P_EVENT), ("type", P_TYPE)]),
        ERROR => match_key(key, escaped, &[("code", E_CODE), ("message", E_MESSAGE), ("data", E_DATA)]),
        P_EVENT => {
            match_key(key, escaped, &[("type", EV_TYPE), ("id", EV_ID), ("data", EV_DATA), ("ephemeral", EV_EPHEMERAL)])
        }
        EV_DATA => match_key(key, escaped, &[("requestId", D_REQUEST_ID)]),
        _ => 0,
    }
}

/// Inlined into each use, so that the names are constants to compare with
/// (not in builds sized for space: wasm, bare metal).
#[cfg_attr(not(any(target_arch = "wasm32", target_os = "none")), inline(always))]
fn match_key(key: JsonStr<'_>, escaped: bool, names: &[(&str, u8)]) -> u8 {
    if escaped {
        return match_escaped(key, names);
    }
    names.iter().find(|(n, _)| key.as_bytes() == n.as_bytes()).map_or(0, |&(_, f)| f)
}

/// Keys written with escapes (`"\u0069d"`) are rare: compare them decoded.
#[cold]
fn match_escaped(key: JsonStr<'_>, names: &[(&str, u8)]) -> u8 {
    names.iter().find(|(n, _)| key == *n).map_or(0, |&(_, f)| f)
}

impl<'a> Envelope<'a> {
    /// Decodes one frame body. Any valid JSON text is read (escapes anywhere,
    /// any key order, numbers of any size); the whole body is validated.
    pub fn decode(body: &'a [u8]) -> Result<Self, DecodeError<'a>> {
        let root_is_object = body.iter().find(|b| !matches!(b, b' ' | b'\t' | b'\n' | b'\r')) == Some(&b'{');
        let mut f = Fields { path: [ROOT, 0, 0, 0, 0], spans: [(0, 0); FIELDS] };
        if body.len() > u32::MAX as usize {
            // Spans are stored as u32; no frame buffer is this large.
            return Err(DecodeError { kind: DecodeErrorKind::NotAMessage, reply_to: None });
        }
        scan::scan(body, &mut f).map_err(|e| DecodeError { kind: DecodeErrorKind::Json(e), reply_to: None })?;
        if !root_is_object {
            return Err(DecodeError { kind: DecodeErrorKind::NotAnObject, reply_to: None });
        }
        let get = |field| f.get(body, field);

        let method = get(METHOD);
        let raw_id = get(ID);
        let id = raw_id.map(|v| match v.kind() {
            Kind::Null => Some(Id::Null),
            Kind::Number => v.as_number().map(Id::Number),
            Kind::String => v.as_str().map(Id::String),
            _ => None,
        });
        // Errors in a request are answered when its id is readable.
        let reply_to = match (method, id) {
            (Some(_), Some(Some(id))) => Some(id),
            _ => None,
        };
        let fail = |kind| Err(DecodeError { kind, reply_to });

        if get(JSONRPC).and_then(|v| v.as_str()).is_none_or(|v| v.as_bytes() != b"2.0") {
            return fail(DecodeErrorKind::BadVersion);
        }
        if let Some(Some(_)) | None = id {
        } else {
            return fail(DecodeErrorKind::BadId);
        }
        let params = get(PARAMS);
        let message = match method {
            Some(m) => {
                let Some(method) = m.as_str() else { return fail(DecodeErrorKind::BadMethod) };
                if params.is_some_and(|p| !matches!(p.kind(), Kind::Object | Kind::Array)) {
                    return fail(DecodeErrorKind::BadParams);
                }
                match id {
                    Some(Some(id)) => Message::Request { id, method, params },
                    _ => Message::Notification { method, params },
                }
            }
            None => {
                let result = match (get(RESULT), get(ERROR)) {
                    (Some(r), None) => Ok(r),
                    (None, Some(e)) => Err(rpc_error(e, &get)
                        .ok_or(DecodeError { kind: DecodeErrorKind::BadErrorObject, reply_to: None })?),
                    _ => return fail(DecodeErrorKind::NotAMessage),
                };
                let Some(Some(id)) = id else { return fail(DecodeErrorKind::BadId) };
                Message::Response { id, result }
            }
        };

        let session_id = get(P_SESSION_ID).and_then(|v| v.as_str());
        let mut envelope = Envelope { message, session_id, event: None, lifecycle: None };
        if let Message::Notification { method, .. } = message {
            if method == "session.event" {
                envelope.event = Some(
                    event_info(&get, session_id)
                        .ok_or(DecodeError { kind: DecodeErrorKind::BadEvent, reply_to: None })?,
                );
            } else if method == "session.lifecycle" {
                let kind = get(P_TYPE).and_then(|v| v.as_str());
                if kind.is_none() || session_id.is_none() {
                    return fail(DecodeErrorKind::BadLifecycle);
                }
                envelope.lifecycle = kind;
            }
        }
        Ok(envelope)
    }
}

fn rpc_error<'a>(e: Value<'a>, get: &impl Fn(u8) -> Option<Value<'a>>) -> Option<RpcError<'a>> {
    if e.kind() != Kind::Object {
        return None;
    }
    Some(RpcError { code: get(E_CODE)?.as_number()?.as_i64()?, message: get(E_MESSAGE)?.as_str()?, data: get(E_DATA) })
}

fn event_info<'a>(get: &impl Fn(u8) -> Option<Value<'a>>, session_id: Option<JsonStr<'a>>) -> Option<EventInfo<'a>> {
    session_id?;
    let event = get(P_EVENT).filter(|e| e.kind() == Kind::Object)?;
    let event_type = get(EV_TYPE)?.as_str()?;
    let data = get(EV_DATA);
    // Compared as written unless the type holds an escape (rare): one search
    // for a backslash rather than one per awaited type.
    let plain = event_type.as_plain();
    let awaited = REQUEST_EVENT_TYPES.iter().any(|t| plain.map_or_else(|| event_type == *t, |p| p == *t));
    Some(EventInfo {
        event_type,
        id: get(EV_ID).and_then(|v| v.as_str()),
        ephemeral: get(EV_EPHEMERAL).and_then(|v| v.as_bool()).unwrap_or(false),
        request_id: if awaited { get(D_REQUEST_ID).and_then(|v| v.as_str()) } else { None },
        event,
        data,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode(s: &str) -> Result<Envelope<'_>, DecodeError<'_>> {
        Envelope::decode(s.as_bytes())
    }

    fn kind(s: &str) -> DecodeErrorKind {
        decode(s).unwrap_err().kind
    }

    #[cfg_attr(not(target_arch = "wasm32"), test)]
    #[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
    fn request_with_number_string_and_null_ids() {
        let e = decode(
            r#"{"jsonrpc":"2.0","id":3,"method":"userInput.request","params":{"sessionId":"s1","question":"?"}}"#,
        )
        .unwrap();
        let Message::Request { id, method, params } = e.message else { panic!("{e:?}") };
        assert_eq!(id.as_u64(), Some(3));
        assert_eq!(method, "userInput.request");
        assert_eq!(params.unwrap().get("question").unwrap().as_str().unwrap(), "?");
        assert_eq!(e.session_id.unwrap(), "s1");

        let e = decode(r#"{"id":"a\"b","params":[],"method":"x","jsonrpc":"2.0"}"#).unwrap();
        let Message::Request { id: Id::String(s), .. } = e.message else { panic!() };
        assert_eq!(s.raw(), r#"a\"b"#);
        assert_eq!(s, "a\"b");

        let e = decode(r#"{"jsonrpc":"2.0","id":null,"method":"x"}"#).unwrap();
        assert!(matches!(e.message, Message::Request { id: Id::Null, params: None, .. }));
    }

    #[cfg_attr(not(target_arch = "wasm32"), test)]
    #[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
    fn notification_with_method_after_params() {
        let e = decode(r#"{"params":{"sessionId":"s","event":{"type":"session.idle","data":{},"id":"e1","ephemeral":true}},"jsonrpc":"2.0","method":"session.event"}"#).unwrap();
        assert!(matches!(e.message, Message::Notification { .. }));
        let ev = e.event.unwrap();
        assert_eq!(ev.event_type, "session.idle");
        assert_eq!(ev.id.unwrap(), "e1");
        assert!(ev.ephemeral);
        assert!(!ev.awaits_answer());
        assert_eq!(ev.data.unwrap().raw(), "{}");
    }

    #[cfg_attr(not(target_arch = "wasm32"), test)]
    #[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
    fn request_like_events_carry_their_request_id() {
        let e = decode(r#"{"jsonrpc":"2.0","method":"session.event","params":{"sessionId":"s","event":{"data":{"requestId":"r\u002d1","permissionRequest":{"kind":"shell"}},"type":"permission.requested","id":"e"}}}"#).unwrap();
        let ev = e.event.unwrap();
        assert!(ev.awaits_answer());
        assert_eq!(ev.request_id.unwrap(), "r-1");
        // A completion echoes the id but waits for nothing.
        let e = decode(r#"{"jsonrpc":"2.0","method":"session.event","params":{"sessionId":"s","event":{"type":"permission.completed","data":{"requestId":"r"}}}}"#).unwrap();
        assert_eq!(e.event.unwrap().request_id, None);
        // A requestId deeper than data.requestId is not the event's.
        let e = decode(r#"{"jsonrpc":"2.0","method":"session.event","params":{"sessionId":"s","event":{"type":"external_tool.requested","data":{"arguments":{"requestId":"no"}}}}}"#).unwrap();
        let ev = e.event.unwrap();
        assert_eq!(ev.request_id, None);
        assert!(ev.awaits_answer(), "awaited, yet unanswerable: the host reports it");
    }

    #[cfg_attr(not(target_arch = "wasm32"), test)]
    #[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
    fn lifecycle_has_type_and_session() {
        let e = decode(r#"{"jsonrpc":"2.0","method":"session.lifecycle","params":{"type":"session.created","sessionId":"s","metadata":{}}}"#).unwrap();
        assert_eq!(e.lifecycle.unwrap(), "session.created");
        assert_eq!(e.session_id.unwrap(), "s");
        assert_eq!(
            kind(r#"{"jsonrpc":"2.0","method":"session.lifecycle","params":{"sessionId":"s"}}"#),
            DecodeErrorKind::BadLifecycle
        );
    }

    #[cfg_attr(not(target_arch = "wasm32"), test)]
    #[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
    fn responses_and_error_responses() {
        let e = decode(r#"{"jsonrpc":"2.0","id":9,"result":{"ok":true}}"#).unwrap();
        let Message::Response { id, result: Ok(r) } = e.message else { panic!() };
        assert_eq!(id.as_u64(), Some(9));
        assert_eq!(r.get("ok").unwrap().as_bool(), Some(true));

        let e = decode(r#"{"jsonrpc":"2.0","id":"x","error":{"message":"nope","code":-32601,"data":[1]}}"#).unwrap();
        let Message::Response { result: Err(err), .. } = e.message else { panic!() };
        assert_eq!(err.code, -32601);
        assert_eq!(err.message, "nope");
        assert_eq!(err.data.unwrap().raw(), "[1]");

        let e = decode(r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"bad"}}"#).unwrap();
        assert!(matches!(e.message, Message::Response { id: Id::Null, result: Err(_) }));
    }

    #[cfg_attr(not(target_arch = "wasm32"), test)]
    #[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
    fn invalid_messages_get_the_right_kind_and_code() {
        let cases = [
            ("[1]", DecodeErrorKind::NotAnObject),
            ("\"x\"", DecodeErrorKind::NotAnObject),
            (r#"{"id":1,"method":"x"}"#, DecodeErrorKind::BadVersion),
            (r#"{"jsonrpc":"1.0","id":1,"method":"x"}"#, DecodeErrorKind::BadVersion),
            (r#"{"jsonrpc":"2.0","id":1,"method":5}"#, DecodeErrorKind::BadMethod),
            (r#"{"jsonrpc":"2.0","id":{},"method":"x"}"#, DecodeErrorKind::BadId),
            (r#"{"jsonrpc":"2.0","result":1}"#, DecodeErrorKind::BadId),
            (r#"{"jsonrpc":"2.0","id":1,"method":"x","params":3}"#, DecodeErrorKind::BadParams),
            (r#"{"jsonrpc":"2.0","id":1}"#, DecodeErrorKind::NotAMessage),
            (r#"{"jsonrpc":"2.0","id":1,"result":1,"error":{"code":1,"message":""}}"#, DecodeErrorKind::NotAMessage),
            (r#"{"jsonrpc":"2.0","id":1,"error":{"code":1.5,"message":""}}"#, DecodeErrorKind::BadErrorObject),
            (r#"{"jsonrpc":"2.0","id":1,"error":"x"}"#, DecodeErrorKind::BadErrorObject),
            (
                r#"{"jsonrpc":"2.0","method":"session.event","params":{"event":{"type":"x"}}}"#,
                DecodeErrorKind::BadEvent,
            ),
            (
                r#"{"jsonrpc":"2.0","method":"session.event","params":{"sessionId":"s","event":{"type":1}}}"#,
                DecodeErrorKind::BadEvent,
            ),
        ];
        for (text, expected) in cases {
            let e = decode(text).unwrap_err();
            assert_eq!(e.kind, expected, "{text}");
            assert_eq!(e.code(), INVALID_REQUEST);
        }
        let e = decode("{\"jsonrpc\":\"2.0\",").unwrap_err();
        assert!(matches!(e.kind, DecodeErrorKind::Json(_)));
        assert_eq!(e.code(), PARSE_ERROR);
    }

    #[cfg_attr(not(target_arch = "wasm32"), test)]
    #[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
    fn invalid_requests_keep_the_id_to_answer() {
        let e = decode(r#"{"jsonrpc":"1.0","id":"q","method":"x"}"#).unwrap_err();
        assert!(matches!(e.reply_to, Some(Id::String(s)) if s == "q"));
        let e = decode(r#"{"jsonrpc":"2.0","id":4,"method":"x","params":"p"}"#).unwrap_err();
        assert_eq!(e.reply_to.and_then(|i| i.as_u64()), Some(4));
        // Notifications and responses are never answered.
        assert_eq!(decode(r#"{"jsonrpc":"1.0","method":"x"}"#).unwrap_err().reply_to, None);
        assert_eq!(decode(r#"{"jsonrpc":"1.0","id":1,"result":1}"#).unwrap_err().reply_to, None);
    }

    #[cfg_attr(not(target_arch = "wasm32"), test)]
    #[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
    fn escaped_keys_and_duplicates_are_read_like_json_parse() {
        let e = decode(r#"{"jsonrpc":"2.0","\u006dethod":"a","method":"b","params":{"session\u0049d":"s"}}"#).unwrap();
        let Message::Notification { method, .. } = e.message else { panic!() };
        assert_eq!(method, "b");
        assert_eq!(e.session_id.unwrap(), "s");
        // Keys of the same names deeper down are not confused with ours.
        let e = decode(r#"{"jsonrpc":"2.0","id":1,"result":{"id":2,"method":"m","error":{}}}"#).unwrap();
        assert!(matches!(e.message, Message::Response { result: Ok(_), .. }));
    }
}
