//! The client's `empty` mode and `largeOutput` against the real Copilot CLI
//! 1.0.102 on the scripted model (the core's `ClientMode`; the same
//! scenario in JS is wasm/npm/test/empty-mode.test.mjs, and
//! tests/tests/same_bytes.rs holds what the two send to be the same bytes):
//!
//! - an empty-mode client refuses to start a CLI without a state folder of
//!   its own, and to open a session that names no tools, each before
//!   anything is sent (no CLI started; no session in the CLI); so does any
//!   client a tool filter with a bare `*` (which matches no tool: the CLI
//!   offers such a session no tool at all); a client of a CLI it did not
//!   start needs no state folder (on the fake CLI);
//! - an empty-mode session's defaults reach the CLI, which accepts them:
//!   the model's system prompt has no `environment_context` (the create's
//!   system message), no custom instructions and no commit trailer (the
//!   `session.options.update` after the open), and a turn with a call of
//!   the session's own tool completes; the same options set by the user
//!   win (the prompt has each of them);
//! - a `ToolSet` of the isolated built-in tools and the session's own tool
//!   offers the model exactly those the CLI has of them (no `bash`, no
//!   file tools); the same set with `excluded_tools` takes one away;
//! - `largeOutput`: a tool result over `maxSizeBytes` is written to a file
//!   in `outputDirectory` (`outputDir` on the wire), and the model is given
//!   a reference to it.

use std::time::Duration;

use copilot_host::{
    Client, ClientMode, ClientOptions, Error, EventKind, LargeToolOutputConfig, SectionAction, SessionConfig,
    SystemMessage, Tool, ToolInvocation, ToolSet, Transport, BUILTIN_TOOLS_ISOLATED,
};
use copilot_testkit::scripted_model::{Reply, ScriptedModel};
use copilot_tests::fake_server::{FakeServer, FakeServerConfig};
use copilot_tests::real_cli::{scripted_options, scripted_session, TempDir};
use serde_json::json;

const TURN: Duration = Duration::from_secs(90);
/// A line of the working folder's `AGENTS.md`: in the system prompt only
/// when custom instructions are loaded.
const INSTRUCTIONS: &str = "Always answer in the voice of MARKER-AGENTS-7.";

fn weather() -> Tool {
    Tool::new("get_weather", "Get the weather.", json!({"type": "object"}), |_: &ToolInvocation| "Sunny")
        .skip_permission()
}

/// Starts the real CLI in empty mode, its state folder `dir/home`.
fn empty_client(dir: &std::path::Path, model: &ScriptedModel) -> Client {
    let mut options = scripted_options(Transport::Stdio, dir, model);
    options.mode = ClientMode::Empty;
    options.base_directory = Some(dir.join("home"));
    Client::start(options).expect("start the CLI in empty mode")
}

/// A session on the scripted model whose working folder has an `AGENTS.md`.
fn session_with_instructions(dir: &std::path::Path, name: &str) -> SessionConfig {
    let config = scripted_session(dir, name);
    let work = config.working_directory.clone().expect("a working folder");
    std::fs::write(work.join("AGENTS.md"), format!("# Instructions\n\n{INSTRUCTIONS}\n")).unwrap();
    config
}

#[test]
fn empty_mode_refuses_a_client_without_a_state_folder_and_a_session_without_tools() {
    let dir = TempDir::new("copilot-empty-refusals");
    let model = ScriptedModel::start().expect("start the scripted model");
    let mut options = scripted_options(Transport::Stdio, dir.path(), &model);
    options.mode = ClientMode::Empty;
    let Err(Error::Config(refusal)) = Client::start(options) else { panic!("a client without base_directory") };
    assert_eq!(refusal, copilot_host::core::EMPTY_MODE_NEEDS_BASE_DIRECTORY);
    assert_eq!(model.connect_attempts(), 0, "no CLI was started");

    let client = empty_client(dir.path(), &model);
    let Err(Error::Config(refusal)) = client.create_session(scripted_session(dir.path(), "no-tools")) else {
        panic!("a session without available_tools is refused");
    };
    assert_eq!(refusal, copilot_host::core::EMPTY_MODE_NEEDS_AVAILABLE_TOOLS);
    assert!(refusal.contains("availableTools"), "{refusal}");
    let bare = |available: &str, excluded: &str| SessionConfig {
        available_tools: Some(vec![available.into()]),
        excluded_tools: vec![excluded.into()],
        ..scripted_session(dir.path(), "bare")
    };
    for (config, option) in [(bare("*", "bash"), "availableTools"), (bare("custom:*", "*"), "excludedTools")] {
        let Err(Error::Config(refusal)) = client.create_session(config) else { panic!("a bare * is refused") };
        assert_eq!(refusal, format!("{option}{}", copilot_host::core::BARE_TOOL_WILDCARD_REFUSAL));
    }
    assert_eq!(client.list_sessions().unwrap().len(), 0, "nothing was sent: the CLI has no session");
    client.stop().unwrap();
}

