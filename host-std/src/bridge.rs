//! A WebSocket bridge from a browser page to the Copilot CLI (feature
//! `bridge`; the `copilot-bridge` binary runs it).
//!
//! A page cannot spawn a process or open a TCP socket, so it reaches a CLI
//! through this bridge: each accepted WebSocket connection is piped, byte for
//! byte, to a CLI of its own (spawned over stdio in its own process group on
//! the connection's first message, and killed with its group when the socket
//! closes), or to a TCP connection to a CLI server (`cli_addr`). The bridge
//! does not frame, parse or route: the page's WebAssembly core does.
//!
//! Since whatever opens the socket drives an agent that runs shell commands,
//! only the page the bridge was started for gets in:
//! - it binds loopback unless told otherwise (`allow_remote`);
//! - every WebSocket must present the bridge's token as the subprotocol
//!   `copilot.token.<TOKEN>` (browsers can send it; it stays out of URLs);
//! - a page's `Origin` must be in the allow list (by default the bridge's
//!   own; programs that send none still need the token), and on a loopback
//!   bind the `Host` must name the bridge;
//! - messages, request heads and concurrent connections are bounded.
//!
//! Everything else is refused with an HTTP status and logged, before any
//! CLI is started.
//!
//! With `serve`, the chat page and the npm package's files it loads are
//! served from a folder; with `offline`, the spawned CLIs run against the
//! scripted model on loopback, so the page shows a full turn with no login.

use std::ffi::OsString;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::process::{ChildStdin, ChildStdout};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle};
use std::time::Duration;

use tungstenite::protocol::frame::coding::CloseCode;
use tungstenite::protocol::{CloseFrame, Role, WebSocketConfig};
use tungstenite::{Message, WebSocket};

use crate::cli::{self, CliProcess, Launch, AUTH_TOKEN_ENV};

/// The prefix of the WebSocket subprotocol that carries the token.
pub const TOKEN_PROTOCOL_PREFIX: &str = "copilot.token.";
/// The WebSocket endpoint.
pub const SOCKET_PATH: &str = "/ws";
/// The largest request head read, in bytes.
const MAX_HEAD: usize = 16 << 10;
/// The largest offline script accepted, in bytes.
const MAX_SCRIPT: usize = 64 << 10;
/// The largest static file served, in bytes.
const MAX_FILE: u64 = 8 << 20;
/// Plain HTTP exchanges handled at once (beyond them: dropped at once).
const MAX_HTTP_THREADS: usize = 64;
/// How long a client may take to send its request head.
const HEAD_TIMEOUT: Duration = Duration::from_secs(10);
/// Bytes read from the CLI per WebSocket message, at most.
const CHUNK: usize = 64 << 10;

/// How to run a bridge.
#[derive(Debug, Clone)]
pub struct BridgeConfig {
    /// Where to listen; port 0 picks a free one.
    pub listen: SocketAddr,
    /// Allow a non-loopback `listen` address.
    pub allow_remote: bool,
    /// The token pages must present; `None`: a random one.
    pub token: Option<String>,
    /// Origins allowed besides the bridge's own (`http://HOST:PORT`).
    pub allow_origins: Vec<String>,
    /// Serve the chat page and the npm package files from this folder
    /// (the npm package's root: `chat/`, `src/`, `dist/`).
    pub serve: Option<PathBuf>,
    /// Run spawned CLIs against the scripted model on loopback.
    pub offline: bool,
    /// Connect each WebSocket to this CLI server instead of spawning one.
    pub cli_addr: Option<String>,
    /// The CLI to spawn; `None`: found as [`crate::Client::start`] finds it.
    pub cli_path: Option<PathBuf>,
    /// The largest WebSocket message accepted, in bytes.
    pub max_message_bytes: usize,
    /// WebSocket connections open at once, at most.
    pub max_connections: usize,
}

