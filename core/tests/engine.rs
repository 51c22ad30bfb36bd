//! The engine against a scripted peer (a tiny fake CLI in this process) on a
//! virtual clock: for every obligation kind of the core's answer table and
//! every way a wait can go, exactly one answer reaches the peer, with the
//! expected payload. Deadlines fire by moving the clock, never by sleeping.
//! Plus golden-byte tests of the frames the engine writes by itself.
#![cfg(not(loom))]

use std::collections::HashMap;

use copilot_core::json::Kind;
use copilot_core::{
    AnswerError, AnswerRow, AnswerVia, Cause, Engine, EngineConfig, FrameDecoder, Refusal, Route, Trigger, ANSWERS,
};
use serde_json::{json, Value};

type TestEngine = Engine<u32, u32, Vec<u8>, Vec<u8>, 16, 16, 16>;

/// Room for what one call of these tests sends.
const TRANSMIT: usize = 1 << 16;

/// Takes every frame the engine queued.
fn sent(engine: &mut TestEngine) -> Vec<u8> {
    let bytes = engine.transmit().to_vec();
    engine.transmitted(bytes.len());
    bytes
}

const SESSION: &str = "s-1";
const HANDLER_MS: u64 = 1_000;

fn frame(body: &Value) -> Vec<u8> {
    let body = serde_json::to_vec(body).unwrap();
    [format!("Content-Length: {}\r\n\r\n", body.len()).into_bytes(), body].concat()
}

fn raw_frame(body: &str) -> Vec<u8> {
    [format!("Content-Length: {}\r\n\r\n", body.len()).into_bytes(), body.as_bytes().to_vec()].concat()
}

/// What the test's host does with an obligation.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Scenario {
    HandlerAnswers,
    NoHandler,
    HandlerFails,
    PastDeadline,
    UnreadableData,
    DriftedData,
    /// A member the handler reads is missing: the engine refuses at once.
    MissingRead,
    NoRequestId,
    ReleasedBeforeEvent,
    DestroyedMidDecision,
    ParkOverflow,
}

const SCENARIOS: [Scenario; 11] = [
    Scenario::HandlerAnswers,
    Scenario::NoHandler,
    Scenario::HandlerFails,
    Scenario::PastDeadline,
    Scenario::UnreadableData,
    Scenario::DriftedData,
    Scenario::MissingRead,
    Scenario::NoRequestId,
    Scenario::ReleasedBeforeEvent,
    Scenario::DestroyedMidDecision,
    Scenario::ParkOverflow,
];

/// The scripted peer: reads what the engine sends, records every answer by
/// the wait it answers, and acknowledges answer RPCs as the CLI does
/// (`success:false` for a second answer to the same wait).
#[derive(Default)]
struct Peer {
    inbox: Vec<u8>,
    /// Answers per wait key ("rpc:<requestId>" or "id:<json id>").
    answers: HashMap<String, Vec<Value>>,
    acks: Vec<Vec<u8>>,
}

impl Peer {
    fn read(&mut self) {
        let mut d: FrameDecoder<[u8; 65536]> = FrameDecoder::new();
        let bytes = std::mem::take(&mut self.inbox);
        let mut rest = &bytes[..];
        while !rest.is_empty() {
            rest = &rest[d.feed(rest)..];
            while let Some(body) = d.poll() {
                let msg: Value = serde_json::from_slice(body.unwrap()).unwrap();
                let key = if msg.get("method").is_some() {
                    format!("rpc:{}", msg["params"]["requestId"])
                } else {
                    format!("id:{}", msg["id"])
                };
                let entry = self.answers.entry(key).or_default();
                if let Some(id) = msg.get("id").filter(|_| msg.get("method").is_some()) {
                    let success = entry.is_empty();
                    self.acks.push(frame(&json!({"jsonrpc":"2.0","id":id,"result":{"success":success}})));
                }
                entry.push(msg);
            }
        }
    }
}

/// The wait a row's trigger makes, as the peer sends it.
fn wait_frame(row: &AnswerRow, session: &str, data: Value) -> (Vec<u8>, String) {
    match row.trigger {
        Trigger::Event(ty) => (
            frame(&json!({"jsonrpc":"2.0","method":"session.event",
                "params":{"sessionId":session,"event":{"type":ty,"id":"e-1","data":data}}})),
            format!("rpc:{}", json!("req-7")),
        ),
        Trigger::Request(method) => {
            let mut params = data;
            params["sessionId"] = json!(session);
            (frame(&json!({"jsonrpc":"2.0","id":41,"method":method,"params":params})), "id:41".to_owned())
        }
    }
}

fn data_for(scenario: Scenario, row: &AnswerRow) -> Value {
    let mut data = json!({"requestId":"req-7","field":"x"});
    // The members the row's handler reads, of the kind it reads them.
    for (name, kind) in row.handler.reads() {
        data[name] = match kind {
            Kind::Object => json!({}),
            Kind::String => json!("read"),
            _ => unreachable!("a handler reads objects and strings"),
        };
    }
    match scenario {
        Scenario::MissingRead => {
            let (name, _) = row.handler.reads().next().unwrap();
            data.as_object_mut().unwrap().remove(name);
        }
        // Readable to the core, not to a typed reader: a lone surrogate.
        Scenario::UnreadableData => data["field"] = json!("LONE"),
        // A field the handler's types require is missing.
        Scenario::DriftedData => {
            data.as_object_mut().unwrap().remove("field");
        }
        Scenario::NoRequestId => {
            data.as_object_mut().unwrap().remove("requestId");
        }
        _ => {}
    }
    if matches!(row.trigger, Trigger::Request(_)) {
        data.as_object_mut().unwrap().remove("requestId");
    }
    data
}

struct Run {
    engine: Box<TestEngine>,
    decoder: FrameDecoder<[u8; 65536]>,
    peer: Peer,
    now: u64,
}

impl Run {
    fn new(park_frames: usize) -> Self {
        let config = EngineConfig::new().handler_timeout(Some(HANDLER_MS)).park_frames(park_frames);
        Run {
            engine: Box::new(Engine::new(vec![0; 4096], vec![0; TRANSMIT], config)),
            decoder: FrameDecoder::new(),
            peer: Peer::default(),
            now: 0,
        }
    }

    /// Feeds bytes from the peer; returns the obligations routed, and
    /// whether each routed event was delivered (`Route::Event`).
    fn feed(&mut self, bytes: &[u8]) -> Vec<copilot_core::Obligation> {
        let mut obligations = Vec::new();
        let mut rest = bytes;
        while !rest.is_empty() {
            rest = &rest[self.decoder.feed(rest)..];
            while let Some(o) = self.engine.poll(&mut self.decoder, self.now) {
                assert!(!matches!(o.route, Route::Malformed(_) | Route::FrameError(_)), "{:?}", o.route);
                obligations.extend(o.obligation);
            }
        }
        self.pull();
        obligations
    }

