//! The scripted model server (`copilot_testkit::scripted_model`): what it
//! answers on raw sockets, then the real Copilot CLI 1.0.102 (installed by
//! `npm ci`) running turns against it over stdio. The CLI tests never skip:
//! without the CLI they fail and say how to install it.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use copilot_host::{Client, EventKind, Session, SessionConfig, SessionEvent, Transport};
use copilot_testkit::scripted_model::{ModelRequest, Reply, ScriptedModel, ToolCall};
use copilot_tests::real_cli::{isolated_options, TempDir};
use serde_json::{json, Value};

const TURN_TIMEOUT: Duration = Duration::from_secs(60);
/// What the CLI tells the model about a tool call it denied because no one
/// could be asked for permission.
const DENIED: &str = "Permission denied and could not request permission from user. \
                      Copilot needed the user's approval and no one could answer.";

// ---------------------------------------------------------------------------
// HTTP, on raw sockets
// ---------------------------------------------------------------------------

/// One HTTP response as read off the socket.
struct Response {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Response {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }

    fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|e| panic!("not JSON ({e}): {:?}", self.text()))
    }

    fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

fn read_line(reader: &mut impl BufRead) -> String {
    let mut line = String::new();
    reader.read_line(&mut line).expect("read a line");
    line.trim_end_matches(['\r', '\n']).to_owned()
}

/// Reads a response framed by Content-Length, chunked encoding, or the end
/// of the connection.
fn read_response(reader: &mut impl BufRead) -> Response {
    let status_line = read_line(reader);
    let status = status_line.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap_or_else(|| {
        panic!("bad status line {status_line:?}");
    });
    let mut headers = Vec::new();
    loop {
        let line = read_line(reader);
        if line.is_empty() {
            break;
        }
        let (name, value) = line.split_once(':').expect("header line");
        headers.push((name.trim().to_owned(), value.trim().to_owned()));
    }
    let mut response = Response { status, headers, body: Vec::new() };
    if response.header("transfer-encoding") == Some("chunked") {
        loop {
            let size = usize::from_str_radix(&read_line(reader), 16).expect("chunk size");
            if size == 0 {
                assert_eq!(read_line(reader), "", "no trailers");
                break;
            }
            let start = response.body.len();
            response.body.resize(start + size, 0);
            reader.read_exact(&mut response.body[start..]).expect("chunk data");
            assert_eq!(read_line(reader), "", "chunk ends with CRLF");
        }
    } else if let Some(n) = response.header("content-length") {
        response.body = vec![0; n.parse().expect("Content-Length")];
        reader.read_exact(&mut response.body).expect("body");
    } else {
        reader.read_to_end(&mut response.body).expect("close-delimited body");
    }
    response
}

/// A keep-alive connection to the server.
struct Connection {
    writer: TcpStream,
    reader: BufReader<TcpStream>,
}

impl Connection {
    fn open(model: &ScriptedModel) -> Connection {
        let addr = model.url().trim_start_matches("http://").to_owned();
        let writer = TcpStream::connect(addr).expect("connect to the model server");
        writer.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let reader = BufReader::new(writer.try_clone().unwrap());
        Connection { writer, reader }
    }

    fn send(&mut self, raw: &[u8]) -> Response {
        self.writer.write_all(raw).expect("send the request");
        read_response(&mut self.reader)
    }

    fn post_json(&mut self, path: &str, extra_headers: &str, body: &Value) -> Response {
        let body = body.to_string();
        let head = format!(
            "POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n{extra_headers}\
             Content-Length: {}\r\n\r\n",
            body.len()
        );
        self.send(&[head.as_bytes(), body.as_bytes()].concat())
    }
}

/// The `data:` payloads of a server-sent event stream.
fn sse_data(body: &str) -> Vec<String> {
    assert!(body.ends_with("\n\n"), "events end with a blank line: {body:?}");
    body.split("\n\n")
        .filter(|e| !e.is_empty())
        .map(|e| e.strip_prefix("data: ").unwrap_or_else(|| panic!("not a data line: {e:?}")).to_owned())
        .collect()
}