impl Default for BridgeConfig {
    fn default() -> Self {
        BridgeConfig {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            allow_remote: false,
            token: None,
            allow_origins: Vec::new(),
            serve: None,
            offline: false,
            cli_addr: None,
            cli_path: None,
            max_message_bytes: 4 << 20,
            max_connections: 8,
        }
    }
}

/// A running bridge. Dropping it does not stop it; [`Bridge::wait`] blocks
/// while it serves.
pub struct Bridge {
    addr: SocketAddr,
    shared: Arc<Shared>,
    acceptor: JoinHandle<()>,
}

impl std::fmt::Debug for Bridge {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the token.
        f.debug_struct("Bridge").field("addr", &self.addr).finish_non_exhaustive()
    }
}

/// What the connection threads share.
struct Shared {
    token: String,
    origins: Vec<String>,
    /// On a loopback bind, the `Host` values that name the bridge.
    hosts: Option<Vec<String>>,
    serve: Option<PathBuf>,
    offline: Option<Offline>,
    cli_addr: Option<String>,
    cli_path: Option<PathBuf>,
    max_message_bytes: usize,
    max_connections: usize,
    sockets: AtomicUsize,
    http_threads: AtomicUsize,
    connection_number: AtomicUsize,
}

impl Bridge {
    /// Checks the configuration, binds, starts the scripted model if
    /// offline, and starts accepting connections.
    pub fn start(config: BridgeConfig) -> io::Result<Bridge> {
        let refuse = |why: String| Err(io::Error::new(io::ErrorKind::InvalidInput, why));
        if !config.listen.ip().is_loopback() && !config.allow_remote {
            return refuse(format!(
                "{} is not a loopback address: anyone who can reach it could drive an agent that runs commands; \
                 pass --allow-remote to bind it anyway (the token is still required)",
                config.listen.ip()
            ));
        }
        if config.offline && config.cli_addr.is_some() {
            return refuse("--offline starts its own CLIs; it cannot be combined with --cli".into());
        }
        if let Some(addr) = &config.cli_addr {
            if addr.to_socket_addrs().map_or(true, |mut a| a.next().is_none()) {
                return refuse(format!("--cli {addr}: not a HOST:PORT address"));
            }
        }
        if let Some(t) = &config.token {
            if t.len() < 16 || !t.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_') {
                return refuse("the token must be at least 16 characters of A-Z, a-z, 0-9, - and _".into());
            }
        }
        if let Some(dir) = &config.serve {
            if !dir.join("chat").join("index.html").is_file() {
                return refuse(format!("{} has no chat/index.html to serve", dir.display()));
            }
        }
        let token = config.token.clone().unwrap_or_else(random_token);
        let listener = TcpListener::bind(config.listen)?;
        let addr = listener.local_addr()?;
        let loopback = addr.ip().is_loopback();
        let own_hosts: Vec<String> = if loopback {
            let mut h = vec![format!("{}", addr)];
            h.push(format!("localhost:{}", addr.port()));
            h
        } else {
            vec![format!("{}", addr)]
        };
        let mut origins: Vec<String> = own_hosts.iter().map(|h| format!("http://{h}")).collect();
        origins.extend(config.allow_origins.iter().map(|o| o.trim_end_matches('/').to_owned()));
        let offline = if config.offline { Some(Offline::start()?) } else { None };
        let shared = Arc::new(Shared {
            token,
            origins,
            hosts: loopback.then_some(own_hosts),
            serve: config.serve.clone(),
            offline,
            cli_addr: config.cli_addr.clone(),
            cli_path: config.cli_path.clone(),
            max_message_bytes: config.max_message_bytes,
            max_connections: config.max_connections.max(1),
            sockets: AtomicUsize::new(0),
            http_threads: AtomicUsize::new(0),
            connection_number: AtomicUsize::new(0),
        });
        let acceptor = {
            let shared = Arc::clone(&shared);
            thread::Builder::new().name("bridge-accept".into()).spawn(move || accept(&listener, &shared))?
        };
        Ok(Bridge { addr, shared, acceptor })
    }

    /// The address it listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// The token pages must present.
    pub fn token(&self) -> &str {
        &self.shared.token
    }

    /// `http://ADDR:PORT/`.
    pub fn url(&self) -> String {
        format!("http://{}/", self.addr)
    }

    /// The page's address with the token in the fragment, which browsers
    /// never send to a server (so it is in no request line or access log).
    pub fn page_url(&self) -> String {
        format!("{}#token={}", self.url(), self.shared.token)
    }

    /// Blocks while the bridge serves (until its listener fails).
    pub fn wait(self) {
        let _ = self.acceptor.join();
    }
}

