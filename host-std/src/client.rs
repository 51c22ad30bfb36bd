//! The client: start or connect to a CLI, handshake, session management,
//! and stopping.

use std::ffi::OsString;
use std::io::{Read, Write};
use std::net::{Shutdown, TcpStream, ToSocketAddrs};
use std::path::PathBuf;
use std::sync::{mpsc, Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use copilot_core::{SessionState, Stats};
use serde::Deserialize;
use serde_json::{json, Value};

use crate::cli::{self, CliProcess, Launch, AUTH_TOKEN_ENV};
use crate::connection::{Connection, Waiter};
use crate::error::{Error, Result};
use crate::events::LifecycleEvent;
use crate::session::{Session, SessionConfig, SessionInner};

/// The protocol version this client speaks.
pub const PROTOCOL_VERSION: u64 = 3;

/// How a spawned CLI talks to us.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Transport {
    /// Its stdin and stdout (`--stdio`).
    #[default]
    Stdio,
    /// A TCP port on 127.0.0.1 (`--port N`; 0 lets it choose).
    Tcp {
        /// The port to ask for; 0 for any free port.
        port: u16,
    },
}

/// How to start a CLI.
#[derive(Debug, Clone)]
pub struct ClientOptions {
    /// The CLI to run. `None`: `COPILOT_CLI_PATH`, `PATH`, then
    /// `./node_modules/.bin/copilot`.
    pub cli_path: Option<PathBuf>,
    /// Install the CLI with npm into [`install_dir`](Self::install_dir) if
    /// it is not found.
    pub install_if_missing: bool,
    /// Where to install it; `None`: the user's cache folder.
    pub install_dir: Option<PathBuf>,
    /// Stdio or TCP.
    pub transport: Transport,
    /// The CLI's `--log-level`.
    pub log_level: String,
    /// A GitHub token for the CLI, passed in its environment (never argv).
    pub auth_token: Option<String>,
    /// For TCP: a token the CLI requires of every connection
    /// (`COPILOT_CONNECTION_TOKEN`); sent in `connect`.
    pub connection_token: Option<String>,
    /// Extra arguments for the CLI (for example `--no-auto-login`).
    pub extra_args: Vec<String>,
    /// Extra environment for the CLI.
    pub env: Vec<(OsString, OsString)>,
    /// The CLI's working directory.
    pub cwd: Option<PathBuf>,
    /// How long the CLI may take to start and answer `connect`.
    pub startup_timeout: Duration,
}

impl Default for ClientOptions {
    fn default() -> Self {
        ClientOptions {
            cli_path: None,
            install_if_missing: false,
            install_dir: None,
            transport: Transport::Stdio,
            log_level: "error".into(),
            auth_token: None,
            connection_token: None,
            extra_args: Vec::new(),
            env: Vec::new(),
            cwd: None,
            startup_timeout: Duration::from_secs(60),
        }
    }
}

/// The answer to `status.get`.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct Status {
    /// The CLI's version.
    pub version: String,
    /// The protocol version it speaks.
    pub protocol_version: u64,
}

/// The answer to `ping`.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct Pong {
    /// The message sent, echoed.
    #[serde(default)]
    pub message: Option<String>,
    /// When the server answered.
    #[serde(default)]
    pub timestamp: Option<Value>,
    /// The protocol version, if the server says.
    #[serde(default)]
    pub protocol_version: Option<u64>,
}

/// One entry of `session.list`.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct SessionMetadata {
    /// The session id.
    pub session_id: String,
    /// When it started.
    #[serde(default)]
    pub start_time: Option<String>,
    /// When it last changed.
    #[serde(default)]
    pub modified_time: Option<String>,
    /// A summary, once the CLI has one.
    #[serde(default)]
    pub summary: Option<String>,
    /// Whether it runs remotely.
    #[serde(default)]
    pub is_remote: bool,
    /// Where it runs (cwd, repository, ...).
    #[serde(default)]
    pub context: Option<Value>,
}

