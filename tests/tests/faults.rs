//! Faults of the CLI and of the caller's input: nothing hangs, every waiter
//! learns the real cause, memory stays bounded.
//!
//! - A frozen CLI (SIGSTOP on its process group, real CLI 1.0.102, stdio and
//!   TCP): every call returns `Timeout` by its deadline, `destroy` and
//!   `stop` return, and `stop` kills the process.
//! - The CLI killed in the middle of a turn: the turn, the event stream and
//!   every later call end with the CLI's exit as the cause.
//! - A reader that panics (the caller's stream): every waiter gets an
//!   error, every stream ends.
//! - `call_raw` with params that are not an object: an error, not a panic.
//! - Events kept for a late first subscriber are bounded and what is not
//!   kept is counted; the memory bench (`kept_memory`) runs as a smoke check.
//!
//! No test bounds a duration: a deadline test asserts that the call
//! returned `Timeout`; that it returned at all is proven by the test ending.

use std::io::{self, Read};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use copilot_host::events::EventKind;
use copilot_host::{
    Client, ClientOptions, CloseCause, Error, SessionConfig, Tool, ToolInvocation, Transport, MAX_KEPT_EVENTS,
};
use copilot_testkit::scripted_model::{Reply, ScriptedModel};
use copilot_tests::fake_server::{FakeServer, FakeServerConfig};
use copilot_tests::real_cli::{isolated_options, refusing_proxy, scripted_options, TempDir};
use serde_json::json;

const TRANSPORTS: [Transport; 2] = [Transport::Stdio, Transport::Tcp { port: 0 }];

fn signal_group(signal: &str, pid: u32) {
    let status = Command::new("kill").args([signal, "--", &format!("-{pid}")]).status().expect("run kill");
    assert!(status.success(), "kill {signal} -{pid} failed");
}

/// Waits until every thread of `pid` is stopped: a signal is delivered
/// when the target next enters the kernel, not when `kill` returns.
fn wait_stopped(pid: u32) {
    loop {
        let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).expect("the CLI's threads");
        let all_stopped = tasks.flatten().all(|t| {
            let stat = std::fs::read_to_string(t.path().join("stat")).unwrap_or_default();
            // The state follows the parenthesised command name.
            stat.rsplit_once(") ").is_some_and(|(_, rest)| rest.starts_with('T') || rest.starts_with('t'))
        });
        if all_stopped {
            return;
        }
        thread::yield_now();
    }
}

fn signal_process(signal: &str, pid: u32) {
    let status = Command::new("kill").args([signal, &pid.to_string()]).status().expect("run kill");
    assert!(status.success(), "kill {signal} {pid} failed");
}

fn is_timeout<T: std::fmt::Debug>(what: &str, result: copilot_host::Result<T>) {
    match result {
        Err(Error::Timeout { .. }) => {}
        other => panic!("{what}: expected Timeout, got {other:?}"),
    }
}

/// Runs `f`, printing how long it took (a figure for the record, never
/// asserted).
fn timed<T>(what: &str, transport: Transport, f: impl FnOnce() -> T) -> T {
    let start = Instant::now();
    let out = f();
    eprintln!("frozen CLI over {transport:?}: {what} returned after {:?}", start.elapsed());
    out
}

