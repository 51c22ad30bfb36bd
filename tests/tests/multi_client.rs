//! Two clients on one session of the real Copilot CLI 1.0.102, on the
//! scripted model: one client starts the CLI (TCP) and creates the session,
//! the other connects to the same CLI and resumes the session while the
//! first stays on it. Each registers its own tool. The CLI sends every
//! `external_tool.requested` to both; the client that has the tool answers
//! it and the other leaves it (the core's answer table), so each call is
//! answered once, by its owner, and the model reads each owner's result.
//!
//! The second client talks to the CLI through a recording relay, so the
//! test reads what it sent: for a tool whose handler fails, the
//! `handlePendingToolCall` goes with `error` and no `result`, as the
//! official SDKs send it, and the model reads the CLI's own words.
//!
//! A slash command, by contrast, reaches only the client that registered
//! it: the reason the table refuses `command.execute` without a handler.

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use copilot_host::{Client, EventKind, Session, Tool, ToolInvocation, Transport};
use copilot_testkit::scripted_model::{Reply, ScriptedModel};
use copilot_tests::real_cli::{scripted_options, scripted_session, TempDir};
use serde_json::{json, Value};

const TURN: Duration = Duration::from_secs(90);
const TOKEN: &str = "multi-client-token";

/// Sends `prompt` and waits for the turn's reply text.
fn turn(session: &Session, prompt: &str) -> Option<String> {
    let reply = session.send_and_wait(prompt, TURN).unwrap_or_else(|e| panic!("turn failed: {e}"));
    reply.and_then(|e| match &e.kind {
        EventKind::AssistantMessage(m) => Some(m.content.clone()),
        _ => None,
    })
}

/// What the CLI tells the model when a client tool's answer is an `error`
/// (CLI 1.0.102, seen on the wire): the error's text is not in it.
fn cli_failure_text(tool: &str) -> String {
    format!("Failed to execute `{tool}` tool with arguments: {{}} due to error: Error: Tool execution failed")
}

/// Waits for `done` (a safety bound only: the order of events decides).
fn wait_for(what: &str, done: impl Fn() -> bool) {
    let until = Instant::now() + Duration::from_secs(60);
    while !done() {
        assert!(Instant::now() < until, "waited a minute for {what}");
        thread::sleep(Duration::from_millis(2));
    }
}

/// A relay between one client and the CLI that keeps what the client sent.
struct Relay {
    addr: SocketAddr,
    sent: Arc<Mutex<Vec<u8>>>,
}

impl Relay {
    /// Relays the first connection made to it to `cli`.
    fn start(cli: SocketAddr) -> Relay {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the relay");
        let addr = listener.local_addr().expect("relay address");
        let sent = Arc::new(Mutex::new(Vec::new()));
        let kept = sent.clone();
        thread::spawn(move || {
            let (client, _) = listener.accept().expect("the client connects");
            let server = TcpStream::connect(cli).expect("connect to the CLI");
            let (mut from_client, mut to_server) = (client.try_clone().unwrap(), server.try_clone().unwrap());
            thread::spawn(move || {
                let mut buf = [0; 16 * 1024];
                while let Ok(n @ 1..) = from_client.read(&mut buf) {
                    kept.lock().unwrap().extend_from_slice(&buf[..n]);
                    if to_server.write_all(&buf[..n]).is_err() {
                        break;
                    }
                }
                let _ = to_server.shutdown(Shutdown::Write);
            });
            let (mut from_server, mut to_client) = (server, client);
            let _ = std::io::copy(&mut from_server, &mut to_client);
            let _ = to_client.shutdown(Shutdown::Write);
        });
        Relay { addr, sent }
    }

    /// The JSON-RPC messages the client sent so far.
    fn messages(&self) -> Vec<Value> {
        let bytes = self.sent.lock().unwrap().clone();
        let mut out = Vec::new();
        let mut rest = &bytes[..];
        while let Some(end) = rest.windows(4).position(|w| w == b"\r\n\r\n") {
            let header = std::str::from_utf8(&rest[..end]).unwrap();
            let len: usize = header
                .lines()
                .find_map(|l| l.strip_prefix("Content-Length:").map(|v| v.trim().parse().unwrap()))
                .expect("a Content-Length header");
            let body = &rest[end + 4..end + 4 + len];
            out.push(serde_json::from_slice(body).unwrap());
            rest = &rest[end + 4 + len..];
        }
        out
    }

    /// The params of the tool answers the client sent.
    fn tool_answers(&self) -> Vec<Value> {
        self.messages()
            .into_iter()
            .filter(|m| m["method"] == "session.tools.handlePendingToolCall")
            .map(|m| m["params"].clone())
            .collect()
    }
}

/// The CLI on the scripted model, started by the first client over TCP, and
/// a second client connected to it through a relay.
struct TwoClients {
    first: Client,
    second: Client,
    relay: Relay,
    model: ScriptedModel,
    dir: TempDir,
}

impl TwoClients {
    fn start() -> TwoClients {
        let dir = TempDir::new("copilot-multi-client");
        let model = ScriptedModel::start().expect("start the scripted model");
        let mut options = scripted_options(Transport::Tcp { port: 0 }, dir.path(), &model);
        options.connection_token = Some(TOKEN.into());
        let first = Client::start(options).expect("start the CLI");
        let relay = Relay::start(first.peer_addr().expect("a TCP peer"));
        let second = Client::connect(relay.addr, Some(TOKEN)).expect("the second client connects");
        TwoClients { first, second, relay, model, dir }
    }

