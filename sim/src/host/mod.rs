//! The simulated host: the real [`copilot_core::Engine`] and what a host
//! does around it, with no threads and no clock of its own. It feeds the
//! engine the bytes the world hands it, acts on every [`Output`] (delivers
//! events, completes opens and destroys, hands obligations to its
//! handlers), runs its handlers as timed jobs, passes the time in, writes
//! what the engine queued before each frame of its own, and recovers a
//! lost connection as [`copilot_core::Recovery`] sequences it.
//!
//! It records what it saw for the checker ([`Seen`]) and notes every place
//! where the engine broke its documented contract ([`Host::failures`]).
//!
//! [`Output`]: copilot_core::Output

mod answering;
mod calls;
mod outputs;
mod recover;

use std::collections::{BTreeMap, HashMap, HashSet};

use copilot_core::{Engine, EngineConfig, FrameDecoder, GrowingBuffer, HandlerKind, RequestId, SessionHandle};

use crate::rng::Rng;
pub use answering::{Ob, Plan};
use recover::Recovering;

/// Sessions the simulated client can have at once (the engine's `SESSIONS`).
pub const SESSIONS: usize = 8;
/// Requests in flight at once (the engine's `PENDING`).
pub const PENDING: usize = 8;
/// Obligations open at once (the engine's `OBLIGATIONS`): small, so a full
/// table and the bounded memory of answered waits are reached.
pub const OBLIGATIONS: usize = 16;
/// Bytes of the parking storage.
pub const PARK_BYTES: usize = 4096;

/// The engine as the simulated host builds it (the std host's stores).
pub type SimEngine = Engine<u32, Waiter, Vec<u8>, GrowingBuffer, SESSIONS, PENDING, OBLIGATIONS>;

/// What a request's response goes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Waiter {
    /// The handshake of a connection.
    Connect,
    /// A create (or a join: a resume of another client's session).
    Open {
        /// The session's record.
        key: u32,
        /// Its handle.
        handle: SessionHandle,
    },
    /// A destroy.
    Destroy {
        /// The session's record.
        key: u32,
        /// Its handle.
        handle: SessionHandle,
    },
    /// A prompt.
    Send {
        /// The session's record.
        key: u32,
    },
    /// A resume of the recovery.
    Resume {
        /// The session's record.
        key: u32,
    },
    /// A page of a session's log, read by the recovery.
    ReadLog {
        /// The session's record.
        key: u32,
    },
}

/// A bug planted in the simulated host, for the simulator's own tests:
/// the checker must catch each one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// The host loses the 20th event it is delivered.
    LoseEvent,
    /// The host delivers the 20th event before the 19th.
    SwapEvents,
    /// The host never passes the time to the engine.
    NoTimeouts,
    /// The host writes its handlers' answers twice.
    AnswerTwice,
}

/// How this run's host behaves (drawn per seed).
#[derive(Debug, Clone)]
pub struct HostProfile {
    /// The handler kinds the host has a handler for.
    pub handlers: HashSet<HandlerKind>,
    /// Weights of what a handler does: answer, fail, decline, run past its
    /// deadline, answer with invalid JSON.
    pub plans: [u64; 5],
    /// Most ms a handler takes (when not past its deadline).
    pub handler_ms: u64,
    /// Chance (%) that a create lets the server assign the id.
    pub server_assigned_percent: u64,
    /// The engine's configuration.
    pub config: EngineConfig,
    /// A bug planted for the simulator's own tests.
    pub fault: Option<Fault>,
}

/// Where a session of the host stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecState {
    /// Its create or join is in flight.
    Opening,
    /// Open.
    Open,
    /// Its destroy is in flight.
    Closing,
    /// Released from the engine.
    Released,
}

/// A session of the host, from its reservation to its release.
#[derive(Debug, Clone)]
pub struct SessionRec {
    /// The engine's handle.
    pub handle: SessionHandle,
    /// Its id, once known (chosen by the client, or from the create's answer).
    pub cli_id: Option<String>,
    /// Where it stands.
    pub state: RecState,
    /// When it was reserved and released (ms).
    pub opened_at: u64,
    /// When it was released, if it was.
    pub released_at: Option<u64>,
    /// The events delivered to it (their numbers), in delivery order.
    pub delivered: Vec<u64>,
    /// Live events held while the recovery resumes it: `(number, id hash)`.
    pub held: Option<Vec<(u64, Option<u64>)>>,
    /// The recovery's deliveries for it: `(time, first of the log
    /// delivered, how much of the gap)`.
    pub gaps: Vec<(u64, Option<usize>, GapKind)>,
    /// The spans of `delivered` that a recovery's delivery made (the gap
    /// read back, then the live events held).
    pub batches: Vec<(usize, usize)>,
    /// When a recovery resumed it and then gave the resume up before
    /// delivering its gap (the attempt failed): its held events went out.
    pub abandoned: Vec<u64>,
}