/// 256 random bits as hex, from two v4 UUIDs (the OS's random source).
fn random_token() -> String {
    format!("{}{}", uuid::Uuid::new_v4().simple(), uuid::Uuid::new_v4().simple())
}

/// Compares without stopping at the first difference.
fn same_secret(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

fn accept(listener: &TcpListener, shared: &Arc<Shared>) {
    for stream in listener.incoming() {
        let stream = match stream {
            Ok(s) => s,
            Err(e) => {
                log::warn!("accept failed: {e}");
                continue;
            }
        };
        if shared.http_threads.fetch_add(1, Ordering::SeqCst) >= MAX_HTTP_THREADS {
            shared.http_threads.fetch_sub(1, Ordering::SeqCst);
            log::warn!("refused a connection: {MAX_HTTP_THREADS} requests are being handled already");
            drop(stream);
            continue;
        }
        let shared = Arc::clone(shared);
        let spawned = thread::Builder::new().name("bridge-conn".into()).spawn(move || {
            let peer = stream.peer_addr().map(|a| a.to_string()).unwrap_or_default();
            if let Err(e) = handle(stream, &shared, &peer) {
                log::debug!("{peer}: {e}");
            }
            shared.http_threads.fetch_sub(1, Ordering::SeqCst);
        });
        if let Err(e) = spawned {
            log::warn!("cannot start a connection thread: {e}");
        }
    }
}

/// A request head.
struct Head {
    method: String,
    path: String,
    headers: Vec<(String, String)>,
}

impl Head {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }

    fn has_token(&self, name: &str, token: &str) -> bool {
        self.header(name).is_some_and(|v| v.split(',').any(|t| t.trim().eq_ignore_ascii_case(token)))
    }
}

/// Reads a request head; returns it with any bytes read past it.
fn read_head(stream: &mut TcpStream) -> io::Result<Option<(Head, Vec<u8>)>> {
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 2048];
    let end = loop {
        if let Some(at) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break at;
        }
        if buf.len() > MAX_HEAD {
            return Ok(None);
        }
        let n = stream.read(&mut chunk)?;
        if n == 0 {
            return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "closed before a request"));
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    if end > MAX_HEAD {
        return Ok(None);
    }
    let rest = buf[end + 4..].to_vec();
    let Ok(text) = std::str::from_utf8(&buf[..end]) else { return Ok(None) };
    let mut lines = text.split("\r\n");
    let mut first = lines.next().unwrap_or_default().split(' ');
    let (Some(method), Some(path), Some(version)) = (first.next(), first.next(), first.next()) else {
        return Ok(None);
    };
    if !version.starts_with("HTTP/1.") {
        return Ok(None);
    }
    let mut headers = Vec::new();
    for line in lines {
        let Some((k, v)) = line.split_once(':') else { return Ok(None) };
        headers.push((k.trim().to_owned(), v.trim().to_owned()));
    }
    Ok(Some((Head { method: method.to_owned(), path: path.to_owned(), headers }, rest)))
}

fn respond(stream: &mut TcpStream, status: u16, content_type: &str, body: &[u8]) -> io::Result<()> {
    let reason = match status {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        413 => "Content Too Large",
        426 => "Upgrade Required",
        431 => "Request Header Fields Too Large",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        _ => "Error",
    };
    let mut head = format!(
        "HTTP/1.1 {status} {reason}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\
         Cache-Control: no-store\r\nX-Content-Type-Options: nosniff\r\nReferrer-Policy: no-referrer\r\n",
        body.len()
    );
    if content_type.starts_with("text/html") {
        head.push_str(
            "Content-Security-Policy: default-src 'self'; script-src 'self' 'wasm-unsafe-eval'; \
             connect-src 'self'; style-src 'self'; img-src 'self' data:; frame-ancestors 'none'\r\n",
        );
    }
    if status == 426 {
        head.push_str("Upgrade: websocket\r\n");
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes())?;
    stream.write_all(body)?;
    stream.flush()
}

