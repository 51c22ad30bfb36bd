//! copilot-host against the scriptable fake CLI, over OS pipes and real TCP
//! on 127.0.0.1: the deterministic cases the real CLI cannot be made to
//! produce on demand (events racing the create answer, floods, server
//! requests for unknown sessions, a connection dropped mid-request).

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

use copilot_host::{
    Client, ClientOptions, Error, EventKind, EventStream, Session, SessionConfig, SessionEvent, UserInputRequest,
    UserInputResponse,
};
use copilot_tests::fake_server::{FakeServer, FakeServerConfig};
use serde_json::json;

const WAIT: Duration = Duration::from_secs(20);

fn over_pipes(config: FakeServerConfig) -> (FakeServer, Client) {
    let (server, from_server, to_server) = FakeServer::pipes(config);
    let client = Client::from_streams(from_server, to_server, None).expect("handshake over pipes");
    (server, client)
}

fn over_tcp(config: FakeServerConfig) -> (FakeServer, Client) {
    let (server, addr) = FakeServer::tcp(config);
    let client = Client::connect(addr, None).expect("handshake over TCP");
    (server, client)
}

/// Events until (and including) `session.idle`.
fn until_idle(events: &EventStream) -> Vec<Arc<SessionEvent>> {
    let mut out = Vec::new();
    loop {
        let e = events.next_timeout(WAIT).expect("an event in time").expect("the stream is open");
        let idle = matches!(e.kind, EventKind::SessionIdle(_));
        out.push(e);
        if idle {
            return out;
        }
    }
}

fn types(events: &[Arc<SessionEvent>]) -> Vec<&str> {
    events.iter().map(|e| e.event_type()).collect()
}

/// Whether `condition` became true within `WAIT`, checked every millisecond.
fn wait_for(condition: impl Fn() -> bool) -> bool {
    let deadline = Instant::now() + WAIT;
    while !condition() {
        if Instant::now() > deadline {
            return false;
        }
        thread::sleep(Duration::from_millis(1));
    }
    true
}

#[test]
fn events_sent_before_the_create_answer_are_delivered_in_order() {
    for connect in [over_pipes, over_tcp] {
        let config = FakeServerConfig::default().with_early(5, 2).with_create_response_delay(Duration::from_millis(20));
        let (_server, client) = connect(config);
        let session = client.create_session(SessionConfig::default()).expect("create");
        let events = session.events();
        let got: Vec<_> = (0..8).map(|_| events.next_timeout(WAIT).unwrap().unwrap()).collect();
        assert_eq!(
            types(&got),
            [
                "session.info",
                "session.info",
                "session.info",
                "session.info",
                "session.info",
                "permission.requested",
                "permission.requested",
                "session.start"
            ]
        );
        let ns: Vec<_> = got[..5].iter().map(|e| e.kind.clone()).collect();
        for (i, kind) in ns.iter().enumerate() {
            let EventKind::Other { data, .. } = kind else { panic!("{kind:?}") };
            assert_eq!(data["n"], i, "early events keep their order");
        }
        assert_eq!(got[5].kind.request_id(), Some("perm-0"));
        assert_eq!(client.stats().unknown_session, 0);
    }
}

#[test]
fn a_late_first_subscriber_still_receives_everything() {
    let (_server, client) = over_pipes(FakeServerConfig::default().with_early(3, 0).with_reply_text("Hi there."));
    let session = client.create_session(SessionConfig::default()).expect("create");
    // A whole turn before anyone subscribes. `send_and_wait` returns once
    // the session's dispatcher has handled `session.idle`, and it handles
    // events in order: every event up to the idle has been delivered to the
    // session (and, with no subscriber, kept) before the subscription.
    let reply = session.send_and_wait("hi", WAIT).expect("a turn").expect("a reply");
    assert!(matches!(&reply.kind, EventKind::AssistantMessage(m) if m.content == "Hi there."));
    let events = session.events();
    let first = until_idle(&events);
    let mut expected = vec!["session.info"; 3];
    expected.extend(["session.start", "user.message", "assistant.turn_start"]);
    expected.extend(vec!["assistant.message_delta"; 2]);
    expected.extend(["assistant.message", "assistant.turn_end", "session.idle"]);
    assert_eq!(types(&first), expected);
    assert!(events.try_next().is_none(), "each kept event once");
    // A second subscriber sees only what comes after it.
    let later = session.events();
    session.send("again").expect("send");
    let turn = until_idle(&later);
    assert_eq!(types(&turn).first(), Some(&"user.message"));
}