impl SessionRec {
    /// A session reserved at `now` (its open in flight).
    pub fn new(handle: SessionHandle, cli_id: Option<String>, now: u64) -> Self {
        SessionRec {
            handle,
            cli_id,
            state: RecState::Opening,
            opened_at: now,
            released_at: None,
            delivered: Vec::new(),
            held: None,
            gaps: Vec::new(),
            batches: Vec::new(),
            abandoned: Vec::new(),
        }
    }
}

/// How much of a session's gap a recovery delivered, as the core's
/// [`copilot_core::Gap`] says it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GapKind {
    /// All of it.
    Whole,
    /// The pages read back did not reach the gap's start: part of it, or none.
    Cut,
    /// Nothing marks the gap's start (a session joined here with no event
    /// delivered): its log was not read.
    Unmarked,
}

/// How the host accounted for an event frame the engine decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fate {
    /// Delivered to this session record.
    Delivered(u32),
    /// Routed to no session (none of the host's was open under its id).
    UnknownSession,
    /// Lost to a full parking storage (counted by the engine).
    ParkDropped,
}

/// What the host saw, for the checker.
#[derive(Debug, Default)]
pub struct Seen {
    /// Every event frame the engine decoded, by event number.
    pub fates: HashMap<u64, Fate>,
    /// The waits the engine left to another client (`rid:`/`req:` tags).
    pub left: HashSet<String>,
    /// The waits the host's handlers answered, or saw refused, by tag.
    pub taken: HashSet<String>,
    /// Every wait the engine handed out as an obligation, by tag.
    pub handed: HashSet<String>,
    /// Drops of the connection, recoveries that ended, and how.
    pub drops: u64,
    /// Recoveries that ended with the connection back.
    pub recovered: u64,
    /// Recoveries that gave up.
    pub gave_up: u64,
    /// Lifecycle notices and other notifications delivered.
    pub notices: u64,
    /// Responses that matched no request in flight (late, after a timeout).
    pub late_responses: u64,
    /// Requests that timed out.
    pub timeouts: u64,
    /// Per wait, how many obligations the engine had discharged when it
    /// was first handed out (its discharge came later).
    pub discharged_at: HashMap<String, u64>,
    /// Per wait refused at once, how many waits of events the engine had
    /// refused at once then.
    pub refused_at: HashMap<String, u64>,
    /// Waits a list handed out again after more discharges than the
    /// engine remembers.
    pub beyond_memory: HashSet<String>,
    /// When the engine was told the connection was lost.
    pub losses: Vec<u64>,
    /// The waits the engine refused at once, without an obligation (tags).
    pub refused_at_once: HashSet<String>,
    /// How many waits of events the engine refused at once (each is
    /// remembered as discharged, as an obligation's discharge is).
    pub event_refusals: u64,
    /// Events the engine parked, and when (for a report).
    pub parked: HashMap<u64, u64>,
}

/// The simulated host.
pub struct Host {
    rng: Rng,
    profile: HostProfile,
    engine: Box<SimEngine>,
    decoder: Option<FrameDecoder<Vec<u8>>>,
    /// Session records by key.
    pub sessions: BTreeMap<u32, SessionRec>,
    next_key: u32,
    /// Requests in flight: id, what they are, and their deadline.
    pub requests: BTreeMap<u64, (Waiter, Option<u64>)>,
    /// Obligations handed to the handlers and not yet settled by them.
    pub obligations: Vec<Ob>,
    out: Vec<u8>,
    /// The connection's number (from 1), and whether its handshake is done.
    conn: u32,
    connected: bool,
    /// The connection is being recovered (its own frames are held).
    recovering: Option<Recovering>,
    /// The host asks the world to cut the connection (an attempt failed).
    disconnect: bool,
    /// Recovery gave up: the client is closed.
    dead: bool,
    /// What the host saw.
    pub seen: Seen,
    /// Events delivered so far (for a planted fault).
    deliveries: u64,
    /// Where the engine broke its contract.
    pub failures: Vec<String>,
    /// What the host did on its own since the world last took them, for
    /// the trace (the recovery's steps).
    pub notes: Vec<String>,
    created: u64,
}

