//! A connection's backlog: the bytes of events read and handed to
//! subscribers that have not taken them yet, and the rule of when the
//! host's reader stops reading over it. A consumer slower than the CLI
//! then holds the CLI back (its writes wait in the pipe or the socket)
//! instead of growing the host's memory without end.
//!
//! Sans-IO: the host counts what it hands out ([`Backlog::charge`]) and
//! what is taken ([`Backlog::release`]), asks before each read
//! ([`Backlog::poll_read`]) with its clock's time, and pauses its reads as
//! told. Both hosts (the std reader thread, the JS client's transport)
//! follow this one rule.
//!
//! Three things let the reader read on over a full backlog, so that the
//! pause never becomes a hang:
//! - a request waits for its answer (the answer is somewhere in the
//!   stream, maybe behind events whose subscriber is the caller itself);
//! - the connection ends or is being stopped;
//! - no byte was taken for [`BACKLOG_STALL_MS`]: a subscriber that reads
//!   nothing (a stream kept and never read) must not stop the others. The
//!   reader then reads on without pausing until the backlog has fallen to
//!   half the bound again ([`ReadGate::Overrun`]: the host says so in its
//!   log).

use crate::limits::{BACKLOG_STALL_MS, MAX_BACKLOG_BYTES};

/// The backlog's figures.
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

/// What the reader does now ([`Backlog::poll_read`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadGate {
    /// Read.
    Read,
    /// Do not read. Ask again when bytes are taken
    /// ([`Backlog::release`] says when it matters), when a request is
    /// made or the connection ends, and at `until_ms` at the latest.
    Wait {
        /// When the stall would be reached, on the host's clock.
        until_ms: u64,
    },
    /// Read on over the bound: nothing was taken for [`BACKLOG_STALL_MS`]
    /// while `bytes` were held. No pause again until half is taken.
    Overrun {
        /// The bytes held.
        bytes: usize,
    },
}

/// The count and the reader's pause (see the module's text).
#[derive(Debug, Clone)]
pub struct Backlog {
    stats: BacklogStats,
    /// Read on past the bound after a stall, until half is taken.
    overrun: bool,
    /// The reader is paused.
    paused: bool,
    /// While paused: the fewest bytes held since the pause began, and when
    /// that was seen (the stall counts from then).
    low: usize,
    since_ms: u64,
    /// How long a pause lasts with nothing taken before the reader reads
    /// on ([`BACKLOG_STALL_MS`] unless [`with_stall`](Self::with_stall)).
    stall_ms: u64,
}

impl Default for Backlog {
    fn default() -> Self {
        Backlog::new()
    }
}

impl Backlog {
    /// An empty backlog.
    pub const fn new() -> Self {
        Backlog {
            stats: BacklogStats { bytes: 0, peak_bytes: 0, pauses: 0, overruns: 0 },
            overrun: false,
            paused: false,
            low: 0,
            since_ms: 0,
            stall_ms: BACKLOG_STALL_MS,
        }
    }

    /// An empty backlog whose reader reads on after `stall_ms` with nothing
    /// taken, rather than [`BACKLOG_STALL_MS`].
    pub const fn with_stall(stall_ms: u64) -> Self {
        let mut b = Backlog::new();
        b.stall_ms = stall_ms;
        b
    }

    /// From now on, the reader reads on after `stall_ms` with nothing taken.
    pub fn set_stall(&mut self, stall_ms: u64) {
        self.stall_ms = stall_ms;
    }

    /// `bytes` more are held.
    pub fn charge(&mut self, bytes: usize) {
        let s = &mut self.stats;
        s.bytes = s.bytes.saturating_add(bytes);
        s.peak_bytes = s.peak_bytes.max(s.bytes);
    }

    /// `bytes` were taken. True when a paused reader must ask again now:
    /// the backlog has fallen to half the bound (this also ends a read-on
    /// after a stall).
    pub fn release(&mut self, bytes: usize) -> bool {
        let before = self.stats.bytes;
        self.stats.bytes = before.saturating_sub(bytes);
        let half = MAX_BACKLOG_BYTES / 2;
        if self.stats.bytes <= half && before > half {
            self.overrun = false;
            return self.paused;
        }
        false
    }

    /// Whether the reader may read now. `read_on`: a request waits for its
    /// answer, or the connection ends or is being stopped. `now_ms`: the
    /// host's clock, in milliseconds.
    pub fn poll_read(&mut self, read_on: bool, now_ms: u64) -> ReadGate {
        let bytes = self.stats.bytes;
        if !self.paused {
            if bytes <= MAX_BACKLOG_BYTES || self.overrun || read_on {
                return ReadGate::Read;
            }
            self.stats.pauses += 1;
            self.paused = true;
        } else if bytes <= MAX_BACKLOG_BYTES / 2 || read_on {
            self.paused = false;
            return ReadGate::Read;
        } else if bytes >= self.low {
            if now_ms.saturating_sub(self.since_ms) >= self.stall_ms {
                self.paused = false;
                self.overrun = true;
                self.stats.overruns += 1;
                return ReadGate::Overrun { bytes };
            }
            return ReadGate::Wait { until_ms: self.since_ms.saturating_add(self.stall_ms) };
        }
        // A pause begins, or bytes were taken: the stall counts from now.
        (self.low, self.since_ms) = (bytes, now_ms);
        ReadGate::Wait { until_ms: now_ms.saturating_add(self.stall_ms) }
    }

