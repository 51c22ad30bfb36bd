//! The connection's backlog: bytes of events read and handed to
//! subscribers that have not all taken them yet. The rule of when the
//! reader stops reading over it, and what lets it read on, is the core's
//! ([`copilot_core::Backlog`]); this is its std side: the count shared by
//! the reader and the threads that drop batches, and the reader's wait.
//!
//! Events kept for a session's first subscriber are not counted: they
//! have bounds of their own ([`MAX_KEPT_BYTES`](crate::MAX_KEPT_BYTES)).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use copilot_core::ReadGate;
pub use copilot_core::{
    limits::{BACKLOG_STALL_MS, MAX_BACKLOG_BYTES},
    BacklogStats,
};

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// The connection's count of bytes held, and the reader's pause.
pub(crate) struct Backlog {
    core: Mutex<copilot_core::Backlog>,
    /// The reader is paused, or about to be: what asks for reading must
    /// wake it (a load of this when it is not).
    paused: AtomicBool,
    /// Bumped by every wake-up, so that one between the reader's checks
    /// and its wait is not lost.
    epoch: Mutex<u64>,
    wake: Condvar,
    /// The origin of the core's clock.
    start: Instant,
    /// Waits that ended at their time rather than by a wake-up: what the
    /// tests tell the two apart by.
    #[cfg(test)]
    timed_out: std::sync::atomic::AtomicU64,
}

impl Default for Backlog {
    fn default() -> Self {
        Backlog::with_stall(Duration::from_millis(BACKLOG_STALL_MS))
    }
}

impl Backlog {
    /// A backlog whose reader reads on after `stall` with nothing taken.
    pub(crate) fn with_stall(stall: Duration) -> Self {
        let stall = u64::try_from(stall.as_millis()).unwrap_or(u64::MAX);
        Backlog {
            core: Mutex::new(copilot_core::Backlog::with_stall(stall)),
            paused: AtomicBool::new(false),
            epoch: Mutex::new(0),
            wake: Condvar::new(),
            start: Instant::now(),
            #[cfg(test)]
            timed_out: Default::default(),
        }
    }
}

/// Bytes of a batch counted in the backlog until it is dropped.
pub(crate) struct Charge {
    backlog: Arc<Backlog>,
    bytes: usize,
}

impl Drop for Charge {
    fn drop(&mut self) {
        if lock(&self.backlog.core).release(self.bytes) {
            self.backlog.nudge();
        }
    }
}

impl Backlog {
    /// Counts `bytes` until the returned charge is dropped.
    pub(crate) fn charge(self: &Arc<Self>, bytes: usize) -> Charge {
        lock(&self.core).charge(bytes);
        Charge { backlog: Arc::clone(self), bytes }
    }

    pub(crate) fn stats(&self) -> BacklogStats {
        lock(&self.core).stats()
    }

    /// Wakes a paused reader to look again (a request was made, room was
    /// made, the connection ends). Costs one atomic load when none is.
    pub(crate) fn nudge(&self) {
        if self.paused.load(Ordering::SeqCst) {
            *lock(&self.epoch) += 1;
            self.wake.notify_all();
        }
    }