impl Host {
    /// A host with a fresh engine, not connected yet.
    pub fn new(rng: Rng, profile: HostProfile) -> Self {
        let engine = Box::new(Engine::new(vec![0; PARK_BYTES], GrowingBuffer::new(256), profile.config));
        Host {
            rng,
            profile,
            engine,
            decoder: Some(FrameDecoder::with_buffer(vec![0; 1 << 16])),
            sessions: BTreeMap::new(),
            next_key: 0,
            requests: BTreeMap::new(),
            obligations: Vec::new(),
            out: Vec::new(),
            conn: 0,
            connected: false,
            recovering: None,
            disconnect: false,
            dead: false,
            seen: Seen::default(),
            failures: Vec::new(),
            notes: Vec::new(),
            created: 0,
            deliveries: 0,
        }
    }

    /// How many obligations the engine has discharged so far (it
    /// remembers the last `OBLIGATIONS` of them, and as many waits refused
    /// at once apart).
    fn discharged(&self) -> u64 {
        let s = self.engine.stats(0);
        s.opened - (s.open_obligations + s.left_open) as u64
    }

    /// Whether the engine may have forgotten that it discharged the wait
    /// `tag`: as many discharges as it remembers came after.
    fn beyond_memory(&self, tag: &str) -> bool {
        let bound = OBLIGATIONS as u64;
        self.seen.discharged_at.get(tag).is_some_and(|at| self.discharged() >= at + bound)
            || self.seen.refused_at.get(tag).is_some_and(|at| self.seen.event_refusals >= at + bound)
    }

    /// Notes the waits the engine refused at once, by tag.
    fn refused_at_once(&mut self, tag: Option<String>) {
        if let Some(tag) = tag {
            if self.beyond_memory(&tag) {
                self.seen.beyond_memory.insert(tag.clone());
            }
            if tag.starts_with("rid:") {
                self.seen.event_refusals += 1;
                self.seen.refused_at.entry(tag.clone()).or_insert(self.seen.event_refusals);
            }
            self.seen.refused_at_once.insert(tag);
        }
    }

    /// The engine, to read its state and counters.
    pub fn engine(&self) -> &SimEngine {
        &self.engine
    }

    /// Whether the recovery gave up (the client is closed).
    pub fn is_dead(&self) -> bool {
        self.dead
    }

    /// Whether a recovery runs.
    pub fn is_recovering(&self) -> bool {
        self.recovering.is_some()
    }

    /// Whether the host can start calls: connected, not recovering.
    pub fn ready(&self) -> bool {
        self.connected && self.recovering.is_none() && !self.dead
    }

