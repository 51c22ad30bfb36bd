//! The WebSocket endpoint: the handshake's checks (token, origin, the
//! connection bound), then the pipe between the socket and a CLI of the
//! connection's own (spawned) or a CLI server (TCP).
//!
//! A connection's thread reads the socket and writes the CLI; the CLI's
//! output goes through the connection's [`Outbox`] to a thread that alone
//! writes the socket, with a write timeout. So a page that stops reading
//! blocks that thread only: the keepalive still pings and drops it, a
//! close still ends it, and the write's deadline ends it when it sends
//! but never reads. Whatever ends a connection ends its CLI.

use std::ffi::{OsStr, OsString};
use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpStream, ToSocketAddrs};
use std::path::PathBuf;
use std::process::ChildStdin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::Duration;

use copilot_host::launch::{CliProcess, Launch, AUTH_TOKEN_ENV};
use tungstenite::protocol::frame::coding::CloseCode;
use tungstenite::protocol::{CloseFrame, Role, WebSocketConfig};
use tungstenite::{Message, WebSocket};

use crate::http::{refuse, Head};
use crate::outbox::{write_out, Outbox};
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
    // Silence is answered with a ping (`pipe`); a write that cannot go on
    // gets as long as a silent page gets to answer one.
    stream.set_read_timeout(Some(shared.keepalive))?;
    stream.set_write_timeout(Some(write_deadline(shared.keepalive, shared.pong_timeout)))?;
    stream.set_nodelay(true)?;
    let number = shared.connection_number.fetch_add(1, Ordering::SeqCst) + 1;
    log::info!("connection {number} from {peer} accepted");
    pipe(stream, shared, number, rest)
}

/// How long a write to a page's socket may go without progress before the
/// page counts as gone: the keepalive and the pong timeout, what a silent
/// page gets to answer a ping.
fn write_deadline(keepalive: Duration, pong_timeout: Duration) -> Duration {
    keepalive.saturating_add(pong_timeout)
}

/// The reading side of a WebSocket. What tungstenite would write on it
/// (its automatic pongs and close replies) is dropped: the reader answers
/// through the [`Outbox`], so the socket has one writer, which no read
/// ever waits for.
struct ReadSide(TcpStream);

impl Read for ReadSide {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.0.read(buf)
    }
}

