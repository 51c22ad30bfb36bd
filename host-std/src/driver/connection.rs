//! One connection to a Copilot CLI: the threaded shell around the
//! driver's state (`state/`), which makes every decision under the one
//! lock; the threads only move bytes, run handlers and act on what the
//! state returns once the lock is released. The reader (`reader.rs`), the
//! request path (`calls.rs`), the timer (`timer.rs`) and the writer
//! (`outbox.rs`) are its other parts.
//!
//! It knows no user type: it delivers through [`SessionSink`], hands each
//! wait of the agent on as a [`Job`], and a client-wide request's wait to
//! the [`ClientWide`] the layer above gives it.

use std::future::poll_fn;
use std::io::{Read, Write};
#[cfg(test)]
use std::sync::atomic::Ordering;
use std::sync::{Arc, Condvar, Mutex};
use std::task::{Context, Poll};
use std::thread;
use std::time::{Duration, Instant};

use copilot_core::{EngineConfig, EngineStats, HandlerKind, ObligationId, ReserveErrorKind, SessionHandle, Stats};

use super::outbox::Outbox;
use super::state::DriverState;
pub(crate) use super::state::MAX_PENDING;
pub(crate) use super::waiter::{Marked, Reply, ReplyTx, WakerSlot};
use crate::error::{Error, Result};
use crate::pool::Pool;
use crate::transport::{CauseProbe, CloseCause};
use crate::wait::block_on_until;

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
    /// How long the reader stays paused over a full backlog with nothing
    /// taken before it reads on.
    pub(crate) backlog_stall: Duration,
}