/// The answer to `auth.getStatus`: whether the CLI has a Copilot login.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct AuthStatus {
    /// Whether the CLI can call the model with the login it has.
    pub is_authenticated: bool,
    /// How it is authenticated (`user`, `env`, `gh-cli`, `token`, ...).
    #[serde(default)]
    pub auth_type: Option<String>,
    /// The GitHub host.
    #[serde(default)]
    pub host: Option<String>,
    /// The user's login name.
    #[serde(default)]
    pub login: Option<String>,
    /// A message for a person.
    #[serde(default)]
    pub status_message: Option<String>,
}

/// What the handshake learned.
#[derive(Debug, Clone)]
pub struct ServerInfo {
    /// The protocol version agreed.
    pub protocol_version: u64,
    /// The CLI's version, if it said.
    pub version: Option<String>,
}

/// A connection to one Copilot CLI.
pub struct Client {
    conn: Arc<Connection>,
    reader: Mutex<Option<JoinHandle<()>>>,
    process: Mutex<Option<CliProcess>>,
    socket: Option<TcpStream>,
    server: ServerInfo,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client").field("transport", &self.conn.label).field("server", &self.server).finish()
    }
}

impl Client {
    /// Starts a CLI and connects to it.
    pub fn start(options: ClientOptions) -> Result<Client> {
        let program = match cli::resolve_cli(options.cli_path.as_deref()) {
            Ok(p) => p,
            Err(e) if options.install_if_missing && options.cli_path.is_none() => {
                let dir = options.install_dir.clone().unwrap_or_else(cli::default_install_dir);
                log::info!("Copilot CLI not found ({e}); installing {} into {}", cli::CLI_VERSION, dir.display());
                cli::install_cli(&dir)?
            }
            Err(e) => return Err(e),
        };
        let mut args: Vec<OsString> =
            ["--headless", "--no-auto-update", "--log-level"].iter().map(OsString::from).collect();
        args.push(options.log_level.clone().into());
        let mut env = options.env.clone();
        if let Some(token) = &options.auth_token {
            args.extend(["--auth-token-env".into(), AUTH_TOKEN_ENV.into()]);
            env.push((AUTH_TOKEN_ENV.into(), token.into()));
        }
        match options.transport {
            Transport::Stdio => args.push("--stdio".into()),
            Transport::Tcp { port } => {
                args.extend(["--port".into(), port.to_string().into()]);
                if let Some(t) = &options.connection_token {
                    env.push(("COPILOT_CONNECTION_TOKEN".into(), t.into()));
                }
            }
        }
        args.extend(options.extra_args.iter().map(OsString::from));
        let launch = Launch { program: &program, args, env: &env, cwd: options.cwd.as_deref() };
        let (mut process, stdin, stdout) = CliProcess::spawn(&launch)?;
        log::debug!("started {} ({:?})", program.display(), options.transport);

        let (label, reader, writer, socket): (String, Box<dyn Read + Send>, Box<dyn Write + Send>, _) =
            match options.transport {
                Transport::Stdio => ("stdio".into(), Box::new(stdout), Box::new(stdin), None),
                Transport::Tcp { .. } => {
                    let port = process.read_port(stdout, options.startup_timeout)?;
                    process.keep_stdin(stdin);
                    let stream = TcpStream::connect(("127.0.0.1", port))?;
                    let (r, w) = tcp_halves(&stream)?;
                    (format!("tcp 127.0.0.1:{port}"), r, w, Some(stream))
                }
            };
        let (conn, reader) = Connection::start(label, reader, writer)?;
        let mut client = Client {
            conn,
            reader: Mutex::new(Some(reader)),
            process: Mutex::new(None),
            socket,
            server: ServerInfo { protocol_version: 0, version: None },
        };
        match client.handshake(options.connection_token.as_deref(), options.startup_timeout) {
            Ok(info) => {
                client.server = info;
                *client.process.lock().unwrap_or_else(|p| p.into_inner()) = Some(process);
                Ok(client)
            }
            Err(Error::Disconnected(_)) => {
                let e = process.exited_error();
                client.force_stop_inner();
                Err(e)
            }
            Err(e) => {
                process.kill();
                client.force_stop_inner();
                Err(e)
            }
        }
    }

