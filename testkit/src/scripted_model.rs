//! A scripted model server: a stand-in for the Copilot API that lets tests
//! run the real Copilot CLI with no network and no account.
//!
//! The CLI is pointed at it through its environment ([`ScriptedModel::env`]).
//! It then fetches the user document, the model list and the built-in GitHub
//! MCP server from here, and each model call (`POST /chat/completions`) gets
//! the next [`Reply`] of the calling session's script, as a plain
//! `chat.completion` or, for a session created with `streaming: true`, as
//! server-sent `chat.completion.chunk`s. Every model request is kept, so a
//! test can check what the CLI sent (the prompt, the tool results).
//!
//! It is an HTTP/1.1 server on `127.0.0.1` (tiny_http, with a few worker
//! threads). The shapes it serves are the ones the CLI 1.0.102 was seen to
//! ask for and accept (see `shared/protocol/capi-fake-server.md`). It also
//! acts as the CLI's HTTP(S) proxy and refuses every `CONNECT`, so a request
//! that ignores the configured endpoints fails here, and is counted, instead
//! of leaving the machine.
//!
//! A process that only learns a session id at run time (a test written in
//! another language, say) scripts it over HTTP instead, with the loopback
//! control endpoints (not part of the Copilot API; the CLI never calls them):
//!
//! - `POST /_scripted/script` with the body
//!   `{"sessionId": "...", "replies": [REPLY, ...]}`, where a `REPLY` is
//!   `{"text": "..."}`, `{"toolCalls": [{"name": "...", "arguments": {...}, "id"?: "..."}]}`
//!   or both keys at once (text shown before the tools run): does what
//!   [`ScriptedModel::script`] does and answers `{"ok": true, "replies": N}`,
//!   or 400 with `{"message"}` for a body it cannot read.
//! - `GET /_scripted/requests`: `{"requests": [{"sessionId", "streamed",
//!   "lastUserText", "toolResults", "systemPrompt", "toolNames"}]}`, every
//!   `/chat/completions` request so far, oldest first (what
//!   [`ScriptedModel::requests`] returns, in short).
//!
//! With the client, `copilot-host` (not a dependency of this crate, so the
//! example is not compiled here):
//!
//! ```ignore
//! use copilot_testkit::scripted_model::{Reply, ScriptedModel};
//! use copilot_host::{Client, ClientOptions, SessionConfig};
//! use std::time::Duration;
//!
//! let model = ScriptedModel::start()?;
//! let mut options = ClientOptions::default();
//! options.env.extend(model.env());
//! options.auth_token = Some("fake-token".into());
//! options.extra_args.push("--no-auto-login".into());
//! let client = Client::start(options)?;
//! let session = client.create_session(SessionConfig::with_model(ScriptedModel::MODEL))?;
//! model.script(session.id(), vec![Reply::text("4")]);
//! let reply = session.send_and_wait("What is 2 + 2?", Duration::from_secs(60))?;
//! assert_eq!(model.requests_for(session.id()).len(), 1);
//! # drop(reply);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::collections::{HashMap, VecDeque};
use std::ffi::OsString;
use std::io::{self, Read};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::{self, JoinHandle};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::{json, Value};

/// The reply of a session that has no script, or whose script ran out.
const DEFAULT_TEXT: &str = "Hello from the scripted model.";
/// Threads answering requests. The CLI keeps a few connections open (the
/// model, its MCP client, telemetry); each answer is computed at once.
const WORKERS: usize = 4;
/// Connection attempts that stopping makes to see the port closed.
const STOP_TRIES: usize = 1000;
/// The largest request body accepted. A model request carries the whole
/// conversation (the system message alone is about 40 KB), so be generous.
const MAX_BODY: usize = 64 << 20;
/// Characters of reply text per streamed delta: small, so that even a short
/// reply arrives in several deltas, as a real model's does.
const TEXT_PIECE_CHARS: usize = 12;
/// Characters of tool-call arguments per streamed fragment.
const ARGUMENT_PIECE_CHARS: usize = 16;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// One model response of a script.
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    /// A plain assistant message; the turn ends with it.
    Text(String),
    /// Tool calls with no text; the CLI runs the tools and calls the model
    /// again with their results.
    ToolCalls(Vec<ToolCall>),
    /// Text (shown before the tools run) and tool calls.
    TextAndToolCalls {
        /// The assistant's text.
        text: String,
        /// The tools it calls.
        tool_calls: Vec<ToolCall>,
    },
}

impl Reply {
    /// A plain assistant message.
    pub fn text(text: impl Into<String>) -> Reply {
        Reply::Text(text.into())
    }

