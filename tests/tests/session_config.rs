//! The typed session config on the wire, and the answers whose shape it
//! decides (permission context and decline, tool failures, section
//! transforms, provider tokens), against the scriptable fake CLI.

use std::collections::BTreeMap;
use std::thread;
use std::time::{Duration, Instant};

use copilot_host::{
    Client, CustomAgentConfig, Error, InfiniteSessionConfig, McpServerConfig, PermissionDecision,
    PermissionDecisionContext, PermissionRequest, ProviderConfig, ProviderTokenRequest, ProviderType, ReasoningEffort,
    SectionAction, SessionConfig, SystemMessage, Tool, ToolInvocation, ToolResult,
};
use copilot_tests::fake_server::{FakeServer, FakeServerConfig};
use serde_json::{json, Value};

const WAIT: Duration = Duration::from_secs(20);

fn over_pipes() -> (FakeServer, Client) {
    let (server, from_server, to_server) = FakeServer::pipes(FakeServerConfig::default());
    let client = Client::from_streams(from_server, to_server, None).expect("handshake over pipes");
    (server, client)
}

fn params_of(server: &FakeServer, method: &str) -> Value {
    server.wait_received(WAIT, |m| m["method"] == method).expect("sent")["params"].clone()
}

/// Pushes a waiting event for `session`.
fn push_event(server: &FakeServer, session: &str, event_type: &str, data: Value) {
    let event = json!({
        "jsonrpc": "2.0",
        "method": "session.event",
        "params": { "sessionId": session, "event": { "type": event_type, "id": "w", "timestamp": "t", "data": data } }
    });
    server.send_raw(&event.to_string()).expect("push the event");
}

fn answer_for(server: &FakeServer, method: &str, request_id: &str) -> Value {
    server
        .wait_received(WAIT, |m| m["method"] == method && m["params"]["requestId"] == request_id)
        .unwrap_or_else(|| panic!("no {method} answer for {request_id}"))["params"]
        .clone()
}

#[test]
fn every_option_goes_on_the_wire_under_the_official_name_with_the_official_defaults() {
    let (server, client) = over_pipes();
    let bare = client.create_session(SessionConfig::default()).expect("create");
    let p = params_of(&server, "session.create");
    // What the official SDKs always send, and nothing else unset.
    let mut keys: Vec<&str> = p.as_object().unwrap().keys().map(String::as_str).collect();
    keys.sort_unstable();
    assert_eq!(
        keys,
        [
            "envValueMode",
            "includeSubAgentStreamingEvents",
            "requestAutoModeSwitch",
            "requestElicitation",
            "requestExitPlanMode",
            "requestPermission",
            "requestUserInput",
            "sessionId",
            "streaming",
            "toolFilterPrecedence"
        ]
    );
    assert_eq!(
        (&p["envValueMode"], &p["includeSubAgentStreamingEvents"], &p["toolFilterPrecedence"], &p["streaming"]),
        (&json!("direct"), &json!(true), &json!("excluded"), &json!(false))
    );

    let mut env = BTreeMap::new();
    env.insert("TOKEN".to_owned(), "mcp-secret".to_owned());
    let config = SessionConfig {
        model: Some("m".into()),
        reasoning_effort: Some(ReasoningEffort::XHigh),
        config_directory: Some("/cfg".into()),
        enable_experimental_mode: Some(true),
        system_message: Some(
            SystemMessage::customize()
                .section("tone", SectionAction::Replace, Some("Be terse.".into()))
                .section("safety", SectionAction::Remove, None)
                .transform("identity", |s: &str| s.to_uppercase()),
        ),
        available_tools: Some(vec!["builtin:*".into()]),
        excluded_tools: vec!["bash".into()],
        provider: Some(
            ProviderConfig::new(ProviderType::Anthropic, "https://llm.example")
                .api_key("sk-secret")
                .bearer_token_provider(|_: &ProviderTokenRequest| Some("tok".into())),
        ),
        mcp_servers: [(
            "local".to_owned(),
            McpServerConfig::Local {
                command: "node".into(),
                args: vec!["s.js".into()],
                env,
                working_directory: Some("/w".into()),
                tools: Some(vec!["*".into()]),
                timeout: None,
            },
        )]
        .into(),
        custom_agents: vec![CustomAgentConfig {
            tools: Some(vec!["view".into()]),
            ..CustomAgentConfig::new("reviewer", "Review code.")
        }],
        agent: Some("reviewer".into()),
        skill_directories: vec!["/skills".into()],
        disabled_skills: vec!["x".into()],
        infinite_sessions: Some(InfiniteSessionConfig { enabled: Some(false), ..Default::default() }),
        github_token: Some("gho-secret".into()),
        enable_mcp_apps: true,
        include_sub_agent_streaming_events: false,
        ..SessionConfig::default()
    }
    .tool(Tool::new("view", "Mine.", json!({"type": "object"}), |_: &ToolInvocation| "x").overrides_built_in_tool());
    let debug = format!("{config:?}");
    for secret in ["sk-secret", "mcp-secret", "gho-secret"] {
        assert!(!debug.contains(secret), "{secret} in {debug}");
    }
    let session = client.create_session(config).expect("create");
    let p = server
        .wait_received(WAIT, |m| m["method"] == "session.create" && m["params"]["sessionId"] == session.id())
        .unwrap()["params"]
        .clone();
    assert_eq!(p["reasoningEffort"], "xhigh");
    assert_eq!(p["configDir"], "/cfg");
    assert_eq!(p["isExperimentalMode"], true);
    assert_eq!(
        p["systemMessage"],
        json!({"mode": "customize", "sections": {
            "tone": {"action": "replace", "content": "Be terse."},
            "safety": {"action": "remove"},
            "identity": {"action": "transform"}}})
    );
    assert_eq!((&p["availableTools"], &p["excludedTools"]), (&json!(["builtin:*"]), &json!(["bash"])));
    assert_eq!(
        p["provider"],
        json!({"type": "anthropic", "baseUrl": "https://llm.example", "apiKey": "sk-secret",
            "hasBearerTokenProvider": true})
    );
    assert_eq!(
        p["mcpServers"]["local"],
        json!({"type": "local", "command": "node", "args": ["s.js"], "env": {"TOKEN": "mcp-secret"},
            "cwd": "/w", "tools": ["*"]})
    );
    assert_eq!(p["customAgents"], json!([{"name": "reviewer", "prompt": "Review code.", "tools": ["view"]}]));
    assert_eq!(p["agent"], "reviewer");
    assert_eq!((&p["skillDirectories"], &p["disabledSkills"]), (&json!(["/skills"]), &json!(["x"])));
    assert_eq!(p["infiniteSessions"], json!({"enabled": false}));
    assert_eq!(p["gitHubToken"], "gho-secret");
    assert_eq!(p["requestMcpApps"], true);
    assert_eq!(p["includeSubAgentStreamingEvents"], false);
    assert_eq!(
        p["tools"],
        json!([{"name": "view", "description": "Mine.", "parameters": {"type": "object"}, "overridesBuiltInTool": true}])
    );

    // Resume options go on resume only.
    let resume = SessionConfig { suppress_resume_event: true, continue_pending_work: true, ..SessionConfig::default() };
    let _resumed = client.resume_session(bare.id(), resume).expect("resume");
    let p = params_of(&server, "session.resume");
    assert_eq!((&p["disableResume"], &p["continuePendingWork"]), (&json!(true), &json!(true)));
}

