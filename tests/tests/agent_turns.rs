//! Full agent turns through the real Copilot CLI 1.0.102 against the
//! scripted model, over stdio and TCP: replies (streamed and not), client
//! tools, the built-in shell tool approved and rejected, slow handlers, two
//! sessions at once, abort, resume after a restart, and handlers that panic.
//!
//! Tests of one transport share one CLI while any of them runs (it starts in
//! about 2 s) and keep apart by session.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex, Weak};
use std::thread;
use std::time::{Duration, Instant};

use copilot_host::{
    approve_all, Client, Command, ElicitationResponse, EventKind, PermissionDecision, PermissionRequest, Session,
    SessionConfig, SessionEvent, Tool, ToolInvocation, Transport, UserInputRequest, UserInputResponse,
};
use copilot_testkit::scripted_model::{Reply, ScriptedModel};
use copilot_tests::real_cli::{scripted_options, scripted_session, TempDir};
use serde_json::json;

const TURN: Duration = Duration::from_secs(90);

/// One CLI and one scripted model, shared by the tests of a transport.
struct Fixture {
    client: Client,
    model: ScriptedModel,
    dir: TempDir,
}

impl Fixture {
    fn start(transport: Transport) -> Fixture {
        let dir = TempDir::new("copilot-turns");
        let model = ScriptedModel::start().expect("start the scripted model");
        let client = Client::start(scripted_options(transport, dir.path(), &model)).expect("start the CLI");
        Fixture { client, model, dir }
    }

    /// A session in a fresh working directory (the fixture is shared).
    fn config(&self, name: &str) -> SessionConfig {
        scripted_session(self.dir.path(), &format!("{name}-{}", uuid_like()))
    }
}

fn uuid_like() -> String {
    static N: AtomicUsize = AtomicUsize::new(0);
    format!("{}", N.fetch_add(1, Ordering::Relaxed))
}

/// The fixture of `transport`, started if no test holds it now.
fn shared(transport: Transport) -> Arc<Fixture> {
    static STDIO: Mutex<Weak<Fixture>> = Mutex::new(Weak::new());
    static TCP: Mutex<Weak<Fixture>> = Mutex::new(Weak::new());
    let slot = match transport {
        Transport::Stdio => &STDIO,
        Transport::Tcp { .. } => &TCP,
    };
    let mut slot = slot.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(f) = slot.upgrade() {
        return f;
    }
    let f = Arc::new(Fixture::start(transport));
    *slot = Arc::downgrade(&f);
    f
}

const TRANSPORTS: [Transport; 2] = [Transport::Stdio, Transport::Tcp { port: 0 }];

/// Runs a scenario on both transports and prints its send-to-idle time.
fn on_both(name: &str, scenario: impl Fn(&Fixture) -> Duration) {
    for transport in TRANSPORTS {
        let fixture = shared(transport);
        let took = scenario(&fixture);
        eprintln!("turn time {name} over {transport:?}: {took:?}");
    }
}

/// Sends and waits for idle, returning the final message text and the time.
fn turn(session: &Session, prompt: &str) -> (Option<String>, Duration) {
    let start = Instant::now();
    let reply = session.send_and_wait(prompt, TURN).unwrap_or_else(|e| panic!("turn failed: {e}"));
    let text = reply.and_then(|e| match &e.kind {
        EventKind::AssistantMessage(m) => Some(m.content.clone()),
        _ => None,
    });
    (text, start.elapsed())
}

fn drain(events: &copilot_host::EventStream) -> Vec<Arc<SessionEvent>> {
    std::iter::from_fn(|| events.try_next()).collect()
}

