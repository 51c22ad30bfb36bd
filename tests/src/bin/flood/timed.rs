//! Timing one flood: wall and CPU seconds, peak RSS, and the largest
//! backlog of events routed by the client and not yet taken by its
//! consumers, sampled while the flood runs.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

/// How often the backlog is sampled.
const SAMPLE_EVERY: Duration = Duration::from_millis(5);
/// Linux reports utime and stime in clock ticks of 1/100 s (USER_HZ) on
/// every architecture it runs on.
const TICKS_PER_SECOND: f64 = 100.0;

/// Events taken so far by each consumer of a run (one, or three for a
/// mixed run). Each counter has one writer: plain stores, no locked adds.
/// A clone shares the counters (a callback holds one).
#[derive(Clone)]
pub struct Consumers(Arc<[AtomicU64]>);

impl Consumers {
    /// Counters for `n` consumers, all at 0.
    pub fn new(n: usize) -> Consumers {
        Consumers((0..n).map(|_| AtomicU64::new(0)).collect())
    }

    /// Consumer `i` has taken `taken` events in all.
    pub fn taken(&self, i: usize, taken: u64) {
        self.0[i].store(taken, Ordering::Relaxed);
    }

    /// The events taken by the consumer furthest behind.
    pub fn slowest(&self) -> u64 {
        self.0.iter().map(|c| c.load(Ordering::Relaxed)).min().unwrap_or(0)
    }
}

/// What [`timed`] measured.
pub struct Timing {
    /// Wall seconds of the flood.
    pub seconds: f64,
    /// User plus system CPU seconds of this process, all threads.
    pub cpu_seconds: f64,
    /// `VmHWM` before the flood, in kB.
    pub rss_before_kb: u64,
    /// `VmHWM` after the flood, in kB.
    pub peak_rss_kb: u64,
    /// The most events seen routed and not yet taken by the slowest consumer.
    pub max_backlog: u64,
}

/// Runs `flood` (which sends the prompt and returns once its consumers are
/// done) on this thread while another samples `routed() - consumers.slowest()`.
/// Allocate what the consumers need before calling: the RSS baseline is
/// taken here.
pub fn timed<R>(routed: &(dyn Fn() -> u64 + Sync), consumers: &Consumers, flood: impl FnOnce() -> R) -> (R, Timing) {
    let rss_before_kb = peak_rss_kb();
    let cpu_before = cpu_seconds();
    let routed_before = routed();
    let finished = AtomicBool::new(false);
    let start = Instant::now();
    let (out, max_backlog) = thread::scope(|scope| {
        let sampler = scope.spawn(|| {
            let mut max_backlog = 0;
            while !finished.load(Ordering::Relaxed) {
                // Includes the answer to session.send: off by one at most.
                let routed = routed() - routed_before;
                max_backlog = max_backlog.max(routed.saturating_sub(consumers.slowest()));
                thread::park_timeout(SAMPLE_EVERY);
            }
            max_backlog
        });
        let out = flood();
        finished.store(true, Ordering::Relaxed);
        sampler.thread().unpark();
        (out, sampler.join().expect("the backlog sampler panicked"))
    });
    let seconds = start.elapsed().as_secs_f64();
    let timing = Timing {
        seconds,
        cpu_seconds: cpu_seconds() - cpu_before,
        rss_before_kb,
        peak_rss_kb: peak_rss_kb(),
        max_backlog,
    };
    (out, timing)
}

/// `VmHWM` (peak resident set) of this process in kB; 0 where there is no
/// `/proc`.
pub fn peak_rss_kb() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmHWM:"))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

/// User plus system CPU time of this process (all its threads) in seconds;
/// 0 where there is no `/proc`.
pub fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // The command name, in parentheses, may hold spaces: count the fields
    // after its closing parenthesis. utime and stime are fields 14 and 15.
    let Some((_, after_name)) = stat.rsplit_once(')') else { return 0.0 };
    let fields: Vec<&str> = after_name.split_whitespace().collect();
    let ticks = |i: usize| fields.get(i).and_then(|f| f.parse::<u64>().ok()).unwrap_or(0);
    // Field 3 (state) is fields[0], so field n is fields[n - 3].
    (ticks(14 - 3) + ticks(15 - 3)) as f64 / TICKS_PER_SECOND
}

/// The 1-minute load average, as `/proc/loadavg` gives it ("?" without it):
/// the machine is shared, and the figures mean little without it.
pub fn load_average() -> String {
    let text = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    text.split_whitespace().next().unwrap_or("?").to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_backlog_is_the_slowest_consumers() {
        let consumers = Consumers::new(3);
        consumers.taken(0, 10);
        consumers.taken(1, 4);
        consumers.taken(2, 7);
        assert_eq!(consumers.slowest(), 4);
        assert_eq!(Consumers::new(0).slowest(), 0);
    }
}