/// What the engine routes a session's frames to: the reader delivers
/// through this, and knows nothing else of sessions.
pub(crate) trait SessionSink: Send + Sync {
    /// The session's id, once known.
    fn id(&self) -> Option<String>;
    /// The server named the session (a create whose id it assigns).
    fn named(&self, id: &str);
    /// Queues an event's JSON (of type `event_type`, as the core read it;
    /// `None` for a type written with escapes); never blocks. Delivery
    /// starts at the next [`flush`](Self::flush).
    fn push_event(&self, event: &[u8], event_type: Option<&str>);
    /// Delivers what [`push_event`](Self::push_event) queued, or has it
    /// delivered; never blocks. The reader calls it once per read, after
    /// the read's events were pushed.
    fn flush(&self);
    /// Runs the user's handler for `job` (on the handler pool), which then
    /// answers through `job.reply`; never blocks.
    fn obligation(&self, job: Job);
    /// Ends delivery: streams end after the events already queued.
    fn close(&self, reason: &str);
    /// Holds the events pushed from now on (a recovery is resuming the
    /// session) until [`release_held`](Self::release_held).
    fn hold(&self) {}
    /// Delivers `gap` (events the log had and the stream lost, in order)
    /// and the events held, merged in the core's order
    /// ([`copilot_core::gap_delivery_order`]: the gap's events before the
    /// first held one, then the held ones as they came, each event once);
    /// delivery goes on.
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

/// Who waits for a response, as this driver's engine keeps it.
pub(crate) type Waiter = super::waiter::Waiter<Target>;

/// The driver's state as this connection keeps it.
pub(crate) type State = DriverState<Target>;

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
/// the handler pool, never under the connection's lock.
pub(crate) type ClientWide = Arc<dyn Fn(Job) + Send + Sync>;

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

/// What the connection's one lock guards: the driver's state, and the
/// writer its frames are queued to before the lock is released (the
/// outbox never takes this lock, and never blocks), so the wire's order
/// is the state's: once the state shows a wait answered, its answer is
/// queued ahead of any later frame.
pub(super) struct Locked {
    pub(super) state: State,
    /// The writer of the transport in use: replaced when the connection
    /// is recovered on a new one.
    pub(super) outbox: Arc<Outbox>,
    /// When the timer thread wakes next (ms), while it sleeps: a deadline
    /// before it wakes the timer.
    pub(super) timer_sleeps_until: Option<u64>,
}

/// A connection shared by the client, its sessions and the reader thread.
pub(crate) struct Connection {
    /// The driver's state: every decision of the connection, the engine's
    /// included. Held only while one of its methods runs; never across
    /// user code, a wait or blocking I/O.
    pub(super) locked: Mutex<Locked>,
    /// The timer thread sleeps on it (with `locked`).
    pub(super) timer_wake: Condvar,
    /// The state's clock.
    pub(super) clock: Clock,
    /// Starts the CLI again (or reconnects) when the connection is lost;
    /// `None`: a lost connection ends the client.
    pub(super) restart: Mutex<Option<Arc<dyn super::restart::Restart<Connection>>>>,
    /// Receivers of the recovery's steps.
    pub(super) recovery_sinks: Mutex<Vec<super::restart::RecoverySink>>,
    /// The reader a recovery started, for the client to join.
    pub(super) reader_thread: Mutex<Option<thread::JoinHandle<()>>>,
    /// Asked why the transport in use ended.
    pub(super) probe: Mutex<Option<CauseProbe>>,
    pub(crate) deadlines: Deadlines,
    /// Receivers of `session.lifecycle` params (the layer above's code:
    /// called by the reader with the state's lock released).
    pub(super) lifecycle: Mutex<Vec<LifecycleSink>>,
    /// Delivers sessions' events (a fixed set of threads).
    pub(crate) dispatchers: Arc<Pool>,
    /// Runs the user's handlers (a fixed set of threads).
    pub(crate) workers: Arc<Pool>,
    /// Bytes of events handed to subscribers and not yet taken by all;
    /// the reader pauses while there are too many.
    pub(crate) backlog: Arc<super::Backlog>,
    /// A label for logs: "stdio", "tcp 127.0.0.1:4321", ...
    pub(crate) label: String,
    /// Answers client-wide requests (those without a session).
    pub(super) client_wide: ClientWide,
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
            .stall_interval(deadlines.stall.map(ms));
        let outbox = Outbox::start(&label, writer)?;
        let conn = Arc::new(Connection {
            locked: Mutex::new(Locked { state: State::new(&label, config), outbox, timer_sleeps_until: None }),
            timer_wake: Condvar::new(),
            clock,
            restart: Mutex::new(None),
            recovery_sinks: Mutex::default(),
            reader_thread: Mutex::default(),
            probe: Mutex::new(probe),
            deadlines,
            lifecycle: Mutex::new(Vec::new()),
            dispatchers: Pool::start(&format!("copilot-events ({label})"), DISPATCHERS).map_err(Error::Io)?,
            workers: Pool::start(&format!("copilot-handlers ({label})"), deadlines.handler_threads)
                .map_err(Error::Io)?,
            backlog: Arc::new(super::Backlog::with_stall(deadlines.backlog_stall)),
            label,
            client_wide,
        });
        conn.start_timer()?;
        let pump = Arc::clone(&conn);
        let handle = thread::Builder::new()
            .name(format!("copilot-reader ({})", conn.label))
            .spawn(move || pump.pump(reader, 0))
            .map_err(Error::Io)?;
        Ok((conn, handle))
    }

    /// Milliseconds on the state's clock.
    pub(super) fn now(&self) -> u64 {
        self.clock.now()
    }

    /// `at` on the state's clock (rounded up).
    pub(super) fn at(&self, at: Instant) -> u64 {
        let d = at.saturating_duration_since(self.clock.epoch);
        ms(d) + u64::from(!d.subsec_nanos().is_multiple_of(1_000_000))
    }

    /// Runs `f` on the state under the lock, with the time; then, before
    /// the lock is released, the frames it decided on are queued to the
    /// writer; once it is released, the timer is woken if it now has work
    /// sooner, and the targets the state let go of are dropped. Whatever
    /// `f` returns is acted on by the caller, with the lock released (and
    /// must not be dropped under it if it holds a target).
    pub(crate) fn with_state<R>(&self, f: impl FnOnce(&mut State, u64) -> R) -> R {
        let mut locked = lock(&self.locked);
        let now = self.now();
        let r = f(&mut locked.state, now);
        let wake_timer = self.settle(&mut locked);
        let released = locked.state.poll_released();
        drop(locked);
        if wake_timer {
            self.timer_wake.notify_one();
        }
        drop(released);
        r
    }

    /// Reads the state under the lock (no input: nothing to settle).
    pub(crate) fn read_state<R>(&self, f: impl FnOnce(&State) -> R) -> R {
        f(&lock(&self.locked).state)
    }

