//! One run's figures, as a child reports them to the parent (one JSON line)
//! and as the parent prints them.

use serde_json::{json, Value};

use crate::check::Tally;
use crate::timed::Timing;

/// What one run (a style or a floor over one transport) found.
#[derive(Debug, Clone, PartialEq)]
pub struct Measurement {
    /// The style or floor: `on`, `events`, ..., `framing`, `serde`.
    pub run: String,
    /// `stdio` or `tcp`.
    pub transport: String,
    /// Deltas flooded.
    pub events: usize,
    /// Wall seconds, the time and memory figures of the flood.
    pub seconds: f64,
    /// CPU seconds of the client process.
    pub cpu_seconds: f64,
    /// `VmHWM` before the send, kB.
    pub rss_before_kb: u64,
    /// `VmHWM` after the flood, kB.
    pub peak_rss_kb: u64,
    /// The most events seen routed by the reader and not yet consumed.
    pub max_backlog: u64,
    /// The delivery faults found, summed over the run's consumers.
    pub tally: Tally,
    /// Frames decoded, body bytes, malformed frames, frames for unknown
    /// sessions (the router's counters; a floor counts its own frames).
    pub frames: u64,
    /// Body bytes of those frames.
    pub bytes: u64,
    /// Frames the client could not read.
    pub malformed: u64,
    /// Events for sessions the client does not know.
    pub unknown_session: u64,
}

impl Measurement {
    /// A run's figures from its timing and checks.
    pub fn new(run: &str, transport: &str, events: usize, timing: &Timing, tally: Tally) -> Measurement {
        Measurement {
            run: run.into(),
            transport: transport.into(),
            events,
            seconds: timing.seconds,
            cpu_seconds: timing.cpu_seconds,
            rss_before_kb: timing.rss_before_kb,
            peak_rss_kb: timing.peak_rss_kb,
            max_backlog: timing.max_backlog,
            tally,
            frames: 0,
            bytes: 0,
            malformed: 0,
            unknown_session: 0,
        }
    }

    /// Every event once, in order, and the flood finished.
    pub fn passed(&self) -> bool {
        self.tally.passed()
    }

    /// Deltas a second.
    pub fn events_per_second(&self) -> f64 {
        self.events as f64 / self.seconds
    }

    /// The child's report.
    pub fn to_json(&self) -> Value {
        json!({
            "run": self.run,
            "transport": self.transport,
            "events": self.events,
            "seconds": self.seconds,
            "cpu_seconds": self.cpu_seconds,
            "rss_before_kb": self.rss_before_kb,
            "peak_rss_kb": self.peak_rss_kb,
            "max_backlog": self.max_backlog,
            "lost": self.tally.lost,
            "out_of_order": self.tally.out_of_order,
            "duplicates": self.tally.duplicates,
            "corrupt": self.tally.corrupt,
            "idle": self.tally.idle,
            "frames": self.frames,
            "bytes": self.bytes,
            "malformed": self.malformed,
            "unknown_session": self.unknown_session,
        })
    }

    /// The parent's reading of a child's report.
    pub fn from_json(v: &Value) -> Result<Measurement, String> {
        let u64_of = |key: &str| v[key].as_u64().ok_or_else(|| format!("result without {key}: {v}"));
        let f64_of = |key: &str| v[key].as_f64().ok_or_else(|| format!("result without {key}: {v}"));
        let str_of = |key: &str| v[key].as_str().map(str::to_owned).ok_or_else(|| format!("result without {key}: {v}"));
        Ok(Measurement {
            run: str_of("run")?,
            transport: str_of("transport")?,
            events: u64_of("events")? as usize,
            seconds: f64_of("seconds")?,
            cpu_seconds: f64_of("cpu_seconds")?,
            rss_before_kb: u64_of("rss_before_kb")?,
            peak_rss_kb: u64_of("peak_rss_kb")?,
            max_backlog: u64_of("max_backlog")?,
            tally: Tally {
                lost: u64_of("lost")? as usize,
                out_of_order: u64_of("out_of_order")? as usize,
                duplicates: u64_of("duplicates")? as usize,
                corrupt: u64_of("corrupt")? as usize,
                idle: v["idle"].as_bool().ok_or_else(|| format!("result without idle: {v}"))?,
            },
            frames: u64_of("frames")?,
            bytes: u64_of("bytes")?,
            malformed: u64_of("malformed")?,
            unknown_session: u64_of("unknown_session")?,
        })
    }