#[test]
fn plain_reply_streamed_and_not() {
    on_both("plain reply", |f| {
        let mut total = Duration::ZERO;
        for streaming in [false, true] {
            let session = f.client.create_session(SessionConfig { streaming, ..f.config("plain") }).unwrap();
            f.model.script(session.id(), vec![Reply::text("The answer is 4, as it always was.")]);
            let events = session.events();
            let (text, took) = turn(&session, "What is 2 + 2?");
            total += took;
            assert_eq!(text.as_deref(), Some("The answer is 4, as it always was."));
            let deltas: String = drain(&events)
                .iter()
                .filter_map(|e| match &e.kind {
                    EventKind::AssistantMessageDelta(d) => Some(d.delta_content.clone()),
                    _ => None,
                })
                .collect();
            if streaming {
                assert_eq!(deltas, "The answer is 4, as it always was.", "deltas arrive in order");
            } else {
                assert!(deltas.is_empty());
            }
            let requests = f.model.requests_for(session.id());
            assert_eq!(requests.len(), 1);
            assert_eq!(requests[0].streamed, streaming);
            assert!(requests[0].last_user_text().unwrap().ends_with("What is 2 + 2?"));
            session.destroy().unwrap();
        }
        total / 2
    });
}

fn weather_tool(calls: Arc<Mutex<Vec<ToolInvocation>>>) -> Tool {
    Tool::new(
        "get_weather",
        "Get the current weather for a city.",
        json!({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}),
        move |call: &ToolInvocation| {
            calls.lock().unwrap().push(call.clone());
            format!("Sunny, 22 C in {}", call.arguments["city"].as_str().unwrap_or("?"))
        },
    )
}

#[test]
fn client_tool_result_reaches_the_model() {
    on_both("client tool", |f| {
        let calls = Arc::new(Mutex::new(Vec::new()));
        let prompts = Arc::new(Mutex::new(Vec::new()));
        let config = f.config("tool").tool(weather_tool(Arc::clone(&calls))).on_permission({
            let prompts = Arc::clone(&prompts);
            move |r: &PermissionRequest| {
                prompts.lock().unwrap().push(r.kind.clone());
                PermissionDecision::ApproveOnce
            }
        });
        let session = f.client.create_session(config).unwrap();
        f.model.script(
            session.id(),
            vec![Reply::tool_call("get_weather", json!({"city": "Paris"})), Reply::text("It is sunny in Paris.")],
        );
        let (text, took) = turn(&session, "Weather in Paris?");
        assert_eq!(text.as_deref(), Some("It is sunny in Paris."));
        let calls = calls.lock().unwrap();
        assert_eq!(calls.len(), 1);
        assert_eq!(calls[0].arguments, json!({"city": "Paris"}), "the handler gets parsed arguments");
        assert_eq!(calls[0].session_id, session.id());
        assert_eq!(*prompts.lock().unwrap(), ["custom-tool"], "a client tool asks first");
        let requests = f.model.requests_for(session.id());
        assert_eq!(requests.len(), 2);
        assert_eq!(requests[1].tool_results(), ["Sunny, 22 C in Paris"]);
        session.destroy().unwrap();
        took
    });
}

fn shell_call(file: &str) -> Reply {
    Reply::tool_call("bash", json!({"command": format!("echo proof > {file}"), "description": "Write a proof file"}))
}

#[test]
fn shell_tool_runs_when_approved() {
    on_both("shell approved", |f| {
        let config = f.config("shell-ok").on_permission_shared(approve_all());
        let dir = config.working_directory.clone().unwrap();
        let session = f.client.create_session(config).unwrap();
        f.model.script(session.id(), vec![shell_call("proof.txt"), Reply::text("Written.")]);
        let (text, took) = turn(&session, "Write the proof.");
        assert_eq!(text.as_deref(), Some("Written."));
        let proof = std::fs::read_to_string(dir.join("proof.txt")).expect("the command really ran");
        assert_eq!(proof.trim(), "proof");
        session.destroy().unwrap();
        took
    });
}