    /// A single tool call, its id chosen by the server.
    pub fn tool_call(name: impl Into<String>, arguments: Value) -> Reply {
        Reply::ToolCalls(vec![ToolCall::new(name, arguments)])
    }

    fn parts(&self) -> (Option<&str>, &[ToolCall]) {
        match self {
            Reply::Text(text) => (Some(text), &[]),
            Reply::ToolCalls(calls) => (None, calls),
            Reply::TextAndToolCalls { text, tool_calls } => (Some(text), tool_calls),
        }
    }
}

impl Default for Reply {
    fn default() -> Self {
        Reply::text(DEFAULT_TEXT)
    }
}

/// A tool call the scripted model makes.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCall {
    /// The call id, which the CLI reports as `toolCallId`. Empty: the server
    /// chooses `call_<n>`, `n` counting the tool calls it has made.
    pub id: String,
    /// The tool's name, such as `bash` or a client tool's name.
    pub name: String,
    /// The arguments. They are sent as JSON text, except that a JSON string
    /// is sent as it is, so a test can send arguments that do not parse.
    pub arguments: Value,
}

impl ToolCall {
    /// A call of `name` with `arguments`, its id chosen by the server.
    pub fn new(name: impl Into<String>, arguments: Value) -> ToolCall {
        ToolCall { id: String::new(), name: name.into(), arguments }
    }

    fn arguments_text(&self) -> String {
        match &self.arguments {
            Value::String(raw) => raw.clone(),
            other => other.to_string(),
        }
    }
}

/// A `/chat/completions` request the server received.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelRequest {
    /// The `x-client-session-id` header: the id of the session calling.
    pub session_id: Option<String>,
    /// The request body: `model`, `messages`, `tools`, ...
    pub body: Value,
    /// Whether the body asked for a stream (`"stream": true`), which the CLI
    /// does only for a session created with `streaming: true`.
    pub streamed: bool,
}

impl ModelRequest {
    /// The conversation sent to the model, oldest first.
    pub fn messages(&self) -> &[Value] {
        self.body.get("messages").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default()
    }

    /// The text of every `role: "tool"` message (the tool results), oldest
    /// first.
    pub fn tool_results(&self) -> Vec<String> {
        self.messages().iter().filter(|m| m["role"] == "tool").map(|m| content_text(&m["content"])).collect()
    }

    /// The text of the `role: "system"` messages (the system prompt), joined
    /// by newlines.
    pub fn system_prompt(&self) -> String {
        let texts: Vec<String> =
            self.messages().iter().filter(|m| m["role"] == "system").map(|m| content_text(&m["content"])).collect();
        texts.join("\n")
    }

    /// The names of the tools offered to the model, sorted.
    pub fn tool_names(&self) -> Vec<String> {
        let tools = self.body.get("tools").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
        let mut names: Vec<String> =
            tools.iter().filter_map(|t| t["function"]["name"].as_str().map(String::from)).collect();
        names.sort();
        names
    }

    /// The text of the last user message. The CLI prefixes the prompt with
    /// a `<current_datetime>` element, so expect the prompt at its end.
    pub fn last_user_text(&self) -> Option<String> {
        self.messages().iter().rev().find(|m| m["role"] == "user").map(|m| content_text(&m["content"]))
    }
}

/// A message's `content`: a string, or an array of parts whose texts are
/// joined by newlines.
fn content_text(content: &Value) -> String {
    match content {
        Value::String(text) => text.clone(),
        Value::Array(parts) => {
            parts.iter().filter_map(|p| p.get("text").and_then(Value::as_str)).collect::<Vec<_>>().join("\n")
        }
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// The scripts, and everything the server saw.
#[derive(Default)]
struct Book {
    scripts: HashMap<String, VecDeque<Reply>>,
    default_reply: Reply,
    model_requests: Vec<ModelRequest>,
    other_requests: Vec<String>,
    connect_attempts: usize,
    completions: u64,
    tool_calls: u64,
}

/// What the server and its worker threads share.
struct Shared {
    url: String,
    stopping: AtomicBool,
    book: Mutex<Book>,
}

/// A scripted fake of the Copilot model endpoint on `127.0.0.1`, for running
/// the real CLI in tests. Dropping it stops the server: it stops listening
/// and its workers end (a connection the client keeps open stays open until
/// the client closes it, but nothing answers on it any more).
pub struct ScriptedModel {
    addr: SocketAddr,
    shared: Arc<Shared>,
    /// `None` once stopped.
    server: Option<Arc<tiny_http::Server>>,
    workers: Vec<JoinHandle<()>>,
}

impl std::fmt::Debug for ScriptedModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScriptedModel").field("url", &self.shared.url).finish_non_exhaustive()
    }
}

