//! WebSocket model requests of the real Copilot CLI 1.0.102 through the
//! inference request handler. The CLI opens a WebSocket for the Responses
//! API when the model's catalogue entry lists `ws:/responses`: the
//! handler answers `GET /models` with such a catalogue, and then plays
//! the model behind the WebSocket itself (the Responses API's events for
//! each `response.create` message). A handler without WebSocket support
//! gets the refusal, and the CLI sends the same request over HTTP. When
//! the CLI dies, its WebSocket ends (the handler is closed) as the client
//! starts it again, and the next turn opens a new one.

use std::process::Command;
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::Mutex;
use std::time::Duration;

use copilot_host::{
    Client, CopilotHeaders, CopilotRequest, CopilotRequestContext, CopilotRequestHandler, CopilotResponse,
    CopilotWebSocketHandler, CopilotWebSocketMessage, CopilotWebSocketResponse, EventKind, RecoveryEvent, Transport,
};
use copilot_testkit::scripted_model::ScriptedModel;
use copilot_tests::real_cli::{scripted_options, scripted_session, TempDir};
use serde_json::{json, Value};

const TURN: Duration = Duration::from_secs(90);
const TEXT: &str = "a reply that came back over the WebSocket";

/// The catalogue: the scripted model, served over the Responses API, by WebSocket first.
fn models() -> Value {
    json!({ "object": "list", "data": [{
        "id": ScriptedModel::MODEL, "name": ScriptedModel::MODEL, "object": "model", "vendor": "Scripted",
        "version": "1", "preview": false, "model_picker_enabled": true, "is_chat_default": true,
        "is_chat_fallback": true, "policy": { "state": "enabled", "terms": "" },
        "supported_endpoints": ["/responses", "ws:/responses"],
        "capabilities": { "family": "scripted", "type": "chat", "object": "model_capabilities", "tokenizer": "o200k_base",
            "limits": { "max_context_window_tokens": 128000, "max_prompt_tokens": 128000, "max_output_tokens": 16000 },
            "supports": { "streaming": true, "tool_calls": true, "parallel_tool_calls": true, "vision": false } },
    }]})
}

/// The Responses API's events of a turn that answers [`TEXT`].
fn turn_events(n: usize) -> Vec<Value> {
    let id = format!("resp_{n}");
    let done = json!({ "id": format!("msg_{n}"), "type": "message", "role": "assistant", "status": "completed",
        "content": [{ "type": "output_text", "text": TEXT, "annotations": [] }] });
    vec![
        json!({ "type": "response.created", "response": { "id": id, "object": "response", "status": "in_progress", "output": [] } }),
        json!({ "type": "response.output_item.added", "output_index": 0,
                "item": { "id": format!("msg_{n}"), "type": "message", "role": "assistant", "status": "in_progress", "content": [] } }),
        json!({ "type": "response.output_text.delta", "item_id": format!("msg_{n}"), "output_index": 0, "content_index": 0, "delta": TEXT }),
        json!({ "type": "response.output_item.done", "output_index": 0, "item": done }),
        json!({ "type": "response.completed", "response": { "id": id, "object": "response", "status": "completed",
                "output": [done], "usage": { "input_tokens": 5, "output_tokens": 8, "total_tokens": 13 } } }),
    ]
}

/// What the handler saw: a description per request or message.
type Seen = Mutex<Sender<String>>;

fn serve_models(request: &mut CopilotRequest, response: &mut CopilotResponse, seen: &Seen) -> Result<(), String> {
    request.read_body()?;
    seen.lock().unwrap().send(format!("http {} {}", request.method, request.url)).unwrap();
    if !request.url.ends_with("/models") {
        return Err(format!("no such endpoint here: {}", request.url));
    }
    let json = CopilotHeaders::from([("content-type".to_owned(), vec!["application/json".to_owned()])]);
    response.start(200, &json)?;
    response.write(models().to_string().as_bytes())?;
    response.end()
}

/// The model behind the WebSocket: a turn's events for each `response.create`.
struct Model {
    response: CopilotWebSocketResponse,
    seen: Sender<String>,
    turns: usize,
}

impl CopilotWebSocketHandler for Model {
    fn send_request_message(&mut self, message: CopilotWebSocketMessage) -> Result<(), String> {
        let body: Value = serde_json::from_slice(&message.data).map_err(|e| e.to_string())?;
        self.seen.send(format!("message {}", body["type"].as_str().unwrap_or("?"))).unwrap();
        self.turns += 1;
        for event in turn_events(self.turns) {
            self.response.send_message(CopilotWebSocketMessage::from_text(event.to_string()))?;
        }
        Ok(())
    }

    fn close(&mut self) {
        self.seen.send("closed".into()).unwrap();
    }
}

struct Serving(Seen);

impl CopilotRequestHandler for Serving {
    fn handle(&self, mut request: CopilotRequest, response: &mut CopilotResponse) -> Result<(), String> {
        serve_models(&mut request, response, &self.0)
    }

    fn open_websocket(
        &self,
        context: &CopilotRequestContext,
        response: CopilotWebSocketResponse,
    ) -> Option<Result<Box<dyn CopilotWebSocketHandler>, String>> {
        let seen = self.0.lock().unwrap().clone();
        seen.send(format!("websocket {} {context:?}", context.url)).unwrap();
        Some(Ok(Box::new(Model { response, seen, turns: 0 })))
    }
}

