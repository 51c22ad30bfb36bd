//! One connection to a Copilot CLI: the engine under its lock, its clock,
//! the sessions' table and the end of the connection. The reader
//! (`reader.rs`), the request path (`calls.rs`), the timer (`timer.rs`) and
//! the writer (`outbox.rs`) are its other parts.
//!
//! It knows no user type: it delivers through [`SessionSink`], hands each
//! wait of the agent on as a [`Job`], and a client-wide request's wait to
//! the [`ClientWide`] the layer above gives it.

use std::future::poll_fn;
use std::io::{Read, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::task::{Context, Poll, Waker};
use std::thread;
use std::time::{Duration, Instant};

use copilot_core::{
    Engine, EngineConfig, EngineStats, GrowingBuffer, HandlerKind, ObligationId, Output, ReserveErrorKind,
    SessionHandle, SessionState, Stats,
};

use super::outbox::Outbox;
pub(crate) use super::waiter::{Marked, Reply, ReplyTx, WakerSlot};

/// Who waits for a response, as this driver's engine keeps it.
pub(crate) type Waiter = super::waiter::Waiter<Target>;
use crate::error::{Error, Result};
use crate::pool::Pool;
use crate::transport::{CauseProbe, CloseCause};
use crate::wait::block_on_until;

// The engine's capacities are the core's limits (`copilot_core::limits`),
// shared with every host. The parking storage of `MAX_PARKED_BYTES` is
// reserved, but touched only as frames are parked.
pub(crate) use copilot_core::limits::{MAX_OBLIGATIONS, MAX_PENDING_REQUESTS as MAX_PENDING, MAX_SESSIONS};
use copilot_core::limits::{MAX_PARKED_BYTES, MAX_PARKED_FRAMES};
/// Threads delivering sessions' events.
const DISPATCHERS: usize = 4;

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
    /// How long a running turn may be silent before the engine asks the
    /// CLI what is pending; `None`: never.
    pub(crate) stall: Option<Duration>,
}

/// What the engine routes a session's frames to: the reader delivers
/// through this, and knows nothing else of sessions.
pub(crate) trait SessionSink: Send + Sync {
    /// The session's id, once known.
    fn id(&self) -> Option<String>;
    /// The server named the session (a create whose id it assigns).
    fn named(&self, id: &str);
    /// Queues an event's JSON (of type `event_type`, as the core read it);
    /// never blocks. Delivery starts at the next [`flush`](Self::flush).
    fn push_event(&self, event: &[u8], event_type: copilot_core::JsonStr<'_>);
    /// Delivers what [`push_event`](Self::push_event) queued, or has it
    /// delivered; never blocks. The reader calls it once per read, after
    /// releasing the engine's lock.
    fn flush(&self);
    /// Runs the user's handler for `job` (on the handler pool), which then
    /// answers through `job.reply`; never blocks.
    fn obligation(&self, job: Job);
    /// Ends delivery: streams end after the events already queued.
    fn close(&self, reason: &str);
    /// Holds the events pushed from now on (a recovery is resuming the
    /// session) until [`release_held`](Self::release_held).
    fn hold(&self) {}
    /// Delivers `gap` (events the log had and the stream lost, in order),
    /// then the events held, less those of `gap`; delivery goes on.
    fn release_held(&self, _gap: Vec<Vec<u8>>) {}
    /// Changes the session's capabilities (the open's answer sets them,
    /// each `capabilities.changed` moves them), in the order the frames
    /// came and before the event is delivered. Sinks that keep none ignore it.
    fn change_capabilities(&self, _change: &mut dyn FnMut(&mut copilot_core::Capabilities)) {}
    /// Changes the session's open canvas instances (the open's answer
    /// starts them, `first` set; each opened or closed instance moves
    /// them), in frame order, before the event is delivered. Sinks that
    /// keep none ignore it.
    fn change_open_canvases(&self, _change: copilot_core::CanvasChange<'_>, _first: bool) {}
}

/// A session as the engine keeps it.
pub(crate) type Target = Arc<dyn SessionSink>;

/// A receiver of `session.lifecycle` notifications (their params' JSON):
/// takes each one without waiting, and says `false` once it is gone.
/// Dropped when the connection ends, which ends its stream.
pub(crate) type LifecycleSink = Box<dyn FnMut(&[u8]) -> bool + Send>;

/// The engine: parking in a reserved `Vec`, and a transmit store that
/// grows, so it always has room for what the engine decides to send.
pub(crate) type HostEngine = Engine<Target, Waiter, Vec<u8>, GrowingBuffer, MAX_SESSIONS, MAX_PENDING, MAX_OBLIGATIONS>;

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
    pub(super) conn: Arc<Connection>,
    pub(super) id: ObligationId,
}

/// Answers the wait of a client-wide server request (one without a
/// session): the layer above runs the client's handlers for it. Called on
/// the handler pool, never under the engine's lock.
pub(crate) type ClientWide = Arc<dyn Fn(Job) + Send + Sync>;

/// Wakes the timer thread when a deadline earlier than the one it sleeps
/// towards appears.
#[derive(Default)]
pub(super) struct TimerState {
    /// The deadline the timer sleeps towards (ms), if any.
    pub(super) next: Option<u64>,
    pub(super) stop: bool,
}

/// The engine's clock: milliseconds since the connection started. The
/// system's, except in the driver's tests, which move it by hand.
pub(super) struct Clock {
    /// Time zero.
    epoch: Instant,
    #[cfg(test)]
    manual: Option<Arc<std::sync::atomic::AtomicU64>>,
}

impl Clock {
    /// The system clock, from now.
    pub(super) fn system() -> Clock {
        Clock {
            epoch: Instant::now(),
            #[cfg(test)]
            manual: None,
        }
    }

