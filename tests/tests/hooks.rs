//! Session hooks through the real Copilot CLI 1.0.102 and the scripted
//! model: a pre-tool-use hook that denies a tool (it does not run; the model
//! reads the denial), a post-tool-use hook that sees and replaces a tool's
//! result, a user-prompt-submitted hook that changes the prompt the model
//! gets, and session start and end hooks that fire once each. Without hooks
//! the client does not ask the CLI for them and none is called.

use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use copilot_host::{
    approve_all, Client, EventKind, HookType, PostToolUseFailureOutput, PostToolUseOutput, PreToolUseOutput, Session,
    SessionConfig, SessionHooks, Tool, ToolInvocation, ToolResult, Transport, UserPromptSubmittedOutput,
};
use copilot_testkit::scripted_model::{Reply, ScriptedModel};
use copilot_tests::real_cli::{scripted_options, scripted_session, TempDir};
use serde_json::{json, Value};

const TURN: Duration = Duration::from_secs(90);

struct Fixture {
    client: Client,
    model: ScriptedModel,
    dir: TempDir,
}

fn start() -> Fixture {
    let dir = TempDir::new("copilot-hooks");
    let model = ScriptedModel::start().expect("start the scripted model");
    let client = Client::start(scripted_options(Transport::Stdio, dir.path(), &model)).expect("start the CLI");
    Fixture { client, model, dir }
}

impl Fixture {
    fn config(&self, name: &str) -> SessionConfig {
        scripted_session(self.dir.path(), name)
    }
}

fn turn(session: &Session, prompt: &str) -> Option<String> {
    let reply = session.send_and_wait(prompt, TURN).unwrap_or_else(|e| panic!("turn failed: {e}"));
    reply.and_then(|e| match &e.kind {
        EventKind::AssistantMessage(m) => Some(m.content.clone()),
        _ => None,
    })
}

/// Every hook call, in order: its type and input.
type Calls = Arc<Mutex<Vec<(HookType, Value)>>>;

/// A hook for every type that records its call and gives no output.
fn recording(calls: &Calls) -> SessionHooks {
    HookType::ALL.into_iter().fold(SessionHooks::new(), |hooks, t| {
        let calls = Arc::clone(calls);
        hooks.on_hook(t, move |input, inv| {
            calls.lock().unwrap().push((inv.hook_type, input.clone()));
            None
        })
    })
}

fn types(calls: &Calls) -> Vec<HookType> {
    calls.lock().unwrap().iter().map(|(t, _)| *t).collect()
}

