//! How a client starts: the transport, deadlines, handler threads and the
//! CLI's launch options ([`ClientOptions`]).

use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use copilot_core::{limits, ClientMode};

use super::telemetry::{TelemetryConfig, TraceContext, TraceContextProvider};
use crate::answering::{CopilotRequestHandler, Inference, RequestHandler, RequestHandlers};
use crate::driver::Deadlines;

/// The protocol version this client speaks (the core's
/// [`PROTOCOL_VERSION`](copilot_core::limits::PROTOCOL_VERSION)).
pub const PROTOCOL_VERSION: u64 = limits::PROTOCOL_VERSION;

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

/// How long a call to the CLI may take unless told otherwise (the core's
/// default).
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_millis(limits::DEFAULT_REQUEST_TIMEOUT_MS);
/// How long a handler may take to answer a wait of the agent, unless
/// [`ClientOptions::handler_timeout`] says otherwise (the core's default).
pub const DEFAULT_HANDLER_TIMEOUT: Duration = Duration::from_millis(limits::DEFAULT_HANDLER_TIMEOUT_MS);

/// How long a running turn may be silent before the client asks the CLI
/// which waits are pending, unless [`ClientOptions::stall_interval`] says
/// otherwise (the core's default).
pub const DEFAULT_STALL_INTERVAL: Duration = Duration::from_millis(limits::DEFAULT_STALL_INTERVAL_MS);

/// Threads running handlers, unless [`ClientOptions::handler_threads`]
/// says otherwise.
pub const DEFAULT_HANDLER_THREADS: usize = 16;

/// How long `Session::destroy` and `Client::stop` (in total) wait for a CLI
/// that does not answer before they release everything and go on (the
/// core's default).
pub const DEFAULT_SHUTDOWN_GRACE: Duration = Duration::from_millis(limits::DEFAULT_SHUTDOWN_GRACE_MS);

/// How to start a CLI. Its `Debug` output shows no token and no
/// environment value.
#[derive(Clone)]
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
    /// A GitHub token for the CLI, passed in its environment (never argv),
    /// and named to the CLI as a secret (`--secret-env-vars`), so that the
    /// shell commands and MCP servers it starts do not receive it.
    pub auth_token: Option<String>,
    /// For TCP: a token the CLI requires of every connection
    /// (`COPILOT_CONNECTION_TOKEN`); sent in `connect`. `None`: a random
    /// one is generated, so no other local process can drive the CLI.
    pub connection_token: Option<String>,
    /// Extra arguments for the CLI (for example `--no-auto-login`).
    pub extra_args: Vec<String>,
    /// Extra environment for the CLI.
    pub env: Vec<(OsString, OsString)>,
    /// The CLI's working directory.
    pub cwd: Option<PathBuf>,
    /// How long the CLI may take to start and answer `connect`.
    pub startup_timeout: Duration,
    /// How long any call to the CLI may take (create, send, abort, ping,
    /// the answers to the agent's requests, ...) unless the call is given
    /// its own timeout ([`Client::with_timeout`](crate::Client::with_timeout), [`Session::with_timeout`],
    /// `send_and_wait`'s).
    ///
    /// [`Session::with_timeout`]: crate::Session::with_timeout
    pub request_timeout: Duration,
    /// How long `Session::destroy` and [`Client::stop`](crate::Client::stop) (in total, however
    /// many sessions are open) wait for the CLI; then local state is
    /// released and a CLI this client started is killed.
    pub shutdown_grace: Duration,
    /// How long a handler (permission, tool, user input, ...) may take to
    /// answer a wait of the agent; then the agent gets the refusal the
    /// handler's kind has without a handler, and a later answer is not sent.
    pub handler_timeout: Duration,
    /// Threads running handlers, at most (started as handlers need them,
    /// shared by every session):
    /// this many handlers can block at once; later waits queue, and are
    /// refused if [`handler_timeout`](Self::handler_timeout) passes first.
    pub handler_threads: usize,
    /// How long a running turn (from `assistant.turn_start` to
    /// `session.idle`) may go without an event before the client asks the
    /// CLI which of its waits are pending, and answers those it has not
    /// (a wait whose event was lost); again while it stays silent, each
    /// wait twice the previous one, up to 30 s
    /// ([`MAX_STALL_INTERVAL_MS`](copilot_core::limits::MAX_STALL_INTERVAL_MS)).
    /// `None`: only after a resume.
    pub stall_interval: Option<Duration>,
    /// How long the reader stays paused over a full backlog (events handed
    /// to subscribers and not yet taken, past
    /// [`MAX_BACKLOG_BYTES`](crate::MAX_BACKLOG_BYTES)) with nothing taken
    /// before it reads on all the same (an overrun, counted in
    /// [`Client::backlog`](crate::Client::backlog)):
    /// [`BACKLOG_STALL_MS`](crate::BACKLOG_STALL_MS) by default. Longer
    /// holds a slow consumer's CLI back longer; a stream kept and never
    /// read then holds every session of the connection that long.
    pub backlog_stall: Duration,
    /// When the CLI this client started (over stdio or TCP) exits, or the
    /// connection to a server ([`Client::connect`](crate::Client::connect))
    /// drops, while the client did not end it: start the CLI again, or
    /// connect again (after each wait of the core's `RECOVERY_BACKOFF_MS`,
    /// then give up), resume every open session with its handlers and
    /// `continuePendingWork`, and answer the waits the CLI lists, once.
    /// Calls in flight at the loss fail; a `send_and_wait` goes on to the
    /// turn's end. Each step is told to
    /// [`Client::on_recovery`](crate::Client::on_recovery). On by default
    /// for both: a server's sessions outlive a dropped connection, and a
    /// server that is gone costs the attempts' few seconds before the
    /// client ends with the cause.
    pub auto_restart: bool,
    /// Handlers of client-wide requests: those that carry no session id
    /// (`host.*`, `uiThread.run`, `installations.confirm`, ...). Set them
    /// with [`on_request`](Self::on_request).
    pub request_handlers: RequestHandlers,
    /// The inference request handler (experimental; the official SDKs'
    /// `requestHandler`): when set, the client registers as the CLI's
    /// inference provider (`llmInference.setProvider`) and the CLI's model
    /// requests (HTTP, and WebSocket through its `open_websocket`) go to it
    /// instead of the network. Set it with
    /// [`request_handler`](Self::request_handler).
    pub request_handler: Option<Arc<dyn CopilotRequestHandler>>,
    /// The started CLI's own OpenTelemetry export (off when `None`).
    pub telemetry: Option<TelemetryConfig>,
    /// The caller's trace context, passed on every open and send (the
    /// official SDKs' `onGetTraceContext`).
    pub trace_context: Option<TraceContextProvider>,
    /// How sessions default what the application leaves unset:
    /// [`ClientMode::CopilotCli`] (the CLI's defaults) or
    /// [`ClientMode::Empty`] (optional features off; a started CLI needs
    /// [`base_directory`](Self::base_directory), every session
    /// [`available_tools`](crate::SessionConfig::available_tools); the
    /// core's `EMPTY_MODE_DEFAULTS`).
    pub mode: ClientMode,
    /// The started CLI's state folder (its `COPILOT_HOME`); `None`: the
    /// CLI's own (`~/.copilot`).
    pub base_directory: Option<PathBuf>,
}

