//! The WebAssembly binding of `copilot-core`: the protocol engine (frame
//! decoder, router, session, pending-request and obligation tables, answer
//! table, deadlines) for JavaScript.
//!
//! JavaScript feeds the bytes it reads (`feed(Uint8Array, now)`) and gets
//! back, as one JSON text per call, every message decoded, where the
//! engine sent it and what it decided (an obligation to answer, a refusal
//! it already sent). Message bodies are embedded as they arrived (they are
//! already JSON), so one `JSON.parse` reads a whole batch. There is no
//! routing or answering policy in JavaScript: the engine decides; the JS
//! client delivers, calls the user's handlers and passes their answers on.
//!
//! Sessions are named by a `tag` (a number JavaScript chooses) and reserved
//! before the create or resume request is sent. Frames for sessions the
//! server has yet to name are parked here, and released in order when
//! [`CoreEngine::complete_open`] names the session.

use std::collections::HashMap;
use std::fmt::Write as _;

use copilot_core::{
    Cause, Engine, EngineConfig, EventInfo, FrameDecoder, GrowingBuffer, Id, JsonStr, ObligationId, Outgoing, Output,
    Payload, Route, RpcError, SessionHandle, Value,
};
use wasm_bindgen::prelude::*;

/// The largest frame accepted unless the constructor is told otherwise.
const DEFAULT_MAX_FRAME: usize = 16 << 20;
/// Frames held for a create whose id the server assigns, at most.
const MAX_PARKED: usize = 10_000;

/// The frame buffer's first size; it grows only when a larger frame arrives
/// (WebAssembly memory, once grown, is never given back).
const INITIAL_BUFFER: usize = 64 << 10;

/// The engine's capacities in WebAssembly: sessions, requests in flight,
/// open obligations. Parking is bounded by bytes (see [`CoreEngine::new`]).
type WasmEngine = Engine<u32, u32, Vec<u8>, 256, 1024, 2048>;

/// The parking storage unless the constructor is told otherwise.
const DEFAULT_PARK_BYTES: usize = 4 << 20;

/// One connection's protocol engine: routing plus every decision about the
/// waits of the agent (which handler answers, the refusals, deadlines).
///
/// Every method that may decide to send something (a refusal, an answer, an
/// error response) writes it to an outbox: after each call, send
/// [`take_outgoing`](Self::take_outgoing) to the CLI. Time is `now`, in
/// milliseconds of any clock (`performance.now()`, `Date.now()`).
///
/// Routed items (typed in the npm package's `index.d.ts`) carry, on a wait
/// the JS client must answer, `"obligation"` (an opaque string to give back
/// to [`answer`](Self::answer) or [`refuse`](Self::refuse)), `"handler"`
/// (the handler kind, such as `"permission"`) and `"deadline"`; on a wait
/// the engine already refused, `"refused"` (the cause, such as
/// `"sessionGone"`); on the CLI's reply to an answer, `"answerAck"`.
#[wasm_bindgen]
pub struct CoreEngine {
    decoder: FrameDecoder<GrowingBuffer>,
    engine: Box<WasmEngine>,
    handles: HashMap<u32, SessionHandle>,
    outbox: Vec<u8>,
}

#[wasm_bindgen]
impl CoreEngine {
    /// An engine accepting frames of at most `max_frame` bytes (16 MiB by
    /// default), refusing in a handler's place after `handler_timeout_ms`
    /// (5 minutes by default; 0: never), failing requests after
    /// `request_timeout_ms` (60 s by default; 0: never), and parking at most
    /// `park_bytes` (4 MiB by default) during a server-assigned create.
    #[wasm_bindgen(constructor)]
    pub fn new(
        max_frame: Option<u32>,
        handler_timeout_ms: Option<f64>,
        request_timeout_ms: Option<f64>,
        park_bytes: Option<u32>,
    ) -> CoreEngine {
        let size = max_frame.map_or(DEFAULT_MAX_FRAME, |m| m as usize).max(copilot_core::MIN_FRAME_BUFFER);
        let limit = |ms: Option<f64>, default: u64| match ms {
            None => Some(default),
            Some(ms) if ms <= 0.0 => None,
            Some(ms) => Some(ms as u64),
        };
        let config = EngineConfig::new()
            .handler_timeout(limit(handler_timeout_ms, 5 * 60_000))
            .request_timeout(limit(request_timeout_ms, 60_000))
            .park_frames(MAX_PARKED);
        let park = vec![0; park_bytes.map_or(DEFAULT_PARK_BYTES, |b| b as usize)];
        CoreEngine {
            decoder: FrameDecoder::with_buffer(GrowingBuffer::new(INITIAL_BUFFER.min(size))).with_limit(size),
            engine: Box::new(Engine::new(park, config)),
            handles: HashMap::new(),
            outbox: Vec::new(),
        }
    }