#[test]
fn serves_documents_over_one_keep_alive_connection() {
    let model = ScriptedModel::start().expect("start the model server");
    let mut c = Connection::open(&model);

    let user = c.send(b"GET /copilot_internal/user HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer t\r\n\r\n");
    assert_eq!(user.status, 200);
    let user = user.json();
    assert_eq!(user["endpoints"]["api"], model.url());
    assert_eq!(user["endpoints"]["telemetry"], format!("{}/telemetry", model.url()));

    let models = c.send(b"GET /models HTTP/1.1\r\nHost: x\r\n\r\n");
    assert_eq!((models.status, models.header("content-type")), (200, Some("application/json")));
    let listed = &models.json()["data"][0];
    assert_eq!(listed["id"], ScriptedModel::MODEL);
    assert_eq!(listed["supported_endpoints"], json!(["/chat/completions"]));
    assert_eq!(listed["capabilities"]["supports"]["streaming"], true);
    assert_eq!(listed["capabilities"]["supports"]["tool_calls"], true);

    let settings = c.send(
        b"GET /copilot_internal/managed_settings?client_id=github%2Fcli HTTP/1.1\r\nHost: x\r\n\r\n\
          GET /copilot_internal/team_customizations HTTP/1.1\r\nHost: x\r\n\r\n",
    );
    assert_eq!(settings.status, 404, "pipelined requests are answered in order");
    assert_eq!(read_response(&mut c.reader).status, 404);

    // Telemetry arrives gzip-compressed and chunked; its bytes are not read.
    let telemetry = c.send(
        b"POST /telemetry/telemetry HTTP/1.1\r\nHost: x\r\nContent-Encoding: gzip\r\n\
          Transfer-Encoding: chunked\r\n\r\n3;ext=1\r\n\x1f\x8b\x08\r\n2\r\n\x00\x00\r\n0\r\n\r\n",
    );
    assert_eq!((telemetry.status, telemetry.json()), (200, json!({})));

    let unknown = c.send(b"DELETE /nowhere HTTP/1.1\r\nHost: x\r\n\r\n");
    assert_eq!(unknown.status, 404);
    // Every request recorded. The server's workers take the two pipelined
    // ones at once, so they may be recorded in either order (their
    // answers come in order, as checked above).
    let mut recorded = model.other_requests();
    recorded[2..4].sort();
    assert_eq!(
        recorded,
        [
            "GET /copilot_internal/user",
            "GET /models",
            "GET /copilot_internal/managed_settings?client_id=github%2Fcli",
            "GET /copilot_internal/team_customizations",
            "POST /telemetry/telemetry",
            "DELETE /nowhere",
        ]
    );
    assert_eq!(model.connect_attempts(), 0);
    assert!(model.requests().is_empty());
}

#[test]
fn answers_the_mcp_handshake_with_no_tools() {
    let model = ScriptedModel::start().expect("start the model server");
    let mut c = Connection::open(&model);
    let rpc = |c: &mut Connection, message: Value| c.post_json("/mcp/readonly", "", &message);

    let discover = rpc(&mut c, json!({ "jsonrpc": "2.0", "id": 0, "method": "server/discover" }));
    assert_eq!((discover.status, &discover.json()["error"]["code"]), (200, &json!(-32601)));
    let init = rpc(
        &mut c,
        json!({ "jsonrpc": "2.0", "id": 1, "method": "initialize", "params": { "protocolVersion": "2025-11-25" } }),
    );
    let init = init.json();
    assert_eq!((&init["id"], &init["result"]["protocolVersion"]), (&json!(1), &json!("2025-11-25")));
    assert_eq!(init["result"]["capabilities"], json!({ "tools": {} }));
    let initialized = rpc(&mut c, json!({ "jsonrpc": "2.0", "method": "notifications/initialized" }));
    assert_eq!((initialized.status, initialized.body.len()), (202, 0));
    let tools = rpc(&mut c, json!({ "jsonrpc": "2.0", "id": 2, "method": "tools/list" }));
    assert_eq!(tools.json()["result"], json!({ "tools": [] }));
    assert_eq!(c.send(b"GET /mcp/readonly HTTP/1.1\r\nHost: x\r\n\r\n").status, 405, "no event stream");
    assert_eq!(
        model.other_requests()[..2],
        ["POST /mcp/readonly (server/discover)", "POST /mcp/readonly (initialize)"]
    );
}

