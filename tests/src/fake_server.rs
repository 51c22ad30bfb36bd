//! A scriptable fake Copilot CLI server, for tests and benchmarks.
//!
//! It speaks the CLI's protocol (JSON-RPC 2.0 in `Content-Length` frames, see
//! `capi-fake-server.md` §5 and §6) on one connection over any byte stream,
//! on its own thread named `fake-copilot-server`. It answers the handshake
//! and the session RPCs with the real shapes, emits the events a turn of the
//! real CLI emits without a model (or a scripted reply), and can be told to
//! misbehave: events before the `session.create` answer, a slow answer, a
//! flood of events, server-to-client requests, a connection dropped in the
//! middle of a call.
//!
//! ```no_run
//! use copilot_tests::fake_server::{FakeServer, FakeServerConfig};
//!
//! let config = FakeServerConfig { early_events: 3, ..FakeServerConfig::default() };
//! let (server, from_server, to_server) = FakeServer::pipes(config);
//! // ... drive a client over `from_server` / `to_server` ...
//! # drop((from_server, to_server));
//! assert!(server.received().iter().any(|m| m["method"] == "connect"));
//! ```
//!
//! Every frame goes out in one `write_all` call (header and body together)
//! under the writer's lock, so frames from the serving thread and from
//! [`FakeServer::send_raw`] or [`FakeServer::request`] never interleave.
//!
//! [`run_stdio`] and [`run_tcp_announcing`] serve a child process's stdio or
//! one TCP connection, so a benchmark can spawn the fake exactly as it would
//! spawn the real CLI.

use std::collections::BTreeSet;
use std::collections::HashMap;
use std::fs::File;
use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use copilot_core::{frame_header, itoa, FrameDecoder, MAX_FRAME_HEADER_LEN};
use serde_json::{json, Value};

/// JSON-RPC "method not found".
const METHOD_NOT_FOUND: i64 = -32601;
/// JSON-RPC "internal error", which the CLI uses for unknown sessions.
const INTERNAL_ERROR: i64 = -32603;
/// The CLI's answer to a `connect` with a missing or wrong token.
const AUTHENTICATION_FAILED: i64 = -32002;
/// JSON-RPC "parse error".
const PARSE_ERROR: i64 = -32700;
/// Flood frames are written in batches of about this many bytes.
const FLOOD_BATCH: usize = 64 * 1024;
/// The name of the serving thread.
const THREAD_NAME: &str = "fake-copilot-server";

/// How the fake server behaves. Every field has a default that mimics the
/// real CLI 1.0.102 without a model endpoint; change fields with struct
/// update syntax (`FakeServerConfig { early_events: 5, ..Default::default() }`)
/// or the `with_*` methods.
#[derive(Debug, Clone)]
pub struct FakeServerConfig {
    /// `protocolVersion` in the answers to `connect`, `ping` and
    /// `status.get`. Default 3.
    pub protocol_version: u32,
    /// Behave like a CLI older than `connect`: answer `connect` with error
    /// -32601, so a client must fall back to `ping` (which always answers
    /// `{"message","timestamp","protocolVersion"}`). Default false.
    pub legacy_connect: bool,
    /// The connection token `connect` requires in `params.token`; a missing
    /// or different token gets error -32002 `AUTHENTICATION_FAILED`. Default
    /// `None`: any `connect` succeeds.
    pub token: Option<String>,
    /// Number of `session.event`s of type `session.info` (data `{"n": i}`,
    /// unique event ids) sent after the `session.lifecycle` notification and
    /// BEFORE the `session.create` / `session.resume` answer. Default 0.
    pub early_events: usize,
    /// Number of `permission.requested` events (data
    /// `{"requestId":"perm-<i>","permissionRequest":{"kind":"shell"}}`) sent
    /// after the early events, still before the create / resume answer.
    /// Default 0.
    pub early_permission_requests: usize,
    /// Sleep between the early messages and the create / resume answer.
    /// Default zero.
    pub create_response_delay: Duration,
    /// Hold the create / resume answer, after the early messages, until
    /// [`FakeServer::release_create_response`] is called (or the connection
    /// closes); later answers are not held. Default false.
    pub hold_create_response: bool,
    /// Hold every `session.send` turn after its `user.message` until
    /// [`FakeServer::release_turns`] is called (or the connection closes).
    /// Default false.
    pub hold_turns: bool,
    /// `None` (default): a `session.send` turn is `user.message`,
    /// `assistant.turn_start`, `session.error` (authentication, "No model
    /// endpoint"), `session.idle`, as the real CLI without a model.
    /// `Some(text)`: `user.message`, `assistant.turn_start`, the text in
    /// `assistant.message_delta` pieces (split after spaces), `assistant.message`
    /// `{"messageId","content": text}`, `assistant.turn_end`, `session.idle`.
    pub reply_text: Option<String>,
    /// When a client message with this method arrives, the server closes
    /// the connection without answering it (so every call the client is
    /// waiting on should fail as disconnected). Default `None`.
    pub close_on_method: Option<String>,
    /// Write the body of every frame the client sends, as it arrives and as
    /// it came (byte for byte, but line breaks become spaces), to this file,
    /// one line each: what [`FakeServer::received`] holds, for a fake in
    /// another process, unparsed. Default `None`.
    pub record_to: Option<PathBuf>,
    /// Answer `session.options.update` with an error (-32603, "options
    /// refused by the fake") rather than `{"success": true}`. Default false.
    pub fail_options_update: bool,
}

impl Default for FakeServerConfig {
    fn default() -> Self {
        FakeServerConfig {
            protocol_version: 3,
            legacy_connect: false,
            token: None,
            early_events: 0,
            early_permission_requests: 0,
            create_response_delay: Duration::ZERO,
            hold_create_response: false,
            hold_turns: false,
            reply_text: None,
            close_on_method: None,
            record_to: None,
            fail_options_update: false,
        }
    }
}