#[test]
fn hooks_deny_tools_see_results_change_prompts_and_bracket_the_session() {
    let f = start();

    // A pre-tool-use hook denies the shell: the command does not run, and
    // the model reads the hook's reason as the tool's result.
    let seen = Arc::new(Mutex::new(Vec::new()));
    let hooks = SessionHooks::new().on_pre_tool_use({
        let seen = Arc::clone(&seen);
        move |input, inv| {
            assert_eq!(input.session_id.as_deref(), Some(inv.session_id.as_str()), "a session's own hook");
            seen.lock().unwrap().push((input.tool_name.clone(), input.tool_args.clone()));
            (input.tool_name == "bash").then(|| PreToolUseOutput::deny("shell is off in this test"))
        }
    });
    let config = f.config("deny").on_permission_shared(approve_all()).hooks(hooks);
    let dir = config.working_directory.clone().unwrap();
    let session = f.client.create_session(config).unwrap();
    let command = "echo proof > proof.txt";
    f.model.script(
        session.id(),
        vec![
            Reply::tool_call("bash", json!({"command": command, "description": "Write a proof file"})),
            Reply::text("The shell was denied."),
        ],
    );
    assert_eq!(turn(&session, "Write the proof.").as_deref(), Some("The shell was denied."));
    assert!(!dir.join("proof.txt").exists(), "a denied command must not run");
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert_eq!(seen[0].0, "bash");
    assert_eq!(seen[0].1["command"], command);
    let results = f.model.requests_for(session.id())[1].tool_results();
    assert_eq!(results.len(), 1);
    assert!(results[0].contains("shell is off in this test"), "the model reads the denial: {results:?}");
    session.destroy().unwrap();

    // A post-tool-use hook sees the tool's result and replaces it.
    let results_seen = Arc::new(Mutex::new(Vec::new()));
    let hooks = SessionHooks::new().on_post_tool_use({
        let results_seen = Arc::clone(&results_seen);
        move |input, _| {
            results_seen.lock().unwrap().push((input.tool_name.clone(), input.tool_result.clone()));
            Some(PostToolUseOutput {
                modified_result: Some(
                    json!({"textResultForLlm": "Rainy (checked by the hook)", "resultType": "success"}),
                ),
                ..PostToolUseOutput::default()
            })
        }
    });
    let weather =
        Tool::new("get_weather", "Get the weather.", json!({"type": "object"}), |_: &ToolInvocation| "Sunny, 22 C")
            .skip_permission();
    let session = f.client.create_session(f.config("post").tool(weather).hooks(hooks)).unwrap();
    f.model.script(
        session.id(),
        vec![Reply::tool_call("get_weather", json!({"city": "Paris"})), Reply::text("It rains, says the hook.")],
    );
    assert_eq!(turn(&session, "Weather?").as_deref(), Some("It rains, says the hook."));
    let results_seen = results_seen.lock().unwrap().clone();
    assert_eq!(results_seen.len(), 1, "{results_seen:?}");
    assert_eq!(results_seen[0].0, "get_weather");
    assert_eq!(results_seen[0].1["textResultForLlm"], "Sunny, 22 C", "the hook sees the tool's result");
    assert_eq!(f.model.requests_for(session.id())[1].tool_results(), ["Rainy (checked by the hook)"]);
    session.destroy().unwrap();

    // A user-prompt-submitted hook changes the prompt the model gets.
    let prompts = Arc::new(Mutex::new(Vec::new()));
    let hooks = SessionHooks::new().on_user_prompt_submitted({
        let prompts = Arc::clone(&prompts);
        move |input, _| {
            prompts.lock().unwrap().push(input.prompt.clone());
            Some(UserPromptSubmittedOutput {
                modified_prompt: Some("What is 3 + 3? (rewritten)".into()),
                ..UserPromptSubmittedOutput::default()
            })
        }
    });
    let session = f.client.create_session(f.config("prompt").hooks(hooks)).unwrap();
    f.model.script(session.id(), vec![Reply::text("6")]);
    assert_eq!(turn(&session, "What is 2 + 2?").as_deref(), Some("6"));
    assert_eq!(*prompts.lock().unwrap(), ["What is 2 + 2?"]);
    let sent = f.model.requests_for(session.id())[0].last_user_text().unwrap();
    assert!(sent.contains("What is 3 + 3? (rewritten)"), "{sent}");
    assert!(!sent.contains("2 + 2"), "{sent}");
    session.destroy().unwrap();

    // Session start and end: once each, the end by the time destroy returns.
    let calls: Calls = Arc::default();
    let session = f.client.create_session(f.config("bracket").hooks(recording(&calls))).unwrap();
    f.model.script(session.id(), vec![Reply::text("one"), Reply::text("two")]);
    assert_eq!(turn(&session, "First.").as_deref(), Some("one"));
    assert_eq!(turn(&session, "Second.").as_deref(), Some("two"));
    session.destroy().unwrap();
    let got = types(&calls);
    eprintln!("hook calls of two plain turns and a destroy: {got:?}");
    let count = |t: HookType| got.iter().filter(|g| **g == t).count();
    assert_eq!(count(HookType::SessionStart), 1, "{got:?}");
    assert_eq!(count(HookType::SessionEnd), 1, "{got:?}");
    assert_eq!(got.first(), Some(&HookType::SessionStart), "{got:?}");
    assert_eq!(got.last(), Some(&HookType::SessionEnd), "{got:?}");
    assert_eq!(count(HookType::UserPromptSubmitted), 2, "{got:?}");
    let start = &calls.lock().unwrap()[0].1;
    assert!(start["cwd"].as_str().is_some_and(|c| c.ends_with("bracket")), "{start}");

    // A tool that fails: the failure hook sees its message and adds
    // context the model reads beside the failed result.
    let calls: Calls = Arc::default();
    let failures = Arc::new(Mutex::new(Vec::new()));
    let hooks = recording(&calls).on_post_tool_use_failure({
        let failures = Arc::clone(&failures);
        move |input, _| {
            failures.lock().unwrap().push((input.tool_name.clone(), input.error.clone()));
            Some(PostToolUseFailureOutput { additional_context: Some("The station is known to be flaky.".into()) })
        }
    });
    let station = Tool::new("get_weather", "Get the weather.", json!({"type": "object"}), |_: &ToolInvocation| {
        ToolResult::Failure("the station is offline".into())
    });
    let config = f.config("failure").tool(station).on_permission_shared(approve_all()).hooks(hooks);
    let session = f.client.create_session(config).unwrap();
    f.model.script(
        session.id(),
        vec![Reply::tool_call("get_weather", json!({"city": "Oslo"})), Reply::text("The station failed.")],
    );
    assert_eq!(turn(&session, "Weather?").as_deref(), Some("The station failed."));
    let id = session.id().to_owned();
    session.destroy().unwrap();
    let failures = failures.lock().unwrap().clone();
    assert_eq!(failures.len(), 1, "{failures:?}");
    assert_eq!(failures[0].0, "get_weather");
    assert!(failures[0].1.contains("the station is offline"), "{failures:?}");
    let sent = f.model.requests_for(&id)[1].body.to_string();
    assert!(sent.contains("The station is known to be flaky."), "the model reads the hook's context: {sent}");
    eprintln!("hook calls of a failing tool turn: {:?}", types(&calls));

    // A sub-agent (the built-in `task` tool): its start and stop hooks run
    // on the session that set them, read as JSON; the sub-agent's own hooks
    // name its own session.
    let calls: Calls = Arc::default();
    let stops = Arc::new(Mutex::new(Vec::new()));
    let hooks = recording(&calls).on_agent_stop({
        let stops = Arc::clone(&stops);
        move |input, inv| {
            stops.lock().unwrap().push((input.session_id.clone(), inv.session_id.clone(), input.stop_hook_active));
            None
        }
    });
    let config = f.config("subagent").on_permission_shared(approve_all()).hooks(hooks);
    let session = f.client.create_session(config).unwrap();
    let task = json!({"name": "probe", "description": "Probe", "prompt": "Say done.", "agent_type": "explore"});
    // The sub-agent calls the model under its parent's session id: the
    // second reply is its.
    f.model.script(
        session.id(),
        vec![Reply::tool_call("task", task), Reply::text("Sub-agent done."), Reply::text("All done.")],
    );
    assert_eq!(turn(&session, "Delegate.").as_deref(), Some("All done."));
    let id = session.id().to_owned();
    session.destroy().unwrap();
    let got = calls.lock().unwrap().clone();
    let of = |t: HookType| got.iter().filter(|(g, _)| *g == t).map(|(_, i)| i.clone()).collect::<Vec<_>>();
    let (starts, ends) = (of(HookType::SubagentStart), of(HookType::SubagentStop));
    assert_eq!((starts.len(), ends.len()), (1, 1), "{got:?}");
    assert_eq!(starts[0]["agentType"], "explore");
    assert_eq!(ends[0]["response"], "Sub-agent done.");
    let sub = starts[0]["agentId"].as_str().expect("the sub-agent's id").to_owned();
    let stops = stops.lock().unwrap().clone();
    assert_eq!(
        stops,
        [(Some(sub), id.clone(), Some(false)), (Some(id.clone()), id, Some(false))],
        "the sub-agent stops, then the main agent"
    );

    // No hooks: the CLI is not asked for them, and the model turn runs as is.
    let session = f.client.create_session(f.config("none")).unwrap();
    f.model.script(session.id(), vec![Reply::text("plain")]);
    assert_eq!(turn(&session, "Plain?").as_deref(), Some("plain"));
    session.destroy().unwrap();
    assert_eq!(f.client.engine_stats().open_obligations, 0);
    f.client.stop().unwrap();
}

