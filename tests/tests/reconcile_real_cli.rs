//! The real CLI 1.0.102 on the scripted model, killed with a client tool
//! call pending; a new CLI on the same state and a new client resume the
//! session by id: the CLI sends no event for the call again, the client
//! asks what is pending, the handler the new client registered answers the
//! call once, and the turn completes.

use std::process::Command;
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use copilot_host::{
    Client, ClientOptions, EventKind, PermissionDecision, PermissionRequest, SessionConfig, Tool, ToolInvocation,
    Transport,
};
use copilot_testkit::scripted_model::{Reply, ScriptedModel};
use copilot_tests::real_cli::{scripted_options, scripted_session, TempDir};
use serde_json::{json, Value};

/// How long a step may take before the test fails (a failure bound only).
const WAIT: Duration = Duration::from_secs(60);

fn weather_tool(handler: impl Fn(&ToolInvocation) -> String + Send + Sync + 'static) -> Tool {
    Tool::new(
        "get_weather",
        "Get the current weather for a city.",
        json!({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}),
        handler,
    )
}

fn approve(_: &PermissionRequest) -> PermissionDecision {
    PermissionDecision::ApproveOnce
}

/// Waits until `condition` holds, checking every 10 ms; fails after `WAIT`.
fn wait_until(what: &str, condition: impl Fn() -> bool) {
    let deadline = Instant::now() + WAIT;
    while !condition() {
        assert!(Instant::now() < deadline, "{what}: not within {WAIT:?}");
        thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn a_new_client_resuming_by_id_answers_the_tool_call_pending_from_before_and_the_turn_completes() {
    let dir = TempDir::new("copilot-reconcile");
    let model = ScriptedModel::start().expect("start the scripted model");
    let options = || scripted_options(Transport::Stdio, dir.path(), &model);
    let work = scripted_session(dir.path(), "pending");

    // The first client: its tool handler is called, then the CLI dies
    // before it answers.
    // It does not recover: a new client does (recovery: tests/recovery_real_cli.rs).
    let first = Client::start(ClientOptions { auto_restart: false, ..options() }).expect("start the CLI");
    let (called_tx, called) = mpsc::channel::<String>();
    let (release_tx, release) = mpsc::channel::<()>();
    let release = Mutex::new(release);
    let called_tx = Mutex::new(called_tx);
    let config = SessionConfig { ..work.clone() }
        .tool(weather_tool(move |call| {
            called_tx.lock().unwrap().send(call.tool_call_id.clone()).unwrap();
            let _ = release.lock().unwrap().recv();
            "never reaches the CLI".into()
        }))
        .on_permission(approve);
    let session = first.create_session(config).expect("create");
    let id = session.id().to_owned();
    model.script(
        &id,
        vec![Reply::tool_call("get_weather", json!({"city": "Paris"})), Reply::text("It is sunny in Paris.")],
    );
    session.send("Weather in Paris?").expect("send");
    let tool_call_id = called.recv_timeout(WAIT).expect("the first client's handler is called");

    // The call is in the session's journal before the CLI dies (as on the
    // wire: the CLI wrote it before it sent the event).
    let journal = dir.path().join("home/session-state").join(&id).join("events.jsonl");
    wait_until("the call in the journal", || {
        std::fs::read_to_string(&journal)
            .is_ok_and(|t| t.contains("external_tool.requested") && t.contains(&tool_call_id))
    });
    let pid = first.cli_pid().expect("a started CLI has a pid");
    let killed = Command::new("kill").args(["-KILL", "--", &format!("-{pid}")]).status().expect("run kill");
    assert!(killed.success(), "kill -KILL -{pid}");
    assert!(first.wait_closed(Some(WAIT)).is_some(), "the first client sees its CLI gone");
    release_tx.send(()).unwrap();
    drop(session);
    drop(first);

    // A new CLI on the same state, a new client, the session resumed by id.
    let second = Client::start(options()).expect("start the CLI again");
    let calls = Arc::new(Mutex::new(Vec::<ToolInvocation>::new()));
    let (listed_tx, listed) = mpsc::channel::<Value>();
    let (answer_tx, answer) = mpsc::channel::<()>();
    let answer = Mutex::new(answer);
    let listed_tx = Mutex::new(listed_tx);
    let seen = Arc::clone(&calls);
    let config = SessionConfig { continue_pending_work: true, ..work.clone() }
        .tool(weather_tool(move |call| {
            seen.lock().unwrap().push(call.clone());
            // Hold the answer until the test has read the CLI's list.
            listed_tx.lock().unwrap().send(json!(call.tool_call_id)).unwrap();
            let _ = answer.lock().unwrap().recv();
            format!("Sunny, 22 C in {}", call.arguments["city"].as_str().unwrap_or("?"))
        }))
        .on_permission(approve);
    let resumed = second.resume_session(&id, config).expect("resume by id");
    let events = resumed.events();
    let handled = listed.recv_timeout(WAIT).expect("the new client's handler is called for the pending call");
    assert_eq!(handled, json!(tool_call_id), "the call pending from before");
    // What the CLI lists while the call waits for the answer.
    let tools = second.call("session.tools.listPendingRequests", &json!({"sessionId": id})).expect("list tools");
    let prompts = second.call("session.permissions.pendingRequests", &json!({"sessionId": id})).expect("list prompts");
    eprintln!("session.tools.listPendingRequests -> {tools}");
    eprintln!("session.permissions.pendingRequests -> {prompts}");
    let items = tools["items"].as_array().expect("items");
    assert_eq!(items.len(), 1, "{tools}");
    assert_eq!(items[0]["toolCallId"], json!(tool_call_id));
    assert_eq!(items[0]["arguments"], json!({"city": "Paris"}));
    answer_tx.send(()).unwrap();

    // The turn completes with the scripted reply.
    let mut reply = None;
    loop {
        let event = events.next_timeout(WAIT).expect("an event in time").expect("the stream is open");
        match &event.kind {
            EventKind::AssistantMessage(m) => reply = Some(m.content.clone()),
            EventKind::SessionIdle(_) => break,
            _ => {}
        }
    }
    assert_eq!(reply.as_deref(), Some("It is sunny in Paris."));
    let calls = calls.lock().unwrap();
    assert_eq!(calls.len(), 1, "answered once");
    assert_eq!(calls[0].arguments, json!({"city": "Paris"}));
    let last = model.requests_for(&id).pop().expect("the model was asked again");
    assert_eq!(last.tool_results(), ["Sunny, 22 C in Paris"]);
    let after = second.call("session.tools.listPendingRequests", &json!({"sessionId": id})).expect("list tools");
    assert_eq!(after, json!({"items": []}), "nothing pending once answered");
    let stats = second.engine_stats();
    eprintln!(
        "engine: lists sent {}, failed {}, waits taken on from lists {}, duplicates {}, answers {} (accepted {})",
        stats.lists_sent,
        stats.lists_failed,
        stats.listed,
        stats.duplicate_waits,
        stats.answers_sent,
        stats.acks_accepted
    );
    assert_eq!((stats.lists_sent, stats.listed), (2, 1));
    resumed.destroy().expect("destroy");
    second.stop().expect("stop");
}

#[test]
fn a_new_client_resuming_by_id_answers_the_permission_prompt_pending_from_before_and_the_command_runs() {
    let dir = TempDir::new("copilot-reconcile-prompt");
    let model = ScriptedModel::start().expect("start the scripted model");
    let options = || scripted_options(Transport::Stdio, dir.path(), &model);
    let work = scripted_session(dir.path(), "prompt");
    let folder = work.working_directory.clone().expect("a working folder");

    // The first client: asked to run a shell command, its handler is
    // called, then the CLI dies before it answers.
    // It does not recover: a new client does (recovery: tests/recovery_real_cli.rs).
    let first = Client::start(ClientOptions { auto_restart: false, ..options() }).expect("start the CLI");
    let (asked_tx, asked) = mpsc::channel::<String>();
    let (release_tx, release) = mpsc::channel::<()>();
    let (release, asked_tx) = (Mutex::new(release), Mutex::new(asked_tx));
    let config = SessionConfig { ..work.clone() }.on_permission(move |r: &PermissionRequest| {
        asked_tx.lock().unwrap().send(r.kind.clone()).unwrap();
        let _ = release.lock().unwrap().recv();
        PermissionDecision::ApproveOnce
    });
    let session = first.create_session(config).expect("create");
    let id = session.id().to_owned();
    let command = json!({"command": "echo proof > proof.txt", "description": "Write a proof file"});
    model.script(&id, vec![Reply::tool_call("bash", command), Reply::text("Written.")]);
    session.send("Write the proof file").expect("send");
    assert_eq!(asked.recv_timeout(WAIT).expect("the first client is asked"), "shell");
    let journal = dir.path().join("home/session-state").join(&id).join("events.jsonl");
    wait_until("the prompt in the journal", || {
        std::fs::read_to_string(&journal).is_ok_and(|t| t.contains("permission.requested"))
    });
    let pid = first.cli_pid().expect("a started CLI has a pid");
    let killed = Command::new("kill").args(["-KILL", "--", &format!("-{pid}")]).status().expect("run kill");
    assert!(killed.success(), "kill -KILL -{pid}");
    assert!(first.wait_closed(Some(WAIT)).is_some(), "the first client sees its CLI gone");
    release_tx.send(()).unwrap();
    drop(session);
    drop(first);
    assert!(!folder.join("proof.txt").exists(), "not run before an answer");

    // A new CLI and client resume by id; the new handler answers the prompt.
    let second = Client::start(options()).expect("start the CLI again");
    let (seen_tx, seen) = mpsc::channel::<(String, Value)>();
    let (answer_tx, answer) = mpsc::channel::<()>();
    let (answer, seen_tx) = (Mutex::new(answer), Mutex::new(seen_tx));
    let config =
        SessionConfig { continue_pending_work: true, ..work.clone() }.on_permission(move |r: &PermissionRequest| {
            let prompt = r.data.prompt_request.clone().unwrap_or_default();
            seen_tx.lock().unwrap().send((r.kind.clone(), prompt)).unwrap();
            let _ = answer.lock().unwrap().recv();
            PermissionDecision::ApproveOnce
        });
    let resumed = second.resume_session(&id, config).expect("resume by id");
    let events = resumed.events();
    let (kind, prompt) = seen.recv_timeout(WAIT).expect("the new client's handler is asked the pending prompt");
    assert_eq!(kind, "shell", "the permission kind of the listed `commands` prompt");
    assert_eq!(prompt["kind"], "commands");
    assert_eq!(prompt["fullCommandText"], "echo proof > proof.txt");
    let prompts = second.call("session.permissions.pendingRequests", &json!({"sessionId": id})).expect("list prompts");
    let tools = second.call("session.tools.listPendingRequests", &json!({"sessionId": id})).expect("list tools");
    eprintln!("session.permissions.pendingRequests -> {prompts}");
    eprintln!("session.tools.listPendingRequests -> {tools}");
    assert_eq!(prompts["items"].as_array().map(Vec::len), Some(1), "{prompts}");
    answer_tx.send(()).unwrap();

    let mut reply = None;
    loop {
        let event = events.next_timeout(WAIT).expect("an event in time").expect("the stream is open");
        match &event.kind {
            EventKind::AssistantMessage(m) => reply = Some(m.content.clone()),
            EventKind::SessionIdle(_) => break,
            _ => {}
        }
    }
    assert_eq!(reply.as_deref(), Some("Written."));
    assert_eq!(std::fs::read_to_string(folder.join("proof.txt")).expect("the command ran").trim(), "proof");
    assert!(seen.try_recv().is_err(), "asked once");
    let stats = second.engine_stats();
    assert_eq!((stats.lists_sent, stats.listed), (2, 1));
    resumed.destroy().expect("destroy");
    second.stop().expect("stop");
}
