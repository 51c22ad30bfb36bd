//! Recovery against the real CLI 1.0.102 on the scripted model: the CLI a
//! client started over stdio is killed mid-turn with a client tool call
//! pending. The client starts it again, resumes the session with its
//! handlers and `continuePendingWork`, the call is answered once, the turn
//! completes and the `send_and_wait` in flight returns its message. A CLI
//! that keeps exiting makes recovery give up after its attempts, with the
//! cause.

use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use copilot_host::core::RECOVERY_BACKOFF_MS;
use copilot_host::events::{EventKind, SessionEvent};
use copilot_host::{Client, CloseCause, Error, RecoveryEvent, Tool, ToolInvocation, Transport};
use copilot_testkit::scripted_model::{Reply, ScriptedModel};
use copilot_tests::real_cli::{cli_path, scripted_options, scripted_session, TempDir};
use serde_json::json;

/// How long a step may take before the test fails (a failure bound only).
const WAIT: Duration = Duration::from_secs(90);

fn kill_group(pid: u32) {
    let killed = Command::new("kill").args(["-KILL", "--", &format!("-{pid}")]).status().expect("run kill");
    assert!(killed.success(), "kill -KILL -{pid}");
}

/// An assistant message's text.
fn text(event: Option<Arc<SessionEvent>>) -> Option<String> {
    event.and_then(|e| match &e.kind {
        EventKind::AssistantMessage(m) => Some(m.content.clone()),
        _ => None,
    })
}

/// The steps of the recoveries, as the client tells them.
fn recovery_steps(client: &Client) -> mpsc::Receiver<RecoveryEvent> {
    let (tx, rx) = mpsc::channel();
    let tx = Mutex::new(tx);
    client.on_recovery(move |e| {
        let _ = tx.lock().unwrap().send(e.clone());
    });
    rx
}

#[test]
fn a_cli_killed_mid_turn_is_started_again_the_pending_call_answered_once_and_send_and_wait_returns() {
    for transport in [Transport::Stdio, Transport::Tcp { port: 0 }] {
        killed_mid_turn(transport);
    }
}