    /// A clock at `now` ms, which only the test moves.
    #[cfg(test)]
    pub(super) fn manual(now: Arc<std::sync::atomic::AtomicU64>) -> Clock {
        Clock { epoch: Instant::now(), manual: Some(now) }
    }

    /// Milliseconds since time zero.
    fn now(&self) -> u64 {
        #[cfg(test)]
        if let Some(now) = &self.manual {
            return now.load(Ordering::SeqCst);
        }
        ms(self.epoch.elapsed())
    }
}

/// A connection shared by the client, its sessions and the reader thread.
pub(crate) struct Connection {
    /// The protocol engine: every routing decision and every answer it
    /// sends by itself. One lock; never held across user code.
    pub(super) engine: Mutex<HostEngine>,
    /// The engine's clock.
    pub(super) clock: Clock,
    pub(super) timer: Mutex<TimerState>,
    pub(super) timer_wake: Condvar,
    /// The writer of the transport in use: replaced when the connection
    /// is recovered on a new one.
    outbox: Mutex<Arc<Outbox>>,
    pub(super) closed: AtomicBool,
    /// Set while a lost connection is being recovered: the engine's frames
    /// (answers given meanwhile) are held until the sessions are resumed.
    pub(super) recovering: AtomicBool,
    /// Starts the CLI again (or reconnects) when the connection is lost;
    /// `None`: a lost connection ends the client.
    pub(super) restart: Mutex<Option<Arc<dyn super::restart::Restart<Connection>>>>,
    /// Receivers of the recovery's steps.
    pub(super) recovery_sinks: Mutex<Vec<super::restart::RecoverySink>>,
    /// Which transport is in use: 0 the first, then one more for each a
    /// recovery started. A reader of an older one ends without a word.
    pub(super) transport: std::sync::atomic::AtomicU64,
    /// The reader a recovery started, for the client to join.
    pub(super) reader_thread: Mutex<Option<thread::JoinHandle<()>>>,
    /// How each open session is opened again after a recovery.
    pub(super) reopens: Mutex<Vec<(SessionHandle, super::restart::Reopen)>>,
    pub(super) close_cause: Mutex<Option<CloseCause>>,
    /// Woken when the connection ends.
    closed_wakers: Mutex<Vec<Waker>>,
    /// Set before this client ends the connection on purpose, so that the
    /// end is reported as `Stopped` rather than as a fault.
    pub(super) stopping: AtomicBool,
    pub(super) probe: Mutex<Option<CauseProbe>>,
    pub(crate) deadlines: Deadlines,
    /// Wakers of async waits that have a deadline of their own (how long a
    /// caller waits for a turn to end: not a protocol decision), woken by
    /// the timer thread when it passes. One entry per such wait, removed
    /// when due.
    pub(super) wake_at: Mutex<Vec<(Instant, WakerSlot)>>,
    pub(super) lifecycle: Mutex<Vec<LifecycleSink>>,
    /// Delivers sessions' events (a fixed set of threads).
    pub(crate) dispatchers: Arc<Pool>,
    /// Runs the user's handlers (a fixed set of threads).
    pub(crate) workers: Arc<Pool>,
    /// Bytes of events handed to subscribers and not yet taken by all;
    /// the reader pauses while there are too many.
    pub(crate) backlog: Arc<super::Backlog>,
    /// Event batches handed to the event pool and not yet delivered: a
    /// call answered after them returns once they are.
    pub(crate) fence: Arc<super::DeliveryFence>,
    /// A label for logs: "stdio", "tcp 127.0.0.1:4321", ...
    pub(crate) label: String,
    /// Answers client-wide requests (those without a session).
    pub(super) client_wide: ClientWide,
    /// The client-wide jobs that run one at a time in the order the CLI
    /// sent them (`Connection::in_order`).
    pub(super) in_order: Mutex<InOrder>,
}

/// Client-wide jobs waiting to run in order, and whether a task of the
/// handler pool is running them.
#[derive(Default)]
pub(super) struct InOrder {
    pub(super) queue: std::collections::VecDeque<Job>,
    pub(super) running: bool,
}

impl Connection {
    /// Starts the reader pump, the timer and the pools, and returns the connection.
    pub(crate) fn start(
        label: String,
        reader: Box<dyn Read + Send>,
        writer: Box<dyn Write + Send>,
        deadlines: Deadlines,
        probe: Option<CauseProbe>,
        client_wide: ClientWide,
    ) -> Result<(Arc<Connection>, thread::JoinHandle<()>)> {
        Self::start_on(Clock::system(), label, reader, writer, deadlines, probe, client_wide)
    }