impl FakeServerConfig {
    /// Sets [`protocol_version`](Self::protocol_version).
    pub fn with_protocol_version(mut self, version: u32) -> Self {
        self.protocol_version = version;
        self
    }

    /// Sets [`legacy_connect`](Self::legacy_connect).
    pub fn with_legacy_connect(mut self, legacy: bool) -> Self {
        self.legacy_connect = legacy;
        self
    }

    /// Sets [`token`](Self::token).
    pub fn with_token(mut self, token: impl Into<String>) -> Self {
        self.token = Some(token.into());
        self
    }

    /// Sets [`early_events`](Self::early_events) and
    /// [`early_permission_requests`](Self::early_permission_requests).
    pub fn with_early(mut self, events: usize, permission_requests: usize) -> Self {
        self.early_events = events;
        self.early_permission_requests = permission_requests;
        self
    }

    /// Sets [`create_response_delay`](Self::create_response_delay).
    pub fn with_create_response_delay(mut self, delay: Duration) -> Self {
        self.create_response_delay = delay;
        self
    }

    /// Sets [`hold_turns`](Self::hold_turns).
    pub fn with_hold_turns(mut self, hold: bool) -> Self {
        self.hold_turns = hold;
        self
    }

    /// Sets [`hold_create_response`](Self::hold_create_response).
    pub fn with_hold_create_response(mut self, hold: bool) -> Self {
        self.hold_create_response = hold;
        self
    }

    /// Sets [`reply_text`](Self::reply_text).
    pub fn with_reply_text(mut self, text: impl Into<String>) -> Self {
        self.reply_text = Some(text.into());
        self
    }

    /// Sets [`close_on_method`](Self::close_on_method).
    pub fn with_close_on_method(mut self, method: impl Into<String>) -> Self {
        self.close_on_method = Some(method.into());
        self
    }
}

/// A running fake server: a handle on the one connection it serves.
///
/// Dropping the handle closes the connection (like [`close`](Self::close));
/// it does not wait for the serving thread.
pub struct FakeServer {
    shared: Arc<Shared>,
}

impl FakeServer {
    /// Serves one connection: reads client frames from `reader` and writes
    /// frames to `writer`, on a new thread. The server stops at the end of
    /// `reader`, on a read or write error, on `runtime.shutdown`, on
    /// [`FakeServerConfig::close_on_method`] and on [`close`](Self::close).
    pub fn serve(config: FakeServerConfig, reader: Box<dyn Read + Send>, writer: Box<dyn Write + Send>) -> FakeServer {
        let shared = Arc::new(Shared::new(Conn::Open(writer)));
        let thread_shared = Arc::clone(&shared);
        spawn(move || serve_loop(&thread_shared, config, reader));
        FakeServer { shared }
    }

    /// Serves one connection over two OS pipes. Returns the server and the
    /// CLIENT's ends: the reader gets the server's frames, the writer takes
    /// the client's frames.
    ///
    /// # Panics
    /// If the OS cannot create a pipe.
    pub fn pipes(config: FakeServerConfig) -> (FakeServer, Box<dyn Read + Send>, Box<dyn Write + Send>) {
        let (client_reader, server_writer) = io::pipe().expect("create a pipe");
        let (server_reader, client_writer) = io::pipe().expect("create a pipe");
        let server = FakeServer::serve(config, Box::new(server_reader), Box::new(server_writer));
        (server, Box::new(client_reader), Box::new(client_writer))
    }

    /// Listens on `127.0.0.1:0` and serves the first connection accepted
    /// (with `TCP_NODELAY`). Returns at once with the address to connect to;
    /// frames the server is asked to send before the client connects wait
    /// for the connection.
    ///
    /// # Panics
    /// If no loopback port can be bound.
    pub fn tcp(config: FakeServerConfig) -> (FakeServer, SocketAddr) {
        let listener = TcpListener::bind(("127.0.0.1", 0)).expect("bind 127.0.0.1:0");
        let addr = listener.local_addr().expect("local address of the listener");
        (FakeServer::accept_one(config, listener, addr), addr)
    }

    /// Serves the first connection `listener` accepts, on the serving thread.
    fn accept_one(config: FakeServerConfig, listener: TcpListener, addr: SocketAddr) -> FakeServer {
        let shared = Arc::new(Shared::new(Conn::Pending));
        // Until a client connects, closing means waking `accept` up.
        *lock(&shared.shutdown_hook) = Some(Box::new(move || drop(TcpStream::connect(addr))));
        let thread_shared = Arc::clone(&shared);
        spawn(move || {
            let shared = thread_shared;
            let accepted = listener.accept().and_then(|(stream, _)| tcp_halves(stream));
            drop(listener);
            match accepted {
                Ok((reader, writer, shutdown)) => {
                    if shared.open(Box::new(writer), Box::new(move || drop(shutdown.shutdown(Shutdown::Both)))) {
                        serve_loop(&shared, config, Box::new(reader));
                    } else {
                        shared.finish();
                    }
                }
                Err(_) => shared.finish(),
            }
        });
        FakeServer { shared }
    }

    /// Every message the client sent so far (requests, notifications and
    /// responses), in arrival order; unparsable frames are not included.
    pub fn received(&self) -> Vec<Value> {
        lock(&self.shared.received).clone()
    }

    /// Waits until a received message satisfies `matches` and returns it, or
    /// `None` after `timeout`. Messages received before the call count.
    pub fn wait_received(&self, timeout: Duration, matches: impl Fn(&Value) -> bool) -> Option<Value> {
        let deadline = Instant::now() + timeout;
        let mut received = lock(&self.shared.received);
        let mut seen = 0;
        loop {
            if let Some(found) = received[seen..].iter().find(|m| matches(m)) {
                return Some(found.clone());
            }
            seen = received.len();
            let left = deadline.checked_duration_since(Instant::now()).filter(|d| !d.is_zero())?;
            received =
                self.shared.received_changed.wait_timeout(received, left).unwrap_or_else(PoisonError::into_inner).0;
        }
    }