impl ClientOptions {
    /// Asks `provider` for the caller's trace context at each open and send
    /// ([`trace_context`](Self::trace_context)).
    pub fn trace_context_provider(mut self, provider: impl Fn() -> TraceContext + Send + Sync + 'static) -> Self {
        self.trace_context = Some(Arc::new(provider));
        self
    }

    /// Takes the caller's trace context at each open and send from the
    /// current `tracing` span (feature `opentelemetry`:
    /// [`TraceContext::from_current_span`]); within a `send_and_wait` that
    /// is its `copilot.turn` span (feature `tracing`).
    #[cfg(feature = "opentelemetry")]
    pub fn trace_context_from_current_span(self) -> Self {
        self.trace_context_provider(TraceContext::from_current_span)
    }

    /// Carries the CLI's model requests through `handler`
    /// ([`request_handler`](Self::request_handler)).
    pub fn request_handler(mut self, handler: impl CopilotRequestHandler + 'static) -> Self {
        self.request_handler = Some(Arc::new(handler));
        self
    }

    /// The inference state of a client with a request handler.
    pub(crate) fn inference(&self) -> Option<Arc<Inference>> {
        self.request_handler.as_ref().map(|h| Inference::new(Arc::clone(h), self.request_timeout))
    }

    /// Answers the client-wide request `method` with `handler` (see
    /// [`RequestHandlers`]); a request that names a session goes to that
    /// session's handlers instead
    /// ([`SessionConfig::on_request`](crate::SessionConfig::on_request)).
    pub fn on_request(mut self, method: impl Into<String>, handler: impl RequestHandler + 'static) -> Self {
        self.request_handlers.insert(method, Arc::new(handler));
        self
    }

    /// Answers the client-wide request `M` with typed params and result
    /// (feature `rpc-types`).
    #[cfg(feature = "rpc-types")]
    pub fn on_rpc<M: crate::rpc::RpcMethod + 'static>(
        self,
        handler: impl Fn(M::Params) -> std::result::Result<M::Result, String> + Send + Sync + 'static,
    ) -> Self
    where
        M::Params: serde::de::DeserializeOwned,
        M::Result: serde::Serialize,
    {
        self.on_request(M::NAME, crate::answering::typed::<M>(handler))
    }
}

/// Shown in place of a secret in `Debug` output.
const REDACTED: &str = "<redacted>";

