//! 10,000 sessions open on one connection, each receiving events: every
//! event arrives, and the client's threads do not grow with the sessions
//! (its pools start threads as work needs them, up to bounds that do not
//! depend on the sessions).
//! (Thread count and memory per idle session are printed by the
//! `sessions` bench binary.)

use std::time::{Duration, Instant};

use copilot_host::{Client, SessionConfig, DEFAULT_HANDLER_THREADS};
use copilot_tests::fake_server::{FakeServer, FakeServerConfig};
use serde_json::json;

const SESSIONS: usize = 10_000;
/// The bound of the client's event-delivery pool (README, "How the host
/// delivers": at most 4 dispatcher threads).
const DISPATCHERS: usize = 4;

/// This process's thread count.
fn threads() -> usize {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    status.lines().find_map(|l| l.strip_prefix("Threads:")).and_then(|n| n.trim().parse().ok()).expect("Threads:")
}

#[test]
fn ten_thousand_sessions_on_one_connection_get_every_event_within_bounded_threads() {
    let (server, from_server, to_server) = FakeServer::pipes(FakeServerConfig::default());
    let client = Client::from_streams(from_server, to_server, None).expect("handshake over pipes");
    // The client started with one thread of each pool; each may add up to
    // its bound, and nothing else may grow.
    let bound = threads() + (DISPATCHERS - 1) + (DEFAULT_HANDLER_THREADS - 1);
    let mut sessions = Vec::with_capacity(SESSIONS);
    let mut threads_at_ten = 0;
    for i in 0..SESSIONS {
        sessions.push(client.create_session(SessionConfig::default()).expect("create"));
        if i == 9 {
            threads_at_ten = threads();
        }
    }
    let threads_at_all = threads();
    for (i, s) in sessions.iter().enumerate() {
        let event = json!({"jsonrpc": "2.0", "method": "session.event", "params": {"sessionId": s.id(),
            "event": {"type": "session.info", "id": format!("n-{i}"), "timestamp": "t", "parentId": null,
            "data": {"infoType": "n", "message": i.to_string()}}}});
        server.send_raw(&event.to_string()).expect("send an event");
    }
    // Each session got its `session.start` and its own event, in order.
    let until = Instant::now() + Duration::from_secs(120);
    for (i, s) in sessions.iter().enumerate() {
        let events = s.events();
        let first = events.next_timeout(until.saturating_duration_since(Instant::now())).expect("open").expect("start");
        assert_eq!(first.event_type(), "session.start");
        let second = events.next_timeout(until.saturating_duration_since(Instant::now())).expect("open").expect("info");
        assert_eq!(second.id, format!("n-{i}"));
    }
    let threads_after = threads();
    assert_eq!(client.stats().unknown_session, 0);
    assert!(
        threads_at_ten <= bound && threads_at_all <= bound && threads_after <= bound,
        "threads: {threads_at_ten} with 10 sessions, {threads_at_all} with {SESSIONS}, {threads_after} after delivery, \
         at most {bound}"
    );
    drop(sessions);
    client.stop().expect("stop");
}
