//! The connection's backlog: bytes of events read and handed to
//! subscribers that have not all taken them yet. The reader stops reading
//! while it is over [`MAX_BACKLOG_BYTES`], so a consumer slower than the
//! CLI holds the CLI back (its writes wait in the pipe or the socket)
//! instead of growing this process's memory without end.
//!
//! Three things let the reader read on while the backlog is full, so that
//! the pause never becomes a hang:
//! - a request waits for its answer (the answer is somewhere in the
//!   stream, maybe behind events whose subscriber is the caller itself);
//! - the connection ends or is being stopped;
//! - no byte of the backlog was taken for [`BACKLOG_STALL_MS`]: a
//!   subscriber that reads nothing (a stream kept and never read) must not
//!   stop the others. The reader then reads on without pausing until the
//!   backlog has fallen to half the bound again, and says so in the log.
//!
//! Events kept for a session's first subscriber are not counted: they
//! have bounds of their own ([`MAX_KEPT_BYTES`](crate::MAX_KEPT_BYTES)).

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

pub use copilot_core::limits::{BACKLOG_STALL_MS, MAX_BACKLOG_BYTES};

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// The backlog's figures (`Client::backlog`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BacklogStats {
    /// Bytes held now for subscribers that have not taken them.
    pub bytes: usize,
    /// The most bytes held at once.
    pub peak_bytes: usize,
    /// Times the reader stopped reading because the backlog was full.
    pub pauses: u64,
    /// Times it read on over the bound because nothing was taken for
    /// [`BACKLOG_STALL_MS`].
    pub overruns: u64,
}

/// The connection's count of bytes held, and the reader's pause.
#[derive(Default)]
pub(crate) struct Backlog {
    bytes: AtomicUsize,
    peak: AtomicUsize,
    pauses: AtomicU64,
    overruns: AtomicU64,
    /// The reader is paused, or about to be: what frees room or asks for
    /// reading must wake it.
    paused: AtomicBool,
    /// Over the bound after a stall: no pause until it has fallen to half.
    overrun: AtomicBool,
    /// Bumped by every wake-up, so that one between the reader's checks
    /// and its wait is not lost.
    epoch: Mutex<u64>,
    wake: Condvar,
}

/// Bytes of a batch counted in the backlog until it is dropped.
pub(crate) struct Charge {
    backlog: Arc<Backlog>,
    bytes: usize,
}

impl Drop for Charge {
    fn drop(&mut self) {
        let before = self.backlog.bytes.fetch_sub(self.bytes, Ordering::SeqCst);
        let after = before - self.bytes;
        if after <= MAX_BACKLOG_BYTES / 2 && before > MAX_BACKLOG_BYTES / 2 {
            self.backlog.overrun.store(false, Ordering::SeqCst);
            self.backlog.nudge();
        }
    }
}

impl Backlog {
    /// Counts `bytes` until the returned charge is dropped.
    pub(crate) fn charge(self: &Arc<Self>, bytes: usize) -> Charge {
        let now = self.bytes.fetch_add(bytes, Ordering::SeqCst) + bytes;
        self.peak.fetch_max(now, Ordering::Relaxed);
        Charge { backlog: Arc::clone(self), bytes }
    }

    pub(crate) fn stats(&self) -> BacklogStats {
        BacklogStats {
            bytes: self.bytes.load(Ordering::SeqCst),
            peak_bytes: self.peak.load(Ordering::Relaxed),
            pauses: self.pauses.load(Ordering::Relaxed),
            overruns: self.overruns.load(Ordering::Relaxed),
        }
    }

    /// Wakes a paused reader to look again (a request was made, room was
    /// made, the connection ends). Costs one atomic load when none is.
    pub(crate) fn nudge(&self) {
        if self.paused.load(Ordering::SeqCst) {
            *lock(&self.epoch) += 1;
            self.wake.notify_all();
        }
    }

