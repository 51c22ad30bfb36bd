//! The agent-turn scenarios of `agent_turns.rs` through the async API,
//! against the real Copilot CLI 1.0.102 and the scripted model, over stdio
//! and TCP, under a multi-thread and a current-thread tokio runtime: a
//! reply, a client tool, the shell tool approved and rejected, async
//! handlers (permission, tool, user input, elicitation, slash command),
//! abort during a tool call, and resume with a new client.

use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

use copilot_host::asynch::{self, Client, EventStream, Session};
use copilot_host::{
    approve_all, ElicitationResponse, EventKind, PermissionDecision, PermissionRequest, SessionConfig, Tool,
    ToolInvocation, Transport, UserInputResponse,
};
use copilot_testkit::scripted_model::{Reply, ScriptedModel};
use copilot_tests::real_cli::{scripted_options, scripted_session, TempDir};
use serde_json::json;

/// A guard against a hang, not a bound that is asserted.
const TURN: Duration = Duration::from_secs(90);

fn config(dir: &TempDir, name: &str) -> SessionConfig {
    scripted_session(dir.path(), name)
}

async fn turn(session: &Session, prompt: &str) -> Option<String> {
    let reply = session.send_and_wait(prompt, TURN).await.expect("turn");
    reply.and_then(|e| match &e.kind {
        EventKind::AssistantMessage(m) => Some(m.content.clone()),
        _ => None,
    })
}

async fn next(events: &mut EventStream) -> Arc<copilot_host::SessionEvent> {
    tokio::time::timeout(TURN, events.next()).await.expect("an event in time").expect("the stream is open")
}

fn shell_call(file: &str) -> Reply {
    Reply::tool_call("bash", json!({"command": format!("echo proof > {file}"), "description": "Write a proof file"}))
}

#[test]
fn agent_turns_through_the_async_api_on_a_multi_thread_runtime() {
    for transport in [Transport::Stdio, Transport::Tcp { port: 0 }] {
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_time().build().unwrap();
        rt.block_on(turns(transport));
    }
}

#[test]
fn agent_turns_through_the_async_api_on_a_current_thread_runtime() {
    for transport in [Transport::Stdio, Transport::Tcp { port: 0 }] {
        let rt = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
        rt.block_on(turns(transport));
    }
}

