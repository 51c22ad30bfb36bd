//! The inference request handler (experimental; the official SDKs'
//! `CopilotRequestHandler`): with one set on the client options, the CLI's
//! model HTTP requests come to it (`llmInference.httpRequestStart` and
//! `httpRequestChunk`), and it streams the response back
//! (`httpResponseStart`, `httpResponseChunk`); a WebSocket request goes
//! to its `open_websocket` (websocket.rs). The rule (acknowledgement,
//! failure answers, bounds, secret headers) is the core's
//! (`copilot_core::INFERENCE_*`); this binds it: one thread per request in
//! flight (at most `MAX_INFERENCE_IN_FLIGHT`), its body chunks on a bounded
//! channel (`MAX_INFERENCE_BUFFERED_CHUNKS`), the response's calls made on
//! the connection and awaited on the same futures as every call.

use std::collections::{HashMap, VecDeque};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::Ordering;
use std::sync::mpsc::{sync_channel, Receiver, SyncSender, TrySendError};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::task::{Context, Wake, Waker};
use std::time::Duration;

use copilot_core::{
    admit_chunk, admit_request, ChunkAdmission, INFERENCE_ACK, INFERENCE_BUSY, INFERENCE_CANCELLED, INFERENCE_FAILED,
    INFERENCE_OVERFLOW, INFERENCE_REQUEST_START, INFERENCE_UNFINISHED, INFERENCE_WEBSOCKET,
    MAX_INFERENCE_BUFFERED_CHUNKS, MAX_INFERENCE_IN_FLIGHT,
};

use super::exchange::{unbase64, BodyItem, CopilotHeaders, CopilotRequest, CopilotResponse, Shared};
use super::websocket::{self, CopilotRequestContext, CopilotWebSocketResponse, Opened};
use crate::driver::{Connection, Job};
use crate::pool::panic_text;
use crate::wait::block_on;

/// Serves the CLI's model requests (experimental): gets each request's
/// head and body, and answers with a streamed response or an error.
/// Runs on a thread of its own per request; an `Err` (or a panic) gives
/// the CLI an error for the request (after a 502 head if none was sent),
/// which the CLI retries and then reports as the turn's `session.error`.
pub trait CopilotRequestHandler: Send + Sync {
    /// Serves `request` through `response`: `start`, `write`s, `end`.
    fn handle(&self, request: CopilotRequest, response: &mut CopilotResponse) -> Result<(), String>;

    /// Opens a WebSocket model request (`transport: "websocket"`): returns
    /// the handler of its messages from the CLI, and sends the model's
    /// through `response` (kept, from any thread). `None` (the default):
    /// no WebSocket support; the request is refused (the core's
    /// `INFERENCE_WEBSOCKET_UNSUPPORTED`, a 501 head) and the CLI sends it
    /// over HTTP, to [`handle`](Self::handle). An `Err` or a panic ends it
    /// with that error (the CLI then falls back to HTTP too).
    fn open_websocket(&self, context: &CopilotRequestContext, response: CopilotWebSocketResponse) -> Opened {
        let _ = (context, response);
        None
    }
}

impl<F> CopilotRequestHandler for F
where
    F: Fn(CopilotRequest, &mut CopilotResponse) -> Result<(), String> + Send + Sync,
{
    fn handle(&self, request: CopilotRequest, response: &mut CopilotResponse) -> Result<(), String> {
        self(request, response)
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

/// Woken once when the connection ends for good.
struct ConnectionEnd(Weak<Inference>);

impl Wake for ConnectionEnd {
    fn wake(self: Arc<Self>) {
        if let Some(inference) = self.0.upgrade() {
            inference.connection_ended();
        }
    }
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
    /// The connection the responses go out on; when it ends for good (the
    /// client stopped, or recovery gave up), every request in flight ends.
    pub(crate) fn bind(self: &Arc<Self>, conn: &Arc<Connection>) {
        let _ = self.conn.set(Arc::downgrade(conn));
        let waker = Waker::from(Arc::new(ConnectionEnd(Arc::downgrade(self))));
        if conn.poll_closed(&mut Context::from_waker(&waker)).is_ready() {
            self.connection_ended();
        }
    }

    /// Ends every request in flight as the CLI's cancellation would: its
    /// handler's reads fail, an open WebSocket ends. At the connection's
    /// end, and before a recovered one registers (the new CLI does not
    /// know the old one's requests).
    pub(crate) fn connection_ended(&self) {
        for e in self.table().values() {
            e.shared.cancelled.store(true, Ordering::Release);
            let _ = e.tx.try_send(BodyItem::Cancel("the connection ended".into()));
        }
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
        CopilotResponse::new(request_id, shared, self.conn.get().cloned().unwrap_or_default(), self.timeout)
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
                e.rx.take().map(|rx| (rx, Arc::clone(&e.shared), e.tx.clone()))
            }
        };
        let Some((body, shared, wake)) = body else {
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
        let spawned =
            std::thread::Builder::new().name("copilot-inference".into()).spawn(move || me.serve(request, wake));
        if let Err(e) = spawned {
            log::error!("cannot start the inference handler thread: {e}");
            self.table().remove(&id);
        }
    }

    fn serve(self: Arc<Self>, request: CopilotRequest, wake: SyncSender<BodyItem>) {
        let id = request.request_id.clone();
        let mut response = self.response(&id, Arc::clone(&request.shared));
        if request.transport == INFERENCE_WEBSOCKET {
            let handler = &self.handler;
            websocket::serve(request, response, wake, |c, r| handler.open_websocket(c, r));
            let mut table = self.table();
            self.ended(&id);
            table.remove(&id);
            return;
        }
        drop(wake);
        let outcome = catch_unwind(AssertUnwindSafe(|| self.handler.handle(request, &mut response)))
            .unwrap_or_else(|panic| Err(format!("the handler panicked: {}", panic_text(&*panic))));
        let cancelled = {
            let mut table = self.table();
            self.ended(&id);
            table.remove(&id).is_some_and(|e| e.shared.cancelled.load(Ordering::Acquire))
        };
        let sent = match outcome {
            Ok(()) if response.finished() => Ok(()),
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
            BodyItem::Chunk(Vec::new(), false)
        } else if frame.binary {
            match unbase64(&frame.data) {
                Some(bytes) => BodyItem::Chunk(bytes, true),
                None => BodyItem::Cancel("a binary chunk was not base64".into()),
            }
        } else {
            BodyItem::Chunk(frame.data.into_bytes(), false)
        };
        if frame.cancel {
            exchange.shared.cancelled.store(true, Ordering::Release);
        }
        let sent = match admit_chunk(exchange.shared.buffered.load(Ordering::Acquire)) {
            ChunkAdmission::Keep => {
                if matches!(&item, BodyItem::Chunk(c, _) if c.is_empty()) {
                    Ok(())
                } else {
                    let chunk = matches!(item, BodyItem::Chunk(..));
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

#[cfg(test)]
#[path = "inference_tests.rs"]
mod tests;