    /// Returns when the reader may read again: at once if the backlog is
    /// within its bound; else once it has fallen to half of it, or
    /// `read_on()` says a request waits or the connection ends, or nothing
    /// was taken for [`BACKLOG_STALL_MS`]. `label` names the connection in
    /// the log.
    pub(crate) fn wait_for_room(&self, label: &str, read_on: impl Fn() -> bool) {
        if self.bytes.load(Ordering::SeqCst) <= MAX_BACKLOG_BYTES || self.overrun.load(Ordering::SeqCst) {
            return;
        }
        self.paused.store(true, Ordering::SeqCst);
        // Counted when the reader does wait, not when a waiting request
        // or the connection's end lets it read on at once.
        let mut counted = false;
        let stall = Duration::from_millis(BACKLOG_STALL_MS);
        let (mut low, mut since) = (usize::MAX, Instant::now());
        loop {
            let epoch = *lock(&self.epoch);
            let bytes = self.bytes.load(Ordering::SeqCst);
            if bytes <= MAX_BACKLOG_BYTES / 2 || read_on() {
                break;
            }
            if bytes < low {
                (low, since) = (bytes, Instant::now());
            } else if since.elapsed() >= stall {
                self.overruns.fetch_add(1, Ordering::Relaxed);
                self.overrun.store(true, Ordering::SeqCst);
                log::warn!(
                    "{label}: {bytes} bytes of events wait for subscribers and none was taken for \
                     {BACKLOG_STALL_MS} ms (a stream kept and not read?): reading on"
                );
                break;
            }
            if !counted {
                self.pauses.fetch_add(1, Ordering::SeqCst);
                counted = true;
            }
            let guard = lock(&self.epoch);
            if *guard == epoch {
                let left = stall.saturating_sub(since.elapsed());
                drop(self.wake.wait_timeout(guard, left));
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
        while backlog.pauses.load(Ordering::SeqCst) < nth && !returned.load(Ordering::SeqCst) {
            thread::yield_now();
        }
    }

    #[test]
    fn the_reader_waits_while_full_and_goes_on_when_half_is_taken() {
        let backlog = Arc::new(Backlog::default());
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
        assert_eq!(backlog.stats().bytes, MAX_BACKLOG_BYTES / 2);
        drop(first);
        assert_eq!(backlog.stats().bytes, 0);
        assert_eq!(backlog.stats().peak_bytes, MAX_BACKLOG_BYTES + 1);
    }

    #[test]
    fn a_request_waiting_for_its_answer_lets_the_reader_read_on() {
        let backlog = Arc::new(Backlog::default());
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
        assert_eq!(backlog.stats().overruns, 0, "woken by the request, not by the stall");
    }

    #[test]
    fn a_backlog_nobody_takes_from_is_read_past_once_and_not_paused_on_again_until_half_is_taken() {
        let backlog = Arc::new(Backlog::default());
        let full = backlog.charge(MAX_BACKLOG_BYTES + 1);
        backlog.wait_for_room("test", || false);
        assert_eq!((backlog.stats().pauses, backlog.stats().overruns), (1, 1));
        let more = backlog.charge(1);
        backlog.wait_for_room("test", || false);
        assert_eq!(backlog.stats().pauses, 1, "no pause again while nothing was taken");
        drop(full);
        drop(more);
        // Full again: the reader pauses again (it read past only until the
        // backlog had been taken), and goes on when this is taken too.
        let again = backlog.charge(MAX_BACKLOG_BYTES + 1);
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
        assert_eq!(backlog.stats().overruns, 1, "woken by the room made, not by a second stall");
    }

    #[test]
    fn a_request_already_waiting_is_not_counted_as_a_pause() {
        let backlog = Arc::new(Backlog::default());
        let _full = backlog.charge(MAX_BACKLOG_BYTES + 1);
        backlog.wait_for_room("test", || true);
        assert_eq!(backlog.stats().pauses, 0, "the reader read on at once");
    }
}
