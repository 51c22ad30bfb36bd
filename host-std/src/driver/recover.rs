//! Recovery of a lost connection: the CLI this client started exited, or
//! its connection dropped, while the client did not end it. The reader
//! that saw the end supervises, doing the steps the state's recovery (the
//! core's [`Recovery`](copilot_core::Recovery)) decides (when to try again, which session to resume, how far back to
//! read its log, what to deliver, when to give up): the engine forgets
//! what the next connection cannot settle, the layer above starts the CLI
//! again (or reconnects) and runs the handshake, the sessions are resumed
//! and the events of the gap delivered, and the frames the engine decided
//! on meanwhile (answers given during the gap, the lists of pending
//! waits) go out once the sessions are resumed. Each step is told to the
//! recovery's receivers. The supervisor blocks (on its calls, on the
//! pause between attempts); the state only sequences.

use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use copilot_core::{
    event_id_of, Gap, RecoveryReport, RecoveryStep, SessionHandle, RECOVERY_GAVE_UP, RECOVERY_RESUME_FLAG,
    RESUME_REFUSED,
};
use serde_json::value::RawValue;

use super::connection::{lock, Connection, Target};
use super::outbox::Outbox;
use super::restart::{NewTransport, RecoveryEvent, RecoverySink, Reopen, Restart};
use crate::error::{Error, Result};
use crate::transport::CloseCause;
use crate::wait::block_on;

/// How a step went, for the core.
type Report = RecoveryReport<Vec<Option<u64>>>;

impl Connection {
    /// From now on, a lost connection is recovered through `restart`.
    pub(crate) fn set_restart(&self, restart: Arc<dyn Restart<Connection>>) {
        *lock(&self.restart) = Some(restart);
    }

    /// Adds a receiver of every step of the recoveries to come.
    pub(crate) fn on_recovery(&self, sink: RecoverySink) {
        lock(&self.recovery_sinks).push(sink);
    }

    /// Notes how session `handle` is opened again after a recovery.
    pub(crate) fn remember_reopen(&self, handle: SessionHandle, reopen: Reopen) {
        self.with_state(|s, _| s.remember_reopen(handle, reopen));
    }

    /// The reader a recovery started, if any, to join.
    pub(crate) fn take_reader_thread(&self) -> Option<thread::JoinHandle<()>> {
        lock(&self.reader_thread).take()
    }

    fn tell(&self, event: RecoveryEvent) {
        match &event {
            RecoveryEvent::GaveUp { .. } | RecoveryEvent::AttemptFailed { .. } => {
                log::warn!("{}: recovery: {event:?}", self.label)
            }
            _ => log::info!("{}: recovery: {event:?}", self.label),
        }
        for sink in lock(&self.recovery_sinks).iter() {
            sink(&event);
        }
    }

    /// The transport in use ended: the calls in flight fail with `cause`
    /// (their answers are gone with it), and the engine keeps what the
    /// next connection can settle.
    pub(super) fn lose_transport(&self, cause: &CloseCause) {
        let reason = format!("{cause} (the connection is being recovered)");
        self.outbox().fail(&reason);
        // An answer given from now on is held for the next connection, one
        // given before went to this one and is forgotten with it, unless
        // acknowledged. An open's slot is given back.
        let lost = self.with_state(|s, now| s.connection_lost(now));
        if lost.forgotten > 0 {
            log::warn!("{}: {} requests of the CLI died with the connection", self.label, lost.forgotten);
        }
        for waiter in lost.failed {
            waiter.fail(Error::Disconnected(reason.clone()));
        }
    }

    /// Recovers the lost connection (on the reader thread that saw it
    /// end), doing each step the state gives in turn: `Ok` once
    /// the sessions are resumed on a new transport, whose reader then
    /// runs; the cause to end with when every attempt failed or the client
    /// is stopping. A session's live events held by an attempt that failed
    /// stay held for the next attempt's delivery (merged with its gap, each
    /// once, in wire order); when the recovery ends without one, they are
    /// delivered before the end.
    pub(super) fn recover(
        self: &Arc<Self>,
        cause: CloseCause,
        restart: Arc<dyn Restart<Connection>>,
    ) -> Result<(), CloseCause> {
        let outcome = self.recover_steps(cause, restart);
        if outcome.is_err() {
            for (_, _, target) in self.sessions() {
                target.release_held(Vec::new());
            }
        }
        outcome
    }

