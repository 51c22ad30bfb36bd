//! The client: start or connect to a CLI, handshake, session management,
//! and stopping.

use std::ffi::OsString;
use std::io::{Read, Write};
use std::net::{Shutdown, TcpStream, ToSocketAddrs};
use std::sync::{mpsc, Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use copilot_core::{ClientMode, LaunchTransport, Stats};
use serde_json::Value;

use super::client_options::{ClientOptions, Transport};
use super::config::SessionConfig;
use super::ops::{self, ClientOps};
use super::replies::{AuthStatus, Pong, ServerInfo, SessionMetadata, Status};
use super::respawn::{Reconnect, Respawn};
use super::session::Session;
use super::telemetry::TraceContextProvider;
use crate::answering::{run_client_wide, Inference, RequestHandlers};
use crate::delivery::lifecycle_sink;
use crate::driver::{ClientWide, Connection, RecoveryEvent};
use crate::error::{Error, Result};
use crate::events::LifecycleEvent;
use crate::transport::cli::{self, CliProcess, Launch};
use crate::transport::{tcp_halves, CloseCause};
use crate::wait::block_on;

/// A connection to one Copilot CLI.
pub struct Client {
    pub(super) conn: Arc<Connection>,
    reader: Mutex<Option<JoinHandle<()>>>,
    /// The CLI this client started (a recovery replaces it).
    pub(super) process: Arc<Mutex<Option<CliProcess>>>,
    pid: Option<u32>,
    /// The TCP stream in use, if any (a recovery replaces it).
    pub(super) socket: Arc<Mutex<Option<TcpStream>>>,
    server: ServerInfo,
    /// The caller's trace context, for every open and send.
    trace: Option<TraceContextProvider>,
    /// How sessions default what the application leaves unset.
    mode: ClientMode,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client").field("transport", &self.conn.label).field("server", &self.server).finish()
    }
}

impl Client {
    /// The connection (for the async API).
    pub(crate) fn conn(&self) -> &Arc<Connection> {
        &self.conn
    }

    pub(crate) fn trace(&self) -> Option<&TraceContextProvider> {
        self.trace.as_ref()
    }

    /// How this client's sessions default what the application leaves unset.
    pub fn mode(&self) -> ClientMode {
        self.mode
    }

