//! copilot-host against a scripted CLI in this process: after a resume the
//! client asks what is pending, and each wait the CLI lists but never sends
//! is answered once by the handler registered for its kind; a wait sent both
//! as an event and in a list is answered once, whichever comes first.

use std::io::{self, Read, Write};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread;
use std::time::Duration;

use copilot_core::FrameDecoder;
use copilot_host::{Client, PermissionDecision, PermissionRequest, SessionConfig, Tool, ToolInvocation};
use serde_json::{json, Value};

/// How long a test waits for the peer to see something before it fails
/// (a failure bound only: every check waits on order, not on time).
const WAIT: Duration = Duration::from_secs(20);
const SESSION: &str = "s-pending";

/// What the scripted CLI does when the client asks what is pending.
#[derive(Clone, Default)]
struct Script {
    /// The items of `session.tools.listPendingRequests`.
    tools: Vec<Value>,
    /// The items of `session.permissions.pendingRequests`.
    prompts: Vec<Value>,
    /// Events sent just before the reply to the tool list.
    before_tool_list: Vec<Value>,
    /// For an answered request id: the event sent again just before the
    /// answer is acknowledged (a late event for a wait already answered).
    late: Vec<(String, Value)>,
}

/// The scripted CLI: answers what the client sends, records it.
struct Peer {
    received: Mutex<Vec<Value>>,
    changed: Condvar,
}

impl Peer {
    fn start(script: Script) -> (Arc<Peer>, Box<dyn Read + Send>, Box<dyn Write + Send>) {
        let (client_reader, mut to_client) = io::pipe().unwrap();
        let (mut from_client, client_writer) = io::pipe().unwrap();
        let peer = Arc::new(Peer { received: Mutex::new(Vec::new()), changed: Condvar::new() });
        let me = Arc::clone(&peer);
        thread::spawn(move || {
            let mut decoder: FrameDecoder<[u8; 1 << 16]> = FrameDecoder::new();
            let mut buf = [0; 1 << 16];
            loop {
                let n = match from_client.read(&mut buf) {
                    Ok(0) | Err(_) => return,
                    Ok(n) => n,
                };
                let mut rest = &buf[..n];
                while !rest.is_empty() {
                    rest = &rest[decoder.feed(rest)..];
                    while let Some(body) = decoder.poll() {
                        let message: Value = serde_json::from_slice(body.unwrap()).unwrap();
                        for out in me.answer(&script, &message) {
                            let body = serde_json::to_vec(&out).unwrap();
                            let framed =
                                [format!("Content-Length: {}\r\n\r\n", body.len()).into_bytes(), body].concat();
                            if to_client.write_all(&framed).is_err() {
                                return;
                            }
                        }
                        me.received.lock().unwrap().push(message);
                        me.changed.notify_all();
                    }
                }
            }
        });
        (peer, Box::new(client_reader), Box::new(client_writer))
    }

    /// The frames the CLI sends for one message of the client's, in order.
    fn answer(&self, script: &Script, message: &Value) -> Vec<Value> {
        let Some(id) = message.get("id").cloned() else { return vec![] };
        let Some(method) = message["method"].as_str() else { return vec![] };
        let reply = |result: Value| json!({"jsonrpc":"2.0","id":id,"result":result});
        let request_id = message["params"]["requestId"].as_str().unwrap_or_default();
        match method {
            "connect" => vec![reply(json!({"ok":true,"protocolVersion":3,"version":"scripted"}))],
            "session.resume" => vec![reply(json!({"sessionId":SESSION}))],
            "session.tools.listPendingRequests" => {
                let mut out = script.before_tool_list.clone();
                out.push(reply(json!({"items":script.tools})));
                out
            }
            "session.permissions.pendingRequests" => vec![reply(json!({"items":script.prompts}))],
            m if m.contains(".handlePending") => {
                let first = !self.answered(request_id);
                let mut out: Vec<Value> =
                    script.late.iter().filter(|(rid, _)| rid == request_id).map(|(_, e)| e.clone()).collect();
                out.push(reply(json!({"success":first})));
                out
            }
            _ => vec![reply(json!({}))],
        }
    }

    /// Whether an answer to `request_id` was received already.
    fn answered(&self, request_id: &str) -> bool {
        self.answers(request_id) > 0
    }

