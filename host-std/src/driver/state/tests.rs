//! The driver's state alone: no thread, no lock, no clock. The test is the
//! shell: it feeds bytes and the time by hand, and acts on what the state
//! returns as the connection's threads would. Sessions are numbers here.

use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};

use copilot_core::{
    EngineConfig, FrameDecoder, GrowingBuffer, HandlerKind, RecoveryReport, RecoveryStep, RequestId, SessionHandle,
};
use serde_json::{json, Value};

use super::{CallRefused, DriverState, Outcome, Read, Routed};
use crate::driver::completion::Completion;
use crate::driver::waiter::{Marked, ReplyTx, Waiter};
use crate::error::Error;
use crate::transport::CloseCause;

type State = DriverState<u32>;

/// A state whose engine gives calls no deadline of its own (each call
/// brings one) and asks about no silent turn.
fn state() -> State {
    State::new("test", EngineConfig::new().request_timeout(None).handler_timeout(Some(300_000)).stall_interval(None))
}

/// What the reader does with bytes read: into the decoder, then the state.
struct Wire {
    decoder: FrameDecoder<GrowingBuffer>,
    read: Read<u32>,
}

impl Wire {
    fn new() -> Wire {
        Wire { decoder: FrameDecoder::with_buffer(GrowingBuffer::new(1024)), read: Read::default() }
    }

    /// `messages` as one read, then routed at `now`.
    fn feed(&mut self, state: &mut State, now: u64, messages: &[Value]) -> &mut Read<u32> {
        let mut bytes = Vec::new();
        for m in messages {
            let body = m.to_string();
            bytes.extend_from_slice(format!("Content-Length: {}\r\n\r\n{body}", body.len()).as_bytes());
        }
        let mut rest = &bytes[..];
        while !rest.is_empty() {
            let spare = self.decoder.spare();
            let n = spare.len().min(rest.len());
            spare[..n].copy_from_slice(&rest[..n]);
            self.decoder.commit(n);
            rest = &rest[n..];
        }
        state.handle_read(&mut self.decoder, now, &mut self.read);
        &mut self.read
    }
}

/// A call's slot, as `Call` keeps it.
fn slot() -> (Arc<Completion<Marked>>, ReplyTx) {
    let slot = Arc::new(Completion::default());
    (Arc::clone(&slot), ReplyTx(slot))
}

/// The slot's value, if the call was told.
fn told(slot: &Completion<Marked>) -> Option<Marked> {
    match slot.poll_take(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(value) => value,
        Poll::Pending => None,
    }
}

/// A waker that counts its wakes.
#[derive(Default)]
struct Count(AtomicUsize);

impl Wake for Count {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, SeqCst);
    }
}

fn counter() -> (Arc<Count>, Waker) {
    let count = Arc::new(Count::default());
    (Arc::clone(&count), Waker::from(count))
}

fn event(session: &str, id: &str, ty: &str, data: Value) -> Value {
    json!({"jsonrpc": "2.0", "method": "session.event",
        "params": {"sessionId": session, "event": {"id": id, "type": ty, "data": data}}})
}

fn answer(id: RequestId, result: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id.0, "result": result})
}

/// The JSON of each frame in `bytes`.
fn frames(bytes: &[u8]) -> Vec<Value> {
    let mut decoder = FrameDecoder::with_buffer(GrowingBuffer::new(bytes.len().max(1)));
    decoder.spare()[..bytes.len()].copy_from_slice(bytes);
    decoder.commit(bytes.len());
    let mut out = Vec::new();
    while let Some(Ok(body)) = decoder.poll() {
        out.push(serde_json::from_slice(body).expect("a JSON frame"));
    }
    out
}