#[test]
fn refuses_and_counts_outbound_attempts() {
    let model = ScriptedModel::start().expect("start the model server");
    let mut c = Connection::open(&model);
    let refused = c.send(b"CONNECT api.githubcopilot.com:443 HTTP/1.1\r\nHost: api.githubcopilot.com:443\r\n\r\n");
    assert_eq!(refused.status, 403);

    let mut c = Connection::open(&model);
    let proxied = c.send(b"GET http://example.com/ HTTP/1.1\r\nHost: example.com\r\n\r\n");
    assert_eq!(proxied.status, 403);
    assert_eq!(model.connect_attempts(), 2);
    assert_eq!(model.other_requests(), ["CONNECT api.githubcopilot.com:443", "GET http://example.com/"]);
}

#[test]
fn model_calls_follow_the_script_then_the_default() {
    let model = ScriptedModel::start().expect("start the model server");
    model.script(
        "s1",
        vec![
            Reply::TextAndToolCalls {
                text: "Let me look.".into(),
                tool_calls: vec![
                    ToolCall::new("view", json!({ "path": "a.txt" })),
                    ToolCall { id: "mine".into(), ..ToolCall::new("glob", json!("{not json")) },
                ],
            },
            Reply::text("Done."),
        ],
    );
    let mut c = Connection::open(&model);
    let call = |c: &mut Connection, session: &str| {
        let body = json!({ "model": ScriptedModel::MODEL, "messages": [
            { "role": "system", "content": "be brief" },
            { "role": "user", "content": "<current_datetime>now</current_datetime>\n\nfirst" },
            { "role": "assistant", "content": null, "tool_calls": [] },
            { "role": "tool", "tool_call_id": "call_0", "content": "result one" },
            { "role": "tool", "tool_call_id": "call_9", "content": [{ "type": "text", "text": "result two" }] },
            { "role": "user", "content": [{ "type": "text", "text": "second" }] }
        ]});
        c.post_json("/chat/completions", &format!("x-client-session-id: {session}\r\n"), &body)
    };

    let first = call(&mut c, "s1");
    assert_eq!(first.status, 200);
    let first = first.json();
    assert_eq!((&first["object"], &first["model"]), (&json!("chat.completion"), &json!(ScriptedModel::MODEL)));
    let choice = &first["choices"][0];
    assert_eq!(choice["finish_reason"], "tool_calls");
    assert_eq!(choice["message"]["content"], "Let me look.");
    assert_eq!(
        choice["message"]["tool_calls"],
        json!([
            { "id": "call_1", "type": "function", "function": { "name": "view", "arguments": "{\"path\":\"a.txt\"}" } },
            { "id": "mine", "type": "function", "function": { "name": "glob", "arguments": "{not json" } }
        ])
    );
    let usage = &first["usage"];
    assert!(usage["prompt_tokens"].as_u64() > Some(0) && usage["completion_tokens"].as_u64() > Some(0));

    let second = call(&mut c, "s1").json();
    assert_eq!(
        (&second["choices"][0]["message"]["content"], &second["choices"][0]["finish_reason"]),
        (&json!("Done."), &json!("stop"))
    );
    assert!(second["choices"][0]["message"].get("tool_calls").is_none());
    assert_ne!(first["id"], second["id"], "each completion has its own id");
    let exhausted = call(&mut c, "s1").json();
    assert_eq!(exhausted["choices"][0]["message"]["content"], "Hello from the scripted model.");
    model.set_default(Reply::tool_call("bash", json!({ "command": "ls" })));
    let other = call(&mut c, "s2").json();
    assert_eq!(other["choices"][0]["message"]["tool_calls"][0]["id"], "call_2", "ids count across sessions");

    let seen = model.requests();
    assert_eq!(seen.len(), 4);
    assert_eq!(model.requests_for("s1").len(), 3);
    let last: &ModelRequest = &model.requests_for("s2")[0];
    assert_eq!((last.session_id.as_deref(), last.streamed), (Some("s2"), false));
    assert_eq!(last.tool_results(), ["result one", "result two"]);
    assert_eq!(last.last_user_text().as_deref(), Some("second"));
    assert_eq!(last.messages().len(), 6);
    assert!(model.other_requests().is_empty(), "model calls are kept apart: {:?}", model.other_requests());
}