impl ScriptedModel {
    /// The model id to pass in `session.create`: the first of the two
    /// `/models` lists (the CLI's default). The CLI rejects a model that is
    /// not listed.
    pub const MODEL: &'static str = "claude-sonnet-4.5";

    /// The other model `/models` lists, to switch to: a model request
    /// names the model the session has.
    pub const OTHER_MODEL: &'static str = "claude-haiku-4.5";

    /// Starts the server on a free port of `127.0.0.1`.
    pub fn start() -> io::Result<ScriptedModel> {
        let listener = TcpListener::bind(("127.0.0.1", 0))?;
        let addr = listener.local_addr()?;
        let server = tiny_http::Server::from_listener(listener, None).map_err(io::Error::other)?;
        let server = Arc::new(server);
        let workers = Vec::with_capacity(WORKERS);
        let shared = Arc::new(Shared {
            url: format!("http://{addr}"),
            stopping: AtomicBool::new(false),
            book: Mutex::new(Book::default()),
        });
        let mut model = ScriptedModel { addr, shared, server: Some(Arc::clone(&server)), workers };
        for n in 0..WORKERS {
            let (server, shared) = (Arc::clone(&server), Arc::clone(&model.shared));
            // On failure, dropping `model` stops the workers already running.
            let worker = thread::Builder::new()
                .name(format!("scripted-model {addr} #{n}"))
                .spawn(move || serve(&server, &shared))?;
            model.workers.push(worker);
        }
        log::debug!("scripted model server listening on {}", model.shared.url);
        Ok(model)
    }

    /// The server's base URL, `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        self.shared.url.clone()
    }

    /// Environment for a CLI pointed at this server: `COPILOT_API_URL` (the
    /// model list, model calls and the built-in MCP server) and
    /// `COPILOT_DEBUG_GITHUB_API_URL` (the user document) are this server;
    /// so are `HTTP_PROXY` and `HTTPS_PROXY` (and their lowercase forms),
    /// which it answers with 403 so that nothing leaves the machine; and
    /// `NO_PROXY=127.0.0.1,localhost,::1` lets the calls to this server go
    /// direct. Add it after other environment: for a repeated name, the
    /// last entry wins.
    pub fn env(&self) -> Vec<(OsString, OsString)> {
        let url = self.url();
        let loopback = "127.0.0.1,localhost,::1";
        [
            ("COPILOT_API_URL", url.as_str()),
            ("COPILOT_DEBUG_GITHUB_API_URL", &url),
            ("HTTP_PROXY", &url),
            ("HTTPS_PROXY", &url),
            ("http_proxy", &url),
            ("https_proxy", &url),
            ("NO_PROXY", loopback),
            ("no_proxy", loopback),
        ]
        .into_iter()
        .map(|(name, value)| (name.into(), value.into()))
        .collect()
    }

    /// Sets the script of one session, keyed by the `x-client-session-id`
    /// header the CLI sends (the session id): each model call of the session
    /// takes the next reply, and once they are used up it gets the default
    /// reply, so that the agent loop always ends. Replaces an earlier script.
    pub fn script(&self, session_id: &str, replies: Vec<Reply>) {
        set_script(&self.shared, session_id, replies);
    }

    /// Sets the reply for sessions without a script, and for those whose
    /// script ran out. It starts as `Reply::text("Hello from the scripted
    /// model.")`.
    pub fn set_default(&self, reply: Reply) {
        lock(&self.shared.book).default_reply = reply;
    }

    /// Every `/chat/completions` request received, in order of arrival.
    pub fn requests(&self) -> Vec<ModelRequest> {
        lock(&self.shared.book).model_requests.clone()
    }

    /// The `/chat/completions` requests of one session, in order of arrival.
    pub fn requests_for(&self, session_id: &str) -> Vec<ModelRequest> {
        let book = lock(&self.shared.book);
        book.model_requests.iter().filter(|r| r.session_id.as_deref() == Some(session_id)).cloned().collect()
    }

    /// Every other request, as `METHOD target` (for an MCP request, its
    /// JSON-RPC method follows in parentheses), in order of arrival: what
    /// the CLI called besides the model, for diagnosis.
    pub fn other_requests(&self) -> Vec<String> {
        lock(&self.shared.book).other_requests.clone()
    }

    /// Requests refused because they were on their way off the machine
    /// through the proxy: `CONNECT`s, and plain-HTTP proxy requests (an
    /// absolute URL as target). They are also in
    /// [`other_requests`](Self::other_requests). Expect zero.
    pub fn connect_attempts(&self) -> usize {
        lock(&self.shared.book).connect_attempts
    }
}

