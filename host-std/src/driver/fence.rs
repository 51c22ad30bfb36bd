//! Wire order is API order: a call whose answer the reader read after some
//! events returns only once those events were delivered to every callback
//! and `send_and_wait` registered when they arrived.
//!
//! Streams get their events as the reader flushes them, before it hands
//! over any answer of the same read; callbacks and waiters run later, on
//! the event pool. So each batch handed to the pool holds a [`Ticket`]
//! (numbered in the order the reader flushed them, across sessions) until
//! it has been delivered or dropped; the reader marks each answer with the
//! last number given out ([`DeliveryFence::mark`]), and the call waits
//! until every ticket up to its mark is back ([`DeliveryFence::poll_passed`]).
//!
//! A call made on a thread that is delivering events (a callback that calls
//! the CLI) does not wait: the batch it is delivering is one of those it
//! would wait for. Such a call returns at its answer, as before.

use std::cell::Cell;
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

#[derive(Default)]
struct State {
    /// Tickets given out and not yet all back, by number: `(number, back)`.
    /// The front is never back (it is popped then).
    out: VecDeque<(u64, bool)>,
    /// The last number given out.
    last: u64,
    /// Calls waiting for every ticket up to their mark.
    waiting: Vec<(u64, Waker)>,
}

impl State {
    /// Every ticket up to `mark` is back.
    fn passed(&self, mark: u64) -> bool {
        self.out.front().is_none_or(|(n, _)| *n > mark)
    }
}

/// The connection's count of event batches handed to the event pool and
/// not yet delivered.
#[derive(Default)]
pub(crate) struct DeliveryFence {
    state: Mutex<State>,
}

/// One batch on its way to callbacks and waiters: back when dropped.
pub(crate) struct Ticket {
    fence: Arc<DeliveryFence>,
    number: u64,
}

impl Drop for Ticket {
    fn drop(&mut self) {
        self.fence.back(self.number);
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
    pub(crate) fn ticket(self: &Arc<Self>) -> Ticket {
        let mut s = lock(&self.state);
        s.last += 1;
        let number = s.last;
        s.out.push_back((number, false));
        Ticket { fence: Arc::clone(self), number }
    }

    /// The mark of an answer read now: the last ticket given out.
    pub(crate) fn mark(&self) -> u64 {
        lock(&self.state).last
    }

    fn back(&self, number: u64) {
        let woken = {
            let mut s = lock(&self.state);
            if let Ok(i) = s.out.binary_search_by_key(&number, |(n, _)| *n) {
                s.out[i].1 = true;
            }
            let before = s.out.len();
            while s.out.front().is_some_and(|(_, back)| *back) {
                s.out.pop_front();
            }
            if s.out.len() == before {
                return;
            }
            let mut woken = Vec::new();
            let mut i = 0;
            while i < s.waiting.len() {
                if s.passed(s.waiting[i].0) {
                    woken.push(s.waiting.swap_remove(i).1);
                } else {
                    i += 1;
                }
            }
            woken
        };
        woken.into_iter().for_each(Waker::wake);
    }

    /// Ready once every batch handed to the pool up to `mark` is delivered,
    /// or at once on a thread that is delivering events; else `cx` is woken
    /// when they are.
    pub(crate) fn poll_passed(&self, mark: u64, cx: &mut Context<'_>) -> Poll<()> {
        if DELIVERING.with(Cell::get) {
            return Poll::Ready(());
        }
        let mut s = lock(&self.state);
        if s.passed(mark) {
            return Poll::Ready(());
        }
        match s.waiting.iter_mut().find(|(m, w)| *m == mark && w.will_wake(cx.waker())) {
            Some(_) => {}
            None => s.waiting.push((mark, cx.waker().clone())),
        }
        Poll::Pending
    }

    /// Calls waiting now (for the tests' barriers).
    #[cfg(test)]
    pub(crate) fn waiting(&self) -> usize {
        lock(&self.state).waiting.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::task::Wake;

    struct Flag(std::sync::atomic::AtomicBool);
    impl Wake for Flag {
        fn wake(self: Arc<Self>) {
            self.0.store(true, std::sync::atomic::Ordering::SeqCst);
        }
    }

    fn poll(fence: &DeliveryFence, mark: u64, flag: &Arc<Flag>) -> Poll<()> {
        let waker = Waker::from(Arc::clone(flag));
        fence.poll_passed(mark, &mut Context::from_waker(&waker))
    }

    #[test]
    fn a_mark_passes_when_every_ticket_up_to_it_is_back_in_any_order() {
        let fence = Arc::new(DeliveryFence::default());
        let flag = Arc::new(Flag(Default::default()));
        assert!(poll(&fence, fence.mark(), &flag).is_ready(), "nothing out: passed");
        let a = fence.ticket();
        let b = fence.ticket();
        let mark = fence.mark();
        let c = fence.ticket();
        assert!(poll(&fence, mark, &flag).is_pending());
        drop(b);
        assert!(poll(&fence, mark, &flag).is_pending(), "a is still out");
        assert!(!flag.0.load(std::sync::atomic::Ordering::SeqCst));
        drop(a);
        assert!(flag.0.load(std::sync::atomic::Ordering::SeqCst), "woken when a came back");
        assert!(poll(&fence, mark, &flag).is_ready(), "c came after the mark");
        drop(c);
        assert_eq!(fence.waiting(), 0);
    }

    #[test]
    fn a_delivering_thread_does_not_wait() {
        let fence = Arc::new(DeliveryFence::default());
        let flag = Arc::new(Flag(Default::default()));
        let _t = fence.ticket();
        let during = {
            let _d = Delivering::start();
            poll(&fence, fence.mark(), &flag)
        };
        assert!(during.is_ready());
        assert!(poll(&fence, fence.mark(), &flag).is_pending(), "the mark is reset when delivery ends");
    }
}
