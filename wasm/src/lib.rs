//! The WebAssembly binding of `copilot-core`: the frame decoder, the router,
//! the session and pending-request tables and the encoder, for JavaScript.
//!
//! JavaScript feeds the bytes it reads (`feed(Uint8Array)`) and gets back,
//! as one JSON text per call, every message decoded and where the core's
//! router sent it. Message bodies are embedded as they arrived (they are
//! already JSON), so one `JSON.parse` reads a whole batch. There is no
//! routing logic in JavaScript: the core decides; the JS client only
//! delivers what each route says.
//!
//! Sessions are named by a `tag` (a number JavaScript chooses) and reserved
//! before the create or resume request is sent. Frames for sessions the
//! server has yet to name are parked here, and released in order when
//! [`CoreConnection::assign_session`] names the session.

use std::collections::{HashMap, VecDeque};
use std::fmt::Write as _;

use copilot_core::{
    EventInfo, FrameDecoder, GrowingBuffer, Id, JsonStr, Outgoing, Payload, RequestId, Route, Router, SessionHandle,
    Value,
};
use wasm_bindgen::prelude::*;

type WasmRouter = Router<u32, u32, 256, 1024>;

/// The largest frame accepted unless the constructor is told otherwise.
const DEFAULT_MAX_FRAME: usize = 16 << 20;
/// Frames held for a create whose id the server assigns, at most.
const MAX_PARKED: usize = 10_000;

/// The frame buffer's first size; it grows only when a larger frame arrives
/// (WebAssembly memory, once grown, is never given back).
const INITIAL_BUFFER: usize = 64 << 10;

/// One connection's protocol state.
#[wasm_bindgen]
pub struct CoreConnection {
    decoder: FrameDecoder<GrowingBuffer>,
    router: Box<WasmRouter>,
    handles: HashMap<u32, SessionHandle>,
    parked: VecDeque<Vec<u8>>,
    park_overflow: u64,
}

impl Default for CoreConnection {
    fn default() -> Self {
        Self::new(None)
    }
}

#[wasm_bindgen]
impl CoreConnection {
    /// A connection accepting frames of at most `max_frame` bytes (16 MiB by
    /// default). The buffer starts at 64 KiB and grows only when a larger
    /// frame arrives.
    #[wasm_bindgen(constructor)]
    pub fn new(max_frame: Option<u32>) -> CoreConnection {
        let size = max_frame.map_or(DEFAULT_MAX_FRAME, |m| m as usize).max(copilot_core::MIN_FRAME_BUFFER);
        CoreConnection {
            decoder: FrameDecoder::with_buffer(GrowingBuffer::new(INITIAL_BUFFER.min(size))).with_limit(size),
            router: Box::new(Router::new()),
            handles: HashMap::new(),
            parked: VecDeque::new(),
            park_overflow: 0,
        }
    }

    /// Feeds received bytes; returns a JSON array of routed messages.
    pub fn feed(&mut self, bytes: &[u8]) -> String {
        let mut out = Batch::new();
        let mut rest = bytes;
        loop {
            let n = self.decoder.feed(rest);
            rest = &rest[n..];
            while let Some(route) = self.router.poll(&mut self.decoder) {
                if let Route::Park { body, .. } = &route {
                    park(&mut self.parked, &mut self.park_overflow, body, &mut out);
                } else {
                    out.route(&route);
                }
            }
            if rest.is_empty() {
                return out.finish();
            }
        }
    }

    /// Call when the stream has ended: reports a frame cut short.
    pub fn finish(&mut self) -> String {
        let mut out = Batch::new();
        if let Err(e) = self.decoder.finish() {
            out.route::<u32, u32>(&Route::FrameError(e));
        }
        out.finish()
    }

