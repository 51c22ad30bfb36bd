//! Flood benchmark of the host (`copilot_host`): how many events a second
//! one session delivers end to end in each way a user can take them, how
//! much memory the client needs meanwhile, and the floors (the least any
//! client must do with the same bytes), all in the same run.
//!
//! `cargo run --release -p copilot-tests --bin flood -- [--events N] [--transport stdio|tcp|both]
//! [--api on|events|async|wait|mixed|all|LIST] [--floors yes|no] [--host rust|node|both]
//! [--mix realistic|deltas] [--rounds K]`
//!
//! (defaults: 100,000 events, both transports, every style, the floors,
//! both hosts, the realistic mix). The flood (`--mix`): `realistic`, of
//! every 1,000 events 959 small `assistant.message_delta`s, 40
//! `assistant.message`s of about 2 KB and one `tool.execution_complete`
//! with a 64 KiB result (`copilot_tests::flood_mix`, the fake's prompt
//! `flood-mix:N`); or `deltas`, N small deltas only (`flood:N`, the flood
//! of the earlier figures). `--rounds K` makes every run K times, whole
//! rounds one after another, and the table gives each row's median.
//! The styles (`--api` takes one, a comma list, or `all`):
//! - `on`: `Session::on` (blocking client), a callback checking each event,
//!   done when it sees `session.idle`;
//! - `events`: the blocking stream, `Session::events()` (`blocking` is its
//!   earlier name; `both` is `events,async`);
//! - `async`: the async stream, `asynch::Session::events()`, polled by a
//!   minimal thread-parking executor (so the figure is the library's, not a
//!   runtime's);
//! - `wait`: `Session::send_and_wait` of the flood as the turn, with one
//!   `on` subscriber checking each event (send to the call's return);
//! - `mixed`: a callback, a blocking stream and an async stream on one
//!   session at once (async client), each checking every event.
//!
//! The floors, over the same transports: `framing`, a plain client that
//! reads the fake's stream and splits it into frames with the core's
//! `FrameDecoder`, nothing else; `serde`, the same plus
//! `serde_json::from_slice::<serde_json::Value>` of each body.
//!
//! The Node host (`--host node`, or `both`): the npm package's client
//! (`copilot-wasm`, from wasm/npm's sources and its built module) takes the
//! same flood in the styles it has (`node-on`, `node-events` (its async
//! iterator, so `async` has no Node row of its own), `node-wait`,
//! `node-mixed`: a callback and an iterator), and the Node floor
//! `node-json` frames the stream in plain JS and calls `JSON.parse` once
//! per body; each run is `node tests/js/flood.mjs` in a fresh process.
//! Without `node` or the built module (`scripts/build-wasm`) the Node rows
//! are left out, and the output says why.
//!
//! Each run is a fresh child process of this binary (`flood client
//! --transport T --api S --floors no --events N`, or `flood floor F
//! --transport T --events N`), so that its peak RSS is its own. A client's
//! "CLI" is this binary again (`... serve --stdio` or `... serve --port 0`,
//! the fake server of `copilot_tests::fake_server`). The child creates a
//! session, subscribes, sends the flood's prompt (the fake answers with N
//! events, ids "0" to "N-1", then `session.idle`) and takes events until
//! `session.idle`. (`flood client
//! ...` can be run by hand to measure in one process; the `serve` mode is
//! for the client to spawn.)
//!
//! Measured per run, in the client process only: seconds and events/s from
//! just before the send to the last consumer's `session.idle` (the fake's
//! writes, the transport, the client's threads and the consumers); peak
//! RSS (`VmHWM`), also before the send; CPU seconds; the largest backlog
//! (frames routed by the client minus events taken by its slowest
//! consumer, sampled every few milliseconds); the router's counters. The
//! table gives each row's events/s as a multiple of the `serde` floor and
//! a percentage of the `framing` floor of the same transport.
//!
//! Every event must arrive exactly once, in order, with its own content, at
//! every consumer; the process exits non-zero otherwise (or if
//! `session.idle` never comes).

mod asynch;
mod blocking;
mod check;
mod floors;
mod measure;
mod node;
mod options;
mod table;
mod timed;