fn killed_mid_turn(transport: Transport) {
    let dir = TempDir::new("copilot-recovery");
    let model = ScriptedModel::start().expect("start the scripted model");
    let client = Client::start(scripted_options(transport, dir.path(), &model)).expect("start the CLI");
    let steps = recovery_steps(&client);
    let first_pid = client.cli_pid().expect("a pid");

    // The handler is called, and holds its answer until the CLI is gone.
    let calls = Arc::new(AtomicUsize::new(0));
    let (called_tx, called) = mpsc::channel::<String>();
    let (release_tx, release) = mpsc::channel::<()>();
    let (called_tx, release) = (Mutex::new(called_tx), Mutex::new(release));
    let counted = Arc::clone(&calls);
    let tool = Tool::new(
        "get_weather",
        "Get the current weather for a city.",
        json!({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}),
        move |call: &ToolInvocation| {
            counted.fetch_add(1, Ordering::SeqCst);
            called_tx.lock().unwrap().send(call.tool_call_id.clone()).unwrap();
            let _ = release.lock().unwrap().recv();
            format!("Sunny, 22 C in {}", call.arguments["city"].as_str().unwrap_or("?"))
        },
    )
    .skip_permission();
    let session = Arc::new(client.create_session(scripted_session(dir.path(), "killed").tool(tool)).expect("create"));
    let id = session.id().to_owned();
    model.script(
        &id,
        vec![Reply::tool_call("get_weather", json!({"city": "Paris"})), Reply::text("It is sunny in Paris.")],
    );
    let turn = {
        let session = Arc::clone(&session);
        thread::spawn(move || session.send_and_wait("Weather in Paris?", WAIT))
    };
    let tool_call_id = called.recv_timeout(WAIT).expect("the handler is called");
    // The call is in the session's journal (the CLI wrote it before it sent
    // the event): the restarted CLI knows it.
    let journal = dir.path().join("home/session-state").join(&id).join("events.jsonl");
    let deadline = Instant::now() + WAIT;
    while !std::fs::read_to_string(&journal).is_ok_and(|t| t.contains(&tool_call_id)) {
        assert!(Instant::now() < deadline, "the call in the journal");
        thread::sleep(Duration::from_millis(10));
    }
    let lost_at = Instant::now();
    kill_group(first_pid);
    match steps.recv_timeout(WAIT).expect("a recovery step") {
        RecoveryEvent::ConnectionLost { cause: CloseCause::CliExited { signal: Some(9), .. } } => {}
        other => panic!("the first step should be the loss by SIGKILL, not {other:?}"),
    }
    // The handler answers while the connection is down: the answer waits
    // for the resumed session.
    release_tx.send(()).unwrap();

    let mut resumed = Vec::new();
    let recovered = loop {
        match steps.recv_timeout(WAIT).expect("a recovery step") {
            RecoveryEvent::Restarting { attempt, .. } => assert_eq!(attempt, 1, "the first attempt succeeds"),
            RecoveryEvent::SessionResumed { session_id, .. } => resumed.push(session_id),
            RecoveryEvent::Recovered { sessions, took } => break (sessions, took),
            other => panic!("unexpected step {other:?}"),
        }
    };
    let restarted_at = Instant::now();
    assert_eq!(resumed, std::slice::from_ref(&id));
    assert_eq!(recovered.0, 1);
    assert_ne!(client.cli_pid(), Some(first_pid), "a new CLI");

    let reply = turn.join().expect("the turn's thread").expect("send_and_wait returns the turn's message");
    let completed_at = Instant::now();
    assert_eq!(text(reply).as_deref(), Some("It is sunny in Paris."));
    assert_eq!(calls.load(Ordering::SeqCst), 1, "the handler ran once");
    let last = model.requests_for(&id).pop().expect("the model was asked again");
    assert_eq!(last.tool_results(), ["Sunny, 22 C in Paris"]);
    let stats = client.engine_stats();
    eprintln!(
        "recovery over {transport:?}: loss to sessions resumed {:?} (client's figure {:?}), to the turn's end {:?}; \
         lists sent {}, waits taken on from lists {}, duplicates {}, answers {} (accepted {})",
        restarted_at - lost_at,
        recovered.1,
        completed_at - lost_at,
        stats.lists_sent,
        stats.listed,
        stats.duplicate_waits,
        stats.answers_sent,
        stats.acks_accepted
    );
    assert_eq!(stats.acks_refused, 0, "no answer was refused as a second one");
    let pending = client.call("session.tools.listPendingRequests", &json!({"sessionId": id})).expect("list");
    assert_eq!(pending, json!({"items": []}));
    // The session goes on: another turn on the new CLI.
    model.script(&id, vec![Reply::text("Still here.")]);
    let again = session.send_and_wait("Still there?", WAIT).expect("a turn after recovery");
    assert_eq!(text(again).as_deref(), Some("Still here."));
    // And recovers again when the new CLI dies too (its supervisor is the
    // reader the first recovery started).
    kill_group(client.cli_pid().expect("a pid"));
    loop {
        match steps.recv_timeout(WAIT).expect("a step of the second recovery") {
            RecoveryEvent::Recovered { sessions, .. } => break assert_eq!(sessions, 1),
            RecoveryEvent::GaveUp { cause } => panic!("the second recovery gave up: {cause}"),
            _ => {}
        }
    }
    model.script(&id, vec![Reply::text("Back again.")]);
    let third = session.send_and_wait("And now?", WAIT).expect("a turn after the second recovery");
    assert_eq!(text(third).as_deref(), Some("Back again."));
    drop(session);
    client.stop().expect("stop");
}

/// A session the restarted CLI no longer has (its state folder went while
/// the CLI was down) is refused at its resume: that session ends with the
/// CLI's words, the others are resumed and carry on (the JS client's
/// recovery.test.mjs checks the same).
#[test]
fn a_session_the_restarted_cli_refuses_to_resume_ends_and_the_others_carry_on() {
    let dir = TempDir::new("copilot-recovery-refused");
    let model = ScriptedModel::start().expect("start the scripted model");
    let client = Client::start(scripted_options(Transport::Stdio, dir.path(), &model)).expect("start the CLI");
    let steps = recovery_steps(&client);
    let kept = client.create_session(scripted_session(dir.path(), "kept")).expect("create");
    let gone = client.create_session(scripted_session(dir.path(), "gone")).expect("create");
    for session in [&kept, &gone] {
        model.script(session.id(), vec![Reply::text("Hello.")]);
        session.send_and_wait("Hi", WAIT).expect("a first turn");
    }
    let state = dir.path().join("home/session-state").join(gone.id());
    assert!(state.is_dir(), "the CLI keeps the session in {}", state.display());
    std::fs::remove_dir_all(&state).expect("remove the session's state");
    kill_group(client.cli_pid().expect("a pid"));

    let mut resumed = Vec::new();
    let sessions = loop {
        match steps.recv_timeout(WAIT).expect("a recovery step") {
            RecoveryEvent::SessionResumed { session_id, .. } => resumed.push(session_id),
            RecoveryEvent::Recovered { sessions, .. } => break sessions,
            RecoveryEvent::GaveUp { cause } => panic!("gave up: {cause}"),
            _ => {}
        }
    };
    assert_eq!(resumed, [kept.id().to_owned()], "only the session the CLI still has");
    assert_eq!(sessions, 1);
    let ended = gone.send_and_wait("Still there?", WAIT).expect_err("the refused session has ended");
    eprintln!("the refused session: {ended}");
    assert!(ended.to_string().contains("session.resume failed after the connection was recovered"), "{ended}");
    model.script(kept.id(), vec![Reply::text("Still here.")]);
    let again = kept.send_and_wait("Still there?", WAIT).expect("the other session carries on");
    assert_eq!(text(again).as_deref(), Some("Still here."));
    client.stop().expect("stop");
}

