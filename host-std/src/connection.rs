//! One connection to a Copilot CLI: the writer lock, the request path, and
//! the reader pump that every transport (stdio, TCP, in-memory pipes) runs.
//!
//! The pump only moves bytes and acts on what `copilot_core::Router` decides;
//! it does no routing of its own.

use std::collections::VecDeque;
use std::io::{self, Read, Write};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::thread;
use std::time::Duration;

use copilot_core::{
    EncodeError, Envelope, FrameDecoder, GrowingBuffer, Id, Message, Outgoing, Payload, RequestId, Route, Router,
    SessionHandle, Stats, UNKNOWN_SESSION,
};
use serde::Serialize;

use crate::error::{Error, Result};
use crate::events::LifecycleEvent;
use crate::handlers;
use crate::session::SessionInner;

/// Sessions one client can have open at once.
pub(crate) const MAX_SESSIONS: usize = 256;
/// Requests one client can have in flight at once.
pub(crate) const MAX_PENDING: usize = 1024;
/// The largest frame accepted. The read buffer grows to it only if such a
/// frame arrives.
pub(crate) const MAX_FRAME: usize = 64 << 20;
/// Bytes asked of the transport per read.
const READ_CHUNK: usize = 64 << 10;
/// Frames held for a create whose id the server assigns, at most.
const MAX_PARKED: usize = 10_000;

pub(crate) type HostRouter = Router<Arc<SessionInner>, Waiter, MAX_SESSIONS, MAX_PENDING>;

/// The raw JSON of a result, or the error that replaced it.
pub(crate) type Reply = Result<Vec<u8>>;

/// Who is waiting for a response.
pub(crate) enum Waiter {
    /// A caller blocked on the channel.
    Reply(mpsc::SyncSender<Reply>),
    /// A `session.create` sent without an id: the reader names the session
    /// from the answer and delivers the frames parked for it, in order,
    /// before it reads the next frame.
    Assign { handle: SessionHandle, session: Arc<SessionInner>, reply: mpsc::SyncSender<Reply> },
}

impl Waiter {
    fn fail(self, error: Error) {
        let reply = match self {
            Waiter::Reply(r) | Waiter::Assign { reply: r, .. } => r,
        };
        // A caller that gave up has dropped its receiver: nothing to tell.
        let _ = reply.send(Err(error));
    }
}

/// Already-serialized JSON from serde_json, handed to the core's encoder.
struct Json<'a>(&'a [u8]);

impl Payload for Json<'_> {
    fn write_json(&self, out: &mut [u8]) -> Result<usize, EncodeError> {
        out.get_mut(..self.0.len()).ok_or(EncodeError::BufferTooSmall)?.copy_from_slice(self.0);
        Ok(self.0.len())
    }
}

/// Encodes a whole frame with the core's encoder (the one codec of the project).
fn encode(message: &Outgoing<'_>, size_hint: usize) -> Result<Vec<u8>> {
    message.to_vec(size_hint + 256).map_err(|e| Error::Protocol(format!("cannot encode a message: {e}")))
}

/// A request id from its JSON text, as kept by a handler thread.
fn parse_id(id: &[u8]) -> Result<Id<'_>> {
    let v = copilot_core::Value::parse(id).map_err(|e| Error::Protocol(format!("bad request id: {e}")))?;
    match (v.as_str(), v.as_number()) {
        (Some(s), _) => Ok(Id::String(s)),
        (_, Some(n)) => Ok(Id::Number(n)),
        _ => Ok(Id::Null),
    }
}

/// The JSON text of a request id, to answer it from another thread.
fn id_text(id: &Id<'_>) -> Vec<u8> {
    match id {
        Id::Null => b"null".to_vec(),
        Id::Number(n) => n.raw().as_bytes().to_vec(),
        Id::String(s) => [&b"\""[..], s.as_bytes(), b"\""].concat(),
    }
}

/// A connection shared by the client, its sessions and the reader thread.
pub(crate) struct Connection {
    pub(crate) router: HostRouter,
    writer: Mutex<Box<dyn Write + Send>>,
    closed: AtomicBool,
    close_reason: Mutex<Option<String>>,
    lifecycle: Mutex<Vec<mpsc::Sender<LifecycleEvent>>>,
    /// Frames that could not be parked because the parking area was full.
    park_overflow: AtomicU64,
    /// A label for logs: "stdio", "tcp 127.0.0.1:4321", ...
    pub(crate) label: String,
}