impl Drop for ScriptedModel {
    fn drop(&mut self) {
        self.shared.stopping.store(true, Ordering::SeqCst);
        let Some(server) = self.server.take() else { return };
        // One unblock ends one worker; requests queued before them are
        // still answered.
        for _ in 0..self.workers.len() {
            server.unblock();
        }
        for worker in self.workers.drain(..) {
            let _ = worker.join();
        }
        // The last handle: dropping it wakes tiny_http's acceptor, which
        // then closes the listening socket on its own thread. Wait for
        // that, so that a dropped server is no longer listening (it takes a
        // scheduling round or two).
        drop(server);
        for _ in 0..STOP_TRIES {
            match TcpStream::connect_timeout(&self.addr, Duration::from_secs(1)) {
                Err(_) => return,
                Ok(_) => thread::sleep(Duration::from_millis(1)),
            }
        }
        log::warn!("scripted model server {}: still accepting connections after it stopped", self.shared.url);
    }
}
/// A worker: takes requests off the server's queue and answers them until
/// it is unblocked. Several run at once, so that one slow client does not
/// hold up the others; tiny_http keeps the answers on one connection in
/// order.
fn serve(server: &tiny_http::Server, shared: &Shared) {
    loop {
        let mut incoming = match server.recv() {
            Ok(r) => r,
            Err(e) => {
                if !shared.stopping.load(Ordering::SeqCst) {
                    log::warn!("scripted model server {}: stopped taking requests: {e}", shared.url);
                }
                return;
            }
        };
        let request = match Request::read(&mut incoming) {
            Ok(r) => r,
            Err(e) => {
                log::warn!("scripted model server {}: unreadable request: {e}", shared.url);
                let body = json!({ "message": format!("scripted model server: {e}") });
                respond(shared, incoming, Answer::Json(400, body));
                continue;
            }
        };
        let answer = answer(shared, &request);
        respond(shared, incoming, answer);
    }
}

/// A request as the routing below needs it: the body read whole.
struct Request {
    method: String,
    target: String,
    /// Names in lowercase.
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Request {
    fn read(incoming: &mut tiny_http::Request) -> io::Result<Request> {
        let headers = incoming
            .headers()
            .iter()
            .map(|h| (h.field.as_str().as_str().to_ascii_lowercase(), h.value.as_str().to_owned()))
            .collect();
        let mut body = Vec::new();
        // One byte more than allowed tells "too large" from "just fits".
        incoming.as_reader().take(MAX_BODY as u64 + 1).read_to_end(&mut body)?;
        if body.len() > MAX_BODY {
            return Err(io::Error::new(io::ErrorKind::InvalidData, "request body too large"));
        }
        Ok(Request { method: incoming.method().to_string(), target: incoming.url().to_owned(), headers, body })
    }

    fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
    }

    fn path(&self) -> &str {
        self.target.split('?').next().unwrap_or_default()
    }

    fn line(&self) -> String {
        format!("{} {}", self.method, self.target)
    }
}

/// The MCP servers it serves (the built-in GitHub one, and one behind
/// OAuth).
#[path = "scripted_mcp.rs"]
mod mcp;
pub use mcp::{MCP_OAUTH_PATH, MCP_OAUTH_TOKEN, MCP_OAUTH_TOOL};

/// What to send back.
enum Answer {
    /// A JSON body with `Content-Length`.
    Json(u16, Value),
    /// `202 Accepted` with no body.
    Accepted,
    /// Server-sent events, each already formatted (`data: ...\n\n`): sent
    /// with chunked encoding (HTTP/1.0: with `Content-Length`).
    EventStream(Vec<String>),
    /// `403` to an outbound attempt.
    Refused,
    /// `401` with this `WWW-Authenticate` challenge.
    Unauthorized(String),
}

fn header(name: &str, value: &str) -> tiny_http::Header {
    tiny_http::Header::from_bytes(name.as_bytes(), value.as_bytes()).expect("a valid header")
}