#[test]
fn streamed_model_calls_are_server_sent_chunks() {
    let model = ScriptedModel::start().expect("start the model server");
    let text = "A streamed reply, long enough for several deltas: ünïcödé too.";
    model.script(
        "s",
        vec![
            Reply::text(text),
            Reply::tool_call("bash", json!({ "command": "echo a fairly long command line", "description": "d" })),
        ],
    );
    let body = json!({ "model": ScriptedModel::MODEL, "stream": true, "messages": [] });
    // A chunked request body, as well.
    let body = body.to_string();
    let (a, b) = body.split_at(10);
    let raw = format!(
        "POST /chat/completions HTTP/1.1\r\nHost: x\r\nx-client-session-id: s\r\nTransfer-Encoding: chunked\r\n\r\n\
         {:x}\r\n{a}\r\n{:x}\r\n{b}\r\n0\r\n\r\n",
        a.len(),
        b.len()
    );
    let mut c = Connection::open(&model);
    let response = c.send(raw.as_bytes());
    assert_eq!((response.status, response.header("content-type")), (200, Some("text/event-stream")));
    assert_eq!(response.header("transfer-encoding"), Some("chunked"));
    let events = sse_data(&response.text());
    assert_eq!(events.last().map(String::as_str), Some("[DONE]"));
    let chunks: Vec<Value> = events[..events.len() - 1].iter().map(|e| serde_json::from_str(e).unwrap()).collect();
    assert!(chunks.iter().all(|c| c["object"] == "chat.completion.chunk" && c["id"] == chunks[0]["id"]));
    assert_eq!(chunks[0]["choices"][0]["delta"]["role"], "assistant");
    let pieces: Vec<&str> = chunks.iter().filter_map(|c| c["choices"][0]["delta"]["content"].as_str()).collect();
    assert!(pieces.len() > 3, "{pieces:?}");
    assert_eq!(pieces.concat(), text);
    let last = chunks.last().unwrap();
    assert_eq!(last["choices"][0]["finish_reason"], "stop");
    assert!(last["usage"]["total_tokens"].as_u64() > Some(0));
    assert!(chunks[..chunks.len() - 1].iter().all(|c| c["choices"][0]["finish_reason"].is_null()));
    assert!(model.requests()[0].streamed);

    // The same connection serves the next call: a tool call in fragments.
    let response = c.post_json("/chat/completions", "x-client-session-id: s\r\n", &json!({ "stream": true }));
    let events = sse_data(&response.text());
    let chunks: Vec<Value> = events[..events.len() - 1].iter().map(|e| serde_json::from_str(e).unwrap()).collect();
    let fragments: Vec<&Value> = chunks.iter().filter_map(|c| c["choices"][0]["delta"]["tool_calls"].get(0)).collect();
    assert!(fragments.len() > 2, "{fragments:?}");
    assert_eq!(fragments[0]["id"], "call_1");
    assert_eq!((&fragments[0]["type"], &fragments[0]["function"]["name"]), (&json!("function"), &json!("bash")));
    assert!(fragments.iter().all(|f| f["index"] == 0));
    assert!(fragments[1..].iter().all(|f| f.get("id").is_none() && f["function"].get("name").is_none()));
    let arguments: String = fragments.iter().map(|f| f["function"]["arguments"].as_str().unwrap()).collect();
    let arguments: Value = serde_json::from_str(&arguments).expect("the pieces join into JSON");
    assert_eq!(arguments["command"], "echo a fairly long command line");
    assert_eq!(chunks.last().unwrap()["choices"][0]["finish_reason"], "tool_calls");
}

#[test]
fn http_1_0_gets_the_stream_without_chunked_encoding() {
    let model = ScriptedModel::start().expect("start the model server");
    let body = json!({ "stream": true }).to_string();
    let mut c = Connection::open(&model);
    let raw = format!("POST /chat/completions HTTP/1.0\r\nContent-Length: {}\r\n\r\n{body}", body.len());
    let response = c.send(raw.as_bytes());
    assert_eq!((response.status, response.header("transfer-encoding")), (200, None));
    let events = sse_data(&response.text());
    assert_eq!(events.last().map(String::as_str), Some("[DONE]"));
    assert!(model.requests()[0].session_id.is_none());
}

