//! One connection to a Copilot CLI: the writer lock, the request path, and
//! the reader pump that every transport (stdio, TCP, in-memory pipes) runs.
//!
//! The pump only moves bytes and acts on what `copilot_core::Engine`
//! decides; it makes no protocol decision of its own. It delivers through
//! [`SessionSink`] and hands each wait of the agent to the session with a
//! [`Replier`], so this module knows nothing of sessions or handlers.

use std::collections::VecDeque;
use std::fmt;
use std::io::{self, Read, Write};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Condvar, Mutex};
use std::task::Waker;
use std::thread;
use std::time::{Duration, Instant};

use copilot_core::{
    AnswerError, Cause, EncodeError, Engine, EngineConfig, EngineStats, FrameDecoder, GrowingBuffer, HandlerKind,
    ObligationId, Outgoing, Output, Payload, RequestId, ReserveErrorKind, Route, RpcError, SessionHandle, SessionState,
    Stats,
};
use serde::Serialize;

use crate::error::{Error, Result};
use crate::events::LifecycleEvent;
use crate::pool::Pool;
use crate::requests::RequestHandlers;

/// Sessions one client can have open at once.
pub(crate) const MAX_SESSIONS: usize = 16_384;
/// Requests one client can have in flight at once.
pub(crate) const MAX_PENDING: usize = 1024;
/// The largest frame accepted. The read buffer grows to it only if such a
/// frame arrives.
pub(crate) const MAX_FRAME: usize = 64 << 20;
/// Bytes asked of the transport per read.
const READ_CHUNK: usize = 64 << 10;
/// Waits of the agent open at once, at most; past it the engine refuses
/// a new one at once (it is answered, never dropped).
pub(crate) const MAX_OBLIGATIONS: usize = 4096;
/// Frames held for a create whose id the server assigns, at most.
const MAX_PARKED: usize = 10_000;
/// Bytes of the frames held for such a create, at most (reserved, but
/// touched only as frames are parked).
const PARK_BYTES: usize = 8 << 20;
/// Threads delivering sessions' events.
const DISPATCHERS: usize = 4;
/// How often an idle timer looks whether its connection is gone.
const IDLE_TIMER: Duration = Duration::from_secs(1);
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
    /// A handler's answer to a wait of the agent; then the engine refuses.
    pub(crate) handler: Duration,
    /// Threads running handlers.
    pub(crate) handler_threads: usize,
}

/// What the engine routes a session's frames to: the reader delivers
/// through this, and knows nothing else of sessions.
pub(crate) trait SessionSink: Send + Sync {
    /// The session's id, once known.
    fn id(&self) -> Option<String>;
    /// The server named the session (a create whose id it assigns).
    fn named(&self, id: &str);
    /// Queues an event's JSON; never blocks. Delivery starts at the next
    /// [`flush`](Self::flush).
    fn push_event(&self, event: &[u8]);
    /// Delivers what [`push_event`](Self::push_event) queued, or has it
    /// delivered; never blocks. The reader calls it once per read, after
    /// releasing the engine's lock.
    fn flush(&self);
    /// Runs the user's handler for `job` (on the handler pool), which then
    /// answers through `job.reply`; never blocks.
    fn obligation(&self, job: Job);
    /// Ends delivery: streams end after the events already queued.
    fn close(&self, reason: &str);
}

/// A session as the engine keeps it.
pub(crate) type Target = Arc<dyn SessionSink>;

pub(crate) type HostEngine = Engine<Target, Waiter, Vec<u8>, MAX_SESSIONS, MAX_PENDING, MAX_OBLIGATIONS>;

/// The raw JSON of a result, or the error that replaced it.
pub(crate) type Reply = Result<Vec<u8>>;

/// Where a response goes: a blocked caller's channel, or a future's slot
/// (its waker is woken by the thread that fills it: the reader, the timer
/// or the one that ends the connection).
pub(crate) enum ReplyTx {
    /// A caller blocked on the channel.
    Sync(mpsc::SyncSender<Reply>),
    /// A future polled by the user's executor.
    #[cfg(feature = "async")]
    Async(Arc<Completion<Reply>>),
}

impl ReplyTx {
    /// Hands over the reply; never blocks. A caller that gave up is not told.
    pub(crate) fn send(self, reply: Reply) {
        match self {
            ReplyTx::Sync(tx) => {
                let _ = tx.send(reply);
            }
            #[cfg(feature = "async")]
            ReplyTx::Async(slot) => slot.complete(reply),
        }
    }
}

/// A value set once by one thread and awaited by a future: the waker the
/// future last left is woken (outside the lock) when the value arrives.
#[cfg(feature = "async")]
pub(crate) struct Completion<T> {
    state: Mutex<(Option<T>, Option<std::task::Waker>, bool)>,
}

#[cfg(feature = "async")]
impl<T> Default for Completion<T> {
    fn default() -> Self {
        Completion { state: Mutex::new((None, None, false)) }
    }
}

#[cfg(feature = "async")]
impl<T> Completion<T> {
    /// Sets the value (the first time only) and wakes the future.
    pub(crate) fn complete(&self, value: T) {
        let mut s = lock(&self.state);
        if s.2 {
            return;
        }
        s.0 = Some(value);
        s.2 = true;
        let waker = s.1.take();
        drop(s);
        if let Some(w) = waker {
            w.wake();
        }
    }