    fn now_ms(&self) -> u64 {
        u64::try_from(self.start.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// Returns when the reader may read again, as the core rules:
    /// `read_on()` says whether a request waits for its answer or the
    /// connection ends (it is called with no lock of this held). `label`
    /// names the connection in the log.
    pub(crate) fn wait_for_room(&self, label: &str, read_on: impl Fn() -> bool) {
        if !lock(&self.core).is_full() {
            return;
        }
        self.paused.store(true, Ordering::SeqCst);
        loop {
            let epoch = *lock(&self.epoch);
            let read_on = read_on();
            let now = self.now_ms();
            let until_ms = match lock(&self.core).poll_read(read_on, now) {
                ReadGate::Read => break,
                ReadGate::Overrun { bytes } => {
                    log::warn!(
                        "{label}: {bytes} bytes of events wait for subscribers and none was taken for \
                         {BACKLOG_STALL_MS} ms (a stream kept and not read?): reading on"
                    );
                    break;
                }
                ReadGate::Wait { until_ms } => until_ms,
            };
            let guard = lock(&self.epoch);
            if *guard == epoch {
                let wait = Duration::from_millis(until_ms.saturating_sub(now));
                let (_guard, _result) = self.wake.wait_timeout(guard, wait).unwrap_or_else(|p| p.into_inner());
                #[cfg(test)]
                if _result.timed_out() {
                    self.timed_out.fetch_add(1, Ordering::SeqCst);
                }
            }
        }
        self.paused.store(false, Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Barrier;
    use std::thread;

    use super::*;

    /// Returns once the reader has counted its `nth` pause (it is about to
    /// wait, and what frees room from now on wakes it), or has returned
    /// without it: a reader that does not pause fails its test instead of
    /// hanging it.
    fn until_paused(backlog: &Backlog, nth: u64, returned: &AtomicBool) {
        while backlog.stats().pauses < nth && !returned.load(Ordering::SeqCst) {
            thread::yield_now();
        }
    }

    /// A stall no test waits out: the room made or the request ends each
    /// wait, whatever the machine's load (it only keeps a lost wake-up from
    /// hanging a test: that fails on `timed_out` instead).
    const GUARD: Duration = Duration::from_secs(60);

    #[test]
    fn the_reader_waits_while_full_and_goes_on_when_half_is_taken() {
        let backlog = Arc::new(Backlog::with_stall(GUARD));
        let first = backlog.charge(MAX_BACKLOG_BYTES / 2);
        let second = backlog.charge(MAX_BACKLOG_BYTES / 2 + 1);
        let barrier = Barrier::new(2);
        let (taken, returned) = (AtomicBool::new(false), AtomicBool::new(false));
        thread::scope(|s| {
            s.spawn(|| {
                barrier.wait();
                until_paused(&backlog, 1, &returned);
                taken.store(true, Ordering::SeqCst);
                drop(second);
            });
            barrier.wait();
            backlog.wait_for_room("test", || false);
            returned.store(true, Ordering::SeqCst);
            assert!(taken.load(Ordering::SeqCst), "the reader went on before room was made");
        });
        assert_eq!(backlog.stats().pauses, 1);
        assert_eq!(backlog.timed_out.load(Ordering::SeqCst), 0, "woken by the room made, not by its time");
        assert_eq!(backlog.stats().bytes, MAX_BACKLOG_BYTES / 2);
        drop(first);
        assert_eq!(backlog.stats().bytes, 0);
        assert_eq!(backlog.stats().peak_bytes, MAX_BACKLOG_BYTES + 1);
    }

    #[test]
    fn a_request_waiting_for_its_answer_lets_the_reader_read_on() {
        let backlog = Arc::new(Backlog::with_stall(GUARD));
        let _full = backlog.charge(MAX_BACKLOG_BYTES + 1);
        let (request, returned) = (AtomicBool::new(false), AtomicBool::new(false));
        let barrier = Barrier::new(2);
        thread::scope(|s| {
            s.spawn(|| {
                barrier.wait();
                until_paused(&backlog, 1, &returned);
                request.store(true, Ordering::SeqCst);
                backlog.nudge();
            });
            barrier.wait();
            backlog.wait_for_room("test", || request.load(Ordering::SeqCst));
            returned.store(true, Ordering::SeqCst);
        });
        assert_eq!(backlog.stats().pauses, 1, "the reader waited for the request");
        assert_eq!(backlog.timed_out.load(Ordering::SeqCst), 0, "woken by the request, not by its time");
        assert_eq!(backlog.stats().overruns, 0);
    }

    #[test]
    fn a_backlog_nobody_takes_from_is_read_past_once_and_not_paused_on_again_until_half_is_taken() {
        // A short stall, which the first pause waits out.
        let backlog = Arc::new(Backlog::with_stall(Duration::from_millis(50)));
        let full = backlog.charge(MAX_BACKLOG_BYTES + 1);
        backlog.wait_for_room("test", || false);
        assert_eq!((backlog.stats().pauses, backlog.stats().overruns), (1, 1));
        let more = backlog.charge(1);
        backlog.wait_for_room("test", || false);
        assert_eq!(backlog.stats().pauses, 1, "no pause again while nothing was taken");
        drop(full);
        drop(more);
        // Full again: the reader pauses again (it read past only until the
        // backlog had been taken), and goes on when this is taken too; now
        // with the guard's stall, so that only the room made ends it.
        backlog.core.lock().unwrap().set_stall(60_000);
        let again = backlog.charge(MAX_BACKLOG_BYTES + 1);
        let stalled = backlog.timed_out.load(Ordering::SeqCst);
        assert!(stalled >= 1, "the first pause ended at its time");
        let returned = AtomicBool::new(false);
        thread::scope(|s| {
            s.spawn(|| {
                until_paused(&backlog, 2, &returned);
                drop(again);
            });
            backlog.wait_for_room("test", || false);
            returned.store(true, Ordering::SeqCst);
        });
        assert_eq!(backlog.stats().pauses, 2, "pausing again once the backlog was taken");
        assert_eq!(backlog.stats().overruns, 1, "no second stall");
        assert_eq!(backlog.timed_out.load(Ordering::SeqCst), stalled, "woken by the room made, not by its time");
    }

    #[test]
    fn a_request_already_waiting_is_not_counted_as_a_pause() {
        let backlog = Arc::new(Backlog::default());
        let _full = backlog.charge(MAX_BACKLOG_BYTES + 1);
        backlog.wait_for_room("test", || true);
        assert_eq!(backlog.stats().pauses, 0, "the reader read on at once");
    }
}
