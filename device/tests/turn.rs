//! The device host against a scripted CLI in the same thread: the peer
//! reads the frames the device writes and queues its answers and events,
//! which the device then reads in pieces cut at awkward places. Time is a
//! virtual clock that moves one millisecond per reading.

use std::collections::VecDeque;
use std::convert::Infallible;

use copilot_core::FrameDecoder;
use copilot_device::{
    Decision, Device, DeviceConfig, Error, Event, Handlers, PermissionRequest, SessionOptions, Tool, ToolCall,
};
use serde_json::{json, Value};

const SESSION: &str = "device-session-1";
/// The largest frame the device keeps in these tests.
const FRAME: usize = 2048;

/// What the scripted CLI does after the device's answer to the tool call.
#[derive(Clone, Copy, PartialEq)]
enum AfterTool {
    /// Streams the reply and goes idle.
    Reply,
    /// Closes the connection (end of stream).
    Close,
    /// Says nothing more, and answers nothing (a lost link).
    Silence,
}

/// A scripted Copilot CLI: the other end of the device's transport.
struct ScriptedCli {
    /// Bytes for the device to read.
    queued: VecDeque<u8>,
    /// Read sizes, used in turn (the queue is cut at these lengths).
    pieces: Vec<usize>,
    next_piece: usize,
    decoder: FrameDecoder<[u8; 65536]>,
    /// Every request the device sent, parsed.
    received: Vec<Value>,
    after_tool: AfterTool,
    closed: bool,
    silent: bool,
    /// Also asks what the device has no handler for, during the turn.
    foreign_waits: bool,
}

impl ScriptedCli {
    fn new(pieces: Vec<usize>, after_tool: AfterTool) -> Self {
        ScriptedCli {
            queued: VecDeque::new(),
            pieces,
            next_piece: 0,
            decoder: FrameDecoder::new(),
            received: Vec::new(),
            after_tool,
            closed: false,
            silent: false,
            foreign_waits: false,
        }
    }

    fn queue(&mut self, message: Value) {
        let body = message.to_string();
        self.queued.extend(format!("Content-Length: {}\r\n\r\n{body}", body.len()).bytes());
    }

    fn event(&mut self, event_type: &str, data: Value) {
        let event = json!({ "type": event_type, "id": format!("e-{}", self.queued.len()), "data": data });
        self.queue(
            json!({ "jsonrpc": "2.0", "method": "session.event", "params": { "sessionId": SESSION, "event": event } }),
        );
    }

    fn respond(&mut self, id: &Value, result: Value) {
        self.queue(json!({ "jsonrpc": "2.0", "id": id, "result": result }));
    }

    /// Acts on one request of the device.
    fn serve(&mut self, request: Value) {
        let id = request["id"].clone();
        if self.silent || request.get("method").is_none() {
            self.received.push(request);
            return;
        }
        match request["method"].as_str().unwrap_or_default() {
            "connect" => self.respond(&id, json!({ "protocolVersion": 3, "version": "1.0.102" })),
            "session.create" => {
                let lifecycle = json!({ "type": "session.created", "sessionId": SESSION });
                self.queue(json!({ "jsonrpc": "2.0", "method": "session.lifecycle", "params": lifecycle }));
                self.respond(&id, json!({ "sessionId": SESSION }));
                self.event("session.start", json!({ "sessionId": SESSION }));
            }
            "session.send" => {
                self.respond(&id, json!({ "messageId": "m-1" }));
                if self.foreign_waits {
                    self.event("elicitation.requested", json!({ "requestId": "eli-1", "message": "Pick one" }));
                    let params = json!({ "sessionId": SESSION, "question": "Which?", "allowFreeform": true });
                    self.queue(json!({ "jsonrpc": "2.0", "id": 77, "method": "userInput.request", "params": params }));
                }
                self.event("user.message", json!({ "content": request["params"]["prompt"] }));
                let ask =
                    json!({ "kind": "custom-tool", "toolName": "read_sensor", "toolCallId": "call-1", "args": {} });
                self.event("permission.requested", json!({ "requestId": "perm-1", "permissionRequest": ask }));
            }
            "session.permissions.handlePendingPermissionRequest" => {
                self.event("permission.completed", json!({ "requestId": "perm-1" }));
                self.respond(&id, json!({ "success": true }));
                let call = json!({ "requestId": "tool-1", "sessionId": SESSION, "toolCallId": "call-1",
                                   "toolName": "read_sensor", "arguments": { "unit": "celsius" } });
                self.event("external_tool.requested", call);
            }
            "session.tools.handlePendingToolCall" => match self.after_tool {
                AfterTool::Reply => {
                    self.respond(&id, json!({ "success": true }));
                    // Larger than the device keeps: skipped, the stream goes on.
                    self.event("system.message", json!({ "content": "x".repeat(FRAME * 2) }));
                    for piece in ["The sensor ", "reads \"21.5 C\"", "."] {
                        self.event("assistant.message_delta", json!({ "messageId": "a-1", "deltaContent": piece }));
                    }
                    self.event("assistant.message", json!({ "content": "The sensor reads \"21.5 C\"." }));
                    self.event("session.idle", json!({}));
                }
                AfterTool::Close => self.closed = true,
                AfterTool::Silence => self.silent = true,
            },
            "ping" => self.respond(&id, json!({ "message": "pong" })),
            "session.ui.handlePendingElicitation" => self.respond(&id, json!({ "success": true })),
            other => panic!("unexpected request {other}"),
        }
        self.received.push(request);
    }