impl Connection {
    /// Starts the reader pump on its own thread and returns the connection.
    pub(crate) fn start(
        label: String,
        reader: Box<dyn Read + Send>,
        writer: Box<dyn Write + Send>,
    ) -> Result<(Arc<Connection>, thread::JoinHandle<()>)> {
        let conn = Arc::new(Connection {
            router: Router::new(),
            writer: Mutex::new(writer),
            closed: AtomicBool::new(false),
            close_reason: Mutex::new(None),
            lifecycle: Mutex::new(Vec::new()),
            park_overflow: AtomicU64::new(0),
            label,
        });
        let pump = Arc::clone(&conn);
        let handle = thread::Builder::new()
            .name(format!("copilot-reader ({})", conn.label))
            .spawn(move || pump.pump(reader))
            .map_err(Error::Io)?;
        Ok((conn, handle))
    }

    /// Whether the connection has ended.
    pub(crate) fn is_closed(&self) -> bool {
        self.closed.load(Ordering::SeqCst)
    }

    fn disconnected(&self) -> Error {
        let why = self.close_reason.lock().unwrap_or_else(|p| p.into_inner()).clone();
        Error::Disconnected(why.unwrap_or_else(|| "connection closed".into()))
    }

    /// The router's counters.
    pub(crate) fn stats(&self) -> Stats {
        self.router.stats()
    }

    /// Frames dropped because too many were parked at once.
    pub(crate) fn park_overflow(&self) -> u64 {
        self.park_overflow.load(Ordering::Relaxed)
    }

    /// Writes one whole frame with one write, under the writer lock.
    pub(crate) fn send_frame(&self, frame: &[u8]) -> Result<()> {
        if self.is_closed() {
            return Err(self.disconnected());
        }
        let mut w = self.writer.lock().unwrap_or_else(|p| p.into_inner());
        w.write_all(frame).and_then(|()| w.flush()).map_err(|e| {
            log::debug!("{}: write failed: {e}", self.label);
            Error::Disconnected(format!("write failed: {e}"))
        })
    }

    /// Shuts the writing side (closes stdin of a stdio CLI, or the socket's
    /// write half), which makes a stdio CLI exit.
    pub(crate) fn close_writer(&self) {
        let mut w = self.writer.lock().unwrap_or_else(|p| p.into_inner());
        let _ = w.flush();
        *w = Box::new(io::sink());
    }

    /// Sends a request and blocks until its response, the timeout, or a
    /// disconnect.
    pub(crate) fn request<P: Serialize + ?Sized>(
        &self,
        method: &str,
        params: &P,
        timeout: Option<Duration>,
    ) -> Result<Vec<u8>> {
        let (tx, rx) = mpsc::sync_channel(1);
        self.request_with(method, params, Waiter::Reply(tx), rx, timeout)
    }

    /// Sends a request whose waiter the caller built (see [`Waiter::Assign`]).
    pub(crate) fn request_with<P: Serialize + ?Sized>(
        &self,
        method: &str,
        params: &P,
        waiter: Waiter,
        rx: mpsc::Receiver<Reply>,
        timeout: Option<Duration>,
    ) -> Result<Vec<u8>> {
        let params =
            serde_json::to_vec(params).map_err(|e| Error::Protocol(format!("cannot serialize params: {e}")))?;
        let id = self
            .router
            .pending()
            .insert(waiter)
            .map_err(|_| Error::Capacity(format!("more than {MAX_PENDING} requests in flight")))?;
        // The reader sets `closed` before it fails every pending request, so
        // either that drain sees this request or this check sees `closed`.
        if self.is_closed() {
            self.router.pending().take(id.0);
            return Err(self.disconnected());
        }
        let frame =
            encode(&Outgoing::Request { id, method, params: Some(&Json(&params)) }, params.len() + method.len())?;
        log::trace!("{}: -> {method} #{id}", self.label);
        if let Err(e) = self.send_frame(&frame) {
            self.forget(id);
            return Err(e);
        }
        let reply = match timeout {
            None => rx.recv().map_err(|_| self.disconnected()),
            Some(after) => match rx.recv_timeout(after) {
                Ok(r) => Ok(r),
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    // A response that arrives later is counted as unmatched.
                    self.forget(id);
                    return Err(Error::Timeout { what: format!("`{method}`"), after });
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => Err(self.disconnected()),
            },
        };
        reply?
    }

    /// Drops a request's waiter (timeout or failed send). A server-assigned
    /// create also gives its reserved slot back.
    fn forget(&self, id: RequestId) {
        if let Some(Waiter::Assign { handle, .. }) = self.router.pending().take(id.0) {
            self.router.sessions().release(handle);
        }
    }