    /// Sends a server-to-client REQUEST `{"jsonrpc":"2.0","id","method","params"}`
    /// and returns a receiver for the client's response (the whole message,
    /// with `result` or `error`), matched on `id` exactly (a number or a
    /// string; `5` and `"5"` differ). The receiver reports disconnection if
    /// the request cannot be written or the connection closes first.
    pub fn request(&self, method: &str, params: Value, id: Value) -> Receiver<Value> {
        let (tx, rx) = mpsc::channel();
        let key = id.to_string();
        lock(&self.shared.pending).insert(key.clone(), tx);
        let body = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        if self.shared.write_json(&body).is_err() {
            lock(&self.shared.pending).remove(&key);
        }
        rx
    }

    /// [`request`](Self::request), then waits up to `timeout` for the
    /// client's response.
    pub fn request_blocking(
        &self,
        method: &str,
        params: Value,
        id: Value,
        timeout: Duration,
    ) -> Result<Value, RecvTimeoutError> {
        self.request(method, params, id).recv_timeout(timeout)
    }

    /// Lets a create / resume answer held by
    /// [`FakeServerConfig::hold_create_response`] go, and every later one.
    pub fn release_create_response(&self) {
        self.shared.release_create_response();
    }

    /// Lets the turns held by [`FakeServerConfig::hold_turns`] go on, and
    /// every later one.
    pub fn release_turns(&self) {
        *lock(&self.shared.turns_released) = true;
        self.shared.create_released_changed.notify_all();
    }

    /// Sends `body` as one frame, verbatim (it need not be valid JSON).
    pub fn send_raw(&self, body: &str) -> io::Result<()> {
        self.shared.write_frame(body.as_bytes())
    }

    /// Sends `events` `assistant.message_delta` events to `session_id` as fast
    /// as possible, then `session.idle`, exactly as a `session.send` with the
    /// prompt `flood:<events>` does. Event `i` (from 0) has the id `"<i>"`
    /// and data `{"messageId":"m","deltaContent":"<i>"}`. Returns when all
    /// are written.
    pub fn flood(&self, session_id: &str, events: usize) -> io::Result<()> {
        self.shared.flood(session_id, events)?;
        self.shared.event(session_id, "session.idle", json!({}))
    }

    /// Closes the connection: the client reads end of stream (a TCP socket
    /// is shut down both ways), pending [`request`](Self::request)s report
    /// disconnection and the serving thread stops at its next read. Over
    /// pipes, a serving thread blocked in a read stops when the client sends
    /// or closes its end.
    pub fn close(&self) {
        self.shared.close();
    }

    /// Whether the connection is closed (by either side).
    pub fn is_closed(&self) -> bool {
        matches!(*lock(&self.shared.conn), Conn::Closed)
    }

    /// Blocks until the serving thread has stopped.
    pub fn wait(&self) {
        let mut done = lock(&self.shared.done);
        while !*done {
            done = self.shared.done_changed.wait(done).unwrap_or_else(PoisonError::into_inner);
        }
    }

    /// Blocks until the serving thread has stopped or `timeout` has passed;
    /// returns whether it stopped.
    pub fn wait_timeout(&self, timeout: Duration) -> bool {
        let done = lock(&self.shared.done);
        let (done, _) = self
            .shared
            .done_changed
            .wait_timeout_while(done, timeout, |done| !*done)
            .unwrap_or_else(PoisonError::into_inner);
        *done
    }
}

impl Drop for FakeServer {
    fn drop(&mut self) {
        self.shared.close();
    }
}

/// Serves this process's stdin and stdout with `config`, as the real CLI in
/// `--stdio` mode does; returns when stdin ends or after answering
/// `runtime.shutdown`.
pub fn run_stdio(config: FakeServerConfig) -> io::Result<()> {
    let server = FakeServer::serve(config, Box::new(io::stdin()), raw_stdout()?);
    server.wait();
    Ok(())
}

/// Binds `127.0.0.1:0`, prints `CLI server listening on port N` on stdout
/// (and flushes) as the real CLI does, then serves the first connection with
/// `config`; returns when the client disconnects or after answering
/// `runtime.shutdown`.
pub fn run_tcp_announcing(config: FakeServerConfig) -> io::Result<()> {
    let listener = TcpListener::bind(("127.0.0.1", 0))?;
    let addr = listener.local_addr()?;
    let mut stdout = io::stdout();
    writeln!(stdout, "CLI server listening on port {}", addr.port())?;
    stdout.flush()?;
    let server = FakeServer::accept_one(config, listener, addr);
    server.wait();
    Ok(())
}

/// Stdout without `std`'s line buffering, which would hold back a frame
/// body until the next newline.
#[cfg(unix)]
fn raw_stdout() -> io::Result<Box<dyn Write + Send>> {
    use std::os::fd::AsFd;
    Ok(Box::new(std::fs::File::from(io::stdout().as_fd().try_clone_to_owned()?)))
}

/// Stdout (flushed after every frame).
#[cfg(not(unix))]
fn raw_stdout() -> io::Result<Box<dyn Write + Send>> {
    Ok(Box::new(io::stdout()))
}

/// A TCP connection as reader, writer and a handle to shut it down.
fn tcp_halves(stream: TcpStream) -> io::Result<(TcpStream, TcpStream, TcpStream)> {
    stream.set_nodelay(true)?;
    Ok((stream.try_clone()?, stream.try_clone()?, stream))
}

