//! Secrets stay secret: `Debug` output redacts tokens, a CLI spawned for TCP
//! refuses connections that lack its generated connection token, and the
//! shell commands the agent runs (through the real CLI 1.0.102 and the
//! scripted model) see neither the GitHub token nor the connection token.

use std::time::Duration;

use copilot_host::{approve_all, Client, ClientOptions, Error, SessionConfig, Transport};
use copilot_testkit::scripted_model::{Reply, ScriptedModel};
use copilot_tests::real_cli::{isolated_options, TempDir};
use serde_json::json;

const AUTH_TOKEN: &str = "gho_auth-token-that-must-not-leak-3141";
const CONNECTION_TOKEN: &str = "connection-token-that-must-not-leak-2718";

#[test]
fn debug_output_redacts_tokens() {
    let options = ClientOptions {
        auth_token: Some(AUTH_TOKEN.into()),
        connection_token: Some(CONNECTION_TOKEN.into()),
        env: vec![("GH_TOKEN".into(), "gho_env-token-that-must-not-leak".into())],
        ..ClientOptions::default()
    };
    for text in [format!("{options:?}"), format!("{options:#?}")] {
        assert!(!text.contains(AUTH_TOKEN), "auth token in {text}");
        assert!(!text.contains(CONNECTION_TOKEN), "connection token in {text}");
        assert!(!text.contains("gho_env-token"), "an environment value in {text}");
        assert!(text.contains("auth_token"), "the field is still shown: {text}");
        assert!(text.contains("GH_TOKEN"), "environment names are still shown: {text}");
    }
}

#[test]
fn debug_output_of_an_mcp_oauth_token_redacts_it() {
    let token = copilot_host::OAuthToken { access_token: AUTH_TOKEN.into(), token_type: None, expires_in: Some(60) };
    let text = format!("{token:?}");
    assert!(!text.contains(AUTH_TOKEN), "{text}");
    assert!(text.contains("expires_in"), "{text}");
}

#[test]
fn a_spawned_tcp_cli_refuses_a_connection_without_its_token() {
    let dir = TempDir::new("copilot-conn-token");
    let proxy = copilot_tests::real_cli::refusing_proxy();
    let client = Client::start(isolated_options(Transport::Tcp { port: 0 }, dir.path(), &proxy)).expect("start");
    let addr = client.peer_addr().expect("a TCP client has a peer");
    // The client itself got in: it sent the token it generated.
    client.ping(None).expect("the owner's connection works");
    match Client::connect(addr, None) {
        Err(Error::Rpc { code, .. }) => assert_eq!(code, -32002, "refused for want of a token"),
        Err(other) => panic!("refused, but not by the token check: {other}"),
        Ok(_) => panic!("a connection without the token was accepted"),
    }
    match Client::connect(addr, Some("a-wrong-token")) {
        Err(Error::Rpc { code, .. }) => assert_eq!(code, -32002),
        Err(other) => panic!("refused, but not by the token check: {other}"),
        Ok(_) => panic!("a connection with a wrong token was accepted"),
    }
    client.stop().expect("stop");
}

#[test]
fn the_agents_shell_sees_no_token() {
    for transport in [Transport::Stdio, Transport::Tcp { port: 0 }] {
        let dir = TempDir::new("copilot-shell-env");
        let model = ScriptedModel::start().expect("start the scripted model");
        let mut options = isolated_options(transport, dir.path(), &model.url());
        options.env.extend(model.env());
        options.auth_token = Some(AUTH_TOKEN.into());
        if let Transport::Tcp { .. } = transport {
            options.connection_token = Some(CONNECTION_TOKEN.into());
        }
        let client = Client::start(options).expect("start the CLI");
        let work = dir.path().join("work");
        std::fs::create_dir_all(&work).unwrap();
        let config = SessionConfig {
            working_directory: Some(work.clone()),
            ..SessionConfig::with_model(ScriptedModel::MODEL).on_permission_shared(approve_all())
        };
        let session = client.create_session(config).expect("create");
        model.script(
            session.id(),
            vec![
                Reply::tool_call("bash", json!({"command": "env > env.txt; echo done", "description": "Print env"})),
                Reply::text("Printed."),
            ],
        );
        session.send_and_wait("Print the environment.", Duration::from_secs(90)).expect("turn");
        let env = std::fs::read_to_string(work.join("env.txt")).expect("the shell command ran");
        assert!(env.contains("COPILOT_HOME="), "the file holds the shell's environment");
        let leaked = |secret: &str| {
            env.lines().filter(|l| l.contains(secret)).map(|l| l.split('=').next().unwrap_or(l)).collect::<Vec<_>>()
        };
        assert_eq!(leaked(AUTH_TOKEN), Vec::<&str>::new(), "variables holding the GitHub token over {transport:?}");
        assert_eq!(
            leaked(CONNECTION_TOKEN),
            Vec::<&str>::new(),
            "variables holding the connection token over {transport:?}"
        );
        let results = model.requests_for(session.id()).iter().flat_map(|r| r.tool_results()).collect::<Vec<_>>();
        assert!(!results.join("\n").contains(AUTH_TOKEN), "the model was shown the token");
        session.destroy().expect("destroy");
        client.stop().expect("stop");
    }
}
