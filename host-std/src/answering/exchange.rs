//! One model request's two halves, as the inference request handler sees
//! them: the request ([`CopilotRequest`]: its head and its body as it
//! arrives) and the response ([`CopilotResponse`]: the calls that carry it
//! to the CLI), with what both halves share (the body's items, the
//! cancellation, headers shown redacted). The HTTP and WebSocket halves
//! (inference.rs, websocket.rs) are built on these.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::Receiver;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use copilot_core::{
    is_secret_header, InferenceFailure, INFERENCE_CANCELLED, INFERENCE_FAILED, INFERENCE_OVERFLOW,
    INFERENCE_RESPONSE_CHUNK, INFERENCE_RESPONSE_START,
};
use serde_json::{json, Value};

use crate::driver::Connection;
use crate::wait::block_on;

/// HTTP headers: lower-case name -> its values, as the CLI sends them.
pub type CopilotHeaders = BTreeMap<String, Vec<String>>;

/// An item of a request's body, in the order it came.
pub(super) enum BodyItem {
    /// A chunk (a WebSocket message), and whether it was binary.
    Chunk(Vec<u8>, bool),
    End,
    Cancel(String),
    Overflow,
    /// The handler closed its WebSocket (wakes the request's thread).
    Closed,
}

/// One model request of the CLI: its head, and its body as it arrives.
pub struct CopilotRequest {
    /// The CLI's id of the request.
    pub request_id: String,
    /// The session that made it, if any (none for the model catalogue).
    pub session_id: Option<String>,
    /// The HTTP method.
    pub method: String,
    /// The absolute URL.
    pub url: String,
    /// The headers (those of [`copilot_core::INFERENCE_SECRET_HEADERS`]
    /// are shown redacted by `Debug`).
    pub headers: CopilotHeaders,
    /// `http` (also SSE) or `websocket`.
    pub transport: String,
    /// The agent trajectory that made it, if any.
    pub agent_id: Option<String>,
    /// Its parent trajectory, if any.
    pub parent_agent_id: Option<String>,
    /// The CLI's class of interaction (`conversation-agent`, ...), if any.
    pub interaction_type: Option<String>,
    pub(super) body: Receiver<BodyItem>,
    pub(super) shared: Arc<Shared>,
    pub(super) done: bool,
}

/// What a request's entry and its handler both see.
#[derive(Default)]
pub(super) struct Shared {
    /// Body chunks sent and not read yet.
    pub(super) buffered: AtomicUsize,
    /// The CLI cancelled the request.
    pub(super) cancelled: AtomicBool,
}

impl CopilotRequest {
    /// The next body chunk, waiting for it; `None` after the last. The
    /// CLI's cancellation is an `Err` with its reason.
    pub fn next_chunk(&mut self) -> Option<Result<Vec<u8>, String>> {
        if self.done {
            return None;
        }
        let item = self.body.recv().unwrap_or(BodyItem::Cancel("the connection ended".into()));
        match item {
            BodyItem::Chunk(c, _) => {
                self.shared.buffered.fetch_sub(1, Ordering::AcqRel);
                Some(Ok(c))
            }
            BodyItem::End => {
                self.done = true;
                None
            }
            BodyItem::Cancel(why) => {
                self.done = true;
                Some(Err(format!("{}: {why}", INFERENCE_CANCELLED.message)))
            }
            BodyItem::Overflow => {
                self.done = true;
                Some(Err(INFERENCE_OVERFLOW.message.into()))
            }
            BodyItem::Closed => None,
        }
    }

    /// Waits until the CLI cancels the request (the turn was aborted),
    /// after the body (whose chunks it skips), and gives the CLI's reason;
    /// returns at once if it was cancelled already. A handler that streams
    /// from elsewhere watches for it on a thread of its own, or checks
    /// [`is_cancelled`](Self::is_cancelled) between writes.
    pub fn wait_cancelled(&mut self) -> String {
        loop {
            match self.body.recv() {
                Ok(BodyItem::Cancel(why)) => return why,
                Ok(BodyItem::Chunk(..)) => {
                    self.shared.buffered.fetch_sub(1, Ordering::AcqRel);
                }
                Ok(_) => {}
                Err(_) => return "the connection ended".into(),
            }
        }
    }

    /// Whether the CLI cancelled the request.
    pub fn is_cancelled(&self) -> bool {
        self.shared.cancelled.load(Ordering::Acquire)
    }

    /// The whole body, waiting for its last chunk.
    pub fn read_body(&mut self) -> Result<Vec<u8>, String> {
        let mut all = Vec::new();
        while let Some(c) = self.next_chunk() {
            all.extend(c?);
        }
        Ok(all)
    }
}

/// Headers for `Debug`: a secret's values redacted.
pub(super) struct Redacted<'a>(pub(super) &'a CopilotHeaders);

impl fmt::Debug for Redacted<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut m = f.debug_map();
        for (name, values) in self.0 {
            if is_secret_header(name) {
                m.entry(name, &"<redacted>");
            } else {
                m.entry(name, values);
            }
        }
        m.finish()
    }
}

impl fmt::Debug for CopilotRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CopilotRequest")
            .field("request_id", &self.request_id)
            .field("session_id", &self.session_id)
            .field("method", &self.method)
            .field("url", &self.url)
            .field("headers", &Redacted(&self.headers))
            .field("transport", &self.transport)
            .finish_non_exhaustive()
    }
}

/// The response to one model request, sent to the CLI as it is written:
/// [`start`](Self::start) once, [`write`](Self::write)s, then
/// [`end`](Self::end) or [`error`](Self::error). Each is a call to the
/// CLI, answered when the CLI took it (so pieces arrive in order); the
/// `_async` forms are the futures the blocking ones wait on.
pub struct CopilotResponse {
    request_id: String,
    cancelled: Arc<Shared>,
    conn: Weak<Connection>,
    timeout: Duration,
    started: bool,
    finished: bool,
}