    /// Allocates a request id and encodes the request; `params` is JSON text
    /// (an object or array) or empty for none.
    pub fn encode_request(&mut self, method: &str, params: &str) -> Result<EncodedRequest, JsError> {
        let params = parse_params(params)?;
        let id = self.router.pending().insert(0).map_err(|_| JsError::new("too many requests in flight"))?;
        match encode(&Outgoing::Request { id, method, params: params.as_ref().map(|p| p as &dyn Payload) }) {
            Ok(frame) => Ok(EncodedRequest { id: id.0 as f64, frame }),
            Err(e) => {
                self.router.pending().take(id.0);
                Err(e)
            }
        }
    }

    /// Forgets a request (its caller gave up); a later answer is reported as
    /// unmatched.
    pub fn cancel_request(&mut self, id: f64) -> bool {
        self.router.pending().take(id as u64).is_some()
    }

    /// Fails every request in flight (on disconnect): returns their ids.
    pub fn drain_requests(&mut self) -> Vec<f64> {
        self.router.pending().drain().map(|(id, _)| id.0 as f64).collect()
    }

    /// Encodes a notification.
    pub fn encode_notification(&self, method: &str, params: &str) -> Result<Vec<u8>, JsError> {
        let params = parse_params(params)?;
        encode(&Outgoing::Notification { method, params: params.as_ref().map(|p| p as &dyn Payload) })
    }

    /// Encodes the answer to a server request; `id` is the request id's
    /// JSON text as a route gave it (`idText`), `result` JSON text.
    pub fn encode_response(&self, id: &str, result: &str) -> Result<Vec<u8>, JsError> {
        let id_value = Value::parse(id.as_bytes()).map_err(|e| JsError::new(&format!("bad id: {e}")))?;
        let result = Value::parse(result.as_bytes()).map_err(|e| JsError::new(&format!("bad result: {e}")))?;
        encode(&Outgoing::Response { id: to_id(id_value)?, result: &result })
    }

    /// Encodes an error answer to a server request.
    pub fn encode_error(&self, id: &str, code: i32, message: &str) -> Result<Vec<u8>, JsError> {
        let id_value = Value::parse(id.as_bytes()).map_err(|e| JsError::new(&format!("bad id: {e}")))?;
        encode(&Outgoing::Error { id: to_id(id_value)?, code: code.into(), message, data: None })
    }

    /// Reserves session `id` under `tag` before its create/resume is sent.
    pub fn reserve_session(&mut self, id: &str, tag: u32) -> Result<(), JsError> {
        let handle = self.router.sessions().reserve(id, tag).map_err(|e| JsError::new(&e.to_string()))?;
        self.handles.insert(tag, handle);
        Ok(())
    }

    /// Reserves a slot under `tag` for a create whose id the server assigns.
    pub fn reserve_unassigned(&mut self, tag: u32) -> Result<(), JsError> {
        let handle = self.router.sessions().reserve_unassigned(tag).map_err(|e| JsError::new(&e.to_string()))?;
        self.handles.insert(tag, handle);
        Ok(())
    }

    /// Names the session reserved unassigned under `tag`; returns the JSON
    /// array of the frames parked for it (and any other now routable).
    pub fn assign_session(&mut self, tag: u32, id: &str) -> Result<String, JsError> {
        let handle = self.handle(tag)?;
        self.router.sessions().assign(handle, id).map_err(|e| JsError::new(&e.to_string()))?;
        Ok(self.reroute_parked())
    }

    /// Marks the session created (its create/resume succeeded).
    pub fn activate_session(&mut self, tag: u32) -> Result<(), JsError> {
        let handle = self.handle(tag)?;
        self.router.sessions().activate(handle).map_err(|e| JsError::new(&e.to_string()))
    }

    /// Marks the session closing (its destroy is in flight).
    pub fn close_session(&mut self, tag: u32) -> Result<(), JsError> {
        let handle = self.handle(tag)?;
        self.router.sessions().close(handle).map_err(|e| JsError::new(&e.to_string()))
    }

    /// Releases the session; returns the JSON array of parked frames that
    /// became routable (as unknown) if no other create is in flight.
    pub fn release_session(&mut self, tag: u32) -> String {
        if let Some(handle) = self.handles.remove(&tag) {
            self.router.sessions().release(handle);
        }
        self.reroute_parked()
    }