fn spawn(f: impl FnOnce() + Send + 'static) {
    std::thread::Builder::new().name(THREAD_NAME.into()).spawn(f).expect("spawn the fake server thread");
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The server's side of the connection.
enum Conn {
    /// A TCP server that has not accepted its client yet.
    Pending,
    /// Connected.
    Open(Box<dyn Write + Send>),
    /// Closed by either side; writes fail.
    Closed,
}

/// Undoes the connection for good (shuts a socket down, or wakes `accept`).
type ShutdownHook = Box<dyn FnOnce() + Send>;

/// State shared by the handle and the serving thread.
struct Shared {
    conn: Mutex<Conn>,
    conn_changed: Condvar,
    shutdown_hook: Mutex<Option<ShutdownHook>>,
    received: Mutex<Vec<Value>>,
    received_changed: Condvar,
    /// Server-to-client requests awaiting an answer, by serialized id.
    pending: Mutex<HashMap<String, Sender<Value>>>,
    done: Mutex<bool>,
    done_changed: Condvar,
    next_event_id: AtomicU64,
    /// Whether create / resume answers may go (see `hold_create_response`).
    create_released: Mutex<bool>,
    /// Signalled when create answers or turns are let go.
    create_released_changed: Condvar,
    /// Whether held turns may go on (see `hold_turns`).
    turns_released: Mutex<bool>,
}

impl Shared {
    fn new(conn: Conn) -> Shared {
        Shared {
            conn: Mutex::new(conn),
            conn_changed: Condvar::new(),
            shutdown_hook: Mutex::new(None),
            received: Mutex::new(Vec::new()),
            received_changed: Condvar::new(),
            pending: Mutex::new(HashMap::new()),
            done: Mutex::new(false),
            done_changed: Condvar::new(),
            next_event_id: AtomicU64::new(1),
            create_released: Mutex::new(false),
            create_released_changed: Condvar::new(),
            turns_released: Mutex::new(false),
        }
    }

    fn release_create_response(&self) {
        *lock(&self.create_released) = true;
        self.create_released_changed.notify_all();
    }

    fn wait_turns_released(&self) {
        let mut released = lock(&self.turns_released);
        while !*released {
            released = self.create_released_changed.wait(released).unwrap_or_else(PoisonError::into_inner);
        }
    }

    fn wait_create_released(&self) {
        let mut released = lock(&self.create_released);
        while !*released {
            released = self.create_released_changed.wait(released).unwrap_or_else(PoisonError::into_inner);
        }
    }

    /// Connects a pending server; false if it was closed meanwhile.
    fn open(&self, writer: Box<dyn Write + Send>, hook: ShutdownHook) -> bool {
        let mut conn = lock(&self.conn);
        if !matches!(*conn, Conn::Pending) {
            drop(conn);
            hook();
            return false;
        }
        *conn = Conn::Open(writer);
        *lock(&self.shutdown_hook) = Some(hook);
        self.conn_changed.notify_all();
        true
    }

    fn close(&self) {
        // The hook first: shutting a socket down unblocks a write that holds
        // the connection's lock. Once more after `Closed` is set, in case the
        // serving thread connected in between.
        self.run_shutdown_hook();
        // A held create answer or turn is let go, so that the serving thread ends.
        self.release_create_response();
        *lock(&self.turns_released) = true;
        self.create_released_changed.notify_all();
        let old = std::mem::replace(&mut *lock(&self.conn), Conn::Closed);
        self.conn_changed.notify_all();
        drop(old);
        self.run_shutdown_hook();
        lock(&self.pending).clear();
    }

    fn run_shutdown_hook(&self) {
        let hook = lock(&self.shutdown_hook).take();
        if let Some(hook) = hook {
            hook();
        }
    }

    fn is_closed(&self) -> bool {
        matches!(*lock(&self.conn), Conn::Closed)
    }

    /// Closes the connection and marks the serving thread as stopped.
    fn finish(&self) {
        self.close();
        *lock(&self.done) = true;
        self.done_changed.notify_all();
    }

    fn record(&self, message: Value) {
        lock(&self.received).push(message);
        self.received_changed.notify_all();
    }

    /// Delivers a client response to the request waiting for it.
    fn answer(&self, response: Value) {
        let key = response["id"].to_string();
        if let Some(tx) = lock(&self.pending).remove(&key) {
            let _ = tx.send(response);
        }
    }

    /// Writes complete frames, waiting for a pending TCP client.
    fn write_bytes(&self, bytes: &[u8]) -> io::Result<()> {
        let mut conn = lock(&self.conn);
        while matches!(*conn, Conn::Pending) {
            conn = self.conn_changed.wait(conn).unwrap_or_else(PoisonError::into_inner);
        }
        match &mut *conn {
            Conn::Open(writer) => {
                writer.write_all(bytes)?;
                writer.flush()
            }
            _ => Err(io::Error::new(io::ErrorKind::BrokenPipe, "the fake server's connection is closed")),
        }
    }

    fn write_frame(&self, body: &[u8]) -> io::Result<()> {
        let mut header = [0u8; MAX_FRAME_HEADER_LEN];
        let n = frame_header(body.len(), &mut header);
        let mut frame = Vec::with_capacity(n + body.len());
        frame.extend_from_slice(&header[..n]);
        frame.extend_from_slice(body);
        self.write_bytes(&frame)
    }

    fn write_json(&self, message: &Value) -> io::Result<()> {
        self.write_frame(&serde_json::to_vec(message)?)
    }

    /// Sends one `session.event` with a fresh event id.
    fn event(&self, session_id: &str, event_type: &str, data: Value) -> io::Result<()> {
        let id = format!("e-{}", self.next_event_id.fetch_add(1, Ordering::Relaxed));
        self.write_json(&json!({
            "jsonrpc": "2.0",
            "method": "session.event",
            "params": {
                "sessionId": session_id,
                "event": {"type": event_type, "data": data, "id": id, "timestamp": timestamp(), "parentId": null},
            },
        }))
    }

    /// Writes `events` `assistant.message_delta` frames in ~64 KiB batches,
    /// without serde: only the two copies of the index vary between frames.
    fn flood(&self, session_id: &str, events: usize) -> io::Result<()> {
        let session_id = serde_json::to_string(session_id)?;
        let prefix = format!(
            r#"{{"jsonrpc":"2.0","method":"session.event","params":{{"sessionId":{session_id},"event":{{"type":"assistant.message_delta","id":""#
        );
        let middle = format!(
            r#"","timestamp":"{}","parentId":null,"ephemeral":true,"data":{{"messageId":"m","deltaContent":""#,
            timestamp()
        );
        let suffix = r#""}}}}"#;
        let fixed = prefix.len() + middle.len() + suffix.len();
        let mut batch = Vec::with_capacity(FLOOD_BATCH + 2 * fixed + 128);
        let mut header = [0u8; MAX_FRAME_HEADER_LEN];
        let mut digits = [0u8; 20];
        for i in 0..events {
            let index = itoa(i as u64, &mut digits);
            let n = frame_header(fixed + 2 * index.len(), &mut header);
            batch.extend_from_slice(&header[..n]);
            batch.extend_from_slice(prefix.as_bytes());
            batch.extend_from_slice(index);
            batch.extend_from_slice(middle.as_bytes());
            batch.extend_from_slice(index);
            batch.extend_from_slice(suffix.as_bytes());
            if batch.len() >= FLOOD_BATCH {
                self.write_bytes(&batch)?;
                batch.clear();
            }
        }
        if !batch.is_empty() {
            self.write_bytes(&batch)?;
        }
        Ok(())
    }
}

impl Shared {
    /// Writes the realistic flood of [`crate::flood_mix`] in ~64 KiB batches.
    fn flood_mix(&self, session_id: &str, events: usize) -> io::Result<()> {
        let mut writer = crate::flood_mix::MixWriter::new(session_id, &timestamp());
        let mut batch = Vec::with_capacity(2 * FLOOD_BATCH);
        for i in 0..events {
            writer.frame(i, &mut batch);
            if batch.len() >= FLOOD_BATCH {
                self.write_bytes(&batch)?;
                batch.clear();
            }
        }
        if !batch.is_empty() {
            self.write_bytes(&batch)?;
        }
        Ok(())
    }
}

/// Now as the CLI writes times: `2026-11-29T15:13:07.202Z`.
fn timestamp() -> String {
    let ms = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default().as_millis() as u64;
    let (days, ms) = (ms / 86_400_000, ms % 86_400_000);
    let (year, month, day) = civil_from_days(days as i64);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        ms / 3_600_000,
        ms / 60_000 % 60,
        ms / 1000 % 60,
        ms % 1000
    )
}