impl std::fmt::Debug for ClientOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let secret = |t: &Option<String>| t.as_ref().map(|_| REDACTED);
        let env: Vec<(&OsString, &str)> = self.env.iter().map(|(k, _)| (k, REDACTED)).collect();
        f.debug_struct("ClientOptions")
            .field("cli_path", &self.cli_path)
            .field("install_if_missing", &self.install_if_missing)
            .field("install_dir", &self.install_dir)
            .field("transport", &self.transport)
            .field("log_level", &self.log_level)
            .field("auth_token", &secret(&self.auth_token))
            .field("connection_token", &secret(&self.connection_token))
            .field("extra_args", &self.extra_args)
            .field("env", &env)
            .field("cwd", &self.cwd)
            .field("startup_timeout", &self.startup_timeout)
            .field("request_timeout", &self.request_timeout)
            .field("shutdown_grace", &self.shutdown_grace)
            .field("handler_timeout", &self.handler_timeout)
            .field("handler_threads", &self.handler_threads)
            .field("stall_interval", &self.stall_interval)
            .field("backlog_stall", &self.backlog_stall)
            .field("auto_restart", &self.auto_restart)
            .field("request_handlers", &self.request_handlers)
            .field("request_handler", &self.request_handler.as_ref().map(|_| "<handler>"))
            .field("telemetry", &self.telemetry)
            .field("trace_context", &self.trace_context.as_ref().map(|_| "<provider>"))
            .field("mode", &self.mode)
            .field("base_directory", &self.base_directory)
            .finish()
    }
}

impl ClientOptions {
    /// Refuses the options that only start a CLI (the core's
    /// [`SPAWN_ONLY_OPTIONS`](copilot_core::SPAWN_ONLY_OPTIONS)) for a client
    /// that connects to one it did not start.
    pub(crate) fn check_not_spawning(&self) -> crate::Result<()> {
        for option in copilot_core::SPAWN_ONLY_OPTIONS {
            let given = match *option {
                "cliPath" => self.cli_path.is_some() || self.install_if_missing,
                "args" => !self.extra_args.is_empty(),
                "env" => !self.env.is_empty(),
                "cwd" => self.cwd.is_some(),
                "authToken" => self.auth_token.is_some(),
                "logLevel" => self.log_level != copilot_core::DEFAULT_LOG_LEVEL,
                "telemetry" => self.telemetry.is_some(),
                "baseDirectory" => self.base_directory.is_some(),
                other => unreachable!("the core's spawn-only option {other} has no field here"),
            };
            if given {
                return Err(crate::Error::Config(format!("{}{option}", copilot_core::SPAWN_ONLY_REFUSAL)));
            }
        }
        Ok(())
    }

    /// The variables the mode gives a started CLI, after the user's
    /// environment (the core's `BASE_DIRECTORY_ENV`, `EMPTY_MODE_ENV`);
    /// an empty-mode client without a state folder of its own is refused.
    pub(crate) fn mode_env(&self) -> crate::Result<Vec<(OsString, OsString)>> {
        let mut env = Vec::new();
        if let Some(dir) = &self.base_directory {
            env.push((copilot_core::BASE_DIRECTORY_ENV.into(), dir.into()));
        }
        if self.mode == ClientMode::Empty {
            if self.base_directory.is_none() {
                return Err(crate::Error::Config(copilot_core::EMPTY_MODE_NEEDS_BASE_DIRECTORY.into()));
            }
            env.extend(copilot_core::EMPTY_MODE_ENV.iter().map(|(k, v)| ((*k).into(), (*v).into())));
        }
        Ok(env)
    }

    pub(crate) fn deadlines(&self) -> Deadlines {
        Deadlines {
            request: self.request_timeout,
            grace: self.shutdown_grace,
            handler: self.handler_timeout,
            handler_threads: self.handler_threads.max(1),
            stall: self.stall_interval,
            backlog_stall: self.backlog_stall,
        }
    }
}

impl Default for ClientOptions {
    fn default() -> Self {
        ClientOptions {
            cli_path: None,
            install_if_missing: false,
            install_dir: None,
            transport: Transport::Stdio,
            log_level: copilot_core::DEFAULT_LOG_LEVEL.into(),
            auth_token: None,
            connection_token: None,
            extra_args: Vec::new(),
            env: Vec::new(),
            cwd: None,
            startup_timeout: Duration::from_millis(limits::DEFAULT_STARTUP_TIMEOUT_MS),
            request_timeout: DEFAULT_REQUEST_TIMEOUT,
            shutdown_grace: DEFAULT_SHUTDOWN_GRACE,
            handler_timeout: DEFAULT_HANDLER_TIMEOUT,
            handler_threads: DEFAULT_HANDLER_THREADS,
            stall_interval: Some(DEFAULT_STALL_INTERVAL),
            backlog_stall: Duration::from_millis(copilot_core::limits::BACKLOG_STALL_MS),
            auto_restart: true,
            request_handlers: RequestHandlers::default(),
            request_handler: None,
            telemetry: None,
            trace_context: None,
            mode: ClientMode::default(),
            base_directory: None,
        }
    }
}