#[test]
fn a_frozen_cli_makes_every_call_time_out_and_stop_kills_it() {
    for transport in TRANSPORTS {
        let dir = TempDir::new("copilot-frozen");
        let options = ClientOptions {
            request_timeout: Duration::from_secs(1),
            shutdown_grace: Duration::from_secs(1),
            ..isolated_options(transport, dir.path(), &refusing_proxy())
        };
        let client = Client::start(options).expect("start the CLI");
        let pid = client.cli_pid().expect("a started CLI has a pid");
        // The sessions are opened with a deadline of their own: the 1 s
        // default is for the calls made once the CLI is frozen.
        let setup = client.with_timeout(Duration::from_secs(120));
        let sessions: Vec<_> =
            (0..3).map(|_| setup.create_session(SessionConfig::with_model("claude-sonnet-4.5")).unwrap()).collect();
        let events = sessions[0].events();

        signal_group("-STOP", pid);
        wait_stopped(pid);
        let t = transport;
        is_timeout("ping", timed("ping", t, || client.ping(None)));
        is_timeout("status", timed("status", t, || client.status()));
        is_timeout("list", timed("session.list", t, || client.list_sessions()));
        is_timeout("delete", timed("session.delete", t, || client.delete_session("nope")));
        is_timeout("create", timed("session.create", t, || client.create_session(SessionConfig::default())));
        is_timeout(
            "ping with its own timeout",
            timed("ping (0.3 s of its own)", t, || client.with_timeout(Duration::from_millis(300)).ping(None)),
        );
        let s = &sessions[0];
        is_timeout("send", timed("send", t, || s.send("hello")));
        is_timeout(
            "send_and_wait",
            timed("send_and_wait (2 s)", t, || s.send_and_wait("hello", Duration::from_secs(2))),
        );
        is_timeout("abort", timed("abort", t, || s.abort()));
        is_timeout("messages", timed("messages", t, || s.messages()));
        is_timeout("call_raw", timed("call_raw", t, || s.call_raw("session.model.getCurrent", json!({}))));
        let mut sessions = sessions.into_iter();
        let first = sessions.next().unwrap();
        is_timeout("destroy", timed("destroy", t, || first.destroy()));
        // The stream of the destroyed session ends (the count returns).
        let _ = events.into_iter().count();
        // Two sessions are still open: stop is bounded in total, then kills.
        let stopped = timed("stop (2 sessions open)", t, || client.stop());
        assert!(matches!(stopped, Err(Error::Timeout { .. })), "stop reports the CLI that did not answer: {stopped:?}");
        drop(sessions);
        assert!(
            !std::path::Path::new(&format!("/proc/{pid}")).exists(),
            "the frozen CLI (pid {pid}) was killed and reaped"
        );
    }
}

#[test]
fn a_cli_killed_mid_turn_ends_every_call_and_stream_with_its_exit() {
    for transport in TRANSPORTS {
        let dir = TempDir::new("copilot-killed");
        let model = ScriptedModel::start().expect("start the scripted model");
        // A client that does not recover (that one: tests/recovery_real_cli.rs).
        let options = ClientOptions { auto_restart: false, ..scripted_options(transport, dir.path(), &model) };
        let client = Client::start(options).expect("start the CLI");
        let pid = client.cli_pid().unwrap();

        let (called_tx, called) = mpsc::channel();
        let (release_tx, release) = mpsc::channel::<()>();
        let release = Mutex::new(release);
        let tool = Tool::new("wait_here", "Waits.", json!({"type": "object"}), move |_: &ToolInvocation| {
            let _ = called_tx.send(());
            let _ = release.lock().unwrap().recv();
            "too late"
        })
        .skip_permission();
        let config = SessionConfig {
            working_directory: Some(dir.path().to_owned()),
            ..SessionConfig::with_model(ScriptedModel::MODEL)
        }
        .tool(tool);
        let session = Arc::new(client.create_session(config).expect("create"));
        model.script(session.id(), vec![Reply::tool_call("wait_here", json!({})), Reply::text("never said")]);
        let events = session.events();
        let turn = {
            let session = Arc::clone(&session);
            thread::spawn(move || session.send_and_wait("Wait for me.", Duration::from_secs(3600)))
        };
        called.recv().expect("the tool is called: the turn is under way");
        signal_process("-KILL", pid);

        let cause = client.wait_closed(None).expect("the connection ends");
        match &cause {
            CloseCause::CliExited { signal: Some(9), .. } => {}
            other => panic!("over {transport:?}: the cause should be the CLI's death by SIGKILL, not {other:?}"),
        }
        match turn.join().expect("the turn thread") {
            Err(Error::Disconnected(why)) => {
                assert!(why.contains("signal 9"), "the turn's error names the cause: {why}")
            }
            other => panic!("the turn should end with the disconnect, not {other:?}"),
        }
        // The stream ends (after what was delivered before the kill).
        let seen = events.into_iter().count();
        assert!(seen > 0, "events of the turn arrived before the kill");
        match client.ping(None) {
            Err(Error::Disconnected(why)) => assert!(why.contains("signal 9"), "{why}"),
            other => panic!("a later call should fail with the cause, not {other:?}"),
        }
        assert_eq!(client.closed(), Some(cause));
        drop(release_tx);
        let _ = client.stop();
    }
}

/// A stream of the caller's that panics in `read` once told to.
struct PanickingReader {
    inner: Box<dyn Read + Send>,
    armed: Arc<AtomicBool>,
}

impl Read for PanickingReader {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        if self.armed.load(Ordering::SeqCst) {
            panic!("the caller's stream failed");
        }
        Ok(n)
    }
}