/// Refuses with `status`, logs why (never the token), and ends the exchange.
fn refuse(stream: &mut TcpStream, peer: &str, head: Option<&Head>, status: u16, why: &str) -> io::Result<()> {
    match head {
        Some(h) => log::warn!("refused {peer} {} {}: {status} {why}", h.method, path_only(&h.path)),
        None => log::warn!("refused {peer}: {status} {why}"),
    }
    respond(stream, status, "text/plain; charset=utf-8", format!("{why}\n").as_bytes())
}

fn path_only(target: &str) -> &str {
    target.split(['?', '#']).next().unwrap_or(target)
}

fn handle(mut stream: TcpStream, shared: &Shared, peer: &str) -> io::Result<()> {
    stream.set_read_timeout(Some(HEAD_TIMEOUT))?;
    let Some((head, rest)) = read_head(&mut stream)? else {
        return refuse(&mut stream, peer, None, 431, "unreadable or oversize request head");
    };
    if let Some(hosts) = &shared.hosts {
        // A loopback bridge is reached by these names only: another name is
        // a page that rebound its own domain to 127.0.0.1.
        if !head.header("host").is_some_and(|h| hosts.iter().any(|o| o.eq_ignore_ascii_case(h))) {
            return refuse(&mut stream, peer, Some(&head), 403, "unexpected Host");
        }
    }
    let path = path_only(&head.path).to_owned();
    if path == SOCKET_PATH {
        return websocket(stream, shared, peer, &head, rest);
    }
    match (head.method.as_str(), path.as_str()) {
        ("POST", "/offline/script") if shared.offline.is_some() => script(stream, shared, peer, &head, rest),
        ("GET", "/bridge.json") if shared.serve.is_some() => {
            let body = format!("{{\"offline\":{}}}", shared.offline.is_some());
            respond(&mut stream, 200, "application/json", body.as_bytes())
        }
        ("GET" | "HEAD", _) if shared.serve.is_some() => static_file(stream, shared, peer, &head, &path),
        ("GET" | "HEAD", _) => refuse(&mut stream, peer, Some(&head), 404, "not found"),
        _ => refuse(&mut stream, peer, Some(&head), 405, "method not allowed"),
    }
}

/// Whether the request's `Origin` is allowed. Browsers always send one
/// with a WebSocket handshake or a POST, so a request without one comes from
/// a program (Node, a script), not from a page, and still needs the token.
fn origin_allowed(shared: &Shared, head: &Head) -> bool {
    head.header("origin").is_none_or(|o| shared.origins.iter().any(|a| a.eq_ignore_ascii_case(o)))
}

/// Releases a WebSocket slot when dropped.
struct Slot<'a>(&'a AtomicUsize);

impl Drop for Slot<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

