//! The driver's state itself: its fields, and its inputs but a read's
//! frames (`read.rs`).

use std::task::Waker;

use copilot_core::{
    AnswerError, Cause, Engine, EngineConfig, GrowingBuffer, ObligationId, Recovery, RecoveryReport, RecoveryStep,
    RequestId, ReserveError, SessionHandle, SessionState, Shaped,
};

use crate::driver::restart::Reopen;
use crate::driver::waiter::{Waiter, WakerSlot};
use crate::transport::CloseCause;

use super::fence::Fence;
use super::wait::{InOrder, Wait};

// The engine's capacities are the core's limits (`copilot_core::limits`),
// shared with every host. The parking storage of `MAX_PARKED_BYTES` is
// reserved, but touched only as frames are parked.
pub(crate) use copilot_core::limits::{MAX_OBLIGATIONS, MAX_PENDING_REQUESTS as MAX_PENDING, MAX_SESSIONS};
use copilot_core::limits::{MAX_PARKED_BYTES, MAX_PARKED_FRAMES};

/// The engine: parking in a reserved `Vec`, and a transmit store that
/// grows, so it always has room for what the engine decides to send.
pub(crate) type StateEngine<T> =
    Engine<T, Waiter<T>, Vec<u8>, GrowingBuffer, MAX_SESSIONS, MAX_PENDING, MAX_OBLIGATIONS>;

/// A handler's outcome for one wait of the agent, passed on to the engine,
/// which decides what is sent.
pub enum Outcome<'a> {
    /// The handler's answer, JSON text the engine reads (`null` leaves the
    /// answer's key out).
    Answer(&'a [u8]),
    /// An answer the core shaped, with siblings (an object's members)
    /// beside it: sent as it is.
    Shaped(&'a Shaped, Option<&'a Shaped>),
    /// The handler left the wait to another client of the session.
    Decline,
    /// The handler failed: the machine code it named (empty: the core's)
    /// and its text.
    Fail { code: &'a str, detail: &'a str },
    /// The engine's refusal, for this cause.
    Refuse(Cause),
}

/// Why a call was not started.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallRefused {
    /// The connection has ended.
    Closed,
    /// The table of requests in flight is full.
    Full,
}

/// What the time passing decided: callers to fail, async waits to wake.
#[must_use = "the expired calls' callers wait until they are told"]
pub struct Expired<T> {
    /// Calls past their deadline (an open's slot was released).
    pub failed: Vec<Waiter<T>>,
    /// Async waits whose own deadline passed.
    pub woken: Vec<WakerSlot>,
}

/// What ending the connection decided.
#[must_use = "the callers, sessions and wakers must be told of the end"]
pub struct Ended<T> {
    /// Every call in flight: fail it with the cause.
    pub failed: Vec<Waiter<T>>,
    /// Every session of the table: end its delivery.
    pub sessions: Vec<T>,
    /// The waits for the end.
    pub woken: Vec<Waker>,
    /// Waits of the agent left open (nothing can answer them any more).
    pub forgotten: usize,
}

/// What losing the transport decided (a recovery follows).
#[must_use = "the calls in flight lost their answers: their callers must be told"]
pub struct Lost<T> {
    /// Every call in flight (an open's slot was released).
    pub failed: Vec<Waiter<T>>,
    /// Requests of the CLI whose waits died with the connection.
    pub forgotten: usize,
}

/// One connection's state (see the module's documentation).
pub struct DriverState<T> {
    pub(super) engine: StateEngine<T>,
    /// The connection's name in logs.
    pub(super) label: String,
    /// Set once the connection has ended, with its cause.
    cause: Option<CloseCause>,
    /// This client is ending the connection: its end is `Stopped`.
    stopping: bool,
    /// A lost connection is being recovered: the engine's frames (answers
    /// given meanwhile) are held until the sessions are resumed.
    recovering: bool,
    /// The recovery's sequence (the core's), while one runs.
    recovery: Option<Recovery>,
    /// Which transport is in use: 0 the first, then one more for each a
    /// recovery started. A reader of an older one ends without a word.
    transport: u64,
    /// Woken when the connection ends.
    closed_wakers: Vec<Waker>,
    /// Async waits with a deadline of their own (how long a caller waits
    /// for a turn to end: not a protocol decision), woken when it passes.
    wake_at: Vec<(u64, WakerSlot)>,
    /// How each open session is opened again after a recovery.
    reopens: Vec<(SessionHandle, Reopen)>,
    /// Client-wide waits that run one at a time, in order.
    pub(super) in_order: InOrder,
    /// Event batches on their way to callbacks and waiters, and the calls
    /// waiting for those read before their answer.
    fence: Fence,
    /// Targets the state let go of, for the shell to drop (see
    /// [`poll_released`](Self::poll_released)).
    pub(super) released: Vec<T>,
}