async fn turns(transport: Transport) {
    let dir = TempDir::new("copilot-async-turns");
    let model = ScriptedModel::start().expect("start the scripted model");
    let client = Client::start(scripted_options(transport, dir.path(), &model)).await.expect("start the CLI");
    if let Transport::Tcp { .. } = transport {
        assert!(client.peer_addr().is_some(), "over TCP");
    }

    // A plain reply, every event of it on the stream.
    let session = client.create_session(config(&dir, "reply")).await.unwrap();
    model.script(session.id(), vec![Reply::text("Four.")]);
    let mut events = session.events();
    assert_eq!(turn(&session, "What is 2 + 2?").await.as_deref(), Some("Four."));
    let mut types = Vec::new();
    loop {
        let e = next(&mut events).await;
        types.push(e.event_type().to_owned());
        if matches!(e.kind, EventKind::SessionIdle(_)) {
            break;
        }
    }
    assert!(types.contains(&"user.message".to_owned()) && types.contains(&"assistant.message".to_owned()));
    session.destroy().await.unwrap();

    // A client tool, asked for permission first.
    let calls = Arc::new(Mutex::new(Vec::<ToolInvocation>::new()));
    let prompts = Arc::new(Mutex::new(Vec::new()));
    let tool = Tool::new(
        "get_weather",
        "Get the current weather for a city.",
        json!({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}),
        {
            let calls = Arc::clone(&calls);
            move |call: &ToolInvocation| {
                calls.lock().unwrap().push(call.clone());
                format!("Sunny, 22 C in {}", call.arguments["city"].as_str().unwrap_or("?"))
            }
        },
    );
    let cfg = config(&dir, "tool").tool(tool).on_permission({
        let prompts = Arc::clone(&prompts);
        move |r: &PermissionRequest| {
            prompts.lock().unwrap().push(r.kind.clone());
            PermissionDecision::ApproveOnce
        }
    });
    let session = client.create_session(cfg).await.unwrap();
    model.script(
        session.id(),
        vec![Reply::tool_call("get_weather", json!({"city": "Paris"})), Reply::text("It is sunny in Paris.")],
    );
    assert_eq!(turn(&session, "Weather in Paris?").await.as_deref(), Some("It is sunny in Paris."));
    assert_eq!(calls.lock().unwrap().len(), 1);
    assert_eq!(*prompts.lock().unwrap(), ["custom-tool"]);
    assert_eq!(model.requests_for(session.id())[1].tool_results(), ["Sunny, 22 C in Paris"]);
    session.destroy().await.unwrap();

    // The shell tool, approved: the command really runs.
    let cfg = config(&dir, "shell-ok").on_permission_shared(approve_all());
    let work = cfg.working_directory.clone().unwrap();
    let session = client.create_session(cfg).await.unwrap();
    model.script(session.id(), vec![shell_call("proof.txt"), Reply::text("Written.")]);
    assert_eq!(turn(&session, "Write the proof.").await.as_deref(), Some("Written."));
    assert_eq!(std::fs::read_to_string(work.join("proof.txt")).expect("it ran").trim(), "proof");
    session.destroy().await.unwrap();

    // The shell tool, rejected: nothing runs, the model reads why.
    let cfg = config(&dir, "shell-no")
        .on_permission(|_: &PermissionRequest| PermissionDecision::reject("not in this directory, please"));
    let work = cfg.working_directory.clone().unwrap();
    let session = client.create_session(cfg).await.unwrap();
    model.script(session.id(), vec![shell_call("proof.txt"), Reply::text("Understood.")]);
    assert_eq!(turn(&session, "Write the proof.").await.as_deref(), Some("Understood."));
    assert!(!work.join("proof.txt").exists(), "a rejected command must not run");
    let results = model.requests_for(session.id())[1].tool_results();
    assert!(results[0].contains("User feedback: not in this directory, please"), "{results:?}");
    session.destroy().await.unwrap();

    // An async permission handler and an async tool, each awaiting work
    // spawned on this runtime (a timer: its reactor is the runtime's).
    let handle = tokio::runtime::Handle::current();
    let asked = Arc::new(Mutex::new(Vec::new()));
    let permission = copilot_host::asynch::permission_handler({
        let (handle, asked) = (handle.clone(), Arc::clone(&asked));
        move |r: PermissionRequest| {
            let (handle, asked) = (handle.clone(), Arc::clone(&asked));
            async move {
                let kind = handle
                    .spawn(async move {
                        tokio::time::sleep(Duration::from_millis(20)).await;
                        r.kind
                    })
                    .await
                    .unwrap();
                asked.lock().unwrap().push(kind);
                PermissionDecision::ApproveOnce
            }
        }
    });
    let weather = copilot_host::asynch::tool(
        "get_weather",
        "Get the current weather for a city.",
        json!({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}),
        move |call: ToolInvocation| {
            let handle = handle.clone();
            async move {
                let city = call.arguments["city"].as_str().unwrap_or("?").to_owned();
                handle
                    .spawn(async move {
                        tokio::time::sleep(Duration::from_millis(20)).await;
                        format!("Rainy, 9 C in {city}")
                    })
                    .await
                    .unwrap()
            }
        },
    );
    let session =
        client.create_session(config(&dir, "async-handlers").tool(weather).on_permission(permission)).await.unwrap();
    model.script(
        session.id(),
        vec![Reply::tool_call("get_weather", json!({"city": "Oslo"})), Reply::text("It rains in Oslo.")],
    );
    assert_eq!(turn(&session, "Weather in Oslo?").await.as_deref(), Some("It rains in Oslo."));
    assert_eq!(*asked.lock().unwrap(), ["custom-tool"], "the async permission handler decided");
    assert_eq!(model.requests_for(session.id())[1].tool_results(), ["Rainy, 9 C in Oslo"]);
    session.destroy().await.unwrap();

    // An async user input handler (`ask_user`), asked once.
    let asked = Arc::new(Mutex::new(Vec::new()));
    let cfg = config(&dir, "ask").on_user_input(asynch::user_input_handler({
        let asked = Arc::clone(&asked);
        move |q| {
            let asked = Arc::clone(&asked);
            async move {
                asked.lock().unwrap().push(q.question);
                Some(UserInputResponse { answer: "blue".into(), was_freeform: true })
            }
        }
    }));
    let session = client.create_session(cfg).await.unwrap();
    model.script(
        session.id(),
        vec![Reply::tool_call("ask_user", json!({"question": "Favourite colour?"})), Reply::text("Blue it is.")],
    );
    assert_eq!(turn(&session, "Ask me something.").await.as_deref(), Some("Blue it is."));
    assert_eq!(*asked.lock().unwrap(), ["Favourite colour?"]);
    let results = model.requests_for(session.id())[1].tool_results();
    assert!(results[0].contains("User responded: blue"), "{results:?}");
    session.destroy().await.unwrap();

    // An async elicitation handler.
    let cfg = config(&dir, "elicit").on_elicitation(asynch::elicitation_handler(|r| async move {
        assert_eq!(r.message, "Your name?");
        ElicitationResponse::Accept(json!({"name": "Ada"}))
    }));
    let session = client.create_session(cfg).await.unwrap();
    let schema = json!({"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]});
    let answer = session
        .call_raw("session.ui.elicitation", json!({"message": "Your name?", "requestedSchema": schema}))
        .await
        .expect("session.ui.elicitation");
    assert_eq!((&answer["action"], &answer["content"]["name"]), (&json!("accept"), &json!("Ada")), "{answer}");
    session.destroy().await.unwrap();

    // An async slash command, run through the async execute_command.
    let seen = Arc::new(Mutex::new(Vec::new()));
    let cfg = config(&dir, "cmd").command(asynch::command("deploy", "Deploy somewhere.", {
        let seen = Arc::clone(&seen);
        move |c| {
            let seen = Arc::clone(&seen);
            async move {
                seen.lock().unwrap().push(c.args.clone());
                if c.args == "prod" {
                    Err("not on a Sunday".to_owned())
                } else {
                    Ok(())
                }
            }
        }
    }));
    let session = client.create_session(cfg).await.unwrap();
    assert_eq!(session.execute_command("deploy", "staging").await.expect("execute"), None);
    assert_eq!(session.execute_command("deploy", "prod").await.expect("execute").as_deref(), Some("not on a Sunday"));
    assert_eq!(*seen.lock().unwrap(), ["staging", "prod"]);
    session.destroy().await.unwrap();

    // Abort during a tool call; the session is usable after it.
    let (release_tx, release) = mpsc::channel::<()>();
    let release = Mutex::new(release);
    let tool = Tool::new("wait_here", "Waits.", json!({"type": "object"}), move |_: &ToolInvocation| {
        let _ = release.lock().unwrap().recv_timeout(TURN);
        "finished too late"
    })
    .skip_permission();
    let session = client.create_session(config(&dir, "abort").tool(tool)).await.unwrap();
    model.script(session.id(), vec![Reply::tool_call("wait_here", json!({})), Reply::text("never said")]);
    let mut events = session.events();
    session.send("Wait for me.").await.unwrap();
    while !matches!(next(&mut events).await.kind, EventKind::ToolExecutionStart(_)) {}
    session.abort().await.expect("abort");
    let mut aborted = false;
    loop {
        let e = next(&mut events).await;
        match &e.kind {
            EventKind::Abort(_) => aborted = true,
            EventKind::SessionIdle(_) => break,
            EventKind::AssistantMessage(m) => assert_ne!(m.content, "never said", "the turn went on"),
            _ => {}
        }
    }
    assert!(aborted, "an abort event");
    let _ = release_tx.send(());
    assert_eq!(model.requests_for(session.id()).len(), 1, "no model call after the abort");
    model.script(session.id(), vec![Reply::text("Back again.")]);
    assert_eq!(turn(&session, "Again?").await.as_deref(), Some("Back again."));
    session.destroy().await.unwrap();

    // Resume with a new client after a stop.
    let session = client.create_session(config(&dir, "resume")).await.unwrap();
    let id = session.id().to_owned();
    model.script(&id, vec![Reply::text("First answer."), Reply::text("Second answer.")]);
    assert_eq!(turn(&session, "First question").await.as_deref(), Some("First answer."));
    drop(session);
    client.stop().await.expect("stop");
    let second = Client::start(scripted_options(transport, dir.path(), &model)).await.expect("start again");
    let resumed = second.resume_session(&id, config(&dir, "resume")).await.unwrap();
    assert_eq!(turn(&resumed, "Second question").await.as_deref(), Some("Second answer."));
    let history: Vec<String> = resumed
        .messages()
        .await
        .unwrap()
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::AssistantMessage(m) => Some(m.content.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(history, ["First answer.", "Second answer."]);
    resumed.destroy().await.unwrap();
    second.stop().await.expect("stop");
}

#[test]
fn an_async_send_and_wait_past_its_timeout_returns_timeout_and_the_session_stays_usable() {
    // A plain `block_on`: the deadline is kept by the client's timer thread,
    // not by an executor's timer.
    futures_lite_block_on(async {
        let dir = TempDir::new("copilot-async-timeout");
        let model = ScriptedModel::start().expect("start the scripted model");
        let client =
            Client::start(scripted_options(Transport::Stdio, dir.path(), &model)).await.expect("start the CLI");
        let (called_tx, called) = mpsc::channel();
        let (release_tx, release) = mpsc::channel::<()>();
        let release = Mutex::new(release);
        let tool = Tool::new("hold", "Holds the turn open.", json!({"type": "object"}), move |_: &ToolInvocation| {
            let _ = called_tx.send(());
            // Released by the test; the limit only turns a broken deadline
            // into a failed assertion instead of a hang.
            let _ = release.lock().unwrap().recv_timeout(TURN);
            "released"
        })
        .skip_permission();
        let session = client.create_session(config(&dir, "timeout").tool(tool)).await.unwrap();
        model.script(
            session.id(),
            vec![Reply::tool_call("hold", json!({})), Reply::text("Done."), Reply::text("Again.")],
        );
        let mut events = session.events();
        // The tool holds the turn open, so the session is not idle by the deadline.
        match session.send_and_wait("Hold on.", Duration::from_millis(300)).await {
            Err(copilot_host::Error::Timeout { .. }) => {}
            other => panic!("expected Timeout, got {other:?}"),
        }
        called.recv().expect("the tool was called: the turn was under way");
        drop(release_tx);
        // The turn still ends, every event of it on the stream, and the
        // session answers the next turn.
        loop {
            let e = events.next().await.expect("the stream is open");
            if matches!(e.kind, EventKind::SessionIdle(_)) {
                break;
            }
        }
        let reply = session.send_and_wait("Once more.", TURN).await.expect("turn");
        assert!(
            matches!(reply.as_deref().map(|e| &e.kind), Some(EventKind::AssistantMessage(m)) if m.content == "Again.")
        );
        client.stop().await.expect("stop");
    });
}

/// Runs a future to completion on this thread, parking between polls.
fn futures_lite_block_on<F: std::future::Future>(future: F) -> F::Output {
    struct Unpark(std::thread::Thread);
    impl std::task::Wake for Unpark {
        fn wake(self: Arc<Self>) {
            self.0.unpark();
        }
    }
    let waker = std::task::Waker::from(Arc::new(Unpark(std::thread::current())));
    let mut cx = std::task::Context::from_waker(&waker);
    let mut future = std::pin::pin!(future);
    loop {
        if let std::task::Poll::Ready(out) = future.as_mut().poll(&mut cx) {
            return out;
        }
        std::thread::park();
    }
}