    /// Connects to a CLI already serving TCP at `addr`.
    pub fn connect(addr: impl ToSocketAddrs, token: Option<&str>) -> Result<Client> {
        let stream = TcpStream::connect(addr)?;
        let peer = stream.peer_addr().map(|a| a.to_string()).unwrap_or_default();
        let (r, w) = tcp_halves(&stream)?;
        Self::from_parts(format!("tcp {peer}"), r, w, Some(stream), token)
    }

    /// Runs the client over any byte stream pair (an in-memory pipe, a
    /// socket of the caller's, ...): the same pump as every transport.
    pub fn from_streams(
        reader: impl Read + Send + 'static,
        writer: impl Write + Send + 'static,
        token: Option<&str>,
    ) -> Result<Client> {
        Self::from_parts("stream".into(), Box::new(reader), Box::new(writer), None, token)
    }

    fn from_parts(
        label: String,
        reader: Box<dyn Read + Send>,
        writer: Box<dyn Write + Send>,
        socket: Option<TcpStream>,
        token: Option<&str>,
    ) -> Result<Client> {
        let (conn, reader) = Connection::start(label, reader, writer)?;
        let mut client = Client {
            conn,
            reader: Mutex::new(Some(reader)),
            process: Mutex::new(None),
            socket,
            server: ServerInfo { protocol_version: 0, version: None },
        };
        match client.handshake(token, Duration::from_secs(60)) {
            Ok(info) => {
                client.server = info;
                Ok(client)
            }
            Err(e) => {
                client.force_stop_inner();
                Err(e)
            }
        }
    }

    /// `connect`, falling back to `ping` for servers that lack it.
    fn handshake(&self, token: Option<&str>, timeout: Duration) -> Result<ServerInfo> {
        let mut params = json!({ "supportedTaskKinds": [] });
        if let Some(t) = token {
            params["token"] = t.into();
        }
        let (version, server_version) = match self.conn.request("connect", &params, Some(timeout)) {
            Ok(body) => {
                let v: Value = parse(&body, "connect")?;
                (
                    v.get("protocolVersion").and_then(Value::as_u64),
                    v.get("version").and_then(Value::as_str).map(String::from),
                )
            }
            Err(Error::Rpc { code: copilot_core::METHOD_NOT_FOUND, .. }) => {
                let pong: Pong = parse(&self.conn.request("ping", &json!({}), Some(timeout))?, "ping")?;
                (pong.protocol_version, None)
            }
            Err(e) => return Err(e),
        };
        match version {
            Some(PROTOCOL_VERSION) => Ok(ServerInfo { protocol_version: PROTOCOL_VERSION, version: server_version }),
            other => Err(Error::ProtocolVersion { server: other, supported: PROTOCOL_VERSION }),
        }
    }

    /// For a TCP connection: the CLI's address.
    pub fn peer_addr(&self) -> Option<std::net::SocketAddr> {
        self.socket.as_ref().and_then(|s| s.peer_addr().ok())
    }

    /// What the handshake learned.
    pub fn server_info(&self) -> &ServerInfo {
        &self.server
    }

    /// The router's counters: frames, bytes, malformed, oversize, unknown
    /// sessions, parked frames.
    pub fn stats(&self) -> Stats {
        self.conn.stats()
    }

    /// Frames that could not be parked because too many were held at once.
    pub fn parked_overflow(&self) -> u64 {
        self.conn.park_overflow()
    }

    /// `ping`.
    pub fn ping(&self, message: Option<&str>) -> Result<Pong> {
        parse(&self.conn.request("ping", &json!({ "message": message }), None)?, "ping")
    }

    /// `status.get`.
    pub fn status(&self) -> Result<Status> {
        parse(&self.conn.request("status.get", &json!({}), None)?, "status.get")
    }

