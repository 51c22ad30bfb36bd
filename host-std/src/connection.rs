//! One connection to a Copilot CLI: the writer lock, the request path, and
//! the reader pump that every transport (stdio, TCP, in-memory pipes) runs.
//!
//! The pump only moves bytes and acts on what `copilot_core::Router` decides;
//! it does no routing of its own.

use std::collections::VecDeque;
use std::fmt;
use std::io::{self, Read, Write};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Condvar, Mutex};
use std::thread;
use std::time::{Duration, Instant};

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
/// Bytes waiting for the writer thread, at most: a caller beyond it waits
/// (until its deadline) for a CLI that stopped reading to catch up.
const MAX_OUTBOX_BYTES: usize = 16 << 20;

/// Why a connection ended, as [`Client::closed`](crate::Client::closed)
/// reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum CloseCause {
    /// The CLI process this client started exited.
    CliExited {
        /// Its exit code, if it exited with one.
        code: Option<i32>,
        /// The signal that ended it, if one did.
        signal: Option<i32>,
        /// The last lines it wrote to stderr.
        stderr: String,
    },
    /// The other end closed the connection (end of stream).
    PeerClosed,
    /// Reading from the connection failed.
    ReadFailed(String),
    /// The client's reader failed on its own (a panic in it or in the
    /// caller's stream); every waiter was told, every stream ended.
    ReaderFailed(String),
    /// This client stopped the connection.
    Stopped,
}

impl fmt::Display for CloseCause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CloseCause::CliExited { code, signal, stderr } => {
                match (code, signal) {
                    (Some(c), _) => write!(f, "the Copilot CLI exited with code {c}")?,
                    (None, Some(s)) => write!(f, "the Copilot CLI was ended by signal {s}")?,
                    (None, None) => write!(f, "the Copilot CLI exited")?,
                }
                if stderr.trim().is_empty() {
                    Ok(())
                } else {
                    write!(f, "; its stderr ends with:\n{}", stderr.trim_end())
                }
            }
            CloseCause::PeerClosed => write!(f, "the CLI closed the connection"),
            CloseCause::ReadFailed(e) => write!(f, "reading the connection failed: {e}"),
            CloseCause::ReaderFailed(e) => write!(f, "the client's reader failed: {e}"),
            CloseCause::Stopped => write!(f, "the client was stopped"),
        }
    }
}

/// Finds out why the stream ended (the CLI exited?), once the reader saw it
/// end. Runs on the reader thread, before any waiter is told.
pub(crate) type CauseProbe = Box<dyn FnOnce(CloseCause) -> CloseCause + Send>;

