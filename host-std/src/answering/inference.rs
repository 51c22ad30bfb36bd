//! The inference request handler (experimental; the official SDKs'
//! `CopilotRequestHandler`): with one set on the client options, the CLI's
//! model HTTP requests come to it (`llmInference.httpRequestStart` and
//! `httpRequestChunk`), and it streams the response back
//! (`httpResponseStart`, `httpResponseChunk`). The rule (acknowledgement,
//! failure answers, bounds, secret headers) is the core's
//! (`copilot_core::INFERENCE_*`); this binds it: one thread per request in
//! flight (at most `MAX_INFERENCE_IN_FLIGHT`), its body chunks on a bounded
//! channel (`MAX_INFERENCE_BUFFERED_CHUNKS`), the response's calls made on
//! the connection and awaited on the same futures as every call.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::fmt;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender, TrySendError};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::{Duration, Instant};

use copilot_core::{
    admit_chunk, admit_request, is_secret_header, ChunkAdmission, InferenceFailure, INFERENCE_ACK, INFERENCE_BUSY,
    INFERENCE_CANCELLED, INFERENCE_FAILED, INFERENCE_OVERFLOW, INFERENCE_REQUEST_START, INFERENCE_RESPONSE_CHUNK,
    INFERENCE_RESPONSE_START, INFERENCE_UNFINISHED, MAX_INFERENCE_BUFFERED_CHUNKS, MAX_INFERENCE_IN_FLIGHT,
};
use serde_json::{json, Value};

use crate::driver::{Connection, Job};
use crate::pool::panic_text;
use crate::wait::block_on;

/// HTTP headers: lower-case name -> its values, as the CLI sends them.
pub type CopilotHeaders = BTreeMap<String, Vec<String>>;

/// Serves the CLI's model requests (experimental): gets each request's
/// head and body, and answers with a streamed response or an error.
/// Runs on a thread of its own per request; an `Err` (or a panic) gives
/// the CLI an error for the request (after a 502 head if none was sent),
/// which the CLI retries and then reports as the turn's `session.error`.
pub trait CopilotRequestHandler: Send + Sync {
    /// Serves `request` through `response`: `start`, `write`s, `end`.
    fn handle(&self, request: CopilotRequest, response: &mut CopilotResponse) -> Result<(), String>;
}

impl<F> CopilotRequestHandler for F
where
    F: Fn(CopilotRequest, &mut CopilotResponse) -> Result<(), String> + Send + Sync,
{
    fn handle(&self, request: CopilotRequest, response: &mut CopilotResponse) -> Result<(), String> {
        self(request, response)
    }
}

enum BodyItem {
    Chunk(Vec<u8>),
    End,
    Cancel(String),
    Overflow,
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
    body: Receiver<BodyItem>,
    shared: Arc<Shared>,
    done: bool,
}