#[test]
fn malformed_requests_get_400_and_the_server_stops_on_drop() {
    let model = ScriptedModel::start().expect("start the model server");
    let mut c = Connection::open(&model);
    assert_eq!(c.send(b"NONSENSE\r\n\r\n").status, 400);
    let mut c = Connection::open(&model);
    assert_eq!(c.post_json("/chat/completions", "", &json!("x")).status, 200, "any JSON is a model call");
    let bad = c.send(b"POST /chat/completions HTTP/1.1\r\nContent-Length: 3\r\n\r\n{{{");
    assert_eq!(bad.status, 400);
    assert_eq!(model.requests().len(), 1);

    // An idle keep-alive connection does not hold up stopping (the test
    // would hang here), and a stopped server no longer listens.
    let _idle = Connection::open(&model);
    let url = model.url();
    drop(model);
    assert!(TcpStream::connect(url.trim_start_matches("http://")).is_err(), "no longer listening");
}

// ---------------------------------------------------------------------------
// The real CLI
// ---------------------------------------------------------------------------

/// A real CLI over stdio, isolated in `dir`, whose model is `model`.
fn start_cli(model: &ScriptedModel, dir: &TempDir) -> Client {
    // The model server is also the proxy: it refuses and counts CONNECTs.
    let mut options = isolated_options(Transport::Stdio, dir.path(), &model.url());
    options.env.extend(model.env());
    options.auth_token = Some("fake-token".into());
    let started = Instant::now();
    let client = Client::start(options).expect("start the CLI");
    eprintln!("CLI started and connected in {:?}", started.elapsed());
    client
}

fn open_session(client: &Client, dir: &TempDir, streaming: bool) -> Session {
    let work: PathBuf = dir.path().join("work");
    std::fs::create_dir_all(&work).expect("create the working directory");
    let config = SessionConfig {
        model: Some(ScriptedModel::MODEL.into()),
        working_directory: Some(work),
        streaming,
        ..SessionConfig::default()
    };
    let created = Instant::now();
    let session = client.create_session(config).expect("session.create");
    eprintln!("session.create took {:?}", created.elapsed());
    session
}

/// Sends `prompt` and waits for `session.idle`, reporting how long it took.
fn turn(session: &Session, prompt: &str) -> Arc<SessionEvent> {
    let sent = Instant::now();
    let reply = session.send_and_wait(prompt, TURN_TIMEOUT).expect("the turn ends in session.idle");
    eprintln!("turn {prompt:?}: send to session.idle in {:?}", sent.elapsed());
    reply.expect("an assistant.message")
}

fn content(event: &SessionEvent) -> &str {
    match &event.kind {
        EventKind::AssistantMessage(m) => &m.content,
        other => panic!("not an assistant.message: {other:?}"),
    }
}

#[test]
fn real_cli_gets_a_plain_reply() {
    let model = ScriptedModel::start().expect("start the model server");
    let dir = TempDir::new("copilot-scripted");
    let client = start_cli(&model, &dir);
    let session = open_session(&client, &dir, false);
    let text = "Hi! This reply is scripted.";
    model.script(session.id(), vec![Reply::text(text)]);

    let reply = turn(&session, "hi");
    assert_eq!(content(&reply), text);
    let requests = model.requests_for(session.id());
    assert_eq!(requests.len(), 1, "one model call: {requests:#?}");
    let request = &requests[0];
    assert!(!request.streamed, "a session without streaming asks for JSON");
    assert_eq!(request.body["model"], ScriptedModel::MODEL);
    // The CLI puts the time before the prompt.
    let user = request.last_user_text().expect("a user message");
    assert!(user.starts_with("<current_datetime>") && user.ends_with("</current_datetime>\n\nhi"), "{user:?}");
    assert!(request.tool_results().is_empty());
    assert_eq!(model.requests().len(), 1, "no calls without a session id");
    assert_eq!(model.connect_attempts(), 0, "nothing tried to leave: {:?}", model.other_requests());
    eprintln!("other requests: {:?}", model.other_requests());

    // A second turn in the same session: the script is used up, so the
    // default reply comes, and the model sees the whole conversation.
    let again = turn(&session, "and again");
    assert_eq!(content(&again), "Hello from the scripted model.");
    let second = &model.requests_for(session.id())[1];
    let roles: Vec<&str> = second.messages().iter().filter_map(|m| m["role"].as_str()).collect();
    assert_eq!(roles, ["system", "user", "assistant", "user"]);
    assert_eq!(second.messages()[2]["content"], text);
    session.destroy().expect("session.destroy");
    client.stop().expect("stop the CLI");
    assert_eq!(model.connect_attempts(), 0);
}