#[test]
fn server_assigned_ids_park_early_events_and_answer_early_requests() {
    let config = FakeServerConfig::default().with_early(5, 3).with_hold_create_response(true);
    let (server, client) = over_pipes(config);
    let client = Arc::new(client);
    let creating = {
        let client = Arc::clone(&client);
        thread::spawn(move || {
            let config = SessionConfig { server_assigned_id: true, ..SessionConfig::default() }.on_user_input(
                |q: &UserInputRequest| {
                    Some(UserInputResponse { answer: format!("blue, to {:?}", q.question), was_freeform: true })
                },
            );
            client.create_session(config)
        })
    };
    server.wait_received(WAIT, |m| m["method"] == "session.create").expect("create sent");
    // A server request for the session, before the answer names it.
    let answer = server.request("userInput.request", json!({ "sessionId": "fake-1", "question": "?" }), json!(77));
    // The fake holds the create answer until the client has parked all
    // nine frames, whatever the scheduling.
    let parked = wait_for(|| client.stats().parked == 9);
    assert!(parked, "5 events + 3 permission requests + 1 server request parked: {:?}", client.stats());
    server.release_create_response();
    let session = creating.join().unwrap().expect("create with a server-assigned id");
    assert_eq!(session.id(), "fake-1");

    let events = session.events();
    let got: Vec<_> = (0..9).map(|_| events.next_timeout(WAIT).unwrap().unwrap()).collect();
    let mut expected = vec!["session.info"; 5];
    expected.extend(["permission.requested"; 3]);
    expected.push("session.start");
    assert_eq!(types(&got), expected, "parked events are delivered first, in order");
    let requests: Vec<_> = got[5..8].iter().map(|e| e.kind.request_id().unwrap().to_owned()).collect();
    assert_eq!(requests, ["perm-0", "perm-1", "perm-2"]);

    // The request was held, then routed to the session and answered by its
    // handler: not refused as one for an unknown session.
    let answer = answer.recv_timeout(WAIT).expect("the early request is answered");
    assert_eq!(answer["id"], 77);
    assert_eq!(answer["result"], json!({ "answer": "blue, to \"?\"", "wasFreeform": true }), "{answer}");
    assert_eq!(client.stats().unknown_session, 0);
}

#[test]
fn requests_for_unknown_sessions_get_an_error_and_string_ids_are_echoed() {
    for connect in [over_pipes, over_tcp] {
        let (server, client) = connect(FakeServerConfig::default());
        let session = client.create_session(SessionConfig::default()).expect("create");

        let unknown = server
            .request_blocking("userInput.request", json!({ "sessionId": "nobody" }), json!(5), WAIT)
            .expect("answered");
        assert_eq!(unknown["id"], 5);
        // Refused by the engine with the kind's own refusal (user input: the
        // user is not available), counted as a wait for a session gone.
        assert_eq!(unknown["error"]["code"], copilot_host::core::INTERNAL_ERROR, "{unknown}");
        assert_eq!(client.engine_stats().refused(copilot_host::core::Cause::SessionGone), 1);

        let string_id = server
            .request_blocking("hooks.invoke", json!({ "sessionId": session.id() }), json!("req-1"), WAIT)
            .expect("answered");
        assert_eq!(string_id["id"], "req-1");
        // No hook handler: the engine answers "no output".
        assert_eq!(string_id["result"], json!({}), "{string_id}");

        let sessionless = server
            .request_blocking("llmInference.httpRequestChunk", json!({ "requestId": "x" }), json!("a\"b"), WAIT)
            .expect("answered");
        assert_eq!(sessionless["id"], "a\"b");
        assert_eq!(client.stats().unknown_session, 1);
    }
}

