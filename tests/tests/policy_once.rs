//! The Rust host sends what the core's policy writes, not a copy of its
//! own: the follow-up after an open with an MCP OAuth handler, the answer
//! to an elicitation accepted without content, a tool's structured result
//! (the core's answer shape), and the `connect` params.
//! Each is compared with the JSON the core writes for the same case, as
//! the fake CLI received it.

use std::time::Duration;

use copilot_host::core::{self as core_policy, ElicitationAction, HandlerKind};
use copilot_host::events::{ElicitationRequestedData, McpOauthRequiredData};
use copilot_host::{Client, ElicitationResponse, SessionConfig, Tool, ToolInvocation, ToolResult};
use copilot_tests::fake_server::{FakeServer, FakeServerConfig};
use serde_json::{json, Value};

const WAIT: Duration = Duration::from_secs(20);

/// JSON the core wrote, read for comparison.
fn written(bytes: &[u8]) -> Value {
    serde_json::from_slice(bytes).expect("the core writes JSON")
}

#[test]
fn the_follow_up_after_an_open_is_the_cores() {
    let (server, from_server, to_server) = FakeServer::pipes(FakeServerConfig::default());
    let client = Client::from_streams(from_server, to_server, None).expect("handshake");
    let config = SessionConfig::default().on_mcp_oauth(|_: &McpOauthRequiredData| None);
    let session = client.create_session(config).expect("create");

    let mut expected = Vec::new();
    core_policy::write_follow_ups(session.id(), |k| k == HandlerKind::McpOAuth, &mut |method, params| {
        expected.push(json!({ "method": method, "params": written(params) }))
    })
    .expect("a short id");
    assert!(!expected.is_empty(), "the core has a follow-up for an MCP OAuth handler");
    // Sent before create_session returned: everything after the create.
    let received = server.received();
    let create = received.iter().position(|m| m["method"] == "session.create").expect("a create");
    let sent: Vec<Value> = received[create + 1..]
        .iter()
        .filter(|m| m.get("method").is_some())
        .map(|m| json!({ "method": m["method"], "params": m["params"] }))
        .collect();
    assert_eq!(sent, expected);
}

#[test]
fn an_elicitation_accepted_without_content_is_answered_as_the_core_writes() {
    let (server, from_server, to_server) = FakeServer::pipes(FakeServerConfig::default());
    let client = Client::from_streams(from_server, to_server, None).expect("handshake");
    let config = SessionConfig::default()
        .on_elicitation(|_: &ElicitationRequestedData| ElicitationResponse::Accept(Value::Null));
    let session = client.create_session(config).expect("create");

    let event = json!({
        "jsonrpc": "2.0",
        "method": "session.event",
        "params": { "sessionId": session.id(), "event": {
            "type": "elicitation.requested", "id": "w1", "timestamp": "t",
            "data": { "requestId": "e1", "message": "Name?" } } }
    });
    server.send_raw(&event.to_string()).expect("push the event");
    let answer = server
        .wait_received(WAIT, |m| m["method"] == "session.ui.handlePendingElicitation")
        .expect("the elicitation is answered");

    let mut expected = Vec::new();
    core_policy::write_elicitation_answer(ElicitationAction::Accept, None, &mut |b| expected.extend_from_slice(b))
        .expect("no content is an answer");
    assert_eq!(answer["params"]["result"], written(&expected));
    assert_eq!(answer["params"]["result"]["content"], json!({}), "the schema's content, never null");
}

#[test]
fn the_connect_params_are_the_cores() {
    for token in [None, Some("t0k")] {
        let config = match token {
            Some(t) => FakeServerConfig::default().with_token(t),
            None => FakeServerConfig::default(),
        };
        let (server, addr) = FakeServer::tcp(config);
        let _client = Client::connect(addr, token).expect("handshake");
        let connect = server.received().into_iter().find(|m| m["method"] == "connect").expect("a connect");

        let mut expected = Vec::new();
        core_policy::write_connect_params(token, &mut |b| expected.extend_from_slice(b));
        assert_eq!(connect["params"], written(&expected), "token {token:?}");
    }
}

#[test]
fn a_tools_structured_result_is_answered_as_the_core_shapes_it() {
    let (server, from_server, to_server) = FakeServer::pipes(FakeServerConfig::default());
    let client = Client::from_streams(from_server, to_server, None).expect("handshake");
    // A result object without `resultType`, and a value that is no result object.
    let result = json!({ "textResultForLlm": "x", "sessionLog": "l" });
    let given = result.clone();
    let structured =
        Tool::new("structured", "", json!({}), move |_: &ToolInvocation| ToolResult::Structured(given.clone()));
    let other = Tool::new("other", "", json!({}), |_: &ToolInvocation| ToolResult::Structured(json!({ "a": 1 })));
    let session = client.create_session(SessionConfig::default().tool(structured).tool(other)).expect("create");

    for (n, (tool, given)) in [("structured", result), ("other", json!({ "a": 1 }))].into_iter().enumerate() {
        let request_id = format!("t{n}");
        let event = json!({
            "jsonrpc": "2.0",
            "method": "session.event",
            "params": { "sessionId": session.id(), "event": {
                "type": "external_tool.requested", "id": format!("w{n}"), "timestamp": "t",
                "data": { "requestId": request_id, "sessionId": session.id(), "toolCallId": "c",
                          "toolName": tool, "arguments": {} } } }
        });
        server.send_raw(&event.to_string()).expect("push the event");
        let answer = server
            .wait_received(WAIT, |m| m["params"]["requestId"] == request_id.as_str())
            .expect("the tool call is answered");

        let mut expected = Vec::new();
        let shape = core_policy::answer_shape(HandlerKind::Tool.name()).expect("a tool shape");
        core_policy::write_answer(shape, Some(given.to_string().as_bytes()), &mut |b| expected.extend_from_slice(b))
            .expect("an answer");
        assert_eq!(answer["params"]["result"], written(&expected), "{tool}");
        assert_eq!(answer["params"]["result"]["resultType"], "success", "{tool}: the shape's default");
    }
}