    /// The value, once set; else leaves `cx`'s waker to be woken.
    pub(crate) fn poll_take(&self, cx: &mut std::task::Context<'_>) -> std::task::Poll<Option<T>> {
        let mut s = lock(&self.state);
        if let Some(v) = s.0.take() {
            return std::task::Poll::Ready(Some(v));
        }
        if s.2 {
            // Taken already by an earlier poll.
            return std::task::Poll::Ready(None);
        }
        match &mut s.1 {
            Some(w) if w.will_wake(cx.waker()) => {}
            w => *w = Some(cx.waker().clone()),
        }
        std::task::Poll::Pending
    }

    /// Whether the value was set.
    pub(crate) fn is_done(&self) -> bool {
        lock(&self.state).2
    }
}

/// Who is waiting for a response.
pub(crate) enum Waiter {
    /// A caller waiting for the reply.
    Reply(ReplyTx),
    /// A `session.create` or `session.resume`: the reader completes the
    /// open in the engine (naming a session whose id the server assigns,
    /// or releasing the slot on any failure) and re-routes the frames
    /// parked for it, in order, before it reads the next frame.
    Open { handle: SessionHandle, target: Target, reply: ReplyTx },
}

impl Waiter {
    fn fail(self, error: Error) {
        let reply = match self {
            Waiter::Reply(r) | Waiter::Open { reply: r, .. } => r,
        };
        // A caller that gave up has dropped its receiver: nothing to tell.
        reply.send(Err(error));
    }
}

/// One wait of the agent to answer: the engine's obligation, the data the
/// handler reads, and the way back.
pub(crate) struct Job {
    /// Which handler answers.
    pub(crate) kind: HandlerKind,
    /// The awaited event's type or the server request's method, as the
    /// answer table names it.
    pub(crate) name: &'static str,
    /// For an event, its JSON object; for a server request, its params.
    pub(crate) data: Vec<u8>,
    /// Answers it (once).
    pub(crate) reply: Replier,
}

/// The way back for one obligation: the handler's answer, or the reason
/// there is none. The first call discharges it; later ones do nothing.
pub(crate) struct Replier {
    conn: Arc<Connection>,
    id: ObligationId,
}

impl Replier {
    /// Passes on the handler's answer (JSON; `null` leaves the answer's key
    /// out), with `siblings` (an object's members) beside it.
    pub(crate) fn answer(&self, payload: &serde_json::Value, siblings: Option<&serde_json::Value>) {
        let siblings = siblings.map_or(Ok(Vec::new()), serde_json::to_vec);
        match serde_json::to_vec(payload).and_then(|p| Ok((p, siblings?))) {
            Ok((bytes, siblings)) => {
                self.conn.with_engine(|e, _, wire| match e.answer_with(self.id, &bytes, &siblings, &mut sink(wire)) {
                    Ok(()) => {}
                    Err(AnswerError::Stale) => log::debug!("an answer came after its wait was answered; not sent"),
                    Err(e) => log::warn!("{e}"),
                })
            }
            Err(e) => {
                log::warn!("cannot serialize a handler's answer: {e}; the refusal goes");
                self.refuse(Cause::HandlerFailed);
            }
        }
    }

    /// Nothing goes: the handler left the wait to another client of the
    /// session (a wait only this client can answer gets its refusal).
    pub(crate) fn decline(&self) {
        self.conn.with_engine(|e, _, wire| match e.decline(self.id, &mut sink(wire)) {
            Ok(()) | Err(AnswerError::Stale) => {}
            Err(e) => log::warn!("{e}"),
        });
    }

    /// The handler failed with the text `detail`: the engine's failure
    /// answer goes (a tool's generic failure, else the refusal).
    pub(crate) fn fail(&self, detail: &str) {
        self.conn.with_engine(|e, _, wire| {
            let _ = e.fail(self.id, detail, &mut sink(wire));
        });
    }

    /// The engine's refusal goes in place of an answer.
    pub(crate) fn refuse(&self, cause: Cause) {
        self.conn.with_engine(|e, _, wire| {
            let _ = e.refuse(self.id, cause, &mut sink(wire));
        });
    }

    /// Runs `f` (the user's handler) with this wait as the one the thread
    /// answers, which an async handler reads ([`Answering::current`]) to
    /// drop its future once the engine has refused the wait.
    pub(crate) fn scope<R>(&self, f: impl FnOnce() -> R) -> R {
        #[cfg(feature = "async")]
        {
            struct Reset(Option<Answering>);
            impl Drop for Reset {
                fn drop(&mut self) {
                    ANSWERING.with(|a| *a.borrow_mut() = self.0.take());
                }
            }
            let wait = Answering { conn: Arc::downgrade(&self.conn), id: self.id };
            let _reset = Reset(ANSWERING.with(|a| a.borrow_mut().replace(wait)));
            f()
        }
        #[cfg(not(feature = "async"))]
        f()
    }
}

#[cfg(feature = "async")]
thread_local! {
    /// The wait of the agent the handler running on this thread answers.
    static ANSWERING: std::cell::RefCell<Option<Answering>> = const { std::cell::RefCell::new(None) };
}

