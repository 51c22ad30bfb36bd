//! The async [`Client`].

use std::future::poll_fn;
use std::io::{Read, Write};
use std::sync::Arc;
use std::task::Context;
use std::time::{Duration, Instant};

use copilot_core::{ClientMode, EngineStats, Stats};
use serde_json::Value;

use super::session::Session;
use super::streams::{queue_channel, LifecycleStream};
use crate::api::client_options::ClientOptions;
use crate::api::config::SessionConfig;
use crate::api::ops::ClientOps;
use crate::api::replies::{AuthStatus, Pong, ServerInfo, SessionMetadata, Status};
use crate::delivery::lifecycle_sink;
use crate::driver::{Completion, Connection};
use crate::error::{Error, Result};
use crate::transport::CloseCause;

/// An async client: [`crate::Client`]'s connection, awaited.
#[derive(Debug)]
pub struct Client {
    /// Always there; taken only by `stop`, `force_stop` and `drop`.
    inner: Option<crate::Client>,
}

impl Client {
    /// Starts a CLI and connects to it ([`crate::Client::start`], on a
    /// one-off thread).
    pub async fn start(options: ClientOptions) -> Result<Client> {
        on_thread("copilot-start", move || crate::Client::start(options)).await.map(Client::from)
    }

    /// Connects to a CLI already serving TCP at `addr`
    /// ([`crate::Client::connect_with`], on a one-off thread).
    pub async fn connect(addr: std::net::SocketAddr, token: Option<String>, options: ClientOptions) -> Result<Client> {
        on_thread("copilot-start", move || crate::Client::connect_with(addr, token.as_deref(), &options))
            .await
            .map(Client::from)
    }

    /// Runs the client over any byte stream pair
    /// ([`crate::Client::from_streams_with`]; the handshake runs on a
    /// one-off thread).
    pub async fn from_streams(
        reader: impl Read + Send + 'static,
        writer: impl Write + Send + 'static,
        token: Option<String>,
        options: ClientOptions,
    ) -> Result<Client> {
        on_thread("copilot-start", move || crate::Client::from_streams_with(reader, writer, token.as_deref(), &options))
            .await
            .map(Client::from)
    }

    /// The blocking client on the same connection (its calls block the
    /// calling thread).
    pub fn blocking(&self) -> &crate::Client {
        self.inner.as_ref().expect("the client is there until it is stopped")
    }

    fn conn(&self) -> &Arc<Connection> {
        self.blocking().conn()
    }

    /// For a TCP connection: the CLI's address.
    pub fn peer_addr(&self) -> Option<std::net::SocketAddr> {
        self.blocking().peer_addr()
    }

    /// What the handshake learned.
    pub fn server_info(&self) -> &ServerInfo {
        self.blocking().server_info()
    }

    /// How this client's sessions default what the application leaves
    /// unset ([`crate::Client::mode`]).
    pub fn mode(&self) -> ClientMode {
        self.blocking().mode()
    }

    /// The router's counters ([`crate::Client::stats`]).
    pub fn stats(&self) -> Stats {
        self.blocking().stats()
    }

    /// Frames that could not be parked ([`crate::Client::parked_overflow`]).
    pub fn parked_overflow(&self) -> u64 {
        self.blocking().parked_overflow()
    }

    /// The events read and not yet taken by subscribers ([`crate::Client::backlog`]).
    pub fn backlog(&self) -> crate::BacklogStats {
        self.blocking().backlog()
    }

    /// The protocol engine's counters ([`crate::Client::engine_stats`]).
    pub fn engine_stats(&self) -> EngineStats {
        self.blocking().engine_stats()
    }

    /// Why the connection ended, or `None` while it is open.
    pub fn closed(&self) -> Option<CloseCause> {
        self.blocking().closed()
    }

    /// Waits until the connection ends (at most `timeout`, if given: the
    /// client's timer thread keeps it) and says why; `None` if it is still
    /// open at the timeout.
    pub async fn wait_closed(&self, timeout: Option<Duration>) -> Option<CloseCause> {
        let conn = self.conn();
        let closed = |cx: &mut Context<'_>| conn.poll_closed(cx);
        match timeout {
            None => Some(poll_fn(closed).await),
            Some(t) => conn.until(Instant::now() + t, closed).await,
        }
    }

    /// The process id of the CLI this client started, if it started one.
    pub fn cli_pid(&self) -> Option<u32> {
        self.blocking().cli_pid()
    }

    /// Calls `f` with each step of the recoveries to come
    /// ([`crate::Client::on_recovery`]).
    pub fn on_recovery(&self, f: impl Fn(&crate::RecoveryEvent) + Send + Sync + 'static) {
        self.blocking().on_recovery(f);
    }

