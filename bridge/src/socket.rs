//! The WebSocket endpoint: the handshake's checks (token, origin, the
//! connection bound), then the pipe between the socket and a CLI of the
//! connection's own (spawned) or a CLI server (TCP).

use std::ffi::{OsStr, OsString};
use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpStream, ToSocketAddrs};
use std::path::PathBuf;
use std::process::ChildStdin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle};

use copilot_host::launch::{CliProcess, Launch, AUTH_TOKEN_ENV};
use tungstenite::protocol::frame::coding::CloseCode;
use tungstenite::protocol::{CloseFrame, Role, WebSocketConfig};
use tungstenite::{Message, WebSocket};

use crate::http::{refuse, Head};
use crate::{origin_allowed, same_secret, Shared, HEAD_TIMEOUT, TOKEN_PROTOCOL_PREFIX};

/// Bytes read from the CLI per WebSocket message, at most.
const CHUNK: usize = 64 << 10;

/// Releases a WebSocket slot when dropped.
struct Slot<'a>(&'a AtomicUsize);

impl Drop for Slot<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Answers a request for [`crate::SOCKET_PATH`]: refuses a handshake that is
/// not a WebSocket one, from a foreign origin, without the token or past the
/// connection bound; else switches protocols and pipes the connection.
pub(crate) fn websocket(
    mut stream: TcpStream,
    shared: &Shared,
    peer: &str,
    head: &Head,
    rest: Vec<u8>,
) -> io::Result<()> {
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
    // Silence is answered with a ping (`pipe`).
    stream.set_read_timeout(Some(shared.keepalive))?;
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
    Spawned { process: CliProcess, stdin: ChildStdin },
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
            Upstream::Spawned { mut process, stdin } => {
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
    // A ping sent, and nothing read since.
    let mut pinged = false;
    loop {
        let read = inbound.read();
        if read.is_ok() {
            pinged = false;
        }
        let bytes = match read {
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
            Err(tungstenite::Error::Io(e))
                if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) =>
            {
                if pinged {
                    log::info!("connection {number}: no answer to a ping: dropped");
                    break;
                }
                // Silent for a while: the peer must answer this.
                let mut ws = lock(&outbound);
                if ws.send(Message::Ping(Default::default())).is_err() {
                    break;
                }
                pinged = true;
                continue;
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
    let program = copilot_host::resolve_cli(shared.cli_path.as_deref()).map_err(|e| io::Error::other(e.to_string()))?;
    // The CLI's arguments are the core's launch table, as copilot-host's
    // (offline, the token variable names the stand-in's token, which the
    // state folder's environment sets).
    let start = copilot_host::core::Launch {
        transport: copilot_host::core::LaunchTransport::Stdio,
        log_level: copilot_host::core::DEFAULT_LOG_LEVEL,
        auth_token: shared.offline.is_some(),
    };
    let mut args: Vec<OsString> = Vec::new();
    copilot_host::core::launch_items(&start, &mut |item| {
        if let copilot_host::core::LaunchItem::Arg(arg) = item {
            args.push(arg.into());
        }
    });
    let mut env: Vec<(OsString, OsString)> = Vec::new();
    let mut cwd = None;
    if let (Some(offline), Some(state)) = (&shared.offline, &shared.state) {
        env = state.cli_env()?;
        // After the folders: for a repeated name, the last entry wins.
        env.extend(offline.cli_env());
        args.push("--no-auto-login".into());
        cwd = Some(state.0.join("work"));
    }
    let launch = Launch { program: &program, args, env: &env, cwd: cwd.as_deref() };
    let (process, stdin, stdout) = CliProcess::spawn(&launch).map_err(|e| io::Error::other(e.to_string()))?;
    log::info!("connection {number}: started {} (pid {})", program.display(), process.id());
    Ok((Upstream::Spawned { process, stdin }, Box::new(stdout)))
}

/// The private CLI state folder of an offline bridge, shared by every CLI
/// it spawns and kept while the bridge runs: a CLI started for a page that
/// reconnects after a dropped socket sees the sessions of the CLI that was
/// killed with the socket, and resumes them by id (as CLIs share a user's
/// own folders without `--offline`). Removed with the bridge.
pub(crate) struct StateDir(PathBuf);

impl StateDir {
    /// `copilot-bridge-<PID>-<PORT>` in the temporary folder: one per
    /// bridge of the process.
    pub(crate) fn new(port: u16) -> io::Result<StateDir> {
        let dir = std::env::temp_dir().join(format!("copilot-bridge-{}-{port}", std::process::id()));
        std::fs::create_dir_all(dir.join("work"))?;
        Ok(StateDir(dir))
    }

    /// The environment of an offline CLI before the stand-in's own: its
    /// state and config in this folder (none of the user's, and nothing
    /// kept after the bridge), and a placeholder token in place of a login.
    fn cli_env(&self) -> io::Result<Vec<(OsString, OsString)>> {
        let mut env = Vec::new();
        for (name, folder) in [
            ("COPILOT_HOME", "home"),
            ("XDG_CONFIG_HOME", "config"),
            ("XDG_STATE_HOME", "state"),
            ("XDG_CACHE_HOME", "cache"),
            ("COPILOT_CACHE_HOME", "cache"),
            ("GH_CONFIG_DIR", "gh"),
        ] {
            let p = self.0.join(folder);
            std::fs::create_dir_all(&p)?;
            env.push((OsString::from(name), p.into_os_string()));
        }
        env.push((OsStr::new(AUTH_TOKEN_ENV).to_owned(), "offline".into()));
        Ok(env)
    }
}

impl Drop for StateDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
