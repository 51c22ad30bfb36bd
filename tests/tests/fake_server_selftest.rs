//! The fake Copilot CLI server, driven with hand-written frames over pipes and
//! TCP and read back with `copilot_core::FrameDecoder`: the handshake, early
//! events before the `session.create` answer, a complete in-order flood,
//! server-to-client requests, the scripted turns and disconnection.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::mpsc::{self, Receiver};
use std::time::Duration;

use copilot_core::FrameDecoder;
use copilot_tests::fake_server::{FakeServer, FakeServerConfig};
use serde_json::{json, Value};

const TIMEOUT: Duration = Duration::from_secs(10);

/// A hand-rolled client: writes frames, and reads the server's frames on a
/// thread that hands them over parsed (`None` at end of stream).
struct Client {
    writer: Box<dyn Write + Send>,
    frames: Receiver<Option<Value>>,
    next_id: u64,
}

impl Client {
    fn new(mut reader: Box<dyn Read + Send>, writer: Box<dyn Write + Send>) -> Client {
        let (tx, frames) = mpsc::channel();
        std::thread::spawn(move || {
            let mut decoder = FrameDecoder::with_buffer(vec![0u8; 1 << 20]);
            loop {
                let n = match reader.read(decoder.spare()) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => n,
                };
                decoder.commit(n);
                while let Some(frame) = decoder.poll() {
                    let body = frame.expect("well-formed frame");
                    let value = serde_json::from_slice(body).expect("frame body is JSON");
                    if tx.send(Some(value)).is_err() {
                        return;
                    }
                }
            }
            assert!(decoder.finish().is_ok(), "stream ended inside a frame");
            let _ = tx.send(None);
        });
        Client { writer, frames, next_id: 1 }
    }

    fn over_pipes(config: FakeServerConfig) -> (FakeServer, Client) {
        let (server, reader, writer) = FakeServer::pipes(config);
        (server, Client::new(reader, writer))
    }

    fn over_tcp(config: FakeServerConfig) -> (FakeServer, Client) {
        let (server, addr) = FakeServer::tcp(config);
        let stream = TcpStream::connect(addr).unwrap();
        let reader = stream.try_clone().unwrap();
        (server, Client::new(Box::new(reader), Box::new(stream)))
    }

    fn send(&mut self, message: &Value) {
        let body = serde_json::to_vec(message).unwrap();
        let frame = [format!("Content-Length: {}\r\n\r\n", body.len()).into_bytes(), body].concat();
        self.writer.write_all(&frame).unwrap();
        self.writer.flush().unwrap();
    }

    /// Sends a request; returns its id.
    fn request(&mut self, method: &str, params: Value) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        id
    }

    /// The next frame, or `None` at end of stream.
    fn next(&self) -> Option<Value> {
        self.frames.recv_timeout(TIMEOUT).expect("a frame within the timeout")
    }

    fn expect_next(&self) -> Value {
        self.next().expect("a frame, not end of stream")
    }

    /// Sends a request and returns its response, with every frame that came
    /// before it.
    fn call(&mut self, method: &str, params: Value) -> (Value, Vec<Value>) {
        let id = self.request(method, params);
        let mut before = Vec::new();
        loop {
            let frame = self.expect_next();
            if frame["id"] == id && frame.get("method").is_none() {
                return (frame, before);
            }
            before.push(frame);
        }
    }

    fn connect(&mut self) {
        let (response, _) = self.call("connect", json!({}));
        assert_eq!(response["result"]["ok"], true, "{response}");
    }

    /// Creates a session; returns its id.
    fn create(&mut self) -> String {
        let (response, _) = self.call("session.create", json!({"model": "fake-model"}));
        let sid = response["result"]["sessionId"].as_str().expect("sessionId").to_owned();
        let start = self.expect_next();
        assert_eq!(start["params"]["event"]["type"], "session.start");
        sid
    }

    /// The event types up to and including `session.idle`.
    fn turn(&self) -> Vec<Value> {
        let mut events = Vec::new();
        loop {
            let frame = self.expect_next();
            assert_eq!(frame["method"], "session.event", "{frame}");
            let done = frame["params"]["event"]["type"] == "session.idle";
            events.push(frame["params"]["event"].clone());
            if done {
                return events;
            }
        }
    }
}