#[test]
fn when_the_server_closes_mid_request_every_waiter_gets_disconnected() {
    let (_server, client) = over_pipes(FakeServerConfig::default().with_close_on_method("session.getMessages"));
    let session = Arc::new(client.create_session(SessionConfig::default()).expect("create"));
    let events = session.events();
    let client = Arc::new(client);
    let start = Arc::new(Barrier::new(9));
    let waiters: Vec<_> = (0..8)
        .map(|i| {
            let (client, session, start) = (Arc::clone(&client), Arc::clone(&session), Arc::clone(&start));
            thread::spawn(move || {
                start.wait();
                if i % 2 == 0 {
                    session.messages().map(drop)
                } else {
                    client.ping(None).map(drop)
                }
            })
        })
        .collect();
    start.wait();
    let mut disconnected = 0;
    for w in waiters {
        // Joining proves that the waiter returned.
        match w.join().unwrap() {
            Err(Error::Disconnected(_)) => disconnected += 1,
            // A ping answered before the close is fine.
            Ok(()) => {}
            Err(e) => panic!("unexpected {e}"),
        }
    }
    assert!(disconnected >= 4, "every getMessages waiter fails: {disconnected}");
    assert!(matches!(client.ping(None), Err(Error::Disconnected(_))), "later calls fail at once");
    // The event stream ends instead of waiting forever.
    while let Some(e) = events.next_timeout(WAIT).expect("the stream ends in time") {
        let _ = e;
    }
}

#[test]
fn handshake_checks_the_protocol_version() {
    let err = over_pipes_result(FakeServerConfig::default().with_protocol_version(2)).expect_err("version 2");
    assert!(matches!(err, Error::ProtocolVersion { server: Some(2), supported: 3 }), "{err}");

    let (_server, client) = over_pipes(FakeServerConfig::default().with_legacy_connect(true));
    assert_eq!(client.server_info().protocol_version, 3, "ping fallback");

    let (server, addr) = FakeServer::tcp(FakeServerConfig::default().with_token("t0k"));
    assert_eq!(Client::connect(addr, None).expect_err("no token").rpc_code(), Some(-32002));
    drop(server);
    let (_server, addr) = FakeServer::tcp(FakeServerConfig::default().with_token("t0k"));
    assert!(Client::connect(addr, Some("t0k")).is_ok());
}

fn over_pipes_result(config: FakeServerConfig) -> Result<Client, Error> {
    let (server, from_server, to_server) = FakeServer::pipes(config);
    let result = Client::from_streams(from_server, to_server, None);
    drop(server);
    result
}

#[test]
fn send_and_wait_returns_the_final_message_or_the_session_error() {
    let (_server, client) = over_pipes(FakeServerConfig::default().with_reply_text("four, as it happens"));
    let session = client.create_session(SessionConfig { streaming: true, ..SessionConfig::default() }).unwrap();
    let deltas = Arc::new(std::sync::Mutex::new(String::new()));
    let sub = {
        let deltas = Arc::clone(&deltas);
        session.on(move |e| {
            if let EventKind::AssistantMessageDelta(d) = &e.kind {
                deltas.lock().unwrap().push_str(&d.delta_content);
            }
        })
    };
    let reply = session.send_and_wait("2+2?", WAIT).expect("a reply").expect("a message");
    let EventKind::AssistantMessage(m) = &reply.kind else { panic!("{reply:?}") };
    assert_eq!(m.content, "four, as it happens");
    assert_eq!(*deltas.lock().unwrap(), "four, as it happens", "deltas arrive in order");
    drop(sub);

    let (_server, client) = over_pipes(FakeServerConfig::default());
    let session = client.create_session(SessionConfig::default()).unwrap();
    let err = session.send_and_wait("2+2?", WAIT).expect_err("no model");
    assert!(matches!(err, Error::Session { ref error_type, .. } if error_type == "authentication"), "{err}");
}

#[test]
fn dropping_a_subscription_unsubscribes_and_a_panicking_handler_does_not_stop_delivery() {
    let (_server, client) = over_pipes(FakeServerConfig::default().with_reply_text("a b c"));
    let session = client.create_session(SessionConfig::default()).unwrap();
    let counted = Arc::new(AtomicUsize::new(0));
    let sub = {
        let counted = Arc::clone(&counted);
        session.on(move |_| {
            counted.fetch_add(1, Ordering::SeqCst);
        })
    };
    let _panicky = session.on(|e| {
        if matches!(e.kind, EventKind::UserMessage(_)) {
            panic!("a handler that fails");
        }
    });
    session.send_and_wait("one", WAIT).expect("turn one");
    let after_one = counted.load(Ordering::SeqCst);
    assert!(after_one >= 4, "session.start and the turn: {after_one}");
    drop(sub);
    session.send_and_wait("two", WAIT).expect("turn two still completes");
    assert_eq!(counted.load(Ordering::SeqCst), after_one, "no delivery after the subscription is dropped");
}