use std::process::{Command, ExitCode, Stdio};
use std::time::Duration;

use copilot_host::ClientOptions;
use copilot_tests::fake_server::{run_stdio, run_tcp_announcing};

use measure::Measurement;
use options::{Floor, Options, Style, TransportName};

/// The argument that makes this binary the fake CLI. It is passed last (the
/// client puts its own flags first), so it is looked for anywhere in argv.
pub const SERVE: &str = "serve";
/// The first argument of a child that measures styles.
const CLIENT: &str = "client";
/// The first argument of a child that measures a floor.
const FLOOR: &str = "floor";
/// The prefix of the one stdout line a child reports its figures on.
const RESULT_PREFIX: &str = "flood-result ";
/// Longest wait for the next event before the run is declared stuck.
pub const EVENT_GAP_TIMEOUT: Duration = Duration::from_secs(30);

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == SERVE) {
        return serve(&args);
    }
    let result = match args.first().map(String::as_str) {
        Some(CLIENT) => Options::parse(&args[1..]).and_then(|o| measure_in_this_process(&o)),
        Some(FLOOR) => match args.get(1) {
            Some(floor) => Floor::parse(floor)
                .and_then(|floor| Options::parse(&args[2..]).map(|o| (floor, o)))
                .and_then(|(floor, o)| measure_floor_in_this_process(floor, &o)),
            None => Err("flood floor: which floor? (framing or serde)".into()),
        },
        _ => Options::parse(&args).and_then(|o| measure_in_children(&o)),
    };
    match result {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(message) => {
            eprintln!("flood: {message}");
            ExitCode::from(2)
        }
    }
}

/// The fake CLI. The client's own flags (`--headless`, `--no-auto-update`,
/// `--log-level X`, `--auth-token-env X`, `--port 0`) are accepted and
/// ignored; only the choice of transport matters.
fn serve(args: &[String]) -> ExitCode {
    let served = if args.iter().any(|a| a == "--stdio") {
        run_stdio(Default::default())
    } else if args.iter().any(|a| a == "--port") {
        run_tcp_announcing(Default::default())
    } else {
        eprintln!("flood serve: neither --stdio nor --port was given (argv: {args:?})");
        return ExitCode::from(2);
    };
    match served {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("flood serve: {e}");
            ExitCode::FAILURE
        }
    }
}

/// The options of a client whose CLI is this binary's fake.
pub fn fake_cli_options(transport: TransportName) -> Result<ClientOptions, String> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot find this executable: {e}"))?;
    Ok(ClientOptions {
        cli_path: Some(exe),
        transport: transport.transport(),
        extra_args: vec![SERVE.into()],
        ..ClientOptions::default()
    })
}