    fn sent(&self, method: &str) -> Vec<&Value> {
        self.received.iter().filter(|r| r["method"] == method).collect()
    }
}

impl embedded_io::ErrorType for ScriptedCli {
    type Error = Infallible;
}

impl embedded_io::Read for ScriptedCli {
    fn read(&mut self, buf: &mut [u8]) -> Result<usize, Infallible> {
        assert!(!self.queued.is_empty() || self.closed, "a read that would block forever");
        let piece = self.pieces[self.next_piece % self.pieces.len()];
        self.next_piece += 1;
        let n = piece.min(buf.len()).min(self.queued.len());
        for (slot, byte) in buf.iter_mut().zip(self.queued.drain(..n)) {
            *slot = byte;
        }
        Ok(n)
    }
}

impl embedded_io::ReadReady for ScriptedCli {
    fn read_ready(&mut self) -> Result<bool, Infallible> {
        Ok(!self.queued.is_empty() || self.closed)
    }
}

impl embedded_io::Write for ScriptedCli {
    fn write(&mut self, bytes: &[u8]) -> Result<usize, Infallible> {
        let mut rest = bytes;
        while !rest.is_empty() {
            rest = &rest[self.decoder.feed(rest)..];
            while let Some(frame) = self.decoder.poll() {
                let body = frame.expect("the device writes whole, valid frames");
                let request: Value = serde_json::from_slice(body).expect("the device writes JSON");
                self.serve(request);
            }
        }
        Ok(bytes.len())
    }

    fn flush(&mut self) -> Result<(), Infallible> {
        Ok(())
    }
}

/// The application: a sensor tool, an approving user, a display.
#[derive(Default)]
struct Sensor {
    calls: Vec<(String, String)>,
    asked: Vec<(String, String)>,
    shown: String,
    whole: Option<String>,
    events: Vec<String>,
}

impl Handlers for Sensor {
    fn tool(&mut self, call: &ToolCall<'_>) -> Result<&str, &str> {
        self.calls.push((call.name.to_owned(), call.arguments.map(|a| a.raw().to_owned()).unwrap_or_default()));
        Ok("21.5 C")
    }

    fn permission(&mut self, request: &PermissionRequest<'_>) -> Decision {
        let text = |s: Option<copilot_device::JsonStr<'_>>| s.map(|s| s.to_string()).unwrap_or_default();
        self.asked.push((text(request.kind), text(request.tool_name)));
        Decision::ApproveOnce
    }

    fn event(&mut self, event: &Event<'_>) {
        match event {
            Event::Delta(text) => self.shown.push_str(&text.to_string()),
            Event::Message(text) => self.whole = Some(text.to_string()),
            Event::SessionError(_) => self.events.push("session.error".into()),
            Event::Other { event_type, .. } => self.events.push(event_type.to_string()),
            _ => {}
        }
    }
}

const TOOLS: [Tool<'static>; 1] = [Tool {
    name: "read_sensor",
    description: "Reads the temperature sensor.",
    parameters: r#"{"type":"object","properties":{"unit":{"type":"string"}}}"#,
}];

fn options() -> SessionOptions<'static> {
    SessionOptions { session_id: SESSION, model: Some("claude-sonnet-4.5"), streaming: true, tools: &TOOLS }
}