    /// The router's counters, as JSON.
    pub fn stats(&self) -> String {
        let s = self.router.stats();
        format!(
            r#"{{"frames":{},"bytes":{},"malformed":{},"oversize":{},"unknownSession":{},"parked":{},"unmatchedResponses":{},"parkOverflow":{}}}"#,
            s.frames,
            s.bytes,
            s.malformed,
            s.oversize,
            s.unknown_session,
            s.parked,
            s.unmatched_responses,
            self.park_overflow
        )
    }
}

impl CoreConnection {
    fn handle(&self, tag: u32) -> Result<SessionHandle, JsError> {
        self.handles.get(&tag).copied().ok_or_else(|| JsError::new(&format!("no session reserved under tag {tag}")))
    }

    fn reroute_parked(&mut self) -> String {
        let mut out = Batch::new();
        for body in std::mem::take(&mut self.parked) {
            match self.router.route_parked(&body) {
                Route::Park { .. } => self.parked.push_back(body),
                route => out.route(&route),
            }
        }
        out.finish()
    }
}

/// Keeps a parked frame, or, when too many are held, reports it lost (a
/// request among them is reported so that it can still be answered).
fn park(parked: &mut VecDeque<Vec<u8>>, overflow: &mut u64, body: &[u8], out: &mut Batch) {
    if parked.len() < MAX_PARKED {
        parked.push_back(body.to_vec());
        return;
    }
    *overflow += 1;
    let reply = match copilot_core::Envelope::decode(body) {
        Ok(copilot_core::Envelope { message: copilot_core::Message::Request { id, .. }, .. }) => Some(id),
        _ => None,
    };
    out.item("parkOverflow", |w| {
        w.field_opt_id("replyTo", reply.as_ref());
    });
}

/// A request ready to send.
#[wasm_bindgen(getter_with_clone)]
pub struct EncodedRequest {
    /// Its id: the response will carry it.
    pub id: f64,
    /// The whole frame, header included.
    pub frame: Vec<u8>,
}

fn parse_params(params: &str) -> Result<Option<Value<'_>>, JsError> {
    if params.trim().is_empty() {
        return Ok(None);
    }
    let v = Value::parse(params.as_bytes()).map_err(|e| JsError::new(&format!("params are not JSON: {e}")))?;
    Ok(Some(v))
}

