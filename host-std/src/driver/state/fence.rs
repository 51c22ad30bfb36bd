//! The delivery fence's book (wire order is API order: see the shell's
//! `driver/fence.rs`): event batches handed to the event pool are numbered
//! in the order the reader flushed them, across sessions; a call answered
//! after them waits until every number up to its mark is back.

use std::collections::VecDeque;
use std::task::Waker;

/// The numbers given out and not yet back, and the calls waiting.
#[derive(Default)]
pub(super) struct Fence {
    /// Tickets given out and not yet all back, by number: `(number, back)`.
    /// The front is never back (it is popped then).
    out: VecDeque<(u64, bool)>,
    /// The last number given out.
    last: u64,
    /// Calls waiting for every ticket up to their mark.
    waiting: Vec<(u64, Waker)>,
}

impl Fence {
    /// A number for a batch handed to the pool now.
    pub(super) fn ticket(&mut self) -> u64 {
        self.last += 1;
        self.out.push_back((self.last, false));
        self.last
    }

    /// The mark of an answer read now: the last number given out.
    pub(super) fn mark(&self) -> u64 {
        self.last
    }

    /// Every ticket up to `mark` is back.
    fn passed(&self, mark: u64) -> bool {
        self.out.front().is_none_or(|(n, _)| *n > mark)
    }

    /// Ticket `number` is back (its batch was delivered or dropped): the
    /// calls this lets through, to wake.
    pub(super) fn back(&mut self, number: u64) -> Vec<Waker> {
        if let Ok(i) = self.out.binary_search_by_key(&number, |(n, _)| *n) {
            self.out[i].1 = true;
        }
        let before = self.out.len();
        while self.out.front().is_some_and(|(_, back)| *back) {
            self.out.pop_front();
        }
        let mut woken = Vec::new();
        if self.out.len() == before {
            return woken;
        }
        let mut i = 0;
        while i < self.waiting.len() {
            if self.passed(self.waiting[i].0) {
                woken.push(self.waiting.swap_remove(i).1);
            } else {
                i += 1;
            }
        }
        woken
    }

    /// Whether every ticket up to `mark` is back; else `waker` is woken
    /// when they are (kept once however often it asks).
    pub(super) fn poll_passed(&mut self, mark: u64, waker: &Waker) -> bool {
        if self.passed(mark) {
            return true;
        }
        if !self.waiting.iter().any(|(m, w)| *m == mark && w.will_wake(waker)) {
            self.waiting.push((mark, waker.clone()));
        }
        false
    }

    /// Calls waiting now.
    #[cfg(test)]
    pub(super) fn waiting(&self) -> usize {
        self.waiting.len()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
    use std::sync::Arc;
    use std::task::{Wake, Waker};

    use super::Fence;

    struct Flag(AtomicBool);
    impl Wake for Flag {
        fn wake(self: Arc<Self>) {
            self.0.store(true, SeqCst);
        }
    }

    #[test]
    fn a_mark_passes_when_every_ticket_up_to_it_is_back_in_any_order() {
        let mut fence = Fence::default();
        let flag = Arc::new(Flag(AtomicBool::new(false)));
        let waker = Waker::from(Arc::clone(&flag));
        assert!(fence.poll_passed(fence.mark(), &waker), "nothing out: passed");
        let a = fence.ticket();
        let b = fence.ticket();
        let mark = fence.mark();
        let c = fence.ticket();
        assert!(!fence.poll_passed(mark, &waker));
        assert!(fence.back(b).is_empty(), "a is still out");
        assert!(!fence.poll_passed(mark, &waker));
        assert_eq!(fence.waiting(), 1, "one waker kept however often it asks");
        let woken = fence.back(a);
        assert_eq!(woken.len(), 1, "woken when a came back");
        woken.into_iter().for_each(Waker::wake);
        assert!(flag.0.load(SeqCst));
        assert!(fence.poll_passed(mark, &waker), "c came after the mark");
        assert!(fence.back(c).is_empty());
        assert_eq!(fence.waiting(), 0);
    }
}