#[test]
fn a_permission_decision_carries_its_context_and_no_result_is_declined_with_nothing_sent() {
    let (server, client) = over_pipes();
    let config = SessionConfig::default().on_permission(|r: &PermissionRequest| match r.tool_call_id.as_deref() {
        Some("leave") => PermissionDecision::NoResult,
        _ => {
            PermissionDecision::ApproveOnce.with_context(PermissionDecisionContext::new("auto_approved", "host_policy"))
        }
    });
    let session = client.create_session(config).expect("create");
    let method = "session.permissions.handlePendingPermissionRequest";
    push_event(
        &server,
        session.id(),
        "permission.requested",
        json!({"requestId": "p-leave", "permissionRequest": {"kind": "shell", "toolCallId": "leave"}}),
    );
    // The decline is counted once the handler has returned.
    let deadline = Instant::now() + WAIT;
    while client.engine_stats().declined == 0 {
        assert!(Instant::now() < deadline, "the decline was not counted");
        thread::sleep(Duration::from_millis(5));
    }
    push_event(
        &server,
        session.id(),
        "permission.requested",
        json!({"requestId": "p-ok", "permissionRequest": {"kind": "shell", "toolCallId": "ok"}}),
    );
    let a = answer_for(&server, method, "p-ok");
    assert_eq!(a["result"], json!({"kind": "approve-once"}));
    assert_eq!(a["decisionContext"], json!({"outcome": "auto_approved", "source": "host_policy", "surface": "sdk"}));
    let to_leave = server.received().into_iter().filter(|m| m["params"]["requestId"] == "p-leave").count();
    assert_eq!(to_leave, 0, "nothing is sent for a declined prompt");
    let s = client.engine_stats();
    assert_eq!((s.declined, s.answered, s.open_obligations), (1, 1, 0));
}

#[test]
fn a_failing_tool_sends_its_error_in_place_of_a_result_and_a_typed_failure_is_read() {
    let (server, client) = over_pipes();
    let failing = Tool::new("failing", "Fails.", json!({}), |_: &ToolInvocation| -> Result<String, String> {
        Err("db password wrong: hunter2".into())
    });
    let typed = Tool::new("typed", "Fails kindly.", json!({}), |_: &ToolInvocation| {
        ToolResult::failure("No such city; try another.")
    });
    let session = client.create_session(SessionConfig::default().tool(failing).tool(typed)).expect("create");
    let method = "session.tools.handlePendingToolCall";
    for (id, name) in [("t1", "failing"), ("t2", "typed")] {
        push_event(
            &server,
            session.id(),
            "external_tool.requested",
            json!({"requestId": id, "sessionId": session.id(), "toolCallId": id, "toolName": name}),
        );
    }
    // As the official SDKs send it: `{requestId, error}`, no result (the
    // CLI tells the model only that the tool failed).
    let a = answer_for(&server, method, "t1");
    assert_eq!(a["error"], "db password wrong: hunter2");
    assert!(a.get("result").is_none(), "{a}");
    let a = answer_for(&server, method, "t2");
    assert_eq!(a["result"], json!({"textResultForLlm": "No such city; try another.", "resultType": "failure"}));
}