/// The top level: one child process per run, then the table.
fn measure_in_children(options: &Options) -> Result<bool, String> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot find this executable: {e}"))?;
    let load_before = timed::load_average();
    let node_missing = if options.hosts.node { node::unavailable() } else { None };
    let with_node = options.hosts.node && node_missing.is_none();
    let events = options.events.to_string();
    let mut measurements = Vec::new();
    let mut all_passed = true;
    // Whole rounds, one after another, so that the machine's changing load
    // falls on every row alike.
    for _round in 0..options.rounds {
        for &transport in &options.transports {
            // Floors first, then the styles, Rust before Node.
            let mut runs: Vec<(String, Command)> = Vec::new();
            let child = |args: &[&str]| {
                let mut command = Command::new(&exe);
                command.args(args).args([
                    "--transport",
                    transport.as_str(),
                    "--events",
                    &events,
                    "--mix",
                    options.mix.as_str(),
                ]);
                command
            };
            if options.floors {
                if options.hosts.rust {
                    for floor in Floor::ALL {
                        runs.push((floor.as_str().into(), child(&[FLOOR, floor.as_str()])));
                    }
                }
                if with_node {
                    runs.push((
                        format!("{}{}", node::PREFIX, node::FLOOR),
                        node::command(node::FLOOR, transport, options)?,
                    ));
                }
            }
            if options.hosts.rust {
                for style in &options.styles {
                    runs.push((style.as_str().into(), child(&[CLIENT, "--api", style.as_str(), "--floors", "no"])));
                }
            }
            if with_node {
                for run in options.styles.iter().filter_map(|&style| node::run_of(style)) {
                    runs.push((format!("{}{run}", node::PREFIX), node::command(run, transport, options)?));
                }
            }
            for (name, mut command) in runs {
                let label = format!("{name} {}", transport.as_str());
                let output = command
                    .stdin(Stdio::null())
                    .stderr(Stdio::inherit())
                    .output()
                    .map_err(|e| format!("cannot run {label}: {e}"))?;
                let stdout = String::from_utf8_lossy(&output.stdout);
                let Some(result) = stdout.lines().find_map(|line| line.strip_prefix(RESULT_PREFIX)) else {
                    eprintln!("flood: the run `{label}` reported no result ({}); stdout: {stdout}", output.status);
                    all_passed = false;
                    continue;
                };
                let value: serde_json::Value =
                    serde_json::from_str(result).map_err(|e| format!("unreadable result of `{label}`: {e}"))?;
                let measurement = Measurement::from_json(&value)?;
                all_passed &= measurement.passed() && output.status.success();
                measurements.push(measurement);
            }
        }
    }

    let measurements = measure::medians(measurements);
    for line in table::lines(&measurements) {
        println!("{line}");
    }
    println!();
    for m in &measurements {
        println!("{}", m.describe());
    }
    let rounds = match options.rounds {
        1 => String::new(),
        n => format!(", the median of {n} rounds by seconds (peak MB: the highest; lost: of all rounds)"),
    };
    println!(
        "(each row a fresh process{rounds}; peak MB: VmHWM (maxRSS for Node) of that client alone, the fake CLI runs apart; \
         x serde, % framing: events/s against the Rust floors of the same transport, x json against the Node floor; \
         wait: with one on subscriber; no backlog sampling in Node; load average {load_before} before the run, {} after)",
        timed::load_average()
    );
    if let Some(why) = node_missing {
        println!("(no Node rows: {why})");
    }
    if !all_passed {
        eprintln!("flood: FAILED: an event was lost, repeated, reordered or corrupted, or a run did not finish");
    }
    Ok(all_passed)
}

/// A child: measures the floors (unless `--floors no`) and each style asked
/// for over each transport in this process, and reports each on a
/// `flood-result` line. With several runs the later peaks include the
/// earlier runs' (VmHWM never goes down).
fn measure_in_this_process(options: &Options) -> Result<bool, String> {
    let mut all_passed = true;
    let mut runs = 0;
    for &transport in &options.transports {
        let floors = if options.floors { &Floor::ALL[..] } else { &[] };
        for &floor in floors {
            all_passed &= report(floors::flood(floor, transport, options.events, &options.prompt())?, runs);
            runs += 1;
        }
        for &style in &options.styles {
            let m = match style {
                Style::On | Style::Events | Style::Wait => {
                    blocking::flood(style, transport, options.events, &options.prompt())?
                }
                Style::Async | Style::Mixed => asynch::flood(style, transport, options.events, &options.prompt())?,
            };
            all_passed &= report(m, runs);
            runs += 1;
        }
    }
    Ok(all_passed)
}

/// A child measuring one floor (over each transport asked for).
fn measure_floor_in_this_process(floor: Floor, options: &Options) -> Result<bool, String> {
    let mut all_passed = true;
    for (runs, &transport) in options.transports.iter().enumerate() {
        all_passed &= report(floors::flood(floor, transport, options.events, &options.prompt())?, runs);
    }
    Ok(all_passed)
}

/// Prints `m` for the parent (and a person); true if it passed.
fn report(m: Measurement, earlier_runs: usize) -> bool {
    eprintln!(
        "{} {}: {} events in {:.3} s = {:.0} events/s, peak RSS {:.1} MB{}",
        m.run,
        m.transport,
        m.events,
        m.seconds,
        m.events_per_second(),
        measure::mb(m.peak_rss_kb),
        if earlier_runs > 0 { " (includes the earlier runs in this process)" } else { "" }
    );
    println!("{RESULT_PREFIX}{}", m.to_json());
    m.passed()
}
