//! Reconciliation in the engine: after a resume it asks the CLI which waits
//! are pending, each listed wait it has not taken on becomes an ordinary
//! wait of its event's kind, answered by the same RPC; a wait named both by
//! an event and by a list is answered once, either way round; what it
//! remembers of answered waits is bounded.
#![cfg(not(loom))]

use copilot_core::{
    Engine, EngineConfig, FrameDecoder, HandlerKind, Output, Route, SessionHandle, Value, LIST_ID_PREFIX, PENDING_LISTS,
};
use serde_json::{json, Value as Json};

/// 16 obligations: the memory of answered waits holds 16.
type TestEngine = Engine<u32, u32, Vec<u8>, Vec<u8>, 16, 16, 16>;

const SESSION: &str = "s-1";

fn engine() -> TestEngine {
    Engine::new(vec![0; 4096], vec![0; 1 << 16], EngineConfig::new().handler_timeout(Some(1_000)))
}

fn frame(body: &Json) -> Vec<u8> {
    let body = serde_json::to_vec(body).unwrap();
    [format!("Content-Length: {}\r\n\r\n", body.len()).into_bytes(), body].concat()
}

/// Every frame the engine queued, parsed.
fn sent(engine: &mut TestEngine) -> Vec<Json> {
    let bytes = engine.transmit().to_vec();
    engine.transmitted(bytes.len());
    let mut d: FrameDecoder<[u8; 65536]> = FrameDecoder::new();
    let mut out = Vec::new();
    let mut rest = &bytes[..];
    while !rest.is_empty() {
        rest = &rest[d.feed(rest)..];
        while let Some(body) = d.poll() {
            out.push(serde_json::from_slice(body.unwrap()).unwrap());
        }
    }
    out
}

/// A session resumed on this engine; returns its handle and the list
/// requests the engine sent once the resume completed.
fn resumed(engine: &mut TestEngine) -> (SessionHandle, Vec<Json>) {
    let (handle, _) = engine.reserve_resume(SESSION, 7).unwrap();
    assert!(sent(engine).is_empty(), "nothing is asked before the resume is answered");
    engine.complete_open(handle, Ok(Value::parse(b"{}").unwrap())).unwrap();
    (handle, sent(engine))
}

/// What a host does with one frame from the CLI: the waits it must answer
/// (the event's, or those a list reply names), as (obligation, handler,
/// the data its handler reads).
fn feed(engine: &mut TestEngine, body: &Json) -> Vec<(copilot_core::ObligationId, HandlerKind, Json)> {
    feed_at(engine, body, 0)
}

/// [`feed`] at `now`.
fn feed_at(engine: &mut TestEngine, body: &Json, now: u64) -> Vec<(copilot_core::ObligationId, HandlerKind, Json)> {
    let mut decoder: FrameDecoder<[u8; 65536]> = FrameDecoder::new();
    decoder.feed(&frame(body));
    let mut waits = Vec::new();
    while let Some(out) = engine.poll(&mut decoder, now) {
        let Output { route, obligation, listed, .. } = out;
        if let (Some(ob), Route::Event { event, .. }) = (obligation, &route) {
            waits.push((ob.id, ob.handler, serde_json::from_slice(event.event.as_bytes()).unwrap()));
        }
        if let Some(listed) = listed {
            engine.open_listed(&listed, now, |wait| {
                let mut text = Vec::new();
                wait.write_event(&mut |b: &[u8]| text.extend_from_slice(b));
                waits.push((wait.obligation.id, wait.obligation.handler, serde_json::from_slice(&text).unwrap()));
            });
        }
    }
    waits
}

fn list_reply(request: &Json, items: Json) -> Json {
    json!({"jsonrpc":"2.0","id":request["id"],"result":{"items":items}})
}

fn tool_item(request_id: &str) -> Json {
    json!({"requestId":request_id,"toolCallId":"call_weather_1","toolName":"get_weather","arguments":{"city":"Paris"}})
}

fn prompt_item(request_id: &str) -> Json {
    json!({"requestId":request_id,"request":{"kind":"commands","fullCommandText":"echo hi > proof.txt","toolCallId":"t1"}})
}