/// `command.queued` without a handler: nothing is sent (the official SDK
/// leaves the queue to the app, and another client of the session may
/// answer it); the wait is counted as left. A wait with a handler sent
/// after it is answered, so the queued command was decided first.
#[test]
fn a_queued_command_without_a_handler_gets_nothing() {
    let (server, client) = over_pipes();
    let session = client
        .create_session(SessionConfig::default().on_permission_shared(copilot_host::approve_all()))
        .expect("create");
    push_event(&server, session.id(), "command.queued", json!({"requestId": "q1", "command": "/compact"}));
    push_event(
        &server,
        session.id(),
        "permission.requested",
        json!({"requestId": "p1", "permissionRequest": {"kind": "shell"}}),
    );
    answer_for(&server, "session.permissions.handlePendingPermissionRequest", "p1");
    let deadline = Instant::now() + WAIT;
    while client.engine_stats().declined == 0 {
        assert!(Instant::now() < deadline, "the queued command was not left");
        thread::sleep(Duration::from_millis(5));
    }
    let sent = server.received().into_iter().filter(|m| m["params"]["requestId"] == "q1").count();
    assert_eq!(sent, 0, "nothing is sent for a queued command without a handler");
    let s = client.engine_stats();
    assert_eq!((s.declined, s.left_open, s.open_obligations, s.refused.iter().sum::<u64>()), (1, 1, 0, 0));
}

#[test]
fn section_transforms_and_provider_tokens_answer_the_cli_requests() {
    let (server, client) = over_pipes();
    let config = SessionConfig {
        system_message: Some(
            SystemMessage::customize()
                .transform("identity", |s: &str| format!("{s} (transformed)"))
                .transform("tone", |_: &str| -> String { panic!("a transform that fails") }),
        ),
        provider: Some(ProviderConfig::new(ProviderType::OpenAi, "http://x").bearer_token_provider(
            |r: &ProviderTokenRequest| (r.provider_name == "default").then(|| "fresh-token".to_owned()),
        )),
        ..SessionConfig::default()
    };
    let session = client.create_session(config).expect("create");
    let bare = client.create_session(SessionConfig::default()).expect("create");
    let sections =
        json!({"identity": {"content": "I am X."}, "tone": {"content": "Calm."}, "safety": {"content": "S."}});
    let a = server
        .request_blocking(
            "systemMessage.transform",
            json!({"sessionId": session.id(), "sections": sections}),
            json!(1),
            WAIT,
        )
        .expect("answered");
    assert_eq!(
        a["result"],
        json!({"sections": {"identity": {"content": "I am X. (transformed)"}, "tone": {"content": "Calm."},
            "safety": {"content": "S."}}}),
        "a section without a transform, or whose transform fails, keeps its text"
    );
    let a = server
        .request_blocking(
            "systemMessage.transform",
            json!({"sessionId": bare.id(), "sections": sections}),
            json!(2),
            WAIT,
        )
        .expect("answered");
    assert!(a["error"].is_object(), "no transforms: the refusal keeps the original text: {a}");

    let a = server
        .request_blocking(
            "providerToken.getToken",
            json!({"sessionId": session.id(), "providerName": "default"}),
            json!(3),
            WAIT,
        )
        .expect("answered");
    assert_eq!(a["result"], json!({"token": "fresh-token"}));
    let a = server
        .request_blocking(
            "providerToken.getToken",
            json!({"sessionId": bare.id(), "providerName": "default"}),
            json!(4),
            WAIT,
        )
        .expect("answered");
    assert!(a["error"].is_object(), "no provider callback: refused: {a}");
}

#[test]
fn options_nested_deeper_than_the_core_reads_are_a_config_error_and_nothing_is_sent() {
    let (server, client) = over_pipes();
    let mut deep = json!(1);
    for _ in 0..200 {
        deep = json!([deep]);
    }
    let config = SessionConfig { managed_settings: Some(json!({ "x": deep })), ..SessionConfig::default() };
    match client.create_session(config) {
        Err(Error::Config(m)) => assert!(m.contains("128"), "{m}"),
        other => panic!("a config error, not {other:?}"),
    }
    // The client goes on; the refused create never reached the CLI.
    let session = client.create_session(SessionConfig::default()).expect("create");
    let creates = server.received().into_iter().filter(|m| m["method"] == "session.create").collect::<Vec<_>>();
    assert_eq!(creates.len(), 1);
    assert_eq!(creates[0]["params"]["sessionId"], session.id());
}
