//! A WebSocket bridge from a browser page to the Copilot CLI; the
//! `copilot-bridge` binary runs it.
//!
//! A page cannot spawn a process or open a TCP socket, so it reaches a CLI
//! through this bridge: each accepted WebSocket connection is piped, byte for
//! byte, to a CLI of its own (spawned over stdio in its own process group on
//! the connection's first message, and killed with its group when the socket
//! closes), or to a TCP connection to a CLI server (`cli_addr`). The bridge
//! does not frame, parse or route: the page's WebAssembly core does.
//!
//! A page whose socket drops opens it again with the same token (the npm
//! package's `autoReconnect`) and gets a new CLI, which resumes the page's
//! sessions by id from what the CLI persisted: offline, every CLI of a
//! bridge runs on the bridge's one state folder, kept while it runs (else
//! the user's own folders). No CLI outlives its socket: the bridge cannot
//! tell which of the bytes it wrote reached the page, so a CLI kept for a
//! reattach could go on in the middle of a frame, and it would hold a
//! process for a page that may never come back; the resumed CLI lists the
//! waits still pending, which the page's engine answers once. A socket
//! silent for [`BridgeConfig::keepalive`] is pinged, and dropped with its
//! CLI when it does not answer within as long again; one that stops
//! reading is dropped when a write to it makes no progress for that whole
//! time (twice the keepalive), and the keepalive and a close go on while
//! the write waits.
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
//! served from a folder. With a [`ModelStandIn`] (`offline`), the spawned
//! CLIs run against a stand-in for the model endpoint, so the page shows a
//! full turn with no login; this crate ships none (the project's test-only
//! scripted model is one, run by the `copilot-bridge-offline` program of its
//! tests crate).

use std::ffi::OsString;
use std::io;
use std::net::{SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::Duration;

use subtle::ConstantTimeEq;

pub mod command_line;
mod files;
mod http;
mod outbox;
mod socket;

use http::{refuse, respond, Head};

/// The prefix of the WebSocket subprotocol that carries the token.
/// The core's, which the npm package's WebSocket transport offers too.
pub const TOKEN_PROTOCOL_PREFIX: &str = copilot_host::core::BRIDGE_TOKEN_PROTOCOL_PREFIX;
/// The WebSocket endpoint.
pub const SOCKET_PATH: &str = "/ws";
/// The largest offline script accepted, in bytes.
const MAX_SCRIPT: usize = 64 << 10;
/// Plain HTTP exchanges handled at once (beyond them: dropped at once).
const MAX_HTTP_THREADS: usize = 64;
/// How long a socket may be silent before it is pinged, and then how long
/// it has to answer.
const KEEPALIVE: Duration = Duration::from_secs(20);
/// How long a client may take to send its request head.
const HEAD_TIMEOUT: Duration = Duration::from_secs(10);

/// A stand-in for the Copilot model endpoint that the bridge points the
/// CLIs it spawns at (the offline mode): nothing leaves the machine and no
/// login is needed.
pub trait ModelStandIn: Send + Sync {
    /// Environment added to each spawned CLI, after the bridge's own (the
    /// private state folders and a placeholder auth token): the endpoint's
    /// addresses and proxies.
    fn cli_env(&self) -> Vec<(OsString, OsString)>;

    /// Handles the body of `POST /offline/script` (a page scripting its own
    /// session's replies, at most 64 KiB, already authorized); returns the
    /// HTTP status and JSON body to answer with.
    fn script(&self, body: &[u8]) -> io::Result<(u16, Vec<u8>)>;
}

/// How to run a bridge.
#[derive(Clone)]
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
    /// Run spawned CLIs offline, against this stand-in for the model.
    pub offline: Option<Arc<dyn ModelStandIn>>,
    /// Connect each WebSocket to this CLI server instead of spawning one.
    pub cli_addr: Option<String>,
    /// The CLI to spawn; `None`: found as `copilot_host::Client::start`
    /// finds it ([`copilot_host::resolve_cli`]).
    pub cli_path: Option<PathBuf>,
    /// The largest WebSocket message accepted, in bytes.
    pub max_message_bytes: usize,
    /// WebSocket connections open at once, at most.
    pub max_connections: usize,
    /// After this long with nothing from a socket, the bridge pings it;
    /// after [`pong_timeout`](Self::pong_timeout) without an answer, it
    /// drops the socket (and its CLI): a peer gone without a word (a
    /// network that went away) costs no process for longer, and a page that
    /// reconnects finds no other CLI on its sessions. A write to the socket
    /// that makes no progress for the two together (a page that stopped
    /// reading) drops it too.
    pub keepalive: Duration,
    /// How long a pinged socket has to answer (anything read counts)
    /// before it is dropped; 20 s by default, as the keepalive.
    pub pong_timeout: Duration,
}

impl std::fmt::Debug for BridgeConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the token.
        f.debug_struct("BridgeConfig")
            .field("listen", &self.listen)
            .field("allow_remote", &self.allow_remote)
            .field("token", &self.token.as_ref().map(|_| "<set>"))
            .field("allow_origins", &self.allow_origins)
            .field("serve", &self.serve)
            .field("offline", &self.offline.is_some())
            .field("cli_addr", &self.cli_addr)
            .field("cli_path", &self.cli_path)
            .field("max_message_bytes", &self.max_message_bytes)
            .field("max_connections", &self.max_connections)
            .field("keepalive", &self.keepalive)
            .field("pong_timeout", &self.pong_timeout)
            .finish()
    }
}

