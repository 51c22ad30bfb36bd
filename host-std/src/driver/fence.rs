//! Wire order is API order: a call whose answer the reader read after some
//! events returns only once those events were delivered to every callback
//! and `send_and_wait` registered when they arrived.
//!
//! Streams get their events as the reader flushes them, before it hands
//! over any answer of the same read; callbacks and waiters run later, on
//! the event pool. So each batch handed to the pool holds a [`Ticket`]
//! (numbered by the state in the order the reader flushed them, across
//! sessions) until it has been delivered or dropped; the reader marks each
//! answer with the last number given out, and the call waits until every
//! ticket up to its mark is back ([`Connection::poll_fence`]). The book is
//! the state's (`state/fence.rs`); this is its std side: the tickets the
//! batches hold, and the calls' wait.
//!
//! A call made on a thread that is delivering events (a callback that calls
//! the CLI) does not wait: the batch it is delivering is one of those it
//! would wait for. Such a call returns at its answer, as before.

use std::cell::Cell;
use std::sync::{Arc, Weak};
use std::task::{Context, Poll, Waker};

use super::connection::{lock, Connection};

/// The connection's count of event batches handed to the event pool and
/// not yet delivered, as a session holds it. A fence of no connection
/// (`default`) counts nothing.
#[derive(Default)]
pub(crate) struct DeliveryFence {
    conn: Weak<Connection>,
}

/// One batch on its way to callbacks and waiters: back when dropped.
///
/// Dropped with the connection's lock released: the state hands back every
/// target it lets go of (`DriverState::poll_released`), so a session's
/// last batch is never dropped under it.
pub(crate) struct Ticket {
    conn: Weak<Connection>,
    number: u64,
}

impl Drop for Ticket {
    fn drop(&mut self) {
        let Some(conn) = self.conn.upgrade() else { return };
        let woken = lock(&conn.locked).state.fence_back(self.number);
        woken.into_iter().for_each(Waker::wake);
    }
}

thread_local! {
    /// Whether this thread is delivering events (see the module's docs).
    static DELIVERING: Cell<bool> = const { Cell::new(false) };
}

/// Marks this thread as delivering events while it lives.
pub(crate) struct Delivering(bool);

impl Delivering {
    /// This thread delivers events until the value is dropped.
    pub(crate) fn start() -> Delivering {
        Delivering(DELIVERING.with(|d| d.replace(true)))
    }
}

impl Drop for Delivering {
    fn drop(&mut self) {
        DELIVERING.with(|d| d.set(self.0));
    }
}

impl DeliveryFence {
    /// A ticket for a batch the reader hands to the pool now.
    pub(crate) fn ticket(&self) -> Ticket {
        let number = self.conn.upgrade().map_or(0, |c| lock(&c.locked).state.fence_ticket());
        Ticket { conn: self.conn.clone(), number }
    }

    /// Calls waiting now (for the tests' barriers).
    #[cfg(test)]
    pub(crate) fn waiting(&self) -> usize {
        self.conn.upgrade().map_or(0, |c| c.read_state(|s| s.fence_waiting()))
    }
}

impl Connection {
    /// The fence a session of this connection hands its batches' tickets from.
    pub(crate) fn delivery_fence(self: &Arc<Self>) -> Arc<DeliveryFence> {
        Arc::new(DeliveryFence { conn: Arc::downgrade(self) })
    }

    /// The mark of an answer read now (the sessions it follows flushed).
    pub(super) fn fence_mark(&self) -> u64 {
        self.read_state(|s| s.fence_mark())
    }

    /// Ready once every batch handed to the pool up to `mark` is delivered,
    /// or at once on a thread that is delivering events; else `cx` is woken
    /// when they are.
    pub(crate) fn poll_fence(&self, mark: u64, cx: &mut Context<'_>) -> Poll<()> {
        if DELIVERING.with(Cell::get) || lock(&self.locked).state.poll_fence(mark, cx.waker()) {
            return Poll::Ready(());
        }
        Poll::Pending
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_delivering_thread_does_not_wait_and_the_mark_is_reset_when_delivery_ends() {
        assert!(!DELIVERING.with(Cell::get));
        {
            let _d = Delivering::start();
            assert!(DELIVERING.with(Cell::get), "a call made now returns at its answer");
            {
                let _nested = Delivering::start();
            }
            assert!(DELIVERING.with(Cell::get), "still delivering after a nested delivery");
        }
        assert!(!DELIVERING.with(Cell::get), "the mark is reset when delivery ends");
    }

    #[test]
    fn a_fence_of_no_connection_counts_nothing() {
        let fence = DeliveryFence::default();
        let ticket = fence.ticket();
        assert_eq!(ticket.number, 0);
        assert_eq!(fence.waiting(), 0);
        drop(ticket);
    }
}