#[test]
fn an_empty_mode_session_runs_a_turn_with_the_defaults_and_the_users_values_win() {
    let dir = TempDir::new("copilot-empty-mode");
    let model = ScriptedModel::start().expect("start the scripted model");
    let client = empty_client(dir.path(), &model);

    let defaults = SessionConfig {
        available_tools: Some(vec!["custom:*".into()]),
        ..session_with_instructions(dir.path(), "defaults").tool(weather())
    };
    let session = client.create_session(defaults).expect("the CLI accepts the empty-mode session");
    model.script(session.id(), vec![Reply::tool_call("get_weather", json!({})), Reply::text("Sunny.")]);
    let reply = session.send_and_wait("Weather?", TURN).expect("the turn");
    assert!(matches!(reply.as_ref().map(|e| &e.kind), Some(EventKind::AssistantMessage(m)) if m.content == "Sunny."));
    let requests = model.requests_for(session.id());
    assert_eq!(requests.len(), 2, "the tool call and the answer");
    let prompt = requests[0].system_prompt();
    eprintln!("empty-mode system prompt: {} bytes; tools {:?}", prompt.len(), requests[0].tool_names());
    assert!(!prompt.contains("<environment_context>"), "the environment is removed");
    assert!(!prompt.contains("MARKER-AGENTS-7"), "custom instructions are skipped");
    assert!(!prompt.contains("Co-authored-by"), "no commit trailer");
    assert_eq!(requests[0].tool_names(), ["get_weather"], "only the session's own tool");
    assert_eq!(requests[1].tool_results(), ["Sunny"]);
    // What the CLI answers the patch (the client sent one like it after the open).
    let answer = session.call_raw("session.options.update", json!({"coauthorEnabled": false})).unwrap();
    eprintln!("session.options.update answers {answer}");
    assert_eq!(answer["success"], true);
    session.destroy().unwrap();

    // The user's values win over the mode's defaults.
    let users = SessionConfig {
        available_tools: Some(vec!["custom:*".into()]),
        skip_custom_instructions: Some(false),
        coauthor_enabled: Some(true),
        system_message: Some(SystemMessage::customize().section(
            "environment_context",
            SectionAction::Append,
            Some("ENV-NOTE-3".into()),
        )),
        ..session_with_instructions(dir.path(), "users").tool(weather())
    };
    let session = client.create_session(users).unwrap();
    model.script(session.id(), vec![Reply::text("Hello.")]);
    session.send_and_wait("Hi", TURN).expect("the turn");
    let prompt = model.requests_for(session.id())[0].system_prompt();
    assert!(prompt.contains("<environment_context>") && prompt.contains("ENV-NOTE-3"), "the app's environment section");
    assert!(prompt.contains("MARKER-AGENTS-7"), "custom instructions are loaded");
    assert!(prompt.contains("Co-authored-by"), "the commit trailer is on");
    session.destroy().unwrap();
    client.stop().unwrap();
}