impl fmt::Debug for CopilotResponse {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CopilotResponse")
            .field("request_id", &self.request_id)
            .field("started", &self.started)
            .field("finished", &self.finished)
            .finish_non_exhaustive()
    }
}

impl CopilotResponse {
    /// The response to request `request_id`, its calls made on `conn`.
    pub(super) fn new(request_id: &str, shared: Arc<Shared>, conn: Weak<Connection>, timeout: Duration) -> Self {
        CopilotResponse {
            request_id: request_id.to_owned(),
            cancelled: shared,
            conn,
            timeout,
            started: false,
            finished: false,
        }
    }

    /// Whether the response was ended (or failed).
    pub(super) fn finished(&self) -> bool {
        self.finished
    }

    /// Whether the head was sent.
    pub(super) fn started(&self) -> bool {
        self.started
    }

    async fn call(&self, method: &str, params: Value) -> Result<(), String> {
        let conn = self.conn.upgrade().ok_or("the connection ended")?;
        let call = conn.request(method, &params, Instant::now() + self.timeout).map_err(|e| e.to_string())?;
        call.await.map(|_| ()).map_err(|e| e.to_string())
    }

    /// Sends the head: `status` and `headers` (once, before any body).
    pub async fn start_async(&mut self, status: u16, headers: &CopilotHeaders) -> Result<(), String> {
        if self.started || self.finished {
            return Err("the response was started already".into());
        }
        self.started = true;
        let params = json!({ "requestId": self.request_id, "status": status, "headers": headers });
        self.call(INFERENCE_RESPONSE_START, params).await
    }

    /// Sends a body chunk (text as it is, other bytes in base64).
    pub async fn write_async(&mut self, data: &[u8]) -> Result<(), String> {
        self.chunk(data, std::str::from_utf8(data).is_err()).await
    }

    /// Sends one chunk: `data` as text, or base64 with `binary` (a
    /// WebSocket message's own flag).
    pub(super) async fn chunk(&mut self, data: &[u8], binary: bool) -> Result<(), String> {
        if !self.started || self.finished {
            return Err("a body chunk needs a started, unfinished response".into());
        }
        if self.cancelled.cancelled.load(Ordering::Acquire) {
            return Err(INFERENCE_CANCELLED.message.into());
        }
        let mut params = json!({ "requestId": self.request_id });
        match std::str::from_utf8(data) {
            Ok(text) if !binary => params["data"] = text.into(),
            _ => {
                params["data"] = base64(data).into();
                params["binary"] = true.into();
            }
        }
        self.call(INFERENCE_RESPONSE_CHUNK, params).await
    }

    /// Ends the body.
    pub async fn end_async(&mut self) -> Result<(), String> {
        if self.finished {
            return Ok(());
        }
        if !self.started {
            return Err("the response ends before it started".into());
        }
        self.finished = true;
        self.call(INFERENCE_RESPONSE_CHUNK, json!({ "requestId": self.request_id, "data": "", "end": true })).await
    }

    /// Ends the response with a transport error of `message` (the CLI
    /// retries the request, then fails the turn with it).
    pub async fn error_async(&mut self, message: &str) -> Result<(), String> {
        self.fail(InferenceFailure { message: "", ..INFERENCE_FAILED }, message).await
    }

    /// The core's failure answer: its head if none was sent, then the
    /// error chunk (the message `detail`, or the failure's own).
    pub(super) async fn fail(&mut self, failure: InferenceFailure, detail: &str) -> Result<(), String> {
        if self.finished {
            return Ok(());
        }
        if !self.started {
            self.start_async(failure.status, &CopilotHeaders::new()).await?;
        }
        self.finished = true;
        let message = if detail.is_empty() { failure.message } else { detail };
        let mut error = json!({ "message": message });
        if let Some(code) = failure.code {
            error["code"] = code.into();
        }
        self.call(
            INFERENCE_RESPONSE_CHUNK,
            json!({ "requestId": self.request_id, "data": "", "end": true, "error": error }),
        )
        .await
    }

    /// [`start_async`](Self::start_async), waited for.
    pub fn start(&mut self, status: u16, headers: &CopilotHeaders) -> Result<(), String> {
        block_on(self.start_async(status, headers))
    }

    /// [`write_async`](Self::write_async), waited for.
    pub fn write(&mut self, data: &[u8]) -> Result<(), String> {
        block_on(self.write_async(data))
    }

    /// [`end_async`](Self::end_async), waited for.
    pub fn end(&mut self) -> Result<(), String> {
        block_on(self.end_async())
    }

    /// [`error_async`](Self::error_async), waited for.
    pub fn error(&mut self, message: &str) -> Result<(), String> {
        block_on(self.error_async(message))
    }
}

const B64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

pub(super) fn base64(data: &[u8]) -> String {
    let mut out = String::with_capacity(data.len().div_ceil(3) * 4);
    for c in data.chunks(3) {
        let n =
            (u32::from(c[0]) << 16) | (u32::from(*c.get(1).unwrap_or(&0)) << 8) | u32::from(*c.get(2).unwrap_or(&0));
        for i in 0..4 {
            if i <= c.len() {
                out.push(B64[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

pub(super) fn unbase64(text: &str) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(text.len() / 4 * 3);
    let (mut acc, mut bits) = (0u32, 0);
    for b in text.bytes().filter(|b| *b != b'=') {
        let v = B64.iter().position(|x| *x == b)? as u32;
        acc = (acc << 6) | v;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
        }
    }
    Some(out)
}
