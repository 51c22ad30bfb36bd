//! The command line: what to measure, over which transports.

use copilot_host::Transport;

/// Events flooded when `--events` is not given.
pub const DEFAULT_EVENTS: usize = 100_000;

/// The usage line of `--help` and of argument errors.
pub const USAGE: &str =
    "usage: flood [--events N] [--transport stdio|tcp|both] [--api on|events|async|wait|mixed|all|LIST] [--floors yes|no] [--host rust|node|both] [--mix realistic|deltas] [--rounds K]";

/// How the client reaches the fake CLI.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TransportName {
    Stdio,
    Tcp,
}

impl TransportName {
    /// The name on the command line and in the table.
    pub fn as_str(self) -> &'static str {
        match self {
            TransportName::Stdio => "stdio",
            TransportName::Tcp => "tcp",
        }
    }

    /// The client's option for it.
    pub fn transport(self) -> Transport {
        match self {
            TransportName::Stdio => Transport::Stdio,
            TransportName::Tcp => Transport::Tcp { port: 0 },
        }
    }

    fn parse(text: &str) -> Result<Vec<TransportName>, String> {
        match text {
            "stdio" => Ok(vec![TransportName::Stdio]),
            "tcp" => Ok(vec![TransportName::Tcp]),
            "both" => Ok(vec![TransportName::Stdio, TransportName::Tcp]),
            other => Err(format!("--transport {other:?}: expected stdio, tcp or both")),
        }
    }
}

/// A way of taking a session's events, as a user of the host would.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Style {
    /// `Session::on` (blocking client): a callback on the dispatcher thread.
    On,
    /// `Session::events()` (blocking client): the blocking stream.
    Events,
    /// `asynch::Session::events()`: the async stream.
    Async,
    /// `Session::send_and_wait` (blocking client) with one `on` subscriber.
    Wait,
    /// A callback, a blocking stream and an async stream on one session.
    Mixed,
}

impl Style {
    /// Every style, in table order.
    pub const ALL: [Style; 5] = [Style::On, Style::Events, Style::Async, Style::Wait, Style::Mixed];

    /// The name on the command line and in the table.
    pub fn as_str(self) -> &'static str {
        match self {
            Style::On => "on",
            Style::Events => "events",
            Style::Async => "async",
            Style::Wait => "wait",
            Style::Mixed => "mixed",
        }
    }

    /// `--api`'s value: one style, a comma list, or `all`. `blocking` and
    /// `both` are the names of earlier versions (the blocking stream; it and
    /// the async stream). Repeats are kept once, in the order given.
    pub fn parse_list(text: &str) -> Result<Vec<Style>, String> {
        let mut styles = Vec::new();
        for name in text.split(',').map(str::trim) {
            let named: &[Style] = match name {
                "all" => &Style::ALL,
                "on" => &[Style::On],
                "events" | "blocking" => &[Style::Events],
                "async" => &[Style::Async],
                "wait" => &[Style::Wait],
                "mixed" => &[Style::Mixed],
                "both" => &[Style::Events, Style::Async],
                other => {
                    return Err(format!(
                        "--api {text:?}: unknown style {other:?} (expected on, events, async, wait, mixed or all)"
                    ))
                }
            };
            for style in named {
                if !styles.contains(style) {
                    styles.push(*style);
                }
            }
        }
        Ok(styles)
    }
}

/// What the fake CLI floods.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mix {
    /// `flood-mix:N`: of every 1,000 events 959 deltas, 40 messages of
    /// about 2 KB, one 64 KiB tool result (`copilot_tests::flood_mix`).
    Realistic,
    /// `flood:N`: N small deltas (the earlier figures' flood).
    Deltas,
}

impl Mix {
    /// The name on the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            Mix::Realistic => "realistic",
            Mix::Deltas => "deltas",
        }
    }

    fn parse(text: &str) -> Result<Mix, String> {
        [Mix::Realistic, Mix::Deltas]
            .into_iter()
            .find(|m| m.as_str() == text)
            .ok_or_else(|| format!("--mix {text:?}: expected realistic or deltas"))
    }
}

/// Which client libraries to measure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hosts {
    /// `copilot_host`.
    pub rust: bool,
    /// The npm package `copilot-wasm`, in Node.
    pub node: bool,
}

impl Hosts {
    fn parse(text: &str) -> Result<Hosts, String> {
        match text {
            "rust" => Ok(Hosts { rust: true, node: false }),
            "node" => Ok(Hosts { rust: false, node: true }),
            "both" => Ok(Hosts { rust: true, node: true }),
            other => Err(format!("--host {other:?}: expected rust, node or both")),
        }
    }
}

/// A floor: the least any client must do with the same bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Floor {
    /// The stream read and split into frames by the core's `FrameDecoder`.
    Framing,
    /// Framing, and each body parsed into a `serde_json::Value`.
    Serde,
}

impl Floor {
    /// Both floors, in table order.
    pub const ALL: [Floor; 2] = [Floor::Framing, Floor::Serde];

    /// The name on the command line and in the table.
    pub fn as_str(self) -> &'static str {
        match self {
            Floor::Framing => "framing",
            Floor::Serde => "serde",
        }
    }

    /// The floor named `text`.
    pub fn parse(text: &str) -> Result<Floor, String> {
        Floor::ALL.into_iter().find(|f| f.as_str() == text).ok_or_else(|| format!("unknown floor {text:?}"))
    }
}