/// A callback, two blocking streams and `send_and_wait` on one session:
/// each takes every event of a flood once and in order, and they share one
/// parse of each event (the same `SessionEvent`, not a copy each).
#[test]
fn every_kind_of_subscriber_shares_one_parse_of_each_event() {
    let (_server, client) = over_pipes(FakeServerConfig::default());
    let session = client.create_session(SessionConfig::default()).unwrap();
    let seen: Arc<std::sync::Mutex<Vec<(String, usize)>>> = Arc::default();
    let _sub = {
        let seen = Arc::clone(&seen);
        session.on(move |e| seen.lock().unwrap().push((e.id.clone(), e as *const SessionEvent as usize)))
    };
    let streams = [session.events(), session.events()];
    // The streams are read once the turn is over: a flood that a session
    // may hold parsed for readers behind (512 events; past that a reader
    // far behind parses for itself, and memory stays bytes).
    let n = 400;
    session.send_and_wait(format!("flood:{n}"), WAIT).expect("the flood's turn");
    // Every callback has run on the turn once send_and_wait returns.
    let seen = std::mem::take(&mut *seen.lock().unwrap());
    let taken: Vec<Vec<Arc<SessionEvent>>> = streams.iter().map(until_idle).collect();
    let deltas =
        |ids: Vec<&str>| ids.into_iter().filter(|id| id.parse::<usize>().is_ok()).map(String::from).collect::<Vec<_>>();
    let expected: Vec<String> = (0..n).map(|i| i.to_string()).collect();
    assert_eq!(deltas(seen.iter().map(|(id, _)| id.as_str()).collect()), expected, "the callback");
    for events in &taken {
        assert_eq!(deltas(events.iter().map(|e| e.id.as_str()).collect()), expected, "a stream");
    }
    // The callback, the first subscriber, was also handed what came before.
    assert_eq!(taken[1].len(), taken[0].len());
    let seen = &seen[seen.len() - taken[0].len()..];
    // The streams hold their events alive, so an address the callback saw
    // that is one of theirs is that very event.
    for (i, (id, address)) in seen.iter().enumerate() {
        assert!(Arc::ptr_eq(&taken[0][i], &taken[1][i]), "event {id}: the streams share one parse");
        assert_eq!(Arc::as_ptr(&taken[0][i]) as usize, *address, "event {id}: the callback saw the streams' parse");
    }
}

/// Floods one session with `n` deltas (via `flood:n`) and checks that each
/// arrives exactly once and in order.
fn flood_and_check(session: &Session, n: usize) {
    let events = session.events();
    session.send(format!("flood:{n}")).expect("send flood");
    let mut next = 0usize;
    loop {
        let e = events.next_timeout(WAIT).expect("flood event in time").expect("stream open");
        match &e.kind {
            EventKind::AssistantMessageDelta(_) => {
                assert_eq!(e.id, next.to_string(), "session {}: event out of order or duplicated", session.id());
                next += 1;
            }
            EventKind::SessionIdle(_) => break,
            _ => {}
        }
    }
    assert_eq!(next, n, "session {}: every event delivered", session.id());
}