#[test]
fn an_answer_after_events_is_told_after_their_flush_and_its_call_returns_once_they_are_delivered() {
    let mut state = state();
    let mut wire = Wire::new();
    let (handle, _) = state.reserve(Some("s1"), false, 1).expect("reserved");
    let (slot, reply) = slot();
    let id = state.start_call(Waiter::Reply(reply), 60_000, 0).expect("started");
    let read = wire.feed(
        &mut state,
        10,
        &[event("s1", "e1", "assistant.message", json!({"content": "before"})), answer(id, json!({"ok": true}))],
    );
    // The event is routed for its session, which is flushed; the answer
    // waits in `answered`, for after the flush: nothing was told yet.
    assert!(matches!(&read.routed[..], [Routed::Event { target: 1, .. }]));
    let Routed::Event { event, .. } = &read.routed[0] else { unreachable!() };
    let delivered: Value = serde_json::from_slice(&read.bytes[event.clone()]).unwrap();
    assert_eq!(delivered["data"]["content"], "before");
    assert_eq!(read.flush.iter().map(|(h, t)| (*h, *t)).collect::<Vec<_>>(), [(handle, 1)]);
    assert_eq!(read.answered.len(), 1);
    assert!(told(&slot).is_none(), "the call is told only by the shell, after the flush");

    // The shell flushes the session: its batch goes to the event pool with
    // a ticket; then the answer is told with the mark after that ticket.
    let ticket = state.fence_ticket();
    let mark = state.fence_mark();
    for (reply, outcome) in read.answered.drain(..) {
        reply.send_after(outcome, mark);
    }
    let (body, told_mark) = told(&slot).expect("told");
    assert_eq!(serde_json::from_slice::<Value>(&body.expect("a result")).unwrap(), json!({"ok": true}));
    assert_eq!(told_mark, mark);

    // The call returns once the batch is delivered, not before.
    let (woken, waker) = counter();
    assert!(!state.poll_fence(mark, &waker), "the events before the answer are not delivered yet");
    assert!(!state.poll_fence(mark, &waker));
    assert_eq!(state.fence_waiting(), 1);
    let later = state.fence_ticket();
    state.fence_back(ticket).into_iter().for_each(Waker::wake);
    assert_eq!(woken.0.load(SeqCst), 1, "woken once, when its batch came back");
    assert!(state.poll_fence(mark, &waker), "a batch flushed after the answer is not waited for");
    let _ = state.fence_back(later);
}

#[test]
fn a_call_past_its_deadline_is_failed_at_handle_timeout_and_its_late_answer_is_unmatched() {
    let mut state = state();
    let mut wire = Wire::new();
    let (_slot, reply) = slot();
    let id = state.start_call(Waiter::Reply(reply), 5_000, 0).expect("started");
    assert_eq!(state.poll_timeout(), Some(5_000), "call again at the call's deadline");
    let early = state.handle_timeout(4_999);
    assert!(early.failed.is_empty() && early.woken.is_empty(), "not due yet");
    let due = state.handle_timeout(5_000);
    assert_eq!(due.failed.len(), 1, "the call's caller is handed back to be told");
    assert!(matches!(due.failed.into_iter().next(), Some(Waiter::Reply(_))));
    assert_eq!(state.poll_timeout(), None, "nothing left to time");
    assert!(!state.reads_on(), "no request waits for its answer any more");
    let read = wire.feed(&mut state, 6_000, &[answer(id, json!({}))]);
    assert!(read.answered.is_empty() && read.routed.is_empty(), "the late answer goes nowhere");
    assert_eq!(state.engine().router().stats().unmatched_responses, 1);
}

#[test]
fn an_async_wait_is_woken_at_its_own_deadline() {
    let mut state = state();
    let (count, waker) = counter();
    let slot = Arc::new(std::sync::Mutex::new(Some(waker)));
    state.wake_at(250, Arc::clone(&slot));
    assert_eq!(state.poll_timeout(), Some(250));
    assert!(state.handle_timeout(249).woken.is_empty());
    let due = state.handle_timeout(250).woken;
    assert_eq!(due.len(), 1);
    due[0].lock().unwrap().take().expect("its waker").wake();
    assert_eq!(count.0.load(SeqCst), 1);
    assert_eq!(state.poll_timeout(), None);
}

