//! The one table of a run: every style and floor measured, each row with
//! its ratios to the floors of the same transport in the same run.

use crate::measure::{mb, Measurement};
use crate::node;
use crate::options::Floor;

/// The table's lines, header first.
pub fn lines(measurements: &[Measurement]) -> Vec<String> {
    let mut lines = vec![format!(
        "{:<12} {:<9} {:>8} {:>8} {:>10} {:>8} {:>5} {:>8} {:>9} {:>7}",
        "run", "transport", "events", "seconds", "events/s", "peak MB", "lost", "x serde", "% framing", "x json"
    )];
    let node_floor = format!("{}{}", node::PREFIX, node::FLOOR);
    for m in measurements {
        let floor = |name: &str| {
            measurements
                .iter()
                .find(|f| f.run == name && f.transport == m.transport)
                .map(|f| m.events_per_second() / f.events_per_second())
        };
        let times_serde = floor(Floor::Serde.as_str()).map_or("-".into(), |x| format!("{x:.2}"));
        let of_framing = floor(Floor::Framing.as_str()).map_or("-".into(), |x| format!("{:.1}", 100.0 * x));
        // The Node rows against the Node floor too.
        let times_json = match m.run.starts_with(node::PREFIX) {
            true => floor(&node_floor).map_or("-".into(), |x| format!("{x:.2}")),
            false => "-".into(),
        };
        lines.push(format!(
            "{:<12} {:<9} {:>8} {:>8.3} {:>10.0} {:>8.1} {:>5} {:>8} {:>9} {:>7}",
            m.run,
            m.transport,
            m.events,
            m.seconds,
            m.events_per_second(),
            mb(m.peak_rss_kb),
            m.tally.lost,
            times_serde,
            of_framing,
            times_json,
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
            run("node-json", "tcp", 2.0),
            run("node-on", "tcp", 4.0),
        ]);
        let cells = |row: usize| table[row].split_whitespace().map(str::to_owned).collect::<Vec<_>>();
        assert_eq!(cells(0)[0], "run");
        // on stdio: 1000 events/s, 4x the serde floor (250/s), 10% of framing (10,000/s).
        assert_eq!(cells(3), ["on", "stdio", "1000", "1.000", "1000", "5.0", "0", "4.00", "10.0", "-"]);
        // on tcp: no serde floor over TCP; framing is 2000/s.
        assert_eq!(cells(4)[7..], ["-", "50.0", "-"]);
        assert_eq!(cells(1)[7..], ["40.00", "100.0", "-"]);
        // node-on tcp: half the Node floor (500/s).
        assert_eq!(cells(7)[7..], ["-", "12.5", "0.50"]);
    }
}