impl Default for BridgeConfig {
    fn default() -> Self {
        BridgeConfig {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            allow_remote: false,
            token: None,
            allow_origins: Vec::new(),
            serve: None,
            offline: None,
            cli_addr: None,
            cli_path: None,
            max_message_bytes: 4 << 20,
            max_connections: 8,
            keepalive: KEEPALIVE,
            pong_timeout: KEEPALIVE,
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
    offline: Option<Arc<dyn ModelStandIn>>,
    /// Offline: the CLIs' state folder, one for all of them.
    state: Option<socket::StateDir>,
    cli_addr: Option<String>,
    cli_path: Option<PathBuf>,
    max_message_bytes: usize,
    max_connections: usize,
    keepalive: Duration,
    pong_timeout: Duration,
    sockets: AtomicUsize,
    http_threads: AtomicUsize,
    connection_number: AtomicUsize,
}

impl Bridge {
    /// Checks the configuration, binds, and starts accepting connections.
    pub fn start(config: BridgeConfig) -> io::Result<Bridge> {
        let refuse = |why: String| Err(io::Error::new(io::ErrorKind::InvalidInput, why));
        if !config.listen.ip().is_loopback() && !config.allow_remote {
            return refuse(format!(
                "{} is not a loopback address: anyone who can reach it could drive an agent that runs commands; \
                 pass --allow-remote to bind it anyway (the token is still required)",
                config.listen.ip()
            ));
        }
        if config.offline.is_some() && config.cli_addr.is_some() {
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
        let token = match config.token.clone() {
            Some(t) => t,
            None => random_token()?,
        };
        let listener = TcpListener::bind(config.listen)?;
        let addr = listener.local_addr()?;
        let loopback = addr.ip().is_loopback();
        let own_hosts: Vec<String> = if loopback {
            vec![format!("{addr}"), format!("localhost:{}", addr.port())]
        } else {
            vec![format!("{addr}")]
        };
        let mut origins: Vec<String> = own_hosts.iter().map(|h| format!("http://{h}")).collect();
        origins.extend(config.allow_origins.iter().map(|o| o.trim_end_matches('/').to_owned()));
        let shared = Arc::new(Shared {
            token,
            origins,
            hosts: loopback.then_some(own_hosts),
            serve: config.serve.clone(),
            offline: config.offline.clone(),
            state: config.offline.as_ref().map(|_| socket::StateDir::new(addr.port())).transpose()?,
            cli_addr: config.cli_addr.clone(),
            cli_path: config.cli_path.clone(),
            max_message_bytes: config.max_message_bytes,
            max_connections: config.max_connections.max(1),
            keepalive: config.keepalive.max(Duration::from_millis(1)),
            pong_timeout: config.pong_timeout.max(Duration::from_millis(1)),
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

/// 256 bits from the OS's random source, as 64 hex digits.
fn random_token() -> io::Result<String> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).map_err(|e| io::Error::other(format!("no random token: {e}")))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// Compares in time that depends on the lengths only, never on where the
/// two first differ.
fn same_secret(a: &[u8], b: &[u8]) -> bool {
    a.ct_eq(b).into()
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

fn handle(mut stream: TcpStream, shared: &Shared, peer: &str) -> io::Result<()> {
    stream.set_read_timeout(Some(HEAD_TIMEOUT))?;
    let Some((head, rest)) = http::read_head(&mut stream)? else {
        return refuse(&mut stream, peer, None, 431, "unreadable or oversize request head");
    };
    if let Some(hosts) = &shared.hosts {
        // A loopback bridge is reached by these names only: another name is
        // a page that rebound its own domain to 127.0.0.1.
        if !head.header("host").is_some_and(|h| hosts.iter().any(|o| o.eq_ignore_ascii_case(h))) {
            return refuse(&mut stream, peer, Some(&head), 403, "unexpected Host");
        }
    }
    let path = head.path_only().to_owned();
    if path == SOCKET_PATH {
        return socket::websocket(stream, shared, peer, &head, rest);
    }
    match (head.method.as_str(), path.as_str()) {
        ("POST", "/offline/script") if shared.offline.is_some() => script(stream, shared, peer, &head, rest),
        ("GET", "/bridge.json") if shared.serve.is_some() => {
            let body = format!("{{\"offline\":{}}}", shared.offline.is_some());
            respond(&mut stream, 200, "application/json", body.as_bytes())
        }
        ("GET" | "HEAD", _) => match &shared.serve {
            Some(root) => files::serve(stream, root, peer, &head, &path),
            None => refuse(&mut stream, peer, Some(&head), 404, "not found"),
        },
        _ => refuse(&mut stream, peer, Some(&head), 405, "method not allowed"),
    }
}

/// Whether the request's `Origin` is allowed. Browsers always send one
/// with a WebSocket handshake or a POST, so a request without one comes from
/// a program (Node, a script), not from a page, and still needs the token.
fn origin_allowed(shared: &Shared, head: &Head) -> bool {
    head.header("origin").is_none_or(|o| shared.origins.iter().any(|a| a.eq_ignore_ascii_case(o)))
}

/// `POST /offline/script`: the page scripts its own session's replies.
fn script(mut stream: TcpStream, shared: &Shared, peer: &str, head: &Head, mut body: Vec<u8>) -> io::Result<()> {
    use std::io::Read;
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
        Err(e) => refuse(&mut stream, peer, Some(head), 502, &format!("the model stand-in failed: {e}")),
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
        let (a, b) = (random_token().unwrap(), random_token().unwrap());
        assert_eq!(a.len(), 64);
        assert!(a.bytes().all(|c| c.is_ascii_hexdigit()), "{a}");
        assert_ne!(a, b);
    }
}