/// The parsed command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Options {
    /// Deltas in the flood.
    pub events: usize,
    /// Transports to measure, in order.
    pub transports: Vec<TransportName>,
    /// Styles to measure, in order.
    pub styles: Vec<Style>,
    /// Whether the floors are measured too.
    pub floors: bool,
    /// The hosts measured (Node where it can run: see `node::unavailable`).
    pub hosts: Hosts,
    /// What the fake floods.
    pub mix: Mix,
    /// How many times every run is made (the table gives the medians).
    pub rounds: usize,
}

impl Options {
    /// The prompt that makes the fake flood: `flood:N` or `flood-mix:N`.
    pub fn prompt(&self) -> String {
        match self.mix {
            Mix::Realistic => format!("flood-mix:{}", self.events),
            Mix::Deltas => format!("flood:{}", self.events),
        }
    }

    /// Parses the arguments after the program name (and after a child's
    /// mode word).
    pub fn parse(args: &[String]) -> Result<Options, String> {
        let mut options = Options {
            events: DEFAULT_EVENTS,
            transports: TransportName::parse("both")?,
            styles: Style::ALL.into(),
            floors: true,
            hosts: Hosts::parse("both")?,
            mix: Mix::Realistic,
            rounds: 1,
        };
        let mut args = args.iter();
        while let Some(arg) = args.next() {
            let mut value = || args.next().ok_or_else(|| format!("{arg} needs a value"));
            match arg.as_str() {
                "--events" => {
                    let text = value()?;
                    options.events = text.parse().map_err(|e| format!("--events {text:?}: {e}"))?;
                }
                "--transport" => options.transports = TransportName::parse(value()?)?,
                "--api" => options.styles = Style::parse_list(value()?)?,
                "--floors" => {
                    options.floors = match value()?.as_str() {
                        "yes" => true,
                        "no" => false,
                        other => return Err(format!("--floors {other:?}: expected yes or no")),
                    }
                }
                "--host" => options.hosts = Hosts::parse(value()?)?,
                "--mix" => options.mix = Mix::parse(value()?)?,
                "--rounds" => {
                    let text = value()?;
                    options.rounds = match text.parse() {
                        Ok(n) if n > 0 => n,
                        _ => return Err(format!("--rounds {text:?}: expected a count of 1 or more")),
                    };
                }
                "-h" | "--help" => return Err(USAGE.into()),
                other => return Err(format!("unknown argument {other:?} (try --help)")),
            }
        }
        Ok(options)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Options, String> {
        Options::parse(&args.iter().map(|a| a.to_string()).collect::<Vec<_>>())
    }

    #[test]
    fn defaults_measure_everything() {
        let o = parse(&[]).unwrap();
        assert_eq!(o.events, DEFAULT_EVENTS);
        assert_eq!(o.transports, [TransportName::Stdio, TransportName::Tcp]);
        assert_eq!(o.styles, Style::ALL);
        assert!(o.floors);
        assert_eq!(o.hosts, Hosts { rust: true, node: true });
        assert_eq!((o.mix, o.prompt().as_str()), (Mix::Realistic, "flood-mix:100000"));
    }

    #[test]
    fn api_takes_one_style_a_list_or_all() {
        assert_eq!(Style::parse_list("wait").unwrap(), [Style::Wait]);
        assert_eq!(Style::parse_list("mixed,on, async").unwrap(), [Style::Mixed, Style::On, Style::Async]);
        assert_eq!(Style::parse_list("all").unwrap(), Style::ALL);
        assert_eq!(Style::parse_list("on,all").unwrap(), Style::ALL);
        assert!(Style::parse_list("on,callbacks").is_err());
        assert!(Style::parse_list("").is_err());
    }

    #[test]
    fn the_earlier_api_names_still_work() {
        assert_eq!(Style::parse_list("blocking").unwrap(), [Style::Events]);
        assert_eq!(Style::parse_list("both").unwrap(), [Style::Events, Style::Async]);
    }

    #[test]
    fn every_option_is_read() {
        let o =
            parse(&["--events", "10", "--transport", "tcp", "--api", "on,wait", "--floors", "no", "--host", "node"])
                .unwrap();
        assert_eq!(
            o,
            Options {
                events: 10,
                transports: vec![TransportName::Tcp],
                styles: vec![Style::On, Style::Wait],
                floors: false,
                hosts: Hosts { rust: false, node: true },
                mix: Mix::Realistic,
                rounds: 1,
            }
        );
        assert!(parse(&["--events"]).is_err());
        assert!(parse(&["--transport", "udp"]).is_err());
        assert!(parse(&["--floors", "maybe"]).is_err());
        assert!(parse(&["--host", "deno"]).is_err());
        let deltas = parse(&["--mix", "deltas", "--events", "7"]).unwrap();
        assert_eq!((deltas.mix, deltas.prompt().as_str()), (Mix::Deltas, "flood:7"));
        assert!(parse(&["--mix", "mostly"]).is_err());
        assert_eq!(parse(&["--rounds", "3"]).unwrap().rounds, 3);
        assert!(parse(&["--rounds", "0"]).is_err());
        assert!(parse(&["--fast"]).is_err());
    }

    #[test]
    fn names_read_back() {
        for style in Style::ALL {
            assert_eq!(Style::parse_list(style.as_str()).unwrap(), [style]);
        }
        for floor in Floor::ALL {
            assert_eq!(Floor::parse(floor.as_str()).unwrap(), floor);
        }
        assert!(Floor::parse("none").is_err());
    }
}