fn types(events: &[Value]) -> Vec<&str> {
    events.iter().map(|e| e["type"].as_str().unwrap()).collect()
}

#[test]
fn connect_handshake_over_pipes() {
    let (server, mut client) = Client::over_pipes(FakeServerConfig::default());
    let (response, before) = client.call("connect", json!({}));
    assert!(before.is_empty());
    assert_eq!(response["jsonrpc"], "2.0");
    assert_eq!(
        response["result"],
        json!({"ok": true, "protocolVersion": 3, "version": "fake", "taskKinds": ["agent", "shell"]})
    );
    let (status, _) = client.call("status.get", json!({}));
    assert_eq!(status["result"], json!({"version": "fake", "protocolVersion": 3}));
    let (ping, _) = client.call("ping", json!({"message": "hi"}));
    assert_eq!(ping["result"]["message"], "pong: hi");
    assert_eq!(ping["result"]["protocolVersion"], 3);
    assert!(ping["result"]["timestamp"].is_u64());
    let (unknown, _) = client.call("no.such.method", json!({}));
    assert_eq!(unknown["error"]["code"], -32601);

    let received = server.received();
    let methods: Vec<_> = received.iter().map(|m| m["method"].as_str().unwrap()).collect();
    assert_eq!(methods, ["connect", "status.get", "ping", "no.such.method"]);
}

#[test]
fn token_and_legacy_connect_over_tcp() {
    let (_server, mut client) = Client::over_tcp(FakeServerConfig::default().with_token("s3cret"));
    let (denied, _) = client.call("connect", json!({}));
    assert_eq!(denied["error"]["code"], -32002);
    assert_eq!(denied["error"]["message"], "AUTHENTICATION_FAILED");
    let (wrong, _) = client.call("connect", json!({"token": "nope"}));
    assert_eq!(wrong["error"]["code"], -32002);
    let (ok, _) = client.call("connect", json!({"token": "s3cret"}));
    assert_eq!(ok["result"]["ok"], true);

    let legacy = FakeServerConfig::default().with_legacy_connect(true).with_protocol_version(2);
    let (_server, mut client) = Client::over_tcp(legacy);
    let (connect, _) = client.call("connect", json!({}));
    assert_eq!(connect["error"]["code"], -32601);
    let (ping, _) = client.call("ping", json!({}));
    assert_eq!(ping["result"]["protocolVersion"], 2);
}

#[test]
fn create_sends_early_events_before_its_answer() {
    let config = FakeServerConfig { early_events: 3, early_permission_requests: 2, ..FakeServerConfig::default() };
    let (server, mut client) = Client::over_pipes(config);
    client.connect();
    let (response, before) = client.call("session.create", json!({"sessionId": "client-id", "model": "m"}));
    assert_eq!(response["result"]["sessionId"], "client-id");
    assert_eq!(response["result"]["workspacePath"], "/tmp/fake-copilot/session-state/client-id");
    assert_eq!(response["result"]["modelState"]["modelId"], "m");

    assert_eq!(before.len(), 6, "{before:?}");
    assert_eq!(before[0]["method"], "session.lifecycle");
    assert_eq!(before[0]["params"]["type"], "session.created");
    assert_eq!(before[0]["params"]["sessionId"], "client-id");
    for (n, frame) in before[1..4].iter().enumerate() {
        assert_eq!(frame["params"]["sessionId"], "client-id");
        assert_eq!(frame["params"]["event"]["type"], "session.info");
        assert_eq!(frame["params"]["event"]["data"], json!({ "n": n }));
    }
    for (i, frame) in before[4..].iter().enumerate() {
        let event = &frame["params"]["event"];
        assert_eq!(event["type"], "permission.requested");
        assert_eq!(event["data"]["requestId"], format!("perm-{i}"));
        assert_eq!(event["data"]["permissionRequest"]["kind"], "shell");
    }
    let mut ids: Vec<_> = before[1..].iter().map(|f| f["params"]["event"]["id"].as_str().unwrap()).collect();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), 5, "event ids are unique");

    let start = client.expect_next();
    assert_eq!(start["params"]["event"]["type"], "session.start");
    assert_eq!(start["params"]["event"]["data"]["sessionId"], "client-id");

    // Without a sessionId the server assigns one; both are listed.
    let (second, _) = client.call("session.create", json!({}));
    assert_eq!(second["result"]["sessionId"], "fake-1");
    let (list, _) = client.call("session.list", json!({}));
    let listed: Vec<_> =
        list["result"]["sessions"].as_array().unwrap().iter().map(|s| s["sessionId"].clone()).collect();
    assert_eq!(listed, [json!("client-id"), json!("fake-1")]);
    let (last, _) = client.call("session.getLastId", json!({}));
    assert_eq!(last["result"]["sessionId"], "fake-1");
    let (unknown, _) = client.call("session.resume", json!({"sessionId": "nobody"}));
    assert_eq!(unknown["error"]["code"], -32603);
    drop(server);
}