fn to_id(v: Value<'_>) -> Result<Id<'_>, JsError> {
    match (v.as_str(), v.as_number(), v.is_null()) {
        (Some(s), _, _) => Ok(Id::String(s)),
        (_, Some(n), _) => Ok(Id::Number(n)),
        (_, _, true) => Ok(Id::Null),
        _ => Err(JsError::new("an id is a string, a number or null")),
    }
}

fn encode(message: &Outgoing<'_>) -> Result<Vec<u8>, JsError> {
    message.to_vec(512).map_err(|e| JsError::new(&e.to_string()))
}

/// Writes a batch of routed messages as one JSON array.
struct Batch {
    out: String,
    items: usize,
}

impl Batch {
    fn new() -> Self {
        Batch { out: String::from("["), items: 0 }
    }

    fn finish(mut self) -> String {
        self.out.push(']');
        self.out
    }

    fn item(&mut self, route: &str, fields: impl FnOnce(&mut Fields<'_>)) {
        if self.items > 0 {
            self.out.push(',');
        }
        self.items += 1;
        let _ = write!(self.out, r#"{{"route":"{route}""#);
        fields(&mut Fields { out: &mut self.out });
        self.out.push('}');
    }

    fn route<T: Copy + Into<u32>, W>(&mut self, route: &Route<'_, T, W>) {
        match route {
            Route::Event { target, session_id, event, .. } => self.item("event", |w| {
                w.number("session", (*target).into());
                w.json_str("sessionId", session_id);
                w.event(event);
            }),
            Route::Lifecycle { kind, session_id, params } => self.item("lifecycle", |w| {
                w.json_str("type", kind);
                w.json_str("sessionId", session_id);
                w.raw("params", params.as_bytes());
            }),
            Route::Response { request, result, .. } => self.item("response", |w| {
                w.number_f("id", request_number(*request));
                match result {
                    Ok(v) => w.raw("result", v.as_bytes()),
                    Err(e) => {
                        w.number_i("code", e.code);
                        w.json_str("message", &e.message);
                        if let Some(d) = e.data {
                            w.raw("data", d.as_bytes());
                        }
                    }
                }
            }),
            Route::Request { id, method, params, session } => self.item("request", |w| {
                w.id_text("idText", id);
                w.json_str("method", method);
                w.raw("params", params.map_or(&b"null"[..], |p| p.as_bytes()));
                match session {
                    Some((_, t)) => w.number("session", (*t).into()),
                    None => w.raw("session", b"null"),
                }
            }),
            Route::Notification { method, params, session } => self.item("notification", |w| {
                w.json_str("method", method);
                w.raw("params", params.map_or(&b"null"[..], |p| p.as_bytes()));
                match session {
                    Some((_, t)) => w.number("session", (*t).into()),
                    None => w.raw("session", b"null"),
                }
            }),
            Route::Park { session_id, .. } => self.item("parked", |w| w.json_str("sessionId", session_id)),
            Route::UnknownSession { session_id, event, reply_to, method } => self.item("unknownSession", |w| {
                w.json_str("sessionId", session_id);
                w.json_str("method", method);
                if let Some(e) = event {
                    w.json_str("type", &e.event_type);
                }
                w.field_opt_id("replyTo", reply_to.as_ref());
                w.number_i("code", copilot_core::UNKNOWN_SESSION);
            }),
            Route::UnmatchedResponse { id, .. } => self.item("unmatchedResponse", |w| w.id_text("idText", id)),
            Route::Malformed(e) => self.item("malformed", |w| {
                w.text("error", &e.to_string());
                w.number_i("code", e.code());
                w.field_opt_id("replyTo", e.reply_to.as_ref());
            }),
            Route::FrameError(e) => self.item("frameError", |w| w.text("error", &e.to_string())),
        }
    }
}

fn request_number(id: RequestId) -> f64 {
    id.0 as f64
}

/// Fields of one item.
struct Fields<'o> {
    out: &'o mut String,
}

impl Fields<'_> {
    fn key(&mut self, key: &str) {
        let _ = write!(self.out, r#","{key}":"#);
    }

    fn number(&mut self, key: &str, n: u32) {
        self.key(key);
        let _ = write!(self.out, "{n}");
    }

    fn number_i(&mut self, key: &str, n: i64) {
        self.key(key);
        let _ = write!(self.out, "{n}");
    }

    fn number_f(&mut self, key: &str, n: f64) {
        self.key(key);
        let _ = write!(self.out, "{n}");
    }

    /// Validated JSON, embedded as it is.
    fn raw(&mut self, key: &str, json: &[u8]) {
        self.key(key);
        // Bodies come from the core's validated text: UTF-8 by construction.
        self.out.push_str(std::str::from_utf8(json).unwrap_or("null"));
    }

    /// A string as it arrived on the wire (its escapes are valid JSON).
    fn json_str(&mut self, key: &str, s: &JsonStr<'_>) {
        self.key(key);
        self.out.push('"');
        self.out.push_str(s.raw());
        self.out.push('"');
    }

    /// Any text, escaped.
    fn text(&mut self, key: &str, s: &str) {
        self.key(key);
        self.out.push_str(&serde_json::to_string(s).unwrap_or_else(|_| "\"\"".into()));
    }

    /// The JSON text of a request id, as a string (so `1e400` and `"a"`
    /// survive exactly for the answer).
    fn id_text(&mut self, key: &str, id: &Id<'_>) {
        let text = match id {
            Id::Null => "null".to_owned(),
            Id::Number(n) => n.raw().to_owned(),
            Id::String(s) => format!("\"{}\"", s.raw()),
        };
        self.text(key, &text);
    }

    fn field_opt_id(&mut self, key: &str, id: Option<&Id<'_>>) {
        match id {
            Some(id) => self.id_text(key, id),
            None => {
                self.key(key);
                self.out.push_str("null");
            }
        }
    }

    fn event(&mut self, e: &EventInfo<'_>) {
        self.json_str("type", &e.event_type);
        self.key("awaitsAnswer");
        self.out.push_str(if e.awaits_answer() { "true" } else { "false" });
        match &e.request_id {
            Some(r) => self.json_str("requestId", r),
            None => {
                self.key("requestId");
                self.out.push_str("null");
            }
        }
        self.raw("event", e.event.as_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(body: &str) -> Vec<u8> {
        format!("Content-Length: {}\r\n\r\n{body}", body.len()).into_bytes()
    }

    fn parse(batch: &str) -> serde_json::Value {
        serde_json::from_str(batch).unwrap_or_else(|e| panic!("{e}: {batch}"))
    }

    #[test]
    fn events_and_responses_come_back_as_one_json_batch() {
        let mut c = CoreConnection::new(None);
        c.reserve_session("s\"1", 7).unwrap();
        let req = c.encode_request("session.send", r#"{"sessionId":"s\"1","prompt":"hi"}"#).unwrap();
        assert_eq!(req.id, 1.0);
        let mut input = frame(
            r#"{"jsonrpc":"2.0","method":"session.event","params":{"sessionId":"s\"1","event":{"type":"permission.requested","id":"e","data":{"requestId":"r1","x":"\ud83d\ude00"}}}}"#,
        );
        input.extend(frame(r#"{"jsonrpc":"2.0","id":1,"result":{"messageId":"m"}}"#));
        input.extend(frame(
            r#"{"jsonrpc":"2.0","id":1e400,"method":"userInput.request","params":{"sessionId":"nobody"}}"#,
        ));
        input.extend(b"garbage\r\n");
        let batch = parse(&c.feed(&input));
        assert_eq!(batch[0]["route"], "event");
        assert_eq!(batch[0]["session"], 7);
        assert_eq!(batch[0]["sessionId"], "s\"1");
        assert_eq!(batch[0]["awaitsAnswer"], true);
        assert_eq!(batch[0]["requestId"], "r1");
        assert_eq!(batch[0]["event"]["data"]["x"], "😀");
        assert_eq!(batch[1], serde_json::json!({"route": "response", "id": 1, "result": {"messageId": "m"}}));
        assert_eq!(batch[2]["route"], "unknownSession");
        assert_eq!(batch[2]["replyTo"], "1e400", "the id's exact text, to answer with");
        assert_eq!(batch[3]["route"], "frameError");
        let answer = c.encode_error("1e400", -32602, "unknown session nobody").unwrap();
        assert!(String::from_utf8(answer)
            .unwrap()
            .ends_with(r#"{"jsonrpc":"2.0","id":1e400,"error":{"code":-32602,"message":"unknown session nobody"}}"#));
    }

    #[test]
    fn parked_frames_are_released_in_order_when_the_session_is_named() {
        let mut c = CoreConnection::new(None);
        c.reserve_unassigned(3).unwrap();
        let mut input = Vec::new();
        for n in 0..3 {
            input.extend(frame(&format!(r#"{{"jsonrpc":"2.0","method":"session.event","params":{{"sessionId":"new","event":{{"type":"session.info","id":"e{n}","data":{{}}}}}}}}"#)));
        }
        let batch = parse(&c.feed(&input));
        assert_eq!(batch.as_array().unwrap().len(), 0, "parked, not reported yet");
        let released = parse(&c.assign_session(3, "new").unwrap());
        let ids: Vec<_> =
            released.as_array().unwrap().iter().map(|r| r["event"]["id"].as_str().unwrap().to_owned()).collect();
        assert_eq!(ids, ["e0", "e1", "e2"]);
        assert!(released.as_array().unwrap().iter().all(|r| r["session"] == 3));
        assert_eq!(parse(&c.stats())["parked"], 3);
    }
}