#[test]
fn shell_tool_rejection_reaches_the_model_and_nothing_runs() {
    on_both("shell rejected", |f| {
        let asked = Arc::new(Mutex::new(Vec::new()));
        let config = f.config("shell-no").on_permission({
            let asked = Arc::clone(&asked);
            move |r: &PermissionRequest| {
                asked.lock().unwrap().push(r.data.permission_request["fullCommandText"].clone());
                PermissionDecision::reject("not in this directory, please")
            }
        });
        let dir = config.working_directory.clone().unwrap();
        let session = f.client.create_session(config).unwrap();
        f.model.script(session.id(), vec![shell_call("proof.txt"), Reply::text("Understood, I did not write it.")]);
        let (text, took) = turn(&session, "Write the proof.");
        assert_eq!(text.as_deref(), Some("Understood, I did not write it."));
        assert_eq!(*asked.lock().unwrap(), [json!("echo proof > proof.txt")]);
        assert!(!dir.join("proof.txt").exists(), "a rejected command must not run");
        let requests = f.model.requests_for(session.id());
        let results = requests[1].tool_results();
        assert_eq!(results.len(), 1);
        assert!(
            results[0].contains("The user rejected this tool call. User feedback: not in this directory, please"),
            "{results:?}"
        );
        session.destroy().unwrap();
        took
    });
}

#[test]
fn a_slow_permission_handler_completes_while_other_sessions_flow() {
    on_both("slow permission (held until the other turn ends)", |f| {
        // What happened, in order. The handler is held until the other
        // session's turn has ended: a host that ran handlers where they can
        // hold up other sessions would stall that turn until the handler
        // gave up waiting, and the order would show it.
        let log = Arc::new(Mutex::new(Vec::<&str>::new()));
        let (entered_tx, entered) = mpsc::channel();
        let (release, released) = mpsc::channel::<()>();
        let released = Mutex::new(released);
        let slow = f.config("slow").on_permission({
            let log = Arc::clone(&log);
            move |_: &PermissionRequest| {
                log.lock().unwrap().push("handler asked");
                let _ = entered_tx.send(());
                let waited = released.lock().unwrap().recv_timeout(TURN);
                let end = match waited {
                    // Disconnected: released before, for an earlier request.
                    Ok(()) | Err(mpsc::RecvTimeoutError::Disconnected) => "handler released",
                    Err(mpsc::RecvTimeoutError::Timeout) => "handler gave up waiting",
                };
                log.lock().unwrap().push(end);
                PermissionDecision::ApproveOnce
            }
        });
        let slow_dir = slow.working_directory.clone().unwrap();
        let slow_session = f.client.create_session(slow).unwrap();
        f.model.script(slow_session.id(), vec![shell_call("slow.txt"), Reply::text("Slow but done.")]);
        let other = f.client.create_session(f.config("fast")).unwrap();
        f.model.script(other.id(), vec![Reply::text("Quick reply.")]);

        let slow_session = Arc::new(slow_session);
        let slow_turn = {
            let s = Arc::clone(&slow_session);
            thread::spawn(move || turn(&s, "Take your time."))
        };
        entered.recv_timeout(TURN).expect("the slow handler is asked");
        let (quick, quick_took) = turn(&other, "Be quick.");
        assert_eq!(quick.as_deref(), Some("Quick reply."));
        log.lock().unwrap().push("other turn ended");
        release.send(()).unwrap();
        drop(release);
        let (slow_text, _) = slow_turn.join().unwrap();
        assert_eq!(slow_text.as_deref(), Some("Slow but done."), "the held handler's answer still counts");
        assert_eq!(log.lock().unwrap()[..3], ["handler asked", "other turn ended", "handler released"]);
        assert!(slow_dir.join("slow.txt").exists());
        other.destroy().unwrap();
        Arc::into_inner(slow_session).unwrap().destroy().unwrap();
        quick_took
    });
}

