//! An MCP server behind OAuth, against the real Copilot CLI 1.0.102 on the
//! scripted model (its server at `MCP_OAUTH_PATH`: `401` without the
//! token): the session's MCP OAuth handler is asked once, with the server's
//! name and URL, its token reaches the server, and the model is offered the
//! server's tool, which it is not without a handler. The same scenario in
//! JS is wasm/npm/test/mcp-oauth.test.mjs.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use copilot_host::events::{EventKind, McpOauthRequiredData};
use copilot_host::{Client, McpServerConfig, OAuthToken, SessionConfig, Transport};
use copilot_testkit::scripted_model::{Reply, ScriptedModel, MCP_OAUTH_PATH, MCP_OAUTH_TOKEN, MCP_OAUTH_TOOL};
use copilot_tests::real_cli::{scripted_options, scripted_session, TempDir};

const TURN: Duration = Duration::from_secs(90);
const SERVER: &str = "oauthsrv";

fn with_server(config: SessionConfig, model: &ScriptedModel) -> SessionConfig {
    let server = McpServerConfig::Http {
        url: format!("{}{MCP_OAUTH_PATH}", model.url()),
        sse: false,
        headers: BTreeMap::new(),
        tools: None,
        timeout: None,
    };
    SessionConfig { mcp_servers: BTreeMap::from([(SERVER.to_owned(), server)]), ..config }
}

#[test]
fn the_oauth_handler_is_asked_once_and_its_token_reaches_the_mcp_server() {
    let dir = TempDir::new("copilot-mcp-oauth");
    let model = ScriptedModel::start().expect("start the scripted model");
    let client = Client::start(scripted_options(Transport::Stdio, dir.path(), &model)).expect("start the CLI");
    let asked: Arc<Mutex<Vec<(String, String)>>> = Arc::default();
    let config = with_server(scripted_session(dir.path(), "oauth"), &model).on_mcp_oauth({
        let asked = asked.clone();
        move |data: &McpOauthRequiredData| {
            asked.lock().unwrap().push((data.server_name.clone(), data.server_url.clone()));
            Some(OAuthToken { access_token: MCP_OAUTH_TOKEN.into(), token_type: None, expires_in: None })
        }
    });
    let session = client.create_session(config).expect("the session");
    let events = session.events();
    model.script(session.id(), vec![Reply::text("Hello."), Reply::text("Again.")]);
    session.send_and_wait("Hi", TURN).expect("the turn");
    // The CLI connects the server beside the first turn, once the handler
    // has given the token: the second turn waits until the CLI says the
    // server's tools are loaded, so what the model is offered then does not
    // depend on which came first (on a loaded machine the connection could
    // still be under way after a second turn).
    let types: Vec<String> = std::iter::from_fn(|| events.next_timeout(TURN).expect("the session's events"))
        .take_while(|e| !matches!(&e.kind, EventKind::SessionMcpServerToolsLoaded(d) if d.server_name == SERVER))
        .map(|e| e.kind.event_type().to_owned())
        .collect();
    drop(events);
    eprintln!("events before the server's tools loaded: {types:?}");
    session.send_and_wait("Hi again", TURN).expect("a second turn");
    eprintln!("MCP requests: {:#?}", model.other_requests().iter().filter(|r| r.contains("oauth")).collect::<Vec<_>>());
    let requests = model.requests_for(session.id());
    eprintln!("tools: {:?}", requests.iter().map(|r| r.tool_names()).collect::<Vec<_>>());
    assert_eq!(
        *asked.lock().unwrap(),
        [(SERVER.to_owned(), format!("{}{MCP_OAUTH_PATH}", model.url()))],
        "asked once, with the server's name and URL"
    );
    assert!(model.other_requests().iter().any(|r| r.contains("(tools/list) [token]")), "the token reached the server");
    let tool = format!("{SERVER}-{MCP_OAUTH_TOOL}");
    assert!(requests.last().unwrap().tool_names().contains(&tool), "the model is offered {tool}");
    session.destroy().unwrap();
    client.stop().unwrap();
}