fn respond(shared: &Shared, incoming: tiny_http::Request, answer: Answer) {
    let line = format!("{} {}", incoming.method(), incoming.url());
    let request_id = header("x-github-request-id", "scripted-model");
    let json = |status: u16, body: &Value| {
        tiny_http::Response::from_data(body.to_string().into_bytes())
            .with_status_code(status)
            .with_header(header("Content-Type", "application/json"))
            .with_chunked_threshold(usize::MAX)
    };
    let sent = match answer {
        Answer::Json(status, body) => incoming.respond(json(status, &body).with_header(request_id)),
        Answer::Accepted => incoming.respond(tiny_http::Response::empty(202).with_chunked_threshold(usize::MAX)),
        Answer::Refused => {
            let body = json!({ "message": "scripted model server: outbound network disabled" });
            incoming.respond(json(403, &body))
        }
        Answer::Unauthorized(challenge) => {
            let body = json!({ "error": "invalid_token" });
            incoming.respond(json(401, &body).with_header(header("WWW-Authenticate", &challenge)))
        }
        Answer::EventStream(events) => {
            let stream = tiny_http::Response::new(
                tiny_http::StatusCode(200),
                vec![header("Content-Type", "text/event-stream"), header("Cache-Control", "no-cache"), request_id],
                io::Cursor::new(events.concat().into_bytes()),
                // No length: chunked on HTTP/1.1.
                None,
                None,
            );
            incoming.respond(stream)
        }
    };
    if let Err(e) = sent {
        log::debug!("scripted model server {}: writing the answer to {line} failed: {e}", shared.url);
    }
}

/// Routes a request.
fn answer(shared: &Shared, request: &Request) -> Answer {
    let path = request.path();
    // CONNECT, or a plain-HTTP proxy request with an absolute URL: the CLI
    // tried to reach another host through its proxy, which is this server.
    if request.method == "CONNECT" || !request.target.starts_with('/') {
        let mut book = lock(&shared.book);
        book.connect_attempts += 1;
        book.other_requests.push(request.line());
        log::warn!("scripted model server {}: refused outbound request {}", shared.url, request.line());
        return Answer::Refused;
    }
    if request.method == "POST" && path == "/chat/completions" {
        return model_call(shared, request);
    }
    if path.starts_with(CONTROL_PREFIX) {
        return control(shared, request);
    }
    if let Some(answer) = mcp::route(shared, request) {
        return answer;
    }
    lock(&shared.book).other_requests.push(request.line());
    log::debug!("scripted model server {}: {}", shared.url, request.line());
    match (request.method.as_str(), path) {
        ("GET", "/models") => Answer::Json(200, models_document()),
        ("GET", "/copilot_internal/user") => Answer::Json(200, user_document(&shared.url)),
        // Asked for but optional: "none here" is an answer the CLI accepts.
        ("GET", "/copilot_internal/managed_settings" | "/copilot_internal/team_customizations") => not_found(),
        // Telemetry is gzip-compressed JSON lines; it is not kept.
        ("POST", p) if p.starts_with("/telemetry") => Answer::Json(200, json!({})),
        _ => {
            log::warn!("scripted model server {}: no such endpoint: {}", shared.url, request.line());
            not_found()
        }
    }
}

/// Where the control endpoints live (see the module documentation).
const CONTROL_PREFIX: &str = "/_scripted/";

fn set_script(shared: &Shared, session_id: &str, replies: Vec<Reply>) {
    lock(&shared.book).scripts.insert(session_id.to_owned(), replies.into());
}

/// The control endpoints: `POST /_scripted/script` sets a session's script,
/// `GET /_scripted/requests` lists the model requests received.
fn control(shared: &Shared, request: &Request) -> Answer {
    let bad = |message: String| Answer::Json(400, json!({ "message": message }));
    match (request.method.as_str(), request.path()) {
        ("POST", "/_scripted/script") => {
            let body: Value = match serde_json::from_slice(&request.body) {
                Ok(v) => v,
                Err(e) => return bad(format!("the body is not JSON: {e}")),
            };
            let Some(session_id) = body.get("sessionId").and_then(Value::as_str) else {
                return bad("`sessionId` (a string) is missing".into());
            };
            let Some(items) = body.get("replies").and_then(Value::as_array) else {
                return bad("`replies` (an array) is missing".into());
            };
            let replies = match items.iter().map(reply_from_json).collect::<Result<Vec<_>, _>>() {
                Ok(r) => r,
                Err(e) => return bad(e),
            };
            let count = replies.len();
            set_script(shared, session_id, replies);
            log::debug!("scripted model server {}: session {session_id} scripted ({count} replies)", shared.url);
            Answer::Json(200, json!({ "ok": true, "replies": count }))
        }
        ("GET", "/_scripted/requests") => {
            let requests: Vec<Value> = lock(&shared.book)
                .model_requests
                .iter()
                .map(|r| {
                    json!({
                        "sessionId": r.session_id,
                        "model": r.body.get("model"),
                        "streamed": r.streamed,
                        "lastUserText": r.last_user_text(),
                        "toolResults": r.tool_results(),
                        "systemPrompt": r.system_prompt(),
                        "toolNames": r.tool_names(),
                        "messages": r.messages(),
                    })
                })
                .collect();
            Answer::Json(200, json!({ "requests": requests }))
        }
        _ => not_found(),
    }
}