fn churn_while_flooding(server: FakeServer, client: Client) {
    let client = Arc::new(client);
    // A long-lived session flooded from another thread the whole time.
    let steady = client.create_session(SessionConfig::default()).expect("steady session");
    let steady_events = steady.events();
    let steady_id = steady.id().to_owned();
    let server = Arc::new(server);
    let flooder = {
        let server = Arc::clone(&server);
        thread::spawn(move || server.flood(&steady_id, 100_000).expect("flood the steady session"))
    };
    let churners: Vec<_> = (0..32)
        .map(|_| {
            let client = Arc::clone(&client);
            thread::spawn(move || {
                for _ in 0..3 {
                    let session = client.create_session(SessionConfig::default()).expect("create under load");
                    flood_and_check(&session, 500);
                    // Under this load the answer may take longer than the default grace.
                    session.destroy_within(WAIT).expect("destroy under load");
                }
            })
        })
        .collect();
    for c in churners {
        c.join().expect("a churning thread failed");
    }
    flooder.join().unwrap();
    let mut seen: HashMap<String, usize> = HashMap::new();
    let mut next = 0usize;
    loop {
        let e = steady_events.next_timeout(WAIT).expect("steady event").expect("open");
        match &e.kind {
            EventKind::AssistantMessageDelta(_) => {
                assert_eq!(e.id, next.to_string(), "steady session order");
                next += 1;
            }
            EventKind::SessionIdle(_) => break,
            _ => {
                *seen.entry(e.event_type().to_owned()).or_default() += 1;
            }
        }
    }
    assert_eq!(next, 100_000, "every flooded event of the steady session");
    let stats = client.stats();
    assert_eq!((stats.malformed, stats.unknown_session, stats.unmatched_responses), (0, 0, 0), "{stats:?}");
    assert!(stats.frames > 100_000 + 32 * 3 * 500);
}

#[test]
fn thirty_two_threads_churn_sessions_under_a_flood_over_pipes() {
    let (server, client) = over_pipes(FakeServerConfig::default());
    churn_while_flooding(server, client);
}

#[test]
fn thirty_two_threads_churn_sessions_under_a_flood_over_tcp() {
    let (server, client) = over_tcp(FakeServerConfig::default());
    churn_while_flooding(server, client);
}

#[test]
fn early_permission_requests_are_all_answered_with_either_kind_of_id() {
    for server_assigned_id in [false, true] {
        let config =
            FakeServerConfig::default().with_early(0, 15).with_create_response_delay(Duration::from_millis(20));
        let (server, client) = over_pipes(config);
        let session = client
            .create_session(SessionConfig { server_assigned_id, ..SessionConfig::default() }.on_permission(
                |r: &copilot_host::PermissionRequest| {
                    assert_eq!(r.kind, "shell");
                    copilot_host::PermissionDecision::ApproveOnce
                },
            ))
            .expect("create");
        let deadline = Instant::now() + WAIT;
        let answered = loop {
            let answers: Vec<String> = server
                .received()
                .iter()
                .filter(|m| m["method"] == "session.permissions.handlePendingPermissionRequest")
                .map(|m| {
                    assert_eq!(m["params"]["sessionId"], session.id());
                    assert_eq!(m["params"]["result"]["kind"], "approve-once");
                    m["params"]["requestId"].as_str().unwrap().to_owned()
                })
                .collect();
            if answers.len() >= 15 || Instant::now() > deadline {
                break answers;
            }
            thread::sleep(Duration::from_millis(10));
        };
        let mut answered = answered;
        answered.sort_by_key(|r| r.trim_start_matches("perm-").parse::<u32>().unwrap());
        let expected: Vec<String> = (0..15).map(|i| format!("perm-{i}")).collect();
        assert_eq!(answered, expected, "server-assigned id: {server_assigned_id}");
    }
}

/// Pushes a waiting event for `session` and returns the client's answer RPC.
fn answer_to(
    server: &FakeServer,
    session: &str,
    event_type: &str,
    data: serde_json::Value,
    method: &str,
) -> serde_json::Value {
    let request_id = data["requestId"].clone();
    let event = json!({
        "jsonrpc": "2.0",
        "method": "session.event",
        "params": { "sessionId": session, "event": { "type": event_type, "id": "w1", "timestamp": "t", "data": data } }
    });
    server.send_raw(&event.to_string()).expect("push the event");
    server
        .wait_received(WAIT, |m| m["method"] == method && m["params"]["requestId"] == request_id)
        .unwrap_or_else(|| panic!("no {method} answer to {event_type}"))["params"]
        .clone()
}

