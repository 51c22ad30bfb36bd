//! 2,000 permission prompts pending at once, a handler held until all have
//! arrived, and a CLI that acknowledges each answer slowly: every prompt
//! gets exactly one answer (answers need no request slot, of which there
//! are 1,024), and the client's threads stay within its pools' bounds,
//! which do not depend on the prompts.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use copilot_host::{
    Client, ClientOptions, PermissionDecision, PermissionRequest, SessionConfig, DEFAULT_HANDLER_THREADS,
};
use serde_json::json;

const PROMPTS: usize = 2_000;
/// The bound of the client's event-delivery pool (README, "How the host
/// delivers": at most 4 dispatcher threads).
const DISPATCHERS: usize = 4;

fn threads() -> usize {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    status.lines().find_map(|l| l.strip_prefix("Threads:")).and_then(|n| n.trim().parse().ok()).expect("Threads:")
}

/// Waits for `done` (a safety bound only: the order of events decides).
fn wait_for(what: &str, done: impl Fn() -> bool) {
    let until = Instant::now() + Duration::from_secs(120);
    while !done() {
        assert!(Instant::now() < until, "waited two minutes for {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn two_thousand_pending_prompts_are_all_answered_within_bounded_threads() {
    let options = ClientOptions {
        cli_path: Some(env!("CARGO_BIN_EXE_conformance_cli").into()),
        extra_args: vec!["--ack-delay-ms".into(), "1".into()],
        ..ClientOptions::default()
    };
    let client = Client::start(options).expect("start the conformance CLI");
    let gate = Arc::new((Mutex::new(false), Condvar::new(), AtomicUsize::new(0)));
    let g = Arc::clone(&gate);
    let config = SessionConfig::default().on_permission(move |_: &PermissionRequest| {
        g.2.fetch_add(1, Ordering::SeqCst);
        let mut open = g.0.lock().unwrap();
        while !*open {
            open = g.1.wait(open).unwrap();
        }
        PermissionDecision::ApproveOnce
    });
    let session = client.create_session(config).expect("create");
    let rows = client.call("conformance.rows", &json!({})).expect("rows");
    let row =
        rows["rows"].as_array().unwrap().iter().find(|r| r["name"] == "permission.requested").unwrap()["row"].clone();
    // Each pool started with one thread and may add up to its bound (16
    // handler threads by default, 4 event dispatchers); nothing grows with
    // the prompts.
    let baseline = threads();
    let bound = baseline + (DEFAULT_HANDLER_THREADS - 1) + (DISPATCHERS - 1);
    for _ in 0..PROMPTS {
        let params = json!({"sessionId": session.id(), "row": row, "path": "handler",
            "expect": {"answer": {"kind": "approve-once"}}});
        client.call("conformance.trigger", &params).expect("trigger");
    }
    // Every trigger's answer came after the trigger: all are open now.
    let stats = client.engine_stats();
    assert_eq!(stats.open_obligations, PROMPTS, "{stats:?}");
    let pending_threads = threads();
    assert!(gate.2.load(Ordering::SeqCst) < PROMPTS, "handlers run on a bounded pool");
    *gate.0.lock().unwrap() = true;
    gate.1.notify_all();
    wait_for("every answer acknowledged", || client.engine_stats().acks_accepted as usize == PROMPTS);
    let stats = client.engine_stats();
    assert_eq!((stats.answered as usize, stats.open_obligations), (PROMPTS, 0), "{stats:?}");
    let report = client.call("conformance.report", &json!({})).expect("report");
    assert_eq!(report["ok"], true, "{report:#}");
    assert_eq!(report["cells"].as_array().unwrap().len(), PROMPTS);
    assert!(
        pending_threads <= bound && threads() <= bound,
        "threads: {baseline} before, {pending_threads} with {PROMPTS} pending, at most {bound}"
    );
    eprintln!("threads: {baseline} before the prompts, {pending_threads} with {PROMPTS} pending");
    drop(session);
    client.stop().expect("stop");
}