/// The wait of the agent a handler pool thread is answering.
#[cfg(feature = "async")]
pub(crate) struct Answering {
    conn: std::sync::Weak<Connection>,
    id: ObligationId,
}

#[cfg(feature = "async")]
impl Answering {
    /// The wait the handler running on this thread answers, if any.
    pub(crate) fn current() -> Option<Answering> {
        ANSWERING.with(|a| a.borrow().as_ref().map(|w| Answering { conn: w.conn.clone(), id: w.id }))
    }

    /// How long the engine gives a handler; its deadline for this wait is
    /// at most this long from now.
    pub(crate) fn timeout(&self) -> Option<Duration> {
        self.conn.upgrade().map(|c| c.deadlines.handler)
    }

    /// Whether the engine still waits for this handler's answer (it has
    /// not refused the wait: its deadline, or its session or connection
    /// ended).
    pub(crate) fn is_open(&self) -> bool {
        self.conn.upgrade().is_some_and(|c| lock(&c.engine).is_open(self.id))
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

/// The waker of an async wait, updated at each poll.
pub(crate) type WakerSlot = Arc<Mutex<Option<Waker>>>;

/// A receiver of `session.lifecycle` notifications: takes each one without
/// waiting, and says `false` once it is gone. Dropped when the connection
/// ends, which ends its stream.
pub(crate) type LifecycleSink = Box<dyn FnMut(&LifecycleEvent) -> bool + Send>;

/// Wakes the timer thread when a deadline earlier than the one it sleeps
/// towards appears.
#[derive(Default)]
struct TimerState {
    /// The deadline the timer sleeps towards (ms), if any.
    next: Option<u64>,
    stop: bool,
}

/// A connection shared by the client, its sessions and the reader thread.
pub(crate) struct Connection {
    /// The protocol engine: every routing decision and every answer it
    /// sends by itself. One lock; never held across user code.
    engine: Mutex<HostEngine>,
    /// Time zero of the engine's clock.
    epoch: Instant,
    timer: Mutex<TimerState>,
    timer_wake: Condvar,
    outbox: Arc<Outbox>,
    closed: AtomicBool,
    close_cause: Mutex<Option<CloseCause>>,
    closed_signal: Condvar,
    /// Set before this client ends the connection on purpose, so that the
    /// end is reported as `Stopped` rather than as a fault.
    stopping: AtomicBool,
    probe: Mutex<Option<CauseProbe>>,
    pub(crate) deadlines: Deadlines,
    /// Wakers of async waits that have a deadline of their own (how long a
    /// caller waits for a turn to end: not a protocol decision), woken by
    /// the timer thread when it passes. One entry per such wait, removed
    /// when due.
    wake_at: Mutex<Vec<(Instant, WakerSlot)>>,
    lifecycle: Mutex<Vec<LifecycleSink>>,
    /// Delivers sessions' events (a fixed set of threads).
    pub(crate) dispatchers: Arc<Pool>,
    /// Runs the user's handlers (a fixed set of threads).
    pub(crate) workers: Arc<Pool>,
    /// A label for logs: "stdio", "tcp 127.0.0.1:4321", ...
    pub(crate) label: String,
    /// The handlers of client-wide requests (those without a session).
    requests: Arc<RequestHandlers>,
}

/// The event type or method of an answer table row.
fn trigger_name(row: &copilot_core::AnswerRow) -> &'static str {
    match row.trigger {
        copilot_core::Trigger::Event(t) | copilot_core::Trigger::Request(t) => t,
    }
}

impl Connection {
    /// Starts the reader pump, the timer and the pools, and returns the connection.
    pub(crate) fn start(
        label: String,
        reader: Box<dyn Read + Send>,
        writer: Box<dyn Write + Send>,
        deadlines: Deadlines,
        probe: Option<CauseProbe>,
        requests: RequestHandlers,
    ) -> Result<(Arc<Connection>, thread::JoinHandle<()>)> {
        let config = EngineConfig::new()
            .handler_timeout(Some(ms(deadlines.handler)))
            .request_timeout(Some(ms(deadlines.request)))
            .park_frames(MAX_PARKED);
        // Its tables are written in place on the heap (the core's `alloc`
        // feature): no stack of their size is needed, or touched.
        let engine = HostEngine::new(vec![0; PARK_BYTES], config);
        let outbox = Outbox::start(&label, writer)?;
        let conn = Arc::new(Connection {
            engine: Mutex::new(engine),
            epoch: Instant::now(),
            wake_at: Mutex::default(),
            timer: Mutex::default(),
            timer_wake: Condvar::new(),
            outbox,
            closed: AtomicBool::new(false),
            close_cause: Mutex::new(None),
            closed_signal: Condvar::new(),
            stopping: AtomicBool::new(false),
            probe: Mutex::new(probe),
            deadlines,
            lifecycle: Mutex::new(Vec::new()),
            dispatchers: Pool::start(&format!("copilot-events ({label})"), DISPATCHERS).map_err(Error::Io)?,
            workers: Pool::start(&format!("copilot-handlers ({label})"), deadlines.handler_threads)
                .map_err(Error::Io)?,
            label,
            requests: Arc::new(requests),
        });
        let timer = Arc::downgrade(&conn);
        thread::Builder::new()
            .name(format!("copilot-timer ({})", conn.label))
            .spawn(move || timer_loop(&timer))
            .map_err(Error::Io)?;
        let pump = Arc::clone(&conn);
        let handle = thread::Builder::new()
            .name(format!("copilot-reader ({})", conn.label))
            .spawn(move || pump.pump(reader))
            .map_err(Error::Io)?;
        Ok((conn, handle))
    }