impl Write for ReadSide {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// How a connection ends, as its reader saw it.
enum Ending {
    /// The socket failed or went silent, or the CLI stopped reading: no
    /// close frame.
    Dropped,
    /// With this close frame (the answer to the page's, or the bridge's
    /// reason).
    Close(Option<CloseFrame>),
    /// With this close frame, after which what the page still sends (the
    /// rest of a refused message) is read and dropped.
    Refuse(Option<CloseFrame>),
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
    let mut inbound = WebSocket::from_partially_read(ReadSide(stream.try_clone()?), rest, Role::Server, Some(config));
    let outbox = Arc::new(Outbox::new());
    let writer = {
        let (outbox, socket) = (Arc::clone(&outbox), stream.try_clone()?);
        thread::Builder::new().name("bridge-socket-out".into()).spawn(move || {
            if let Err(e) = write_out(&outbox, &socket) {
                if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) {
                    log::info!("connection {number}: the page stopped reading: dropped");
                } else {
                    log::debug!("connection {number}: {e}");
                }
                // The reader sees the end, and ends the connection's CLI.
                let _ = socket.shutdown(Shutdown::Both);
            }
        })?
    };
    let mut upstream: Option<Upstream> = None;
    let mut pump: Option<JoinHandle<()>> = None;
    // A ping sent, and nothing read since.
    let mut pinged = false;
    let ending = loop {
        let read = inbound.read();
        if read.is_ok() && pinged {
            // Answered: silence is measured from here again.
            pinged = false;
            inbound.get_ref().0.set_read_timeout(Some(shared.keepalive))?;
        }
        let bytes = match read {
            Ok(Message::Binary(b)) => b.to_vec(),
            Ok(Message::Text(t)) => t.as_bytes().to_vec(),
            Ok(Message::Ping(payload)) => {
                outbox.pong(payload);
                continue;
            }
            Ok(Message::Close(frame)) => break Ending::Close(frame),
            Ok(_) => continue,
            Err(tungstenite::Error::Capacity(e)) => {
                log::warn!("connection {number}: refused a message: {e}");
                break Ending::Refuse(close_frame(CloseCode::Size, "message too large"));
            }
            Err(tungstenite::Error::Io(e))
                if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) =>
            {
                if outbox.is_ended() {
                    log::debug!("connection {number}: the socket's writer has stopped");
                    break Ending::Dropped;
                }
                if pinged {
                    log::info!("connection {number}: no answer to a ping: dropped");
                    break Ending::Dropped;
                }
                // Silent for a while: the peer must answer this. It goes
                // ahead of the output, and never waits for a write.
                outbox.ping();
                pinged = true;
                inbound.get_ref().0.set_read_timeout(Some(shared.pong_timeout))?;
                continue;
            }
            Err(e) => {
                log::debug!("connection {number}: {e}");
                break Ending::Dropped;
            }
        };
        if upstream.is_none() {
            // The CLI starts with the first message, so that a socket that
            // sends nothing acceptable never costs a process.
            match start_cli(shared, number, &outbox) {
                Ok((up, copier)) => {
                    upstream = Some(up);
                    pump = Some(copier);
                }
                Err(e) => {
                    log::error!("connection {number}: cannot reach the CLI: {e}");
                    break Ending::Close(close_frame(CloseCode::Error, "cannot start the CLI"));
                }
            }
        }
        if let Some(up) = upstream.as_mut() {
            if let Err(e) = up.write_all(&bytes) {
                log::info!("connection {number}: the CLI stopped reading: {e}");
                break Ending::Dropped;
            }
        }
    };
    // The CLI first: nothing below waits before it is stopped.
    if let Some(up) = upstream.take() {
        up.end(number);
    }
    let mut writer = Some(writer);
    // The close frame goes out before the socket is shut: the writer stops
    // after it, or at its write deadline.
    let mut close_first = |frame| {
        outbox.close(frame);
        if let Some(w) = writer.take() {
            let _ = w.join();
        }
    };
    match ending {
        Ending::Dropped => outbox.end(),
        Ending::Close(frame) => close_first(frame),
        Ending::Refuse(frame) => {
            close_first(frame);
            drain(&stream, shared.max_message_bytes);
        }
    }
    // Also ends a write under way (the writer's, when the connection was
    // dropped).
    let _ = stream.shutdown(Shutdown::Both);
    for thread in [pump, writer].into_iter().flatten() {
        let _ = thread.join();
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

/// Starts the connection's CLI (or connects to the CLI server), and the
/// thread that copies its output to the socket.
fn start_cli(shared: &Shared, number: usize, outbox: &Arc<Outbox>) -> io::Result<(Upstream, JoinHandle<()>)> {
    let (up, output) = open_upstream(shared, number)?;
    let outbox = Arc::clone(outbox);
    // On an error, `up` is dropped, which stops the CLI.
    let pump =
        thread::Builder::new().name("bridge-cli-out".into()).spawn(move || pump_output(output, &outbox, number))?;
    Ok((up, pump))
}

/// Copies what the CLI writes to the socket's outbox, one message per
/// read; at the end of the output, the close frame follows it.
fn pump_output(mut output: Box<dyn Read + Send>, outbox: &Outbox, number: usize) {
    let mut buf = vec![0u8; CHUNK];
    loop {
        match output.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                if outbox.send(buf[..n].to_vec()).is_err() {
                    return;
                }
            }
        }
    }
    log::info!("connection {number}: the CLI closed its output");
    outbox.finish(close_frame(CloseCode::Away, "the CLI exited"));
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
