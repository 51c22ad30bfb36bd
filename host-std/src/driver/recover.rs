//! Recovery of a lost connection: the CLI this client started exited, or
//! its connection dropped, while the client did not end it. The reader
//! that saw the end supervises: the engine forgets what the next
//! connection cannot settle, the layer above starts the CLI again (after
//! each wait of the core's [`RECOVERY_BACKOFF_MS`] in turn) and resumes
//! the sessions, and the frames the engine decided on meanwhile (answers
//! given during the gap, the lists of pending waits) go out once the
//! sessions are resumed. Each step is told to the recovery's receivers.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use copilot_core::{SessionHandle, RECOVERY_BACKOFF_MS, RECOVERY_RESUME_FLAG};

use super::connection::{lock, Connection, Target, Waiter};
use super::outbox::Outbox;
use super::restart::{NewTransport, RecoveryEvent, RecoverySink, Reopen, Restart};
use crate::error::{Error, Result};
use crate::transport::CloseCause;

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
        let mut all = lock(&self.reopens);
        all.retain(|(h, _)| *h != handle);
        all.push((handle, reopen));
    }

    /// Resumes every session still open on the new connection (with
    /// [`RECOVERY_RESUME_FLAG`]), in turn, and has the engine reconcile
    /// each; the number resumed. A session released meanwhile is skipped;
    /// one whose resume the CLI refuses (an error answer: the session is
    /// gone from its state) ends with the CLI's words, and the others carry
    /// on, as in the JS client. Any other failure fails the attempt.
    pub(crate) async fn resume_all(self: &Arc<Self>, deadline: Instant) -> Result<usize> {
        let open: Vec<(SessionHandle, Target)> =
            self.sessions().into_iter().filter(|(_, active, _)| *active).map(|(h, _, t)| (h, t)).collect();
        let reopens: Vec<(SessionHandle, Reopen)> = {
            let mut all = lock(&self.reopens);
            all.retain(|(h, _)| open.iter().any(|(o, _)| o == h));
            all.clone()
        };
        let mut resumed = 0;
        for (handle, reopen) in &reopens {
            let Some((_, target)) = open.iter().find(|(h, _)| h == handle) else { continue };
            let mut params = reopen.params.clone();
            if let Some(p) = params.as_object_mut() {
                p.insert(RECOVERY_RESUME_FLAG.into(), true.into());
            }
            let id = params.get("sessionId").and_then(|v| v.as_str()).unwrap_or_default().to_owned();
            // Where the gap starts, before the resume's events move it; the
            // live stream is held until the gap is delivered.
            let mark = lock(&self.engine).last_durable_event(*handle);
            target.hold();
            let gap = self.resume_one(*handle, &id, &params, reopen, mark, deadline).await;
            let (events, refused) = match gap {
                Ok(Ok(events)) => (events, None),
                Ok(Err(refused)) => (Vec::new(), Some(refused)),
                Err(e) => {
                    target.release_held(Vec::new());
                    return Err(Error::Disconnected(format!("resuming session {id}: {e}")));
                }
            };
            let delivered = events.len();
            target.release_held(events);
            if let Some(refused) = refused {
                let reason = format!("session.resume failed after the connection was recovered: {refused}");
                log::warn!("{}: session {id}: {reason}", self.label);
                target.close(&reason);
                self.release(*handle);
                continue;
            }
            resumed += 1;
            if delivered > 0 {
                log::info!("{}: session {id}: {delivered} events of the gap read back from its log", self.label);
            }
            self.tell(RecoveryEvent::SessionResumed { session_id: id, gap_events: delivered });
        }
        Ok(resumed)
    }

    /// Resumes one session, has the engine reconcile it, sends the
    /// follow-ups, and reads the events of the gap (after `mark`); inside,
    /// the CLI's error answer to the resume (the session is not resumed).
    async fn resume_one(
        self: &Arc<Self>,
        handle: SessionHandle,
        id: &str,
        params: &serde_json::Value,
        reopen: &Reopen,
        mark: Option<u64>,
        deadline: Instant,
    ) -> Result<std::result::Result<Vec<Vec<u8>>, Error>> {
        match self.request("session.resume", params, deadline)?.await {
            Err(refused @ Error::Rpc { .. }) => return Ok(Err(refused)),
            other => other?,
        };
        let _ = self.with_engine(|e, _| e.reconcile(handle));
        for (method, follow_up) in &reopen.follow_ups {
            self.request(method, follow_up, deadline)?.await?;
        }
        match mark {
            Some(mark) => self.read_gap(id, mark, deadline).await.map(Ok),
            None => Ok(Ok(Vec::new())),
        }
    }

    /// The reader a recovery started, if any, to join.
    pub(crate) fn take_reader_thread(&self) -> Option<thread::JoinHandle<()>> {
        lock(&self.reader_thread).take()
    }

    /// Whether this client is ending the connection.
    pub(crate) fn is_stopping(&self) -> bool {
        self.stopping.load(Ordering::SeqCst)
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
        let mut failed = Vec::new();
        let forgotten = {
            let mut engine = lock(&self.engine);
            // Under the engine's lock: an answer given from now on is
            // held for the next connection, one given before went to this
            // one and is forgotten with it, unless acknowledged.
            self.recovering.store(true, Ordering::SeqCst);
            engine.connection_lost(|_, w| failed.push(w))
        };
        if forgotten > 0 {
            log::warn!("{}: {forgotten} requests of the CLI died with the connection", self.label);
        }
        for waiter in failed {
            if let Waiter::Open { handle, .. } = &waiter {
                let handle = *handle;
                waiter.fail(Error::Disconnected(reason.clone()));
                self.release(handle);
            } else {
                waiter.fail(Error::Disconnected(reason.clone()));
            }
        }
    }

    /// Recovers the lost connection (on the reader thread that saw it
    /// end): `Ok` once the sessions are resumed on a new transport, whose
    /// reader then runs; the cause to end with when every attempt failed
    /// or the client is stopping.
    pub(super) fn recover(
        self: &Arc<Self>,
        cause: CloseCause,
        restart: Arc<dyn Restart<Connection>>,
    ) -> Result<(), CloseCause> {
        let lost = Instant::now();
        self.lose_transport(&cause);
        self.tell(RecoveryEvent::ConnectionLost { cause: cause.clone() });
        let mut last = cause.clone();
        for (at, &delay) in RECOVERY_BACKOFF_MS.iter().enumerate() {
            let attempt = at + 1;
            let after = Duration::from_millis(delay);
            if !self.pause(after) {
                return Err(CloseCause::Stopped);
            }
            self.tell(RecoveryEvent::Restarting { attempt, after });
            match self.attempt(&*restart) {
                Ok(sessions) => {
                    // The frames held meanwhile go out now, in the engine's order.
                    self.recovering.store(false, Ordering::SeqCst);
                    self.with_engine(|_, _| {});
                    self.tell(RecoveryEvent::Recovered { sessions, took: lost.elapsed() });
                    return Ok(());
                }
                Err(e) if self.is_stopping() => {
                    log::debug!("{}: recovery stopped: {e}", self.label);
                    return Err(CloseCause::Stopped);
                }
                Err(e) => {
                    self.tell(RecoveryEvent::AttemptFailed { attempt, error: e.to_string() });
                    self.lose_transport(&CloseCause::ReaderFailed(e.to_string()));
                    last = CloseCause::ReaderFailed(format!("attempt {attempt}: {e}"));
                }
            }
        }
        let cause = CloseCause::ReaderFailed(format!(
            "the connection was lost and {} attempts to recover it failed; the last: {last}",
            RECOVERY_BACKOFF_MS.len()
        ));
        self.tell(RecoveryEvent::GaveUp { cause: cause.clone() });
        Err(cause)
    }

    /// One attempt: a new transport, its reader, then the handshake and
    /// the resumes.
    fn attempt(self: &Arc<Self>, restart: &dyn Restart<Connection>) -> Result<usize> {
        let NewTransport { reader, writer, probe } = restart.transport(&|| self.is_stopping())?;
        let transport = self.transport.fetch_add(1, Ordering::SeqCst) + 1;
        self.set_outbox(Outbox::start(&self.label, writer)?);
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

    /// Waits `d`, or less when the client stops meanwhile: whether to go on.
    fn pause(&self, d: Duration) -> bool {
        let until = Instant::now() + d;
        while !self.is_stopping() {
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return true;
            }
            thread::sleep(left.min(Duration::from_millis(20)));
        }
        false
    }
}