#[test]
fn a_frame_for_a_session_the_server_names_is_parked_until_its_create_completes() {
    let mut state = state();
    let mut wire = Wire::new();
    let (handle, _) = state.reserve(None, false, 7).expect("reserved");
    let (slot, reply) = slot();
    let id = state.start_call(Waiter::Open { handle, target: 7, reply }, 60_000, 0).expect("started");
    // The CLI's events run ahead of its answer, as the real one's do.
    let read = wire.feed(
        &mut state,
        1,
        &[event("srv-1", "e1", "session.start", json!({})), event("srv-1", "e2", "session.info", json!({}))],
    );
    assert!(read.routed.is_empty() && read.flush.is_empty(), "parked, not delivered nor dropped");
    assert_eq!(state.engine().router().stats().parked, 2);
    let read = wire.feed(&mut state, 2, &[answer(id, json!({"sessionId": "srv-1"}))]);
    // The open first (its name), then the parked events, in order.
    let ids: Vec<String> = read
        .routed
        .iter()
        .map(|r| match r {
            Routed::Opened { target: 7, name, .. } => format!("opened {}", name.as_deref().unwrap_or("?")),
            Routed::Event { target: 7, event, .. } => {
                let event: Value = serde_json::from_slice(&read.bytes[event.clone()]).unwrap();
                format!("event {}", event["id"].as_str().unwrap())
            }
            other => panic!("unexpected {other:?}"),
        })
        .collect();
    assert_eq!(ids, ["opened srv-1", "event e1", "event e2"]);
    assert_eq!(read.flush.len(), 1);
    assert_eq!(read.answered.len(), 1);
    assert!(told(&slot).is_none());
    assert_eq!(state.engine().router().stats().unknown_session, 0);
    assert_eq!(state.sessions(), [(handle, true, 7)]);
}

