//! WebSocket model requests through the inference request handler, against
//! the fake CLI playing the CLI's side as the real CLI 1.0.102 does (see
//! `inference_websocket_real_cli.rs`): `llmInference.httpRequestStart`
//! with `transport: "websocket"`, the messages after the client's 101
//! head, one `httpRequestChunk` each, then the CLI's end. What the client
//! sends back is read from what the fake received, in order.

use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::Mutex;
use std::time::Duration;

use copilot_host::{
    Client, ClientOptions, CopilotRequest, CopilotRequestContext, CopilotRequestHandler, CopilotResponse,
    CopilotWebSocketHandler, CopilotWebSocketMessage, CopilotWebSocketResponse,
};
use copilot_tests::fake_server::{FakeServer, FakeServerConfig};
use serde_json::{json, Value};

const WAIT: Duration = Duration::from_secs(20);

/// What the handlers tell the test, in order.
#[derive(Debug, PartialEq)]
enum Seen {
    Opened(String),
    Message(CopilotWebSocketMessage),
    Closed,
}

/// A model behind a WebSocket: answers each message with `reply to ` and
/// its text, and fails (`Err`) or panics on a message saying so.
struct Model {
    response: CopilotWebSocketResponse,
    seen: Sender<Seen>,
}

impl CopilotWebSocketHandler for Model {
    fn send_request_message(&mut self, message: CopilotWebSocketMessage) -> Result<(), String> {
        let text = message.text().unwrap_or_default().to_owned();
        self.seen.send(Seen::Message(message)).unwrap();
        match text.as_str() {
            "fail" => Err("the model backend is down".into()),
            "panic" => panic!("the model handler broke"),
            _ => self.response.send_message(CopilotWebSocketMessage::from_text(format!("reply to {text}"))),
        }
    }

    fn close(&mut self) {
        self.seen.send(Seen::Closed).unwrap();
    }
}

struct Serving(Mutex<Sender<Seen>>);

impl CopilotRequestHandler for Serving {
    fn handle(&self, _: CopilotRequest, _: &mut CopilotResponse) -> Result<(), String> {
        Err("no HTTP here".into())
    }

    fn open_websocket(
        &self,
        context: &CopilotRequestContext,
        response: CopilotWebSocketResponse,
    ) -> Option<Result<Box<dyn CopilotWebSocketHandler>, String>> {
        let seen = self.0.lock().unwrap().clone();
        seen.send(Seen::Opened(format!("{context:?}"))).unwrap();
        Some(Ok(Box::new(Model { response, seen })))
    }
}

fn client(handler: impl CopilotRequestHandler + 'static) -> (FakeServer, Client) {
    let (server, from_server, to_server) = FakeServer::pipes(FakeServerConfig::default());
    let options = ClientOptions::default().request_handler(handler);
    let client = Client::from_streams_with(from_server, to_server, None, &options).expect("handshake");
    (server, client)
}

fn serving() -> (FakeServer, Client, Receiver<Seen>) {
    let (tx, rx) = channel();
    let (server, client) = client(Serving(Mutex::new(tx)));
    (server, client, rx)
}

/// Sends the CLI's request `method` for request `id`; the client acknowledges it.
fn cli_sends(server: &FakeServer, method: &str, params: Value, n: u64) {
    let answer = server.request_blocking(method, params, json!(format!("cli-{n}")), WAIT).expect("acknowledged");
    assert_eq!(answer["result"], json!({}), "{answer}");
}

fn open(server: &FakeServer, id: &str) {
    let head = json!({
        "requestId": id, "method": "GET", "url": "ws://127.0.0.1:9/responses", "transport": "websocket",
        "sessionId": "s1", "headers": { "authorization": ["Bearer sekrit"], "openai-intent": ["conversation-agent"] },
    });
    cli_sends(server, "llmInference.httpRequestStart", head, 0);
}

/// The client's responses for request `id`, in the order it sent them.
fn sent_for(server: &FakeServer, id: &str) -> Vec<Value> {
    server
        .received()
        .into_iter()
        .filter(|m| m["method"].as_str().is_some_and(|m| m.starts_with("llmInference.httpResponse")))
        .filter(|m| m["params"]["requestId"] == id)
        .map(|m| m["params"].clone())
        .collect()
}

fn wait_sent(server: &FakeServer, id: &str, what: impl Fn(&Value) -> bool) {
    let found = server.wait_received(WAIT, |m| m["params"]["requestId"] == id && what(&m["params"]));
    assert!(found.is_some(), "not sent: {:#?}", sent_for(server, id));
}

fn is_end(p: &Value) -> bool {
    p["end"] == true
}