    fn recover_steps(
        self: &Arc<Self>,
        cause: CloseCause,
        restart: Arc<dyn Restart<Connection>>,
    ) -> Result<(), CloseCause> {
        self.lose_transport(&cause);
        self.with_state(|s, now| s.start_recovery(now));
        self.tell(RecoveryEvent::ConnectionLost { cause: cause.clone() });
        let mut run = Run { last: cause.to_string(), ..Run::default() };
        let mut report = RecoveryReport::Next;
        loop {
            let step = self.with_state(|s, now| s.step_recovery(now, report));
            report = match step {
                RecoveryStep::Wait { until } => {
                    if !self.pause_until(until) {
                        return Err(CloseCause::Stopped);
                    }
                    RecoveryReport::Next
                }
                RecoveryStep::Connect { attempt, after_ms } => {
                    run.attempt = attempt;
                    self.tell(RecoveryEvent::Restarting { attempt, after: Duration::from_millis(after_ms) });
                    match self.attempt(&*restart) {
                        Ok(()) => RecoveryReport::Connected,
                        Err(e) => self.attempt_failed(&mut run, &e)?,
                    }
                }
                RecoveryStep::Resume { handle } => match self.resume_session(handle, &mut run) {
                    Ok(report) => report,
                    Err(e) => {
                        let e = Error::Disconnected(format!("resuming session {}: {e}", run.session_id));
                        self.attempt_failed(&mut run, &e)?
                    }
                },
                RecoveryStep::ReadLog { page, .. } => match self.read_log(&mut run, page) {
                    Ok(more) => RecoveryReport::LogRead { ids: run.log_ids(), more },
                    Err(e) => {
                        let e = Error::Disconnected(format!("reading the log of session {}: {e}", run.session_id));
                        self.attempt_failed(&mut run, &e)?
                    }
                },
                RecoveryStep::Deliver { from, gap, .. } => {
                    self.deliver_gap(&mut run, from, gap);
                    RecoveryReport::Next
                }
                RecoveryStep::End { handle } => {
                    let reason = format!("{RESUME_REFUSED}{}", run.refused.take().unwrap_or_default());
                    log::warn!("{}: session {}: {reason}", self.label, run.session_id);
                    if let Some(target) = run.target.take() {
                        target.release_held(Vec::new());
                        target.close(&reason);
                    }
                    self.release(handle);
                    RecoveryReport::Next
                }
                RecoveryStep::Recovered { sessions, took_ms } => {
                    // The frames held meanwhile went out, in the engine's order.
                    self.tell(RecoveryEvent::Recovered { sessions, took: Duration::from_millis(took_ms) });
                    return Ok(());
                }
                RecoveryStep::GaveUp { attempts } => {
                    let [before, after] = RECOVERY_GAVE_UP;
                    let cause = CloseCause::ReaderFailed(format!("{before}{attempts}{after}{}", run.last));
                    self.tell(RecoveryEvent::GaveUp { cause: cause.clone() });
                    return Err(cause);
                }
            };
        }
    }

    /// The step of attempt `run.attempt` failed with `e`: the report that
    /// says so, once the transport is given up; the end when the client is
    /// stopping.
    fn attempt_failed(&self, run: &mut Run, e: &Error) -> Result<Report, CloseCause> {
        // Its held events stay held: the next attempt delivers them after
        // the gap the core has it read back again (from where it started).
        run.target = None;
        if self.is_stopping() {
            log::debug!("{}: recovery stopped: {e}", self.label);
            return Err(CloseCause::Stopped);
        }
        self.tell(RecoveryEvent::AttemptFailed { attempt: run.attempt, error: e.to_string() });
        self.lose_transport(&CloseCause::ReaderFailed(e.to_string()));
        run.last = format!("attempt {}: {e}", run.attempt);
        Ok(RecoveryReport::Failed)
    }