fn websocket(mut stream: TcpStream, shared: &Shared, peer: &str, head: &Head, rest: Vec<u8>) -> io::Result<()> {
    let upgrade = head.method == "GET"
        && head.has_token("upgrade", "websocket")
        && head.has_token("connection", "upgrade")
        && head.header("sec-websocket-version") == Some("13");
    let Some(key) = head.header("sec-websocket-key").filter(|_| upgrade) else {
        return refuse(&mut stream, peer, Some(head), 426, "this is a WebSocket endpoint");
    };
    if !origin_allowed(shared, head) {
        return refuse(&mut stream, peer, Some(head), 403, "origin not allowed");
    }
    let offered: Vec<&str> =
        head.header("sec-websocket-protocol").map(|v| v.split(',').map(str::trim).collect()).unwrap_or_default();
    let Some(protocol) = offered.iter().find(|p| p.starts_with(TOKEN_PROTOCOL_PREFIX)).copied() else {
        return refuse(&mut stream, peer, Some(head), 401, "no token (subprotocol copilot.token.<TOKEN>)");
    };
    if !same_secret(&protocol.as_bytes()[TOKEN_PROTOCOL_PREFIX.len()..], shared.token.as_bytes()) {
        return refuse(&mut stream, peer, Some(head), 401, "wrong token");
    }
    if shared.sockets.fetch_add(1, Ordering::SeqCst) >= shared.max_connections {
        shared.sockets.fetch_sub(1, Ordering::SeqCst);
        return refuse(&mut stream, peer, Some(head), 503, "too many connections");
    }
    let _slot = Slot(&shared.sockets);
    let accept = tungstenite::handshake::derive_accept_key(key.as_bytes());
    stream.write_all(
        format!(
            "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
             Sec-WebSocket-Accept: {accept}\r\nSec-WebSocket-Protocol: {protocol}\r\n\r\n"
        )
        .as_bytes(),
    )?;
    stream.set_read_timeout(None)?;
    stream.set_nodelay(true)?;
    let number = shared.connection_number.fetch_add(1, Ordering::SeqCst) + 1;
    log::info!("connection {number} from {peer} accepted");
    pipe(stream, shared, number, rest)
}

/// The byte stream of one side of a WebSocket: reads from its own clone of
/// the socket, writes through the lock both sides share, one whole buffer
/// (whole frames) at a time, so frames of the two sides never interleave.
struct Side {
    read: TcpStream,
    write: Arc<Mutex<TcpStream>>,
}

impl Read for Side {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.read.read(buf)
    }
}

impl Write for Side {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let mut s = self.write.lock().unwrap_or_else(|p| p.into_inner());
        s.write_all(buf)?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.write.lock().unwrap_or_else(|p| p.into_inner()).flush()
    }
}

/// Where a connection's bytes go.
enum Upstream {
    Spawned { process: CliProcess, stdin: ChildStdin, _state: Option<StateDir> },
    Tcp(TcpStream),
}

impl Upstream {
    fn write_all(&mut self, bytes: &[u8]) -> io::Result<()> {
        match self {
            Upstream::Spawned { stdin, .. } => stdin.write_all(bytes),
            Upstream::Tcp(s) => s.write_all(bytes),
        }
    }

    fn end(self, number: usize) {
        match self {
            Upstream::Spawned { mut process, stdin, _state } => {
                drop(stdin);
                let pid = process.id();
                process.kill();
                log::info!("connection {number}: CLI (pid {pid}) stopped");
            }
            Upstream::Tcp(s) => {
                let _ = s.shutdown(Shutdown::Both);
            }
        }
    }
}

fn close_frame(code: CloseCode, reason: &str) -> Option<CloseFrame> {
    Some(CloseFrame { code, reason: reason.to_owned().into() })
}