    /// Calls any method this crate does not wrap, with JSON params, and
    /// returns the JSON result.
    pub fn call(&self, method: &str, params: &Value) -> Result<Value> {
        parse(&self.conn.request(method, params, None)?, method)
    }

    /// `auth.getStatus`: whether the CLI has a Copilot login.
    pub fn auth_status(&self) -> Result<AuthStatus> {
        parse(&self.conn.request("auth.getStatus", &json!({}), None)?, "auth.getStatus")
    }

    /// `session.list`.
    pub fn list_sessions(&self) -> Result<Vec<SessionMetadata>> {
        #[derive(Deserialize)]
        struct List {
            sessions: Vec<SessionMetadata>,
        }
        Ok(parse::<List>(&self.conn.request("session.list", &json!({}), None)?, "session.list")?.sessions)
    }

    /// `session.delete`: removes a session's persisted state.
    pub fn delete_session(&self, session_id: &str) -> Result<()> {
        let v: Value =
            parse(&self.conn.request("session.delete", &json!({ "sessionId": session_id }), None)?, "session.delete")?;
        match v.get("success").and_then(Value::as_bool) {
            Some(false) => Err(Error::Rpc {
                code: 0,
                message: v.get("error").and_then(Value::as_str).unwrap_or("session.delete failed").to_owned(),
                data: None,
            }),
            _ => Ok(()),
        }
    }

    /// `session.getLastId`: the most recently updated session, if any.
    pub fn last_session_id(&self) -> Result<Option<String>> {
        let v: Value = parse(&self.conn.request("session.getLastId", &json!({}), None)?, "session.getLastId")?;
        Ok(v.get("sessionId").and_then(Value::as_str).map(String::from))
    }

    /// A receiver of every `session.lifecycle` notification from now on.
    pub fn lifecycle_events(&self) -> mpsc::Receiver<LifecycleEvent> {
        self.conn.subscribe_lifecycle()
    }

    /// Creates a session. Its slot is reserved before `session.create` is
    /// sent, so events that race the answer are delivered.
    pub fn create_session(&self, config: SessionConfig) -> Result<Session> {
        self.open("session.create", config, None)
    }

    /// Resumes a session by id, reserved before `session.resume` is sent.
    pub fn resume_session(&self, session_id: &str, config: SessionConfig) -> Result<Session> {
        self.open("session.resume", config, Some(session_id.to_owned()))
    }

    fn open(&self, method: &str, config: SessionConfig, resume: Option<String>) -> Result<Session> {
        config.check()?;
        let session = self.open_unchecked(method, &config, resume)?;
        if config.handlers.mcp_oauth.is_some() {
            // The CLI sends mcp.oauth_required only to clients that ask;
            // MCP servers connect at the first send, so now is in time.
            let params = json!({ "sessionId": session.id(), "eventType": "mcp.oauth_required" });
            self.conn.request("session.eventLog.registerInterest", &params, None)?;
        }
        Ok(session)
    }

    fn open_unchecked(&self, method: &str, config: &SessionConfig, resume: Option<String>) -> Result<Session> {
        let sessions = self.conn.router.sessions();
        if config.server_assigned_id && resume.is_none() {
            let inner = SessionInner::start(None, config.handlers.clone())?;
            let handle = sessions
                .reserve_unassigned(Arc::clone(&inner))
                .map_err(|e| Error::Capacity(format!("cannot open another session: {e}")))?;
            let (tx, rx) = mpsc::sync_channel(1);
            let waiter = Waiter::Assign { handle, session: Arc::clone(&inner), reply: tx };
            return match self.conn.request_with(method, &config.to_params(None), waiter, rx, None) {
                Ok(body) => {
                    let result: Value = parse(&body, method)?;
                    let id = inner.id().map(str::to_owned).unwrap_or_default();
                    Ok(Session::new(inner, Arc::clone(&self.conn), handle, id, &result))
                }
                Err(e) => {
                    // The reader released the slot if it saw the answer.
                    sessions.release(handle);
                    inner.close("create failed");
                    Err(e)
                }
            };
        }
        let id = resume.or(config.session_id.clone()).unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
        let inner = SessionInner::start(Some(&id), config.handlers.clone())?;
        let handle = sessions.reserve(&id, Arc::clone(&inner)).map_err(|e| match e.kind {
            copilot_core::ReserveErrorKind::Full => Error::Capacity(format!("cannot open another session: {}", e.kind)),
            kind => Error::Config(format!("session {id:?}: {kind}")),
        })?;
        match self.conn.request(method, &config.to_params(Some(&id)), None) {
            Ok(body) => {
                let result: Value = parse(&body, method)?;
                let _ = sessions.activate(handle);
                Ok(Session::new(inner, Arc::clone(&self.conn), handle, id, &result))
            }
            Err(e) => {
                sessions.release(handle);
                inner.close("create failed");
                Err(e)
            }
        }
    }