    /// Milliseconds on the engine's clock.
    fn now(&self) -> u64 {
        ms(self.epoch.elapsed())
    }

    /// `at` on the engine's clock (rounded up).
    fn at(&self, at: Instant) -> u64 {
        let d = at.saturating_duration_since(self.epoch);
        ms(d) + u64::from(!d.subsec_nanos().is_multiple_of(1_000_000))
    }

    /// Runs `f` on the engine under its lock, with the time; frames the
    /// engine sends go to the transport, then the timer learns of new
    /// deadlines.
    pub(crate) fn with_engine<R>(&self, f: impl FnOnce(&mut HostEngine, u64, &mut Vec<u8>) -> R) -> R {
        let mut wire = Vec::new();
        let (r, next) = {
            let mut engine = lock(&self.engine);
            let now = self.now();
            let r = f(&mut engine, now, &mut wire);
            self.send_engine_frames(wire);
            (r, engine.poll_timeout())
        };
        self.kick_timer(next);
        r
    }

    /// Frames the engine decided on go out whatever the outbox holds: an
    /// answer is never dropped (its size is bounded by what was read).
    /// Called under the engine's lock (the outbox never takes it), so the
    /// wire's order is the engine's: once the engine shows a wait answered
    /// (`open_obligations`), its answer is queued ahead of any later frame.
    fn send_engine_frames(&self, wire: Vec<u8>) {
        if !wire.is_empty() && self.outbox.push_always(wire).is_err() {
            log::debug!("{}: the connection is closed; the engine's frames are not sent", self.label);
        }
    }

    /// Wakes the waker in `slot` once `at` has passed (the timer thread
    /// does it); the async waits with a deadline of their own use it.
    #[cfg(feature = "async")]
    pub(crate) fn wake_at(&self, at: Instant, slot: WakerSlot) {
        lock(&self.wake_at).push((at, slot));
        self.kick_timer(Some(self.at(at)));
    }

    /// Wakes the async waits whose deadline has passed; the earliest left.
    fn wake_due(&self) -> Option<u64> {
        let now = Instant::now();
        let mut due = Vec::new();
        let next = {
            let mut list = lock(&self.wake_at);
            list.retain(|(at, slot)| {
                let keep = *at > now;
                if !keep {
                    due.push(Arc::clone(slot));
                }
                keep
            });
            list.iter().map(|(at, _)| *at).min()
        };
        for slot in due {
            if let Some(w) = lock(&slot).take() {
                w.wake();
            }
        }
        next.map(|at| self.at(at))
    }

    fn kick_timer(&self, next: Option<u64>) {
        let Some(next) = next else { return };
        let mut t = lock(&self.timer);
        if t.next.is_none_or(|n| next < n) {
            t.next = Some(next);
            drop(t);
            self.timer_wake.notify_one();
        }
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
        lock(&self.engine).router().stats()
    }

    /// The engine's counters, with the open obligations and their age.
    pub(crate) fn engine_stats(&self) -> EngineStats {
        let now = self.now();
        lock(&self.engine).stats(now)
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
        self.request_with(method, params, Waiter::Reply(ReplyTx::Sync(tx)), rx, deadline)
    }

    /// Sends a request whose waiter the caller built (see [`Waiter::Open`]).
    pub(crate) fn request_with<P: Serialize + ?Sized>(
        &self,
        method: &str,
        params: &P,
        waiter: Waiter,
        rx: mpsc::Receiver<Reply>,
        deadline: Instant,
    ) -> Result<Vec<u8>> {
        self.start_request(method, params, waiter, rx, deadline)?.wait(self)
    }

    /// Sends a request without waiting for its answer: several can then be
    /// awaited against one deadline. The deadline is the engine's: the
    /// timer thread fails the request when it passes.
    pub(crate) fn start_request<P: Serialize + ?Sized>(
        &self,
        method: &str,
        params: &P,
        waiter: Waiter,
        rx: mpsc::Receiver<Reply>,
        deadline: Instant,
    ) -> Result<InFlight> {
        let started = Instant::now();
        self.send_request(method, params, waiter, deadline, deadline)?;
        Ok(InFlight { rx, method: method.to_owned(), started })
    }

    /// Inserts `waiter` with the engine's `deadline` and encodes the
    /// request, for the async API to queue with
    /// [`poll_send_frame`](Self::poll_send_frame): it never waits. If the
    /// frame is never queued, the caller forgets the request.
    #[cfg(feature = "async")]
    pub(crate) fn prepare_request_async<P: Serialize + ?Sized>(
        &self,
        method: &str,
        params: &P,
        waiter: Waiter,
        deadline: Instant,
    ) -> Result<(RequestId, Vec<u8>)> {
        self.prepare_request(method, params, waiter, deadline)
    }