    /// Answers a server request with an error.
    pub(crate) fn respond_error(&self, id: Id<'_>, code: i64, message: &str) -> Result<()> {
        let frame = encode(&Outgoing::Error { id, code, message, data: None }, message.len() * 6)?;
        self.send_frame(&frame)
    }

    /// Answers the request whose id's JSON text is `id` with `result`.
    pub(crate) fn respond_raw_id(&self, id: &[u8], result: &serde_json::Value) -> Result<()> {
        let body = serde_json::to_vec(result).map_err(|e| Error::Protocol(e.to_string()))?;
        let frame = encode(&Outgoing::Response { id: parse_id(id)?, result: &Json(&body) }, body.len() + id.len())?;
        self.send_frame(&frame)
    }

    /// Answers the request whose id's JSON text is `id` with an error.
    pub(crate) fn respond_error_raw_id(&self, id: &[u8], code: i64, message: &str) -> Result<()> {
        self.respond_error(parse_id(id)?, code, message)
    }

    /// A new receiver of every `session.lifecycle` notification from now on.
    pub(crate) fn subscribe_lifecycle(&self) -> mpsc::Receiver<LifecycleEvent> {
        let (tx, rx) = mpsc::channel();
        self.lifecycle.lock().unwrap_or_else(|p| p.into_inner()).push(tx);
        rx
    }

    // ---------------------------------------------------------------------
    // The reader side.

    /// The read loop: bytes in, routes out, until the stream ends.
    fn pump(self: Arc<Self>, mut reader: Box<dyn Read + Send>) {
        let mut decoder = FrameDecoder::with_buffer(GrowingBuffer::new(READ_CHUNK)).with_limit(MAX_FRAME);
        let mut parked: VecDeque<Vec<u8>> = VecDeque::new();
        let reason = loop {
            let spare = decoder.spare();
            let want = spare.len().min(READ_CHUNK);
            match reader.read(&mut spare[..want]) {
                Ok(0) => break "the CLI closed the connection".to_string(),
                Ok(n) => decoder.commit(n),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => break format!("read failed: {e}"),
            }
            while let Some(route) = self.router.poll(&mut decoder) {
                self.act(route, &mut parked);
            }
        };
        if let Err(e) = decoder.finish() {
            log::warn!("{}: {e}", self.label);
        }
        log::debug!("{}: reader stops: {reason}", self.label);
        self.shut_down(reason, parked);
    }

    /// Does what one route says. Runs on the reader thread: it never blocks
    /// on a consumer (events go to unbounded per-session queues).
    fn act(self: &Arc<Self>, route: Route<'_, Arc<SessionInner>, Waiter>, parked: &mut VecDeque<Vec<u8>>) {
        match route {
            Route::Event { target, event, .. } => {
                target.push_event(event.event.as_bytes());
                if event.awaits_answer() {
                    handlers::answer_event(self, &target, event.event.as_bytes());
                }
            }
            Route::Lifecycle { params, .. } => self.deliver_lifecycle(params.as_bytes()),
            Route::Response { waiter, result, request } => {
                let reply = match result {
                    Ok(v) => Ok(v.as_bytes().to_vec()),
                    Err(e) => Err(Error::Rpc {
                        code: e.code,
                        message: e.message.to_string(),
                        data: e.data.and_then(|d| serde_json::from_slice(d.as_bytes()).ok()),
                    }),
                };
                log::trace!("{}: <- response #{request}", self.label);
                self.complete(waiter, reply, parked);
            }
            Route::Request { id, method, params, session: Some((_, session)) } => handlers::answer_request(
                self,
                &session,
                method.to_string(),
                id_text(&id),
                params.map(|p| p.as_bytes().to_vec()).unwrap_or_else(|| b"{}".to_vec()),
            ),
            Route::Request { id, method, session: None, .. } => {
                // No client-wide server requests are handled: refuse them
                // explicitly rather than leave the server waiting.
                log::debug!("{}: server request {method} refused: no handler", self.label);
                let _ = self.respond_error(id, copilot_core::METHOD_NOT_FOUND, &format!("Method not found: {method}"));
            }
            Route::Notification { method, .. } => log::debug!("{}: notification {method}", self.label),
            Route::Park { body, session_id } => {
                if parked.len() < MAX_PARKED {
                    parked.push_back(body.to_vec());
                } else {
                    self.park_overflow.fetch_add(1, Ordering::Relaxed);
                    log::error!(
                        "{}: too many frames parked; one for session {session_id} is reported lost",
                        self.label
                    );
                    // A request still gets its answer.
                    if let Ok(Envelope { message: Message::Request { id, method, .. }, .. }) = Envelope::decode(body) {
                        self.refuse_unknown(id, &method.to_string(), &session_id.to_string());
                    }
                }
            }
            Route::UnknownSession { session_id, event, reply_to, method } => match (event, reply_to) {
                (_, Some(id)) => {
                    log::warn!("{}: {method} for unknown session {session_id}: answered with an error", self.label);
                    self.refuse_unknown(id, &method.to_string(), &session_id.to_string());
                }
                (Some(e), None) => {
                    log::warn!("{}: event {} for unknown session {session_id}", self.label, e.event_type)
                }
                (None, None) => log::warn!("{}: {method} for unknown session {session_id}", self.label),
            },
            Route::UnmatchedResponse { id, .. } => {
                log::warn!("{}: response to unknown request {id}", self.label)
            }
            Route::Malformed(e) => {
                log::warn!("{}: malformed message: {e}", self.label);
                if let Some(id) = e.reply_to {
                    let _ = self.respond_error(id, e.code(), &e.to_string());
                }
            }
            Route::FrameError(e) => log::warn!("{}: {e}", self.label),
        }
    }