/// One typed hook call: its type, the input's working directory and time,
/// and the member that says what it is about.
type Typed = Arc<Mutex<Vec<(HookType, Option<String>, Option<SystemTime>, String)>>>;

#[test]
fn every_hook_the_cli_fires_gets_its_input_typed_and_named_as_the_official_sdks_name_it() {
    let f = start();
    let calls: Typed = Arc::default();
    let push = |calls: &Typed, t: HookType, dir: &Option<String>, at: Option<SystemTime>, what: String| {
        calls.lock().unwrap().push((t, dir.clone(), at, what));
    };
    let hooks = SessionHooks::new()
        .on_session_start({
            let c = Arc::clone(&calls);
            move |i, _| {
                push(&c, HookType::SessionStart, &i.working_directory, i.timestamp, i.source.clone());
                None
            }
        })
        .on_user_prompt_submitted({
            let c = Arc::clone(&calls);
            move |i, _| {
                push(&c, HookType::UserPromptSubmitted, &i.working_directory, i.timestamp, i.prompt.clone());
                None
            }
        })
        .on_pre_tool_use({
            let c = Arc::clone(&calls);
            move |i, _| {
                push(&c, HookType::PreToolUse, &i.working_directory, i.timestamp, i.tool_args["city"].to_string());
                None
            }
        })
        .on_post_tool_use({
            let c = Arc::clone(&calls);
            move |i, _| {
                let result = i.tool_result["textResultForLlm"].to_string();
                push(&c, HookType::PostToolUse, &i.working_directory, i.timestamp, result);
                None
            }
        })
        .on_agent_stop({
            let c = Arc::clone(&calls);
            move |i, _| {
                push(&c, HookType::AgentStop, &i.working_directory, i.timestamp, format!("{:?}", i.stop_hook_active));
                None
            }
        })
        .on_session_end({
            let c = Arc::clone(&calls);
            move |i, _| {
                push(&c, HookType::SessionEnd, &i.working_directory, i.timestamp, i.reason.clone());
                None
            }
        });
    let weather =
        Tool::new("get_weather", "Get the weather.", json!({"type": "object"}), |_: &ToolInvocation| "Sunny, 22 C")
            .skip_permission();
    // Whole milliseconds: the CLI's clock reads in them.
    let first =
        UNIX_EPOCH + Duration::from_millis(SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_millis() as u64);
    let session = f.client.create_session(f.config("typed").tool(weather).hooks(hooks)).unwrap();
    f.model
        .script(session.id(), vec![Reply::tool_call("get_weather", json!({"city": "Paris"})), Reply::text("Sunny.")]);
    assert_eq!(turn(&session, "Weather?").as_deref(), Some("Sunny."));
    session.destroy().unwrap();
    let last = SystemTime::now();

    let calls = calls.lock().unwrap().clone();
    let fired: Vec<HookType> = calls.iter().map(|c| c.0).collect();
    for t in [
        HookType::SessionStart,
        HookType::UserPromptSubmitted,
        HookType::PreToolUse,
        HookType::PostToolUse,
        HookType::AgentStop,
        HookType::SessionEnd,
    ] {
        assert!(fired.contains(&t), "{t:?} fired: {fired:?}");
    }
    for (t, dir, at, _) in &calls {
        assert!(dir.as_deref().is_some_and(|d| d.ends_with("typed")), "{t:?}: {dir:?}");
        let at = at.unwrap_or_else(|| panic!("{t:?} has its time"));
        assert!(first <= at && at <= last, "{t:?} at {at:?}, between {first:?} and {last:?}");
    }
    let what = |t: HookType| calls.iter().find(|c| c.0 == t).map(|c| c.3.clone()).unwrap();
    assert_eq!(what(HookType::UserPromptSubmitted), "Weather?");
    assert_eq!(what(HookType::PreToolUse), "\"Paris\"");
    assert_eq!(what(HookType::PostToolUse), "\"Sunny, 22 C\"");
    assert!(what(HookType::AgentStop).starts_with("Some("), "stop_hook_active is read: {}", what(HookType::AgentStop));
}