fn pipe(stream: TcpStream, shared: &Shared, number: usize, rest: Vec<u8>) -> io::Result<()> {
    let config = WebSocketConfig::default()
        .max_message_size(Some(shared.max_message_bytes))
        .max_frame_size(Some(shared.max_message_bytes));
    let write = Arc::new(Mutex::new(stream.try_clone()?));
    let mut inbound = WebSocket::from_partially_read(
        Side { read: stream.try_clone()?, write: Arc::clone(&write) },
        rest,
        Role::Server,
        Some(config),
    );
    let outbound = Arc::new(Mutex::new(WebSocket::from_raw_socket(
        Side { read: stream.try_clone()?, write },
        Role::Server,
        Some(config),
    )));
    let mut upstream: Option<Upstream> = None;
    let mut pump: Option<JoinHandle<()>> = None;
    loop {
        let bytes = match inbound.read() {
            Ok(Message::Binary(b)) => b.to_vec(),
            Ok(Message::Text(t)) => t.as_bytes().to_vec(),
            Ok(Message::Close(_)) => {
                let _ = inbound.flush();
                break;
            }
            Ok(_) => continue,
            Err(tungstenite::Error::Capacity(e)) => {
                log::warn!("connection {number}: refused a message: {e}");
                let _ = lock(&outbound).close(close_frame(CloseCode::Size, "message too large"));
                let _ = lock(&outbound).flush();
                drain(&stream, shared.max_message_bytes);
                break;
            }
            Err(e) => {
                log::debug!("connection {number}: {e}");
                break;
            }
        };
        if upstream.is_none() {
            // The CLI starts with the first message, so that a socket that
            // sends nothing acceptable never costs a process.
            match open_upstream(shared, number) {
                Ok((up, output)) => {
                    let outbound = Arc::clone(&outbound);
                    pump = Some(
                        thread::Builder::new()
                            .name("bridge-cli-out".into())
                            .spawn(move || pump_output(output, &outbound, number))?,
                    );
                    upstream = Some(up);
                }
                Err(e) => {
                    log::error!("connection {number}: cannot reach the CLI: {e}");
                    let _ = lock(&outbound).close(close_frame(CloseCode::Error, "cannot start the CLI"));
                    let _ = lock(&outbound).flush();
                    break;
                }
            }
        }
        if let Some(up) = upstream.as_mut() {
            if let Err(e) = up.write_all(&bytes) {
                log::info!("connection {number}: the CLI stopped reading: {e}");
                break;
            }
        }
    }
    if let Some(up) = upstream.take() {
        up.end(number);
    }
    let _ = stream.shutdown(Shutdown::Both);
    if let Some(p) = pump {
        let _ = p.join();
    }
    log::info!("connection {number} closed");
    Ok(())
}

/// Reads and drops what the peer still sends (the rest of a refused
/// message) until it closes, up to `limit` bytes and [`HEAD_TIMEOUT`] per
/// read: closing a socket with unread data resets it, and the page would
/// see an abnormal closure instead of the close frame's reason.
fn drain(stream: &TcpStream, limit: usize) {
    let mut s = stream;
    let _ = s.set_read_timeout(Some(HEAD_TIMEOUT));
    let _ = s.shutdown(Shutdown::Write);
    let mut buf = vec![0u8; CHUNK];
    let mut left = limit.saturating_mul(2);
    while left > 0 {
        match s.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => left = left.saturating_sub(n),
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Copies what the CLI writes to the socket, one message per read.
fn pump_output(mut output: Box<dyn Read + Send>, outbound: &Mutex<WebSocket<Side>>, number: usize) {
    let mut buf = vec![0u8; CHUNK];
    loop {
        match output.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                if lock(outbound).send(Message::Binary(buf[..n].to_vec().into())).is_err() {
                    return;
                }
            }
        }
    }
    log::info!("connection {number}: the CLI closed its output");
    let mut ws = lock(outbound);
    let _ = ws.close(close_frame(CloseCode::Away, "the CLI exited"));
    let _ = ws.flush();
}

fn open_upstream(shared: &Shared, number: usize) -> io::Result<(Upstream, Box<dyn Read + Send>)> {
    if let Some(addr) = &shared.cli_addr {
        let stream = TcpStream::connect(addr.to_socket_addrs()?.collect::<Vec<_>>().as_slice())?;
        stream.set_nodelay(true)?;
        let read = stream.try_clone()?;
        log::info!("connection {number}: connected to the CLI at {addr}");
        return Ok((Upstream::Tcp(stream), Box::new(read)));
    }
    let program = cli::resolve_cli(shared.cli_path.as_deref()).map_err(|e| io::Error::other(e.to_string()))?;
    let mut args: Vec<OsString> =
        ["--headless", "--no-auto-update", "--log-level", "error", "--stdio"].iter().map(OsString::from).collect();
    let mut env: Vec<(OsString, OsString)> = Vec::new();
    let mut state = None;
    if let Some(offline) = &shared.offline {
        let dir = StateDir::new(number)?;
        env = offline.cli_env(&dir.0)?;
        args.extend(["--no-auto-login", "--auth-token-env", AUTH_TOKEN_ENV].map(OsString::from));
        // As the client does: the CLI keeps the token from the shells it starts.
        args.push(format!("--secret-env-vars={AUTH_TOKEN_ENV}").into());
        state = Some(dir);
    }
    let cwd = state.as_ref().map(|s| s.0.join("work"));
    let launch = Launch { program: &program, args, env: &env, cwd: cwd.as_deref() };
    let (process, stdin, stdout): (CliProcess, ChildStdin, ChildStdout) =
        CliProcess::spawn(&launch).map_err(|e| io::Error::other(e.to_string()))?;
    log::info!("connection {number}: started {} (pid {})", program.display(), process.id());
    Ok((Upstream::Spawned { process, stdin, _state: state }, Box::new(stdout)))
}

