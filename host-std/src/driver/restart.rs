//! What a recovery is made of, for the connection to hold and the layer
//! above to give (the recovery itself is `recover.rs`): the new transport,
//! how to restart, how each session is opened again, and the steps told
//! to the user.

use std::io::{Read, Write};
use std::sync::Arc;
use std::time::Duration;

use crate::error::Result;
use crate::transport::{CauseProbe, CloseCause};

/// A new transport to the CLI: what the driver reads and writes, and how
/// it learns why it ended.
pub(crate) struct NewTransport {
    pub(crate) reader: Box<dyn Read + Send>,
    pub(crate) writer: Box<dyn Write + Send>,
    pub(crate) probe: Option<CauseProbe>,
}

/// How the layer above recovers a connection: it knows how the CLI was
/// started and which sessions are open with which options.
/// `C` is the connection (generic here so that this module, which the
/// connection's fields name, does not name it back).
pub(crate) trait Restart<C>: Send + Sync {
    /// Starts the CLI again (or connects again): the new transport; none
    /// once `stopping` says the client is stopping.
    fn transport(&self, stopping: &dyn Fn() -> bool) -> Result<NewTransport>;
    /// On the new transport (the driver reads it): the handshake, and what
    /// follows every handshake (registering as the inference provider).
    fn reopen(&self, conn: &Arc<C>) -> Result<()>;
}

/// One step of a recovery, as [`Client::on_recovery`](crate::Client::on_recovery)
/// hands it over (and the log tells it).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum RecoveryEvent {
    /// The connection was lost while the client did not end it; recovery
    /// starts. The calls in flight failed with the cause.
    ConnectionLost {
        /// Why it was lost.
        cause: CloseCause,
    },
    /// Attempt `attempt` (from 1) to start the CLI again, after `after`.
    Restarting {
        /// Which attempt.
        attempt: usize,
        /// The wait before it.
        after: Duration,
    },
    /// An attempt failed.
    AttemptFailed {
        /// Which attempt.
        attempt: usize,
        /// Why.
        error: String,
    },
    /// A session was resumed on the new connection (the waits the CLI
    /// lists for it are asked for).
    SessionResumed {
        /// Its id.
        session_id: String,
        /// Events the connection lost that its log had, delivered before
        /// the live stream went on.
        gap_events: usize,
        /// How much of the gap that is: [`Gap::Whole`](copilot_core::Gap::Whole)
        /// when the log was read back to the last event delivered (every
        /// durable event of the gap was delivered); otherwise durable events
        /// of the gap may be missing. Ephemeral events (deltas) are never
        /// read back.
        gap: copilot_core::Gap,
    },
    /// The connection is back: every open session was resumed, and the
    /// waits the CLI lists are being answered.
    Recovered {
        /// Sessions resumed.
        sessions: usize,
        /// From the loss to the sessions resumed.
        took: Duration,
    },
    /// Every attempt failed: the connection ends with this cause, and every
    /// call and stream with it.
    GaveUp {
        /// The last failure.
        cause: CloseCause,
    },
}

/// How a session is opened again on a new connection: its resume's
/// params (the options it was opened with) and the requests that follow
/// an open, as the layer above wrote them.
#[derive(Clone)]
pub(crate) struct Reopen {
    pub(crate) params: serde_json::Value,
    pub(crate) follow_ups: Vec<(&'static str, Box<serde_json::value::RawValue>)>,
}

/// A receiver of the recovery's steps.
pub(crate) type RecoverySink = Box<dyn Fn(&RecoveryEvent) + Send + Sync>;