    fn drain_parked(&mut self) -> Vec<copilot_core::Obligation> {
        let mut obligations = Vec::new();
        while let Some(o) = self.engine.poll_parked(self.now) {
            obligations.extend(o.obligation);
        }
        self.pull();
        obligations
    }

    /// What the engine queued goes to the peer.
    fn pull(&mut self) {
        let bytes = sent(&mut self.engine);
        self.peer.inbox.extend_from_slice(&bytes);
    }

    /// The peer reads, then its acknowledgements go back to the engine.
    fn exchange(&mut self) {
        self.peer.read();
        for ack in std::mem::take(&mut self.peer.acks) {
            let n = self.feed(&ack);
            assert!(n.is_empty());
        }
    }
}

/// Runs one row in one scenario; returns the answers the peer got for the wait.
fn run(row: &AnswerRow, scenario: Scenario) -> (Vec<Value>, Run) {
    let mut r = Run::new(if scenario == Scenario::ParkOverflow { 1 } else { 100 });
    let mut handle = None;
    if scenario != Scenario::ParkOverflow {
        let h = r.engine.reserve(SESSION, 1).unwrap();
        r.engine.complete_open(h, Ok(copilot_core::Value::parse(b"{}").unwrap())).unwrap();
        assert!(r.engine.transmit().is_empty());
        handle = Some(h);
    }
    if scenario == Scenario::ReleasedBeforeEvent {
        r.engine.release(handle.unwrap());
        assert!(r.engine.transmit().is_empty());
    }
    let unassigned = if scenario == Scenario::ParkOverflow {
        let h = r.engine.reserve_unassigned(1).unwrap();
        // A plain event fills the parking first.
        let filler = frame(&json!({"jsonrpc":"2.0","method":"session.event",
            "params":{"sessionId":SESSION,"event":{"type":"session.info","id":"e-0","data":{}}}}));
        assert!(r.feed(&filler).is_empty());
        Some(h)
    } else {
        None
    };
    let (bytes, key) = wait_frame(row, SESSION, data_for(scenario, row));
    let bytes = if scenario == Scenario::UnreadableData {
        String::from_utf8(bytes).unwrap().replace("LONE", "\\udc00").into_bytes()
    } else {
        bytes
    };
    // The frame length changed with the escape: re-frame the body.
    let bytes = {
        let text = String::from_utf8(bytes).unwrap();
        let body = &text[text.find("\r\n\r\n").unwrap() + 4..];
        raw_frame(body)
    };
    let mut obligations = r.feed(&bytes);
    if let Some(h) = unassigned {
        let v = json!({"sessionId": SESSION}).to_string();
        r.engine.complete_open(h, Ok(copilot_core::Value::parse(v.as_bytes()).unwrap())).unwrap();
        r.pull();
        obligations.extend(r.drain_parked());
    }
    for ob in &obligations {
        assert_eq!(ob.handler, row.handler, "{row:?}");
        assert_eq!(ob.deadline, Some(r.now + HANDLER_MS));
    }
    let expect_obligation = matches!(
        scenario,
        Scenario::HandlerAnswers
            | Scenario::NoHandler
            | Scenario::HandlerFails
            | Scenario::PastDeadline
            | Scenario::UnreadableData
            | Scenario::DriftedData
            | Scenario::DestroyedMidDecision
    );
    assert_eq!(obligations.len(), usize::from(expect_obligation), "{row:?} {scenario:?}");
    if let Some(ob) = obligations.first() {
        // The host reads the data with its typed reader.
        let typed = {
            let raw = String::from_utf8(bytes.clone()).unwrap();
            let body = &raw[raw.find("\r\n\r\n").unwrap() + 4..];
            serde_json::from_str::<Value>(body).ok().filter(|v| {
                let d = v.pointer("/params/event/data").or_else(|| v.get("params")).unwrap();
                d.get("field").is_some()
            })
        };
        match scenario {
            Scenario::HandlerAnswers => {
                assert!(typed.is_some());
                r.engine.answer(ob.id, br#"{"test":"answer"}"#).unwrap();
            }
            Scenario::NoHandler => r.engine.refuse(ob.id, Cause::NoHandler).unwrap(),
            Scenario::HandlerFails => r.engine.fail(ob.id, FAILURE).unwrap(),
            Scenario::UnreadableData | Scenario::DriftedData => {
                assert!(typed.is_none(), "the typed reader must fail here");
                r.engine.refuse(ob.id, Cause::Unreadable).unwrap();
            }
            Scenario::PastDeadline => {
                assert_eq!(r.engine.poll_timeout(), Some(HANDLER_MS));
                r.engine.handle_timeout(HANDLER_MS - 1, |_, _| unreachable!());
                assert!(r.engine.is_open(ob.id), "not before its deadline");
                r.now = r.engine.poll_timeout().unwrap();
                r.engine.handle_timeout(r.now, |_, _| unreachable!());
                assert_eq!(r.engine.answer(ob.id, b"{}"), Err(AnswerError::Stale), "too late");
            }
            Scenario::DestroyedMidDecision => {
                r.engine.release(handle.unwrap());
                assert_eq!(r.engine.answer(ob.id, b"{}"), Err(AnswerError::Stale));
            }
            _ => unreachable!(),
        }
        // Whatever happened, a second answer is rejected.
        assert_eq!(r.engine.answer(ob.id, b"{}"), Err(AnswerError::Stale));
        assert_eq!(r.engine.refuse(ob.id, Cause::NoHandler), Err(AnswerError::Stale));
    }
    // Time passes: nothing else is sent.
    r.now += 10 * HANDLER_MS;
    r.engine.handle_timeout(r.now, |_, _| unreachable!());
    assert_eq!(r.engine.poll_timeout(), None);
    r.pull();
    r.exchange();
    let answers = r.peer.answers.remove(&key).unwrap_or_default();
    (answers, r)
}

/// The payload of an answer as the peer got it.
fn payload(row: &AnswerRow, answer: &Value) -> Option<Value> {
    match row.via {
        AnswerVia::Rpc { method, key } => {
            assert_eq!(answer["method"], method);
            assert_eq!(answer["params"]["sessionId"], SESSION);
            assert_eq!(answer["params"]["requestId"], "req-7");
            answer["params"].get(key).cloned()
        }
        AnswerVia::Response { member: None } => {
            assert_eq!(answer["id"], 41);
            answer.get("result").cloned().or_else(|| answer.get("error").map(|e| json!({"code": e["code"]})))
        }
        AnswerVia::Response { member: Some(key) } => {
            assert_eq!(answer["id"], 41);
            match answer.get("result") {
                Some(Value::Object(result)) => {
                    assert!(result.keys().all(|k| k == key), "only `{key}` in {answer}");
                    result.get(key).cloned()
                }
                _ => answer.get("error").map(|e| json!({"code": e["code"]})),
            }
        }
    }
}

fn refusal(row: &AnswerRow) -> Option<Value> {
    match (row.via, row.refusal) {
        (_, Refusal::Payload(p)) => Some(serde_json::from_str(p).unwrap()),
        (AnswerVia::Rpc { .. } | AnswerVia::Response { member: Some(_) }, Refusal::Omit) => None,
        (AnswerVia::Rpc { .. }, Refusal::Error { .. }) => None,
        (AnswerVia::Response { member: None }, Refusal::Omit) => Some(Value::Null),
        (AnswerVia::Response { .. }, Refusal::Error { code, .. }) => Some(json!({ "code": code })),
    }
}

/// The text of a failed handler in the tests.
const FAILURE: &str = "boom: \"quoted\"\n";

/// What goes under the answer's key for a failed handler: nothing for a
/// row whose failure has a member of its own (the text goes there, in
/// place of the answer), else the refusal.
fn failure(row: &AnswerRow) -> Option<Value> {
    match (row.failure(), row.failure_error()) {
        (Some(_), _) => None,
        (None, Some((code, _))) => Some(json!({ "code": code })),
        (None, None) => refusal(row),
    }
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn every_kind_every_path_exactly_one_answer() {
    let mut cells = 0;
    for row in ANSWERS {
        for scenario in SCENARIOS {
            if scenario == Scenario::NoRequestId && matches!(row.trigger, Trigger::Request(_)) {
                continue; // a request without an id is a notification: no wait
            }
            if scenario == Scenario::MissingRead && row.handler.reads().next().is_none() {
                continue; // the handler reads no member
            }
            let global = matches!(row.trigger, Trigger::Request(m) if copilot_core::is_client_global(m));
            let by_session = matches!(
                scenario,
                Scenario::ReleasedBeforeEvent | Scenario::DestroyedMidDecision | Scenario::ParkOverflow
            );
            if global && by_session {
                continue; // its `sessionId` is payload: never routed by session (below)
            }
            let (answers, r) = run(row, scenario);
            let stats = r.engine.stats(r.now);
            assert_eq!(stats.open_obligations, 0, "{row:?} {scenario:?}");
            if scenario == Scenario::NoRequestId {
                assert!(answers.is_empty(), "nothing can answer a wait without a requestId");
                assert_eq!(stats.unanswerable, 1);
                continue;
            }
            if scenario == Scenario::NoHandler && row.leaves_unhandled() {
                // Left to another client of the session, which may have the
                // handler; none answered by the deadline, so the refusal
                // went then: never left to clients that do not exist.
                assert_eq!(answers.len(), 1, "{row:?}: refused at the deadline: {answers:?}");
                assert_eq!(payload(row, &answers[0]), refusal(row), "{row:?}");
                assert_eq!((stats.declined, stats.left_unanswered, stats.left_open), (1, 0, 0), "{row:?}");
                assert_eq!(stats.refused(Cause::Deadline), 1, "{row:?}");
                cells += 1;
                continue;
            }
            assert_eq!(answers.len(), 1, "{row:?} {scenario:?}: {answers:?}");
            let expected = match scenario {
                Scenario::HandlerAnswers => Some(json!({"test":"answer"})),
                Scenario::HandlerFails => failure(row),
                _ => refusal(row),
            };
            assert_eq!(payload(row, &answers[0]), expected, "{row:?} {scenario:?}");
            if let (Scenario::HandlerFails, Some(member)) = (scenario, row.failure()) {
                assert_eq!(answers[0]["params"][member], FAILURE, "{row:?}: the text goes under {member}");
            }
            if let (Scenario::HandlerFails, Some((_, machine))) = (scenario, row.failure_error()) {
                let data = json!({ "code": machine, "message": FAILURE });
                assert_eq!(answers[0]["error"]["message"], FAILURE, "{row:?}: the text is the error's message");
                assert_eq!(answers[0]["error"]["data"], data, "{row:?}: and its data, with the machine code");
            }
            if let AnswerVia::Rpc { .. } = row.via {
                assert_eq!(stats.acks_accepted, stats.answers_sent, "{row:?} {scenario:?}");
                assert_eq!(stats.acks_refused, 0);
            }
            let cause = match scenario {
                Scenario::HandlerAnswers => None,
                Scenario::NoHandler => Some(Cause::NoHandler),
                Scenario::HandlerFails => Some(Cause::HandlerFailed),
                Scenario::PastDeadline => Some(Cause::Deadline),
                Scenario::UnreadableData | Scenario::DriftedData | Scenario::MissingRead => Some(Cause::Unreadable),
                Scenario::ReleasedBeforeEvent | Scenario::DestroyedMidDecision => Some(Cause::SessionGone),
                Scenario::ParkOverflow => Some(Cause::ParkOverflow),
                Scenario::NoRequestId => unreachable!(),
            };
            match cause {
                Some(c) => assert_eq!(stats.refused(c), 1, "{row:?} {scenario:?} {stats:?}"),
                None => assert_eq!(stats.answered, 1),
            }
            cells += 1;
        }
    }
    assert!(cells >= ANSWERS.len() * 9 - 6);
}

fn golden(engine: &mut TestEngine, input: &str) -> (String, Option<Cause>) {
    let mut d: FrameDecoder<[u8; 4096]> = FrameDecoder::new();
    let bytes = raw_frame(input);
    d.feed(&bytes);
    let refused = engine.poll(&mut d, 0).unwrap().refused;
    (String::from_utf8(sent(engine)).unwrap(), refused)
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn golden_bytes_of_answers_and_refusals() {
    let mut e: Box<TestEngine> = Box::new(Engine::new(Vec::new(), vec![0; TRANSMIT], EngineConfig::new()));
    let h = e.reserve("s1", 1).unwrap();
    let mut d: FrameDecoder<[u8; 4096]> = FrameDecoder::new();
    let ev = r#"{"jsonrpc":"2.0","method":"session.event","params":{"sessionId":"s\u0031","event":{"type":"permission.requested","id":"e","data":{"requestId":"r\"1","permissionRequest":{}}}}}"#;
    d.feed(&raw_frame(ev));
    let o = e.poll(&mut d, 5).unwrap();
    assert!(e.transmit().is_empty());
    let ob = o.obligation.unwrap();
    assert!(matches!(o.route, Route::Event { session, .. } if session == h));
    e.answer(ob.id, br#"{"kind":"approve-once"}"#).unwrap();
    let body = r#"{"jsonrpc":"2.0","id":"answer-1","method":"session.permissions.handlePendingPermissionRequest","params":{"sessionId":"s\u0031","requestId":"r\"1","result":{"kind":"approve-once"}}}"#;
    assert_eq!(String::from_utf8(sent(&mut e)).unwrap(), format!("Content-Length: {}\r\n\r\n{body}", body.len()));

    // Resolved by a hook: delivered, not an obligation, nothing sent.
    let hooked = r#"{"jsonrpc":"2.0","method":"session.event","params":{"sessionId":"s1","event":{"type":"permission.requested","data":{"requestId":"r2","resolvedByHook":true}}}}"#;
    let (sent, refused) = golden(&mut e, hooked);
    assert_eq!((sent.as_str(), refused), ("", None));
    // The event half of a double delivery is not an obligation either.
    let dup = r#"{"jsonrpc":"2.0","method":"session.event","params":{"sessionId":"s1","event":{"type":"user_input.requested","data":{"requestId":"r3"}}}}"#;
    assert_eq!(golden(&mut e, dup), (String::new(), None));

    // A wait for a session this client does not have: refused at once.
    let ghost = r#"{"jsonrpc":"2.0","method":"session.event","params":{"sessionId":"gone","event":{"type":"mcp.headers_refresh_required","data":{"requestId":"r4"}}}}"#;
    let body = r#"{"jsonrpc":"2.0","id":"answer-2","method":"session.mcp.headers.handlePendingHeadersRefreshRequest","params":{"sessionId":"gone","requestId":"r4","result":{"kind":"none"}}}"#;
    assert_eq!(
        golden(&mut e, ghost),
        (format!("Content-Length: {}\r\n\r\n{body}", body.len()), Some(Cause::SessionGone))
    );
    // Sampling's refusal leaves the response out.
    let ghost = r#"{"jsonrpc":"2.0","method":"session.event","params":{"sessionId":"gone","event":{"type":"sampling.requested","data":{"requestId":"r5"}}}}"#;
    let body = r#"{"jsonrpc":"2.0","id":"answer-3","method":"session.ui.handlePendingSampling","params":{"sessionId":"gone","requestId":"r5"}}"#;
    assert_eq!(golden(&mut e, ghost).0, format!("Content-Length: {}\r\n\r\n{body}", body.len()));
    // An unknown method and a malformed request get their error codes.
    let unknown = r#"{"jsonrpc":"2.0","id":"x-1","method":"nobody.knows","params":{}}"#;
    let body = r#"{"jsonrpc":"2.0","id":"x-1","error":{"code":-32601,"message":"method not found"}}"#;
    assert_eq!(
        golden(&mut e, unknown),
        (format!("Content-Length: {}\r\n\r\n{body}", body.len()), Some(Cause::NotServed))
    );
    let bad = r#"{"jsonrpc":"1.0","id":9,"method":"x"}"#;
    let body = r#"{"jsonrpc":"2.0","id":9,"error":{"code":-32600,"message":"invalid request"}}"#;
    assert_eq!(golden(&mut e, bad), (format!("Content-Length: {}\r\n\r\n{body}", body.len()), Some(Cause::Malformed)));
    // A request's refusal with a result payload.
    let plan = r#"{"jsonrpc":"2.0","id":3,"method":"exitPlanMode.request","params":{"sessionId":"s1","summary":"x"}}"#;
    let (sent, refused) = golden(&mut e, plan);
    assert_eq!((sent.as_str(), refused), ("", None), "an obligation: the host answers");
    // Acknowledgements of answers are counted, not reported as unmatched.
    let ack = r#"{"jsonrpc":"2.0","id":"answer-1","result":{"success":false}}"#;
    let mut d: FrameDecoder<[u8; 4096]> = FrameDecoder::new();
    d.feed(&raw_frame(ack));
    let o = e.poll(&mut d, 0).unwrap();
    assert_eq!(o.answer_ack, Some(false));
    let s = e.stats(100);
    assert_eq!((s.acks_refused, s.router.unmatched_responses), (1, 0));
    assert_eq!((s.open_obligations, s.oldest_obligation_age), (1, Some(100)));
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn answers_need_no_request_slot() {
    // 16 pending slots, all taken by requests in flight: 200 waits (in
    // batches of 16 obligations) are still all answered.
    let mut r = Run::new(100);
    let h = r.engine.reserve(SESSION, 1).unwrap();
    r.engine.complete_open(h, Ok(copilot_core::Value::parse(b"{}").unwrap())).unwrap();
    while r.engine.insert_request(0, 0).is_ok() {}
    for batch in 0..200 / 16 + 1 {
        let mut bytes = Vec::new();
        for i in 0..16 {
            let n = batch * 16 + i;
            if n >= 200 {
                break;
            }
            bytes.extend(frame(&json!({"jsonrpc":"2.0","method":"session.event","params":{"sessionId":SESSION,
                "event":{"type":"permission.requested","data":{"requestId":format!("p{n}"),"permissionRequest":{}}}}})));
        }
        let obligations = r.feed(&bytes);
        for ob in obligations {
            r.engine.answer(ob.id, br#"{"kind":"approved"}"#).unwrap();
        }
        r.pull();
        r.exchange();
    }
    assert_eq!(r.peer.answers.len(), 200);
    assert!(r.peer.answers.values().all(|a| a.len() == 1));
    let s = r.engine.stats(0);
    assert_eq!((s.answered, s.acks_accepted, s.router.unmatched_responses), (200, 200, 0));
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn unreadable_create_answer_frees_the_slot() {
    let mut e: Box<TestEngine> = Box::new(Engine::new(Vec::new(), vec![0; TRANSMIT], EngineConfig::new()));
    for i in 0..100 {
        let h = e.reserve_unassigned(i).unwrap();
        let bad = copilot_core::Value::parse(br#"{"sessionId":5}"#).unwrap();
        assert_eq!(e.complete_open(h, Ok(bad)), Err(copilot_core::OpenError::Unreadable));
        let h = e.reserve(&format!("s{i}"), i).unwrap();
        let bad = copilot_core::Value::parse(b"[]").unwrap();
        assert_eq!(e.complete_open(h, Ok(bad)), Err(copilot_core::OpenError::Unreadable));
    }
    assert!(e.router().sessions().is_empty(), "no slot leaks");
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn resume_takes_over_an_open_id_and_keeps_its_waits() {
    let mut r = Run::new(100);
    let old = r.engine.reserve(SESSION, 1).unwrap();
    let wait = frame(&json!({"jsonrpc":"2.0","method":"session.event","params":{"sessionId":SESSION,
        "event":{"type":"elicitation.requested","data":{"requestId":"q","message":"?"}}}}));
    let obs = r.feed(&wait);
    let (new, taken) = r.engine.reserve_resume(SESSION, 2).unwrap();
    assert_eq!(taken, Some((old, 1)), "the old handle is given back to be ended");
    // The wait now belongs to the new handle: releasing it refuses the wait.
    r.engine.release(new);
    r.pull();
    r.peer.read();
    assert_eq!(r.peer.answers["rpc:\"q\""][0]["params"]["result"], json!({"action":"cancel"}));
    assert!(!r.engine.is_open(obs[0].id));
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn request_deadlines_hand_the_waiter_back() {
    let mut e: Box<TestEngine> = Box::new(Engine::new(
        Vec::new(),
        vec![0; TRANSMIT],
        EngineConfig::new().request_timeout(Some(50)).handler_timeout(None),
    ));
    let id = e.insert_request(7, 100).unwrap();
    assert_eq!(e.poll_timeout(), Some(150));
    let mut expired = Vec::new();
    e.handle_timeout(149, |id, w| expired.push((id, w)));
    assert!(expired.is_empty());
    e.handle_timeout(150, |id, w| expired.push((id, w)));
    assert_eq!(expired, [(id, 7)]);
    assert_eq!(e.poll_timeout(), None);
}

fn info(session: &str, n: u32) -> Vec<u8> {
    frame(&json!({"jsonrpc":"2.0","method":"session.event",
        "params":{"sessionId":session,"event":{"type":"session.info","id":format!("e{n}"),"data":{}}}}))
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn parked_frames_keep_their_order_across_two_server_assigned_creates() {
    let mut r = Run::new(100);
    let a = r.engine.reserve_unassigned(1).unwrap();
    let b = r.engine.reserve_unassigned(2).unwrap();
    let c = r.engine.reserve_unassigned(3).unwrap();
    let mut input = Vec::new();
    for n in 0..9 {
        input.extend(info(["A", "B", "C"][n as usize % 3], n));
    }
    assert!(r.feed(&input).is_empty());
    assert_eq!(r.engine.stats(0).parked_frames, 9);
    let id = |o: &copilot_core::Output<'_, u32, u32>| match &o.route {
        Route::Event { target, event, .. } => (*target, event.id.unwrap().to_string()),
        other => panic!("{other:?}"),
    };
    r.engine.assign(a, "A").unwrap();
    let mut seen = Vec::new();
    // The first frame comes out; naming B meanwhile restarts the pass once
    // this one ends, so B's frames (kept, and not yet seen) all come out.
    let first = r.engine.poll_parked(0).map(|o| id(&o)).unwrap();
    seen.push(first);
    r.engine.assign(b, "B").unwrap();
    while let Some(o) = r.engine.poll_parked(0) {
        seen.push(id(&o));
    }
    let ids = |seen: &[(u32, String)], t: u32| -> Vec<String> {
        seen.iter().filter(|(x, _)| *x == t).map(|(_, e)| e.clone()).collect()
    };
    assert_eq!(ids(&seen, 1), ["e0", "e3", "e6"]);
    assert_eq!(ids(&seen, 2), ["e1", "e4", "e7"]);
    assert!(ids(&seen, 3).is_empty(), "C is not named yet: its frames stay parked");
    assert_eq!(r.engine.stats(0).parked_frames, 3);
    // More frames for C arrive, then C is named: all in arrival order.
    assert!(r.feed(&info("C", 9)).is_empty());
    r.engine.assign(c, "C").unwrap();
    let mut later = Vec::new();
    while let Some(o) = r.engine.poll_parked(0) {
        later.push(id(&o));
    }
    assert_eq!(ids(&later, 3), ["e2", "e5", "e8", "e9"]);
    let s = r.engine.stats(0);
    assert_eq!((s.parked_frames, s.parked_bytes), (0, 0));
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn parking_is_bounded_by_bytes_and_plain_overflow_is_counted() {
    let config = EngineConfig::new().park_frames(1_000);
    let mut e: Box<TestEngine> = Box::new(Engine::new(vec![0; 600], vec![0; TRANSMIT], config));
    let h = e.reserve_unassigned(1).unwrap();
    let mut d: FrameDecoder<[u8; 65536]> = FrameDecoder::new();
    let mut input = Vec::new();
    for n in 0..10 {
        input.extend(info("X", n));
    }
    d.feed(&input);
    let mut kept = 0;
    while let Some(o) = e.poll(&mut d, 0) {
        assert!(matches!(o.route, Route::Park { .. }));
        kept += usize::from(o.refused.is_none());
    }
    let s = e.stats(0);
    assert_eq!(s.parked_frames + s.park_dropped as usize, 10);
    assert!(s.parked_bytes <= 600 && s.park_dropped > 0, "{s:?}");
    // Releasing the only unassigned create reports the parked frames as
    // for an unknown session.
    e.release(h);
    let mut unknown = 0;
    while let Some(o) = e.poll_parked(0) {
        assert!(matches!(o.route, Route::UnknownSession { .. }));
        unknown += 1;
    }
    assert_eq!(unknown, s.parked_frames);
    assert!(kept >= 1);
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn disconnect_fails_requests_and_forgets_waits() {
    let mut r = Run::new(100);
    r.engine.reserve(SESSION, 1).unwrap();
    let waits = frame(&json!({"jsonrpc":"2.0","method":"session.event","params":{"sessionId":SESSION,
        "event":{"type":"permission.requested","data":{"requestId":"p","permissionRequest":{}}}}}));
    let obs = r.feed(&waits);
    let a = r.engine.insert_request(1, 0).unwrap();
    let mut failed = Vec::new();
    assert_eq!(r.engine.disconnect(|id, w| failed.push((id, w))), 1);
    assert_eq!(failed, [(a, 1)]);
    assert_eq!(r.engine.answer(obs[0].id, b"{}"), Err(AnswerError::Stale));
    assert_eq!((r.engine.stats(0).open_obligations, r.engine.poll_timeout()), (0, None));
}

/// Opens one obligation of `input` on session "s1" of a fresh engine.
fn one_obligation(input: &str) -> (Box<TestEngine>, copilot_core::ObligationId) {
    let mut e: Box<TestEngine> =
        Box::new(Engine::new(Vec::new(), vec![0; TRANSMIT], EngineConfig::new().handler_timeout(Some(10))));
    e.reserve("s1", 1).unwrap();
    let mut d: FrameDecoder<[u8; 4096]> = FrameDecoder::new();
    d.feed(&raw_frame(input));
    let id = e.poll(&mut d, 0).unwrap().obligation.unwrap().id;
    assert!(e.transmit().is_empty(), "nothing is sent before the host decides");
    (e, id)
}

const PERMISSION: &str = r#"{"jsonrpc":"2.0","method":"session.event","params":{"sessionId":"s1","event":{"type":"permission.requested","data":{"requestId":"r1","permissionRequest":{}}}}}"#;

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn a_declined_wait_sends_nothing_at_once_and_is_refused_at_its_deadline() {
    let (mut e, id) = one_obligation(PERMISSION);
    e.decline(id).unwrap();
    assert!(e.transmit().is_empty(), "nothing goes to the CLI: another client answers");
    let s = e.stats(0);
    assert_eq!((s.declined, s.answered, s.open_obligations, s.left_open), (1, 0, 0, 1));
    assert_eq!(Cause::ALL.iter().map(|c| s.refused(*c)).sum::<u64>(), 0);
    // Settled for the host: no second answer.
    assert_eq!(e.answer(id, b"{}"), Err(AnswerError::Stale));
    assert_eq!(e.decline(id), Err(AnswerError::Stale));
    assert!(!e.is_open(id));
    // No other client answered by its deadline: the refusal goes then.
    assert_eq!(e.poll_timeout(), Some(10));
    e.handle_timeout(9, |_, _| {});
    assert!(e.transmit().is_empty(), "not before the deadline");
    e.handle_timeout(10, |_, _| {});
    let refusal = String::from_utf8(sent(&mut e)).unwrap();
    assert!(refusal.contains(r#""result":{"kind":"user-not-available"}"#), "{refusal}");
    let s = e.stats(10);
    assert_eq!((s.left_open, s.left_unanswered, s.left_answered, s.refused(Cause::Deadline)), (0, 0, 0, 1));
    assert_eq!(e.poll_timeout(), None);
}

const ELICITATION: &str = r#"{"jsonrpc":"2.0","method":"session.event","params":{"sessionId":"s1","event":{"type":"elicitation.requested","data":{"requestId":"e1","message":"ok?"}}}}"#;

/// An engine whose session "s1" was opened with `capabilities` in the
/// answer (JSON), then given `changes` (`capabilities.changed` data), and
/// the obligation of an elicitation wait in it.
fn elicitation_after(capabilities: &str, changes: &[Value]) -> (Box<TestEngine>, copilot_core::ObligationId) {
    let mut e: Box<TestEngine> =
        Box::new(Engine::new(Vec::new(), vec![0; TRANSMIT], EngineConfig::new().handler_timeout(Some(10))));
    let h = e.reserve("s1", 1).unwrap();
    let answer = format!(r#"{{"sessionId":"s1","capabilities":{capabilities}}}"#);
    e.complete_open(h, Ok(copilot_core::Value::parse(answer.as_bytes()).unwrap())).unwrap();
    for change in changes {
        feed_event(&mut e, "s1", "capabilities.changed", change.clone());
    }
    let mut d: FrameDecoder<[u8; 4096]> = FrameDecoder::new();
    d.feed(&raw_frame(ELICITATION));
    let id = e.poll(&mut d, 0).unwrap().obligation.unwrap().id;
    (e, id)
}

/// A broadcast wait is left to another client only while another client
/// can answer it: the CLI says whether any client of the session answers
/// elicitations (`ui.elicitation`), so a client without the handler
/// refuses at once when none does, and leaves it when one does.
#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn a_wait_no_other_client_can_answer_is_refused_at_once() {
    let cancel = r#""result":{"action":"cancel"}"#;
    // The open's answer says no client answers elicitations.
    let (mut e, id) = elicitation_after(r#"{"ui":{"elicitation":false}}"#, &[]);
    e.refuse(id, Cause::NoHandler).unwrap();
    assert!(String::from_utf8(sent(&mut e)).unwrap().contains(cancel), "refused at once");
    let s = e.stats(0);
    assert_eq!((s.declined, s.left_open, s.refused(Cause::NoHandler)), (0, 0, 1));
    // A decline is the same want of a handler.
    let (mut e, id) = elicitation_after(r#"{"ui":{"elicitation":false}}"#, &[]);
    e.decline(id).unwrap();
    assert!(String::from_utf8(sent(&mut e)).unwrap().contains(cancel), "refused at once");

    // Another client joined with the handler: left to it.
    let joined = [json!({"ui": {"elicitation": true}})];
    let (mut e, id) = elicitation_after(r#"{"ui":{"elicitation":false}}"#, &joined);
    e.refuse(id, Cause::NoHandler).unwrap();
    assert!(e.transmit().is_empty(), "left to the client that has the handler");
    assert_eq!(e.stats(0).left_open, 1);

    // ... and that client left again: nobody can answer, refused at once.
    let left = [json!({"ui": {"elicitation": true}}), json!({"ui": {"elicitation": false}})];
    let (mut e, id) = elicitation_after(r#"{"ui":{"elicitation":false}}"#, &left);
    e.refuse(id, Cause::NoHandler).unwrap();
    assert!(String::from_utf8(sent(&mut e)).unwrap().contains(cancel), "refused at once");

    // The CLI said nothing: another client may answer; left until the
    // deadline, then refused.
    let (mut e, id) = elicitation_after("{}", &[]);
    e.refuse(id, Cause::NoHandler).unwrap();
    assert!(e.transmit().is_empty());
    e.handle_timeout(10, |_, _| {});
    assert!(String::from_utf8(sent(&mut e)).unwrap().contains(cancel), "refused at the deadline");
}

const TOOL_CALL: &str = r#"{"jsonrpc":"2.0","method":"session.event","params":{"sessionId":"s1","event":{"type":"external_tool.requested","data":{"requestId":"t1","toolCallId":"c","toolName":"theirs"}}}}"#;

/// Feeds one event of session "s1" with `data` to `e`.
fn feed_event(e: &mut TestEngine, session: &str, ty: &str, data: Value) {
    let mut d: FrameDecoder<[u8; 4096]> = FrameDecoder::new();
    d.feed(&frame(&json!({"jsonrpc":"2.0","method":"session.event",
        "params":{"sessionId":session,"event":{"type":ty,"data":data}}})));
    let out = e.poll(&mut d, 1).unwrap();
    assert!(out.obligation.is_none() && out.refused.is_none());
}

/// A client without the tool (another client of the session has it)
/// leaves the call: nothing is sent; the CLI's report that the call was
/// answered (`external_tool.completed` with its requestId) ends the
/// engine's keeping of it. Reports of other waits, types or sessions do not.
#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn a_wait_left_for_want_of_a_handler_ends_when_the_cli_reports_it_answered() {
    let (mut e, id) = one_obligation(TOOL_CALL);
    e.reserve("s2", 2).unwrap();
    e.refuse(id, Cause::NoHandler).unwrap();
    assert!(e.transmit().is_empty(), "no refusal: the tool's owner answers");
    assert_eq!(e.refuse(id, Cause::NoHandler), Err(AnswerError::Stale), "settled once");
    let others = [
        ("s1", "external_tool.completed", json!({"requestId":"t2"})),
        ("s1", "permission.completed", json!({"requestId":"t1"})),
        ("s2", "external_tool.completed", json!({"requestId":"t1"})),
        ("s1", "external_tool.completed", json!({})),
    ];
    for (session, ty, data) in others {
        feed_event(&mut e, session, ty, data);
        assert_eq!(e.stats(1).left_open, 1, "{session} {ty}: not this wait's report");
    }
    feed_event(&mut e, "s1", "external_tool.completed", json!({"requestId":"t1"}));
    let s = e.stats(1);
    assert_eq!((s.declined, s.left_answered, s.left_open, s.open_obligations), (1, 1, 0, 0));
    assert_eq!(e.poll_timeout(), None, "nothing left to time out");
    assert!(e.transmit().is_empty(), "nothing was ever sent");

    // The report may come first, while the host has yet to find it has no
    // handler (the owner answered fast): leaving the wait then forgets it.
    let (mut e, id) = one_obligation(TOOL_CALL);
    feed_event(&mut e, "s1", "external_tool.completed", json!({"requestId":"t1"}));
    assert_eq!(e.stats(1).open_obligations, 1, "still the host's to settle");
    e.refuse(id, Cause::NoHandler).unwrap();
    let s = e.stats(1);
    assert_eq!((s.declined, s.left_answered, s.left_open, s.open_obligations), (1, 1, 0, 0));
    assert_eq!(e.poll_timeout(), None);
    assert!(e.transmit().is_empty());

    // A session released while a wait is left: forgotten, nothing sent
    // (the other client may still answer).
    let mut e: Box<TestEngine> =
        Box::new(Engine::new(Vec::new(), vec![0; TRANSMIT], EngineConfig::new().handler_timeout(Some(10))));
    let h = e.reserve("s1", 1).unwrap();
    let mut d: FrameDecoder<[u8; 4096]> = FrameDecoder::new();
    d.feed(&raw_frame(TOOL_CALL));
    let id = e.poll(&mut d, 0).unwrap().obligation.unwrap().id;
    e.refuse(id, Cause::NoHandler).unwrap();
    e.release(h);
    assert!(e.transmit().is_empty(), "no refusal for a left wait when its session goes");
    assert_eq!((e.stats(1).left_open, e.poll_timeout()), (0, None));

    // The table decides: the same want of a handler refuses a request at
    // once (only this client can answer it) and a tool call's unreadable
    // data is refused too.
    let plan = r#"{"jsonrpc":"2.0","id":7,"method":"exitPlanMode.request","params":{"sessionId":"s1"}}"#;
    let (mut e, id) = one_obligation(plan);
    e.refuse(id, Cause::NoHandler).unwrap();
    assert!(String::from_utf8(sent(&mut e))
        .unwrap()
        .ends_with(r#"{"jsonrpc":"2.0","id":7,"result":{"approved":false}}"#));
    let (mut e, id) = one_obligation(TOOL_CALL);
    e.refuse(id, Cause::Unreadable).unwrap();
    assert!(String::from_utf8(sent(&mut e)).unwrap().contains("could not run the tool"));
}

/// `command.queued` without a handler: nothing is sent at once (the
/// official SDK leaves the queue to the app, or to another client); no
/// client having answered by the handler deadline, `{handled:false}` goes.
#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn a_queued_command_without_a_handler_is_refused_at_its_deadline() {
    let queued = r#"{"jsonrpc":"2.0","method":"session.event","params":{"sessionId":"s1","event":{"type":"command.queued","data":{"requestId":"q1","command":"/help"}}}}"#;
    let (mut e, id) = one_obligation(queued);
    e.refuse(id, Cause::NoHandler).unwrap();
    assert!(e.transmit().is_empty(), "nothing goes at once for a queued command without a handler");
    e.handle_timeout(u64::MAX, |_, _| {});
    assert!(String::from_utf8(sent(&mut e)).unwrap().contains(r#""result":{"handled":false}"#));
    let s = e.stats(0);
    assert_eq!((s.declined, s.left_unanswered, s.refused(Cause::Deadline)), (1, 0, 1));
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn a_request_to_this_client_cannot_be_declined_and_gets_its_refusal() {
    let plan = r#"{"jsonrpc":"2.0","id":7,"method":"exitPlanMode.request","params":{"sessionId":"s1"}}"#;
    let (mut e, id) = one_obligation(plan);
    assert_eq!(e.decline(id), Err(AnswerError::NotDeclinable));
    let body = r#"{"jsonrpc":"2.0","id":7,"result":{"approved":false}}"#;
    assert_eq!(String::from_utf8(sent(&mut e)).unwrap(), format!("Content-Length: {}\r\n\r\n{body}", body.len()));
    let s = e.stats(0);
    assert_eq!((s.declined, s.refused(Cause::HandlerFailed), s.open_obligations), (0, 1, 0));
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn siblings_go_beside_the_answer_in_the_answering_rpc() {
    let (mut e, id) = one_obligation(PERMISSION);
    let context = br#" {"decisionContext":{"outcome":"approved","source":"user","surface":"sdk"}} "#;
    e.answer_with(id, br#"{"kind":"approve-once"}"#, context).unwrap();
    let body = r#"{"jsonrpc":"2.0","id":"answer-1","method":"session.permissions.handlePendingPermissionRequest","params":{"sessionId":"s1","requestId":"r1","result":{"kind":"approve-once"},"decisionContext":{"outcome":"approved","source":"user","surface":"sdk"}}}"#;
    assert_eq!(String::from_utf8(sent(&mut e)).unwrap(), format!("Content-Length: {}\r\n\r\n{body}", body.len()));

    // Siblings that are not an object: the refusal goes instead.
    for bad in [&b"[1]"[..], b"{", b"\"x\""] {
        let (mut e, id) = one_obligation(PERMISSION);
        let r = e.answer_with(id, br#"{"kind":"approve-once"}"#, bad);
        assert_eq!(r, Err(AnswerError::InvalidPayload));
        assert!(String::from_utf8(sent(&mut e)).unwrap().contains(r#""result":{"kind":"user-not-available"}"#));
    }
    // White space around the siblings and inside their braces is dropped;
    // empty braces add nothing; a `null` answer (padded or not) leaves the
    // answer's member out.
    for (answer, siblings, tail) in [
        (&b" null "[..], &b"\n{ }\t"[..], ""),
        (b"null", b"{ \"a\":1 }", r#","a":1"#),
        (br#"{"kind":"approve-once"}"#, b"  ", r#","result":{"kind":"approve-once"}"#),
    ] {
        let (mut e, id) = one_obligation(PERMISSION);
        e.answer_with(id, answer, siblings).unwrap();
        let body = format!(
            r#"{{"jsonrpc":"2.0","id":"answer-1","method":"session.permissions.handlePendingPermissionRequest","params":{{"sessionId":"s1","requestId":"r1"{tail}}}}}"#
        );
        assert_eq!(String::from_utf8(sent(&mut e)).unwrap(), format!("Content-Length: {}\r\n\r\n{body}", body.len()));
    }
    // A response has no room for siblings.
    let plan = r#"{"jsonrpc":"2.0","id":7,"method":"exitPlanMode.request","params":{"sessionId":"s1"}}"#;
    let (mut e, id) = one_obligation(plan);
    let r = e.answer_with(id, br#"{"approved":true}"#, br#"{"x":1}"#);
    assert_eq!(r, Err(AnswerError::InvalidPayload));
}

#[cfg(feature = "alloc")]
#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn a_shaped_answer_goes_as_the_core_wrote_it_with_its_shaped_context_beside() {
    use copilot_core::{answer_shape, shape_answer};
    let shape = |name: &str, given: &str| {
        let given = copilot_core::Value::parse(given.as_bytes()).unwrap();
        shape_answer(answer_shape(name).unwrap(), Some(&given)).unwrap()
    };
    let decision = shape("permission", r#"{"kind":"approve-once"}"#);
    let context = shape("permissionDecisionContext", r#"{"outcome":"approved","source":"user"}"#);
    let (mut e, id) = one_obligation(PERMISSION);
    e.answer_shaped(id, &decision, Some(&context.clone().beside("decisionContext"))).unwrap();
    // The same bytes as the answer written as JSON text (the surface is the
    // shape's default).
    let body = r#"{"jsonrpc":"2.0","id":"answer-1","method":"session.permissions.handlePendingPermissionRequest","params":{"sessionId":"s1","requestId":"r1","result":{"kind":"approve-once"},"decisionContext":{"outcome":"approved","source":"user","surface":"sdk"}}}"#;
    assert_eq!(String::from_utf8(sent(&mut e)).unwrap(), format!("Content-Length: {}\r\n\r\n{body}", body.len()));
    assert_eq!(e.answer_shaped(id, &decision, None), Err(AnswerError::Stale), "answered once");
    assert_eq!(e.stats(0).answered, 1);

    // A response has no room for siblings: the refusal goes instead.
    let plan = r#"{"jsonrpc":"2.0","id":7,"method":"exitPlanMode.request","params":{"sessionId":"s1"}}"#;
    let (mut e, id) = one_obligation(plan);
    let approved = shape("exitPlanMode", r#"{"approved":true}"#);
    let r = e.answer_shaped(id, &approved, Some(&context.beside("x")));
    assert_eq!(r, Err(AnswerError::InvalidPayload));
    assert!(String::from_utf8(sent(&mut e)).unwrap().contains(r#""result":{"approved":false}"#));
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn a_failed_tool_sends_its_text_as_error_in_place_of_a_result() {
    let tool = r#"{"jsonrpc":"2.0","method":"session.event","params":{"sessionId":"s1","event":{"type":"external_tool.requested","data":{"requestId":"t1","toolCallId":"c","toolName":"x"}}}}"#;
    let (mut e, id) = one_obligation(tool);
    e.fail(id, "no \"disk\"\u{1}").unwrap();
    // As the official SDKs send it: `{requestId, error}`, no `result`.
    let body = r#"{"jsonrpc":"2.0","id":"answer-1","method":"session.tools.handlePendingToolCall","params":{"sessionId":"s1","requestId":"t1","error":"no \"disk\"\u0001"}}"#;
    assert_eq!(String::from_utf8(sent(&mut e)).unwrap(), format!("Content-Length: {}\r\n\r\n{body}", body.len()));
    let s = e.stats(0);
    assert_eq!((s.refused(Cause::HandlerFailed), s.answered, s.open_obligations), (1, 0, 0));
    sent(&mut e);
    assert_eq!(e.fail(id, "again"), Err(AnswerError::Stale));
    assert!(e.transmit().is_empty(), "discharged once");

    // No text: a generic one (an empty `error` would read as no error).
    let (mut e, id) = one_obligation(tool);
    e.fail(id, "").unwrap();
    assert!(String::from_utf8(sent(&mut e)).unwrap().ends_with(r#""requestId":"t1","error":"the handler failed"}}"#));

    // A long text is cut to whole characters within the bound, and stays JSON.
    let long = "é\"".repeat(copilot_core::MAX_FAILURE_DETAIL);
    let (mut e, id) = one_obligation(tool);
    e.fail(id, &long).unwrap();
    let text = String::from_utf8(sent(&mut e)).unwrap();
    let v: Value = serde_json::from_str(&text[text.find("\r\n\r\n").unwrap() + 4..]).unwrap();
    let error = v["params"]["error"].as_str().unwrap();
    assert!(long.starts_with(error) && error.len() < long.len() && !error.is_empty(), "{error}");
    assert!(serde_json::to_string(error).unwrap().len() <= copilot_core::MAX_FAILURE_DETAIL);

    // Any other row: the refusal.
    let (mut e, id) = one_obligation(PERMISSION);
    e.fail(id, "boom").unwrap();
    assert!(String::from_utf8(sent(&mut e)).unwrap().contains(r#""result":{"kind":"user-not-available"}}"#));
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn a_failed_canvas_handler_is_a_coded_error_and_a_request_without_canvas_id_is_refused() {
    let invoke = r#"{"jsonrpc":"2.0","id":9,"method":"canvas.action.invoke","params":{"sessionId":"s1","extensionId":"e","canvasId":"c","instanceId":"i","actionName":"a"}}"#;
    let error = |code: &str, message: &str| {
        let body = format!(
            r#"{{"jsonrpc":"2.0","id":9,"error":{{"code":-32603,"message":{message},"data":{{"code":{code},"message":{message}}}}}}}"#
        );
        format!("Content-Length: {}\r\n\r\n{body}", body.len())
    };
    // The code the handler names, both texts escaped.
    let (mut e, id) = one_obligation(invoke);
    e.fail_coded(id, "my_\"code\"", "bad \"input\"").unwrap();
    assert_eq!(String::from_utf8(sent(&mut e)).unwrap(), error(r#""my_\"code\"""#, r#""bad \"input\"""#));
    assert_eq!(e.fail_coded(id, "x", "again"), Err(AnswerError::Stale), "answered once");
    assert_eq!(e.stats(0).refused(Cause::HandlerFailed), 1);
    // None named (a handler that threw or panicked): the core's.
    let (mut e, id) = one_obligation(invoke);
    e.fail(id, "boom").unwrap();
    assert_eq!(String::from_utf8(sent(&mut e)).unwrap(), error(r#""canvas_handler_error""#, r#""boom""#));
    // No handler (a session without canvases): not served, as before.
    let (mut e, id) = one_obligation(invoke);
    e.refuse(id, Cause::NoHandler).unwrap();
    assert!(String::from_utf8(sent(&mut e)).unwrap().contains(r#""error":{"code":-32601,"#));
    // A request without the canvas id is no obligation: refused at once.
    let (mut e, _) = one_obligation(invoke);
    let body = r#"{"jsonrpc":"2.0","id":10,"method":"canvas.open","params":{"sessionId":"s1","instanceId":"i"}}"#;
    let out = e.route(body.as_bytes(), 0);
    assert!(out.obligation.is_none() && out.refused == Some(Cause::Unreadable), "{:?}", out.refused);
    assert!(String::from_utf8(sent(&mut e)).unwrap().contains(r#""id":10,"error":{"code":-32601,"#));
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn a_hook_answer_goes_under_output_and_no_output_is_an_empty_result() {
    let hook = r#"{"jsonrpc":"2.0","id":"h-1","method":"hooks.invoke","params":{"sessionId":"s1","hookType":"sessionEnd","input":{}}}"#;
    let response = |result: &str| {
        let body = format!(r#"{{"jsonrpc":"2.0","id":"h-1","result":{result}}}"#);
        format!("Content-Length: {}\r\n\r\n{body}", body.len())
    };
    for (answer, result) in [
        (&br#"{"decision":"deny"}"#[..], r#"{"output":{"decision":"deny"}}"#),
        (b" null ", "{}"),
        (b"0", r#"{"output":0}"#),
    ] {
        let (mut e, id) = one_obligation(hook);
        e.answer(id, answer).unwrap();
        assert_eq!(String::from_utf8(sent(&mut e)).unwrap(), response(result));
    }
    // No hook, a failed hook: `{}` (the CLI goes on as without the hook).
    let (mut e, id) = one_obligation(hook);
    e.refuse(id, Cause::NoHandler).unwrap();
    assert_eq!(String::from_utf8(sent(&mut e)).unwrap(), response("{}"));
    let (mut e, id) = one_obligation(hook);
    e.fail(id, "boom").unwrap();
    assert_eq!(String::from_utf8(sent(&mut e)).unwrap(), response("{}"));
}