/// A connection's private CLI state folder, removed when it ends.
struct StateDir(PathBuf);

impl StateDir {
    fn new(number: usize) -> io::Result<StateDir> {
        let dir = std::env::temp_dir().join(format!("copilot-bridge-{}-{number}", std::process::id()));
        std::fs::create_dir_all(dir.join("work"))?;
        Ok(StateDir(dir))
    }
}

impl Drop for StateDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

// ---------------------------------------------------------------------------
// Offline: the scripted model. Its only uses are here.

/// The scripted model the offline CLIs talk to.
struct Offline {
    model: copilot_testkit::scripted_model::ScriptedModel,
}

impl Offline {
    fn start() -> io::Result<Offline> {
        let model = copilot_testkit::scripted_model::ScriptedModel::start()?;
        log::info!("offline: scripted model on {}", model.url());
        Ok(Offline { model })
    }

    /// The environment of an offline CLI: private state folders, the
    /// scripted model as its API and proxy (nothing leaves the machine), a
    /// placeholder token the model accepts.
    fn cli_env(&self, dir: &Path) -> io::Result<Vec<(OsString, OsString)>> {
        let mut env = Vec::new();
        for (name, folder) in [
            ("COPILOT_HOME", "home"),
            ("XDG_CONFIG_HOME", "config"),
            ("XDG_STATE_HOME", "state"),
            ("XDG_CACHE_HOME", "cache"),
            ("COPILOT_CACHE_HOME", "cache"),
            ("GH_CONFIG_DIR", "gh"),
        ] {
            let p = dir.join(folder);
            std::fs::create_dir_all(&p)?;
            env.push((OsString::from(name), p.into_os_string()));
        }
        env.push((AUTH_TOKEN_ENV.into(), "offline".into()));
        env.extend(self.model.env());
        Ok(env)
    }

    /// Passes a script (`{"sessionId", "replies"}`) to the model's control
    /// endpoint; returns its status and answer.
    fn script(&self, body: &[u8]) -> io::Result<(u16, Vec<u8>)> {
        let url = self.model.url();
        let host = url.trim_start_matches("http://");
        let mut s = TcpStream::connect(host)?;
        s.set_read_timeout(Some(HEAD_TIMEOUT))?;
        write!(
            s,
            "POST /_scripted/script HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n\
             Content-Length: {}\r\nConnection: close\r\n\r\n",
            body.len()
        )?;
        s.write_all(body)?;
        let mut reader = BufReader::new(s);
        let mut status_line = String::new();
        reader.read_line(&mut status_line)?;
        let status = status_line.split(' ').nth(1).and_then(|c| c.parse().ok()).unwrap_or(502);
        let mut length = 0usize;
        loop {
            let mut line = String::new();
            if reader.read_line(&mut line)? == 0 || line == "\r\n" {
                break;
            }
            if let Some((k, v)) = line.split_once(':') {
                if k.eq_ignore_ascii_case("content-length") {
                    length = v.trim().parse().unwrap_or(0);
                }
            }
        }
        let mut answer = vec![0u8; length.min(MAX_SCRIPT)];
        reader.read_exact(&mut answer)?;
        Ok((status, answer))
    }
}