/// How long calls may take: every call to the CLI has a deadline.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Deadlines {
    /// Any call, unless the caller gives its own.
    pub(crate) request: Duration,
    /// `session.destroy` and `Client::stop` (in total).
    pub(crate) grace: Duration,
}

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
    outbox: Arc<Outbox>,
    closed: AtomicBool,
    close_cause: Mutex<Option<CloseCause>>,
    closed_signal: Condvar,
    /// Set before this client ends the connection on purpose, so that the
    /// end is reported as `Stopped` rather than as a fault.
    stopping: AtomicBool,
    probe: Mutex<Option<CauseProbe>>,
    pub(crate) deadlines: Deadlines,
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
        deadlines: Deadlines,
        probe: Option<CauseProbe>,
    ) -> Result<(Arc<Connection>, thread::JoinHandle<()>)> {
        let outbox = Outbox::start(&label, writer)?;
        let conn = Arc::new(Connection {
            router: Router::new(),
            outbox,
            closed: AtomicBool::new(false),
            close_cause: Mutex::new(None),
            closed_signal: Condvar::new(),
            stopping: AtomicBool::new(false),
            probe: Mutex::new(probe),
            deadlines,
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

    /// Why the connection ended, once it has.
    pub(crate) fn close_cause(&self) -> Option<CloseCause> {
        lock(&self.close_cause).clone()
    }

    /// Waits until the connection has ended, or `deadline`.
    pub(crate) fn wait_closed(&self, deadline: Option<Instant>) -> Option<CloseCause> {
        let mut cause = lock(&self.close_cause);
        loop {
            if cause.is_some() {
                return cause.clone();
            }
            cause = match deadline {
                None => self.closed_signal.wait(cause).unwrap_or_else(|p| p.into_inner()),
                Some(d) => {
                    let left = d.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        return None;
                    }
                    self.closed_signal.wait_timeout(cause, left).unwrap_or_else(|p| p.into_inner()).0
                }
            };
        }
    }

    /// From now on, the end of the connection is this client's doing.
    pub(crate) fn mark_stopping(&self) {
        self.stopping.store(true, Ordering::SeqCst);
    }

    fn disconnected(&self) -> Error {
        Error::Disconnected(self.close_cause().map_or_else(|| "the connection is closed".into(), |c| c.to_string()))
    }

    /// The router's counters.
    pub(crate) fn stats(&self) -> Stats {
        self.router.stats()
    }

    /// Frames dropped because too many were parked at once.
    pub(crate) fn park_overflow(&self) -> u64 {
        self.park_overflow.load(Ordering::Relaxed)
    }

    /// Hands one whole frame to the writer thread (written with one write),
    /// waiting until `deadline` at most if too many bytes already wait.
    pub(crate) fn send_frame(&self, frame: Vec<u8>, deadline: Instant, what: &str) -> Result<()> {
        if self.is_closed() {
            return Err(self.disconnected());
        }
        self.outbox.push(frame, deadline).map_err(|e| match e {
            PushError::Full => Error::Timeout {
                what: format!("room to send {what} (the CLI reads nothing)"),
                after: deadline.saturating_duration_since(Instant::now()),
            },
            PushError::Closed(why) => Error::Disconnected(why),
        })
    }

    /// Shuts the writing side once what is queued is written (closes stdin
    /// of a stdio CLI, or the socket's write half), which makes a stdio CLI
    /// exit. Never waits.
    pub(crate) fn close_writer(&self) {
        self.outbox.close();
    }

    /// Sends a request and blocks until its response, the deadline (the
    /// connection's default unless `timeout` is given), or a disconnect.
    pub(crate) fn request<P: Serialize + ?Sized>(
        &self,
        method: &str,
        params: &P,
        timeout: Option<Duration>,
    ) -> Result<Vec<u8>> {
        let timeout = timeout.unwrap_or(self.deadlines.request);
        self.request_until(method, params, Instant::now() + timeout)
    }

    /// [`request`](Self::request) with an absolute deadline.
    pub(crate) fn request_until<P: Serialize + ?Sized>(
        &self,
        method: &str,
        params: &P,
        deadline: Instant,
    ) -> Result<Vec<u8>> {
        let (tx, rx) = mpsc::sync_channel(1);
        self.request_with(method, params, Waiter::Reply(tx), rx, deadline)
    }

    /// Sends a request whose waiter the caller built (see [`Waiter::Assign`]).
    pub(crate) fn request_with<P: Serialize + ?Sized>(
        &self,
        method: &str,
        params: &P,
        waiter: Waiter,
        rx: mpsc::Receiver<Reply>,
        deadline: Instant,
    ) -> Result<Vec<u8>> {
        self.start_request(method, params, waiter, rx, deadline)?.wait(self, deadline)
    }

    /// Sends a request without waiting for its answer: several can then be
    /// awaited against one deadline.
    pub(crate) fn start_request<P: Serialize + ?Sized>(
        &self,
        method: &str,
        params: &P,
        waiter: Waiter,
        rx: mpsc::Receiver<Reply>,
        deadline: Instant,
    ) -> Result<InFlight> {
        let started = Instant::now();
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
        let frame = match encode(
            &Outgoing::Request { id, method, params: Some(&Json(&params)) },
            params.len() + method.len(),
        ) {
            Ok(f) => f,
            Err(e) => {
                self.forget(id);
                return Err(e);
            }
        };
        log::trace!("{}: -> {method} #{id}", self.label);
        if let Err(e) = self.send_frame(frame, deadline, &format!("`{method}`")) {
            self.forget(id);
            return Err(match e {
                Error::Timeout { what, .. } => Error::Timeout { what, after: started.elapsed() },
                e => e,
            });
        }
        Ok(InFlight { id, rx, method: method.to_owned(), started })
    }

    /// Drops a request's waiter (timeout or failed send). A server-assigned
    /// create also gives its reserved slot back.
    fn forget(&self, id: RequestId) {
        if let Some(Waiter::Assign { handle, .. }) = self.router.pending().take(id.0) {
            self.router.sessions().release(handle);
        }
    }

    /// Answers a server request with an error. The reader calls this: it
    /// never waits for room (a full outbox means a CLI that reads nothing).
    pub(crate) fn respond_error(&self, id: Id<'_>, code: i64, message: &str) -> Result<()> {
        let frame = encode(&Outgoing::Error { id, code, message, data: None }, message.len() * 6)?;
        self.send_frame(frame, Instant::now(), "an error answer")
    }

    /// Answers the request whose id's JSON text is `id` with `result`,
    /// within the connection's default deadline.
    pub(crate) fn respond_raw_id(&self, id: &[u8], result: &serde_json::Value) -> Result<()> {
        let body = serde_json::to_vec(result).map_err(|e| Error::Protocol(e.to_string()))?;
        let frame = encode(&Outgoing::Response { id: parse_id(id)?, result: &Json(&body) }, body.len() + id.len())?;
        self.send_frame(frame, Instant::now() + self.deadlines.request, "an answer")
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
        let mut parked: VecDeque<Vec<u8>> = VecDeque::new();
        // Whatever fails in here (the caller's stream, a bug of ours), every
        // waiter is told and every stream ends.
        let cause = match catch_unwind(AssertUnwindSafe(|| self.read_loop(&mut *reader, &mut parked))) {
            Ok(cause) => cause,
            Err(panic) => {
                let what = panic_text(&*panic);
                log::error!("{}: the reader panicked: {what}", self.label);
                CloseCause::ReaderFailed(format!("panicked: {what}"))
            }
        };
        drop(reader);
        let cause = if self.stopping.load(Ordering::SeqCst) {
            CloseCause::Stopped
        } else {
            match lock(&self.probe).take() {
                Some(probe) => catch_unwind(AssertUnwindSafe(|| probe(cause.clone()))).unwrap_or(cause),
                None => cause,
            }
        };
        log::debug!("{}: reader stops: {cause}", self.label);
        self.shut_down(cause, parked);
    }

    fn read_loop(self: &Arc<Self>, reader: &mut dyn Read, parked: &mut VecDeque<Vec<u8>>) -> CloseCause {
        let mut decoder = FrameDecoder::with_buffer(GrowingBuffer::new(READ_CHUNK)).with_limit(MAX_FRAME);
        let cause = loop {
            let spare = decoder.spare();
            let want = spare.len().min(READ_CHUNK);
            match reader.read(&mut spare[..want]) {
                Ok(0) => break CloseCause::PeerClosed,
                Ok(n) => decoder.commit(n),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => break CloseCause::ReadFailed(e.to_string()),
            }
            while let Some(route) = self.router.poll(&mut decoder) {
                self.act(route, parked);
            }
        };
        if let Err(e) = decoder.finish() {
            log::warn!("{}: {e}", self.label);
        }
        cause
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

    /// Ends the connection: every waiting call fails with `Disconnected`
    /// and the cause, every session's event stream ends.
    fn shut_down(&self, cause: CloseCause, parked: VecDeque<Vec<u8>>) {
        let reason = cause.to_string();
        *lock(&self.close_cause) = Some(cause);
        self.closed.store(true, Ordering::SeqCst);
        self.outbox.fail(&reason);
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
        self.closed_signal.notify_all();
    }
}

impl Drop for Connection {
    fn drop(&mut self) {
        // Ends the writer thread once what is queued is written.
        self.outbox.close();
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn panic_text(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "(no message)".into())
}

/// A request sent and not yet answered.
pub(crate) struct InFlight {
    id: RequestId,
    rx: mpsc::Receiver<Reply>,
    method: String,
    started: Instant,
}

impl InFlight {
    /// Waits for the answer until `deadline`; then the request is forgotten
    /// (a late answer is counted as unmatched) and `Timeout` returned.
    pub(crate) fn wait(self, conn: &Connection, deadline: Instant) -> Result<Vec<u8>> {
        let left = deadline.saturating_duration_since(Instant::now());
        match self.rx.recv_timeout(left) {
            Ok(reply) => reply,
            Err(mpsc::RecvTimeoutError::Timeout) => {
                conn.forget(self.id);
                // The answer may have come in between: take it if it did.
                match self.rx.try_recv() {
                    Ok(reply) => reply,
                    Err(_) => Err(Error::Timeout { what: format!("`{}`", self.method), after: self.started.elapsed() }),
                }
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => Err(conn.disconnected()),
        }
    }
}

// -------------------------------------------------------------------------
// The writing side: one thread per connection writes queued frames, so no
// caller ever blocks in a write to a CLI that stopped reading; callers wait
// for their answers, with deadlines, instead.

enum PushError {
    Full,
    Closed(String),
}

#[derive(Default)]
struct OutboxState {
    frames: VecDeque<Vec<u8>>,
    bytes: usize,
    /// No more frames: write what is queued, then drop the writer.
    closing: bool,
    /// Why frames are refused (a write failed, or the connection ended).
    failed: Option<String>,
}

struct Outbox {
    state: Mutex<OutboxState>,
    /// Signalled when a frame is queued, or on close.
    queued: Condvar,
    /// Signalled when room is made.
    room: Condvar,
}

impl Outbox {
    fn start(label: &str, mut writer: Box<dyn Write + Send>) -> Result<Arc<Outbox>> {
        let outbox = Arc::new(Outbox { state: Mutex::default(), queued: Condvar::new(), room: Condvar::new() });
        let me = Arc::clone(&outbox);
        let label = label.to_owned();
        thread::Builder::new()
            .name(format!("copilot-writer ({label})"))
            .spawn(move || {
                while let Some(frame) = me.pop() {
                    if let Err(e) = writer.write_all(&frame).and_then(|()| writer.flush()) {
                        log::debug!("{label}: write failed: {e}");
                        me.fail(&format!("writing to the CLI failed: {e}"));
                    }
                }
                // Dropping the writer closes stdin or the socket's write half.
            })
            .map_err(Error::Io)?;
        Ok(outbox)
    }

    fn push(&self, frame: Vec<u8>, deadline: Instant) -> Result<(), PushError> {
        let mut state = lock(&self.state);
        loop {
            if let Some(why) = &state.failed {
                return Err(PushError::Closed(why.clone()));
            }
            if state.closing {
                return Err(PushError::Closed("the connection is being closed".into()));
            }
            // One frame always fits, however large.
            if state.bytes == 0 || state.bytes + frame.len() <= MAX_OUTBOX_BYTES {
                break;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(PushError::Full);
            }
            state = self.room.wait_timeout(state, left).unwrap_or_else(|p| p.into_inner()).0;
        }
        state.bytes += frame.len();
        state.frames.push_back(frame);
        drop(state);
        self.queued.notify_one();
        Ok(())
    }

    /// The next frame to write; `None` when closing and drained, or failed.
    fn pop(&self) -> Option<Vec<u8>> {
        let mut state = lock(&self.state);
        loop {
            if state.failed.is_some() {
                return None;
            }
            if let Some(frame) = state.frames.pop_front() {
                state.bytes -= frame.len();
                drop(state);
                self.room.notify_all();
                return Some(frame);
            }
            if state.closing {
                return None;
            }
            state = self.queued.wait(state).unwrap_or_else(|p| p.into_inner());
        }
    }

    fn close(&self) {
        lock(&self.state).closing = true;
        self.queued.notify_all();
        self.room.notify_all();
    }

    /// Refuses every frame from now on and drops what waits.
    fn fail(&self, why: &str) {
        let mut state = lock(&self.state);
        state.failed.get_or_insert_with(|| why.to_owned());
        state.frames.clear();
        state.bytes = 0;
        drop(state);
        self.queued.notify_all();
        self.room.notify_all();
    }
}