    /// Starts a CLI and connects to it.
    pub fn start(options: ClientOptions) -> Result<Client> {
        options.request_handlers.check()?;
        let inference = options.inference();
        let mode_env = options.mode_env()?;
        let program = match cli::resolve_cli(options.cli_path.as_deref()) {
            Ok(p) => p,
            Err(e) if options.install_if_missing && options.cli_path.is_none() => {
                let dir = options.install_dir.clone().unwrap_or_else(cli::default_install_dir);
                log::info!("Copilot CLI not found ({e}); installing {} into {}", cli::CLI_VERSION, dir.display());
                cli::install_cli(&dir)?
            }
            Err(e) => return Err(e),
        };
        let transport = match options.transport {
            Transport::Stdio => LaunchTransport::Stdio,
            Transport::Tcp { port } => LaunchTransport::Tcp { port },
        };
        // The core's arguments and secrets; the user's arguments go after
        // them, and the secrets after the user's environment.
        let items = cli::start_items(
            transport,
            &options.log_level,
            options.auth_token.as_deref(),
            options.connection_token.as_deref(),
        );
        let (mut args, connection_token) = (items.args, items.connection_token);
        let mut env = options.env.clone();
        // The mode's and telemetry's over the user's environment, the
        // secrets last.
        env.extend(mode_env);
        env.extend(options.telemetry.iter().flat_map(|t| t.env()));
        env.extend(items.secrets);
        args.extend(options.extra_args.iter().map(OsString::from));
        let launch = Launch { program: &program, args, env: &env, cwd: options.cwd.as_deref() };
        let (mut process, stdin, stdout) = CliProcess::spawn(&launch)?;
        log::debug!("started {} ({:?}, pid {})", program.display(), options.transport, process.id());

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
        let probe = process.cause_probe();
        let (conn, reader) = Connection::start(
            label,
            reader,
            writer,
            options.deadlines(),
            Some(probe),
            client_wide(&options.request_handlers, inference.clone()),
        )?;
        if let Some(i) = &inference {
            i.bind(&conn);
        }
        let mut client = Client {
            conn,
            reader: Mutex::new(Some(reader)),
            process: Arc::default(),
            pid: Some(process.id()),
            socket: Arc::new(Mutex::new(socket)),
            server: ServerInfo { protocol_version: 0, version: None },
            trace: options.trace_context.clone(),
            mode: options.mode,
        };
        match client.handshake(connection_token.as_deref(), options.startup_timeout, inference.is_some()) {
            Ok(info) => {
                client.server = info;
                *client.process.lock().unwrap_or_else(|p| p.into_inner()) = Some(process);
                if options.auto_restart {
                    let tcp = matches!(options.transport, Transport::Tcp { .. });
                    client.conn.set_restart(Arc::new(Respawn {
                        program: program.clone(),
                        args: launch.args.clone(),
                        env: env.clone(),
                        cwd: options.cwd.clone(),
                        connection_token,
                        startup_timeout: options.startup_timeout,
                        inference: inference.clone(),
                        process: Arc::clone(&client.process),
                        socket: tcp.then(|| Arc::clone(&client.socket)),
                    }));
                }
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

    /// Connects to a CLI already serving TCP at `addr`, with the default
    /// timeouts of [`ClientOptions`].
    pub fn connect(addr: impl ToSocketAddrs, token: Option<&str>) -> Result<Client> {
        Self::connect_with(addr, token, &ClientOptions::default())
    }

    /// Connects to a CLI already serving TCP at `addr`, with the timeouts
    /// (`startup_timeout`, `request_timeout`, `shutdown_grace`) of `options`.
    /// The options that only start a CLI (`cli_path`, `auth_token`, `env`,
    /// ...: the core's `SPAWN_ONLY_OPTIONS`) are refused: [`Error::Config`].
    pub fn connect_with(addr: impl ToSocketAddrs, token: Option<&str>, options: &ClientOptions) -> Result<Client> {
        options.check_not_spawning()?;
        let stream = TcpStream::connect(addr)?;
        let peer = stream.peer_addr();
        let (r, w) = tcp_halves(&stream)?;
        let label = format!("tcp {}", peer.as_ref().map(ToString::to_string).unwrap_or_default());
        let (client, inference) = Self::from_parts(label, r, w, Some(stream), token, options)?;
        if let (true, Ok(addr)) = (options.auto_restart, peer) {
            client.conn.set_restart(Arc::new(Reconnect {
                addr,
                token: token.map(str::to_owned),
                startup_timeout: options.startup_timeout,
                inference,
                socket: Arc::clone(&client.socket),
            }));
        }
        Ok(client)
    }

    /// Runs the client over any byte stream pair (an in-memory pipe, a
    /// socket of the caller's, ...): the same pump as every transport.
    pub fn from_streams(
        reader: impl Read + Send + 'static,
        writer: impl Write + Send + 'static,
        token: Option<&str>,
    ) -> Result<Client> {
        Self::from_streams_with(reader, writer, token, &ClientOptions::default())
    }

    /// [`from_streams`](Self::from_streams) with the timeouts
    /// (`startup_timeout`, `request_timeout`, `shutdown_grace`) of `options`.
    pub fn from_streams_with(
        reader: impl Read + Send + 'static,
        writer: impl Write + Send + 'static,
        token: Option<&str>,
        options: &ClientOptions,
    ) -> Result<Client> {
        Self::from_parts("stream".into(), Box::new(reader), Box::new(writer), None, token, options).map(|(c, _)| c)
    }

    fn from_parts(
        label: String,
        reader: Box<dyn Read + Send>,
        writer: Box<dyn Write + Send>,
        socket: Option<TcpStream>,
        token: Option<&str>,
        options: &ClientOptions,
    ) -> Result<(Client, Option<Arc<Inference>>)> {
        options.check_not_spawning()?;
        options.request_handlers.check()?;
        let inference = options.inference();
        let (conn, reader) = Connection::start(
            label,
            reader,
            writer,
            options.deadlines(),
            None,
            client_wide(&options.request_handlers, inference.clone()),
        )?;
        if let Some(i) = &inference {
            i.bind(&conn);
        }
        let mut client = Client {
            conn,
            reader: Mutex::new(Some(reader)),
            process: Arc::default(),
            pid: None,
            socket: Arc::new(Mutex::new(socket)),
            server: ServerInfo { protocol_version: 0, version: None },
            trace: options.trace_context.clone(),
            mode: options.mode,
        };
        match client.handshake(token, options.startup_timeout, inference.is_some()) {
            Ok(info) => {
                client.server = info;
                Ok((client, inference))
            }
            Err(e) => {
                client.force_stop_inner();
                Err(e)
            }
        }
    }

    /// The core's handshake, within `timeout`; then, for a client with an
    /// inference request handler, its registration as the provider.
    fn handshake(&self, token: Option<&str>, timeout: Duration, inference: bool) -> Result<ServerInfo> {
        let info = block_on(ops::handshake(&self.conn, token, timeout))?;
        if inference {
            block_on(ops::set_inference_provider(&self.conn, timeout))?;
        }
        Ok(info)
    }

    /// For a TCP connection: the CLI's address.
    pub fn peer_addr(&self) -> Option<std::net::SocketAddr> {
        self.socket().as_ref().and_then(|s| s.peer_addr().ok())
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

    /// Frames that could not be parked because too many were held at once
    /// (a wait among them was refused, not dropped).
    pub fn parked_overflow(&self) -> u64 {
        let s = self.conn.engine_stats();
        s.park_dropped + s.refused(copilot_core::Cause::ParkOverflow)
    }

    /// The events read and handed to subscribers that have not all taken
    /// them yet: bytes held now and at most, and how often the reader
    /// paused because they reached [`MAX_BACKLOG_BYTES`](crate::MAX_BACKLOG_BYTES)
    /// (a consumer slower than the CLI holds the CLI back) or read on
    /// because nothing was taken for [`BACKLOG_STALL_MS`](crate::BACKLOG_STALL_MS).
    pub fn backlog(&self) -> crate::BacklogStats {
        self.conn.backlog.stats()
    }

    /// The protocol engine's counters: the waits of the agent open now and
    /// the age of the oldest, answers sent by handlers, refusals by cause,
    /// parked frames, and the router's counters.
    pub fn engine_stats(&self) -> copilot_core::EngineStats {
        self.conn.engine_stats()
    }

    /// Why the connection ended, or `None` while it is open: the CLI
    /// exited (with its exit status and the end of its stderr), the other
    /// end closed it, reading failed, or this client stopped it.
    pub fn closed(&self) -> Option<CloseCause> {
        self.conn.close_cause()
    }

    /// Waits until the connection ends (at most `timeout`, if given) and
    /// says why; `None` if it is still open at the timeout.
    pub fn wait_closed(&self, timeout: Option<Duration>) -> Option<CloseCause> {
        self.conn.wait_closed(timeout.map(|t| Instant::now() + t))
    }

    /// The process id of the CLI this client started, if it started one
    /// (the one running now, after a recovery started it again).
    pub fn cli_pid(&self) -> Option<u32> {
        self.process.lock().unwrap_or_else(|p| p.into_inner()).as_ref().map(CliProcess::id).or(self.pid)
    }

    /// Calls `f` with each step of the recoveries to come
    /// ([`ClientOptions::auto_restart`]): the connection lost and why, each
    /// attempt, each session resumed, recovered or given up. Called on the
    /// thread that recovers: keep it short.
    pub fn on_recovery(&self, f: impl Fn(&RecoveryEvent) + Send + Sync + 'static) {
        self.conn.on_recovery(Box::new(f));
    }

    /// The calls of this client with their own `timeout` in place of
    /// [`ClientOptions::request_timeout`]:
    /// `client.with_timeout(Duration::from_secs(2)).ping(None)`.
    pub fn with_timeout(&self, timeout: Duration) -> Calls<'_> {
        Calls { client: self, timeout: Some(timeout) }
    }

    fn calls(&self) -> Calls<'_> {
        Calls { client: self, timeout: None }
    }

    /// `ping`.
    pub fn ping(&self, message: Option<&str>) -> Result<Pong> {
        self.calls().ping(message)
    }

    /// `status.get`.
    pub fn status(&self) -> Result<Status> {
        self.calls().status()
    }

    /// Calls any method this crate does not wrap, with JSON params, and
    /// returns the JSON result.
    pub fn call(&self, method: &str, params: &Value) -> Result<Value> {
        self.calls().call(method, params)
    }

    /// `auth.getStatus`: whether the CLI has a Copilot login.
    pub fn auth_status(&self) -> Result<AuthStatus> {
        self.calls().auth_status()
    }

    /// `session.list`.
    pub fn list_sessions(&self) -> Result<Vec<SessionMetadata>> {
        self.calls().list_sessions()
    }

    /// `session.delete`: removes a session's persisted state.
    pub fn delete_session(&self, session_id: &str) -> Result<()> {
        self.calls().delete_session(session_id)
    }

    /// `session.getLastId`: the most recently updated session, if any.
    pub fn last_session_id(&self) -> Result<Option<String>> {
        self.calls().last_session_id()
    }

    /// Creates a session. Its slot is reserved before `session.create` is
    /// sent, so events that race the answer are delivered.
    pub fn create_session(&self, config: SessionConfig) -> Result<Session> {
        self.calls().create_session(config)
    }

    /// Resumes a session by id, reserved before `session.resume` is sent.
    pub fn resume_session(&self, session_id: &str, config: SessionConfig) -> Result<Session> {
        self.calls().resume_session(session_id, config)
    }

    /// A receiver of every `session.lifecycle` notification from now on.
    pub fn lifecycle_events(&self) -> mpsc::Receiver<LifecycleEvent> {
        let (tx, rx) = mpsc::channel();
        self.conn.subscribe_lifecycle_with(lifecycle_sink(move |e| tx.send(e.clone()).is_ok()));
        rx
    }

    /// Stops at once: kills a CLI we started and closes the connection.
    pub fn force_stop(self) {
        self.force_stop_inner();
    }

    fn force_stop_inner(&self) {
        self.conn.mark_stopping();
        if let Some(mut p) = self.process.lock().unwrap_or_else(|p| p.into_inner()).take() {
            p.kill();
        }
        self.conn.close_writer();
        let tcp = self.shut_socket();
        // A stream of the caller's may stay open: do not wait for its reader.
        if tcp || self.conn.is_closed() {
            self.join_reader();
        }
    }

    /// Joins the reader, and the readers a recovery started after it.
    pub(super) fn join_reader(&self) {
        if let Some(r) = self.reader.lock().unwrap_or_else(|p| p.into_inner()).take() {
            let _ = r.join();
        }
        while let Some(r) = self.conn.take_reader_thread() {
            let _ = r.join();
        }
    }

    /// The TCP stream in use.
    fn socket(&self) -> std::sync::MutexGuard<'_, Option<TcpStream>> {
        self.socket.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Shuts the TCP stream in use down, if there is one; whether there was.
    pub(super) fn shut_socket(&self) -> bool {
        self.socket().as_ref().map(|s| s.shutdown(Shutdown::Both)).is_some()
    }
}

/// The calls of a [`Client`] with a timeout of their own
/// ([`Client::with_timeout`]).
#[derive(Debug, Clone, Copy)]
pub struct Calls<'a> {
    client: &'a Client,
    timeout: Option<Duration>,
}

impl Calls<'_> {
    fn ops(&self) -> ClientOps<'_> {
        ClientOps { conn: &self.client.conn, timeout: self.timeout, trace: self.client.trace(), mode: self.client.mode }
    }

    /// `ping`.
    pub fn ping(&self, message: Option<&str>) -> Result<Pong> {
        block_on(self.ops().ping(message))
    }

    /// `status.get`.
    pub fn status(&self) -> Result<Status> {
        block_on(self.ops().status())
    }

    /// Calls any method this crate does not wrap, with JSON params, and
    /// returns the JSON result.
    pub fn call(&self, method: &str, params: &Value) -> Result<Value> {
        block_on(self.ops().call(method, params))
    }

    /// `auth.getStatus`: whether the CLI has a Copilot login.
    pub fn auth_status(&self) -> Result<AuthStatus> {
        block_on(self.ops().auth_status())
    }

    /// `session.list`.
    pub fn list_sessions(&self) -> Result<Vec<SessionMetadata>> {
        block_on(self.ops().list_sessions())
    }

    /// `session.delete`: removes a session's persisted state.
    pub fn delete_session(&self, session_id: &str) -> Result<()> {
        block_on(self.ops().delete_session(session_id))
    }

    /// `session.getLastId`: the most recently updated session, if any.
    pub fn last_session_id(&self) -> Result<Option<String>> {
        block_on(self.ops().last_session_id())
    }

    /// Creates a session. Its slot is reserved before `session.create` is
    /// sent, so events that race the answer are delivered.
    pub fn create_session(&self, config: SessionConfig) -> Result<Session> {
        block_on(self.ops().open(config, None))
    }

    /// Resumes a session by id, reserved before `session.resume` is sent.
    pub fn resume_session(&self, session_id: &str, config: SessionConfig) -> Result<Session> {
        block_on(self.ops().open(config, Some(session_id.to_owned())))
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        // Never leave a CLI we started running, nor start it again.
        self.conn.mark_stopping();
        if let Some(mut p) = self.process.lock().unwrap_or_else(|p| p.into_inner()).take() {
            p.kill();
        }
        self.shut_socket();
    }
}

/// The client's generic handlers answer the waits of client-wide requests.
fn client_wide(requests: &RequestHandlers, inference: Option<Arc<Inference>>) -> ClientWide {
    let requests = Arc::new(requests.clone());
    Arc::new(move |job| run_client_wide(job, &requests, inference.as_ref()))
}