/// `POST /offline/script`: the page scripts its own session's replies.
fn script(mut stream: TcpStream, shared: &Shared, peer: &str, head: &Head, mut body: Vec<u8>) -> io::Result<()> {
    if !origin_allowed(shared, head) {
        return refuse(&mut stream, peer, Some(head), 403, "origin not allowed");
    }
    let presented = head.header("authorization").and_then(|v| v.strip_prefix("Bearer ")).unwrap_or_default();
    if !same_secret(presented.trim().as_bytes(), shared.token.as_bytes()) {
        return refuse(&mut stream, peer, Some(head), 401, "wrong or missing token");
    }
    let Some(length) = head.header("content-length").and_then(|v| v.parse::<usize>().ok()) else {
        return refuse(&mut stream, peer, Some(head), 400, "a Content-Length is required");
    };
    if length > MAX_SCRIPT || body.len() > length {
        return refuse(&mut stream, peer, Some(head), 413, "script too large");
    }
    let mut more = vec![0u8; length - body.len()];
    stream.read_exact(&mut more)?;
    body.extend_from_slice(&more);
    let Some(offline) = &shared.offline else { return refuse(&mut stream, peer, Some(head), 404, "not offline") };
    match offline.script(&body) {
        Ok((status, answer)) => respond(&mut stream, status, "application/json", &answer),
        Err(e) => refuse(&mut stream, peer, Some(head), 502, &format!("the scripted model failed: {e}")),
    }
}

// ---------------------------------------------------------------------------
// The page and the package files it loads.

fn static_file(mut stream: TcpStream, shared: &Shared, peer: &str, head: &Head, path: &str) -> io::Result<()> {
    let Some(root) = &shared.serve else { return refuse(&mut stream, peer, Some(head), 404, "not found") };
    let relative = if path == "/" { "chat/index.html" } else { path.trim_start_matches('/') };
    let allowed_dir = ["chat/", "src/", "dist/"].iter().any(|d| relative.starts_with(d));
    let plain = relative.bytes().all(|b| b.is_ascii_alphanumeric() || b"._-/".contains(&b))
        && !relative.split('/').any(|part| part.is_empty() || part.starts_with('.'));
    let content_type = match Path::new(relative).extension().and_then(|e| e.to_str()) {
        Some("html") => "text/html; charset=utf-8",
        Some("js") => "text/javascript; charset=utf-8",
        Some("css") => "text/css; charset=utf-8",
        Some("wasm") => "application/wasm",
        Some("svg") => "image/svg+xml",
        Some("png") => "image/png",
        _ => "",
    };
    if !allowed_dir || !plain || content_type.is_empty() {
        return refuse(&mut stream, peer, Some(head), 404, "not found");
    }
    let file = root.join(relative);
    match std::fs::metadata(&file) {
        Ok(m) if m.is_file() && m.len() <= MAX_FILE => {
            let body = std::fs::read(&file)?;
            let body = if head.method == "HEAD" { &[][..] } else { &body[..] };
            respond(&mut stream, 200, content_type, body)
        }
        _ => refuse(&mut stream, peer, Some(head), 404, "not found"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_compare_whole() {
        assert!(same_secret(b"abc", b"abc"));
        assert!(!same_secret(b"abc", b"abd"));
        assert!(!same_secret(b"abc", b"abcd"));
        assert!(!same_secret(b"", b"a"));
    }

    #[test]
    fn a_non_loopback_bind_is_refused_without_the_flag() {
        let config = BridgeConfig { listen: "0.0.0.0:0".parse().unwrap(), ..BridgeConfig::default() };
        let err = Bridge::start(config).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
        assert!(err.to_string().contains("--allow-remote"), "{err}");
    }

    #[test]
    fn generated_tokens_are_long_and_differ() {
        let (a, b) = (random_token(), random_token());
        assert_eq!(a.len(), 64);
        assert_ne!(a, b);
    }
}