    fn refuse_unknown(&self, id: Id<'_>, method: &str, session_id: &str) {
        let _ = self.respond_error(id, UNKNOWN_SESSION, &format!("{method}: unknown session {session_id}"));
    }

    fn deliver_lifecycle(&self, params: &[u8]) {
        let event = match LifecycleEvent::from_json(params) {
            Ok(e) => e,
            Err(e) => {
                log::warn!("{}: unreadable session.lifecycle: {e}", self.label);
                return;
            }
        };
        let mut subs = self.lifecycle.lock().unwrap_or_else(|p| p.into_inner());
        subs.retain(|tx| tx.send(event.clone()).is_ok());
    }

    /// Hands a response to its waiter. For a server-assigned create, names
    /// the session and delivers what was parked for it first, so its events
    /// keep their order.
    fn complete(self: &Arc<Self>, waiter: Waiter, reply: Reply, parked: &mut VecDeque<Vec<u8>>) {
        let (handle, session, tx) = match waiter {
            Waiter::Reply(tx) => {
                let _ = tx.send(reply);
                return;
            }
            Waiter::Assign { handle, session, reply: tx } => (handle, session, tx),
        };
        let reply = reply.and_then(|body| {
            let id = serde_json::from_slice::<serde_json::Value>(&body)
                .ok()
                .and_then(|v| v.get("sessionId").and_then(|s| s.as_str()).map(str::to_owned))
                .ok_or_else(|| Error::Protocol("session.create answer has no sessionId".into()))?;
            self.router
                .sessions()
                .assign(handle, &id)
                .map_err(|e| Error::Config(format!("server-assigned session id {id:?}: {e}")))?;
            session.set_id(&id);
            Ok(body)
        });
        if reply.is_err() {
            self.router.sessions().release(handle);
        }
        self.reroute_parked(parked);
        let _ = tx.send(reply);
    }

    /// Routes every parked frame again, in arrival order. Frames still
    /// waiting for another create are parked again, in the same order.
    fn reroute_parked(self: &Arc<Self>, parked: &mut VecDeque<Vec<u8>>) {
        let mut still = VecDeque::new();
        for body in parked.drain(..) {
            match self.router.route_parked(&body) {
                Route::Park { .. } => still.push_back(body),
                route => self.act(route, &mut VecDeque::new()),
            }
        }
        *parked = still;
    }

    /// Ends the connection: every waiting call fails with `Disconnected`,
    /// every session's event stream ends.
    fn shut_down(&self, reason: String, parked: VecDeque<Vec<u8>>) {
        *self.close_reason.lock().unwrap_or_else(|p| p.into_inner()) = Some(reason.clone());
        self.closed.store(true, Ordering::SeqCst);
        for (_, waiter) in self.router.pending().drain() {
            waiter.fail(Error::Disconnected(reason.clone()));
        }
        if !parked.is_empty() {
            log::warn!("{}: {} parked frames dropped with the connection", self.label, parked.len());
        }
        for (_, session) in self.router.sessions().drain() {
            session.close(&reason);
        }
        self.lifecycle.lock().unwrap_or_else(|p| p.into_inner()).clear();
    }
}