#[test]
fn a_websocket_carries_messages_both_ways_in_order_and_is_closed_once() {
    let (server, client, seen) = serving();
    open(&server, "ws-1");
    let opened = match seen.recv_timeout(WAIT).unwrap() {
        Seen::Opened(debug) => debug,
        other => panic!("{other:?}"),
    };
    assert!(opened.contains("<redacted>") && !opened.contains("sekrit"), "{opened}");
    // As the real CLI: no message before the 101 head.
    wait_sent(&server, "ws-1", |p| p["status"] == 101);
    let messages = [("one", false), ("two", false), ("AP8=", true), ("three", false)];
    for (n, (data, binary)) in messages.iter().enumerate() {
        let chunk = json!({ "requestId": "ws-1", "data": data, "binary": binary, "end": false });
        cli_sends(&server, "llmInference.httpRequestChunk", chunk, n as u64 + 1);
    }
    cli_sends(&server, "llmInference.httpRequestChunk", json!({ "requestId": "ws-1", "data": "", "end": true }), 9);
    let got: Vec<Seen> = (0..5).map(|_| seen.recv_timeout(WAIT).unwrap()).collect();
    assert_eq!(
        got,
        vec![
            Seen::Message(CopilotWebSocketMessage::from_text("one")),
            Seen::Message(CopilotWebSocketMessage::from_text("two")),
            Seen::Message(CopilotWebSocketMessage { data: vec![0, 0xff], binary: true }),
            Seen::Message(CopilotWebSocketMessage::from_text("three")),
            Seen::Closed,
        ]
    );
    // Closed after the CLI was sent the end: everything the client sent is here.
    let sent = sent_for(&server, "ws-1");
    let shape: Vec<String> = sent
        .iter()
        .map(|p| match (&p["status"], &p["data"], &p["end"]) {
            (Value::Number(s), _, _) => format!("head {s}"),
            (_, _, Value::Bool(true)) => "end".to_owned(),
            (_, d, _) => d.as_str().unwrap().to_owned(),
        })
        .collect();
    // "AP8=" is no UTF-8: its text is empty.
    assert_eq!(shape, ["head 101", "reply to one", "reply to two", "reply to ", "reply to three", "end"], "{sent:#?}");
    assert!(sent.iter().all(|p| p.get("error").is_none()), "{sent:#?}");
    drop(client);
}

#[test]
fn a_handler_without_websocket_support_refuses_so_the_cli_uses_http() {
    // A closure serves HTTP only.
    let handler = |_: CopilotRequest, _: &mut CopilotResponse| -> Result<(), String> { Err("unused".into()) };
    let (server, _client) = client(handler);
    open(&server, "ws-2");
    wait_sent(&server, "ws-2", is_end);
    let refusal = copilot_host::core::INFERENCE_WEBSOCKET_UNSUPPORTED;
    assert_eq!(
        sent_for(&server, "ws-2"),
        vec![
            json!({ "requestId": "ws-2", "status": refusal.status, "headers": {} }),
            json!({ "requestId": "ws-2", "data": "", "end": true,
                    "error": { "message": refusal.message, "code": refusal.code } }),
        ]
    );
}

#[test]
fn a_failing_or_panicking_handler_ends_the_websocket_with_its_error_once() {
    for (word, error) in [("fail", "the model backend is down"), ("panic", "the model handler broke")] {
        let (server, client, seen) = serving();
        open(&server, "ws-3");
        assert!(matches!(seen.recv_timeout(WAIT).unwrap(), Seen::Opened(_)));
        wait_sent(&server, "ws-3", |p| p["status"] == 101);
        cli_sends(&server, "llmInference.httpRequestChunk", json!({ "requestId": "ws-3", "data": "hello" }), 1);
        cli_sends(&server, "llmInference.httpRequestChunk", json!({ "requestId": "ws-3", "data": word }), 2);
        assert_eq!(seen.recv_timeout(WAIT).unwrap(), Seen::Message(CopilotWebSocketMessage::from_text("hello")));
        assert_eq!(seen.recv_timeout(WAIT).unwrap(), Seen::Message(CopilotWebSocketMessage::from_text(word)));
        assert_eq!(seen.recv_timeout(WAIT).unwrap(), Seen::Closed);
        // Later messages of the ended WebSocket reach no handler.
        cli_sends(&server, "llmInference.httpRequestChunk", json!({ "requestId": "ws-3", "data": "late" }), 3);
        cli_sends(&server, "llmInference.httpRequestChunk", json!({ "requestId": "ws-3", "data": "", "end": true }), 4);
        let sent = sent_for(&server, "ws-3");
        let ends: Vec<&Value> = sent.iter().filter(|p| is_end(p)).collect();
        assert_eq!(ends.len(), 1, "{sent:#?}");
        let message = ends[0]["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains(error), "{sent:#?}");
        assert_eq!(sent.len(), 3, "the head, the reply to hello, the error: {sent:#?}");
        assert!(seen.try_recv().is_err(), "nothing after the close");
        drop(client);
    }
}

#[test]
fn a_websocket_open_when_the_client_stops_is_ended_and_its_handler_closed() {
    let (server, client, seen) = serving();
    open(&server, "ws-4");
    assert!(matches!(seen.recv_timeout(WAIT).unwrap(), Seen::Opened(_)));
    wait_sent(&server, "ws-4", |p| p["status"] == 101);
    client.stop().expect("stop");
    assert_eq!(seen.recv_timeout(WAIT).unwrap(), Seen::Closed);
    drop(server);
}