#[test]
fn a_wait_of_the_agent_goes_to_its_session_after_its_event_and_its_answer_is_written_once() {
    let mut state = state();
    let mut wire = Wire::new();
    state.reserve(Some("s1"), false, 3).expect("reserved");
    let read = wire.feed(
        &mut state,
        0,
        &[event("s1", "e1", "permission.requested", json!({"requestId": "r1", "permissionRequest": {}}))],
    );
    let (Routed::Event { target: 3, .. }, Routed::Wait { target: 3, wait }) = (&read.routed[0], &read.routed[1]) else {
        panic!("the event, then its wait: {:?}", read.routed);
    };
    assert_eq!((wait.kind, wait.name), (HandlerKind::Permission, "permission.requested"));
    let id = wait.id;
    assert_eq!(state.poll_transmit(), None, "nothing to write until the handler answers");
    state.settle(id, Outcome::Answer(br#"{"kind":"approve-once"}"#)).expect("answered");
    let written = frames(&state.poll_transmit().expect("the answer"));
    assert_eq!(written.len(), 1);
    assert_eq!(written[0]["method"], "session.permissions.handlePendingPermissionRequest");
    assert_eq!(written[0]["params"]["result"], json!({"kind": "approve-once"}));
    assert!(state.settle(id, Outcome::Decline).is_err(), "settled once");
    assert_eq!(state.poll_transmit(), None);
}

#[test]
fn client_wide_inference_waits_run_one_at_a_time_in_the_order_they_came() {
    let mut state = state();
    let mut wire = Wire::new();
    let request = |id: u64, chunk: &str| {
        json!({"jsonrpc": "2.0", "id": id, "method": "llmInference.httpRequestChunk",
            "params": {"requestId": "q1", "chunk": chunk}})
    };
    let read = wire.feed(&mut state, 0, &[request(1, "a"), request(2, "b")]);
    assert!(read.routed.is_empty(), "an inference wait is not run at once: {:?}", read.routed);
    assert!(read.start_in_order, "a task is to take the lane");
    let first = state.next_in_order().expect("the first chunk");
    assert_eq!(first.kind, HandlerKind::LlmInference);
    let read = wire.feed(&mut state, 1, &[request(3, "c")]);
    assert!(!read.start_in_order, "one task takes the lane at a time");
    let chunks: Vec<Value> = std::iter::from_fn(|| state.next_in_order())
        .map(|w| serde_json::from_slice::<Value>(&w.data).unwrap()["chunk"].clone())
        .collect();
    assert_eq!(chunks, ["b", "c"]);
    let read = wire.feed(&mut state, 2, &[request(4, "d")]);
    assert!(read.start_in_order, "the task ended with the lane empty: the next wait starts another");
}

#[test]
fn shutting_down_fails_every_waiter_ends_every_session_and_wakes_the_end_s_waits() {
    let mut state = state();
    let (open_handle, _) = state.reserve(None, false, 1).expect("reserved");
    state.reserve(Some("s2"), false, 2).expect("reserved");
    let (_, a) = slot();
    let (_, b) = slot();
    let (_, c) = slot();
    state.start_call(Waiter::Reply(a), 60_000, 0).expect("started");
    state.start_call(Waiter::Reply(b), 60_000, 0).expect("started");
    state.start_call(Waiter::Open { handle: open_handle, target: 1, reply: c }, 60_000, 0).expect("started");
    let (woken, waker) = counter();
    assert_eq!(state.poll_closed(&waker), None);
    assert_eq!(state.poll_closed(&waker), None);

    let ended = state.shut_down(CloseCause::PeerClosed);
    assert_eq!(ended.failed.len(), 3, "every call in flight");
    let mut sessions = ended.sessions.clone();
    sessions.sort_unstable();
    assert_eq!(sessions, [1, 2], "every session");
    assert_eq!(ended.woken.len(), 1, "the end's wait, once");
    ended.woken.into_iter().for_each(Waker::wake);
    assert_eq!(woken.0.load(SeqCst), 1);
    for w in ended.failed {
        w.fail(Error::Disconnected(CloseCause::PeerClosed.to_string()));
    }

    assert!(state.is_closed());
    assert_eq!(state.close_cause(), Some(&CloseCause::PeerClosed));
    assert_eq!(state.poll_closed(&waker), Some(CloseCause::PeerClosed));
    let (_, late) = slot();
    assert_eq!(state.start_call(Waiter::Reply(late), 60_000, 0), Err(CallRefused::Closed));
    assert!(state.reads_on(), "the reader reads to the end");
    assert!(state.sessions().is_empty());
}

#[test]
fn a_lost_transport_holds_the_answers_given_meanwhile_until_the_recovery_says_the_sessions_are_resumed() {
    let mut state = state();
    let mut wire = Wire::new();
    let (handle, _) = state.reserve(Some("s1"), false, 5).expect("reserved");
    let (_, reply) = slot();
    let id = state.start_call(Waiter::Open { handle, target: 5, reply }, 60_000, 0).expect("started");
    wire.feed(&mut state, 0, &[answer(id, json!({"sessionId": "s1"}))]);
    let read = wire.feed(
        &mut state,
        0,
        &[event("s1", "e1", "permission.requested", json!({"requestId": "r1", "permissionRequest": {}}))],
    );
    let Some(Routed::Wait { wait, .. }) = read.routed.pop() else { panic!("a wait") };
    let (_, reply) = slot();
    state.start_call(Waiter::Reply(reply), 60_000, 0).expect("started");

    let lost = state.connection_lost(1);
    assert_eq!(lost.failed.len(), 1, "the call in flight lost its answer");
    assert!(state.is_recovering() && state.reads_on());
    state.start_recovery(1);
    state.settle(wait.id, Outcome::Answer(br#"{"kind":"approve-once"}"#)).expect("answered");
    let (mut now, mut report) = (1, RecoveryReport::Next);
    let resumed = loop {
        assert_eq!(state.poll_transmit(), None, "held for the next connection");
        report = match state.step_recovery(now, report) {
            RecoveryStep::Wait { until } => {
                now = until;
                RecoveryReport::Next
            }
            RecoveryStep::Connect { attempt: 1, .. } => {
                assert_eq!(state.new_transport(), 1);
                RecoveryReport::Connected
            }
            RecoveryStep::Resume { handle: h } => {
                assert_eq!(h, handle);
                RecoveryReport::Skipped
            }
            RecoveryStep::Recovered { .. } => break now,
            other => panic!("unexpected {other:?}"),
        };
    };
    assert!(resumed >= 1 && !state.is_recovering());
    let written = frames(&state.poll_transmit().expect("the answer held"));
    assert_eq!(written[0]["params"]["requestId"], "r1");
    assert_eq!(state.sessions(), [(handle, true, 5)], "the session stays");
}

#[test]
fn a_refused_or_forgotten_open_gives_its_slot_and_target_back() {
    let mut state = state();
    let (handle, _) = state.reserve(None, false, 9).expect("reserved");
    let (_, reply) = slot();
    let id = state.start_call(Waiter::Open { handle, target: 9, reply }, 60_000, 0).expect("started");
    state.forget(id, 1);
    assert!(state.sessions().is_empty(), "the slot is free");
    assert_eq!(state.poll_released(), [9, 9], "the table's target and the waiter's, dropped by the shell");
    assert_eq!(state.poll_released(), Vec::<u32>::new());
    let _: SessionHandle = handle;
}