    /// Stops cleanly: destroys the sessions still open, asks a CLI we
    /// started to shut down, waits for it, and kills it after a grace
    /// period.
    pub fn stop(self) -> Result<()> {
        let mut first_error = None;
        let grace = Duration::from_secs(5);
        for (handle, state, session) in self.conn.router.sessions().iter() {
            if let (Some(id), SessionState::Active) = (session.id(), state) {
                let _ = self.conn.router.sessions().close(handle);
                if let Err(e) = self.conn.request("session.destroy", &json!({ "sessionId": id }), Some(grace)) {
                    first_error.get_or_insert(e);
                }
            }
            self.conn.router.sessions().release(handle);
            session.close("client stopped");
        }
        let mut process = self.process.lock().unwrap_or_else(|p| p.into_inner()).take();
        if process.is_some() && !self.conn.is_closed() {
            match self.conn.request("runtime.shutdown", &json!({}), Some(grace)) {
                Ok(_) | Err(Error::Rpc { .. }) | Err(Error::Disconnected(_)) => {}
                Err(e) => {
                    first_error.get_or_insert(e);
                }
            }
        }
        self.conn.close_writer();
        if let Some(p) = process.as_mut() {
            if p.wait_for_exit(grace).is_none() {
                log::warn!("the Copilot CLI did not exit within {grace:?}; killing it");
                p.kill();
            }
        }
        if let Some(s) = &self.socket {
            let _ = s.shutdown(Shutdown::Both);
        }
        self.join_reader();
        first_error.map_or(Ok(()), Err)
    }

    /// Stops at once: kills a CLI we started and closes the connection.
    pub fn force_stop(self) {
        self.force_stop_inner();
    }

    fn force_stop_inner(&self) {
        if let Some(mut p) = self.process.lock().unwrap_or_else(|p| p.into_inner()).take() {
            p.kill();
        }
        self.conn.close_writer();
        if let Some(s) = &self.socket {
            let _ = s.shutdown(Shutdown::Both);
        }
        // A stream of the caller's may stay open: do not wait for its reader.
        if self.socket.is_some() || self.conn.is_closed() {
            self.join_reader();
        }
    }

    fn join_reader(&self) {
        if let Some(r) = self.reader.lock().unwrap_or_else(|p| p.into_inner()).take() {
            let _ = r.join();
        }
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        // Never leave a CLI we started running.
        if let Some(mut p) = self.process.lock().unwrap_or_else(|p| p.into_inner()).take() {
            p.kill();
        }
        if let Some(s) = &self.socket {
            let _ = s.shutdown(Shutdown::Both);
        }
    }
}

fn tcp_halves(stream: &TcpStream) -> Result<(Box<dyn Read + Send>, Box<dyn Write + Send>)> {
    // Answers are small and awaited by the agent: do not let Nagle hold them.
    stream.set_nodelay(true)?;
    Ok((Box::new(stream.try_clone()?), Box::new(stream.try_clone()?)))
}

fn parse<T: for<'de> Deserialize<'de>>(body: &[u8], method: &str) -> Result<T> {
    serde_json::from_slice(body).map_err(|e| Error::Protocol(format!("unreadable {method} answer: {e}")))
}