impl<T: Clone> DriverState<T> {
    /// A connection's state, named `label` in logs; its engine built from `config`.
    pub fn new(label: &str, config: EngineConfig) -> Self {
        let config = config.park_frames(MAX_PARKED_FRAMES);
        // Its tables are written in place on the heap (the core's `alloc`
        // feature): no stack of their size is needed, or touched.
        DriverState {
            engine: StateEngine::new(vec![0; MAX_PARKED_BYTES], GrowingBuffer::new(0), config),
            label: label.to_owned(),
            cause: None,
            stopping: false,
            recovering: false,
            recovery: None,
            transport: 0,
            closed_wakers: Vec::new(),
            wake_at: Vec::new(),
            reopens: Vec::new(),
            in_order: InOrder::default(),
            fence: Fence::default(),
            released: Vec::new(),
        }
    }

    /// The engine, to read (its counters, its tables).
    pub fn engine(&self) -> &StateEngine<T> {
        &self.engine
    }

    // The end of the connection, and who ends it.

    /// Whether the connection has ended.
    pub fn is_closed(&self) -> bool {
        self.cause.is_some()
    }

    /// Why the connection ended, once it has.
    pub(crate) fn close_cause(&self) -> Option<&CloseCause> {
        self.cause.as_ref()
    }

    /// The cause once the connection has ended; else `waker` is woken at
    /// the end (kept once however often it asks).
    pub(crate) fn poll_closed(&mut self, waker: &Waker) -> Option<CloseCause> {
        if self.cause.is_some() {
            return self.cause.clone();
        }
        if !self.closed_wakers.iter().any(|w| w.will_wake(waker)) {
            self.closed_wakers.push(waker.clone());
        }
        None
    }

    /// From now on, the end of the connection is this client's doing.
    pub(crate) fn mark_stopping(&mut self) {
        self.stopping = true;
    }

    /// Whether this client is ending the connection.
    pub(crate) fn is_stopping(&self) -> bool {
        self.stopping
    }

    /// Whether a lost connection is being recovered.
    pub(crate) fn is_recovering(&self) -> bool {
        self.recovering
    }

    /// Whether the reader must read on over a full backlog: a request
    /// waits for its answer, or the connection ends or is recovered.
    pub(crate) fn reads_on(&self) -> bool {
        self.stopping || self.is_closed() || self.recovering || !self.engine.router().pending().is_empty()
    }

    /// Which transport is in use.
    pub(crate) fn transport(&self) -> u64 {
        self.transport
    }

    /// A recovery starts another transport: its number.
    pub(crate) fn new_transport(&mut self) -> u64 {
        self.transport += 1;
        self.transport
    }

    /// Ends the connection with `cause`: every call in flight and every
    /// session is handed back to be told, and the waits of the agent
    /// still open are forgotten (nothing can reach the CLI any more).
    pub fn shut_down(&mut self, cause: CloseCause) -> Ended<T> {
        self.cause = Some(cause);
        let mut failed = Vec::new();
        let forgotten = self.engine.disconnect(|_, w| failed.push(w));
        let sessions = self.engine.router().sessions().drain().map(|(_, t)| t).collect();
        self.reopens.clear();
        Ended { failed, sessions, woken: std::mem::take(&mut self.closed_wakers), forgotten }
    }

    /// The transport in use ended and a recovery follows: the calls in
    /// flight are handed back (their answers are gone with it), and the
    /// engine keeps what the next connection can settle. The engine's
    /// frames decided from now on are held until
    /// [`recovered`](Self::recovered).
    pub(crate) fn connection_lost(&mut self, now: u64) -> Lost<T> {
        self.recovering = true;
        let mut failed = Vec::new();
        let forgotten = self.engine.connection_lost(|_, w| failed.push(w));
        for w in &failed {
            if let Waiter::Open { handle, .. } = w {
                self.release(*handle, now);
            }
        }
        Lost { failed, forgotten }
    }

    /// A recovery of the connection lost at `now` starts (after
    /// [`connection_lost`](Self::connection_lost)); its steps come from
    /// [`step_recovery`](Self::step_recovery).
    pub(crate) fn start_recovery(&mut self, now: u64) {
        self.recovery = Some(Recovery::new(now));
    }