/// One reply of a control request: `{"text"}`, `{"toolCalls": [{"name",
/// "arguments"?, "id"?}]}`, or both.
fn reply_from_json(reply: &Value) -> Result<Reply, String> {
    let text = match reply.get("text") {
        None | Some(Value::Null) => None,
        Some(Value::String(t)) => Some(t.clone()),
        Some(other) => return Err(format!("`text` must be a string, not {other}")),
    };
    let calls = match reply.get("toolCalls") {
        None | Some(Value::Null) => None,
        Some(Value::Array(calls)) if calls.is_empty() => return Err("`toolCalls` is empty".into()),
        Some(Value::Array(calls)) => Some(
            calls
                .iter()
                .map(|c| {
                    let name = c.get("name").and_then(Value::as_str).ok_or("a tool call needs a `name` string")?;
                    let mut call = ToolCall::new(name, c.get("arguments").cloned().unwrap_or_else(|| json!({})));
                    if let Some(id) = c.get("id").and_then(Value::as_str) {
                        call.id = id.to_owned();
                    }
                    Ok(call)
                })
                .collect::<Result<Vec<_>, &str>>()?,
        ),
        Some(other) => return Err(format!("`toolCalls` must be an array, not {other}")),
    };
    match (text, calls) {
        (Some(text), None) => Ok(Reply::Text(text)),
        (None, Some(tool_calls)) => Ok(Reply::ToolCalls(tool_calls)),
        (Some(text), Some(tool_calls)) => Ok(Reply::TextAndToolCalls { text, tool_calls }),
        (None, None) => Err(format!("a reply needs `text` or `toolCalls`: {reply}")),
    }
}

fn not_found() -> Answer {
    Answer::Json(404, json!({ "message": "Not Found (scripted model server)" }))
}

/// `GET /models`: [`ScriptedModel::MODEL`] (the default) and
/// [`ScriptedModel::OTHER_MODEL`], with the capabilities the CLI checks
/// (`supported_endpoints` makes it use `/chat/completions`).
fn models_document() -> Value {
    let entry = |id: &str, default: bool, context: u64| {
        json!({
            "id": id,
            "name": id,
            "object": "model",
            "vendor": "Scripted",
            "version": id,
            "preview": false,
            "model_picker_enabled": true,
            "is_chat_default": default,
            "is_chat_fallback": default,
            "policy": { "state": "enabled", "terms": "" },
            "supported_endpoints": ["/chat/completions"],
            "capabilities": {
                "family": id,
                "type": "chat",
                "object": "model_capabilities",
                "tokenizer": "o200k_base",
                "limits": {
                    "max_context_window_tokens": context,
                    "max_prompt_tokens": context,
                    "max_output_tokens": 16000
                },
                "supports": { "streaming": true, "tool_calls": true, "parallel_tool_calls": true, "vision": false }
            }
        })
    };
    json!({
        "object": "list",
        "data": [entry(ScriptedModel::MODEL, true, 128000), entry(ScriptedModel::OTHER_MODEL, false, 64000)]
    })
}

/// `GET /copilot_internal/user`: a Copilot user whose API and telemetry are
/// this server.
fn user_document(url: &str) -> Value {
    json!({
        "login": "scripted-user",
        "copilot_plan": "individual_pro",
        "chat_enabled": true,
        "is_mcp_enabled": true,
        "analytics_tracking_id": "scripted-tracking-id",
        "endpoints": { "api": url, "telemetry": format!("{url}/telemetry") }
    })
}

/// `POST /chat/completions`: records the request and answers with the
/// session's next reply.
fn model_call(shared: &Shared, request: &Request) -> Answer {
    let body: Value = match serde_json::from_slice(&request.body) {
        Ok(v) => v,
        Err(e) => {
            lock(&shared.book).other_requests.push(format!("{} (unreadable body: {e})", request.line()));
            log::warn!("scripted model server {}: model request body is not JSON: {e}", shared.url);
            return Answer::Json(400, json!({ "message": format!("request body is not JSON: {e}") }));
        }
    };
    let session_id = request.header("x-client-session-id").map(str::to_owned);
    let streamed = body.get("stream").and_then(Value::as_bool) == Some(true);
    let model = body.get("model").and_then(Value::as_str).unwrap_or(ScriptedModel::MODEL).to_owned();
    let (reply, number) = {
        let mut book = lock(&shared.book);
        let scripted = session_id.as_ref().and_then(|id| book.scripts.get_mut(id)).and_then(VecDeque::pop_front);
        let mut reply = scripted.unwrap_or_else(|| book.default_reply.clone());
        if let Reply::ToolCalls(calls) | Reply::TextAndToolCalls { tool_calls: calls, .. } = &mut reply {
            for call in calls.iter_mut().filter(|c| c.id.is_empty()) {
                book.tool_calls += 1;
                call.id = format!("call_{}", book.tool_calls);
            }
        }
        book.completions += 1;
        let number = book.completions;
        book.model_requests.push(ModelRequest { session_id: session_id.clone(), body, streamed });
        (reply, number)
    };
    log::debug!(
        "scripted model server {}: model call {number} of session {} ({}): {reply:?}",
        shared.url,
        session_id.as_deref().unwrap_or("(none)"),
        if streamed { "streamed" } else { "JSON" }
    );
    let completion = Completion::new(number, model, reply, request.body.len());
    if streamed {
        Answer::EventStream(completion.events())
    } else {
        Answer::Json(200, completion.to_json())
    }
}