    /// Whether [`poll_read`](Self::poll_read) may say other than `Read`:
    /// the backlog is over its bound and not read past, or the reader is
    /// paused. When false, the reader reads without asking (and without
    /// working out `read_on`).
    pub fn is_full(&self) -> bool {
        self.paused || (self.stats.bytes > MAX_BACKLOG_BYTES && !self.overrun)
    }

    /// The figures.
    pub fn stats(&self) -> BacklogStats {
        self.stats
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FULL: usize = MAX_BACKLOG_BYTES + 1;
    const HALF: usize = MAX_BACKLOG_BYTES / 2;

    #[test]
    fn a_stall_of_its_own_is_waited_for() {
        let mut b = Backlog::with_stall(BACKLOG_STALL_MS * 5);
        b.charge(FULL);
        assert_eq!(b.poll_read(false, 0), ReadGate::Wait { until_ms: BACKLOG_STALL_MS * 5 });
        assert!(matches!(b.poll_read(false, BACKLOG_STALL_MS), ReadGate::Wait { .. }), "not the default stall");
        assert_eq!(b.poll_read(false, BACKLOG_STALL_MS * 5), ReadGate::Overrun { bytes: FULL });
    }

    #[test]
    fn within_the_bound_the_reader_reads() {
        let mut b = Backlog::new();
        b.charge(MAX_BACKLOG_BYTES);
        assert!(!b.is_full());
        assert_eq!(b.poll_read(false, 0), ReadGate::Read);
        assert_eq!(b.stats().pauses, 0);
    }

    #[test]
    fn over_the_bound_it_waits_until_half_is_taken() {
        let mut b = Backlog::new();
        b.charge(FULL);
        assert!(b.is_full());
        assert_eq!(b.poll_read(false, 10), ReadGate::Wait { until_ms: 10 + BACKLOG_STALL_MS });
        assert!(b.is_full(), "paused");
        // Taken, but not down to half: still waiting, and no wake-up.
        assert!(!b.release(FULL - HALF - 1));
        assert_eq!(b.poll_read(false, 20), ReadGate::Wait { until_ms: 20 + BACKLOG_STALL_MS });
        // Down to half: the reader is told to look, and reads.
        assert!(b.release(1));
        assert_eq!(b.poll_read(false, 30), ReadGate::Read);
        assert!(!b.is_full(), "no longer paused");
        assert_eq!(b.stats(), BacklogStats { bytes: HALF, peak_bytes: FULL, pauses: 1, overruns: 0 });
    }

    #[test]
    fn a_request_waiting_or_the_end_lets_it_read_on_and_is_no_pause_when_already_so() {
        let mut b = Backlog::new();
        b.charge(FULL);
        assert_eq!(b.poll_read(true, 0), ReadGate::Read);
        assert_eq!(b.stats().pauses, 0, "read on at once: no pause");
        assert!(matches!(b.poll_read(false, 1), ReadGate::Wait { .. }));
        assert_eq!(b.poll_read(true, 2), ReadGate::Read, "a request made during the pause");
        assert_eq!(b.stats().pauses, 1);
        assert_eq!(b.stats().overruns, 0);
    }

    #[test]
    fn a_stall_reads_past_once_and_no_pause_again_until_half_is_taken() {
        let mut b = Backlog::new();
        b.charge(FULL);
        assert!(matches!(b.poll_read(false, 0), ReadGate::Wait { .. }));
        assert!(matches!(b.poll_read(false, BACKLOG_STALL_MS - 1), ReadGate::Wait { .. }));
        assert_eq!(b.poll_read(false, BACKLOG_STALL_MS), ReadGate::Overrun { bytes: FULL });
        b.charge(100);
        assert!(!b.is_full(), "reading past");
        assert_eq!(b.poll_read(false, BACKLOG_STALL_MS + 1), ReadGate::Read);
        assert_eq!((b.stats().pauses, b.stats().overruns), (1, 1));
        // Taken down to half, then full again: the reader pauses again.
        assert!(!b.release(FULL + 100 - HALF), "nobody waits: no wake-up");
        b.charge(FULL - HALF);
        assert!(b.is_full());
        assert!(matches!(b.poll_read(false, 5_000), ReadGate::Wait { .. }));
        assert_eq!((b.stats().pauses, b.stats().overruns), (2, 1));
    }

    #[test]
    fn bytes_taken_put_the_stall_off() {
        let mut b = Backlog::new();
        b.charge(FULL + 10);
        assert!(matches!(b.poll_read(false, 0), ReadGate::Wait { .. }));
        assert!(!b.release(10));
        // Seen taken at 600: the stall is reached at 1,600, not 1,000.
        assert_eq!(b.poll_read(false, 600), ReadGate::Wait { until_ms: 600 + BACKLOG_STALL_MS });
        assert_eq!(b.poll_read(false, BACKLOG_STALL_MS), ReadGate::Wait { until_ms: 600 + BACKLOG_STALL_MS });
        assert_eq!(b.poll_read(false, 600 + BACKLOG_STALL_MS), ReadGate::Overrun { bytes: FULL });
    }

    #[test]
    fn counts_never_wrap() {
        let mut b = Backlog::new();
        b.charge(5);
        assert!(!b.release(10));
        assert_eq!(b.stats().bytes, 0);
        b.charge(usize::MAX);
        b.charge(1);
        assert_eq!(b.stats().bytes, usize::MAX);
    }
}
