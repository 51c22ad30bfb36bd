//! The one table of a run: every style and floor measured, each row with
//! its ratios to the floors of the same transport in the same run.

use crate::measure::{mb, Measurement};
use crate::options::Floor;

/// The table's lines, header first.
pub fn lines(measurements: &[Measurement]) -> Vec<String> {
    let mut lines = vec![format!(
        "{:<8} {:<9} {:>8} {:>8} {:>10} {:>8} {:>5} {:>8} {:>9}",
        "run", "transport", "events", "seconds", "events/s", "peak MB", "lost", "x serde", "% framing"
    )];
    for m in measurements {
        let floor = |floor: Floor| {
            measurements
                .iter()
                .find(|f| f.run == floor.as_str() && f.transport == m.transport)
                .map(Measurement::events_per_second)
        };
        let times_serde =
            floor(Floor::Serde).map_or("-".into(), |serde| format!("{:.2}", m.events_per_second() / serde));
        let of_framing = floor(Floor::Framing)
            .map_or("-".into(), |framing| format!("{:.1}", 100.0 * m.events_per_second() / framing));
        lines.push(format!(
            "{:<8} {:<9} {:>8} {:>8.3} {:>10.0} {:>8.1} {:>5} {:>8} {:>9}",
            m.run,
            m.transport,
            m.events,
            m.seconds,
            m.events_per_second(),
            mb(m.peak_rss_kb),
            m.tally.lost,
            times_serde,
            of_framing,
        ));
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check::Tally;
    use crate::timed::Timing;

    fn run(name: &str, transport: &str, seconds: f64) -> Measurement {
        let timing = Timing { seconds, cpu_seconds: 0.0, rss_before_kb: 0, peak_rss_kb: 5120, max_backlog: 0 };
        Measurement::new(name, transport, 1000, &timing, Tally::NONE)
    }

    #[test]
    fn ratios_are_to_the_floors_of_the_same_transport() {
        let table = lines(&[
            run("framing", "stdio", 0.1),
            run("serde", "stdio", 4.0),
            run("on", "stdio", 1.0),
            run("on", "tcp", 1.0),
            run("framing", "tcp", 0.5),
        ]);
        let cells = |row: usize| table[row].split_whitespace().map(str::to_owned).collect::<Vec<_>>();
        assert_eq!(cells(0)[0], "run");
        // on stdio: 1000 events/s, 4x the serde floor (250/s), 10% of framing (10,000/s).
        assert_eq!(cells(3), ["on", "stdio", "1000", "1.000", "1000", "5.0", "0", "4.00", "10.0"]);
        // on tcp: no serde floor over TCP; framing is 2000/s.
        assert_eq!(cells(4)[7..], ["-", "50.0"]);
        assert_eq!(cells(1)[7..], ["40.00", "100.0"]);
    }
}
