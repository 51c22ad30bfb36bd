//! The driver: one per connection. Its decisions are one sans-IO state
//! (`state/`: the core's engine, which makes every protocol decision, and
//! the connection's bookkeeping), fed bytes, calls, handlers' outcomes and
//! the time by `&mut self` methods that return what to do. Around it, the
//! threaded shell (`Connection`): a reader, a writer and a timer, callers
//! and handler threads, each of which locks the state, calls one method,
//! and acts on what it returned once the lock is released.
//!
//! It knows no user type: no handler, no session options, no typed event.
//! A session is a [`SessionSink`] it delivers raw event JSON to; a wait of
//! the agent is a [`Job`] it hands on, answered through its [`Replier`]; a
//! client-wide request's wait goes to the [`ClientWide`] the client gives
//! it; `session.lifecycle` params go to [`LifecycleSink`]s as raw JSON.

mod answer;
mod backlog;
mod calls;
mod completion;
mod connection;
mod fence;
mod gap;
mod outbox;
mod reader;
mod recover;
mod restart;
// Reached by the simulator (feature `simulation`): the fields of their
// variants are described in each variant's documentation.
#[cfg_attr(feature = "simulation", allow(missing_docs))]
mod state;
mod timer;
#[cfg_attr(feature = "simulation", allow(missing_docs))]
mod waiter;

pub(crate) use answer::Answering;
pub(crate) use backlog::{Backlog, Charge};
pub use backlog::{BacklogStats, BACKLOG_STALL_MS, MAX_BACKLOG_BYTES};
pub(crate) use calls::Call;
pub(crate) use completion::Completion;
pub(crate) use connection::{ClientWide, Connection, Deadlines, Job, LifecycleSink, Replier, SessionSink, Waiter};
pub(crate) use fence::{Delivering, DeliveryFence, Ticket};
pub use restart::RecoveryEvent;
pub(crate) use restart::{NewTransport, Reopen, Restart};

/// The driver's state and what its methods take and return, for the
/// simulator (`copilot_host::simulation`, feature `simulation`).
#[cfg(feature = "simulation")]
pub(crate) mod simulation {
    pub use super::completion::Completion;
    pub use super::state::{CallRefused, DriverState, Ended, Expired, Lost, Outcome, Read, Routed, Wait};
    pub use super::waiter::{Marked, Reply, ReplyTx, Waiter, WakerSlot};
}

#[cfg(test)]
mod tests;