    /// Takes how the recovery's last step went and gives the next one
    /// (the core's [`Recovery`] decides). Once the sessions are resumed
    /// ([`RecoveryStep::Recovered`]) the frames held go out at the next
    /// [`poll_transmit`](Self::poll_transmit); once over, the recovery is
    /// forgotten. With none running, it has given up.
    pub(crate) fn step_recovery(&mut self, now: u64, report: RecoveryReport<Vec<Option<u64>>>) -> RecoveryStep {
        let Some(recovery) = &mut self.recovery else { return RecoveryStep::GaveUp { attempts: 0 } };
        let step = recovery.step(&mut self.engine, now, report);
        if recovery.is_over() {
            self.recovery = None;
        }
        if matches!(step, RecoveryStep::Recovered { .. }) {
            self.recovering = false;
        }
        step
    }

    // Sessions.

    /// Reserves a session before its create or resume is sent: `id` (a
    /// resume may take over a session open here: its old target is
    /// returned, to end its delivery), or none when the server names it.
    pub fn reserve(
        &mut self,
        id: Option<&str>,
        resume: bool,
        target: T,
    ) -> Result<(SessionHandle, Option<T>), ReserveError<T>> {
        match (id, resume) {
            (None, _) => self.engine.reserve_unassigned(target).map(|h| (h, None)),
            (Some(id), false) => self.engine.reserve(id, target).map(|h| (h, None)),
            (Some(id), true) => self.engine.reserve_resume(id, target).map(|(h, old)| (h, old.map(|(_, t)| t))),
        }
    }

    /// Marks a session closing (its destroy is in flight).
    pub fn close_session(&mut self, handle: SessionHandle) {
        let _ = self.engine.close(handle);
    }

    /// Releases a session's slot: its open waits are refused, frames
    /// parked for no session any more are dealt with, and it is not
    /// opened again by a recovery.
    pub fn release(&mut self, handle: SessionHandle, now: u64) {
        self.released.extend(self.engine.release(handle));
        self.drain_parked(now);
        self.reopens.retain(|(h, _)| *h != handle);
    }

    /// Every session in the table: handle, whether active, and target.
    pub fn sessions(&self) -> Vec<(SessionHandle, bool, T)> {
        self.engine.router().sessions().iter().map(|(h, s, t)| (h, s == SessionState::Active, t)).collect()
    }

    /// Notes how session `handle` is opened again after a recovery.
    pub(crate) fn remember_reopen(&mut self, handle: SessionHandle, reopen: Reopen) {
        self.reopens.retain(|(h, _)| *h != handle);
        self.reopens.push((handle, reopen));
    }

    /// How session `handle` is opened again, if it is known.
    pub(crate) fn reopen_of(&self, handle: SessionHandle) -> Option<Reopen> {
        self.reopens.iter().find(|(h, _)| *h == handle).map(|(_, r)| r.clone())
    }

    /// Routes what a session change made routable: frames parked for no
    /// session any more are refused (a wait) or counted.
    fn drain_parked(&mut self, now: u64) {
        while let Some(out) = self.engine.poll_parked(now) {
            log::debug!("{}: a parked frame after a session change: {:?}", self.label, out.refused);
        }
    }

    // Calls.

    /// Starts a call: `waiter` is inserted with its `deadline` (ms), and
    /// the request's id returned for its frame. A call refused gives an
    /// open's slot back.
    pub fn start_call(&mut self, waiter: Waiter<T>, deadline: u64, now: u64) -> Result<RequestId, CallRefused> {
        let refused = if self.is_closed() {
            (CallRefused::Closed, waiter)
        } else {
            match self.engine.router().pending().insert_with_deadline(waiter, Some(deadline)) {
                Ok(id) => return Ok(id),
                Err(full) => (CallRefused::Full, full.0),
            }
        };
        self.give_up(refused.1, now);
        Err(refused.0)
    }

    /// Drops a call's waiter (its frame could not be sent, or its caller
    /// gave up: a late answer is then counted as unmatched). An open also
    /// gives its reserved slot back.
    pub fn forget(&mut self, id: RequestId, now: u64) {
        if let Some(w) = self.engine.router().pending().take(id.0) {
            self.give_up(w, now);
        }
    }

    /// A waiter whose answer will not come: an open gives its slot back.
    fn give_up(&mut self, waiter: Waiter<T>, now: u64) {
        if let Waiter::Open { handle, target, .. } = waiter {
            self.release(handle, now);
            self.released.push(target);
        }
    }

    // Handlers' outcomes.