/// The proleptic Gregorian date of a day count since 1970-01-01 (Howard
/// Hinnant's `civil_from_days`).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

fn unix_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default().as_millis() as u64
}

/// Reads and answers client frames until the connection ends.
fn serve_loop(shared: &Arc<Shared>, config: FakeServerConfig, mut reader: Box<dyn Read + Send>) {
    let mut handler = Handler::new(Arc::clone(shared), config);
    let mut decoder = FrameDecoder::with_buffer(vec![0u8; 1 << 20]);
    'serve: while !shared.is_closed() {
        let n = match reader.read(decoder.spare()) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(_) => break,
        };
        decoder.commit(n);
        if shared.is_closed() {
            break;
        }
        while let Some(frame) = decoder.poll() {
            let body = frame.ok();
            if let Some(body) = body {
                handler.write_record(body);
            }
            let message = body.and_then(|body| serde_json::from_slice::<Value>(body).ok());
            let flow = match message {
                Some(message) => handler.handle(message),
                None => handler.error(Value::Null, PARSE_ERROR, "Parse error").map(|()| Flow::Continue),
            };
            if !matches!(flow, Ok(Flow::Continue)) {
                break 'serve;
            }
        }
    }
    shared.finish();
}

/// Whether to keep serving after a message.
enum Flow {
    Continue,
    Stop,
}

/// A session the server has created.
struct Session {
    id: String,
    start_time: String,
    modified_time: String,
    /// Created or resumed, and not destroyed since.
    active: bool,
}

/// The serving thread's state: answers one client message at a time.
struct Handler {
    shared: Arc<Shared>,
    config: FakeServerConfig,
    sessions: Vec<Session>,
    next_session: u64,
    next_message: u64,
    /// The file of [`FakeServerConfig::record_to`], if it opened.
    record: Option<File>,
    /// An `obligations:` turn waiting for its answers: the session, and the
    /// request ids (of events and of server requests) not answered yet.
    awaiting: Option<(String, BTreeSet<String>)>,
}

impl Handler {
    fn new(shared: Arc<Shared>, config: FakeServerConfig) -> Handler {
        let record = config.record_to.as_ref().and_then(|path| File::create(path).ok());
        Handler { shared, config, sessions: Vec::new(), next_session: 1, next_message: 1, record, awaiting: None }
    }

    /// Writes a frame's `body` to the record file, as it came, as one line
    /// (line breaks in a body are JSON whitespace: they become spaces).
    fn write_record(&mut self, body: &[u8]) {
        if let Some(file) = &mut self.record {
            let mut line: Vec<u8> = body.iter().map(|&b| if b == b'\n' || b == b'\r' { b' ' } else { b }).collect();
            line.push(b'\n');
            let _ = file.write_all(&line);
        }
    }

    /// Marks `request_id` of an `obligations:` turn answered; the last
    /// answer ends the turn with `session.idle`.
    fn answered(&mut self, request_id: &str) -> io::Result<()> {
        let Some((sid, left)) = &mut self.awaiting else { return Ok(()) };
        left.remove(request_id);
        if left.is_empty() {
            let sid = sid.clone();
            self.awaiting = None;
            self.shared.event(&sid, "session.idle", json!({}))?;
        }
        Ok(())
    }

    fn result(&self, id: Value, result: Value) -> io::Result<()> {
        self.shared.write_json(&json!({"jsonrpc": "2.0", "id": id, "result": result}))
    }