    /// [`start`](Self::start) on the clock `clock`.
    pub(super) fn start_on(
        clock: Clock,
        label: String,
        reader: Box<dyn Read + Send>,
        writer: Box<dyn Write + Send>,
        deadlines: Deadlines,
        probe: Option<CauseProbe>,
        client_wide: ClientWide,
    ) -> Result<(Arc<Connection>, thread::JoinHandle<()>)> {
        let config = EngineConfig::new()
            .handler_timeout(Some(ms(deadlines.handler)))
            .request_timeout(Some(ms(deadlines.request)))
            .park_frames(MAX_PARKED_FRAMES)
            .stall_interval(deadlines.stall.map(ms));
        // Its tables are written in place on the heap (the core's `alloc`
        // feature): no stack of their size is needed, or touched.
        let engine = HostEngine::new(vec![0; MAX_PARKED_BYTES], GrowingBuffer::new(0), config);
        let outbox = Outbox::start(&label, writer)?;
        let conn = Arc::new(Connection {
            engine: Mutex::new(engine),
            clock,
            wake_at: Mutex::default(),
            timer: Mutex::default(),
            timer_wake: Condvar::new(),
            outbox: Mutex::new(outbox),
            closed: AtomicBool::new(false),
            recovering: AtomicBool::new(false),
            restart: Mutex::new(None),
            recovery_sinks: Mutex::default(),
            reopens: Mutex::default(),
            reader_thread: Mutex::default(),
            transport: std::sync::atomic::AtomicU64::new(0),
            close_cause: Mutex::new(None),
            closed_wakers: Mutex::default(),
            stopping: AtomicBool::new(false),
            probe: Mutex::new(probe),
            deadlines,
            lifecycle: Mutex::new(Vec::new()),
            dispatchers: Pool::start(&format!("copilot-events ({label})"), DISPATCHERS).map_err(Error::Io)?,
            workers: Pool::start(&format!("copilot-handlers ({label})"), deadlines.handler_threads)
                .map_err(Error::Io)?,
            backlog: Arc::default(),
            fence: Arc::default(),
            label,
            client_wide,
            in_order: Mutex::default(),
        });
        conn.start_timer()?;
        let pump = Arc::clone(&conn);
        let handle = thread::Builder::new()
            .name(format!("copilot-reader ({})", conn.label))
            .spawn(move || pump.pump(reader, 0))
            .map_err(Error::Io)?;
        Ok((conn, handle))
    }

    /// Milliseconds on the engine's clock.
    pub(super) fn now(&self) -> u64 {
        self.clock.now()
    }

    /// `at` on the engine's clock (rounded up).
    pub(super) fn at(&self, at: Instant) -> u64 {
        let d = at.saturating_duration_since(self.clock.epoch);
        ms(d) + u64::from(!d.subsec_nanos().is_multiple_of(1_000_000))
    }

    /// Runs `f` on the engine under its lock, with the time; then the
    /// frames the engine decided to send are pulled to the transport, and
    /// the timer learns of new deadlines.
    pub(crate) fn with_engine<R>(&self, f: impl FnOnce(&mut HostEngine, u64) -> R) -> R {
        let (r, next) = {
            let mut engine = lock(&self.engine);
            let now = self.now();
            let r = f(&mut engine, now);
            self.send_engine_frames(&mut engine);
            (r, engine.poll_timeout())
        };
        self.kick_timer(next);
        r
    }