#[test]
fn two_sessions_at_once_each_get_only_their_own_events_and_tools() {
    on_both("two sessions at once", |f| {
        let make = |city: &'static str, tool: &'static str| {
            let calls = Arc::new(Mutex::new(Vec::<ToolInvocation>::new()));
            let c = Arc::clone(&calls);
            let t = Tool::new(tool, "A city's tool.", json!({"type": "object"}), move |call: &ToolInvocation| {
                c.lock().unwrap().push(call.clone());
                format!("{tool} says {city}")
            })
            .skip_permission();
            let session = f.client.create_session(f.config(tool).tool(t)).unwrap();
            f.model.script(
                session.id(),
                vec![Reply::tool_call(tool, json!({"city": city})), Reply::text(format!("Done with {city}."))],
            );
            (session, calls)
        };
        let (a, a_calls) = make("Oslo", "tool_a");
        let (b, b_calls) = make("Lima", "tool_b");
        let (a_events, b_events) = (a.events(), b.events());
        let start = Instant::now();
        let (ta, tb) = thread::scope(|s| {
            let ta = s.spawn(|| turn(&a, "Go A"));
            let tb = s.spawn(|| turn(&b, "Go B"));
            (ta.join().unwrap(), tb.join().unwrap())
        });
        let took = start.elapsed();
        assert_eq!(ta.0.as_deref(), Some("Done with Oslo."));
        assert_eq!(tb.0.as_deref(), Some("Done with Lima."));
        for (session, calls, events, tool) in [(&a, &a_calls, &a_events, "tool_a"), (&b, &b_calls, &b_events, "tool_b")]
        {
            let calls = calls.lock().unwrap();
            assert_eq!(calls.len(), 1);
            assert_eq!((calls[0].tool_name.as_str(), calls[0].session_id.as_str()), (tool, session.id()));
            for e in drain(events) {
                match &e.kind {
                    EventKind::ToolExecutionStart(t) => assert_eq!(t.tool_name, tool, "another session's tool"),
                    EventKind::ExternalToolRequested(t) => assert_eq!(t.session_id, session.id()),
                    EventKind::SessionStart(s) => assert_eq!(s.session_id, session.id()),
                    _ => {}
                }
            }
        }
        a.destroy().unwrap();
        b.destroy().unwrap();
        took
    });
}

#[test]
fn abort_during_a_tool_call_ends_the_turn() {
    on_both("abort during a tool call", |f| {
        let (called_tx, called) = mpsc::channel();
        let (release_tx, release) = mpsc::channel::<()>();
        let release = Mutex::new(release);
        let tool = Tool::new("wait_here", "Waits.", json!({"type": "object"}), move |_: &ToolInvocation| {
            let _ = called_tx.send(());
            let _ = release.lock().unwrap().recv_timeout(Duration::from_secs(30));
            "finished too late"
        })
        .skip_permission();
        let session = f.client.create_session(f.config("abort").tool(tool)).unwrap();
        f.model.script(session.id(), vec![Reply::tool_call("wait_here", json!({})), Reply::text("never said")]);
        let events = session.events();
        let start = Instant::now();
        session.send("Wait for me.").unwrap();
        called.recv_timeout(TURN).expect("the tool is called");
        session.abort().expect("abort");
        let mut aborted = false;
        loop {
            let e = events.next_timeout(TURN).expect("events after abort").expect("open");
            match &e.kind {
                EventKind::Abort(_) => aborted = true,
                EventKind::SessionIdle(_) => break,
                EventKind::AssistantMessage(m) => assert_ne!(m.content, "never said", "the turn went on"),
                _ => {}
            }
        }
        let took = start.elapsed();
        assert!(aborted, "an abort event");
        let _ = release_tx.send(());
        assert_eq!(f.model.requests_for(session.id()).len(), 1, "no model call after the abort");
        // The session is usable after the abort.
        f.model.script(session.id(), vec![Reply::text("Back again.")]);
        assert_eq!(turn(&session, "Again?").0.as_deref(), Some("Back again."));
        session.destroy().unwrap();
        took
    });
}