#[test]
fn a_held_create_answer_waits_for_its_release() {
    let config = FakeServerConfig::default().with_early(1, 0).with_hold_create_response(true);
    let (server, mut client) = Client::over_pipes(config);
    client.connect();
    let id = client.request("session.create", json!({"sessionId": "held"}));
    assert_eq!(client.expect_next()["params"]["type"], "session.created");
    assert_eq!(client.expect_next()["params"]["event"]["type"], "session.info");
    // Written after the early frames and before the release: it must reach
    // the client before the answer.
    let _ = server.request("ping", json!({}), json!("before-release"));
    assert_eq!(client.expect_next()["id"], "before-release");
    server.release_create_response();
    let answer = client.expect_next();
    assert_eq!((&answer["id"], &answer["result"]["sessionId"]), (&json!(id), &json!("held")));
    // Released for good: a second create is answered at once.
    let (second, _) = client.call("session.create", json!({"sessionId": "next"}));
    assert_eq!(second["result"]["sessionId"], "next");
}

#[test]
fn default_turn_mimics_the_cli_without_a_model_and_reply_text_replies() {
    let (_server, mut client) = Client::over_pipes(FakeServerConfig::default());
    client.connect();
    let sid = client.create();
    let (response, _) = client.call("session.send", json!({"sessionId": sid, "prompt": "hello"}));
    assert_eq!(response["result"]["messageId"], "m-1");
    let turn = client.turn();
    assert_eq!(types(&turn), ["user.message", "assistant.turn_start", "session.error", "session.idle"]);
    assert_eq!(turn[2]["data"], json!({"errorType": "authentication", "message": "No model endpoint"}));

    let (abort, _) = client.call("session.abort", json!({ "sessionId": sid }));
    assert_eq!(abort["result"], json!({"success": true}));
    assert_eq!(types(&client.turn()), ["abort", "session.idle"]);
    let (destroy, before) = client.call("session.destroy", json!({ "sessionId": sid }));
    assert_eq!(destroy["result"], json!({"success": true}));
    assert_eq!(before[0]["params"]["event"]["type"], "session.shutdown");

    let (_server, mut client) = Client::over_tcp(FakeServerConfig::default().with_reply_text("Hello there, world"));
    client.connect();
    let sid = client.create();
    client.call("session.send", json!({"sessionId": sid, "prompt": "hi"}));
    let turn = client.turn();
    assert_eq!(
        types(&turn),
        [
            "user.message",
            "assistant.turn_start",
            "assistant.message_delta",
            "assistant.message_delta",
            "assistant.message_delta",
            "assistant.message",
            "assistant.turn_end",
            "session.idle"
        ]
    );
    let deltas: String = turn[2..5].iter().map(|e| e["data"]["deltaContent"].as_str().unwrap()).collect();
    assert_eq!(deltas, "Hello there, world");
    assert_eq!(turn[5]["data"]["content"], "Hello there, world");
    assert_eq!(turn[5]["data"]["messageId"], turn[2]["data"]["messageId"]);
}

