//! Against the real Copilot CLI 1.0.102 (installed by `npm ci`), over stdio
//! and over TCP: the handshake, the session life cycle, a prompt without a
//! model endpoint, and stopping. These tests never skip: without the CLI
//! they fail and say how to install it.

use std::time::{Duration, Instant};

use copilot_host::{Client, Error, EventKind, SessionConfig, Transport};
use copilot_tests::real_cli::{isolated_options, refusing_proxy, TempDir};

const MODEL: &str = "claude-sonnet-4.5";

/// The whole life of a client and a session, as a user would go through it.
fn session_life_cycle(transport: Transport) {
    let dir = TempDir::new("copilot-real");
    let proxy = refusing_proxy();
    let started = Instant::now();
    let client = Client::start(isolated_options(transport, dir.path(), &proxy)).expect("start the CLI");
    eprintln!("{transport:?}: started and connected in {:?}", started.elapsed());
    assert_eq!(client.server_info().protocol_version, 3);
    assert_eq!(client.server_info().version.as_deref(), Some("1.0.102"));

    let pong = client.ping(Some("hello")).expect("ping");
    assert_eq!(pong.message.as_deref(), Some("pong: hello"));
    assert_eq!(pong.protocol_version, Some(3));
    let status = client.status().expect("status.get");
    assert_eq!((status.version.as_str(), status.protocol_version), ("1.0.102", 3));
    assert!(!client.auth_status().expect("auth.getStatus").is_authenticated, "the isolated CLI has no login");
    assert_eq!(client.last_session_id().expect("getLastId"), None);

    let lifecycle = client.lifecycle_events();
    let work = dir.path().join("work");
    std::fs::create_dir_all(&work).unwrap();
    let session = client
        .create_session(SessionConfig { working_directory: Some(work.clone()), ..SessionConfig::with_model(MODEL) })
        .expect("session.create");
    let id = session.id().to_owned();
    assert_eq!(id.len(), 36, "a client-chosen UUID: {id}");
    let events = session.events();

    // Without a login the turn ends in session.error, which send_and_wait
    // returns as an error, and the session goes idle.
    let err = session.send_and_wait("What is 2 + 2?", Duration::from_secs(60)).expect_err("no model endpoint");
    let Error::Session { error_type, message } = &err else { panic!("expected a session error, got {err}") };
    assert!(message.contains("token") || message.contains("auth"), "{error_type}: {message}");

    let mut seen = Vec::new();
    while let Some(e) = events.try_next() {
        seen.push(e);
    }
    let types: Vec<&str> = seen.iter().map(|e| e.event_type()).collect();
    let start = seen.iter().find_map(|e| match &e.kind {
        EventKind::SessionStart(s) => Some(s),
        _ => None,
    });
    let start = start.unwrap_or_else(|| panic!("no session.start among {types:?}"));
    assert_eq!(start.session_id, id);
    assert_eq!(start.selected_model.as_deref(), Some(MODEL));
    assert!(types.contains(&"session.error") && types.last() == Some(&"session.idle"), "{types:?}");

    let listed = client.list_sessions().expect("session.list");
    assert!(listed.iter().any(|s| s.session_id == id), "{listed:?}");
    assert_eq!(client.last_session_id().expect("getLastId").as_deref(), Some(id.as_str()));

    session.destroy().expect("session.destroy");
    let resumed = client.resume_session(&id, SessionConfig::with_model(MODEL)).expect("session.resume");
    assert_eq!(resumed.id(), id);
    resumed.destroy().expect("destroy the resumed session");
    client.delete_session(&id).expect("session.delete");
    // A second delete fails, saying which session and why (the CLI's words).
    match client.delete_session(&id) {
        Err(copilot_host::Error::Rpc { message, .. }) => {
            assert!(message.starts_with(&format!("failed to delete session {id}: ")), "{message}");
            assert!(message.contains("not found"), "{message}");
        }
        other => panic!("a second delete reports failure, not {other:?}"),
    }
    assert!(!client.list_sessions().expect("list").iter().any(|s| s.session_id == id));

    let kinds: Vec<String> =
        lifecycle.try_iter().filter(|l| l.session_id == id).map(|l| l.kind.as_str().to_owned()).collect();
    assert!(
        kinds.contains(&"session.created".to_owned()) && kinds.contains(&"session.deleted".to_owned()),
        "{kinds:?}"
    );

    let stats = client.stats();
    assert_eq!((stats.malformed, stats.oversize, stats.unknown_session, stats.unmatched_responses), (0, 0, 0, 0));
    let stopping = Instant::now();
    client.stop().expect("stop");
    eprintln!("{transport:?}: stopped in {:?}", stopping.elapsed());
}

#[test]
fn stdio_session_life_cycle() {
    session_life_cycle(Transport::Stdio);
}

#[test]
fn tcp_session_life_cycle() {
    session_life_cycle(Transport::Tcp { port: 0 });
}

#[test]
fn tcp_connection_token_is_required_and_checked() {
    let dir = TempDir::new("copilot-token");
    let proxy = refusing_proxy();
    let mut options = isolated_options(Transport::Tcp { port: 0 }, dir.path(), &proxy);
    options.connection_token = Some("s3cret".into());
    let owner = Client::start(options).expect("start with a connection token");
    let addr = owner.peer_addr().expect("a TCP client knows its peer");

    let refused = Client::connect(addr, None).expect_err("no token");
    assert_eq!(refused.rpc_code(), Some(-32002), "{refused}");
    let refused = Client::connect(addr, Some("wrong")).expect_err("wrong token");
    assert_eq!(refused.rpc_code(), Some(-32002), "{refused}");
    let second = Client::connect(addr, Some("s3cret")).expect("right token");
    assert_eq!(second.status().expect("status").protocol_version, 3);
    second.stop().expect("a connected client stops without stopping the CLI");
    assert_eq!(owner.ping(None).expect("the CLI still serves its owner").protocol_version, Some(3));
    owner.stop().expect("stop");
}

#[test]
fn a_cli_that_exits_at_start_is_reported_with_its_stderr() {
    let dir = TempDir::new("copilot-exit");
    let proxy = refusing_proxy();
    let mut options = isolated_options(Transport::Stdio, dir.path(), &proxy);
    options.extra_args.push("--no-such-flag-for-copilot".into());
    let err = Client::start(options).expect_err("an unknown flag stops the CLI");
    let Error::CliExited { stderr, .. } = &err else { panic!("expected CliExited, got {err}") };
    assert!(stderr.contains("no-such-flag-for-copilot"), "stderr tail: {stderr}");
}
