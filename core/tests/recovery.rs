//! The recovery of a lost connection as the core sequences it
//! (`Recovery`): the backoff and its bound, the sessions resumed in slot
//! order and each reconciled, a refused resume ending only its session,
//! the log read back a page at a time until the last event delivered, and
//! what is delivered from it, each event once across attempts.
#![cfg(not(loom))]

use copilot_core::{
    event_id_hash, Engine, EngineConfig, FrameDecoder, Gap, Recovery, RecoveryReport, RecoveryStep, SessionHandle,
    Value, EVENT_LOG_MAX_PAGES, PENDING_LISTS, RECOVERY_BACKOFF_MS,
};
use serde_json::{json, Value as Json};

type TestEngine = Engine<u32, u32, Vec<u8>, Vec<u8>, 8, 8, 8>;
type Report = RecoveryReport<Vec<Option<u64>>>;

fn engine() -> TestEngine {
    Engine::new(vec![0; 4096], vec![0; 1 << 16], EngineConfig::new())
}

/// A session open on `e` under `id` (its open answered).
fn open(e: &mut TestEngine, id: &str) -> SessionHandle {
    let handle = e.reserve(id, 0).unwrap();
    e.complete_open(handle, Ok(Value::parse(b"{}").unwrap())).unwrap();
    handle
}

/// A session joined on `e` under `id` (resumed here, not created).
fn joined(e: &mut TestEngine, id: &str) -> SessionHandle {
    let (handle, _) = e.reserve_resume(id, 0).unwrap();
    e.complete_open(handle, Ok(Value::parse(b"{}").unwrap())).unwrap();
    handle
}

/// The durable event `event_id` of session `id` routed through `e`.
fn event(e: &mut TestEngine, id: &str, event_id: &str) {
    let body = serde_json::to_vec(&json!({"jsonrpc":"2.0","method":"session.event","params":{"sessionId":id,
        "event":{"type":"assistant.message","id":event_id,"data":{}}}}))
    .unwrap();
    let mut d: FrameDecoder<[u8; 4096]> = FrameDecoder::new();
    d.feed(&[format!("Content-Length: {}\r\n\r\n", body.len()).into_bytes(), body].concat());
    while e.poll(&mut d, 0).is_some() {}
}

/// The methods of the requests `e` queued since the last call.
fn sent(e: &mut TestEngine) -> Vec<String> {
    let bytes = e.transmit().to_vec();
    e.transmitted(bytes.len());
    let mut d: FrameDecoder<[u8; 65536]> = FrameDecoder::new();
    d.feed(&bytes);
    let mut out = Vec::new();
    while let Some(body) = d.poll() {
        let body: Json = serde_json::from_slice(body.unwrap()).unwrap();
        out.push(body["method"].as_str().unwrap().to_owned());
    }
    out
}

fn log(ids: &[&str], more: bool) -> Report {
    RecoveryReport::LogRead { ids: ids.iter().map(|id| Some(event_id_hash(id.as_bytes()))).collect(), more }
}

/// Steps `r` from a lost connection to the first resume, at time 0.
fn connect(r: &mut Recovery, e: &mut TestEngine) -> RecoveryStep {
    let first = RECOVERY_BACKOFF_MS[0];
    assert_eq!(r.step(e, 0, Report::Next), RecoveryStep::Wait { until: first });
    assert_eq!(r.step(e, first, Report::Next), RecoveryStep::Connect { attempt: 1, after_ms: first });
    r.step(e, first, Report::Connected)
}

#[test]
fn each_attempt_waits_its_backoff_and_the_last_failure_gives_up() {
    let mut e = engine();
    let mut r = Recovery::new(0);
    let mut now = 0;
    for (i, &delay) in RECOVERY_BACKOFF_MS.iter().enumerate() {
        let until = now + delay;
        assert_eq!(r.step(&mut e, now, Report::Next), RecoveryStep::Wait { until });
        assert_eq!(r.step(&mut e, until - 1, Report::Next), RecoveryStep::Wait { until }, "not before its time");
        assert_eq!(r.step(&mut e, until, Report::Next), RecoveryStep::Connect { attempt: i + 1, after_ms: delay });
        now = until + 10;
        let next = r.step(&mut e, now, Report::Failed);
        if i + 1 < RECOVERY_BACKOFF_MS.len() {
            assert_eq!(next, RecoveryStep::Wait { until: now + RECOVERY_BACKOFF_MS[i + 1] });
            assert!(!r.is_over());
        } else {
            assert_eq!(next, RecoveryStep::GaveUp { attempts: RECOVERY_BACKOFF_MS.len() });
        }
    }
    assert!(r.is_over());
    assert_eq!(r.step(&mut e, now, Report::Next), RecoveryStep::GaveUp { attempts: 3 }, "over stays over");
}