    /// Passes on a handler's outcome for obligation `id`; the engine
    /// decides what is sent (the answer, or its refusal instead).
    pub fn settle(&mut self, id: ObligationId, outcome: Outcome<'_>) -> Result<(), AnswerError> {
        match outcome {
            Outcome::Answer(payload) => self.engine.answer(id, payload),
            Outcome::Shaped(payload, siblings) => self.engine.answer_shaped(id, payload, siblings),
            Outcome::Decline => self.engine.decline(id),
            Outcome::Fail { code, detail } => self.engine.fail_coded(id, code, detail),
            Outcome::Refuse(cause) => self.engine.refuse(id, cause),
        }
    }

    /// The next wait of the ordered lane of client-wide waits, for the
    /// task that runs them one at a time (see
    /// [`Read::start_in_order`](super::Read::start_in_order)); `None` ends
    /// the task.
    pub fn next_in_order(&mut self) -> Option<Wait> {
        self.in_order.next()
    }

    /// Whether the engine still waits for obligation `id`'s answer.
    pub fn is_open(&self, id: ObligationId) -> bool {
        self.engine.is_open(id)
    }

    // Time.

    /// Wakes `slot`'s waker once `at` (ms) has passed.
    pub(crate) fn wake_at(&mut self, at: u64, slot: WakerSlot) {
        self.wake_at.push((at, slot));
    }

    /// When [`handle_timeout`](Self::handle_timeout) next has work (ms):
    /// the engine's next deadline or an async wait's.
    pub fn poll_timeout(&self) -> Option<u64> {
        let waits = self.wake_at.iter().map(|(at, _)| *at).min();
        match (self.engine.poll_timeout(), waits) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Acts on the deadlines at or before `now`: the engine refuses the
    /// waits of the agent whose handler ran out of time, the calls past
    /// their deadline are handed back (an open's slot released), and the
    /// async waits due are handed back to wake.
    pub fn handle_timeout(&mut self, now: u64) -> Expired<T> {
        let mut failed = Vec::new();
        self.engine.handle_timeout(now, |_, w| failed.push(w));
        let mut opens = false;
        for w in &failed {
            if let Waiter::Open { handle, .. } = w {
                self.released.extend(self.engine.release(*handle));
                self.reopens.retain(|(h, _)| h != handle);
                opens = true;
            }
        }
        if opens {
            self.drain_parked(now);
        }
        let mut woken = Vec::new();
        self.wake_at.retain(|(at, slot)| {
            let due = *at <= now;
            if due {
                woken.push(slot.clone());
            }
            !due
        });
        Expired { failed, woken }
    }

    // The delivery fence: wire order is API order.

    /// A number for an event batch handed to the event pool now, to give
    /// back ([`fence_back`](Self::fence_back)) once it is delivered.
    pub fn fence_ticket(&mut self) -> u64 {
        self.fence.ticket()
    }

    /// The mark of the answers of a read whose sessions were just
    /// flushed: their calls return once every batch up to it is back.
    pub fn fence_mark(&self) -> u64 {
        self.fence.mark()
    }

    /// Batch `number` was delivered (or dropped): the calls it lets
    /// return, to wake.
    pub fn fence_back(&mut self, number: u64) -> Vec<Waker> {
        self.fence.back(number)
    }

    /// Whether every batch up to `mark` was delivered; else `waker` is
    /// woken when they are.
    pub fn poll_fence(&mut self, mark: u64, waker: &Waker) -> bool {
        self.fence.poll_passed(mark, waker)
    }

    /// Calls waiting for the fence now.
    #[cfg(test)]
    pub(crate) fn fence_waiting(&self) -> usize {
        self.fence.waiting()
    }

    // Writing, and what the state let go of.

    /// The targets the state let go of since the last call (a session
    /// released, an open that failed): drop them with the lock released,
    /// since dropping a session's last reference ends its delivery, and
    /// whatever the layer above keeps in it. The state drops none itself.
    #[must_use = "drop them outside the lock"]
    pub fn poll_released(&mut self) -> Vec<T> {
        std::mem::take(&mut self.released)
    }

    /// The frames the engine decided on since the last call, in its order,
    /// to write; none while a recovery holds them. Call after every method
    /// that feeds the state.
    #[must_use = "the bytes must be written to the transport"]
    pub fn poll_transmit(&mut self) -> Option<Vec<u8>> {
        let wire = self.engine.transmit();
        if wire.is_empty() || self.recovering {
            return None;
        }
        let bytes = wire.to_vec();
        self.engine.transmitted(usize::MAX);
        Some(bytes)
    }
}
