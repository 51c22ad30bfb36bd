//! The engine's transmit store when it is fixed and fills: no wait loses
//! its answer or refusal, each goes exactly once, and the wire keeps the
//! engine's order once the host has pulled what was queued.
#![cfg(not(loom))]

use copilot_core::{AnswerError, Cause, Engine, EngineConfig, FrameDecoder, ObligationId, Route};
use serde_json::Value;

/// Room for about two answers of these tests' waits.
const ROOM: usize = 480;
type SmallEngine = Engine<u32, u32, [u8; 0], [u8; ROOM], 4, 4, 16>;

fn permission(request: &str) -> Vec<u8> {
    let body = format!(
        r#"{{"jsonrpc":"2.0","method":"session.event","params":{{"sessionId":"s1","event":{{"type":"permission.requested","data":{{"requestId":"{request}","permissionRequest":{{}}}}}}}}}}"#
    );
    [format!("Content-Length: {}\r\n\r\n", body.len()).into_bytes(), body.into_bytes()].concat()
}

/// An engine with session "s1" open and `n` permission waits on it (r0, r1, ...).
fn waits(n: usize) -> (Box<SmallEngine>, copilot_core::SessionHandle, Vec<ObligationId>) {
    let mut e: Box<SmallEngine> = Box::new(Engine::new([], [0; ROOM], EngineConfig::new().handler_timeout(None)));
    let h = e.reserve("s1", 1).unwrap();
    e.complete_open(h, Ok(copilot_core::Value::parse(b"{}").unwrap())).unwrap();
    let mut d: FrameDecoder<[u8; 1024]> = FrameDecoder::new();
    let mut ids = Vec::new();
    for i in 0..n {
        d.feed(&permission(&format!("r{i}")));
        let o = e.poll(&mut d, 0).unwrap();
        assert!(matches!(o.route, Route::Event { .. }));
        ids.push(o.obligation.unwrap().id);
    }
    assert!(e.transmit().is_empty());
    (e, h, ids)
}

/// Takes what is queued, as a host does between calls.
fn pull(e: &mut SmallEngine, wire: &mut Vec<u8>) {
    let mut buf = [0; 100];
    while let Some(n) = e.poll_transmit(&mut buf) {
        wire.extend_from_slice(&buf[..n]);
    }
}

/// The frames on the wire: (requestId, result) of each answering RPC, in order.
fn frames(wire: &[u8]) -> Vec<(String, Value)> {
    let mut d: FrameDecoder<[u8; 1024]> = FrameDecoder::new();
    let mut out = Vec::new();
    let mut rest = wire;
    while !rest.is_empty() {
        rest = &rest[d.feed(rest)..];
        while let Some(body) = d.poll() {
            let v: Value = serde_json::from_slice(body.unwrap()).unwrap();
            let p = &v["params"];
            out.push((p["requestId"].as_str().unwrap().to_owned(), p["result"].clone()));
        }
    }
    out
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn an_answer_that_finds_the_store_full_waits_and_goes_once_in_order() {
    let (mut e, _, ids) = waits(4);
    let mut wire = Vec::new();
    let approve = br#"{"kind":"approve-once"}"#;
    e.answer(ids[0], approve).unwrap();
    e.answer(ids[1], approve).unwrap();
    // The store holds two answers: the third finds no room and is kept open.
    assert_eq!(e.answer(ids[2], approve), Err(AnswerError::Full));
    assert!(e.is_open(ids[2]), "nothing was sent: the wait is still open");
    // (A failed handler's refusal: without a handler a permission wait is
    // left to another client, and nothing would be sent.)
    assert_eq!(e.refuse(ids[3], Cause::HandlerFailed), Err(AnswerError::Full));
    assert!(e.is_open(ids[3]));
    pull(&mut e, &mut wire);
    e.answer(ids[2], approve).unwrap();
    e.refuse(ids[3], Cause::HandlerFailed).unwrap();
    pull(&mut e, &mut wire);
    let got = frames(&wire);
    let order: Vec<&str> = got.iter().map(|(r, _)| r.as_str()).collect();
    assert_eq!(order, ["r0", "r1", "r2", "r3"], "each once, in the order decided");
    assert_eq!(got[2].1["kind"], "approve-once");
    let s = e.stats(0);
    assert_eq!((s.answered, s.refused(Cause::HandlerFailed), s.open_obligations, s.answers_sent), (3, 1, 0, 4));
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn a_release_that_fills_the_store_owes_the_rest_and_refuses_each_once_as_pulled() {
    let (mut e, h, ids) = waits(12);
    let mut wire = Vec::new();
    assert_eq!(e.release(h), Some(1));
    assert!(!e.transmit().is_empty(), "what fits goes at once");
    // The rest are owed: due now, refused as the host pulls.
    assert_eq!(e.poll_timeout(), Some(0));
    let mut rounds = 0;
    while e.poll_timeout().is_some() {
        pull(&mut e, &mut wire);
        e.handle_timeout(0, |_, _| unreachable!());
        rounds += 1;
        assert!(rounds < 12, "each round refuses at least one");
    }
    pull(&mut e, &mut wire);
    assert!(rounds > 1, "the store filled: {rounds}");
    let got = frames(&wire);
    let order: Vec<String> = got.iter().map(|(r, _)| r.clone()).collect();
    let expected: Vec<String> = (0..12).map(|i| format!("r{i}")).collect();
    assert_eq!(order, expected, "every wait refused once, in table order");
    assert!(got.iter().all(|(_, r)| r["kind"] == "user-not-available"), "{got:?}");
    let s = e.stats(0);
    assert_eq!((s.refused(Cause::SessionGone), s.refused(Cause::Deadline), s.open_obligations), (12, 0, 0));
    assert!(ids.iter().all(|id| !e.is_open(*id)));
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn an_answer_larger_than_the_store_sends_the_refusal_instead() {
    let (mut e, _, ids) = waits(1);
    let big = format!(r#"{{"kind":"approve-once","note":"{}"}}"#, "x".repeat(ROOM));
    assert_eq!(e.answer(ids[0], big.as_bytes()), Err(AnswerError::TooLarge));
    assert!(!e.is_open(ids[0]));
    let mut wire = Vec::new();
    pull(&mut e, &mut wire);
    let got = frames(&wire);
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].1["kind"], "user-not-available");
    assert_eq!(e.stats(0).refused(Cause::HandlerFailed), 1);
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn a_disconnect_forgets_what_was_queued() {
    let (mut e, _, ids) = waits(1);
    e.answer(ids[0], b"{}").unwrap();
    e.disconnect(|_, _| {});
    assert!(e.transmit().is_empty());
}