/// What the handler saw, up to and including `last`.
fn seen_until(seen: &Receiver<String>, last: &str) -> Vec<String> {
    let mut log: Vec<String> = Vec::new();
    while log.last().map(String::as_str) != Some(last) {
        log.push(seen.recv_timeout(TURN).unwrap_or_else(|_| panic!("no {last}: {log:#?}")));
    }
    log
}

fn assert_reply(session: &copilot_host::Session) {
    let reply = session.send_and_wait("Say something.", TURN).expect("the turn");
    match reply.as_ref().map(|e| &e.kind) {
        Some(EventKind::AssistantMessage(m)) => assert_eq!(m.content, TEXT),
        other => panic!("the turn's reply: {other:?}"),
    }
}

#[test]
fn the_cli_s_websocket_is_carried_by_the_handler_across_turns_and_closed_once() {
    let dir = TempDir::new("copilot-inference-ws");
    let model = ScriptedModel::start().expect("start the scripted model");
    let (tx, seen) = channel();
    let options = scripted_options(Transport::Stdio, dir.path(), &model).request_handler(Serving(Mutex::new(tx)));
    let client = Client::start(options).expect("start the CLI");
    let session = client.create_session(scripted_session(dir.path(), "inference-ws")).expect("create");
    for _ in 0..2 {
        let reply = session.send_and_wait("Say something.", TURN).expect("the turn");
        match reply.as_ref().map(|e| &e.kind) {
            Some(EventKind::AssistantMessage(m)) => assert_eq!(m.content, TEXT),
            other => panic!("the turn's reply: {other:?}"),
        }
    }
    session.destroy().expect("destroy");
    // The CLI closes its WebSocket when the session ends.
    let mut log: Vec<String> = Vec::new();
    while log.last().map(String::as_str) != Some("closed") {
        log.push(seen.recv_timeout(TURN).unwrap_or_else(|_| panic!("no close: {log:#?}")));
    }
    let opened: Vec<&String> = log.iter().filter(|l| l.starts_with("websocket ")).collect();
    assert_eq!(opened.len(), 1, "one WebSocket for both turns: {log:#?}");
    assert!(opened[0].contains("/responses") && opened[0].contains("<redacted>"), "{log:#?}");
    assert!(!opened[0].contains("scripted-token"), "no token in Debug: {log:#?}");
    let messages: Vec<&String> = log.iter().filter(|l| l.starts_with("message ")).collect();
    assert_eq!(messages, ["message response.create", "message response.create"], "{log:#?}");
    assert!(!log.iter().any(|l| l.contains("http POST")), "no HTTP completion: {log:#?}");
    client.stop().expect("stop");
}

#[test]
fn without_websocket_support_the_refusal_makes_the_cli_send_the_request_over_http() {
    let dir = TempDir::new("copilot-inference-ws-refused");
    let model = ScriptedModel::start().expect("start the scripted model");
    let (tx, seen) = channel();
    let seen_by = Mutex::new(tx);
    // A closure serves HTTP only: the WebSocket is refused.
    let handler = move |mut request: CopilotRequest, response: &mut CopilotResponse| {
        serve_models(&mut request, response, &seen_by)
    };
    let options = scripted_options(Transport::Stdio, dir.path(), &model).request_handler(handler);
    let client = Client::start(options).expect("start the CLI");
    let session = client.create_session(scripted_session(dir.path(), "inference-ws-refused")).expect("create");
    let err = session.send_and_wait("Say something.", TURN).expect_err("HTTP /responses is not served here");
    assert!(err.to_string().contains("no such endpoint here"), "{err}");
    let log: Vec<String> = seen.try_iter().collect();
    assert!(log.iter().any(|l| l.starts_with("http POST") && l.ends_with("/responses")), "{log:#?}");
    client.stop().expect("stop");
}

#[test]
fn the_websocket_of_a_cli_that_died_ends_when_the_cli_is_started_again() {
    let dir = TempDir::new("copilot-inference-ws-recovery");
    let model = ScriptedModel::start().expect("start the scripted model");
    let (tx, seen) = channel();
    let options = scripted_options(Transport::Stdio, dir.path(), &model).request_handler(Serving(Mutex::new(tx)));
    let client = Client::start(options).expect("start the CLI");
    let (steps_tx, steps) = channel();
    let steps_tx = Mutex::new(steps_tx);
    client.on_recovery(move |e| {
        let _ = steps_tx.lock().unwrap().send(e.clone());
    });
    let session = client.create_session(scripted_session(dir.path(), "inference-ws-recovery")).expect("create");
    assert_reply(&session);
    let pid = client.cli_pid().expect("a pid");
    let killed = Command::new("kill").args(["-KILL", "--", &format!("-{pid}")]).status().expect("run kill");
    assert!(killed.success(), "kill -KILL -{pid}");
    let log = seen_until(&seen, "closed");
    loop {
        match steps.recv_timeout(TURN).expect("a recovery step") {
            RecoveryEvent::Recovered { .. } => break,
            RecoveryEvent::GaveUp { .. } => panic!("the recovery gave up"),
            _ => {}
        }
    }
    // The next turn, on the new CLI, opens a WebSocket of its own.
    assert_reply(&session);
    let after: Vec<String> = seen.try_iter().collect();
    let opened = |l: &[String]| l.iter().filter(|l| l.starts_with("websocket ")).count();
    assert_eq!((opened(&log), opened(&after)), (1, 1), "{log:#?} {after:#?}");
    client.stop().expect("stop");
}