    fn answers(&self, request_id: &str) -> usize {
        let received = self.received.lock().unwrap();
        received
            .iter()
            .filter(|m| {
                m["method"].as_str().is_some_and(|m| m.contains(".handlePending"))
                    && m["params"]["requestId"] == request_id
            })
            .count()
    }

    /// Waits until every one of `request_ids` has an answer.
    fn wait_answers(&self, request_ids: &[&str]) {
        let mut received = self.received.lock().unwrap();
        loop {
            let done = request_ids.iter().all(|rid| {
                received.iter().any(|m| {
                    m["method"].as_str().is_some_and(|m| m.contains(".handlePending"))
                        && m["params"]["requestId"] == *rid
                })
            });
            if done {
                return;
            }
            let (r, timeout) = self.changed.wait_timeout(received, WAIT).unwrap();
            assert!(!timeout.timed_out(), "no answer to {request_ids:?} came");
            received = r;
        }
    }

    fn received(&self, method: &str) -> Vec<Value> {
        self.received.lock().unwrap().iter().filter(|m| m["method"] == method).cloned().collect()
    }
}

fn tool_item(request_id: &str) -> Value {
    json!({"requestId":request_id,"toolCallId":format!("call-{request_id}"),"toolName":"get_weather","arguments":{"city":"Paris"}})
}

fn prompt_item(request_id: &str) -> Value {
    json!({"requestId":request_id,"request":{"kind":"commands","fullCommandText":"echo hi > proof.txt",
        "intention":"write proof","commandIdentifiers":["echo"],"canOfferSessionApproval":false,"toolCallId":"t1"}})
}

fn event(event_type: &str, data: Value) -> Value {
    json!({"jsonrpc":"2.0","method":"session.event","params":{"sessionId":SESSION,
        "event":{"type":event_type,"id":format!("e-{}", data["requestId"].as_str().unwrap()),"data":data}}})
}

fn tool_event(request_id: &str) -> Value {
    let mut data = tool_item(request_id);
    data["sessionId"] = json!(SESSION);
    event("external_tool.requested", data)
}

fn prompt_event(request_id: &str) -> Value {
    let item = prompt_item(request_id);
    let mut shell = item["request"].clone();
    shell["kind"] = json!("shell");
    event(
        "permission.requested",
        json!({"requestId":request_id,"permissionRequest":shell,"promptRequest":item["request"]}),
    )
}

/// Handlers that count their calls and keep what they saw.
#[derive(Default)]
struct Seen {
    tool_calls: AtomicUsize,
    prompts: AtomicUsize,
    prompt_kinds: Mutex<Vec<String>>,
    tool_arguments: Mutex<Vec<Value>>,
}

fn config(seen: &Arc<Seen>) -> SessionConfig {
    let (tools, prompts) = (Arc::clone(seen), Arc::clone(seen));
    SessionConfig::default()
        .tool(Tool::new("get_weather", "The weather", json!({"type":"object"}), move |call: &ToolInvocation| {
            tools.tool_calls.fetch_add(1, Ordering::SeqCst);
            tools.tool_arguments.lock().unwrap().push(call.arguments.clone());
            "sunny"
        }))
        .on_permission(move |request: &PermissionRequest| {
            prompts.prompts.fetch_add(1, Ordering::SeqCst);
            prompts.prompt_kinds.lock().unwrap().push(request.kind.clone());
            PermissionDecision::ApproveOnce
        })
}