    fn error(&self, id: Value, code: i64, message: &str) -> io::Result<()> {
        self.shared.write_json(&json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}}))
    }

    fn session(&self, id: &str) -> Option<&Session> {
        self.sessions.iter().find(|s| s.id == id)
    }

    fn handle(&mut self, message: Value) -> io::Result<Flow> {
        let method = message.get("method").and_then(Value::as_str).map(str::to_owned);
        let id = message.get("id").cloned();
        let params = message.get("params").cloned().unwrap_or(Value::Null);
        let Some(method) = method else {
            // A response to one of our requests.
            let answered = message.get("id").and_then(Value::as_str).map(str::to_owned);
            self.shared.record(message.clone());
            self.shared.answer(message);
            if let Some(request_id) = answered {
                self.answered(&request_id)?;
            }
            return Ok(Flow::Continue);
        };
        self.shared.record(message);
        if self.config.close_on_method.as_deref() == Some(method.as_str()) {
            return Ok(Flow::Stop);
        }
        let Some(id) = id else {
            return Ok(Flow::Continue); // a notification
        };
        let session_id = params.get("sessionId").and_then(Value::as_str).map(str::to_owned);
        let version = self.config.protocol_version;
        match method.as_str() {
            "connect" => self.connect(id, &params)?,
            "ping" => {
                let text = match params.get("message").and_then(Value::as_str) {
                    Some(m) => format!("pong: {m}"),
                    None => "pong".to_owned(),
                };
                self.result(id, json!({"message": text, "timestamp": unix_ms(), "protocolVersion": version}))?;
            }
            "status.get" => self.result(id, json!({"version": "fake", "protocolVersion": version}))?,
            "runtime.shutdown" => {
                self.result(id, json!({}))?;
                return Ok(Flow::Stop);
            }
            "session.create" => self.open_session(id, &params, None)?,
            "session.resume" => match session_id.filter(|s| self.session(s).is_some()) {
                Some(sid) => self.open_session(id, &params, Some(sid))?,
                None => self.error(id, INTERNAL_ERROR, "Session not found")?,
            },
            "session.send" => match session_id.filter(|s| self.session(s).is_some_and(|s| s.active)) {
                Some(sid) => self.send(id, &sid, &params)?,
                None => self.error(id, INTERNAL_ERROR, "Session not found")?,
            },
            "session.list" => {
                let sessions: Vec<Value> = self
                    .sessions
                    .iter()
                    .map(|s| {
                        json!({"sessionId": s.id, "startTime": s.start_time, "modifiedTime": s.modified_time, "isRemote": false})
                    })
                    .collect();
                self.result(id, json!({ "sessions": sessions }))?;
            }
            "session.getLastId" => match self.sessions.last() {
                Some(s) => self.result(id, json!({"sessionId": s.id}))?,
                None => self.result(id, json!({}))?,
            },
            "session.delete" => {
                let before = self.sessions.len();
                self.sessions.retain(|s| Some(&s.id) != session_id.as_ref());
                if self.sessions.len() < before {
                    self.result(id, json!({"success": true}))?;
                } else {
                    self.result(id, json!({"success": false, "error": "Session not found"}))?;
                }
            }
            "session.getMessages" => self.result(id, json!({"events": []}))?,
            // The options patched once a session is open.
            "session.options.update" if self.config.fail_options_update => {
                self.error(id, INTERNAL_ERROR, "options refused by the fake")?
            }
            "session.options.update" => self.result(id, json!({"success": true}))?,
            // Opting in to interest-gated events; the fake sends them only
            // when a test pushes them, so the handle is all there is to it.
            "session.eventLog.registerInterest" => self.result(id, json!({"handle": "interest-1"}))?,
            "session.abort" => {
                let sid = session_id.unwrap_or_default();
                let reason = params.get("reason").and_then(Value::as_str).unwrap_or("user initiated");
                self.result(id, json!({"success": true}))?;
                self.shared.event(&sid, "abort", json!({ "reason": reason }))?;
                self.shared.event(&sid, "session.idle", json!({}))?;
            }
            "session.destroy" => {
                let sid = session_id.unwrap_or_default();
                self.shared.event(&sid, "session.shutdown", json!({}))?;
                if let Some(s) = self.sessions.iter_mut().find(|s| s.id == sid) {
                    s.active = false;
                }
                self.result(id, json!({"success": true}))?;
            }
            // The answers to the waits of `permission.requested`,
            // `elicitation.requested`, `external_tool.requested`, ...
            answer if answer.starts_with("session.") && answer.contains(".handlePending") => {
                self.result(id, json!({"success": true}))?;
                if let Some(request_id) = params.get("requestId").and_then(Value::as_str) {
                    self.answered(request_id)?;
                }
            }
            // A client with an inference request handler: registered, and
            // each piece of its responses accepted (kept in `received`).
            "llmInference.setProvider" => self.result(id, json!({"success": true}))?,
            "llmInference.httpResponseStart" | "llmInference.httpResponseChunk" => {
                self.result(id, json!({"accepted": true}))?
            }
            other => self.error(id, METHOD_NOT_FOUND, &format!("Method not found: {other}"))?,
        }
        Ok(Flow::Continue)
    }

    fn connect(&self, id: Value, params: &Value) -> io::Result<()> {
        if self.config.legacy_connect {
            return self.error(id, METHOD_NOT_FOUND, "Method not found: connect");
        }
        if let Some(token) = &self.config.token {
            if params.get("token").and_then(Value::as_str) != Some(token.as_str()) {
                return self.error(id, AUTHENTICATION_FAILED, "AUTHENTICATION_FAILED");
            }
        }
        let version = self.config.protocol_version;
        self.result(
            id,
            json!({"ok": true, "protocolVersion": version, "version": "fake", "taskKinds": ["agent", "shell"]}),
        )
    }

    /// `session.create` (`resume` is `None`) or `session.resume` of a known id.
    fn open_session(&mut self, id: Value, params: &Value, resume: Option<String>) -> io::Result<()> {
        let now = timestamp();
        let sid = match &resume {
            Some(sid) => sid.clone(),
            None => match params.get("sessionId").and_then(Value::as_str) {
                Some(sid) => sid.to_owned(),
                None => {
                    self.next_session += 1;
                    format!("fake-{}", self.next_session - 1)
                }
            },
        };
        let start_time = match self.sessions.iter_mut().find(|s| s.id == sid) {
            Some(s) => {
                s.active = true;
                s.modified_time = now.clone();
                s.start_time.clone()
            }
            None => {
                let s = Session { id: sid.clone(), start_time: now.clone(), modified_time: now.clone(), active: true };
                self.sessions.push(s);
                now.clone()
            }
        };
        let lifecycle = if resume.is_some() { "session.updated" } else { "session.created" };
        self.shared.write_json(&json!({
            "jsonrpc": "2.0",
            "method": "session.lifecycle",
            "params": {"type": lifecycle, "sessionId": sid, "metadata": {"startTime": start_time, "modifiedTime": now}},
        }))?;
        for n in 0..self.config.early_events {
            self.shared.event(&sid, "session.info", json!({ "n": n }))?;
        }
        for i in 0..self.config.early_permission_requests {
            let data = json!({"requestId": format!("perm-{i}"), "permissionRequest": {"kind": "shell"}});
            self.shared.event(&sid, "permission.requested", data)?;
        }
        if !self.config.create_response_delay.is_zero() {
            std::thread::sleep(self.config.create_response_delay);
        }
        if self.config.hold_create_response {
            self.shared.wait_create_released();
        }
        let model = params.get("model").and_then(Value::as_str).unwrap_or("fake-model");
        self.result(
            id,
            json!({
                "sessionId": sid,
                "nativeSessionId": sid,
                "startTime": start_time,
                "isRemote": false,
                "mode": "interactive",
                "workspacePath": format!("/tmp/fake-copilot/session-state/{sid}"),
                "capabilities": {"ui": {"elicitation": false, "mcpApps": false, "canvases": false}, "extensions": false},
                "modelState": {"modelId": model},
            }),
        )?;
        if resume.is_some() {
            self.shared.event(&sid, "session.resume", json!({"sessionId": sid, "resumeTime": now, "eventCount": 0}))
        } else {
            let cwd = params.get("workingDirectory").cloned().unwrap_or(Value::Null);
            let data = json!({
                "sessionId": sid,
                "version": 1,
                "producer": "fake-copilot",
                "copilotVersion": "fake",
                "startTime": start_time,
                "selectedModel": model,
                "context": {"cwd": cwd},
            });
            self.shared.event(&sid, "session.start", data)
        }
    }

    /// `session.send`: the answer, then a turn, or a flood (`flood:N`, N
    /// deltas; `flood-mix:N`, the realistic mix of [`crate::flood_mix`]).
    fn send(&mut self, id: Value, sid: &str, params: &Value) -> io::Result<()> {
        let n = self.next_message;
        self.next_message += 1;
        let message_id = format!("m-{n}");
        self.result(id, json!({ "messageId": message_id }))?;
        let prompt = params.get("prompt").and_then(Value::as_str).unwrap_or_default();
        if let Some(events) = prompt.strip_prefix("flood:").and_then(|s| s.trim().parse::<usize>().ok()) {
            self.shared.flood(sid, events)?;
            return self.shared.event(sid, "session.idle", json!({}));
        }
        if let Some(events) = prompt.strip_prefix("flood-mix:").and_then(|s| s.trim().parse::<usize>().ok()) {
            self.shared.flood_mix(sid, events)?;
            return self.shared.event(sid, "session.idle", json!({}));
        }
        if let Some(tool) = prompt.strip_prefix("obligations:") {
            return self.obligations(sid, &message_id, tool.trim());
        }
        let turn = json!({"turnId": n.to_string()});
        self.shared.event(sid, "user.message", json!({"content": prompt, "messageId": message_id}))?;
        if self.config.hold_turns {
            self.shared.wait_turns_released();
        }
        self.shared.event(sid, "assistant.turn_start", turn.clone())?;
        match &self.config.reply_text {
            Some(text) => {
                let reply_id = format!("a-{n}");
                for piece in text.split_inclusive(' ') {
                    let data = json!({"messageId": reply_id, "deltaContent": piece});
                    self.shared.event(sid, "assistant.message_delta", data)?;
                }
                self.shared.event(sid, "assistant.message", json!({"messageId": reply_id, "content": text}))?;
                self.shared.event(sid, "assistant.turn_end", turn)?;
            }
            None => {
                let data = json!({"errorType": "authentication", "message": "No model endpoint"});
                self.shared.event(sid, "session.error", data)?;
            }
        }
        self.shared.event(sid, "session.idle", json!({}))
    }
}