#[test]
fn every_kind_of_wait_is_answered_or_left_with_or_without_a_handler() {
    let (server, client) = over_pipes(FakeServerConfig::default());
    let config = SessionConfig::default()
        .on_mcp_oauth(|r: &copilot_host::events::McpOauthRequiredData| {
            assert_eq!(r.server_name, "docs");
            Some(copilot_host::OAuthToken { access_token: "tok".into(), token_type: None, expires_in: Some(60) })
        })
        .on_elicitation(|_: &copilot_host::events::ElicitationRequestedData| copilot_host::ElicitationResponse::Decline)
        .on_exit_plan_mode(|p: &copilot_host::ExitPlanModeRequest| copilot_host::ExitPlanModeResponse {
            approved: true,
            selected_action: Some(p.recommended_action.clone().unwrap_or_default()),
            feedback: None,
        });
    let with = client.create_session(config).expect("create");
    let without = client.create_session(SessionConfig::default()).expect("create");
    let register = server
        .wait_received(WAIT, |m| m["method"] == "session.eventLog.registerInterest")
        .expect("interest in mcp.oauth_required is registered when a handler exists");
    assert_eq!(register["params"]["eventType"], "mcp.oauth_required");

    let oauth = json!({"requestId": "o1", "serverName": "docs", "serverUrl": "https://x", "reason": "initial"});
    let a =
        answer_to(&server, with.id(), "mcp.oauth_required", oauth.clone(), "session.mcp.oauth.handlePendingRequest");
    assert_eq!(a["result"], json!({"kind": "token", "accessToken": "tok", "expiresIn": 60}));
    let mut oauth2 = oauth;
    oauth2["requestId"] = "o2".into();

    let elicit = json!({"requestId": "e1", "message": "Name?"});
    let a = answer_to(&server, with.id(), "elicitation.requested", elicit, "session.ui.handlePendingElicitation");
    assert_eq!(a["result"], json!({"action": "decline"}));
    // Without a handler, the waits the CLI sends to every client of the
    // session are left to a client that may have one: nothing is sent.
    // But the session says no client answers elicitations
    // (`ui.elicitation` false in the open's answer): that one is refused
    // at once.
    let a = answer_to(
        &server,
        without.id(),
        "elicitation.requested",
        json!({"requestId": "e2", "message": "?"}),
        "session.ui.handlePendingElicitation",
    );
    assert_eq!(a["result"], json!({"action": "cancel"}));
    let left = [
        ("mcp.oauth_required", oauth2),
        ("permission.requested", json!({"requestId": "p1", "permissionRequest": {"kind": "shell"}})),
        (
            "external_tool.requested",
            json!({"requestId": "t1", "sessionId": without.id(), "toolCallId": "c", "toolName": "ghost"}),
        ),
        ("auto_mode_switch.requested", json!({"requestId": "m1"})),
    ];
    for (event_type, data) in &left {
        let event = json!({"jsonrpc": "2.0", "method": "session.event", "params": {"sessionId": without.id(),
            "event": {"type": event_type, "id": "w1", "timestamp": "t", "data": data}}});
        server.send_raw(&event.to_string()).expect("push the event");
    }
    // A command goes to the client that declared it: a session that
    // declared none refuses it.
    let cmd = json!({"requestId": "c1", "command": "/nope x", "commandName": "nope", "args": "x"});
    let a = answer_to(&server, without.id(), "command.execute", cmd, "session.commands.handlePendingCommand");
    assert_eq!(a["error"], "This client has no handler for this command.");
    let deadline = Instant::now() + WAIT;
    while client.engine_stats().declined < left.len() as u64 {
        assert!(Instant::now() < deadline, "not all left: {:?}", client.engine_stats());
        thread::sleep(Duration::from_millis(2));
    }
    for (event_type, data) in &left {
        let sent = server.received().into_iter().filter(|m| m["params"]["requestId"] == data["requestId"]).count();
        assert_eq!(sent, 0, "{event_type} without a handler: nothing sent");
    }

    let plan = json!({"sessionId": with.id(), "summary": "s", "planContent": "p", "actions": ["exit_only"], "recommendedAction": "exit_only"});
    let a = server.request_blocking("exitPlanMode.request", plan.clone(), json!(31), WAIT).expect("answered");
    assert_eq!(a["result"], json!({"approved": true, "selectedAction": "exit_only"}));
    let mut plan2 = plan;
    plan2["sessionId"] = without.id().into();
    let a = server.request_blocking("exitPlanMode.request", plan2, json!(32), WAIT).expect("answered");
    // Refused explicitly without a handler: a plan nobody saw is not approved.
    assert_eq!(a["result"], json!({"approved": false}), "{a}");
    let a = server
        .request_blocking("userInput.request", json!({"sessionId": without.id(), "question": "?"}), json!(33), WAIT)
        .expect("answered");
    assert_eq!(a["error"]["code"], -32603, "{a}");
}