fn check_flood(client: &Client, sid: &str, events: usize) {
    for i in 0..events {
        let frame = client.expect_next();
        let event = &frame["params"]["event"];
        assert_eq!(frame["params"]["sessionId"], sid);
        assert_eq!(event["type"], "assistant.message_delta");
        assert_eq!(event["id"], i.to_string(), "event {i} out of order");
        assert_eq!(event["data"], json!({"messageId": "m", "deltaContent": i.to_string()}));
    }
    let idle = client.expect_next();
    assert_eq!(idle["params"]["event"]["type"], "session.idle");
}

#[test]
fn flood_arrives_complete_and_in_order() {
    for (server, mut client) in
        [Client::over_tcp(FakeServerConfig::default()), Client::over_pipes(FakeServerConfig::default())]
    {
        client.connect();
        let sid = client.create();
        let (response, before) = client.call("session.send", json!({"sessionId": sid, "prompt": "flood:1000"}));
        assert!(before.is_empty());
        assert!(response["result"]["messageId"].is_string());
        check_flood(&client, &sid, 1000);

        // The same from the test's side, big enough to span many batches.
        server.flood(&sid, 20_000).unwrap();
        check_flood(&client, &sid, 20_000);
    }
}

#[test]
fn server_requests_get_the_clients_answers() {
    let (server, mut client) = Client::over_tcp(FakeServerConfig::default());
    client.connect();

    let answer = server.request("userInput.request", json!({"sessionId": "nobody", "question": "?"}), json!("req-1"));
    let request = client.expect_next();
    assert_eq!(request["id"], "req-1");
    assert_eq!(request["method"], "userInput.request");
    assert_eq!(request["params"]["question"], "?");
    client.send(&json!({"jsonrpc": "2.0", "id": "req-1", "error": {"code": -32603, "message": "unknown session"}}));
    let response = answer.recv_timeout(TIMEOUT).unwrap();
    assert_eq!(response["id"], "req-1");
    assert_eq!(response["error"]["code"], -32603);
    assert!(server.received().contains(&response));

    // A numeric id is matched as a number; an answer to another id is not delivered.
    let answer = server.request("userInput.request", json!({}), json!(7));
    assert_eq!(client.expect_next()["id"], 7);
    client.send(&json!({"jsonrpc": "2.0", "id": "7", "result": {"answer": "wrong id"}}));
    client.send(&json!({"jsonrpc": "2.0", "id": 7, "result": {"answer": "yes", "wasFreeform": true}}));
    assert_eq!(answer.recv_timeout(TIMEOUT).unwrap()["result"]["answer"], "yes");

    // Raw frames go out verbatim.
    server.send_raw(r#"{"jsonrpc":"2.0","method":"custom.note","params":{}}"#).unwrap();
    assert_eq!(client.expect_next()["method"], "custom.note");

    // Closing disconnects pending requests and the client.
    let pending = server.request("userInput.request", json!({}), json!(8));
    assert_eq!(client.expect_next()["id"], 8);
    server.close();
    assert!(pending.recv_timeout(TIMEOUT).is_err());
    assert_eq!(client.next(), None);
    assert!(server.wait_timeout(TIMEOUT));
}

#[test]
fn close_on_method_drops_the_connection_unanswered() {
    let (server, mut client) = Client::over_pipes(FakeServerConfig::default().with_close_on_method("session.send"));
    client.connect();
    let sid = client.create();
    client.request("session.send", json!({"sessionId": sid, "prompt": "hi"}));
    assert_eq!(client.next(), None, "the connection closes without an answer");
    assert!(server.wait_timeout(TIMEOUT));
    assert!(server.is_closed());
    assert!(server.wait_received(TIMEOUT, |m| m["method"] == "session.send").is_some());
}

#[test]
fn runtime_shutdown_is_answered_then_the_server_stops() {
    let (server, mut client) = Client::over_tcp(FakeServerConfig::default());
    client.connect();
    let (response, _) = client.call("runtime.shutdown", json!({}));
    assert_eq!(response["result"], json!({}));
    assert_eq!(client.next(), None);
    assert!(server.wait_timeout(TIMEOUT));
}