    /// The world connected a new transport (connection `conn`): the
    /// handshake goes out.
    pub fn connected_to(&mut self, now: u64, conn: u32) {
        self.conn = conn;
        self.decoder = Some(FrameDecoder::with_buffer(vec![0; 1 << 16]));
        self.call(now, Waiter::Connect, "connect", r#"{"token":null}"#);
    }

    /// What the host writes to the connection now: its own frames, each
    /// after what the engine had queued before it (unless a recovery holds
    /// the engine's frames).
    pub fn take_output(&mut self) -> Vec<u8> {
        self.flush_engine();
        std::mem::take(&mut self.out)
    }

    fn flush_engine(&mut self) {
        if self.recovering.is_some() || self.dead {
            return;
        }
        let queued = self.engine.transmit();
        if !queued.is_empty() {
            self.out.extend_from_slice(queued);
            let n = queued.len();
            self.engine.transmitted(n);
        }
    }

    /// Sends a request of the host's own; `false` when the pending table
    /// is full (the call fails at once, as a host's would).
    fn call(&mut self, now: u64, waiter: Waiter, method: &str, params: &str) -> bool {
        let Ok(id) = self.engine.insert_request(waiter, now) else { return false };
        let deadline = self.profile.config.request_timeout.map(|t| now + t);
        self.requests.insert(id.0, (waiter, deadline));
        self.flush_engine();
        let body = format!(r#"{{"jsonrpc":"2.0","id":{},"method":"{method}","params":{params}}}"#, id.0);
        self.out.extend(crate::wire::frame(&body));
        true
    }

    /// When the host next has something to do on its own.
    pub fn next_timer(&self) -> Option<u64> {
        [self.engine.poll_timeout(), self.next_own_timer()].into_iter().flatten().min()
    }

    /// When the host itself (its handlers, the recovery's wait) next has
    /// something to do: what [`on_time`](Self::on_time) does at once
    /// whatever the engine says.
    pub fn next_own_timer(&self) -> Option<u64> {
        let jobs = self.obligations.iter().filter(|o| !o.settled).map(|o| o.due).min();
        let recovery = self.recovering.as_ref().and_then(|r| r.until);
        [jobs, recovery].into_iter().flatten().min()
    }

    /// The next time after `now` at which the host has something to do.
    pub fn next_timer_after(&self, now: u64) -> Option<u64> {
        let jobs = self.obligations.iter().filter(|o| !o.settled).map(|o| o.due);
        let recovery = self.recovering.as_ref().and_then(|r| r.until);
        jobs.chain(recovery).chain(self.engine.poll_timeout()).filter(|t| *t > now).min()
    }

    /// Does what is due at `now`: the handlers that finish, the engine's
    /// deadlines, the recovery's wait.
    pub fn on_time(&mut self, now: u64) {
        self.run_jobs(now);
        if self.engine.poll_timeout().is_some_and(|t| t <= now) && self.profile.fault != Some(Fault::NoTimeouts) {
            let mut expired = Vec::new();
            self.engine.handle_timeout(now, |id, w| expired.push((id, w)));
            for (id, waiter) in expired {
                self.seen.timeouts += 1;
                self.request_failed(now, id, waiter);
            }
        }
        if self.recovering.as_ref().and_then(|r| r.until).is_some_and(|t| t <= now) {
            self.recovery_next(now, copilot_core::RecoveryReport::Next);
        }
    }

    /// Releases session `key` from the engine (after its destroy, or a
    /// failed open), then routes what was parked for it.
    fn release(&mut self, now: u64, key: u32) {
        let Some(rec) = self.sessions.get_mut(&key) else { return };
        if rec.state == RecState::Released {
            return;
        }
        let handle = rec.handle;
        if let Some(held) = rec.held.take() {
            rec.delivered.extend(held.iter().map(|(n, _)| *n));
            for (n, _) in held {
                self.seen.fates.insert(n, Fate::Delivered(key));
            }
        }
        let rec = self.sessions.get_mut(&key).expect("present");
        rec.state = RecState::Released;
        rec.released_at = Some(now);
        self.engine.release(handle);
        self.drain_parked(now);
    }

    /// A request ended without its response (its deadline passed, or the
    /// connection was lost).
    fn request_failed(&mut self, now: u64, id: RequestId, waiter: Waiter) {
        self.requests.remove(&id.0);
        match waiter {
            Waiter::Open { key, .. } | Waiter::Destroy { key, .. } => self.release(now, key),
            Waiter::Send { .. } => {}
            Waiter::Connect | Waiter::Resume { .. } | Waiter::ReadLog { .. } => {
                if self.recovering.is_some() {
                    self.attempt_failed(now);
                } else if waiter == Waiter::Connect {
                    self.failures.push("the first handshake failed".into());
                }
            }
        }
    }

    /// The world cut the connection (the CLI's process died with it).
    pub fn connection_lost(&mut self, now: u64) {
        self.seen.drops += 1;
        self.disconnect = false;
        self.connected = false;
        self.out.clear();
        self.decoder = Some(FrameDecoder::with_buffer(vec![0; 1 << 16]));
        let mut failed = Vec::new();
        self.seen.losses.push(now);
        let forgotten = self.engine.connection_lost(|id, w| failed.push((id, w)));
        self.notes
            .push(format!("connection lost: {forgotten} obligations forgotten, {} requests failed", failed.len()));
        for ob in &mut self.obligations {
            if !ob.event_row {
                ob.forgotten = true;
            }
        }
        let recovering = self.recovering.is_some();
        if !recovering && !self.dead {
            self.recovering = Some(Recovering::new(now));
        }
        for (id, waiter) in failed {
            self.requests.remove(&id.0);
            match waiter {
                Waiter::Open { key, .. } | Waiter::Destroy { key, .. } => self.release(now, key),
                _ => {}
            }
        }
        // A resume under way keeps what it held for the next attempt (as
        // copilot-host does); it is delivered after that attempt's gap.
        self.abandon_resume(now);
        if recovering {
            self.recovery_next(now, copilot_core::RecoveryReport::Failed);
        } else if !self.dead {
            self.recovery_next(now, copilot_core::RecoveryReport::Next);
        }
    }

    /// Whether the host asks the world to cut the connection (a recovery
    /// attempt failed on it); asking clears it.
    pub fn take_disconnect(&mut self) -> bool {
        std::mem::take(&mut self.disconnect)
    }

    /// Routes the frames parked for sessions that changed, as the engine
    /// asks after `assign`, `complete_open` and `release`.
    fn drain_parked(&mut self, now: u64) {
        loop {
            let Some(out) = self.engine.poll_parked(now) else { return };
            let digest = outputs::Digest::of(out, false, self.conn);
            self.act_on(now, digest);
        }
    }

    /// A seed's draw for a handler's outcome.
    fn rng(&mut self) -> &mut Rng {
        &mut self.rng
    }
}