/// One model response, ready to be sent whole or streamed.
struct Completion {
    id: String,
    created: u64,
    model: String,
    reply: Reply,
    usage: Value,
}

impl Completion {
    fn new(number: u64, model: String, reply: Reply, request_bytes: usize) -> Completion {
        let created = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or_default();
        // Rough token counts (4 bytes a token): the CLI reports them in its
        // usage events and only needs them to be plausible.
        let (text, calls) = reply.parts();
        let reply_bytes =
            text.map_or(0, str::len) + calls.iter().map(|c| c.name.len() + c.arguments_text().len()).sum::<usize>();
        let prompt_tokens = (request_bytes / 4).max(1);
        let completion_tokens = (reply_bytes / 4).max(1);
        let usage = json!({
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens
        });
        Completion { id: format!("scripted-{number}"), created, model, reply, usage }
    }

    fn finish_reason(&self) -> &'static str {
        if self.reply.parts().1.is_empty() {
            "stop"
        } else {
            "tool_calls"
        }
    }

    /// A `chat.completion`.
    fn to_json(&self) -> Value {
        let (text, calls) = self.reply.parts();
        let mut message = json!({ "role": "assistant", "content": text });
        if !calls.is_empty() {
            let calls: Vec<Value> = calls
                .iter()
                .map(|c| {
                    json!({
                        "id": c.id,
                        "type": "function",
                        "function": { "name": c.name, "arguments": c.arguments_text() }
                    })
                })
                .collect();
            message["tool_calls"] = calls.into();
        }
        json!({
            "id": self.id,
            "object": "chat.completion",
            "created": self.created,
            "model": self.model,
            "choices": [{ "index": 0, "message": message, "finish_reason": self.finish_reason() }],
            "usage": self.usage
        })
    }

    /// The same reply as server-sent `chat.completion.chunk`s: the role, the
    /// text in several pieces, each tool call's name then its arguments in
    /// pieces, and last the finish reason with the usage; then `[DONE]`.
    fn events(&self) -> Vec<String> {
        let chunk = |delta: Value, finish_reason: Option<&str>| {
            json!({
                "id": self.id,
                "object": "chat.completion.chunk",
                "created": self.created,
                "model": self.model,
                "choices": [{ "index": 0, "delta": delta, "finish_reason": finish_reason }]
            })
        };
        let (text, calls) = self.reply.parts();
        let mut chunks = vec![chunk(json!({ "role": "assistant", "content": "" }), None)];
        for piece in pieces(text.unwrap_or_default(), TEXT_PIECE_CHARS) {
            chunks.push(chunk(json!({ "content": piece }), None));
        }
        for (index, call) in calls.iter().enumerate() {
            let arguments = call.arguments_text();
            let mut fragments = pieces(&arguments, ARGUMENT_PIECE_CHARS);
            if fragments.is_empty() {
                fragments.push("");
            }
            for (n, fragment) in fragments.into_iter().enumerate() {
                let tool_call = if n == 0 {
                    json!({
                        "index": index,
                        "id": call.id,
                        "type": "function",
                        "function": { "name": call.name, "arguments": fragment }
                    })
                } else {
                    json!({ "index": index, "function": { "arguments": fragment } })
                };
                chunks.push(chunk(json!({ "tool_calls": [tool_call] }), None));
            }
        }
        let mut last = chunk(json!({}), Some(self.finish_reason()));
        last["usage"] = self.usage.clone();
        chunks.push(last);
        let mut events: Vec<String> = chunks.iter().map(|c| format!("data: {c}\n\n")).collect();
        events.push("data: [DONE]\n\n".to_owned());
        events
    }
}