    /// The calls of this client with their own `timeout` in place of
    /// [`ClientOptions::request_timeout`]:
    /// `client.with_timeout(Duration::from_secs(2)).ping(None).await`.
    pub fn with_timeout(&self, timeout: Duration) -> Calls<'_> {
        Calls { client: self, timeout: Some(timeout) }
    }

    fn calls(&self) -> Calls<'_> {
        Calls { client: self, timeout: None }
    }

    /// `ping`.
    pub async fn ping(&self, message: Option<&str>) -> Result<Pong> {
        self.calls().ping(message).await
    }

    /// `status.get`.
    pub async fn status(&self) -> Result<Status> {
        self.calls().status().await
    }

    /// Calls any method this crate does not wrap, with JSON params, and
    /// returns the JSON result.
    pub async fn call(&self, method: &str, params: &Value) -> Result<Value> {
        self.calls().call(method, params).await
    }

    /// `auth.getStatus`: whether the CLI has a Copilot login.
    pub async fn auth_status(&self) -> Result<AuthStatus> {
        self.calls().auth_status().await
    }

    /// `session.list`.
    pub async fn list_sessions(&self) -> Result<Vec<SessionMetadata>> {
        self.calls().list_sessions().await
    }

    /// `session.delete`: removes a session's persisted state.
    pub async fn delete_session(&self, session_id: &str) -> Result<()> {
        self.calls().delete_session(session_id).await
    }

    /// `session.getLastId`: the most recently updated session, if any.
    pub async fn last_session_id(&self) -> Result<Option<String>> {
        self.calls().last_session_id().await
    }

    /// Creates a session; its slot is reserved before `session.create` is
    /// sent, so events that race the answer are delivered.
    pub async fn create_session(&self, config: SessionConfig) -> Result<Session> {
        self.calls().create_session(config).await
    }

    /// Resumes a session by id, reserved before `session.resume` is sent.
    pub async fn resume_session(&self, session_id: &str, config: SessionConfig) -> Result<Session> {
        self.calls().resume_session(session_id, config).await
    }

    /// A stream of every `session.lifecycle` notification from now on.
    pub fn lifecycle_events(&self) -> LifecycleStream {
        let (tx, rx) = queue_channel();
        // Dropped (ending the stream) when the connection ends.
        self.conn().subscribe_lifecycle_with(lifecycle_sink(move |e| tx.send(e.clone())));
        LifecycleStream { rx }
    }

    /// Stops the client ([`crate::Client::stop`], bounded by
    /// [`ClientOptions::shutdown_grace`], on a one-off thread).
    pub async fn stop(self) -> Result<()> {
        let inner = self.take();
        on_thread("copilot-stop", move || inner.stop()).await
    }

    /// Stops at once ([`crate::Client::force_stop`], on a one-off thread:
    /// it may wait for the CLI's process to be reaped).
    pub async fn force_stop(self) {
        let inner = self.take();
        let _ = on_thread("copilot-stop", move || {
            inner.force_stop();
            Ok(())
        })
        .await;
    }
}

impl Client {
    fn take(mut self) -> crate::Client {
        self.inner.take().expect("the client is there until it is stopped")
    }
}

impl From<crate::Client> for Client {
    fn from(inner: crate::Client) -> Self {
        Client { inner: Some(inner) }
    }
}

impl Drop for Client {
    /// A client dropped without [`stop`](Client::stop) kills the CLI it
    /// started and reaps it: on a one-off thread, so as not to wait on the
    /// executor's.
    fn drop(&mut self) {
        let Some(inner) = self.inner.take() else { return };
        if inner.cli_pid().is_some() {
            // If no thread can be started, the client is dropped here.
            let _ = std::thread::Builder::new().name("copilot-drop".into()).spawn(move || drop(inner));
        }
    }
}

/// The calls of an async [`Client`] with a timeout of their own
/// ([`Client::with_timeout`]).
#[derive(Debug, Clone, Copy)]
pub struct Calls<'a> {
    client: &'a Client,
    timeout: Option<Duration>,
}

impl Calls<'_> {
    fn ops(&self) -> ClientOps<'_> {
        let blocking = self.client.blocking();
        ClientOps { conn: self.client.conn(), timeout: self.timeout, trace: blocking.trace(), mode: blocking.mode() }
    }

    /// `ping`.
    pub async fn ping(&self, message: Option<&str>) -> Result<Pong> {
        self.ops().ping(message).await
    }

    /// `status.get`.
    pub async fn status(&self) -> Result<Status> {
        self.ops().status().await
    }

    /// Calls any method this crate does not wrap, with JSON params, and
    /// returns the JSON result.
    pub async fn call(&self, method: &str, params: &Value) -> Result<Value> {
        self.ops().call(method, params).await
    }

    /// `auth.getStatus`: whether the CLI has a Copilot login.
    pub async fn auth_status(&self) -> Result<AuthStatus> {
        self.ops().auth_status().await
    }

    /// `session.list`.
    pub async fn list_sessions(&self) -> Result<Vec<SessionMetadata>> {
        self.ops().list_sessions().await
    }

    /// `session.delete`: removes a session's persisted state.
    pub async fn delete_session(&self, session_id: &str) -> Result<()> {
        self.ops().delete_session(session_id).await
    }

    /// `session.getLastId`: the most recently updated session, if any.
    pub async fn last_session_id(&self) -> Result<Option<String>> {
        self.ops().last_session_id().await
    }

    /// Creates a session; its slot is reserved before `session.create` is
    /// sent, so events that race the answer are delivered.
    pub async fn create_session(&self, config: SessionConfig) -> Result<Session> {
        Ok(Session { inner: self.ops().open(config, None).await? })
    }

    /// Resumes a session by id, reserved before `session.resume` is sent.
    pub async fn resume_session(&self, session_id: &str, config: SessionConfig) -> Result<Session> {
        Ok(Session { inner: self.ops().open(config, Some(session_id.to_owned())).await? })
    }
}

/// Runs a blocking step (a process start, a stop) on a one-off thread whose
/// end completes the future.
async fn on_thread<T: Send + 'static>(name: &str, f: impl FnOnce() -> Result<T> + Send + 'static) -> Result<T> {
    let slot: Arc<Completion<Result<T>>> = Arc::new(Completion::default());
    let done = Arc::clone(&slot);
    std::thread::Builder::new().name(name.to_owned()).spawn(move || done.complete(f())).map_err(Error::Io)?;
    poll_fn(|cx| slot.poll_take(cx))
        .await
        .unwrap_or_else(|| Err(Error::Disconnected("the start thread ended without an answer".into())))
}