#[test]
fn a_cli_that_keeps_exiting_makes_recovery_give_up_after_its_attempts_with_the_cause() {
    let dir = TempDir::new("copilot-recovery-gives-up");
    let model = ScriptedModel::start().expect("start the scripted model");
    // The CLI starts once; every later start exits at once, with a reason.
    let marker = dir.path().join("started-once");
    let script = dir.path().join("copilot-once");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\nif [ -e '{m}' ]; then echo 'cannot start again' >&2; exit 3; fi\ntouch '{m}'\nexec '{cli}' \"$@\"\n",
            m = marker.display(),
            cli = cli_path().display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let mut options = scripted_options(Transport::Stdio, dir.path(), &model);
    options.cli_path = Some(script);
    let client = Client::start(options).expect("start the CLI");
    let steps = recovery_steps(&client);
    let session = Arc::new(client.create_session(scripted_session(dir.path(), "gives-up")).expect("create"));
    let events = session.events();

    kill_group(client.cli_pid().expect("a pid"));
    let cause = client.wait_closed(Some(WAIT)).expect("recovery gives up: the connection ends");
    let mut attempts = 0;
    let mut gave_up = None;
    for step in steps.try_iter() {
        match step {
            RecoveryEvent::Restarting { attempt, .. } => attempts = attempt,
            RecoveryEvent::AttemptFailed { error, .. } => assert!(error.contains("exited"), "{error}"),
            RecoveryEvent::GaveUp { cause } => gave_up = Some(cause),
            _ => {}
        }
    }
    assert_eq!(attempts, RECOVERY_BACKOFF_MS.len(), "every attempt, no more");
    assert_eq!(gave_up.as_ref(), Some(&cause));
    let text = cause.to_string();
    assert!(text.contains("cannot start again") || text.contains("code 3"), "the cause says why: {text}");
    // Every call and stream ends with it.
    match client.ping(None) {
        Err(Error::Disconnected(why)) => assert_eq!(why, text),
        other => panic!("a later call fails with the cause, not {other:?}"),
    }
    while events.next_timeout(WAIT).expect("the stream ends in time").is_some() {}
    drop(session);
    let _ = client.stop();
}

/// A TCP proxy to `upstream` whose connections the test cuts, and which
/// connects a new one upstream only once `open` says so.
struct Proxy {
    addr: std::net::SocketAddr,
    /// The sockets of the connection in use (client side, upstream side).
    current: Arc<Mutex<Vec<std::net::TcpStream>>>,
    gate: Arc<(Mutex<bool>, std::sync::Condvar)>,
}

impl Proxy {
    fn start(upstream: std::net::SocketAddr) -> Proxy {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let current = Arc::<Mutex<Vec<std::net::TcpStream>>>::default();
        let gate = Arc::new((Mutex::new(true), std::sync::Condvar::new()));
        let (sockets, open) = (Arc::clone(&current), Arc::clone(&gate));
        thread::spawn(move || {
            for client in listener.incoming() {
                let Ok(client) = client else { return };
                let mut allowed = open.0.lock().unwrap();
                while !*allowed {
                    allowed = open.1.wait(allowed).unwrap();
                }
                drop(allowed);
                let server = std::net::TcpStream::connect(upstream).unwrap();
                *sockets.lock().unwrap() = vec![client.try_clone().unwrap(), server.try_clone().unwrap()];
                for (mut from, mut to) in [(client.try_clone().unwrap(), server.try_clone().unwrap()), (server, client)]
                {
                    thread::spawn(move || {
                        let _ = std::io::copy(&mut from, &mut to);
                        let _ = to.shutdown(std::net::Shutdown::Both);
                    });
                }
            }
        });
        Proxy { addr, current, gate }
    }

