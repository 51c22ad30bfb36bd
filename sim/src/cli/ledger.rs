//! What the simulated CLI did and saw, kept for the invariant checker: every
//! event it emitted, every wait it raised and who answered it, and what the
//! client sent that the real CLI would not accept. The checker reads this
//! record, never the CLI's working state.

use std::fmt;

/// Who answered a wait.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Client {
    /// The client under test (its engine).
    This,
    /// The other client of the session (simulated inside the CLI's world).
    Other,
}

/// How the CLI names a wait, as its answer must name it again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WaitKey {
    /// An awaited event, answered by an RPC carrying this `requestId`.
    Event {
        /// The `data.requestId`.
        request_id: String,
    },
    /// A server-to-client request, answered by the response to its id on
    /// the connection it was sent on.
    Request {
        /// Which connection of this client (from 1).
        conn: u32,
        /// The JSON-RPC id.
        id: u64,
    },
}

impl fmt::Display for WaitKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WaitKey::Event { request_id } => write!(f, "requestId {request_id}"),
            WaitKey::Request { conn, id } => write!(f, "request {id} on connection {conn}"),
        }
    }
}

/// Where a wait stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WaitState {
    /// The agent waits on it.
    Pending,
    /// The first answer came (the CLI took it), from `by` at `at`.
    Resolved {
        /// Who answered first.
        by: Client,
        /// When (ms).
        at: u64,
    },
    /// The CLI stopped waiting without an answer: its session was
    /// destroyed or lost, or the process that held it died.
    Cancelled {
        /// Why.
        why: &'static str,
    },
}

/// What the CLI did with an answer of this client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Took it (`success:true`): the wait is answered.
    Took,
    /// Refused it: the wait was answered already, or is no longer waited on.
    Late,
    /// Refused it: the wait's session is not loaded (a restarted CLI that
    /// has not resumed it); the wait is still pending.
    NotLoaded,
}

/// One wait the CLI raised.
#[derive(Debug, Clone)]
pub struct WaitRecord {
    /// Its row in the answer table ([`copilot_core::ANSWERS`]).
    pub row: usize,
    /// Its session.
    pub session: String,
    /// How its answer names it.
    pub key: WaitKey,
    /// When it was raised (ms).
    pub raised_at: u64,
    /// Whether this client was told of it (its event or request was
    /// written to this client's connection, or a list named it).
    pub told_this: bool,
    /// Whether its event or request got through to this client whole
    /// (a drop may cut it off: then only a list can tell the client).
    pub reached_this: bool,
    /// How many pending lists named it to this client.
    pub listed: u32,
    /// Whether the other client was told of it and has a handler for it.
    pub other_handles: bool,
    /// Where it stands.
    pub state: WaitState,
    /// Answers this client sent for it while it was not pending in a
    /// session the CLI had loaded: the first counts, the CLI refuses the
    /// others with `success:false`. (One the CLI refused because the
    /// session was not loaded, after a restart, is not counted: the wait
    /// is still pending, and answering it again once a list names it is
    /// right.)
    pub answers_from_this: u32,
    /// What this client's first answer carried: the member under the
    /// row's key, the error, or `-` for none.
    pub first_answer: Option<String>,
    /// Every answer of this client: when, on which connection, what, and
    /// what the CLI did with it.
    pub answers: Vec<(u64, u32, String, Outcome)>,
}

/// One event the CLI emitted.
#[derive(Debug, Clone)]
pub struct EventRecord {
    /// Its session.
    pub session: String,
    /// Its type.
    pub event_type: String,
    /// Its `id`.
    pub id: String,
    /// Not `ephemeral`: kept in the session's log across restarts.
    pub durable: bool,
    /// When it was emitted (ms).
    pub at: u64,
    /// The connection of this client it was written to, if it was (the
    /// session was attached to this client then).
    pub sent_on: Option<u32>,
    /// Whether its frame got through to this client whole; `None` while
    /// it is in flight.
    pub arrived: Option<bool>,
}

/// The CLI's record of a run.
#[derive(Debug, Default)]
pub struct Ledger {
    /// Every event emitted, by its number (`data.n`).
    pub events: Vec<EventRecord>,
    /// Every wait raised.
    pub waits: Vec<WaitRecord>,
    /// What this client sent that breaks the protocol, with the time.
    pub violations: Vec<(u64, String)>,
    /// Responses of this client to a request id the CLI never sent on the
    /// connection they came on: `(time, connection, id)`.
    pub stray_responses: Vec<(u64, u32, u64)>,
    /// Requests this client sent, by method.
    pub requests: u64,
    /// Requests this client sent that the CLI answered.
    pub answered_requests: u64,
    /// Each time this client was attached to a session (its create or
    /// resume processed): the session and the number the next event took
    /// then. An event of the session numbered before the first is history
    /// this client never had.
    pub attached: Vec<(String, u64)>,
}

impl Ledger {
    /// Notes a violation by the client.
    pub fn violation(&mut self, now: u64, text: String) {
        self.violations.push((now, text));
    }

    /// The wait whose answer carries `request_id`.
    pub fn wait_by_request_id(&self, request_id: &str) -> Option<usize> {
        self.waits.iter().position(|w| matches!(&w.key, WaitKey::Event { request_id: r } if r == request_id))
    }
}