    /// [`RecoveryStep::Resume`]: resumes session `handle` with the options
    /// it was opened with and [`RECOVERY_RESUME_FLAG`], holding its live
    /// events, then sends what follows its open. The CLI's error answer to
    /// the resume is [`RecoveryReport::Refused`] (its message kept in
    /// `run` for its end); any other failure fails the attempt.
    fn resume_session(self: &Arc<Self>, handle: SessionHandle, run: &mut Run) -> Result<Report> {
        let (target, reopen) = self.read_state(|s| (s.engine().router().sessions().get(handle), s.reopen_of(handle)));
        let (Some(target), Some(reopen)) = (target, reopen) else { return Ok(RecoveryReport::Skipped) };
        let mut params = reopen.params.clone();
        if let Some(p) = params.as_object_mut() {
            p.insert(RECOVERY_RESUME_FLAG.into(), true.into());
        }
        run.session_id = params.get("sessionId").and_then(|v| v.as_str()).unwrap_or_default().to_owned();
        target.hold();
        run.target = Some(target);
        let deadline = Instant::now() + self.deadlines.request;
        match block_on(self.request("session.resume", &params, deadline)?) {
            Err(Error::Rpc { message, .. }) => {
                run.refused = Some(message);
                return Ok(RecoveryReport::Refused);
            }
            other => other?,
        };
        for (method, follow_up) in &reopen.follow_ups {
            block_on(self.request(method, follow_up, deadline)?)?;
        }
        Ok(RecoveryReport::Resumed)
    }

    /// [`RecoveryStep::Deliver`]: the events of the log from `from` on,
    /// then the live ones held but those the log brought.
    fn deliver_gap(&self, run: &mut Run, from: Option<usize>, gap: Gap) {
        let log = std::mem::take(&mut run.log);
        let events: Vec<Vec<u8>> = match from {
            Some(from) => log.get(from..).unwrap_or_default().iter().map(|e| e.get().as_bytes().to_vec()).collect(),
            None => Vec::new(),
        };
        let id = &run.session_id;
        match gap {
            Gap::Cut => log::warn!(
                "{}: session {id}: the last event delivered is not in the last {} of its log; events of the gap, if any, are not delivered",
                self.label,
                log.len()
            ),
            Gap::Unmarked => log::warn!(
                "{}: session {id}: no durable event had been delivered before the loss; events of the gap, if any, are not delivered",
                self.label
            ),
            _ => {}
        }
        let gap_events = events.len();
        if gap_events > 0 {
            log::info!("{}: session {id}: {gap_events} events of the gap read back from its log", self.label);
        }
        if let Some(target) = run.target.take() {
            target.release_held(events);
        }
        self.tell(RecoveryEvent::SessionResumed { session_id: id.clone(), gap_events, gap });
    }

    /// One attempt: a new transport, its reader, then the handshake.
    fn attempt(self: &Arc<Self>, restart: &dyn Restart<Connection>) -> Result<()> {
        let NewTransport { reader, writer, probe } = restart.transport(&|| self.is_stopping())?;
        let outbox = Outbox::start(&self.label, writer)?;
        let (transport, old) = {
            let mut locked = lock(&self.locked);
            (locked.state.new_transport(), std::mem::replace(&mut locked.outbox, outbox))
        };
        old.close();
        *lock(&self.probe) = probe;
        let pump = Arc::clone(self);
        let reader = thread::Builder::new()
            .name(format!("copilot-reader ({})", self.label))
            .spawn(move || pump.pump(reader, transport))
            .map_err(Error::Io)?;
        // An earlier attempt's reader has ended (its transport failed or
        // was replaced); the one an earlier recovery started may be this
        // thread, the supervisor, which ends once this recovery has.
        if let Some(old) = lock(&self.reader_thread).replace(reader) {
            if old.thread().id() != thread::current().id() {
                let _ = old.join();
            }
        }
        restart.reopen(self)
    }

    /// Waits until `until` on the engine's clock, or less when the client
    /// stops meanwhile: whether to go on.
    fn pause_until(&self, until: u64) -> bool {
        while !self.is_stopping() {
            let left = until.saturating_sub(self.now());
            if left == 0 {
                return true;
            }
            thread::sleep(Duration::from_millis(left.min(20)));
        }
        false
    }
}

/// What the recovery's steps carry from one to the next.
#[derive(Default)]
pub(super) struct Run {
    /// The attempt running.
    attempt: usize,
    /// The last failure, for the cause of giving up.
    last: String,
    /// The session being resumed: its id and sink (its live events held).
    pub(super) session_id: String,
    target: Option<Target>,
    /// The CLI's refusal of its resume.
    refused: Option<String>,
    /// Its log read so far, oldest first, as the CLI wrote the events, and
    /// the cursor to read further back.
    pub(super) log: Vec<Box<RawValue>>,
    pub(super) cursor: Option<String>,
}

impl Run {
    fn log_ids(&self) -> Vec<Option<u64>> {
        self.log.iter().map(|e| event_id_of(e.get().as_bytes())).collect()
    }
}
