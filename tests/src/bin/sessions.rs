//! Figures for sessions at scale, against fake CLIs in processes of their
//! own (so the figures are the client's alone):
//!
//! ```text
//! sessions [N]          # N sessions (default 10,000) on one connection
//! sessions prompts [N] [T]  # N permission prompts (default 2,000) pending
//!                           # at once, a handler that takes 3 s, slow acks,
//!                           # T handler threads (default 100)
//! ```
//!
//! The first prints the client's thread count and resident memory before
//! and after opening the sessions (each has received its `session.start`
//! and is idle), and the memory per idle session. The second prints the
//! peak thread count while the prompts are pending and how long it took
//! until every answer was acknowledged.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use copilot_host::{Client, ClientOptions, PermissionDecision, PermissionRequest, SessionConfig};
use serde_json::json;

/// A field of /proc/self/status, as a number (kB for memory).
fn status(field: &str) -> usize {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

fn sibling(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("the path of this program");
    exe.with_file_name(name)
}

fn client(cli: &str, extra_args: Vec<String>, handler_threads: usize) -> Client {
    let options =
        ClientOptions { cli_path: Some(sibling(cli)), extra_args, handler_threads, ..ClientOptions::default() };
    Client::start(options)
        .unwrap_or_else(|e| panic!("start {cli}: {e} (build it: cargo build --release -p copilot-tests)"))
}

fn sessions(n: usize) {
    let client = client("fake_cli", Vec::new(), copilot_host::DEFAULT_HANDLER_THREADS);
    let (threads0, rss0) = (status("Threads:"), status("VmRSS:"));
    let started = Instant::now();
    let sessions: Vec<_> = (0..n).map(|_| client.create_session(SessionConfig::default()).expect("create")).collect();
    let created = started.elapsed();
    // Every session has its session.start delivered (kept for a first subscriber).
    while sessions.iter().any(|s| s.stats().events == 0) {
        std::thread::sleep(Duration::from_millis(10));
    }
    let (threads1, rss1) = (status("Threads:"), status("VmRSS:"));
    println!(
        "{n} sessions on one connection: created in {:.2} s ({:.0}/s); threads {threads0} -> {threads1}; \
         RSS {:.1} MB -> {:.1} MB = {:.2} KB per idle session",
        created.as_secs_f64(),
        n as f64 / created.as_secs_f64(),
        rss0 as f64 / 1024.0,
        rss1 as f64 / 1024.0,
        (rss1.saturating_sub(rss0)) as f64 / n as f64
    );
    drop(sessions);
    let _ = client.stop();
}

fn prompts(n: usize, handler_threads: usize) {
    let client = client("conformance_cli", vec!["--ack-delay-ms".into(), "1".into()], handler_threads);
    let threads0 = status("Threads:");
    let running = Arc::new(AtomicUsize::new(0));
    let r = Arc::clone(&running);
    let config = SessionConfig::default().on_permission(move |_: &PermissionRequest| {
        r.fetch_add(1, Ordering::SeqCst);
        std::thread::sleep(Duration::from_secs(3));
        PermissionDecision::ApproveOnce
    });
    let session = client.create_session(config).expect("create");
    let rows = client.call("conformance.rows", &json!({})).expect("rows");
    let row =
        rows["rows"].as_array().unwrap().iter().find(|r| r["name"] == "permission.requested").unwrap()["row"].clone();
    let started = Instant::now();
    let mut peak = threads0;
    for _ in 0..n {
        let params = json!({"sessionId": session.id(), "row": row, "path": "handler",
            "expect": {"answer": {"kind": "approve-once"}}});
        client.call("conformance.trigger", &params).expect("trigger");
        peak = peak.max(status("Threads:"));
    }
    let open = client.engine_stats().open_obligations;
    while (client.engine_stats().acks_accepted as usize) < n {
        peak = peak.max(status("Threads:"));
        std::thread::sleep(Duration::from_millis(50));
    }
    let report = client.call("conformance.report", &json!({})).expect("report");
    println!(
        "{n} permission prompts, {open} pending at once, a 3 s handler on {handler_threads} threads, 1 ms per ack: \
         all acknowledged after {:.1} s; threads {threads0} before, peak {peak}; every prompt answered once with \
         the handler's answer: {}",
        started.elapsed().as_secs_f64(),
        report["ok"]
    );
    drop(session);
    let _ = client.stop();
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let number = |i: usize, default: usize| args.get(i).and_then(|v| v.parse().ok()).unwrap_or(default);
    match args.first().map(String::as_str) {
        Some("prompts") => prompts(number(1, 2_000), number(2, 100)),
        _ => sessions(number(0, 10_000)),
    }
    ExitCode::SUCCESS
}