/// A wait left to another client of the session that no client answers
/// gets the table's refusal at the handler deadline: it is never left to
/// clients that do not exist (the engine's tests cover a wait the CLI
/// reports answered meanwhile, which gets nothing).
#[test]
fn a_left_wait_no_client_answers_is_refused_at_its_deadline() {
    let (server, from_server, to_server) = FakeServer::pipes(FakeServerConfig::default());
    let options = ClientOptions { handler_timeout: Duration::from_millis(50), ..ClientOptions::default() };
    let client = Client::from_streams_with(from_server, to_server, None, &options).expect("handshake over pipes");
    let session = client.create_session(SessionConfig::default()).expect("create");
    let a = answer_to(
        &server,
        session.id(),
        "permission.requested",
        json!({"requestId": "p1", "permissionRequest": {"kind": "shell"}}),
        "session.permissions.handlePendingPermissionRequest",
    );
    assert_eq!(a["result"], json!({"kind": "user-not-available"}));
    let stats = client.engine_stats();
    assert_eq!((stats.left_open, stats.open_obligations, stats.refused(copilot_core::Cause::Deadline)), (0, 0, 1));
}

#[test]
fn options_of_the_other_method_are_refused_up_front() {
    let (_server, client) = over_pipes(FakeServerConfig::default());
    let config = SessionConfig { continue_pending_work: true, ..SessionConfig::default() };
    let err = client.create_session(config).expect_err("a resume option");
    assert!(matches!(err, Error::Config(ref m) if m.contains("continue_pending_work")), "{err}");
    let config = SessionConfig { cloud: Some(json!({})), ..SessionConfig::default() };
    let err = client.resume_session("s", config).expect_err("a create option");
    assert!(matches!(err, Error::Config(ref m) if m.contains("cloud")), "{err}");
}

#[test]
fn frames_larger_than_the_first_read_buffer_are_delivered() {
    let (server, client) = over_pipes(FakeServerConfig::default());
    let session = client.create_session(SessionConfig::default()).expect("create");
    let events = session.events();
    let big = "x".repeat(3 << 20);
    for (i, size) in [10usize, 3 << 20, 100].into_iter().enumerate() {
        let event = json!({
            "jsonrpc": "2.0",
            "method": "session.event",
            "params": { "sessionId": session.id(), "event": { "type": "model.log", "id": format!("big-{i}"), "data": { "text": &big[..size] } } }
        });
        server.send_raw(&event.to_string()).expect("send");
    }
    let mut sizes = Vec::new();
    while sizes.len() < 3 {
        let e = events.next_timeout(WAIT).expect("in time").expect("open");
        if let EventKind::ModelLog(data) = &e.kind {
            sizes.push(data["text"].as_str().unwrap().len());
        }
    }
    assert_eq!(sizes, [10, 3 << 20, 100], "a 3 MiB event grows the buffer and arrives whole");
    assert_eq!(client.stats().oversize, 0);
}

#[test]
fn resuming_a_session_open_here_hands_its_id_to_the_new_handle() {
    let (server, client) = over_pipes(FakeServerConfig::default());
    let first = client.create_session(SessionConfig::default()).expect("create");
    let old_events = first.events();
    let second = client.resume_session(first.id(), SessionConfig::default()).expect("resume the open session");
    assert_eq!(second.id(), first.id());
    // The old handle's stream ends (this returns), and says nothing of the
    // events that now belong to the new handle.
    let mut old = Vec::new();
    while let Some(e) = old_events.next_timeout(WAIT).expect("the old handle's stream ends") {
        old.push(e.event_type().to_owned());
    }
    assert!(!old.iter().any(|t| t == "assistant.message_delta"), "{old:?}");
    let new_events = second.events();
    server.flood(second.id(), 3).expect("flood");
    let deltas: Vec<_> =
        new_events.into_iter().filter(|e| e.event_type() == "assistant.message_delta").take(3).collect();
    assert_eq!(deltas.len(), 3, "the new handle gets the session's events");
    // Dropping the old handle later does not release the new one.
    let again = second.events();
    drop(first);
    server.flood(second.id(), 1).expect("flood");
    assert!(again.into_iter().any(|e| e.event_type() == "assistant.message_delta"));
}