#[test]
fn a_panic_in_the_reader_fails_every_waiter_and_ends_every_stream() {
    let (server, reader, writer) = FakeServer::pipes(FakeServerConfig::default());
    let armed = Arc::new(AtomicBool::new(false));
    let reader = PanickingReader { inner: reader, armed: Arc::clone(&armed) };
    // A day-long default deadline: only the guard can end the waits below.
    let options = ClientOptions { request_timeout: Duration::from_secs(86_400), ..ClientOptions::default() };
    let client = Client::from_streams_with(reader, writer, None, &options).expect("handshake");
    let session = client.create_session(SessionConfig::with_model("fake")).expect("create");
    let events = session.events();
    armed.store(true, Ordering::SeqCst);
    // The answer to this ping is the read that panics.
    match client.ping(None) {
        Err(Error::Disconnected(why)) => assert!(why.contains("the caller's stream failed"), "{why}"),
        other => panic!("the waiter should learn of the reader's failure, not {other:?}"),
    }
    // The session's stream ends (the count returns).
    let _ = events.into_iter().count();
    assert!(matches!(client.closed(), Some(CloseCause::ReaderFailed(_))), "{:?}", client.closed());
    assert!(matches!(session.abort(), Err(Error::Disconnected(_))), "later calls fail at once");
    drop(server);
}

#[test]
fn call_raw_with_params_that_are_not_an_object_is_an_error() {
    let (server, reader, writer) = FakeServer::pipes(FakeServerConfig::default());
    let client = Client::from_streams(reader, writer, None).expect("handshake");
    let session = client.create_session(SessionConfig::with_model("fake")).expect("create");
    for params in [json!([1, 2]), json!("text"), json!(3), json!(true)] {
        match session.call_raw("session.abort", params.clone()) {
            Err(Error::Config(why)) => assert!(why.contains("object"), "{why}"),
            other => panic!("{params}: expected a Config error, got {other:?}"),
        }
    }
    // Null means no params of its own: sessionId alone is sent.
    session.call_raw("session.abort", json!(null)).expect("null params");
    drop(server);
}

#[test]
fn events_kept_for_a_late_subscriber_are_bounded_and_counted() {
    let (server, reader, writer) = FakeServer::pipes(FakeServerConfig::default().with_reply_text("done"));
    let client = Client::from_streams(reader, writer, None).expect("handshake");
    let session =
        client.create_session(SessionConfig { streaming: true, ..SessionConfig::with_model("fake") }).expect("create");
    let flood = MAX_KEPT_EVENTS + 500;
    // Only send_and_wait: no subscriber of the user's.
    session.send_and_wait(format!("flood:{flood}"), Duration::from_secs(3600)).expect("flood turn");
    let stats = session.stats();
    assert!(stats.events > flood as u64, "every delta was delivered to send_and_wait: {stats:?}");
    assert_eq!(stats.not_kept, stats.events - MAX_KEPT_EVENTS as u64, "what is not kept is counted: {stats:?}");

    // The late first subscriber gets the first MAX_KEPT_EVENTS events,
    // in order, and nothing more.
    let stream = session.events();
    let owed: Vec<_> =
        (0..MAX_KEPT_EVENTS).map(|_| stream.next_timeout(Duration::from_secs(3600)).unwrap().unwrap()).collect();
    // The deltas among them are the first ones, in order.
    let deltas: Vec<usize> = owed
        .iter()
        .filter(|e| matches!(e.kind, EventKind::AssistantMessageDelta(_)))
        .map(|e| e.id.parse().expect("a flood delta's id is its index"))
        .collect();
    assert_eq!(deltas, (0..deltas.len()).collect::<Vec<_>>());
    assert!(deltas.len() >= MAX_KEPT_EVENTS - 10, "the kept events are mostly the flood's: {}", deltas.len());
    assert!(stream.try_next().is_none(), "only the kept events are owed");
    drop(server);
}

#[test]
fn the_memory_bench_runs() {
    let out = Command::new(env!("CARGO_BIN_EXE_kept_memory"))
        .args(["--turns", "2", "--events", "5000", "--transport", "stdio"])
        .output()
        .expect("run the kept_memory bench");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "kept_memory failed: {stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    let turns: Vec<&str> = stdout.lines().filter(|l| l.starts_with("turn ")).collect();
    assert_eq!(turns.len(), 2, "one line a turn: {stdout}");
    assert!(turns.iter().all(|l| l.contains("not kept")), "{stdout}");
}