#[test]
fn a_panicking_tool_handler_fails_the_call_and_the_client_lives_on() {
    on_both("panicking tool handler", |f| {
        let tool = Tool::new("explode", "Fails.", json!({"type": "object"}), |_: &ToolInvocation| -> String {
            panic!("the tool handler blew up")
        })
        .skip_permission();
        let session = f.client.create_session(f.config("panic").tool(tool)).unwrap();
        f.model.script(session.id(), vec![Reply::tool_call("explode", json!({})), Reply::text("The tool failed.")]);
        let events = session.events();
        let (text, took) = turn(&session, "Try the tool.");
        assert_eq!(text.as_deref(), Some("The tool failed."));
        let completions: Vec<bool> = drain(&events)
            .iter()
            .filter_map(|e| match &e.kind {
                EventKind::ToolExecutionComplete(t) => Some(t.success),
                _ => None,
            })
            .collect();
        assert_eq!(completions, [false], "the tool call ended in an error");
        let requests = f.model.requests_for(session.id());
        // The panic's message goes as the call's `error`; the model reads
        // only the CLI's words that the tool failed.
        let result = &requests[1].tool_results()[0];
        let cli_words =
            "Failed to execute `explode` tool with arguments: {} due to error: Error: Tool execution failed";
        assert_eq!(result, cli_words);
        // A panicking permission handler is a refusal, not a hang.
        let config = f
            .config("panic-permission")
            .on_permission(|_: &PermissionRequest| -> PermissionDecision { panic!("the permission handler blew up") });
        let other = f.client.create_session(config).unwrap();
        f.model.script(other.id(), vec![shell_call("never.txt"), Reply::text("Refused, moving on.")]);
        assert_eq!(turn(&other, "Try.").0.as_deref(), Some("Refused, moving on."));
        assert!(f.client.ping(None).is_ok(), "the client lives on");
        session.destroy().unwrap();
        other.destroy().unwrap();
        took
    });
}

#[test]
fn resume_after_stop_with_a_new_client() {
    for transport in TRANSPORTS {
        let dir = TempDir::new("copilot-resume");
        let model = ScriptedModel::start().unwrap();
        let work = dir.path().join("work");
        std::fs::create_dir_all(&work).unwrap();
        let config = || SessionConfig {
            working_directory: Some(work.clone()),
            ..SessionConfig::with_model(ScriptedModel::MODEL)
        };
        let first = Client::start(scripted_options(transport, dir.path(), &model)).unwrap();
        let session = first.create_session(config()).unwrap();
        let id = session.id().to_owned();
        model.script(&id, vec![Reply::text("First answer."), Reply::text("Second answer.")]);
        assert_eq!(turn(&session, "First question").0.as_deref(), Some("First answer."));
        drop(session);
        first.stop().unwrap();

        let second = Client::start(scripted_options(transport, dir.path(), &model)).unwrap();
        let resumed = second.resume_session(&id, config()).unwrap();
        let (text, took) = turn(&resumed, "Second question");
        assert_eq!(text.as_deref(), Some("Second answer."));
        eprintln!("turn time resumed session over {transport:?}: {took:?}");
        let history: Vec<String> = resumed
            .messages()
            .unwrap()
            .iter()
            .filter_map(|e| match &e.kind {
                EventKind::AssistantMessage(m) => Some(m.content.clone()),
                _ => None,
            })
            .collect();
        assert_eq!(history, ["First answer.", "Second answer."], "the resumed session keeps its history");
        // The model saw the first exchange in the resumed session's request.
        let last = model.requests_for(&id).pop().unwrap();
        let seen: Vec<_> = last.messages().iter().filter(|m| m["role"] == "assistant").collect();
        assert_eq!(seen.len(), 1, "{seen:?}");
        resumed.destroy().unwrap();
        second.stop().unwrap();
    }
}