    /// The detail line under the table.
    pub fn describe(&self) -> String {
        let t = &self.tally;
        format!(
            "{} {}: cpu {:.2} s ({:.0}% of wall), VmHWM {:.1} -> {:.1} MB, largest backlog {} events; \
             {} frames, {:.1} MB of bodies, {} malformed, {} for unknown sessions; \
             {} out of order, {} duplicated, {} corrupt, idle {}",
            self.run,
            self.transport,
            self.cpu_seconds,
            100.0 * self.cpu_seconds / self.seconds,
            mb(self.rss_before_kb),
            mb(self.peak_rss_kb),
            self.max_backlog,
            self.frames,
            self.bytes as f64 / 1e6,
            self.malformed,
            self.unknown_session,
            t.out_of_order,
            t.duplicates,
            t.corrupt,
            if t.idle { "received" } else { "NEVER received" },
        )
    }
}

/// One row per run and transport, in the order first seen: the round with
/// the median seconds (of an even count, the slower middle one), with the
/// highest peak RSS and the delivery faults of every round.
pub fn medians(measurements: Vec<Measurement>) -> Vec<Measurement> {
    let mut groups: Vec<Vec<Measurement>> = Vec::new();
    for m in measurements {
        match groups.iter_mut().find(|g| g[0].run == m.run && g[0].transport == m.transport) {
            Some(group) => group.push(m),
            None => groups.push(vec![m]),
        }
    }
    groups
        .into_iter()
        .map(|mut group| {
            group.sort_by(|a, b| a.seconds.total_cmp(&b.seconds));
            let peak_rss_kb = group.iter().map(|m| m.peak_rss_kb).max().unwrap_or(0);
            let tally = group.iter().map(|m| m.tally).fold(Tally::NONE, Tally::add);
            let mut median = group.swap_remove(group.len() / 2);
            (median.peak_rss_kb, median.tally) = (peak_rss_kb, tally);
            median
        })
        .collect()
}

/// kB as MB.
pub fn mb(kb: u64) -> f64 {
    kb as f64 / 1024.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_report_reads_back_as_it_was() {
        let timing =
            Timing { seconds: 0.5, cpu_seconds: 0.75, rss_before_kb: 4000, peak_rss_kb: 6000, max_backlog: 12 };
        let tally = Tally { lost: 1, out_of_order: 2, duplicates: 3, corrupt: 4, idle: false };
        let mut m = Measurement::new("mixed", "tcp", 1000, &timing, tally);
        (m.frames, m.bytes, m.malformed, m.unknown_session) = (1002, 300_000, 5, 6);
        assert_eq!(Measurement::from_json(&m.to_json()).unwrap(), m);
        assert_eq!(m.events_per_second(), 2000.0);
        assert!(!m.passed());
        assert!(Measurement::from_json(&json!({"run": "on"})).is_err());
    }

    #[test]
    fn rounds_become_their_median_with_the_worst_memory_and_every_fault() {
        let run = |name: &str, seconds: f64, peak_rss_kb: u64, lost: usize| {
            let timing = Timing { seconds, cpu_seconds: 0.0, rss_before_kb: 0, peak_rss_kb, max_backlog: 0 };
            Measurement::new(name, "stdio", 10, &timing, Tally { lost, ..Tally::NONE })
        };
        let rows = medians(vec![
            run("on", 3.0, 100, 0),
            run("serde", 1.0, 50, 0),
            run("on", 1.0, 300, 2),
            run("on", 2.0, 200, 0),
            run("serde", 2.0, 40, 0),
        ]);
        let summary: Vec<_> = rows.iter().map(|m| (m.run.as_str(), m.seconds, m.peak_rss_kb, m.tally.lost)).collect();
        assert_eq!(summary, [("on", 2.0, 300, 2), ("serde", 2.0, 50, 0)]);
    }
}