    /// A session the first client creates with `first_tool` and the second
    /// resumes with `second_tool`; both stay on it.
    fn share(&self, name: &str, first_tool: Tool, second_tool: Tool) -> (Session, Session) {
        let config = scripted_session(self.dir.path(), name);
        let created = self.first.create_session(config.clone().tool(first_tool)).expect("create");
        let resumed = self.second.resume_session(created.id(), config.tool(second_tool)).expect("resume");
        (created, resumed)
    }
}

/// A tool that counts its calls and answers `text`.
fn counted(name: &str, text: &'static str, calls: &Arc<AtomicUsize>) -> Tool {
    let calls = calls.clone();
    Tool::new(name, "A tool of one client.", json!({"type": "object"}), move |_: &ToolInvocation| {
        calls.fetch_add(1, Ordering::SeqCst);
        text
    })
    .skip_permission()
}

#[test]
fn each_client_answers_its_own_tool_once_and_leaves_the_other() {
    let t = TwoClients::start();
    let (alpha_calls, beta_calls) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let (first, second) = t.share(
        "two-tools",
        counted("alpha", "alpha ran on the first client", &alpha_calls),
        counted("beta", "beta ran on the second client", &beta_calls),
    );
    t.model.script(
        first.id(),
        vec![Reply::tool_call("alpha", json!({})), Reply::tool_call("beta", json!({})), Reply::text("Both tools ran.")],
    );
    assert_eq!(turn(&first, "Use both tools.").as_deref(), Some("Both tools ran."));

    // Each tool ran once, on its owner.
    assert_eq!((alpha_calls.load(Ordering::SeqCst), beta_calls.load(Ordering::SeqCst)), (1, 1));
    // The model read each owner's result, and no refusal.
    let requests = t.model.requests_for(first.id());
    assert_eq!(requests.len(), 3, "three model calls");
    assert_eq!(requests[1].tool_results(), ["alpha ran on the first client"]);
    assert_eq!(requests[2].tool_results(), ["alpha ran on the first client", "beta ran on the second client"]);

    // The second client answered beta, once, and sent nothing for alpha.
    let answers = t.relay.tool_answers();
    assert_eq!(answers.len(), 1, "{answers:?}");
    assert_eq!(answers[0]["result"]["textResultForLlm"], "beta ran on the second client");
    // Each client left the other's call, and the CLI reported it answered:
    // the report comes before the turn's end on each client's own stream;
    // the pool may settle the left wait just after.
    let events = second.events();
    while !matches!(events.next_timeout(TURN).expect("open").expect("an event").kind, EventKind::SessionIdle(_)) {}
    for (client, name) in [(&t.first, "first"), (&t.second, "second")] {
        wait_for(name, || client.engine_stats().left_answered == 1);
        let s = client.engine_stats();
        assert_eq!((s.answered, s.declined, s.left_open), (1, 1, 0), "{name}: {s:?}");
        assert_eq!(s.refused.iter().sum::<u64>(), 0, "{name}: no refusal");
    }
    drop(second);
    first.destroy().unwrap();
}

#[test]
fn a_failing_tool_is_answered_with_its_error_and_the_model_reads_the_cli_words() {
    let t = TwoClients::start();
    let alpha_calls = Arc::new(AtomicUsize::new(0));
    let failing = Tool::new("gamma", "Fails.", json!({"type": "object"}), |_: &ToolInvocation| -> Result<String, _> {
        Err("the gamma store is down: secret-password")
    })
    .skip_permission();
    let (first, second) = t.share("failing-tool", counted("alpha", "unused", &alpha_calls), failing);
    t.model.script(first.id(), vec![Reply::tool_call("gamma", json!({})), Reply::text("Gamma failed.")]);
    assert_eq!(turn(&first, "Use gamma.").as_deref(), Some("Gamma failed."));

    // On the wire: `{sessionId, requestId, error}`, no result.
    let answers = t.relay.tool_answers();
    assert_eq!(answers.len(), 1, "{answers:?}");
    assert_eq!(answers[0]["error"], "the gamma store is down: secret-password");
    assert!(answers[0].get("result").is_none(), "{}", answers[0]);
    assert_eq!(answers[0]["sessionId"], first.id());
    // The CLI took it, and told the model in its own words.
    assert_eq!(t.second.engine_stats().acks_refused, 0);
    let requests = t.model.requests_for(first.id());
    assert_eq!(requests[1].tool_results(), [cli_failure_text("gamma")]);
    assert!(!format!("{:?}", requests[1].messages()).contains("secret-password"), "the error stays out");
    assert_eq!(alpha_calls.load(Ordering::SeqCst), 0);
    drop(second);
    first.destroy().unwrap();
}

/// Why the table refuses `command.execute` without a handler (where it
/// leaves the events): the CLI routes a command to the client that
/// registered it, so no other client of the session gets the wait. Run
/// from the other client, the command reaches its owner once, and the
/// other client has no wait to answer or leave.
#[test]
fn a_command_reaches_only_the_client_that_registered_it() {
    let t = TwoClients::start();
    let runs = Arc::new(AtomicUsize::new(0));
    let deploy = {
        let runs = runs.clone();
        copilot_host::Command::new("deploy", "Deploy.", move |_| {
            runs.fetch_add(1, Ordering::SeqCst);
            Ok(())
        })
    };
    let config = scripted_session(t.dir.path(), "command");
    let created = t.first.create_session(config.clone().command(deploy)).expect("create");
    let resumed = t.second.resume_session(created.id(), config).expect("resume");
    assert_eq!(resumed.execute_command("deploy", "prod").expect("execute"), None, "the owner ran it");
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    let s = t.second.engine_stats();
    assert_eq!((s.opened, s.declined, s.answers_sent), (0, 0, 0), "no wait reached the other client: {s:?}");
    assert_eq!(t.first.engine_stats().answered, 1);
    drop(resumed);
    created.destroy().unwrap();
}