    /// Queues the frames the state decided on to the writer, which takes
    /// them whatever it holds: an answer is never dropped (its size is
    /// bounded by what was read). Whether the timer must wake sooner.
    pub(super) fn settle(&self, locked: &mut Locked) -> bool {
        if let Some(wire) = locked.state.poll_transmit() {
            if locked.outbox.push_always(wire).is_err() {
                log::debug!("{}: the connection is closed; the engine's frames are not sent", self.label);
            }
        }
        let next = locked.state.poll_timeout();
        next.is_some_and(|n| locked.timer_sleeps_until.is_some_and(|t| n < t))
    }

    /// The writer of the transport in use.
    pub(super) fn outbox(&self) -> Arc<Outbox> {
        Arc::clone(&lock(&self.locked).outbox)
    }

    /// Whether the connection has ended.
    pub(crate) fn is_closed(&self) -> bool {
        self.read_state(State::is_closed)
    }

    /// Why the connection ended, once it has.
    pub(crate) fn close_cause(&self) -> Option<CloseCause> {
        self.read_state(|s| s.close_cause().cloned())
    }

    /// Ready with the cause once the connection has ended; else `cx`'s
    /// waker is woken at the end.
    pub(crate) fn poll_closed(&self, cx: &mut Context<'_>) -> Poll<CloseCause> {
        match lock(&self.locked).state.poll_closed(cx.waker()) {
            Some(cause) => Poll::Ready(cause),
            None => Poll::Pending,
        }
    }

    /// Waits until the connection has ended, or `deadline`.
    pub(crate) fn wait_closed(&self, deadline: Option<Instant>) -> Option<CloseCause> {
        block_on_until(poll_fn(|cx| self.poll_closed(cx)), deadline)
    }

    /// From now on, the end of the connection is this client's doing.
    pub(crate) fn mark_stopping(&self) {
        lock(&self.locked).state.mark_stopping();
        self.backlog.nudge();
    }

    /// Whether this client is ending the connection.
    pub(crate) fn is_stopping(&self) -> bool {
        self.read_state(State::is_stopping)
    }

    pub(super) fn disconnected(&self) -> Error {
        Error::Disconnected(self.close_cause().map_or_else(|| "the connection is closed".into(), |c| c.to_string()))
    }

    /// The router's counters.
    pub(crate) fn stats(&self) -> Stats {
        self.read_state(|s| s.engine().router().stats())
    }

    /// The engine's counters, with the open obligations and their age.
    pub(crate) fn engine_stats(&self) -> EngineStats {
        let now = self.now();
        self.read_state(|s| s.engine().stats(now))
    }

    /// Reserves a session before its create or resume is sent: `id` (a
    /// resume may take over a session open on this client: its old handle's
    /// streams end), or none when the server names it.
    pub(crate) fn reserve(&self, id: Option<&str>, resume: bool, target: Target) -> Result<SessionHandle> {
        let (handle, old) = self.with_state(|s, _| s.reserve(id, resume, target)).map_err(|e| match e.kind {
            ReserveErrorKind::Full => Error::Capacity(format!("cannot open another session: {}", e.kind)),
            kind => Error::Config(format!("session {id:?}: {kind}")),
        })?;
        if let Some(old) = old {
            old.close("the session was resumed by another handle of this client");
        }
        Ok(handle)
    }

    /// Marks a session closing (its destroy is in flight).
    pub(crate) fn close_session(&self, handle: SessionHandle) {
        self.with_state(|s, _| s.close_session(handle));
    }

    /// Releases a session's slot: its open waits are refused, and frames
    /// parked for no session any more are dealt with.
    pub(crate) fn release(&self, handle: SessionHandle) {
        self.with_state(|s, now| s.release(handle, now));
    }

    /// Every session in the table: handle, whether active, and target.
    pub(crate) fn sessions(&self) -> Vec<(SessionHandle, bool, Target)> {
        self.read_state(State::sessions)
    }

    /// Adds a receiver of every `session.lifecycle` notification from now
    /// on; it is dropped when the connection ends (at once if it has).
    pub(crate) fn subscribe_lifecycle_with(&self, sink: LifecycleSink) {
        let mut subs = lock(&self.lifecycle);
        // `shut_down` ends the state before it clears the list: either it
        // clears this sink, or this check sees the end.
        if !self.is_closed() {
            subs.push(sink);
        }
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
