//! Who waits for a response: a call's slot, or an open whose answer the
//! driver completes in the engine first. The engine keeps them in its
//! table of pending requests; the driver's state hands them back. `T` is
//! what a session is to the engine (the connection's session sink).

use std::sync::{Arc, Mutex};
use std::task::Waker;

use copilot_core::SessionHandle;

use super::completion::Completion;
use crate::error::{Error, Result};

/// The raw JSON of a result, or the error that replaced it.
pub type Reply = Result<Vec<u8>>;

/// A reply and the [`DeliveryFence`](super::fence::DeliveryFence) mark its
/// call waits for before it returns (0: none).
pub type Marked = (Reply, u64);

/// Where a response goes: a call's slot, whose waker the thread that
/// fills it wakes (the reader, the timer or the one that ends the
/// connection).
pub struct ReplyTx(pub Arc<Completion<Marked>>);

impl ReplyTx {
    /// Hands over the reply; never blocks. A call dropped before its answer
    /// is not told.
    pub fn send(self, reply: Reply) {
        self.send_after(reply, 0);
    }

    /// Hands over the reply, which its call returns once the events read
    /// before it are delivered (the fence's `mark`).
    pub fn send_after(self, reply: Reply, mark: u64) {
        self.0.complete((reply, mark));
    }
}

/// Who is waiting for a response.
pub enum Waiter<T> {
    /// A caller waiting for the reply.
    Reply(ReplyTx),
    /// A `session.create` or `session.resume`: the reader completes the
    /// open in the engine (naming a session whose id the server assigns,
    /// or releasing the slot on any failure) and re-routes the frames
    /// parked for it, in order, before it reads the next frame.
    Open { handle: SessionHandle, target: T, reply: ReplyTx },
}

impl<T> Waiter<T> {
    /// Tells the caller `error`.
    pub fn fail(self, error: Error) {
        let reply = match self {
            Waiter::Reply(r) | Waiter::Open { reply: r, .. } => r,
        };
        // A caller that gave up has dropped its receiver: nothing to tell.
        reply.send(Err(error));
    }
}

/// The waker of an async wait, updated at each poll.
pub type WakerSlot = Arc<Mutex<Option<Waker>>>;