type TestDevice = Device<ScriptedCli, Box<dyn FnMut() -> u64>, FRAME, 512>;

fn device(cli: ScriptedCli, config: DeviceConfig) -> TestDevice {
    let mut now = 0;
    let clock: Box<dyn FnMut() -> u64> = Box::new(move || {
        now += 1;
        now
    });
    Device::new(cli, clock, config)
}

/// Runs a whole turn with reads cut into `pieces`.
fn whole_turn(pieces: Vec<usize>) {
    let mut device = device(ScriptedCli::new(pieces.clone(), AfterTool::Reply), DeviceConfig::new());
    let mut app = Sensor::default();
    device.connect(Some("s3cret")).expect("connect");
    device.create_session(&options()).expect("session.create");
    device.send_and_wait("What does the sensor read?", &mut app).unwrap_or_else(|e| panic!("{pieces:?}: {e}"));

    assert_eq!(app.asked, [("custom-tool".to_owned(), "read_sensor".to_owned())]);
    assert_eq!(app.calls, [("read_sensor".to_owned(), r#"{"unit":"celsius"}"#.to_owned())]);
    assert_eq!(app.shown, "The sensor reads \"21.5 C\".", "{pieces:?}");
    assert_eq!(app.whole.as_deref(), Some("The sensor reads \"21.5 C\"."));
    assert_eq!(app.events.last().map(String::as_str), Some("session.idle"));

    let stats = device.stats();
    assert_eq!((stats.router.oversize, stats.answered, stats.open_obligations), (1, 2, 0), "{stats:?}");
    let (cli, _) = device.into_parts();
    let connect = &cli.sent("connect")[0]["params"];
    assert_eq!((connect["token"].as_str(), connect["supportedTaskKinds"].clone()), (Some("s3cret"), json!([])));
    let create = &cli.sent("session.create")[0]["params"];
    assert_eq!(create["sessionId"], SESSION);
    assert_eq!(create["tools"][0]["name"], "read_sensor");
    assert_eq!(create["tools"][0]["parameters"]["properties"]["unit"]["type"], "string");
    // The engine's announcements: a permission handler, nothing else.
    assert_eq!((create["requestPermission"].clone(), create["requestUserInput"].clone()), (json!(true), json!(false)));
    assert_eq!(cli.sent("session.send")[0]["params"]["prompt"], "What does the sensor read?");
    let permission = &cli.sent("session.permissions.handlePendingPermissionRequest")[0]["params"];
    assert_eq!(
        *permission,
        json!({ "sessionId": SESSION, "requestId": "perm-1", "result": { "kind": "approve-once" } })
    );
    let tool = &cli.sent("session.tools.handlePendingToolCall")[0]["params"];
    let result = json!({ "textResultForLlm": "21.5 C", "resultType": "success" });
    assert_eq!(*tool, json!({ "sessionId": SESSION, "requestId": "tool-1", "result": result }));
    assert!(cli.sent("ping").is_empty(), "the link was never quiet");
}

#[test]
fn a_whole_turn_read_a_byte_at_a_time() {
    whole_turn(vec![1]);
}

#[test]
fn a_whole_turn_read_in_pieces_that_cut_headers_and_bodies() {
    whole_turn(vec![7, 1, 13, 2, 64, 3]);
    whole_turn(vec![17, 5]);
}

#[test]
fn a_whole_turn_read_in_pieces_of_every_size_up_to_a_read() {
    for size in 1..=64 {
        whole_turn(vec![size]);
    }
}

#[test]
fn a_whole_turn_read_in_large_pieces() {
    whole_turn(vec![64]);
}

#[test]
fn the_stream_ending_mid_turn_is_an_error() {
    let mut device = device(ScriptedCli::new(vec![5, 3], AfterTool::Close), DeviceConfig::new());
    let mut app = Sensor::default();
    device.connect(None).expect("connect");
    device.create_session(&options()).expect("session.create");
    let err = device.send_and_wait("What does the sensor read?", &mut app).expect_err("the CLI went away");
    assert_eq!(err, Error::Closed);
    assert_eq!(app.calls.len(), 1, "the tool ran before the stream ended");
    assert_eq!(device.stats().open_obligations, 0);
}

#[test]
fn a_silent_link_is_lost_after_an_unanswered_ping() {
    let config = DeviceConfig::new().keepalive(Some(500)).request_timeout(2_000);
    let mut device = device(ScriptedCli::new(vec![64], AfterTool::Silence), config);
    let mut app = Sensor::default();
    device.connect(None).expect("connect");
    device.create_session(&options()).expect("session.create");
    let err = device.send_and_wait("What does the sensor read?", &mut app).expect_err("the CLI went quiet");
    assert_eq!(err, Error::LinkLost);
    let (cli, _) = device.into_parts();
    assert_eq!(cli.sent("ping").len(), 1, "one ping, then its deadline");
}

#[test]
fn a_turn_past_its_deadline_ends() {
    // No keepalive: only the turn's own deadline ends the wait.
    let config = DeviceConfig::new().keepalive(None).turn_timeout(Some(5_000));
    let mut device = device(ScriptedCli::new(vec![64], AfterTool::Silence), config);
    device.connect(None).expect("connect");
    device.create_session(&options()).expect("session.create");
    let err = device.send_and_wait("What does the sensor read?", &mut Sensor::default()).expect_err("no end");
    assert_eq!(err, Error::TurnTimeout);
}

#[test]
fn a_refused_token_is_an_rpc_error() {
    let mut cli = ScriptedCli::new(vec![64], AfterTool::Reply);
    cli.silent = true;
    cli.queue(json!({ "jsonrpc": "2.0", "id": 1, "error": { "code": -32002, "message": "bad token" } }));
    let mut device = device(cli, DeviceConfig::new());
    assert_eq!(device.connect(Some("wrong")), Err(Error::Rpc { call: copilot_device::Call::Connect, code: -32002 }));
}

/// A broadcast wait without a handler here (an elicitation) is left to a
/// client of the session that has one (the answer table's `Unhandled`);
/// a request to this client (user input) gets the engine's refusal.
#[test]
fn waits_the_device_has_no_handler_for_are_left_or_refused() {
    let mut cli = ScriptedCli::new(vec![9, 2], AfterTool::Reply);
    cli.foreign_waits = true;
    let mut device = device(cli, DeviceConfig::new());
    let mut app = Sensor::default();
    device.connect(None).expect("connect");
    device.create_session(&options()).expect("session.create");
    device.send_and_wait("What does the sensor read?", &mut app).expect("the turn still ends");
    let stats = device.stats();
    assert_eq!((stats.open_obligations, stats.left_open), (0, 1), "every wait answered or left: {stats:?}");
    let (cli, _) = device.into_parts();
    let elicitation = cli.sent("session.ui.handlePendingElicitation");
    assert!(elicitation.is_empty(), "left to another client: {:?}", cli.received);
    let answered = cli.received.iter().filter(|r| r["id"] == 77 && r.get("method").is_none()).count();
    assert_eq!(answered, 1, "the server request got one response: {:?}", cli.received);
    assert_eq!(app.calls.len(), 1, "the tool still ran");
}

#[test]
fn a_tool_result_larger_than_the_transmit_store_is_answered_once_as_a_failure() {
    // Room for the permission answer, not for the tool's answer (its
    // result plus the room an answer takes besides it).
    let mut now = 0;
    let clock: Box<dyn FnMut() -> u64> = Box::new(move || {
        now += 1;
        now
    });
    let cli = ScriptedCli::new(vec![64], AfterTool::Reply);
    let mut device: Device<_, _, FRAME, 512, 440> = Device::new(cli, clock, DeviceConfig::new());
    let mut app = Sensor::default();
    device.connect(None).expect("connect");
    device.create_session(&options()).expect("session.create");
    device.send_and_wait("What does the sensor read?", &mut app).expect("the turn still ends");
    assert_eq!(app.calls.len(), 1, "the tool ran");
    let stats = device.stats();
    assert_eq!((stats.open_obligations, stats.unsent), (0, 0), "every wait answered: {stats:?}");
    let (cli, _) = device.into_parts();
    let tool = cli.sent("session.tools.handlePendingToolCall");
    assert_eq!(tool.len(), 1, "answered once: {:?}", cli.received);
    // A failed tool is answered `{requestId, error}`, as the official SDKs
    // answer it; the CLI tells the model in its own words.
    assert!(tool[0]["params"]["error"].is_string(), "{:?}", tool[0]);
    assert!(tool[0]["params"].get("result").is_none(), "{:?}", tool[0]);
    assert_eq!(cli.sent("session.permissions.handlePendingPermissionRequest").len(), 1);
}