#[test]
fn with_no_session_open_the_connection_is_recovered_once_it_is_made() {
    let mut e = engine();
    let mut r = Recovery::new(0);
    let step = connect(&mut r, &mut e);
    assert_eq!(step, RecoveryStep::Recovered { sessions: 0, took_ms: RECOVERY_BACKOFF_MS[0] });
}

#[test]
fn open_sessions_are_resumed_in_slot_order_and_a_refused_one_ends_alone() {
    let mut e = engine();
    let a = joined(&mut e, "a");
    let closing = open(&mut e, "gone");
    let b = open(&mut e, "b");
    let c = open(&mut e, "c");
    e.close(closing).unwrap();
    sent(&mut e);
    let mut r = Recovery::new(0);
    assert_eq!(connect(&mut r, &mut e), RecoveryStep::Resume { handle: a });
    assert!(sent(&mut e).is_empty(), "nothing is asked before the resume is answered");
    // Joined, and no event was delivered to it: nothing marks its gap.
    assert_eq!(
        r.step(&mut e, 300, Report::Resumed),
        RecoveryStep::Deliver { handle: a, from: None, gap: Gap::Unmarked }
    );
    let lists: Vec<String> = PENDING_LISTS.iter().map(|l| l.method.to_owned()).collect();
    assert_eq!(sent(&mut e), lists, "the engine asks what is pending once it is resumed");
    assert_eq!(r.step(&mut e, 300, Report::Next), RecoveryStep::Resume { handle: b }, "a closing one is left");
    assert_eq!(r.step(&mut e, 300, Report::Refused), RecoveryStep::End { handle: b });
    assert!(sent(&mut e).is_empty(), "a refused one is not asked");
    e.release(b);
    assert_eq!(r.step(&mut e, 300, Report::Next), RecoveryStep::Resume { handle: c });
    assert_eq!(r.step(&mut e, 300, Report::Skipped), RecoveryStep::Recovered { sessions: 1, took_ms: 300 });
}

#[test]
fn the_log_is_read_back_a_page_at_a_time_until_the_last_event_delivered() {
    let mut e = engine();
    let a = open(&mut e, "a");
    event(&mut e, "a", "e-2");
    let mut r = Recovery::new(0);
    assert_eq!(connect(&mut r, &mut e), RecoveryStep::Resume { handle: a });
    assert_eq!(r.step(&mut e, 0, Report::Resumed), RecoveryStep::ReadLog { handle: a, page: 0 });
    assert_eq!(r.step(&mut e, 0, log(&["e-3", "e-4"], true)), RecoveryStep::ReadLog { handle: a, page: 1 });
    let step = r.step(&mut e, 0, log(&["e-1", "e-2", "e-3", "e-4"], true));
    assert_eq!(step, RecoveryStep::Deliver { handle: a, from: Some(2), gap: Gap::Whole }, "e-3 and e-4");
    assert_eq!(e.last_durable_event(a), Some(event_id_hash(b"e-4")), "the gap's last is the last delivered");
}

#[test]
fn a_log_that_does_not_reach_the_last_event_delivered_delivers_nothing() {
    for pages_with_more in [0, EVENT_LOG_MAX_PAGES] {
        let mut e = engine();
        let a = open(&mut e, "a");
        event(&mut e, "a", "e-1");
        let mut r = Recovery::new(0);
        connect(&mut r, &mut e);
        let mut step = r.step(&mut e, 0, Report::Resumed);
        for page in 0..pages_with_more {
            assert_eq!(step, RecoveryStep::ReadLog { handle: a, page });
            step = r.step(&mut e, 0, log(&["x"], true));
        }
        if pages_with_more == 0 {
            step = r.step(&mut e, 0, log(&["x"], false));
        }
        assert_eq!(step, RecoveryStep::Deliver { handle: a, from: None, gap: Gap::Cut });
        assert_eq!(e.last_durable_event(a), Some(event_id_hash(b"e-1")));
    }
}

