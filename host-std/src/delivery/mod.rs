//! Delivery: what reaches the user from a session. Per-session queues of
//! raw event JSON (filled by the driver through
//! [`SessionSink`](crate::driver::SessionSink), never blocking it), handed
//! as shared batches of bytes to every subscriber (callbacks, blocking and
//! async streams, `send_and_wait`) and parsed once for all of them;
//! lifecycle notifications. It hands a session's waits of the agent to an
//! [`Answerer`] the api layer gives it, and knows nothing of handlers.

mod batch;
mod event_channel;
mod inbox;
mod lifecycle;
mod open_canvases;
mod queue;
mod session;
#[cfg(test)]
mod tests;
mod turn;

pub(crate) use event_channel::{event_channel, EventRx};
pub(crate) use inbox::InboxTx;
pub(crate) use lifecycle::lifecycle_sink;
pub(crate) use session::{Answerer, SessionInner, Sink};
pub use session::{EventStream, SessionStats, Subscription, MAX_KEPT_BYTES, MAX_KEPT_EVENTS};
pub(crate) use turn::Turn;