impl Handler {
    /// An `obligations:<tool>` turn: one wait of each kind a client
    /// answers (each typed handler kind's, and refusals), at once;
    /// `session.idle` comes when all are answered.
    fn obligations(&mut self, sid: &str, message_id: &str, tool: &str) -> io::Result<()> {
        self.shared.event(
            sid,
            "user.message",
            json!({"content": format!("obligations:{tool}"), "messageId": message_id}),
        )?;
        self.shared.event(sid, "assistant.turn_start", json!({"turnId": "obligations"}))?;
        let requests = [
            (
                "hook-pre",
                "hooks.invoke",
                json!({"sessionId": sid, "hookType": "preToolUse",
                "input": {"sessionId": sid, "timestamp": 1_764_000_000_000_u64, "cwd": "/tmp",
                          "toolName": "bash", "toolArgs": {"command": "ls"}}}),
            ),
            (
                "hook-unset",
                "hooks.invoke",
                json!({"sessionId": sid, "hookType": "sessionEnd",
                "input": {"sessionId": sid, "timestamp": 1_764_000_000_000_u64, "cwd": "/tmp", "reason": "complete"}}),
            ),
            ("no-handler", "sessionFs.readFile", json!({"sessionId": sid, "path": "/etc/hostname"})),
            ("unknown-method", "fake.unknownMethod", json!({"sessionId": sid})),
            (
                "input-1",
                "userInput.request",
                json!({"sessionId": sid, "question": "Which?", "choices": ["a", "b"], "allowFreeform": true}),
            ),
            (
                "plan-1",
                "exitPlanMode.request",
                json!({"sessionId": sid, "summary": "s", "planContent": "p",
                "actions": ["interactive", "autopilot"], "recommendedAction": "interactive"}),
            ),
            (
                "transform-1",
                "systemMessage.transform",
                json!({"sessionId": sid, "sections": {"tone": {"content": "Be brief."}, "identity": {"content": "I am."}}}),
            ),
            ("token-1", "providerToken.getToken", json!({"sessionId": sid, "providerName": "default"})),
            // Canvases: an open, an open that gives nothing, an action, a
            // close, a handler's error with its code and without, an action
            // without a handler, a canvas not declared.
            ("canvas-open", "canvas.open", canvas(sid, "counter", None, json!({"start": 3}))),
            ("canvas-open-quiet", "canvas.open", canvas(sid, "quiet", None, Value::Null)),
            ("canvas-action", "canvas.action.invoke", canvas(sid, "counter", Some("increment"), json!({"by": 2}))),
            ("canvas-close", "canvas.close", canvas(sid, "counter", None, Value::Null)),
            ("canvas-close-quiet", "canvas.close", canvas(sid, "quiet", None, Value::Null)),
            ("canvas-coded", "canvas.action.invoke", canvas(sid, "counter", Some("explode"), Value::Null)),
            ("canvas-failed", "canvas.open", canvas(sid, "broken", None, Value::Null)),
            ("canvas-no-action", "canvas.action.invoke", canvas(sid, "counter", Some("missing"), Value::Null)),
            ("canvas-unknown", "canvas.open", canvas(sid, "nope", None, Value::Null)),
            ("bad-canvas", "canvas.open", json!({"sessionId": sid, "instanceId": "c1"})),
            // Waits with unreadable data: a member the handler reads is
            // missing (the core refuses them), or another member is missing
            // or of another kind (the handler is asked all the same).
            ("bad-input-choices", "userInput.request", json!({"sessionId": sid, "question": "Which?", "choices": 5})),
            ("bad-input-question", "userInput.request", json!({"sessionId": sid, "choices": ["a"]})),
            ("bad-plan", "exitPlanMode.request", json!({"sessionId": sid, "summary": 5, "actions": "x"})),
            (
                "bad-transform",
                "systemMessage.transform",
                json!({"sessionId": sid, "sections": {"tone": "x", "identity": {"content": 5}}}),
            ),
            ("bad-token", "providerToken.getToken", json!({"sessionId": sid})),
            ("bad-hook", "hooks.invoke", json!({"sessionId": sid, "input": {}})),
            (
                "bad-hook-input",
                "hooks.invoke",
                json!({"sessionId": sid, "hookType": "preToolUse", "input": {"toolName": 5, "timestamp": "soon"}}),
            ),
        ];
        let events = [
            (
                "perm-1",
                "permission.requested",
                json!({"requestId": "perm-1",
                "permissionRequest": {"kind": "shell", "fullCommandText": "ls", "intention": "List files"}}),
            ),
            (
                "elicit-1",
                "elicitation.requested",
                json!({"requestId": "elicit-1", "message": "Name?",
                "requestedSchema": {"type": "object", "properties": {}}}),
            ),
            (
                "tool-1",
                "external_tool.requested",
                json!({"requestId": "tool-1", "sessionId": sid,
                "toolCallId": "call-1", "toolName": tool, "arguments": {}}),
            ),
            (
                "oauth-1",
                "mcp.oauth_required",
                json!({"requestId": "oauth-1", "serverName": "remote", "serverUrl": "https://mcp.example/",
                "reason": "initial"}),
            ),
            // Unreadable, as above.
            ("bad-perm", "permission.requested", json!({"requestId": "bad-perm", "permissionRequest": "shell"})),
            (
                "bad-tool-ids",
                "external_tool.requested",
                json!({"requestId": "bad-tool-ids", "toolName": tool, "arguments": 5}),
            ),
            ("bad-tool-name", "external_tool.requested", json!({"requestId": "bad-tool-name", "toolName": 5})),
            (
                "bad-elicit",
                "elicitation.requested",
                json!({"requestId": "bad-elicit", "message": "Name?", "mode": 5, "requestedSchema": "x"}),
            ),
            (
                "bad-oauth",
                "mcp.oauth_required",
                json!({"requestId": "bad-oauth", "serverName": "remote", "serverUrl": "https://mcp.example/"}),
            ),
            ("bad-command", "command.execute", json!({"requestId": "bad-command", "commandName": "deploy"})),
        ];
        let ids = requests.iter().map(|r| r.0).chain(events.iter().map(|e| e.0)).map(str::to_owned).collect();
        self.awaiting = Some((sid.to_owned(), ids));
        for (id, ty, data) in events {
            debug_assert!(data["requestId"] == id);
            self.shared.event(sid, ty, data)?;
        }
        for (id, method, params) in requests {
            self.shared.write_json(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))?;
        }
        Ok(())
    }
}

/// The params of a canvas request of instance `c1` of `canvas_id`, with
/// `action_name` and `input` if given.
fn canvas(sid: &str, canvas_id: &str, action_name: Option<&str>, input: Value) -> Value {
    let mut p = json!({"sessionId": sid, "extensionId": "connection:1", "canvasId": canvas_id, "instanceId": "c1",
        "session": {"workingDirectory": "/tmp"}});
    if let Some(name) = action_name {
        p["actionName"] = name.into();
    }
    if !input.is_null() {
        p["input"] = input;
    }
    p
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(11_016), (2000, 2, 29));
        assert_eq!(civil_from_days(20_786), (2026, 11, 29));
        assert_eq!(timestamp().len(), "2026-11-29T15:13:07.202Z".len());
    }
}