    /// Feeds received bytes; returns a JSON array of routed items.
    pub fn feed(&mut self, bytes: &[u8], now: f64) -> String {
        let now = ms(now);
        let mut batch = Batch::new();
        let outbox = &mut self.outbox;
        let mut out = |b: &[u8]| outbox.extend_from_slice(b);
        let mut rest = bytes;
        loop {
            let n = self.decoder.feed(rest);
            rest = &rest[n..];
            while let Some(o) = self.engine.poll(&mut self.decoder, now, &mut out) {
                batch.output(&o);
            }
            if rest.is_empty() {
                return batch.finish();
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

    /// The bytes the engine decided to send since the last call: write
    /// them to the CLI as they are (whole frames).
    pub fn take_outgoing(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.outbox)
    }

    /// Passes on a handler's answer (`payload`, JSON text; `null` leaves
    /// the answer's member out), with `siblings` (a JSON object's text, such
    /// as `{"decisionContext":..}`) beside it in the answering RPC. Throws if
    /// the wait was already answered (nothing is sent then) or the payload
    /// is not JSON (the refusal is sent instead).
    pub fn answer(&mut self, obligation: &str, payload: &str, siblings: Option<String>) -> Result<(), JsError> {
        self.try_answer(obligation, payload, siblings.as_deref().unwrap_or("")).map_err(|e| JsError::new(&e))
    }

    /// Discharges a wait without an answer: the handler left it to another
    /// client of the session (see `Engine::decline`). Throws if it was
    /// already answered, or cannot be declined (the refusal is sent then).
    pub fn decline(&mut self, obligation: &str) -> Result<(), JsError> {
        let outbox = &mut self.outbox;
        obligation_id(obligation)
            .and_then(|id| {
                self.engine.decline(id, &mut |b: &[u8]| outbox.extend_from_slice(b)).map_err(|e| e.to_string())
            })
            .map_err(|e| JsError::new(&e))
    }

    /// Answers a wait with its default refusal; `cause` is `"noHandler"`,
    /// `"handlerFailed"` or `"unreadable"`. Throws if it was already answered.
    pub fn refuse(&mut self, obligation: &str, cause: &str) -> Result<(), JsError> {
        self.try_refuse(obligation, cause).map_err(|e| JsError::new(&e))
    }

    /// Acts on the deadlines due at `now`: refusals go to the outbox; the
    /// ids of the requests that ran out of time are returned (fail their
    /// callers with a timeout).
    pub fn handle_timeout(&mut self, now: f64) -> Vec<f64> {
        let mut expired = Vec::new();
        let outbox = &mut self.outbox;
        self.engine
            .handle_timeout(ms(now), &mut |b: &[u8]| outbox.extend_from_slice(b), |id, _| expired.push(id.0 as f64));
        expired
    }

    /// When [`handle_timeout`](Self::handle_timeout) next has work, if ever.
    pub fn poll_timeout(&self) -> Option<f64> {
        self.engine.poll_timeout().map(|t| t as f64)
    }

    /// Allocates a request id and encodes the request; `params` is JSON
    /// text or empty for none. Its deadline is `now + timeout_ms` (none if
    /// `timeout_ms` is infinite), or the engine's request timeout when
    /// `timeout_ms` is not given.
    pub fn encode_request(
        &mut self,
        method: &str,
        params: &str,
        now: f64,
        timeout_ms: Option<f64>,
    ) -> Result<EncodedRequest, JsError> {
        let params = parse_params(params)?;
        let inserted = match timeout_ms {
            None => self.engine.insert_request(0, ms(now)),
            Some(t) if !t.is_finite() => self.engine.router().pending().insert_with_deadline(0, None),
            Some(t) => self.engine.router().pending().insert_with_deadline(0, Some(ms(now).saturating_add(ms(t)))),
        };
        let id = inserted.map_err(|_| JsError::new("too many requests in flight"))?;
        match encode(&Outgoing::Request { id, method, params: params.as_ref().map(|p| p as &dyn Payload) }) {
            Ok(frame) => Ok(EncodedRequest { id: id.0 as f64, frame }),
            Err(e) => {
                self.engine.router().pending().take(id.0);
                Err(e)
            }
        }
    }

    /// Forgets a request (its caller gave up).
    pub fn cancel_request(&mut self, id: f64) -> bool {
        self.engine.router().pending().take(id as u64).is_some()
    }

    /// The connection is gone: returns the ids of every request in flight
    /// (fail their callers) and forgets every open wait (no answer can
    /// reach the CLI any more).
    pub fn disconnect(&mut self) -> Vec<f64> {
        let mut ids = Vec::new();
        self.engine.disconnect(|id, _| ids.push(id.0 as f64));
        ids
    }

    /// Encodes a notification.
    pub fn encode_notification(&self, method: &str, params: &str) -> Result<Vec<u8>, JsError> {
        let params = parse_params(params)?;
        encode(&Outgoing::Notification { method, params: params.as_ref().map(|p| p as &dyn Payload) })
    }

    /// Reserves session `id` under `tag` before its create is sent.
    pub fn reserve_session(&mut self, id: &str, tag: u32) -> Result<(), JsError> {
        let handle = self.engine.reserve(id, tag).map_err(|e| JsError::new(&e.to_string()))?;
        self.handles.insert(tag, handle);
        Ok(())
    }

    /// Reserves session `id` under `tag` before its resume is sent. If the
    /// id is open on this client, the new tag takes it over: the old tag is
    /// returned (end its streams: the session was resumed elsewhere).
    pub fn resume_session(&mut self, id: &str, tag: u32) -> Result<Option<u32>, JsError> {
        let (handle, old) = self.engine.reserve_resume(id, tag).map_err(|e| JsError::new(&e.to_string()))?;
        if let Some((_, old_tag)) = old {
            self.handles.remove(&old_tag);
        }
        self.handles.insert(tag, handle);
        Ok(old.map(|(_, t)| t))
    }

    /// Reserves a slot under `tag` for a create whose id the server assigns.
    pub fn reserve_unassigned(&mut self, tag: u32) -> Result<(), JsError> {
        let handle = self.engine.reserve_unassigned(tag).map_err(|e| JsError::new(&e.to_string()))?;
        self.handles.insert(tag, handle);
        Ok(())
    }

    /// Completes the create or resume of `tag` with its response: `result`
    /// is the response's `result` JSON text, or, if `ok` is false, the
    /// error's message. Returns `{"opened":bool,"error"?:string,"routes":[...]}`:
    /// on failure (including an unreadable answer) the slot is released;
    /// `routes` are the parked frames now routed.
    pub fn complete_open(&mut self, tag: u32, ok: bool, result: &str, now: f64) -> Result<String, JsError> {
        self.try_complete_open(tag, ok, result, now).map_err(|e| JsError::new(&e))
    }

    /// Marks the session closing (its destroy is in flight).
    pub fn close_session(&mut self, tag: u32) -> Result<(), JsError> {
        self.try_close_session(tag).map_err(|e| JsError::new(&e))
    }

    /// Releases the session (dropped or destroyed): its open waits are
    /// refused (to the outbox). Returns the JSON array of parked frames that
    /// this made routable.
    pub fn release_session(&mut self, tag: u32, now: f64) -> String {
        if let Some(handle) = self.handles.remove(&tag) {
            let outbox = &mut self.outbox;
            self.engine.release(handle, &mut |b: &[u8]| outbox.extend_from_slice(b));
        }
        self.drain_parked(now)
    }

    /// The engine's answer table as JSON: one `{"name", "handler",
    /// "trigger"}` per row, `name` being the awaited event's type or the
    /// server request's method, `trigger` `"event"` or `"request"`.
    #[wasm_bindgen(js_name = answerRows)]
    pub fn answer_rows() -> String {
        let mut out = String::from("[");
        for (i, row) in copilot_core::ANSWERS.iter().enumerate() {
            let (name, trigger) = match row.trigger {
                copilot_core::Trigger::Event(t) => (t, "event"),
                copilot_core::Trigger::Request(m) => (m, "request"),
            };
            let comma = if i > 0 { "," } else { "" };
            // The names and kinds are plain ASCII identifiers: no escaping.
            let _ =
                write!(out, r#"{comma}{{"name":"{name}","handler":"{}","trigger":"{trigger}"}}"#, row.handler.name());
        }
        out.push(']');
        out
    }

    /// The engine's counters at `now`, as JSON.
    pub fn stats(&self, now: f64) -> String {
        let s = self.engine.stats(ms(now));
        let r = s.router;
        let mut refused = String::from("{");
        for (i, c) in Cause::ALL.iter().enumerate() {
            let _ = write!(refused, r#"{}"{}":{}"#, if i > 0 { "," } else { "" }, c.name(), s.refused(*c));
        }
        refused.push('}');
        format!(
            r#"{{"frames":{},"bytes":{},"malformed":{},"oversize":{},"unknownSession":{},"parked":{},"unmatchedResponses":{},"openObligations":{},"oldestObligationAge":{},"opened":{},"answered":{},"declined":{},"refused":{refused},"unanswerable":{},"parkedFrames":{},"parkedBytes":{},"parkDropped":{},"answersSent":{},"acksAccepted":{},"acksRefused":{}}}"#,
            r.frames,
            r.bytes,
            r.malformed,
            r.oversize,
            r.unknown_session,
            r.parked,
            r.unmatched_responses,
            s.open_obligations,
            s.oldest_obligation_age.map_or("null".to_owned(), |a| a.to_string()),
            s.opened,
            s.answered,
            s.declined,
            s.unanswerable,
            s.parked_frames,
            s.parked_bytes,
            s.park_dropped,
            s.answers_sent,
            s.acks_accepted,
            s.acks_refused,
        )
    }
}

impl CoreEngine {
    fn try_answer(&mut self, obligation: &str, payload: &str, siblings: &str) -> Result<(), String> {
        let id = obligation_id(obligation)?;
        let outbox = &mut self.outbox;
        self.engine
            .answer_with(id, payload.as_bytes(), siblings.as_bytes(), &mut |b: &[u8]| outbox.extend_from_slice(b))
            .map_err(|e| e.to_string())
    }

    fn try_refuse(&mut self, obligation: &str, cause: &str) -> Result<(), String> {
        let id = obligation_id(obligation)?;
        let cause =
            Cause::ALL.into_iter().find(|c| c.name() == cause).ok_or_else(|| format!("unknown cause {cause}"))?;
        let outbox = &mut self.outbox;
        self.engine.refuse(id, cause, &mut |b: &[u8]| outbox.extend_from_slice(b)).map_err(|e| e.to_string())
    }

    fn try_close_session(&mut self, tag: u32) -> Result<(), String> {
        let handle = self.handle(tag)?;
        self.engine.close(handle).map_err(|e| e.to_string())
    }

    fn try_complete_open(&mut self, tag: u32, ok: bool, result: &str, now: f64) -> Result<String, String> {
        let handle = self.handle(tag)?;
        let outbox = &mut self.outbox;
        let mut out = |b: &[u8]| outbox.extend_from_slice(b);
        let opened = if ok {
            match Value::parse(result.as_bytes()) {
                Ok(v) => self.engine.complete_open(handle, Ok(v), &mut out),
                Err(_) => {
                    self.engine.release(handle, &mut out);
                    Err(copilot_core::OpenError::Unreadable)
                }
            }
        } else {
            let quoted = json_string(result);
            match Value::parse(quoted.as_bytes()).ok().and_then(|v| v.as_str()) {
                Some(message) => {
                    let error = RpcError { code: copilot_core::INTERNAL_ERROR, message, data: None };
                    self.engine.complete_open(handle, Err(error), &mut out)
                }
                None => {
                    self.engine.release(handle, &mut out);
                    Err(copilot_core::OpenError::Rejected)
                }
            }
        };
        if opened.is_err() {
            self.handles.remove(&tag);
        }
        let routes = self.drain_parked(now);
        Ok(match opened {
            Ok(()) => format!(r#"{{"opened":true,"routes":{routes}}}"#),
            Err(e) => {
                let error = json_string(&e.to_string());
                format!(r#"{{"opened":false,"error":{error},"routes":{routes}}}"#)
            }
        })
    }

    fn handle(&self, tag: u32) -> Result<SessionHandle, String> {
        self.handles.get(&tag).copied().ok_or_else(|| format!("no session reserved under tag {tag}"))
    }

    fn drain_parked(&mut self, now: f64) -> String {
        let mut batch = Batch::new();
        let outbox = &mut self.outbox;
        let mut out = |b: &[u8]| outbox.extend_from_slice(b);
        while let Some(o) = self.engine.poll_parked(ms(now), &mut out) {
            batch.output(&o);
        }
        batch.finish()
    }
}

/// Milliseconds from JavaScript (a float, maybe fractional or negative).
fn ms(now: f64) -> u64 {
    if now.is_finite() && now > 0.0 {
        now as u64
    } else {
        0
    }
}

fn obligation_id(text: &str) -> Result<ObligationId, String> {
    text.parse::<u64>().map(ObligationId::from_bits).map_err(|_| "not an obligation id".to_owned())
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

/// `s` as a JSON string literal.
fn json_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    push_json_string(&mut out, s);
    out
}

/// Appends `s` as a JSON string literal (quotes, backslashes and control
/// characters escaped).
fn push_json_string(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
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
        self.route_with(route, |_| {});
    }

    /// An engine output: its route, with the obligation, refusal or
    /// acknowledgement the engine attached.
    fn output<T: Copy + Into<u32>, W>(&mut self, o: &Output<'_, T, W>) {
        self.route_with(&o.route, |w| {
            if let Some(ob) = &o.obligation {
                w.text("obligation", &ob.id.to_bits().to_string());
                w.text("handler", ob.handler.name());
                match ob.deadline {
                    Some(d) => w.number_u("deadline", d),
                    None => w.raw("deadline", b"null"),
                }
            }
            if let Some(cause) = o.refused {
                w.text("refused", cause.name());
            }
            if let Some(accepted) = o.answer_ack {
                w.raw("answerAck", if accepted { b"true" } else { b"false" });
            }
        });
    }

    /// As [`route`](Self::route), with `extra` fields appended to the item.
    fn route_with<T: Copy + Into<u32>, W>(&mut self, route: &Route<'_, T, W>, extra: impl FnOnce(&mut Fields<'_>)) {
        match route {
            Route::Event { target, session_id, event, .. } => self.item("event", |w| {
                w.number("session", (*target).into());
                w.json_str("sessionId", session_id);
                w.event(event);
                extra(w);
            }),
            Route::Lifecycle { kind, session_id, params } => self.item("lifecycle", |w| {
                w.json_str("type", kind);
                w.json_str("sessionId", session_id);
                w.raw("params", params.as_bytes());
                extra(w);
            }),
            Route::Response { request, result, .. } => self.item("response", |w| {
                w.number_u("id", request.0);
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
                extra(w);
            }),
            Route::Request { id, method, params, session } => self.item("request", |w| {
                w.id_text("idText", id);
                w.json_str("method", method);
                w.raw("params", params.map_or(&b"null"[..], |p| p.as_bytes()));
                match session {
                    Some((_, t)) => w.number("session", (*t).into()),
                    None => w.raw("session", b"null"),
                }
                extra(w);
            }),
            Route::Notification { method, params, session } => self.item("notification", |w| {
                w.json_str("method", method);
                w.raw("params", params.map_or(&b"null"[..], |p| p.as_bytes()));
                match session {
                    Some((_, t)) => w.number("session", (*t).into()),
                    None => w.raw("session", b"null"),
                }
                extra(w);
            }),
            Route::Park { session_id, .. } => self.item("parked", |w| {
                w.json_str("sessionId", session_id);
                extra(w);
            }),
            Route::UnknownSession { session_id, event, reply_to, method } => self.item("unknownSession", |w| {
                w.json_str("sessionId", session_id);
                w.json_str("method", method);
                if let Some(e) = event {
                    w.json_str("type", &e.event_type);
                }
                w.field_opt_id("replyTo", reply_to.as_ref());
                w.number_i("code", copilot_core::UNKNOWN_SESSION);
                extra(w);
            }),
            Route::UnmatchedResponse { id, .. } => self.item("unmatchedResponse", |w| {
                w.id_text("idText", id);
                extra(w);
            }),
            Route::Malformed(e) => self.item("malformed", |w| {
                w.text("error", &e.to_string());
                w.number_i("code", e.code());
                w.field_opt_id("replyTo", e.reply_to.as_ref());
                extra(w);
            }),
            Route::FrameError(e) => self.item("frameError", |w| {
                w.text("error", &e.to_string());
                extra(w);
            }),
        }
    }
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

    fn number_u(&mut self, key: &str, n: u64) {
        self.key(key);
        // Only request ids come here, whole numbers below 2^53; printed as
        // integers, which keeps float formatting (20 KB) out of the module.
        let _ = write!(self.out, "{}", n as i64);
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
        push_json_string(self.out, s);
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
    fn the_answer_table_comes_back_row_for_row() {
        let rows = parse(&CoreEngine::answer_rows());
        let rows = rows.as_array().unwrap();
        assert_eq!(rows.len(), copilot_core::ANSWERS.len());
        assert_eq!(
            rows[0],
            serde_json::json!({"name": "permission.requested", "handler": "permission", "trigger": "event"})
        );
        assert!(rows.contains(&serde_json::json!({"name": "hooks.invoke", "handler": "hooks", "trigger": "request"})));
    }

    #[test]
    fn events_and_responses_come_back_as_one_json_batch() {
        let mut c = CoreEngine::new(None, None, None, None);
        c.reserve_session("s\"1", 7).unwrap();
        let req = c.encode_request("session.send", r#"{"sessionId":"s\"1","prompt":"hi"}"#, 0.0, None).unwrap();
        assert_eq!(req.id, 1.0);
        let mut input = frame(
            r#"{"jsonrpc":"2.0","method":"session.event","params":{"sessionId":"s\"1","event":{"type":"session.info","id":"e","data":{"x":"\ud83d\ude00"}}}}"#,
        );
        input.extend(frame(r#"{"jsonrpc":"2.0","id":1,"result":{"messageId":"m"}}"#));
        input.extend(frame(
            r#"{"jsonrpc":"2.0","id":1e400,"method":"userInput.request","params":{"sessionId":"nobody"}}"#,
        ));
        input.extend(b"garbage\r\n");
        let batch = parse(&c.feed(&input, 0.0));
        assert_eq!(batch[0]["route"], "event");
        assert_eq!(batch[0]["session"], 7);
        assert_eq!(batch[0]["sessionId"], "s\"1");
        assert_eq!(batch[0]["awaitsAnswer"], false);
        assert_eq!(batch[0]["event"]["data"]["x"], "😀");
        assert_eq!(batch[1], serde_json::json!({"route": "response", "id": 1, "result": {"messageId": "m"}}));
        assert_eq!(batch[2]["route"], "unknownSession");
        assert_eq!(batch[2]["replyTo"], "1e400", "the id's exact text");
        assert_eq!(batch[2]["refused"], "sessionGone");
        assert_eq!(batch[3]["route"], "frameError");
        let sent = String::from_utf8(c.take_outgoing()).unwrap();
        assert!(
            sent.ends_with(
                r#"{"jsonrpc":"2.0","id":1e400,"error":{"code":-32603,"message":"the user is not available"}}"#
            ),
            "{sent}"
        );
    }

    #[test]
    fn strings_are_escaped_as_json() {
        for s in ["plain", "q\"b\\n\nr\rt\tz\u{1}\u{1f}", "😀 \u{7f}"] {
            assert_eq!(serde_json::from_str::<String>(&json_string(s)).unwrap(), s);
        }
        assert_eq!(json_string("a\u{1}"), r#""a\u0001""#);
    }

    #[test]
    fn requests_take_their_own_deadline_or_the_default() {
        let mut c = CoreEngine::new(None, None, Some(1000.0), None);
        let a = c.encode_request("ping", "{}", 10.0, Some(50.0)).unwrap().id;
        let b = c.encode_request("ping", "{}", 10.0, None).unwrap().id;
        let _never = c.encode_request("ping", "{}", 10.0, Some(f64::INFINITY)).unwrap().id;
        assert_eq!(c.poll_timeout(), Some(60.0));
        assert_eq!(c.handle_timeout(59.0), Vec::<f64>::new());
        assert_eq!(c.handle_timeout(60.0), vec![a]);
        assert_eq!(c.poll_timeout(), Some(1010.0));
        assert_eq!(c.handle_timeout(5000.0), vec![b]);
        assert_eq!(c.poll_timeout(), None, "the third has no deadline");
    }

    #[test]
    fn parked_frames_are_released_in_order_when_the_session_is_named() {
        let mut c = CoreEngine::new(None, None, None, None);
        c.reserve_unassigned(3).unwrap();
        let mut input = Vec::new();
        for n in 0..3 {
            input.extend(frame(&format!(r#"{{"jsonrpc":"2.0","method":"session.event","params":{{"sessionId":"new","event":{{"type":"session.info","id":"e{n}","data":{{}}}}}}}}"#)));
        }
        let batch = parse(&c.feed(&input, 0.0));
        assert!(batch.as_array().unwrap().iter().all(|r| r["route"] == "parked"), "parked, not delivered yet");
        let opened = parse(&c.try_complete_open(3, true, r#"{"sessionId":"new"}"#, 1.0).unwrap());
        let released = opened["routes"].as_array().unwrap();
        let ids: Vec<_> = released.iter().map(|r| r["event"]["id"].as_str().unwrap().to_owned()).collect();
        assert_eq!(ids, ["e0", "e1", "e2"]);
        assert!(released.iter().all(|r| r["session"] == 3));
        assert_eq!(parse(&c.stats(1.0))["parked"], 3);
    }

    fn engine_frame(body: &str) -> Vec<u8> {
        frame(body)
    }

    #[test]
    fn engine_items_carry_the_obligation_and_answers_go_to_the_outbox() {
        let mut e = CoreEngine::new(None, Some(1000.0), Some(0.0), None);
        e.reserve_session("s1", 4).unwrap();
        let opened = parse(&e.try_complete_open(4, true, "{}", 0.0).unwrap());
        assert_eq!(opened["opened"], true);
        let batch = parse(&e.feed(
            &engine_frame(r#"{"jsonrpc":"2.0","method":"session.event","params":{"sessionId":"s1","event":{"type":"permission.requested","id":"e","data":{"requestId":"r1","permissionRequest":{}}}}}"#),
            10.0,
        ));
        assert_eq!(batch[0]["route"], "event");
        assert_eq!(batch[0]["handler"], "permission");
        assert_eq!(batch[0]["deadline"], 1010);
        let ob = batch[0]["obligation"].as_str().unwrap().to_owned();
        assert!(e.take_outgoing().is_empty());
        e.try_answer(&ob, r#"{"kind":"approved"}"#, "").unwrap();
        let body = r#"{"jsonrpc":"2.0","id":"answer-1","method":"session.permissions.handlePendingPermissionRequest","params":{"sessionId":"s1","requestId":"r1","result":{"kind":"approved"}}}"#;
        assert_eq!(e.take_outgoing(), frame(body));
        assert!(e.try_answer(&ob, "{}", "").is_err(), "answered once");
        assert!(e.take_outgoing().is_empty());
        let ack = parse(&e.feed(&frame(r#"{"jsonrpc":"2.0","id":"answer-1","result":{"success":true}}"#), 11.0));
        assert_eq!(ack[0]["answerAck"], true);
        let stats = parse(&e.stats(20.0));
        assert_eq!((stats["answered"].as_u64(), stats["acksAccepted"].as_u64()), (Some(1), Some(1)));
        assert_eq!(stats["unmatchedResponses"], 0);
    }

    #[test]
    fn engine_refuses_at_deadlines_and_for_gone_sessions() {
        let mut e = CoreEngine::new(None, Some(100.0), None, None);
        e.reserve_session("s1", 1).unwrap();
        let batch = parse(&e.feed(
            &frame(
                r#"{"jsonrpc":"2.0","id":7,"method":"userInput.request","params":{"sessionId":"s1","question":"?"}}"#,
            ),
            0.0,
        ));
        assert_eq!(batch[0]["handler"], "userInput");
        let ob = batch[0]["obligation"].as_str().unwrap().to_owned();
        assert_eq!(e.poll_timeout(), Some(100.0));
        assert!(e.handle_timeout(99.0).is_empty());
        assert!(e.take_outgoing().is_empty());
        e.handle_timeout(100.0);
        let body = r#"{"jsonrpc":"2.0","id":7,"error":{"code":-32603,"message":"the user is not available"}}"#;
        assert_eq!(e.take_outgoing(), frame(body));
        assert!(e.try_refuse(&ob, "noHandler").is_err());

        let batch = parse(&e.feed(
            &frame(r#"{"jsonrpc":"2.0","method":"session.event","params":{"sessionId":"gone","event":{"type":"elicitation.requested","data":{"requestId":"q"}}}}"#),
            200.0,
        ));
        assert_eq!(batch[0]["route"], "unknownSession");
        assert_eq!(batch[0]["refused"], "sessionGone");
        let sent = String::from_utf8(e.take_outgoing()).unwrap();
        assert!(
            sent.ends_with(r#""params":{"sessionId":"gone","requestId":"q","result":{"action":"cancel"}}}"#),
            "{sent}"
        );
    }

    #[test]
    fn engine_sessions_open_park_and_take_over() {
        let mut e = CoreEngine::new(None, None, None, None);
        e.reserve_unassigned(3).unwrap();
        let parked = parse(&e.feed(
            &frame(r#"{"jsonrpc":"2.0","method":"session.event","params":{"sessionId":"new","event":{"type":"command.queued","data":{"requestId":"c1","command":"/x"}}}}"#),
            0.0,
        ));
        assert_eq!(parked[0]["route"], "parked");
        let opened = parse(&e.try_complete_open(3, true, r#"{"sessionId":"new"}"#, 1.0).unwrap());
        assert_eq!(opened["opened"], true);
        assert_eq!(opened["routes"][0]["session"], 3);
        assert_eq!(opened["routes"][0]["handler"], "queuedCommand");
        // Resuming the open id under another tag takes it over.
        assert_eq!(e.resume_session("new", 9).unwrap(), Some(3));
        // The resume's answer is unreadable: the slot is released, and the
        // wait it held is refused.
        let failed = parse(&e.try_complete_open(9, true, "not json", 2.0).unwrap());
        assert_eq!(failed["opened"], false);
        let sent = String::from_utf8(e.take_outgoing()).unwrap();
        assert!(sent.ends_with(r#""requestId":"c1","result":{"handled":false}}}"#), "{sent}");
        assert!(e.try_close_session(9).is_err(), "released");
    }
}
