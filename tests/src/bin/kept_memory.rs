//! Memory of a session used only through `send_and_wait`: does it stay
//! flat while no subscriber ever comes for the events kept for one?
//!
//! `cargo run --release -p copilot-tests --bin kept_memory -- [--turns N] [--events N] [--transport stdio|tcp]`
//!
//! (defaults: 3 turns of 100,000 events, stdio). The client's "CLI" is this
//! binary again (`... serve --stdio` or `... serve --port 0`, the fake
//! server of `copilot_tests::fake_server`), as in the `flood` bench. One
//! streaming session runs the turns, each the prompt `flood:N` (N
//! `assistant.message_delta` events, then `session.idle`) through
//! `send_and_wait` alone. Printed, one line a turn: the client process's
//! resident memory (`VmRSS`) before and after the turn, its peak so far
//! (`VmHWM`), and the session's counters (events delivered, events not
//! kept for a late first subscriber).

use std::process::ExitCode;
use std::time::Duration;

use copilot_host::{Client, ClientOptions, SessionConfig, Transport};
use copilot_tests::fake_server::{run_stdio, run_tcp_announcing};

const SERVE: &str = "serve";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == SERVE) {
        let served = if args.iter().any(|a| a == "--stdio") {
            run_stdio(Default::default())
        } else {
            run_tcp_announcing(Default::default())
        };
        return match served {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("kept_memory serve: {e}");
                ExitCode::FAILURE
            }
        };
    }
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("kept_memory: {e}");
            ExitCode::FAILURE
        }
    }
}

fn flag(args: &[String], name: &str) -> Option<String> {
    args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).cloned()
}

fn run(args: &[String]) -> Result<(), String> {
    let number = |name: &str, default: usize| -> Result<usize, String> {
        flag(args, name).map_or(Ok(default), |v| v.parse().map_err(|e| format!("{name} {v}: {e}")))
    };
    let turns = number("--turns", 3)?;
    let events = number("--events", 100_000)?;
    let transport = match flag(args, "--transport").as_deref() {
        None | Some("stdio") => Transport::Stdio,
        Some("tcp") => Transport::Tcp { port: 0 },
        Some(other) => return Err(format!("--transport is stdio or tcp, not {other}")),
    };
    let exe = std::env::current_exe().map_err(|e| format!("cannot find this executable: {e}"))?;
    let client = Client::start(ClientOptions {
        cli_path: Some(exe),
        transport,
        extra_args: vec![SERVE.into()],
        ..ClientOptions::default()
    })
    .map_err(|e| format!("cannot start the client: {e}"))?;
    let session = client
        .create_session(SessionConfig { streaming: true, ..SessionConfig::with_model("fake-model") })
        .map_err(|e| format!("cannot create a session: {e}"))?;
    println!("transport {transport:?}, {turns} turns of {events} deltas, through send_and_wait only");
    println!("start: rss {:.1} MB", mb(status_kb("VmRSS:")));
    for turn in 1..=turns {
        let before = status_kb("VmRSS:");
        session
            .send_and_wait(format!("flood:{events}"), Duration::from_secs(600))
            .map_err(|e| format!("turn {turn}: {e}"))?;
        let after = status_kb("VmRSS:");
        let stats = session.stats();
        println!(
            "turn {turn}: rss before {:.1} MB, after {:.1} MB, peak so far {:.1} MB; {} events delivered, {} not kept",
            mb(before),
            mb(after),
            mb(status_kb("VmHWM:")),
            stats.events,
            stats.not_kept
        );
    }
    session.destroy().map_err(|e| format!("destroy: {e}"))?;
    client.stop().map_err(|e| format!("stop: {e}"))
}

fn mb(kb: u64) -> f64 {
    kb as f64 / 1024.0
}

/// A `kB` line of `/proc/self/status` (0 where there is none).
fn status_kb(key: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| s.lines().find(|l| l.starts_with(key)).and_then(|l| l.split_whitespace().nth(1)?.parse().ok()))
        .unwrap_or(0)
}
