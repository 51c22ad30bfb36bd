//! The async [`Client`].

use std::future::poll_fn;
use std::io::{Read, Write};
use std::sync::Arc;
use std::task::Context;
use std::time::{Duration, Instant};

use copilot_core::{EngineStats, Stats};
use serde::Serialize;
use serde_json::{json, Value};

use super::call::{on_thread, request, until, Call};
use super::session::Session;
use super::streams::{queue_channel, LifecycleStream};
use crate::api::client_options::ClientOptions;
use crate::api::config::SessionConfig;
use crate::api::replies::{parse, read_delete, read_last_id, read_session_list};
use crate::api::replies::{AuthStatus, Pong, ServerInfo, SessionMetadata, Status};
use crate::delivery::{lifecycle_sink, SessionInner};
use crate::driver::{Completion, Connection, Waiter};
use crate::error::Result;
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

    /// The router's counters ([`crate::Client::stats`]).
    pub fn stats(&self) -> Stats {
        self.blocking().stats()
    }

    /// Frames that could not be parked ([`crate::Client::parked_overflow`]).
    pub fn parked_overflow(&self) -> u64 {
        self.blocking().parked_overflow()
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
        /// Completes the wait when the connection drops it (at its end).
        struct OnDrop(Arc<Completion<()>>);
        impl Drop for OnDrop {
            fn drop(&mut self) {
                self.0.complete(());
            }
        }
        let ended = Arc::new(Completion::default());
        let guard = OnDrop(Arc::clone(&ended));
        // Dropped by the connection when it ends; a wait given up on leaves
        // at the next notification.
        self.conn().subscribe_lifecycle_with(Box::new(move |_| Arc::strong_count(&guard.0) > 1));
        let ended = |cx: &mut Context<'_>| ended.poll_take(cx).map(drop);
        match timeout {
            None => poll_fn(ended).await,
            Some(t) => until(self.conn(), Instant::now() + t, ended).await?,
        }
        self.closed()
    }

    /// The process id of the CLI this client started, if it started one.
    pub fn cli_pid(&self) -> Option<u32> {
        self.blocking().cli_pid()
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
    fn conn(&self) -> &Arc<Connection> {
        self.client.conn()
    }

    fn deadline(&self) -> Instant {
        Instant::now() + self.timeout.unwrap_or(self.conn().deadlines.request)
    }

    async fn body<P: Serialize + ?Sized>(&self, method: &str, params: &P) -> Result<Vec<u8>> {
        request(self.conn(), method, params, self.deadline())?.await
    }

    /// `ping`.
    pub async fn ping(&self, message: Option<&str>) -> Result<Pong> {
        parse(&self.body("ping", &json!({ "message": message })).await?, "ping")
    }

    /// `status.get`.
    pub async fn status(&self) -> Result<Status> {
        parse(&self.body("status.get", &json!({})).await?, "status.get")
    }

    /// Calls any method this crate does not wrap, with JSON params, and
    /// returns the JSON result.
    pub async fn call(&self, method: &str, params: &Value) -> Result<Value> {
        parse(&self.body(method, params).await?, method)
    }

    /// `auth.getStatus`: whether the CLI has a Copilot login.
    pub async fn auth_status(&self) -> Result<AuthStatus> {
        parse(&self.body("auth.getStatus", &json!({})).await?, "auth.getStatus")
    }

    /// `session.list`.
    pub async fn list_sessions(&self) -> Result<Vec<SessionMetadata>> {
        read_session_list(&self.body("session.list", &json!({})).await?)
    }

    /// `session.delete`: removes a session's persisted state.
    pub async fn delete_session(&self, session_id: &str) -> Result<()> {
        read_delete(&self.body("session.delete", &json!({ "sessionId": session_id })).await?)
    }

    /// `session.getLastId`: the most recently updated session, if any.
    pub async fn last_session_id(&self) -> Result<Option<String>> {
        read_last_id(&self.body("session.getLastId", &json!({})).await?)
    }

    /// Creates a session; its slot is reserved before `session.create` is
    /// sent, so events that race the answer are delivered.
    pub async fn create_session(&self, config: SessionConfig) -> Result<Session> {
        self.open("session.create", config, None).await
    }

    /// Resumes a session by id, reserved before `session.resume` is sent.
    pub async fn resume_session(&self, session_id: &str, config: SessionConfig) -> Result<Session> {
        self.open("session.resume", config, Some(session_id.to_owned())).await
    }

    async fn open(&self, method: &str, config: SessionConfig, resume: Option<String>) -> Result<Session> {
        config.check(resume.is_some())?;
        let conn = self.conn();
        let resuming = resume.is_some();
        let id = match (resume, config.server_assigned_id) {
            (Some(id), _) => Some(id),
            (None, true) => None,
            (None, false) => Some(config.session_id.clone().unwrap_or_else(|| uuid::Uuid::new_v4().to_string())),
        };
        let params = config.to_params(id.as_deref(), resuming)?;
        let inner = SessionInner::new(id.as_deref(), config.answerer(), conn);
        let handle = conn.reserve(id.as_deref(), resuming, inner.clone())?;
        let target = inner.clone();
        // The reader completes the open in the engine and releases the slot
        // on any failure; dropping the call (or its timeout) releases it too.
        let call = Call::start(conn, method, &params, |reply| Waiter::Open { handle, target, reply }, self.deadline());
        let body = match call {
            Ok(call) => call.await,
            Err(e) => Err(e),
        };
        let body = match body {
            Ok(body) => body,
            Err(e) => {
                inner.close("the session could not be opened");
                return Err(e);
            }
        };
        let result: Value = parse(&body, method)?;
        let id = inner.name().unwrap_or_default();
        let session = Session { inner: crate::Session::new(inner, Arc::clone(conn), handle, id, &result) };
        // The core's steps after an open (registerInterest for the waits
        // the CLI asks only of clients that say they answer them).
        for (method, params) in config.follow_ups(session.id())? {
            self.body(method, &params).await?;
        }
        Ok(session)
    }
}
