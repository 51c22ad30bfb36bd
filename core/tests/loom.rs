//! Loom models of the router's shared tables.
//!
//! The router is shared by a reader thread (calling [`Router::route`]) and
//! every caller (reserving sessions, registering requests). Each table keeps
//! its invariants under one lock per operation; these models let loom try
//! every interleaving of those operations and check the promises the
//! documentation makes: a handle never reaches a later session, a frame for
//! a server-assigned session is parked rather than lost, and every request
//! waiter is handed out exactly once.
//!
//! Under `--cfg loom` the crate's lock is `loom::sync::Mutex`, so loom sees
//! every acquisition. Run with:
//!
//! ```text
//! RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom \
//!     cargo test -p copilot-core --test loom --release
//! ```
#![cfg(loom)]

use copilot_core::{Route, Router};
use loom::sync::Arc;
use loom::thread;

/// A `session.event` for session `s`.
const EVENT_S: &[u8] = br#"{"jsonrpc":"2.0","method":"session.event","params":{"sessionId":"s","event":{"type":"session.idle","id":"e1","data":{}}}}"#;

/// A `session.event` for session `x`, whose id the server assigns.
const EVENT_X: &[u8] = br#"{"jsonrpc":"2.0","method":"session.event","params":{"sessionId":"x","event":{"type":"session.start","id":"e2","data":{}}}}"#;

/// The response to request 1 (the first id a pending table hands out).
const RESPONSE_1: &[u8] = br#"{"jsonrpc":"2.0","id":1,"result":{"ok":true}}"#;

/// A session released and reserved again under the same id, while the reader
/// routes an event for it.
///
/// With one slot both uses share index 0 and differ only by generation, so
/// this is the case where a missing generation bump would let the reader's
/// handle for the first use reach the second.
#[test]
fn release_and_rereserve_never_leaks_a_stale_handle() {
    loom::model(|| {
        let router: Arc<Router<u32, (), 1, 1>> = Arc::new(Router::new());

        let owner = {
            let router = router.clone();
            thread::spawn(move || {
                let first = router.sessions().reserve("s", 1).unwrap();
                assert_eq!(router.sessions().release(first), Some(1));
                let second = router.sessions().reserve("s", 2).unwrap();
                (first, second)
            })
        };

        let seen = match router.route(EVENT_S) {
            Route::Event { session, target, session_id, .. } => {
                assert_eq!(session_id, "s");
                // Right after routing, the handle is either still this use or
                // already stale: never live for another target.
                let now = router.sessions().get(session);
                assert!(now.is_none() || now == Some(target), "handle {session:?} now reaches {now:?}");
                Some((session, target))
            }
            Route::UnknownSession { session_id, reply_to: None, .. } => {
                assert_eq!(session_id, "s");
                None
            }
            other => panic!("unexpected route {other:?}"),
        };

        let (first, second) = owner.join().unwrap();
        assert_ne!(first, second, "a released slot's next use needs a new handle");
        match seen {
            Some((session, 1)) => {
                assert_eq!(session, first);
                assert_eq!(router.sessions().get(session), None, "the first use was released");
            }
            Some((session, 2)) => {
                assert_eq!(session, second);
                assert_eq!(router.sessions().get(session), Some(2));
            }
            Some(other) => panic!("routed to a target never reserved: {other:?}"),
            None => assert_eq!(router.stats().unknown_session, 1),
        }
        assert_eq!(router.sessions().find("s"), Some((second, 2)));
        assert_eq!(router.sessions().len(), 1);
    });
}

/// A create whose id the server assigns: the caller names the slot while the
/// reader routes the first event for that id.
///
/// The unassigned slot exists before the reader runs, so the event must be
/// delivered or parked, never reported as unknown; and a parked copy must
/// reach the session once the id is assigned.
#[test]
fn event_racing_assign_is_parked_or_delivered() {
    loom::model(|| {
        let router: Arc<Router<u32, (), 2, 1>> = Arc::new(Router::new());
        let handle = router.sessions().reserve_unassigned(7).unwrap();

        let caller = {
            let router = router.clone();
            thread::spawn(move || router.sessions().assign(handle, "x").unwrap())
        };

        let parked = match router.route(EVENT_X) {
            Route::Event { session, target, .. } => {
                assert_eq!((session, target), (handle, 7));
                None
            }
            Route::Park { session_id, body } => {
                assert_eq!(session_id, "x");
                assert_eq!(body, EVENT_X);
                Some(body)
            }
            other => panic!("an event for a server-assigned id was not parked: {other:?}"),
        };

        caller.join().unwrap();
        assert_eq!(router.sessions().awaiting_ids(), 0);
        if let Some(body) = parked {
            match router.route_parked(body) {
                Route::Event { session, target, .. } => assert_eq!((session, target), (handle, 7)),
                other => panic!("a parked event missed its assigned session: {other:?}"),
            }
        }
        let stats = router.stats();
        assert_eq!(stats.parked, u64::from(parked.is_some()), "parked once, not again when re-routed");
        assert_eq!(stats.unknown_session, 0);
    });
}

/// Where one waiter ended up.
#[derive(Debug, Default)]
struct Handouts {
    by_response: Vec<u32>,
    by_drain: Vec<u32>,
}

/// A request registered while the reader routes its response and the
/// connection is torn down (the pending table drained) at the same time.
///
/// Every waiter must be handed out exactly once, through the response or
/// through a drain: twice would complete a request twice, never would leave
/// its caller waiting forever.
#[test]
fn each_waiter_is_handed_out_exactly_once() {
    loom::model(|| {
        let router: Arc<Router<(), u32, 1, 2>> = Arc::new(Router::new());

        let caller = {
            let router = router.clone();
            thread::spawn(move || router.pending().insert(10).unwrap())
        };
        let reader = {
            let router = router.clone();
            thread::spawn(move || match router.route(RESPONSE_1) {
                Route::Response { request, waiter, result } => {
                    assert_eq!(request.0, 1);
                    assert!(result.is_ok());
                    Some(waiter)
                }
                Route::UnmatchedResponse { id, .. } => {
                    assert_eq!(id.as_u64(), Some(1));
                    None
                }
                other => panic!("unexpected route {other:?}"),
            })
        };

        // This thread plays the host shutting down: fail whatever is pending.
        let mut out = Handouts::default();
        out.by_drain.extend(router.pending().drain().map(|(_, w)| w));

        assert_eq!(caller.join().unwrap().0, 1, "the first request gets id 1");
        out.by_response.extend(reader.join().unwrap());
        // Anything still pending now was neither answered nor drained: a last
        // drain finds it, so "lost" shows up as a missing hand-out below only
        // if the table dropped it.
        out.by_drain.extend(router.pending().drain().map(|(_, w)| w));

        let total = out.by_response.len() + out.by_drain.len();
        assert_eq!(total, 1, "waiter 10 handed out {total} times: {out:?}");
        assert!(out.by_response.iter().chain(&out.by_drain).all(|&w| w == 10), "{out:?}");
        assert!(router.pending().is_empty());
        assert_eq!(router.pending().len(), 0);
        assert_eq!(router.stats().unmatched_responses, u64::from(out.by_response.is_empty()));
    });
}