#[test]
fn real_cli_streams_a_reply_in_deltas() {
    let model = ScriptedModel::start().expect("start the model server");
    let dir = TempDir::new("copilot-scripted-stream");
    let client = start_cli(&model, &dir);
    let session = open_session(&client, &dir, true);
    let text = "Streaming works: this text arrives in several small deltas.";
    model.script(session.id(), vec![Reply::text(text)]);
    let events = session.events();

    let reply = turn(&session, "hi");
    assert_eq!(content(&reply), text);
    let mut deltas = Vec::new();
    while let Some(event) = events.try_next() {
        if let EventKind::AssistantMessageDelta(d) = &event.kind {
            deltas.push(d.delta_content.clone());
        }
    }
    eprintln!("{} deltas: {deltas:?}", deltas.len());
    assert!(deltas.len() > 1, "{deltas:?}");
    assert_eq!(deltas.concat(), text);
    let requests = model.requests_for(session.id());
    assert_eq!(requests.len(), 1);
    assert!(requests[0].streamed, "a streaming session asks for a stream");
    assert!(requests[0].last_user_text().expect("a user message").ends_with("hi"));
    assert_eq!(model.connect_attempts(), 0, "{:?}", model.other_requests());
    session.destroy().expect("session.destroy");
    client.stop().expect("stop the CLI");
}

#[test]
fn real_cli_reports_a_denied_tool_call_to_the_model() {
    let model = ScriptedModel::start().expect("start the model server");
    let dir = TempDir::new("copilot-scripted-tool");
    let client = start_cli(&model, &dir);
    let session = open_session(&client, &dir, false);
    model.script(
        session.id(),
        vec![
            // It would leave proof that it ran.
            Reply::tool_call("bash", json!({ "command": "echo hi > proof.txt", "description": "d" })),
            Reply::text("The command was not allowed."),
        ],
    );
    let events = session.events();

    let reply = turn(&session, "run echo hi");
    assert_eq!(content(&reply), "The command was not allowed.");
    let requests = model.requests_for(session.id());
    assert_eq!(requests.len(), 2, "the tool result went back to the model");
    // Without `requestPermission` in session.create nobody can be asked, so
    // the CLI denies the shell command itself and tells the model why.
    assert_eq!(requests[1].tool_results(), [DENIED]);
    let tool_message = requests[1].messages().iter().find(|m| m["role"] == "tool").expect("a tool message");
    assert_eq!(tool_message["tool_call_id"], "call_1");
    let calls = &requests[1].messages().iter().find(|m| m["role"] == "assistant").expect("the call")["tool_calls"];
    assert_eq!(calls[0]["function"]["name"], "bash");

    let mut types = Vec::new();
    let mut completed = None;
    while let Some(event) = events.try_next() {
        types.push(event.event_type().to_owned());
        if let EventKind::ToolExecutionComplete(done) = &event.kind {
            completed = Some(done.clone());
        }
    }
    assert!(!types.iter().any(|t| t.starts_with("permission.")), "no permission was asked for: {types:?}");
    let completed = completed.unwrap_or_else(|| panic!("no tool.execution_complete among {types:?}"));
    assert_eq!((completed.tool_call_id.as_str(), completed.success), ("call_1", false));
    let error = completed.error.expect("the denial is the tool's error");
    assert_eq!((error.message.as_str(), error.code.as_deref()), (DENIED, Some("denied")));
    assert!(!dir.path().join("work/proof.txt").exists(), "the command did not run");
    session.destroy().expect("session.destroy");
    client.stop().expect("stop the CLI");
}