#[test]
fn a_gap_delivered_by_an_attempt_that_then_failed_is_not_delivered_again() {
    let mut e = engine();
    let a = open(&mut e, "a");
    let b = open(&mut e, "b");
    event(&mut e, "a", "e-1");
    let mut r = Recovery::new(0);
    connect(&mut r, &mut e);
    r.step(&mut e, 0, Report::Resumed);
    assert_eq!(
        r.step(&mut e, 0, log(&["e-1", "e-2"], false)),
        RecoveryStep::Deliver { handle: a, from: Some(1), gap: Gap::Whole }
    );
    assert_eq!(r.step(&mut e, 0, Report::Next), RecoveryStep::Resume { handle: b });
    // The second session's resume fails: the attempt with it.
    let wait = r.step(&mut e, 500, Report::Failed);
    assert_eq!(wait, RecoveryStep::Wait { until: 500 + RECOVERY_BACKOFF_MS[1] });
    let RecoveryStep::Wait { until } = wait else { unreachable!() };
    assert_eq!(
        r.step(&mut e, until, Report::Next),
        RecoveryStep::Connect { attempt: 2, after_ms: RECOVERY_BACKOFF_MS[1] }
    );
    assert_eq!(r.step(&mut e, until, Report::Connected), RecoveryStep::Resume { handle: a });
    r.step(&mut e, until, Report::Resumed);
    let step = r.step(&mut e, until, log(&["e-1", "e-2", "e-3"], false));
    assert_eq!(step, RecoveryStep::Deliver { handle: a, from: Some(2), gap: Gap::Whole }, "e-3 only");
}

/// An attempt that resumed a session and failed before delivering its gap:
/// the live events routed meanwhile were held, not delivered (the hosts
/// keep holding them), so the next attempt reads the log back to where the
/// gap started, not to them.
#[test]
fn an_attempt_that_fails_after_a_resume_reads_back_from_where_the_gap_started() {
    let mut e = engine();
    let a = open(&mut e, "a");
    event(&mut e, "a", "e-1");
    let mut r = Recovery::new(0);
    assert_eq!(connect(&mut r, &mut e), RecoveryStep::Resume { handle: a });
    assert_eq!(r.step(&mut e, 0, Report::Resumed), RecoveryStep::ReadLog { handle: a, page: 0 });
    // Live, held, after the resume; then the log's read fails.
    event(&mut e, "a", "e-3");
    let RecoveryStep::Wait { until } = r.step(&mut e, 100, Report::Failed) else { panic!("a wait") };
    assert_eq!(e.last_durable_event(a), Some(event_id_hash(b"e-1")), "the mark is back where the gap started");
    r.step(&mut e, until, Report::Next);
    assert_eq!(r.step(&mut e, until, Report::Connected), RecoveryStep::Resume { handle: a });
    r.step(&mut e, until, Report::Resumed);
    let step = r.step(&mut e, until, log(&["e-1", "e-2", "e-3"], false));
    assert_eq!(step, RecoveryStep::Deliver { handle: a, from: Some(1), gap: Gap::Whole }, "e-2 and e-3, not e-3 only");
}

#[test]
fn a_live_event_routed_while_the_log_is_read_stays_the_last_delivered() {
    let mut e = engine();
    let a = open(&mut e, "a");
    event(&mut e, "a", "e-1");
    let mut r = Recovery::new(0);
    connect(&mut r, &mut e);
    r.step(&mut e, 0, Report::Resumed);
    // Live after the resume, later in the log than what the read brings.
    event(&mut e, "a", "e-3");
    r.step(&mut e, 0, log(&["e-1", "e-2"], false));
    assert_eq!(e.last_durable_event(a), Some(event_id_hash(b"e-3")));
}

#[test]
fn a_report_that_does_not_fit_its_step_fails_the_attempt() {
    let mut e = engine();
    open(&mut e, "a");
    let mut r = Recovery::new(0);
    connect(&mut r, &mut e);
    let step = r.step(&mut e, 0, log(&[], false));
    assert_eq!(step, RecoveryStep::Wait { until: RECOVERY_BACKOFF_MS[1] });
}

#[test]
fn a_session_created_here_with_nothing_delivered_has_its_whole_log_read_back() {
    for more in [false, true] {
        let mut e = engine();
        let a = open(&mut e, "a");
        let mut r = Recovery::new(0);
        assert_eq!(connect(&mut r, &mut e), RecoveryStep::Resume { handle: a });
        let mut step = r.step(&mut e, 0, Report::Resumed);
        // Every event of its log is this client's: read back to its start.
        for page in 0..EVENT_LOG_MAX_PAGES {
            assert_eq!(step, RecoveryStep::ReadLog { handle: a, page });
            step = r.step(&mut e, 0, log(&["e-1", "e-2"], more));
            if !more {
                break;
            }
        }
        if more {
            // Its start was not within the pages read: nothing of it goes
            // (the events held may be older than all that was read).
            assert_eq!(step, RecoveryStep::Deliver { handle: a, from: None, gap: Gap::Cut });
            assert_eq!(e.last_durable_event(a), None);
        } else {
            assert_eq!(step, RecoveryStep::Deliver { handle: a, from: Some(0), gap: Gap::Whole }, "all of it");
            assert_eq!(e.last_durable_event(a), Some(event_id_hash(b"e-2")));
        }
    }
}