/// What a request's entry and its handler both see.
#[derive(Default)]
struct Shared {
    /// Body chunks sent and not read yet.
    buffered: AtomicUsize,
    /// The CLI cancelled the request.
    cancelled: AtomicBool,
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
            BodyItem::Chunk(c) => {
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
                Ok(BodyItem::Chunk(_)) => {
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
struct Redacted<'a>(&'a CopilotHeaders);

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
        if !self.started || self.finished {
            return Err("a body chunk needs a started, unfinished response".into());
        }
        if self.cancelled.cancelled.load(Ordering::Acquire) {
            return Err(INFERENCE_CANCELLED.message.into());
        }
        let mut params = json!({ "requestId": self.request_id });
        match std::str::from_utf8(data) {
            Ok(text) => params["data"] = text.into(),
            Err(_) => {
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
    async fn fail(&mut self, failure: InferenceFailure, detail: &str) -> Result<(), String> {
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

/// A request's entry: the body's sender, and its receiver until the
/// request's start takes it (a chunk may be handled before its start).
struct Exchange {
    tx: SyncSender<BodyItem>,
    rx: Option<Receiver<BodyItem>>,
    shared: Arc<Shared>,
}

/// The client's inference state: its handler, the connection the
/// responses go out on (set once it is up), and the requests in flight.
pub(crate) struct Inference {
    handler: Arc<dyn CopilotRequestHandler>,
    conn: OnceLock<Weak<Connection>>,
    timeout: Duration,
    exchanges: Mutex<HashMap<String, Exchange>>,
    /// The ids of the requests served or refused last (at most
    /// `MAX_INFERENCE_IN_FLIGHT`): a chunk of one of them is dropped, not
    /// kept for a start that will not come. Locked after `exchanges`.
    ended: Mutex<VecDeque<String>>,
}

/// The fields of the CLI's request head and chunk.
#[derive(serde::Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
struct Frame {
    request_id: String,
    session_id: Option<String>,
    method: String,
    url: String,
    headers: CopilotHeaders,
    transport: Option<String>,
    agent_id: Option<String>,
    parent_agent_id: Option<String>,
    interaction_type: Option<String>,
    data: String,
    binary: bool,
    end: bool,
    cancel: bool,
    cancel_reason: Option<String>,
}

impl Inference {
    /// The state for `handler`; responses wait at most `timeout` per call.
    pub(crate) fn new(handler: Arc<dyn CopilotRequestHandler>, timeout: Duration) -> Arc<Self> {
        Arc::new(Inference {
            handler,
            conn: OnceLock::new(),
            timeout,
            exchanges: Mutex::default(),
            ended: Mutex::default(),
        })
    }

    /// The connection the responses go out on.
    pub(crate) fn bind(&self, conn: &Arc<Connection>) {
        let _ = self.conn.set(Arc::downgrade(conn));
    }

    fn table(&self) -> std::sync::MutexGuard<'_, HashMap<String, Exchange>> {
        self.exchanges.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Notes that request `id` was served or refused.
    fn ended(&self, id: &str) {
        let mut ended = self.ended.lock().unwrap_or_else(|p| p.into_inner());
        if ended.len() == MAX_INFERENCE_IN_FLIGHT {
            ended.pop_front();
        }
        ended.push_back(id.to_owned());
    }

    fn response(&self, request_id: &str, shared: Arc<Shared>) -> CopilotResponse {
        CopilotResponse {
            request_id: request_id.to_owned(),
            cancelled: shared,
            conn: self.conn.get().cloned().unwrap_or_default(),
            timeout: self.timeout,
            started: false,
            finished: false,
        }
    }

    /// Takes one of the CLI's inference requests: acknowledged at once
    /// (the core's answer), then a start runs the handler on a thread of
    /// its own and a chunk goes to its request's body.
    pub(crate) fn take(self: &Arc<Self>, job: Job) {
        let Job { name, data, reply, .. } = job;
        let frame: Frame = serde_json::from_slice(&data).unwrap_or_default();
        reply.answer(INFERENCE_ACK.as_bytes());
        if frame.request_id.is_empty() {
            log::warn!("an inference frame without a request id was dropped");
            return;
        }
        if name == INFERENCE_REQUEST_START {
            self.start(frame);
        } else {
            self.chunk(frame);
        }
    }

    fn entry<'t>(table: &'t mut HashMap<String, Exchange>, id: &str) -> &'t mut Exchange {
        table.entry(id.to_owned()).or_insert_with(|| {
            // The bound, plus the overflow marker and the end after it.
            let (tx, rx) = sync_channel(MAX_INFERENCE_BUFFERED_CHUNKS + 2);
            Exchange { tx, rx: Some(rx), shared: Arc::default() }
        })
    }

    fn start(self: &Arc<Self>, frame: Frame) {
        let id = frame.request_id.clone();
        let body = {
            let mut table = self.table();
            let running = table.values().filter(|e| e.rx.is_none()).count();
            if !admit_request(running) {
                None
            } else {
                let e = Self::entry(&mut table, &id);
                e.rx.take().map(|rx| (rx, Arc::clone(&e.shared)))
            }
        };
        let Some((body, shared)) = body else {
            // On this worker of the pool (a bounded one), not a thread of
            // its own: the refusal waits only for the CLI's acknowledgement.
            log::warn!("inference request {id} refused: {}", INFERENCE_BUSY.message);
            self.ended(&id);
            if let Err(e) = block_on(self.response(&id, Arc::default()).fail(INFERENCE_BUSY, "")) {
                log::debug!("the refusal of inference request {id} was not delivered: {e}");
            }
            return;
        };
        let request = CopilotRequest {
            request_id: id.clone(),
            session_id: frame.session_id,
            method: frame.method,
            url: frame.url,
            headers: frame.headers,
            transport: frame.transport.unwrap_or_else(|| "http".into()),
            agent_id: frame.agent_id,
            parent_agent_id: frame.parent_agent_id,
            interaction_type: frame.interaction_type,
            body,
            shared,
            done: false,
        };
        let me = Arc::clone(self);
        let spawned = std::thread::Builder::new().name("copilot-inference".into()).spawn(move || me.serve(request));
        if let Err(e) = spawned {
            log::error!("cannot start the inference handler thread: {e}");
            self.table().remove(&id);
        }
    }

    fn serve(self: Arc<Self>, request: CopilotRequest) {
        let id = request.request_id.clone();
        let mut response = self.response(&id, Arc::clone(&request.shared));
        let outcome = catch_unwind(AssertUnwindSafe(|| self.handler.handle(request, &mut response)))
            .unwrap_or_else(|panic| Err(format!("the handler panicked: {}", panic_text(&*panic))));
        let cancelled = {
            let mut table = self.table();
            self.ended(&id);
            table.remove(&id).is_some_and(|e| e.shared.cancelled.load(Ordering::Acquire))
        };
        let sent = match outcome {
            Ok(()) if response.finished => Ok(()),
            Ok(()) => block_on(response.fail(INFERENCE_UNFINISHED, "")),
            Err(_) if cancelled => block_on(response.fail(INFERENCE_CANCELLED, "")),
            Err(detail) => {
                log::warn!("the inference handler failed for {id}: {detail}");
                block_on(response.fail(INFERENCE_FAILED, &detail))
            }
        };
        if let Err(e) = sent {
            log::debug!("the response to inference request {id} was not delivered: {e}");
        }
    }

    fn chunk(&self, frame: Frame) {
        let mut table = self.table();
        if !table.contains_key(&frame.request_id) {
            // Kept for its start only if that can still come, and only for
            // as many requests as may run.
            let ended = self.ended.lock().unwrap_or_else(|p| p.into_inner()).contains(&frame.request_id);
            let waiting = table.values().filter(|e| e.rx.is_some()).count();
            if ended || waiting >= MAX_INFERENCE_IN_FLIGHT {
                log::debug!("a chunk of inference request {} was dropped: it ended or never starts", frame.request_id);
                return;
            }
        }
        let exchange = Self::entry(&mut table, &frame.request_id);
        let item = if frame.cancel {
            BodyItem::Cancel(frame.cancel_reason.clone().unwrap_or_default())
        } else if frame.data.is_empty() {
            // An empty chunk carries only its `end`.
            BodyItem::Chunk(Vec::new())
        } else if frame.binary {
            match unbase64(&frame.data) {
                Some(bytes) => BodyItem::Chunk(bytes),
                None => BodyItem::Cancel("a binary chunk was not base64".into()),
            }
        } else {
            BodyItem::Chunk(frame.data.into_bytes())
        };
        if frame.cancel {
            exchange.shared.cancelled.store(true, Ordering::Release);
        }
        let sent = match admit_chunk(exchange.shared.buffered.load(Ordering::Acquire)) {
            ChunkAdmission::Keep => {
                if matches!(&item, BodyItem::Chunk(c) if c.is_empty()) {
                    Ok(())
                } else {
                    let chunk = matches!(item, BodyItem::Chunk(_));
                    let sent = exchange.tx.try_send(item);
                    if chunk && sent.is_ok() {
                        exchange.shared.buffered.fetch_add(1, Ordering::AcqRel);
                    }
                    sent
                }
            }
            ChunkAdmission::Overflow => exchange.tx.try_send(BodyItem::Overflow),
        };
        if let Err(TrySendError::Full(_)) = sent {
            log::warn!("inference request {}: {}", frame.request_id, INFERENCE_OVERFLOW.message);
        }
        if frame.end && !frame.cancel {
            let _ = exchange.tx.try_send(BodyItem::End);
        }
    }
}

const B64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

fn base64(data: &[u8]) -> String {
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

fn unbase64(text: &str) -> Option<Vec<u8>> {
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

#[cfg(test)]
#[path = "inference_tests.rs"]
mod tests;