/// `text` cut into pieces of at most `chars` characters.
fn pieces(text: &str, chars: usize) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    for (count, (at, _)) in text.char_indices().enumerate() {
        if count > 0 && count % chars == 0 {
            out.push(&text[start..at]);
            start = at;
        }
    }
    if start < text.len() {
        out.push(&text[start..]);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    /// One request on a fresh connection; the answer's status and JSON body.
    fn http(model: &ScriptedModel, method: &str, path: &str, headers: &str, body: &str) -> (u16, Value) {
        let mut stream = TcpStream::connect(model.addr).expect("connect to the scripted model");
        let request = format!(
            "{method} {path} HTTP/1.1\r\nHost: x\r\n{headers}Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        );
        stream.write_all(request.as_bytes()).expect("send");
        let mut answer = String::new();
        stream.read_to_string(&mut answer).expect("read the answer");
        let status = answer.split(' ').nth(1).and_then(|s| s.parse().ok()).expect("a status line");
        let body = answer.split_once("\r\n\r\n").map(|(_, b)| b).unwrap_or_default();
        (status, serde_json::from_str(body).unwrap_or(Value::Null))
    }

    fn completion(model: &ScriptedModel, session_id: &str) -> Value {
        let headers = format!("x-client-session-id: {session_id}\r\n");
        let body = json!({ "model": ScriptedModel::MODEL, "messages": [{ "role": "user", "content": "hi" }] });
        let (status, answer) = http(model, "POST", "/chat/completions", &headers, &body.to_string());
        assert_eq!(status, 200, "{answer}");
        answer["choices"][0]["message"].clone()
    }

    #[test]
    fn the_control_endpoint_scripts_a_session() {
        let model = ScriptedModel::start().expect("start");
        let script = json!({
            "sessionId": "s-1",
            "replies": [
                { "toolCalls": [{ "name": "get_weather", "arguments": { "city": "Paris" } }] },
                { "text": "Sunny.", "toolCalls": [{ "name": "bash", "arguments": "{not json", "id": "mine" }] },
                { "text": "Done." }
            ]
        });
        let (status, answer) = http(&model, "POST", "/_scripted/script", "", &script.to_string());
        assert_eq!((status, &answer), (200, &json!({ "ok": true, "replies": 3 })));

        let first = completion(&model, "s-1");
        assert_eq!(first["content"], Value::Null);
        assert_eq!(first["tool_calls"][0]["function"]["name"], "get_weather");
        assert_eq!(first["tool_calls"][0]["function"]["arguments"], r#"{"city":"Paris"}"#);
        let second = completion(&model, "s-1");
        assert_eq!(second["content"], "Sunny.");
        assert_eq!(second["tool_calls"][0]["id"], "mine");
        assert_eq!(second["tool_calls"][0]["function"]["arguments"], "{not json", "a string is sent as it is");
        assert_eq!(completion(&model, "s-1")["content"], "Done.");
        assert_eq!(completion(&model, "s-1")["content"], DEFAULT_TEXT, "the script ran out");
        assert_eq!(completion(&model, "other")["content"], DEFAULT_TEXT, "other sessions are unscripted");

        let (status, listed) = http(&model, "GET", "/_scripted/requests", "", "");
        assert_eq!(status, 200);
        let requests = listed["requests"].as_array().expect("a list");
        assert_eq!(requests.len(), 5);
        assert_eq!(requests[0]["sessionId"], "s-1");
        assert_eq!(requests[0]["lastUserText"], "hi");
        assert_eq!(requests[4]["sessionId"], "other");
        assert_eq!(model.requests().len(), 5, "the CLI's model calls, not the control requests");
        assert!(model.other_requests().is_empty(), "control requests are not recorded: {:?}", model.other_requests());
    }

    #[test]
    fn unreadable_scripts_are_refused_and_change_nothing() {
        let model = ScriptedModel::start().expect("start");
        for body in [
            "not json".to_owned(),
            json!({ "replies": [] }).to_string(),
            json!({ "sessionId": "s" }).to_string(),
            json!({ "sessionId": "s", "replies": [{}] }).to_string(),
            json!({ "sessionId": "s", "replies": [{ "text": 4 }] }).to_string(),
            json!({ "sessionId": "s", "replies": [{ "toolCalls": [{ "arguments": {} }] }] }).to_string(),
            json!({ "sessionId": "s", "replies": [{ "toolCalls": [] }] }).to_string(),
        ] {
            let (status, answer) = http(&model, "POST", "/_scripted/script", "", &body);
            assert_eq!(status, 400, "{body}: {answer}");
            assert!(answer["message"].is_string(), "{answer}");
        }
        assert_eq!(http(&model, "GET", "/_scripted/nothing", "", "").0, 404);
        assert_eq!(completion(&model, "s")["content"], DEFAULT_TEXT);
    }
}