/// A client that connects to a CLI it did not start refuses the options
/// that only start one (the core's `SPAWN_ONLY_OPTIONS`), before anything
/// is sent: a GitHub token given there would never reach the CLI.
#[test]
fn a_client_that_connects_refuses_the_options_that_start_a_cli() {
    use copilot_host::TelemetryConfig;
    let (server, addr) = FakeServer::tcp(FakeServerConfig::default());
    let cases: Vec<(&str, ClientOptions)> = vec![
        ("authToken", ClientOptions { auth_token: Some("ghp_x".into()), ..ClientOptions::default() }),
        ("cliPath", ClientOptions { cli_path: Some("/bin/copilot".into()), ..ClientOptions::default() }),
        ("args", ClientOptions { extra_args: vec!["--x".into()], ..ClientOptions::default() }),
        ("logLevel", ClientOptions { log_level: "debug".into(), ..ClientOptions::default() }),
        ("telemetry", ClientOptions { telemetry: Some(TelemetryConfig::new()), ..ClientOptions::default() }),
    ];
    for (name, options) in cases {
        match Client::connect_with(addr, None, &options) {
            Err(Error::Config(message)) => {
                assert!(message.ends_with(name), "{message}");
                assert!(!message.contains("ghp_x"), "no secret in the error: {message}");
            }
            other => panic!("{name}: {other:?}"),
        }
    }
    // The timeouts are the connecting client's own.
    let options = ClientOptions { request_timeout: Duration::from_secs(5), ..ClientOptions::default() };
    let client = Client::connect_with(addr, None, &options).expect("deadlines are a connecting client's options");
    assert!(server.received().iter().filter(|m| m["method"] == "connect").count() >= 1);
    client.stop().unwrap();
}

/// A stream read more slowly than the CLI writes: the reader stops reading
/// while a backlog's worth waits (the fake CLI's writes wait in the pipe),
/// so the memory held never passes the bound by more than one read's
/// batch, and every event still arrives once, in order.
///
/// The stall after which a paused reader reads on all the same is an hour
/// here: a machine that holds this test off the CPU for a second while it
/// takes the flood cannot make the reader read on (the stall has tests of
/// its own, on a virtual clock in the core and with its wake-ups in the
/// driver), so the bound checked is the pause's.
#[test]
fn a_slow_reader_holds_the_cli_back_and_the_backlog_stays_bounded() {
    let (server, from_server, to_server) = FakeServer::pipes(FakeServerConfig::default());
    let options = ClientOptions { backlog_stall: Duration::from_secs(3600), ..ClientOptions::default() };
    let client = Client::from_streams_with(from_server, to_server, None, &options).expect("handshake over pipes");
    let session = client.create_session(SessionConfig::default()).expect("create");
    let events = session.events();
    let id = session.id().to_owned();
    let n = 40_000;
    let flooder = thread::spawn(move || {
        server.flood(&id, n).expect("flood");
        server
    });
    // Nothing is taken until the reader has paused on a full backlog.
    let start = Instant::now();
    while client.backlog().pauses == 0 {
        assert!(start.elapsed() < WAIT, "the reader never paused: {:?}", client.backlog());
        thread::sleep(Duration::from_millis(1));
    }
    let mut next = 0usize;
    while next < n {
        let e = events.next_timeout(WAIT).expect("event in time").expect("stream open");
        if let EventKind::AssistantMessageDelta(_) = &e.kind {
            assert_eq!(e.id, next.to_string(), "event out of order or duplicated");
            next += 1;
        }
    }
    drop(flooder.join().expect("the flood"));
    let backlog = client.backlog();
    // One read's batch (64 KiB of bytes, its vectors' spare room) past the bound at most.
    let slack = 256 << 10;
    assert!(backlog.peak_bytes <= copilot_host::MAX_BACKLOG_BYTES + slack, "{backlog:?}");
    assert!(backlog.pauses >= 1, "{backlog:?}");
}