fn tool_event(request_id: &str) -> Json {
    json!({"jsonrpc":"2.0","method":"session.event","params":{"sessionId":SESSION,"event":{
        "type":"external_tool.requested","id":format!("e-{request_id}"),
        "data":{"sessionId":SESSION,"requestId":request_id,"toolCallId":"c","toolName":"get_weather"}}}})
}

fn answered(frames: &[Json], method: &str, request_id: &str) -> usize {
    frames.iter().filter(|f| f["method"] == method && f["params"]["requestId"] == request_id).count()
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn a_resume_asks_both_lists_and_each_listed_wait_becomes_a_wait_of_its_kind() {
    let mut e = engine();
    let (_, lists) = resumed(&mut e);
    let methods: Vec<&str> = lists.iter().map(|f| f["method"].as_str().unwrap()).collect();
    assert_eq!(methods, ["session.tools.listPendingRequests", "session.permissions.pendingRequests"]);
    for request in &lists {
        assert_eq!(request["params"], json!({"sessionId":SESSION}));
        assert!(request["id"].as_str().unwrap().starts_with(LIST_ID_PREFIX));
    }

    let tools = feed(&mut e, &list_reply(&lists[0], json!([tool_item("r1")])));
    let prompts = feed(&mut e, &list_reply(&lists[1], json!([prompt_item("p1")])));
    assert_eq!(tools.len(), 1);
    assert_eq!(prompts.len(), 1);
    let (tool, tool_kind, tool_data) = &tools[0];
    assert_eq!(*tool_kind, HandlerKind::Tool);
    assert_eq!(
        tool_data,
        &json!({"type":"external_tool.requested","data":{"sessionId":SESSION,"requestId":"r1",
            "toolCallId":"call_weather_1","toolName":"get_weather","arguments":{"city":"Paris"}}})
    );
    let (prompt, prompt_kind, prompt_data) = &prompts[0];
    assert_eq!(*prompt_kind, HandlerKind::Permission);
    assert_eq!(prompt_data["type"], "permission.requested");
    assert_eq!(prompt_data["data"]["requestId"], "p1");
    assert_eq!(prompt_data["data"]["permissionRequest"]["kind"], "shell", "the permission kind of `commands`");
    assert_eq!(prompt_data["data"]["promptRequest"]["kind"], "commands", "the prompt as listed");
    assert_eq!(prompt_data["data"]["permissionRequest"]["fullCommandText"], "echo hi > proof.txt");

    // Answered by the same path as the events' waits.
    e.answer(*tool, br#"{"textResultForLlm":"sunny","resultType":"success"}"#).unwrap();
    e.answer(*prompt, br#"{"kind":"approve-once"}"#).unwrap();
    let frames = sent(&mut e);
    assert_eq!(answered(&frames, "session.tools.handlePendingToolCall", "r1"), 1);
    assert_eq!(answered(&frames, "session.permissions.handlePendingPermissionRequest", "p1"), 1);
    let tool_answer = frames.iter().find(|f| f["method"] == "session.tools.handlePendingToolCall").unwrap();
    assert_eq!(tool_answer["params"]["sessionId"], SESSION);
    assert_eq!(tool_answer["params"]["result"]["textResultForLlm"], "sunny");
    let stats = e.stats(0);
    assert_eq!((stats.lists_sent, stats.listed, stats.router.unmatched_responses), (2, 2, 0));
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn a_late_event_for_a_wait_taken_on_from_a_list_is_delivered_not_answered_again() {
    let mut e = engine();
    let (_, lists) = resumed(&mut e);
    let tools = feed(&mut e, &list_reply(&lists[0], json!([tool_item("r1"), tool_item("r2")])));
    assert_eq!(tools.len(), 2);
    // r1 still open (its handler runs), r2 answered: both events come late.
    e.answer(tools[1].0, br#"{"textResultForLlm":"x"}"#).unwrap();
    assert!(feed(&mut e, &tool_event("r1")).is_empty(), "open: not taken on twice");
    assert!(feed(&mut e, &tool_event("r2")).is_empty(), "answered: not answered again");
    e.answer(tools[0].0, br#"{"textResultForLlm":"y"}"#).unwrap();
    let frames = sent(&mut e);
    assert_eq!(answered(&frames, "session.tools.handlePendingToolCall", "r1"), 1);
    assert_eq!(answered(&frames, "session.tools.handlePendingToolCall", "r2"), 1);
    assert_eq!(e.stats(0).duplicate_waits, 2);
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn a_wait_listed_after_its_event_is_answered_once() {
    let mut e = engine();
    let (handle, lists) = resumed(&mut e);
    // The event came first; the list (asked before the answer went out)
    // still names it, while open and after it is answered.
    let from_event = feed(&mut e, &tool_event("r1"));
    assert_eq!(from_event.len(), 1);
    assert!(feed(&mut e, &list_reply(&lists[0], json!([tool_item("r1")]))).is_empty());
    e.answer(from_event[0].0, br#"{"textResultForLlm":"x"}"#).unwrap();
    e.reconcile(handle).unwrap();
    let again = sent(&mut e);
    let tools_request = again.iter().find(|f| f["method"] == "session.tools.listPendingRequests").unwrap().clone();
    assert!(feed(&mut e, &list_reply(&tools_request, json!([tool_item("r1")]))).is_empty());
    assert_eq!(answered(&sent(&mut e), "session.tools.handlePendingToolCall", "r1"), 0, "sent once, above");
    assert_eq!(e.stats(0).duplicate_waits, 2);
    assert_eq!(e.stats(0).answers_sent, 1);
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn a_create_asks_nothing_and_reconcile_asks_on_demand() {
    let mut e = engine();
    let handle = e.reserve(SESSION, 7).unwrap();
    // Asked during the open: sent once it completes.
    e.reconcile(handle).unwrap();
    assert!(sent(&mut e).is_empty());
    e.complete_open(handle, Ok(Value::parse(b"{}").unwrap())).unwrap();
    assert_eq!(sent(&mut e).len(), PENDING_LISTS.len());

    let other = e.reserve("s-2", 8).unwrap();
    e.complete_open(other, Ok(Value::parse(b"{}").unwrap())).unwrap();
    assert!(sent(&mut e).is_empty(), "a create has nothing pending from before");
    e.reconcile(other).unwrap();
    let lists = sent(&mut e);
    assert_eq!(lists.len(), 2);
    assert!(lists.iter().all(|f| f["params"]["sessionId"] == "s-2"));
    e.release(other);
    assert!(e.reconcile(other).is_err(), "a released session");
    // A reply for a session released meanwhile takes nothing on.
    assert!(feed(&mut e, &list_reply(&lists[0], json!([tool_item("r9")]))).is_empty());
    assert_eq!(e.stats(0).lists_failed, 1);
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn a_list_that_fails_takes_nothing_on() {
    let mut e = engine();
    let (_, lists) = resumed(&mut e);
    let error = json!({"jsonrpc":"2.0","id":lists[0]["id"],"error":{"code":-32601,"message":"no"}});
    assert!(feed(&mut e, &error).is_empty());
    assert!(feed(&mut e, &json!({"jsonrpc":"2.0","id":lists[1]["id"],"result":{}})).is_empty());
    let stats = e.stats(0);
    assert_eq!((stats.lists_failed, stats.router.unmatched_responses), (2, 0));
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn the_memory_of_answered_waits_holds_as_many_as_the_obligation_table() {
    let mut e = engine();
    let (handle, _) = resumed(&mut e);
    // 17 waits answered, one at a time: the first is forgotten at the bound.
    for n in 0..17 {
        let waits = feed(&mut e, &tool_event(&format!("r{n}")));
        e.answer(waits[0].0, br#"{"textResultForLlm":"x"}"#).unwrap();
    }
    sent(&mut e);
    e.reconcile(handle).unwrap();
    let request = sent(&mut e)[0].clone();
    let waits = feed(&mut e, &list_reply(&request, json!([tool_item("r0"), tool_item("r1"), tool_item("r16")])));
    let taken: Vec<&Json> = waits.iter().map(|w| &w.2["data"]["requestId"]).collect();
    assert_eq!(taken, [&json!("r0")], "only the wait past the bound is taken on again");
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn waits_open_when_the_connection_ends_are_not_remembered_as_answered() {
    let mut e = engine();
    let (handle, lists) = resumed(&mut e);
    assert_eq!(feed(&mut e, &tool_event("r1")).len(), 1);
    assert_eq!(e.disconnect(|_, _| {}), 1);
    // What a list read on the new connection names is taken on again.
    let waits = feed(&mut e, &list_reply(&lists[0], json!([tool_item("r1")])));
    assert_eq!(waits.len(), 1);
    let _ = handle;
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn a_lost_connection_keeps_open_event_waits_and_forgets_answers_the_cli_did_not_acknowledge() {
    let mut e = engine();
    let (handle, _) = resumed(&mut e);
    // r1 answered and acknowledged; r2 answered, its acknowledgement lost
    // with the connection; r3 still with its handler.
    let mut ids = Vec::new();
    for rid in ["r1", "r2", "r3"] {
        ids.push(feed(&mut e, &tool_event(rid))[0].0);
    }
    e.answer(ids[0], br#"{"textResultForLlm":"one"}"#).unwrap();
    e.answer(ids[1], br#"{"textResultForLlm":"two"}"#).unwrap();
    let answers = sent(&mut e);
    assert!(feed(&mut e, &json!({"jsonrpc":"2.0","id":answers[0]["id"],"result":{"success":true}})).is_empty());
    // A server request's wait, and a call in flight.
    let input =
        json!({"jsonrpc":"2.0","id":41,"method":"userInput.request","params":{"sessionId":SESSION,"question":"?"}});
    let mut decoder: FrameDecoder<[u8; 65536]> = FrameDecoder::new();
    decoder.feed(&frame(&input));
    let user_input = e.poll(&mut decoder, 0).and_then(|o| o.obligation).unwrap().id;
    e.insert_request(99, 0).unwrap();

    let mut failed = Vec::new();
    assert_eq!(e.connection_lost(|_, w| failed.push(w)), 1, "the server request's wait dies with the connection");
    assert_eq!(failed, [99], "the call in flight is failed");
    assert!(!e.is_open(user_input));
    assert!(e.is_open(ids[2]), "an event's wait stays open for the next connection");

    // The next connection's list names r1 (it may, for a moment), r2 and
    // r3: only r2 is taken on again, and r3's answer goes out once.
    e.reconcile(handle).unwrap();
    let request = sent(&mut e)[0].clone();
    let waits = feed(&mut e, &list_reply(&request, json!([tool_item("r1"), tool_item("r2"), tool_item("r3")])));
    let taken: Vec<&Json> = waits.iter().map(|w| &w.2["data"]["requestId"]).collect();
    assert_eq!(taken, [&json!("r2")]);
    e.answer(waits[0].0, br#"{"textResultForLlm":"two"}"#).unwrap();
    e.answer(ids[2], br#"{"textResultForLlm":"three"}"#).unwrap();
    let frames = sent(&mut e);
    for rid in ["r2", "r3"] {
        assert_eq!(answered(&frames, "session.tools.handlePendingToolCall", rid), 1, "{rid}");
    }
    assert_eq!(answered(&frames, "session.tools.handlePendingToolCall", "r1"), 0);
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn the_last_durable_event_routed_marks_where_a_gap_starts_in_the_log() {
    let mut e = engine();
    let (handle, _) = resumed(&mut e);
    assert_eq!(e.last_durable_event(handle), None);
    let event = |id: &str, ephemeral: bool| {
        json!({"jsonrpc":"2.0","method":"session.event","params":{"sessionId":SESSION,"event":{
            "type":"assistant.message","id":id,"ephemeral":ephemeral,"data":{}}}})
    };
    feed(&mut e, &event("e-1", false));
    feed(&mut e, &event("e-2", true));
    assert_eq!(e.last_durable_event(handle), Some(copilot_core::event_id_hash(b"e-1")), "an ephemeral one is not");
    feed(&mut e, &event("e-3", false));
    let mark = e.last_durable_event(handle).unwrap();
    let log = [r#"{"id":"e-1"}"#, r#"{"id":"e-3"}"#, r#"{"id":"e-4","type":"x"}"#, r#"{"type":"y","id":"e-5"}"#];
    let ids = log.map(|e| copilot_core::event_id_of(e.as_bytes()));
    assert_eq!(copilot_core::undelivered_from(mark, ids), Some(2), "e-4 and e-5 were not delivered");
    e.release(handle);
    let (again, _) = resumed(&mut e);
    assert_eq!(e.last_durable_event(again), None, "a new session in the slot starts with none");
}

fn plain_event(event_type: &str) -> Json {
    json!({"jsonrpc":"2.0","method":"session.event","params":{"sessionId":SESSION,"event":{"type":event_type,"data":{}}}})
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn a_running_turn_silent_for_the_stall_interval_is_reconciled_and_again_while_it_stays_silent() {
    let mut e: TestEngine = Engine::new(
        vec![0; 4096],
        vec![0; 1 << 16],
        EngineConfig::new().handler_timeout(None).stall_interval(Some(1_000)),
    );
    let handle = e.reserve(SESSION, 7).unwrap();
    e.complete_open(handle, Ok(Value::parse(b"{}").unwrap())).unwrap();
    feed_at(&mut e, &plain_event("session.info"), 0);
    assert_eq!(e.poll_timeout(), None, "no turn runs: nothing to watch");

    feed_at(&mut e, &plain_event("assistant.turn_start"), 100);
    assert_eq!(e.poll_timeout(), Some(1_100));
    // An event of the turn puts the stall off.
    feed_at(&mut e, &plain_event("assistant.message"), 600);
    e.handle_timeout(1_100, |_, _| {});
    assert!(sent(&mut e).is_empty(), "not silent for the interval yet");
    assert_eq!(e.poll_timeout(), Some(1_600));
    e.handle_timeout(1_600, |_, _| {});
    let lists = sent(&mut e);
    let methods: Vec<&str> = lists.iter().map(|f| f["method"].as_str().unwrap()).collect();
    assert_eq!(methods, ["session.tools.listPendingRequests", "session.permissions.pendingRequests"]);
    // The wait whose event was lost is found and taken on.
    let waits = feed_at(&mut e, &list_reply(&lists[0], json!([tool_item("lost")])), 1_700);
    assert_eq!(waits.len(), 1);
    assert_eq!(waits[0].2["data"]["requestId"], "lost");
    // The list's reply is not an event of the session: still silent. It
    // is asked again after twice the wait, and twice that again.
    assert_eq!(e.poll_timeout(), Some(3_600));
    e.handle_timeout(3_599, |_, _| {});
    assert!(sent(&mut e).is_empty(), "not before twice the first wait");
    e.handle_timeout(3_600, |_, _| {});
    assert_eq!(sent(&mut e).len(), 2, "asked again after twice the interval");
    assert_eq!(e.poll_timeout(), Some(7_600));
    e.handle_timeout(7_600, |_, _| {});
    assert_eq!(sent(&mut e).len(), 2);
    assert_eq!(e.stats(0).stalls, 3);
    // An event of the turn starts the schedule again from the interval.
    feed_at(&mut e, &plain_event("assistant.message"), 8_000);
    assert_eq!(e.poll_timeout(), Some(9_000));

    feed_at(&mut e, &plain_event("session.idle"), 8_100);
    e.handle_timeout(20_000, |_, _| {});
    assert!(sent(&mut e).is_empty(), "the turn ended");
    assert_eq!(e.poll_timeout(), None);
}

/// The waits between asks of a turn that stays silent double up to
/// `MAX_STALL_INTERVAL_MS`, and stay there.
#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn the_asks_of_a_silent_turn_back_off_to_the_cap() {
    let mut e: TestEngine = Engine::new(vec![0; 4096], vec![0; 1 << 16], EngineConfig::new().handler_timeout(None));
    let handle = e.reserve(SESSION, 7).unwrap();
    e.complete_open(handle, Ok(Value::parse(b"{}").unwrap())).unwrap();
    feed_at(&mut e, &plain_event("assistant.turn_start"), 0);
    let mut asks = Vec::new();
    while let Some(at) = e.poll_timeout().filter(|at| *at <= 150_000) {
        e.handle_timeout(at, |_, _| {});
        assert_eq!(sent(&mut e).len(), 2, "two list requests at {at}");
        asks.push(at);
    }
    assert_eq!(asks, [2_000, 6_000, 14_000, 30_000, 60_000, 90_000, 120_000, 150_000]);
    assert_eq!(copilot_core::limits::MAX_STALL_INTERVAL_MS, 30_000);
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn no_stall_interval_watches_nothing() {
    let mut e: TestEngine =
        Engine::new(vec![0; 4096], vec![0; 1 << 16], EngineConfig::new().handler_timeout(None).stall_interval(None));
    let handle = e.reserve(SESSION, 7).unwrap();
    e.complete_open(handle, Ok(Value::parse(b"{}").unwrap())).unwrap();
    feed_at(&mut e, &plain_event("assistant.turn_start"), 0);
    assert_eq!(e.poll_timeout(), None);
    e.handle_timeout(u64::MAX, |_, _| {});
    assert!(sent(&mut e).is_empty());
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn a_wait_refused_at_once_is_not_refused_again_when_a_list_names_it() {
    let mut e = engine();
    let (handle, _) = resumed(&mut e);
    // The table (16) full: the 17th wait is refused at once.
    for n in 0..16 {
        assert_eq!(feed(&mut e, &tool_event(&format!("r{n}"))).len(), 1);
    }
    assert!(feed(&mut e, &tool_event("full")).is_empty());
    assert_eq!(answered(&sent(&mut e), "session.tools.handlePendingToolCall", "full"), 1, "refused");
    // A list read before the CLI took the refusal still names it.
    e.reconcile(handle).unwrap();
    let request = sent(&mut e)[0].clone();
    assert!(feed(&mut e, &list_reply(&request, json!([tool_item("full")]))).is_empty());
    assert_eq!(answered(&sent(&mut e), "session.tools.handlePendingToolCall", "full"), 0, "not answered twice");
    assert_eq!(e.stats(0).duplicate_waits, 1);
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn an_answer_still_queued_when_the_connection_is_lost_stays_given() {
    let mut e = engine();
    let (_, lists) = resumed(&mut e);
    let r1 = feed(&mut e, &tool_event("r1"))[0].0;
    let r2 = feed(&mut e, &tool_event("r2"))[0].0;
    // r1's answer went to the connection, unacknowledged; r2's was still
    // queued (a recovery held it) when the connection was lost.
    e.answer(r1, br#"{"textResultForLlm":"one"}"#).unwrap();
    assert_eq!(answered(&sent(&mut e), "session.tools.handlePendingToolCall", "r1"), 1);
    e.answer(r2, br#"{"textResultForLlm":"two"}"#).unwrap();
    e.connection_lost(|_, _| {});
    // A list the next connection answers before it takes r2's answer
    // names both: r1 may be lost, r2 goes out with the frames held.
    let waits = feed(&mut e, &list_reply(&lists[0], json!([tool_item("r1"), tool_item("r2")])));
    let taken: Vec<&Json> = waits.iter().map(|w| &w.2["data"]["requestId"]).collect();
    assert_eq!(taken, [&json!("r1")], "r2 is not taken on again");
    assert_eq!(answered(&sent(&mut e), "session.tools.handlePendingToolCall", "r2"), 1, "its answer, held");
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn an_answer_taken_in_part_when_the_connection_is_lost_goes_with_it() {
    let mut e = engine();
    let (_, lists) = resumed(&mut e);
    let r1 = feed(&mut e, &tool_event("r1"))[0].0;
    e.answer(r1, br#"{"textResultForLlm":"one"}"#).unwrap();
    // Its start was written to the connection lost.
    e.transmitted(10);
    e.connection_lost(|_, _| {});
    assert!(e.transmit().is_empty(), "the rest of a frame is not written to the next connection");
    let waits = feed(&mut e, &list_reply(&lists[0], json!([tool_item("r1")])));
    assert_eq!(waits.len(), 1, "the answer may be lost: taken on again");
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn a_response_to_a_request_of_a_lost_connection_is_not_sent_on_the_next() {
    let mut e = engine();
    let (_, _) = resumed(&mut e);
    let r1 = feed(&mut e, &tool_event("r1"))[0].0;
    let input =
        json!({"jsonrpc":"2.0","id":41,"method":"userInput.request","params":{"sessionId":SESSION,"question":"?"}});
    let mut decoder: FrameDecoder<[u8; 65536]> = FrameDecoder::new();
    decoder.feed(&frame(&input));
    decoder.feed(&frame(&json!({"jsonrpc":"2.0","id":42,"method":"no.such.method","params":{}})));
    let user_input = e.poll(&mut decoder, 0).and_then(|o| o.obligation).unwrap().id;
    assert!(e.poll(&mut decoder, 0).unwrap().refused.is_some(), "refused at once: its error queued");
    // Answered while a recovery holds the frames, then the connection is lost.
    e.answer(user_input, br#"{"answer":"yes","wasFreeform":true}"#).unwrap();
    e.answer(r1, br#"{"textResultForLlm":"one"}"#).unwrap();
    e.connection_lost(|_, _| {});
    let frames = sent(&mut e);
    assert!(frames.iter().all(|f| f.get("method").is_some()), "no response left: {frames:?}");
    assert_eq!(answered(&frames, "session.tools.handlePendingToolCall", "r1"), 1, "an event's answer stays");
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn waits_refused_at_once_do_not_push_answered_ones_out_of_memory() {
    let mut e = engine();
    let (handle, _) = resumed(&mut e);
    let first = feed(&mut e, &tool_event("answered"))[0].0;
    e.answer(first, br#"{"textResultForLlm":"x"}"#).unwrap();
    // The table full, then as many refusals at once as it holds.
    for n in 0..16 {
        assert_eq!(feed(&mut e, &tool_event(&format!("open{n}"))).len(), 1);
    }
    for n in 0..16 {
        assert!(feed(&mut e, &tool_event(&format!("refused{n}"))).is_empty());
    }
    sent(&mut e);
    e.reconcile(handle).unwrap();
    let request = sent(&mut e)[0].clone();
    let waits = feed(&mut e, &list_reply(&request, json!([tool_item("answered"), tool_item("refused0")])));
    assert!(waits.is_empty(), "both remembered");
    assert_eq!(answered(&sent(&mut e), "session.tools.handlePendingToolCall", "answered"), 0);
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn an_answer_the_cli_refused_does_not_settle_its_wait() {
    let mut e = engine();
    let (_, lists) = resumed(&mut e);
    let r1 = feed(&mut e, &tool_event("r1"))[0].0;
    let r2 = feed(&mut e, &tool_event("r2"))[0].0;
    e.answer(r1, br#"{"textResultForLlm":"one"}"#).unwrap();
    e.answer(r2, br#"{"textResultForLlm":"two"}"#).unwrap();
    let answers = sent(&mut e);
    // r1's answer refused (its session not loaded there), r2's taken.
    assert!(feed(&mut e, &json!({"jsonrpc":"2.0","id":answers[0]["id"],"result":{"success":false}})).is_empty());
    assert!(feed(&mut e, &json!({"jsonrpc":"2.0","id":answers[1]["id"],"result":{"success":true}})).is_empty());
    // A list read later names r1 as pending: taken on again.
    let waits = feed(&mut e, &list_reply(&lists[0], json!([tool_item("r1"), tool_item("r2")])));
    let taken: Vec<&Json> = waits.iter().map(|w| &w.2["data"]["requestId"]).collect();
    assert_eq!(taken, [&json!("r1")]);
}