    /// Queues `frame` (taken from the option) for the writer thread, or,
    /// if too many bytes already wait, leaves it there and wakes `cx` when
    /// room is made: an async caller awaits room instead of blocking.
    #[cfg(feature = "async")]
    pub(crate) fn poll_send_frame(
        &self,
        frame: &mut Option<Vec<u8>>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<()>> {
        if self.is_closed() {
            return std::task::Poll::Ready(Err(self.disconnected()));
        }
        self.outbox.poll_push(frame, cx).map(|pushed| {
            pushed.map_err(|e| match e {
                PushError::Closed(why) => Error::Disconnected(why),
                PushError::Full => Error::Protocol("the outbox refused a frame it had room for".into()),
            })
        })
    }

    /// Inserts `waiter` with the engine's `deadline` and queues the frame,
    /// waiting for room in the outbox until `room_by`.
    fn send_request<P: Serialize + ?Sized>(
        &self,
        method: &str,
        params: &P,
        waiter: Waiter,
        deadline: Instant,
        room_by: Instant,
    ) -> Result<RequestId> {
        let started = Instant::now();
        let (id, frame) = self.prepare_request(method, params, waiter, deadline)?;
        if let Err(e) = self.send_frame(frame, room_by, &format!("`{method}`")) {
            self.forget(id);
            return Err(match e {
                Error::Timeout { what, .. } => Error::Timeout { what, after: started.elapsed() },
                e => e,
            });
        }
        Ok(id)
    }

    /// Inserts `waiter` with the engine's `deadline` and encodes the request.
    fn prepare_request<P: Serialize + ?Sized>(
        &self,
        method: &str,
        params: &P,
        waiter: Waiter,
        deadline: Instant,
    ) -> Result<(RequestId, Vec<u8>)> {
        let params = match serde_json::to_vec(params) {
            Ok(p) => p,
            Err(e) => {
                self.give_up(waiter);
                return Err(Error::Protocol(format!("cannot serialize params: {e}")));
            }
        };
        let at = self.at(deadline);
        let inserted = self.with_engine(|e, _, _| e.router().pending().insert_with_deadline(waiter, Some(at)));
        let id = match inserted {
            Ok(id) => id,
            Err(full) => {
                self.give_up(full.0);
                return Err(Error::Capacity(format!("more than {MAX_PENDING} requests in flight")));
            }
        };
        // The reader sets `closed` before it fails every pending request, so
        // either that drain sees this request or this check sees `closed`.
        if self.is_closed() {
            self.forget(id);
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
        Ok((id, frame))
    }

    /// A waiter whose request was never sent: an open gives its slot back.
    fn give_up(&self, waiter: Waiter) {
        if let Waiter::Open { handle, .. } = waiter {
            self.release(handle);
        }
    }

    /// Drops a request's waiter (failed send, or an async call dropped
    /// before its answer: a late answer is then counted as unmatched). An
    /// open also gives its reserved slot back.
    pub(crate) fn forget(&self, id: RequestId) {
        let waiter = self.with_engine(|e, _, _| e.router().pending().take(id.0));
        if let Some(w) = waiter {
            self.give_up(w);
        }
    }

    /// Reserves a session before its create or resume is sent: `id` (a
    /// resume may take over a session open on this client: its old handle's
    /// streams end), or none when the server names it.
    pub(crate) fn reserve(&self, id: Option<&str>, resume: bool, target: Target) -> Result<SessionHandle> {
        let (handle, old) = self
            .with_engine(|e, _, _| match (id, resume) {
                (None, _) => e.reserve_unassigned(target).map(|h| (h, None)),
                (Some(id), false) => e.reserve(id, target).map(|h| (h, None)),
                (Some(id), true) => e.reserve_resume(id, target),
            })
            .map_err(|e| match e.kind {
                ReserveErrorKind::Full => Error::Capacity(format!("cannot open another session: {}", e.kind)),
                kind => Error::Config(format!("session {id:?}: {kind}")),
            })?;
        if let Some((_, old)) = old {
            old.close("the session was resumed by another handle of this client");
        }
        Ok(handle)
    }

    /// Marks a session closing (its destroy is in flight).
    pub(crate) fn close_session(&self, handle: SessionHandle) {
        let _ = self.with_engine(|e, _, _| e.close(handle));
    }

    /// Releases a session's slot: its open waits are refused, and frames
    /// parked for no session any more are dealt with.
    pub(crate) fn release(&self, handle: SessionHandle) {
        self.with_engine(|e, now, wire| {
            e.release(handle, &mut sink(wire));
            drain_parked(e, now, wire);
        });
    }

    /// Every session in the table: handle, whether active, and target.
    pub(crate) fn sessions(&self) -> Vec<(SessionHandle, bool, Target)> {
        let engine = lock(&self.engine);
        engine.router().sessions().iter().map(|(h, s, t)| (h, s == SessionState::Active, t)).collect()
    }

    /// A new receiver of every `session.lifecycle` notification from now on.
    pub(crate) fn subscribe_lifecycle(&self) -> mpsc::Receiver<LifecycleEvent> {
        let (tx, rx) = mpsc::channel();
        self.subscribe_lifecycle_with(Box::new(move |e| tx.send(e.clone()).is_ok()));
        rx
    }

    /// Adds a receiver of every `session.lifecycle` notification from now
    /// on; it is dropped when the connection ends (at once if it has).
    pub(crate) fn subscribe_lifecycle_with(&self, sink: LifecycleSink) {
        let mut subs = self.lifecycle.lock().unwrap_or_else(|p| p.into_inner());
        // `shut_down` sets `closed` before it clears the list: either it
        // clears this sink, or this check sees `closed`.
        if !self.is_closed() {
            subs.push(sink);
        }
    }

    // ---------------------------------------------------------------------
    // The reader side.

    /// The read loop: bytes in, routes out, until the stream ends.
    fn pump(self: Arc<Self>, mut reader: Box<dyn Read + Send>) {
        // Whatever fails in here (the caller's stream, a bug of ours), every
        // waiter is told and every stream ends.
        let cause = match catch_unwind(AssertUnwindSafe(|| self.read_loop(&mut *reader))) {
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
        self.shut_down(cause);
    }

    fn read_loop(self: &Arc<Self>, reader: &mut dyn Read) -> CloseCause {
        let mut decoder = FrameDecoder::with_buffer(GrowingBuffer::new(READ_CHUNK)).with_limit(MAX_FRAME);
        // Sessions given events during one read, to flush after it.
        let mut touched: Vec<Target> = Vec::new();
        let cause = loop {
            let spare = decoder.spare();
            let want = spare.len().min(READ_CHUNK);
            match reader.read(&mut spare[..want]) {
                Ok(0) => break CloseCause::PeerClosed,
                Ok(n) => decoder.commit(n),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => break CloseCause::ReadFailed(e.to_string()),
            }
            // The lock is held while this read's frames are routed; what
            // is done under it never waits for a consumer or runs user code.
            self.with_engine(|engine, now, wire| loop {
                let mut out_ = sink(wire);
                let polled = engine.poll(&mut decoder, now, &mut out_);
                drop(out_);
                let Some(out) = polled else { break };
                match out.route {
                    Route::Response { waiter: Waiter::Open { handle, target, reply }, result, .. } => {
                        self.complete_open(engine, now, wire, handle, &target, reply, result, &mut touched)
                    }
                    _ => self.deliver(out, &mut touched),
                }
            });
            // The sessions that got events deliver them (one batch each).
            for target in touched.drain(..) {
                target.flush();
            }
        };
        if let Err(e) = decoder.finish() {
            log::warn!("{}: {e}", self.label);
        }
        cause
    }

    /// Completes a create or resume in the engine and tells its caller;
    /// frames parked for it are delivered first, so they keep their order.
    #[allow(clippy::too_many_arguments)]
    fn complete_open(
        self: &Arc<Self>,
        engine: &mut HostEngine,
        now: u64,
        wire: &mut Vec<u8>,
        handle: SessionHandle,
        target: &Target,
        reply: ReplyTx,
        result: std::result::Result<copilot_core::Value<'_>, RpcError<'_>>,
        touched: &mut Vec<Target>,
    ) {
        let outcome = match &result {
            Ok(v) => Ok(v.as_bytes().to_vec()),
            Err(e) => Err(rpc_error(e)),
        };
        let name = result.as_ref().ok().and_then(|v| v.get("sessionId")).and_then(|s| s.as_str());
        let mut buf = [0; copilot_core::MAX_SESSION_ID_LEN];
        let name = name.and_then(|s| s.decode_into(&mut buf)).map(str::to_owned);
        let opened = engine.complete_open(handle, result, &mut sink(wire));
        let reply_value = match (opened, outcome) {
            (Ok(()), Ok(body)) => {
                if target.id().is_none() {
                    if let Some(name) = &name {
                        target.named(name);
                    }
                }
                Ok(body)
            }
            (_, Err(e)) => Err(e),
            (Err(e), Ok(_)) => Err(Error::Protocol(format!("the session could not be opened: {e}"))),
        };
        drain_parked_with(engine, now, wire, |out| self.deliver(out, touched));
        reply.send(reply_value);
    }

    /// Delivers one routed frame. Runs under the engine's lock: it never
    /// blocks (events go to per-session queues, flushed once the lock is
    /// released and noted in `touched`; handlers go to the pool).
    fn deliver(self: &Arc<Self>, out: Output<'_, Target, Waiter>, touched: &mut Vec<Target>) {
        let Output { route, obligation, refused, answer_ack } = out;
        match route {
            Route::Event { target, event, .. } => {
                let bytes = event.event.as_bytes();
                target.push_event(bytes);
                if touched.last().is_none_or(|t| !Arc::ptr_eq(t, &target)) {
                    touched.push(Arc::clone(&target));
                }
                if let Some(ob) = obligation {
                    let reply = Replier { conn: Arc::clone(self), id: ob.id };
                    let name = copilot_core::row_for_event(event.event_type).map_or("", |(_, r)| trigger_name(r));
                    target.obligation(Job { kind: ob.handler, name, data: bytes.to_vec(), reply });
                }
            }
            Route::Request { method, params, session, .. } => match (obligation, session) {
                (Some(ob), Some((_, target))) => {
                    let data = params.map_or_else(|| b"{}".to_vec(), |p| p.as_bytes().to_vec());
                    let reply = Replier { conn: Arc::clone(self), id: ob.id };
                    let name = copilot_core::row_for_request(method).map_or("", |(_, r)| trigger_name(r));
                    target.obligation(Job { kind: ob.handler, name, data, reply });
                }
                (Some(ob), None) => {
                    // A client-wide request: the client's generic handlers answer.
                    let data = params.map_or_else(|| b"{}".to_vec(), |p| p.as_bytes().to_vec());
                    let reply = Replier { conn: Arc::clone(self), id: ob.id };
                    let name = copilot_core::row_for_request(method).map_or("", |(_, r)| trigger_name(r));
                    let job = Job { kind: ob.handler, name, data, reply };
                    let requests = self.requests.clone();
                    // Not under the lock: the answer takes it.
                    self.workers.submit(move || crate::handlers::run_client_wide(job, &requests));
                }
                (None, _) => log::debug!("{}: server request {method}: {refused:?}", self.label),
            },
            Route::Lifecycle { params, .. } => self.deliver_lifecycle(params.as_bytes()),
            Route::Response { waiter, result, request } => {
                log::trace!("{}: <- response #{request}", self.label);
                let reply = match result {
                    Ok(v) => Ok(v.as_bytes().to_vec()),
                    Err(e) => Err(rpc_error(&e)),
                };
                match waiter {
                    // An open is handled by the read loop; never parked.
                    Waiter::Reply(tx) | Waiter::Open { reply: tx, .. } => tx.send(reply),
                }
            }
            Route::Notification { method, .. } => log::debug!("{}: notification {method}", self.label),
            Route::Park { session_id, .. } => {
                if let Some(cause) = refused {
                    log::warn!("{}: a wait for session {session_id} was refused: {}", self.label, cause.name());
                }
            }
            Route::UnknownSession { session_id, method, .. } => {
                log::warn!("{}: {method} for unknown session {session_id} ({refused:?})", self.label)
            }
            Route::UnmatchedResponse { id, .. } => {
                if answer_ack.is_none() {
                    log::warn!("{}: response to unknown request {id}", self.label)
                }
            }
            Route::Malformed(e) => log::warn!("{}: malformed message: {e}", self.label),
            Route::FrameError(e) => log::warn!("{}: {e}", self.label),
        }
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
        subs.retain_mut(|sink| sink(&event));
    }

    /// Acts on the deadlines due: the engine refuses expired waits of the
    /// agent, and the callers of expired requests get `Timeout`.
    fn on_timer(&self) -> Option<u64> {
        let mut expired = Vec::new();
        let mut wire = Vec::new();
        let next = {
            let mut engine = lock(&self.engine);
            let now = self.now();
            engine.handle_timeout(now, &mut sink(&mut wire), |_, w| expired.push(w));
            for w in &expired {
                if let Waiter::Open { handle, .. } = w {
                    engine.release(*handle, &mut sink(&mut wire));
                }
            }
            if expired.iter().any(|w| matches!(w, Waiter::Open { .. })) {
                drain_parked_with(&mut engine, now, &mut wire, |o| log_parked(&self.label, &o));
            }
            self.send_engine_frames(wire);
            engine.poll_timeout()
        };
        for w in expired {
            w.fail(Error::Timeout { what: String::new(), after: Duration::ZERO });
        }
        match (next, self.wake_due()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Ends the connection: every waiting call fails with `Disconnected`
    /// and the cause, every session's event stream ends.
    fn shut_down(&self, cause: CloseCause) {
        let reason = cause.to_string();
        *lock(&self.close_cause) = Some(cause);
        self.closed.store(true, Ordering::SeqCst);
        self.outbox.fail(&reason);
        let mut failed = Vec::new();
        let targets: Vec<Target> = {
            let mut engine = lock(&self.engine);
            let forgotten = engine.disconnect(|_, w| failed.push(w));
            if forgotten > 0 {
                log::warn!("{}: {forgotten} waits of the agent were open when the connection ended", self.label);
            }
            engine.router().sessions().drain().map(|(_, t)| t).collect()
        };
        for w in failed {
            w.fail(Error::Disconnected(reason.clone()));
        }
        for target in targets {
            target.close(&reason);
        }
        self.lifecycle.lock().unwrap_or_else(|p| p.into_inner()).clear();
        let mut t = lock(&self.timer);
        t.stop = true;
        drop(t);
        self.timer_wake.notify_all();
        self.closed_signal.notify_all();
    }
}

fn rpc_error(e: &RpcError<'_>) -> Error {
    Error::Rpc {
        code: e.code,
        message: e.message.to_string(),
        data: e.data.and_then(|d| serde_json::from_slice(d.as_bytes()).ok()),
    }
}

/// Routes what a session change made routable, in order.
fn drain_parked(engine: &mut HostEngine, now: u64, wire: &mut Vec<u8>) {
    drain_parked_with(engine, now, wire, |o| log::debug!("a parked frame: {:?}", o.refused));
}

fn drain_parked_with(
    engine: &mut HostEngine,
    now: u64,
    wire: &mut Vec<u8>,
    mut deliver: impl FnMut(Output<'_, Target, Waiter>),
) {
    loop {
        let mut out_ = sink(wire);
        let Some(out) = engine.poll_parked(now, &mut out_) else { break };
        deliver(out);
    }
}

fn log_parked(label: &str, out: &Output<'_, Target, Waiter>) {
    log::debug!("{label}: a parked frame after a failed open: {:?}", out.refused);
}

/// The timer thread: sleeps until the engine's next deadline.
fn timer_loop(conn: &std::sync::Weak<Connection>) {
    loop {
        let Some(c) = conn.upgrade() else { return };
        // Deadlines added while the engine is asked are kicked in meanwhile.
        lock(&c.timer).next = None;
        let next = c.on_timer();
        let mut t = lock(&c.timer);
        t.next = match (t.next, next) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        if t.stop || Arc::strong_count(&c) == 1 {
            return;
        }
        let now = c.now();
        let wait = match t.next {
            Some(n) if n <= now => continue,
            // Nothing due: wake now and then to notice a connection dropped by all.
            Some(n) => Duration::from_millis(n - now).min(IDLE_TIMER),
            None => IDLE_TIMER,
        };
        drop(c.timer_wake.wait_timeout(t, wait).unwrap_or_else(|p| p.into_inner()));
    }
}

impl Drop for Connection {
    fn drop(&mut self) {
        // Ends the writer thread once what is queued is written, and the pools.
        self.outbox.close();
        self.dispatchers.close();
        self.workers.close();
    }
}

/// A sink for the engine's frames, gathered into one write.
fn sink(wire: &mut Vec<u8>) -> impl FnMut(&[u8]) + '_ {
    move |b| wire.extend_from_slice(b)
}

fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

fn lock<T: ?Sized>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

pub(crate) fn panic_text(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "(no message)".into())
}

/// A request sent and not yet answered.
pub(crate) struct InFlight {
    rx: mpsc::Receiver<Reply>,
    method: String,
    started: Instant,
}

impl InFlight {
    /// Waits for the answer. The engine's deadline (kept by the timer
    /// thread) ends the wait with `Timeout`; a late answer is then counted
    /// as unmatched.
    pub(crate) fn wait(self, conn: &Connection) -> Result<Vec<u8>> {
        match self.rx.recv() {
            Ok(Err(Error::Timeout { .. })) => {
                Err(Error::Timeout { what: format!("`{}`", self.method), after: self.started.elapsed() })
            }
            Ok(reply) => reply,
            Err(mpsc::RecvError) => Err(conn.disconnected()),
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
    /// Async callers waiting for room, woken when a frame is taken.
    #[cfg(feature = "async")]
    room_wakers: Vec<Waker>,
}

impl OutboxState {
    /// The async callers to wake: room was made, or the outbox ended.
    #[cfg(feature = "async")]
    fn take_wakers(&mut self) -> Vec<Waker> {
        std::mem::take(&mut self.room_wakers)
    }

    #[cfg(not(feature = "async"))]
    fn take_wakers(&mut self) -> Vec<Waker> {
        Vec::new()
    }
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

    /// Queues a frame whatever is queued already (the engine's answers).
    fn push_always(&self, frame: Vec<u8>) -> Result<(), PushError> {
        let mut state = lock(&self.state);
        if let Some(why) = &state.failed {
            return Err(PushError::Closed(why.clone()));
        }
        state.bytes += frame.len();
        state.frames.push_back(frame);
        drop(state);
        self.queued.notify_one();
        Ok(())
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

    /// [`push`](Self::push) for an async caller: if there is no room, its
    /// waker is woken when room is made, and `frame` is left in place.
    #[cfg(feature = "async")]
    fn poll_push(
        &self,
        frame: &mut Option<Vec<u8>>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), PushError>> {
        let mut state = lock(&self.state);
        if let Some(why) = &state.failed {
            return std::task::Poll::Ready(Err(PushError::Closed(why.clone())));
        }
        if state.closing {
            return std::task::Poll::Ready(Err(PushError::Closed("the connection is being closed".into())));
        }
        let Some(len) = frame.as_ref().map(Vec::len) else { return std::task::Poll::Ready(Ok(())) };
        // One frame always fits, however large.
        if state.bytes != 0 && state.bytes + len > MAX_OUTBOX_BYTES {
            if !state.room_wakers.iter().any(|w| w.will_wake(cx.waker())) {
                state.room_wakers.push(cx.waker().clone());
            }
            return std::task::Poll::Pending;
        }
        state.bytes += len;
        state.frames.extend(frame.take());
        drop(state);
        self.queued.notify_one();
        std::task::Poll::Ready(Ok(()))
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
                let wakers = state.take_wakers();
                drop(state);
                self.room.notify_all();
                wakers.into_iter().for_each(Waker::wake);
                return Some(frame);
            }
            if state.closing {
                return None;
            }
            state = self.queued.wait(state).unwrap_or_else(|p| p.into_inner());
        }
    }

    fn close(&self) {
        let mut state = lock(&self.state);
        state.closing = true;
        let wakers = state.take_wakers();
        drop(state);
        self.queued.notify_all();
        self.room.notify_all();
        wakers.into_iter().for_each(Waker::wake);
    }

    /// Refuses every frame from now on and drops what waits.
    fn fail(&self, why: &str) {
        let mut state = lock(&self.state);
        state.failed.get_or_insert_with(|| why.to_owned());
        state.frames.clear();
        state.bytes = 0;
        let wakers = state.take_wakers();
        drop(state);
        self.queued.notify_all();
        self.room.notify_all();
        wakers.into_iter().for_each(Waker::wake);
    }
}