#[test]
fn user_input_is_answered_once_and_reaches_the_model() {
    on_both("user input (ask_user)", |f| {
        let asked = Arc::new(AtomicUsize::new(0));
        let config = f.config("ask").on_user_input({
            let asked = Arc::clone(&asked);
            move |q: &UserInputRequest| {
                asked.fetch_add(1, Ordering::SeqCst);
                assert_eq!(q.question, "Favourite colour?");
                Some(UserInputResponse { answer: "blue".into(), was_freeform: true })
            }
        });
        let session = f.client.create_session(config).unwrap();
        f.model.script(
            session.id(),
            vec![Reply::tool_call("ask_user", json!({"question": "Favourite colour?"})), Reply::text("Blue it is.")],
        );
        let (text, took) = turn(&session, "Ask me something.");
        assert_eq!(text.as_deref(), Some("Blue it is."));
        assert_eq!(asked.load(Ordering::SeqCst), 1, "asked once although it arrives as a request and an event");
        let results = f.model.requests_for(session.id())[1].tool_results();
        assert!(results[0].contains("User responded: blue"), "{results:?}");
        session.destroy().unwrap();
        took
    });
}

#[test]
fn elicitation_is_answered_by_the_handler_or_refused_at_once_when_no_client_has_one() {
    on_both("elicitation", |f| {
        let schema = json!({"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]});
        let config = f.config("elicit").on_elicitation(|r: &copilot_host::events::ElicitationRequestedData| {
            assert_eq!(r.message, "Your name?");
            ElicitationResponse::Accept(json!({"name": "Ada"}))
        });
        let session = f.client.create_session(config).unwrap();
        let start = Instant::now();
        let answer = session
            .call_raw("session.ui.elicitation", json!({"message": "Your name?", "requestedSchema": schema}))
            .expect("session.ui.elicitation");
        let took = start.elapsed();
        assert_eq!(answer["action"], "accept", "{answer}");
        assert_eq!(answer["content"]["name"], "Ada", "{answer}");
        session.destroy().unwrap();

        // Without a handler, and with no client of the session that has
        // one (the CLI says so: `ui.elicitation` is false in the open's
        // answer), nobody else can answer: the table's refusal goes at
        // once, and the call ends with `cancel`. (A session joined by a
        // client with the handler leaves it to that client:
        // tests/multi_client.rs.)
        let bare = f.client.create_session(f.config("no-elicit")).unwrap();
        assert!(!bare.capabilities().ui.elicitation, "the CLI says no client answers elicitations");
        let before = f.client.engine_stats();
        let answer = bare
            .call_raw("session.ui.elicitation", json!({"message": "Your name?", "requestedSchema": schema}))
            .expect("session.ui.elicitation");
        assert_eq!(answer["action"], "cancel", "refused at once: {answer}");
        let after = f.client.engine_stats();
        assert_eq!(after.declined, before.declined, "not left to clients that do not exist");
        assert_eq!(after.refused(copilot_core::Cause::NoHandler), before.refused(copilot_core::Cause::NoHandler) + 1);
        bare.destroy().unwrap();
        took
    });
}

#[test]
fn slash_commands_run_on_the_client_and_report_errors() {
    on_both("slash command", |f| {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let config = f.config("cmd").command(Command::new("deploy", "Deploy somewhere.", {
            let seen = Arc::clone(&seen);
            move |c: &copilot_host::events::CommandExecuteData| {
                seen.lock().unwrap().push(c.args.clone());
                if c.args == "prod" {
                    Err("not on a Sunday".into())
                } else {
                    Ok(())
                }
            }
        }));
        let session = f.client.create_session(config).unwrap();
        let start = Instant::now();
        assert_eq!(session.execute_command("deploy", "staging").expect("execute"), None);
        let took = start.elapsed();
        assert_eq!(session.execute_command("deploy", "prod").expect("execute").as_deref(), Some("not on a Sunday"));
        assert_eq!(*seen.lock().unwrap(), ["staging", "prod"]);
        session.destroy().unwrap();
        took
    });
}