#[test]
fn waits_the_cli_lists_but_never_sends_are_answered_once_each_by_their_handlers() {
    let script =
        Script { tools: vec![tool_item("r-tool")], prompts: vec![prompt_item("r-prompt")], ..Script::default() };
    let (peer, from_peer, to_peer) = Peer::start(script);
    let client = Client::from_streams(from_peer, to_peer, None).expect("handshake");
    let seen = Arc::new(Seen::default());
    let _session = client.resume_session(SESSION, config(&seen)).expect("resume");

    peer.wait_answers(&["r-tool", "r-prompt"]);
    assert_eq!(peer.received("session.tools.listPendingRequests").len(), 1);
    assert_eq!(peer.received("session.permissions.pendingRequests").len(), 1);
    let tool_answer = &peer.received("session.tools.handlePendingToolCall")[0];
    assert_eq!(tool_answer["params"]["sessionId"], SESSION);
    assert_eq!(tool_answer["params"]["result"]["textResultForLlm"], "sunny");
    let prompt_answer = &peer.received("session.permissions.handlePendingPermissionRequest")[0];
    assert_eq!(prompt_answer["params"]["result"]["kind"], "approve-once");
    // A round trip after the answers: every frame before it was routed.
    client.ping(None).expect("ping");
    let stats = client.engine_stats();
    // Every answer comes from an obligation: two taken on, two discharged.
    assert_eq!((stats.opened, stats.listed, stats.open_obligations, stats.answers_sent), (2, 2, 0, 2));
    assert_eq!((peer.answers("r-tool"), peer.answers("r-prompt")), (1, 1));
    assert_eq!(seen.tool_calls.load(Ordering::SeqCst), 1);
    assert_eq!(*seen.tool_arguments.lock().unwrap(), [json!({"city":"Paris"})]);
    assert_eq!(*seen.prompt_kinds.lock().unwrap(), ["shell"], "the handler sees the permission kind");
}

#[test]
fn a_wait_sent_both_as_an_event_and_in_a_list_is_answered_once() {
    let script = Script {
        // r-first: its event comes before the list that names it too.
        before_tool_list: vec![tool_event("r-first")],
        tools: vec![tool_item("r-first"), tool_item("r-listed")],
        prompts: vec![prompt_item("p-listed")],
        // r-listed and p-listed: their events come after they were
        // answered through the list.
        late: vec![("r-listed".into(), tool_event("r-listed")), ("p-listed".into(), prompt_event("p-listed"))],
    };
    let (peer, from_peer, to_peer) = Peer::start(script);
    let client = Client::from_streams(from_peer, to_peer, None).expect("handshake");
    let seen = Arc::new(Seen::default());
    let session = client.resume_session(SESSION, config(&seen)).expect("resume");
    let events = session.events();

    peer.wait_answers(&["r-first", "r-listed", "p-listed"]);
    client.ping(None).expect("ping");
    let stats = client.engine_stats();
    assert_eq!((stats.opened, stats.duplicate_waits, stats.open_obligations), (3, 3, 0));
    assert_eq!((peer.answers("r-first"), peer.answers("r-listed"), peer.answers("p-listed")), (1, 1, 1));
    assert_eq!(seen.tool_calls.load(Ordering::SeqCst), 2);
    assert_eq!(seen.prompts.load(Ordering::SeqCst), 1);
    // Every event the CLI sent is delivered, each once; nothing else.
    let mut delivered = Vec::new();
    while delivered.len() < 3 {
        let e = events.next_timeout(WAIT).expect("an event in time").expect("open");
        delivered.push(e.id.clone());
    }
    delivered.sort();
    assert_eq!(delivered, ["e-p-listed", "e-r-first", "e-r-listed"]);
}

#[test]
fn the_async_client_answers_listed_waits_through_the_same_engine() {
    let script =
        Script { tools: vec![tool_item("r-tool")], prompts: vec![prompt_item("r-prompt")], ..Script::default() };
    let (peer, from_peer, to_peer) = Peer::start(script);
    let seen = Arc::new(Seen::default());
    let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
    let (client, _session) = rt.block_on(async {
        let client = copilot_host::asynch::Client::from_streams(
            from_peer,
            to_peer,
            None,
            copilot_host::ClientOptions::default(),
        )
        .await
        .expect("handshake");
        let session = client.resume_session(SESSION, config(&seen)).await.expect("resume");
        (client, session)
    });
    peer.wait_answers(&["r-tool", "r-prompt"]);
    rt.block_on(client.ping(None)).expect("ping");
    let stats = client.engine_stats();
    assert_eq!((stats.opened, stats.listed, stats.open_obligations, stats.answers_sent), (2, 2, 0, 2));
    assert_eq!((peer.answers("r-tool"), peer.answers("r-prompt")), (1, 1));
    assert_eq!(seen.tool_calls.load(Ordering::SeqCst), 1);
    assert_eq!(*seen.prompt_kinds.lock().unwrap(), ["shell"]);
}