    /// Pulls the frames the engine decided on (its transmit store) into the
    /// outbox, which takes them whatever it holds: an answer is never
    /// dropped (its size is bounded by what was read). Called under the
    /// engine's lock (the outbox never takes it), so the wire's order is
    /// the engine's: once the engine shows a wait answered
    /// (`open_obligations`), its answer is queued ahead of any later frame.
    pub(super) fn send_engine_frames(&self, engine: &mut HostEngine) {
        let wire = engine.transmit();
        // While recovering, held until the sessions are resumed.
        if wire.is_empty() || self.recovering.load(Ordering::SeqCst) {
            return;
        }
        if self.outbox().push_always(wire.to_vec()).is_err() {
            log::debug!("{}: the connection is closed; the engine's frames are not sent", self.label);
        }
        engine.transmitted(usize::MAX);
    }

    /// The writer of the transport in use.
    pub(super) fn outbox(&self) -> Arc<Outbox> {
        Arc::clone(&lock(&self.outbox))
    }

    /// Writes through `outbox` from now on (a recovered connection's).
    pub(super) fn set_outbox(&self, outbox: Arc<Outbox>) {
        let old = std::mem::replace(&mut *lock(&self.outbox), outbox);
        old.close();
    }

    /// Whether the connection has ended.
    pub(crate) fn is_closed(&self) -> bool {
        self.closed.load(Ordering::SeqCst)
    }

    /// Why the connection ended, once it has.
    pub(crate) fn close_cause(&self) -> Option<CloseCause> {
        lock(&self.close_cause).clone()
    }

    /// Ready with the cause once the connection has ended; else `cx`'s
    /// waker is woken at the end.
    pub(crate) fn poll_closed(&self, cx: &mut Context<'_>) -> Poll<CloseCause> {
        let mut wakers = lock(&self.closed_wakers);
        // Read under the wakers' lock: the end sets the cause before it
        // takes the wakers, so a waker left here is woken.
        if let Some(cause) = self.close_cause() {
            return Poll::Ready(cause);
        }
        if !wakers.iter().any(|w| w.will_wake(cx.waker())) {
            wakers.push(cx.waker().clone());
        }
        Poll::Pending
    }

    /// Wakes every wait for the end (the cause is set).
    pub(super) fn wake_closed(&self) {
        let wakers = std::mem::take(&mut *lock(&self.closed_wakers));
        wakers.into_iter().for_each(Waker::wake);
    }

    /// Waits until the connection has ended, or `deadline`.
    pub(crate) fn wait_closed(&self, deadline: Option<Instant>) -> Option<CloseCause> {
        block_on_until(poll_fn(|cx| self.poll_closed(cx)), deadline)
    }

    /// From now on, the end of the connection is this client's doing.
    pub(crate) fn mark_stopping(&self) {
        self.stopping.store(true, Ordering::SeqCst);
        self.backlog.nudge();
    }

    pub(super) fn disconnected(&self) -> Error {
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

    /// Reserves a session before its create or resume is sent: `id` (a
    /// resume may take over a session open on this client: its old handle's
    /// streams end), or none when the server names it.
    pub(crate) fn reserve(&self, id: Option<&str>, resume: bool, target: Target) -> Result<SessionHandle> {
        let (handle, old) = self
            .with_engine(|e, _| match (id, resume) {
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
        let _ = self.with_engine(|e, _| e.close(handle));
    }

    /// Releases a session's slot: its open waits are refused, and frames
    /// parked for no session any more are dealt with.
    pub(crate) fn release(&self, handle: SessionHandle) {
        self.with_engine(|e, now| {
            e.release(handle);
            drain_parked(e, now);
        });
        lock(&self.reopens).retain(|(h, _)| *h != handle);
    }

    /// Every session in the table: handle, whether active, and target.
    pub(crate) fn sessions(&self) -> Vec<(SessionHandle, bool, Target)> {
        let engine = lock(&self.engine);
        engine.router().sessions().iter().map(|(h, s, t)| (h, s == SessionState::Active, t)).collect()
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
}

/// Routes what a session change made routable, in order.
pub(super) fn drain_parked(engine: &mut HostEngine, now: u64) {
    drain_parked_with(engine, now, |o| log::debug!("a parked frame: {:?}", o.refused));
}

pub(super) fn drain_parked_with(
    engine: &mut HostEngine,
    now: u64,
    mut deliver: impl FnMut(Output<'_, Target, Waiter>),
) {
    while let Some(out) = engine.poll_parked(now) {
        deliver(out);
    }
}

impl Drop for Connection {
    fn drop(&mut self) {
        // Ends the writer thread once what is queued is written, and the pools.
        self.outbox().close();
        self.dispatchers.close();
        self.workers.close();
    }
}

fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

pub(super) fn lock<T: ?Sized>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}