    /// Cuts the connection in use; the next is held until [`open`](Self::open).
    fn cut(&self) {
        *self.gate.0.lock().unwrap() = false;
        for s in self.current.lock().unwrap().drain(..) {
            let _ = s.shutdown(std::net::Shutdown::Both);
        }
    }

    fn open(&self) {
        *self.gate.0.lock().unwrap() = true;
        self.gate.1.notify_all();
    }
}

#[test]
fn a_tcp_connection_cut_mid_session_is_reconnected_and_the_events_of_the_gap_are_delivered_once_in_order() {
    let dir = TempDir::new("copilot-recovery-tcp");
    let model = ScriptedModel::start().expect("start the scripted model");
    // A CLI serving TCP, kept by its owner; the client under test reaches
    // it through the proxy.
    let mut options = scripted_options(Transport::Tcp { port: 0 }, dir.path(), &model);
    options.connection_token = Some("recovery-token".into());
    let owner = Client::start(options).expect("start the CLI");
    let proxy = Proxy::start(owner.peer_addr().expect("the CLI's address"));
    let client = Client::connect(proxy.addr, Some("recovery-token")).expect("connect through the proxy");
    let steps = recovery_steps(&client);
    let config = scripted_session(dir.path(), "tcp");
    let session = client.create_session(config.clone()).expect("create");
    let id = session.id().to_owned();
    let events = session.events();
    model.script(&id, vec![Reply::text("First.")]);
    assert_eq!(text(session.send_and_wait("One?", WAIT).expect("turn one")).as_deref(), Some("First."));

    // The connection is cut; while the client is away, the owner runs a
    // turn of the session: its events reach the CLI's log, not the client.
    proxy.cut();
    match steps.recv_timeout(WAIT).expect("a recovery step") {
        RecoveryEvent::ConnectionLost { .. } => {}
        other => panic!("the first step should be the loss, not {other:?}"),
    }
    let joined = owner.resume_session(&id, config).expect("the owner resumes the session");
    model.script(&id, vec![Reply::text("Second.")]);
    assert_eq!(text(joined.send_and_wait("Two?", WAIT).expect("turn two")).as_deref(), Some("Second."));
    proxy.open();
    let gap = loop {
        match steps.recv_timeout(WAIT).expect("a recovery step") {
            RecoveryEvent::SessionResumed { session_id, gap_events, gap } => {
                assert_eq!(session_id, id);
                assert_eq!(gap, copilot_host::core::Gap::Whole, "the log was read back to the last event delivered");
                break gap_events;
            }
            RecoveryEvent::Restarting { .. } => {}
            other => panic!("unexpected step {other:?}"),
        }
    };
    assert!(matches!(steps.recv_timeout(WAIT), Ok(RecoveryEvent::Recovered { sessions: 1, .. })));
    assert!(gap > 0, "the owner's turn is the gap");
    // The session goes on over the new connection.
    model.script(&id, vec![Reply::text("Third.")]);
    assert_eq!(text(session.send_and_wait("Three?", WAIT).expect("turn three")).as_deref(), Some("Third."));

    // Every durable event of the log reached the client once, in the
    // log's order; the owner's turn among them.
    let log = client
        .call("session.eventLog.read", &json!({"sessionId": id, "includeEphemeral": false, "max": 1000}))
        .expect("read the log");
    let durable: Vec<String> =
        log["events"].as_array().unwrap().iter().map(|e| e["id"].as_str().unwrap().to_owned()).collect();
    let mut seen = Vec::new();
    while let Some(event) = events.try_next() {
        seen.push((event.id.clone(), format!("{:?}", event.kind).chars().take(40).collect::<String>()));
    }
    let seen_ids: Vec<&String> = seen.iter().map(|(id, _)| id).collect();
    for id in &durable {
        assert_eq!(seen_ids.iter().filter(|s| **s == id).count(), 1, "event {id} delivered once: {seen:?}");
    }
    let order: Vec<&String> = seen_ids.iter().copied().filter(|s| durable.contains(s)).collect();
    assert_eq!(order, durable.iter().collect::<Vec<_>>(), "in the log's order");
    let messages: Vec<String> = std::iter::empty()
        .chain(log["events"].as_array().unwrap().iter())
        .filter(|e| e["type"] == "assistant.message")
        .map(|e| e["data"]["content"].as_str().unwrap_or_default().to_owned())
        .collect();
    assert_eq!(messages, ["First.", "Second.", "Third."]);
    eprintln!("recovery over TCP: {gap} events of the gap read back; {} durable events in the log", durable.len());
    drop(joined);
    drop(session);
    client.stop().expect("stop the client");
    owner.stop().expect("stop the owner");
}