#[test]
fn a_tool_set_offers_the_model_the_isolated_built_ins_and_the_sessions_own_tool() {
    let dir = TempDir::new("copilot-tool-set");
    let model = ScriptedModel::start().expect("start the scripted model");
    let client = empty_client(dir.path(), &model);
    let isolated = ToolSet::new().add_builtin_many(BUILTIN_TOOLS_ISOLATED).unwrap();
    let mut offered = Vec::new();
    for excluded in [None, Some("task")] {
        let config = SessionConfig {
            available_tools: Some(isolated.clone().add_custom("get_weather").unwrap().into()),
            excluded_tools: excluded.map(|t| ToolSet::new().add_builtin(t).unwrap().into()).unwrap_or_default(),
            ..scripted_session(dir.path(), "tool-set").tool(weather())
        };
        let session = client.create_session(config).expect("the CLI accepts the tool set");
        model.script(session.id(), vec![Reply::text("Hello.")]);
        session.send_and_wait("Hi", TURN).expect("the turn");
        let mut tools = model.requests_for(session.id())[0].tool_names();
        tools.sort();
        eprintln!("tools offered with {excluded:?} excluded: {tools:?}");
        assert!(tools.iter().any(|t| t == "get_weather"), "the session's own tool: {tools:?}");
        assert!(tools.iter().all(|t| t == "get_weather" || BUILTIN_TOOLS_ISOLATED.contains(&t.as_str())), "{tools:?}");
        assert!(tools.len() > 1, "some isolated built-in tools are offered: {tools:?}");
        session.destroy().unwrap();
        offered.push(tools);
    }
    assert!(offered[0].iter().any(|t| t == "task"), "{:?}", offered[0]);
    let mut without = offered[0].clone();
    without.retain(|t| t != "task");
    assert_eq!(offered[1], without, "builtin:task excluded");
    client.stop().unwrap();
}

#[test]
fn a_tool_result_over_max_size_is_written_to_the_output_directory() {
    let dir = TempDir::new("copilot-large-output");
    let model = ScriptedModel::start().expect("start the scripted model");
    let client = Client::start(scripted_options(Transport::Stdio, dir.path(), &model)).expect("start the CLI");
    let out = dir.path().join("large");
    std::fs::create_dir_all(&out).unwrap();
    let big = "0123456789".repeat(500);
    let tool = Tool::new("big_report", "A long report.", json!({"type": "object"}), {
        let big = big.clone();
        move |_: &ToolInvocation| big.clone()
    })
    .skip_permission();
    let config = SessionConfig {
        large_output: Some(LargeToolOutputConfig {
            enabled: Some(true),
            max_size_bytes: Some(1000),
            output_directory: Some(out.clone()),
        }),
        ..scripted_session(dir.path(), "large").tool(tool)
    };
    let session = client.create_session(config).unwrap();
    model.script(session.id(), vec![Reply::tool_call("big_report", json!({})), Reply::text("Done.")]);
    session.send_and_wait("Report?", TURN).expect("the turn");
    let results = model.requests_for(session.id())[1].tool_results();
    let files: Vec<_> = std::fs::read_dir(&out).unwrap().map(|e| e.unwrap().path()).collect();
    eprintln!("tool result given to the model: {results:?}\nfiles: {files:?}");
    assert_eq!(files.len(), 1, "the output went to a file in the output directory");
    assert_eq!(std::fs::read_to_string(&files[0]).unwrap(), big);
    assert!(results[0].len() < big.len() && results[0].contains(&files[0].display().to_string()), "{results:?}");
    session.destroy().unwrap();
    client.stop().unwrap();
}

/// A client that connects to a CLI it did not start leaves its state
/// folder to the CLI's owner, as the official SDKs do: empty mode still
/// applies to its sessions.
#[test]
fn an_empty_mode_client_of_a_running_cli_needs_no_state_folder() {
    let (server, from_server, to_server) = FakeServer::pipes(FakeServerConfig::default());
    let options = ClientOptions { mode: ClientMode::Empty, ..ClientOptions::default() };
    let client = Client::from_streams_with(from_server, to_server, None, &options).expect("no base_directory needed");
    assert_eq!(client.mode(), ClientMode::Empty);
    let refused = client.create_session(SessionConfig::default());
    assert!(matches!(refused, Err(Error::Config(ref e)) if e == copilot_host::core::EMPTY_MODE_NEEDS_AVAILABLE_TOOLS));
    let session = client.create_session(SessionConfig { available_tools: Some(vec![]), ..SessionConfig::default() });
    let session = session.expect("the session opens");
    let sent = server.received();
    let methods: Vec<&str> = sent.iter().filter_map(|m| m["method"].as_str()).collect();
    assert_eq!(methods, ["connect", "session.create", "session.options.update"], "the refused session sent nothing");
    assert_eq!(sent[2]["params"]["sessionId"], session.id());
    client.stop().unwrap();
}
