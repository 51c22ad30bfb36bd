//! The driver's state: one connection's decisions in one plain value, as
//! quinn-proto's `Connection` is under quinn's driver. It has no lock, no
//! thread and no clock: `&mut self` methods are fed what happened (bytes
//! read, a call started or dropped, a handler's outcome, a batch of events
//! delivered, the time as `now` in ms, the transport lost, the end) and
//! return what to do about it (what to hand to sessions and handlers,
//! callers to tell or fail, sessions to end, wakers to wake);
//! [`poll_transmit`](DriverState::poll_transmit) gives the bytes to write,
//! [`poll_timeout`](DriverState::poll_timeout) when to be called again and
//! [`poll_released`](DriverState::poll_released) what to drop.
//!
//! The threads of `Connection` only move bytes, run handlers and hold one
//! lock around this; a simulator can drive it with none, on a virtual
//! clock. It owns the core's engine, which makes every protocol decision;
//! what is here is the rest of the connection's bookkeeping: how a read's
//! frames are handed on (`read.rs`), whether the connection has ended and
//! why, who ends it, the transport in use and its recovery's sequence, the
//! calls' and async waits' deadlines, the delivery fence's book
//! (`fence.rs`), the ordered lane of client-wide waits (`wait.rs`), and
//! how sessions are opened again after a recovery.
//!
//! `T` is what a session is to the engine (the connection's session sink,
//! a number in a simulation): the state only keeps it and hands it back,
//! and never drops the last of one (see `poll_released`).

mod driver_state;
mod fence;
mod read;
#[cfg(test)]
mod tests;
mod wait;

pub(crate) use driver_state::MAX_PENDING;
pub use driver_state::{CallRefused, DriverState, Outcome};
#[cfg(feature = "simulation")]
pub use driver_state::{Ended, Expired, Lost};
pub use read::{Read, Routed};
pub use wait::Wait;
