//! The async [`Session`].

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use super::streams::EventStream;
use super::ui::SessionUi;
use crate::api::session::MessageOptions;
use crate::api::session::SessionOps;
use crate::delivery::{EventRx, InboxTx, SessionStats, Sink, Subscription};
use crate::driver::Connection;
use crate::error::Result;
use crate::events::SessionEvent;

/// An open session, awaited. Dropping it detaches it, as dropping a
/// [`crate::Session`] does.
#[derive(Debug)]
pub struct Session {
    pub(super) inner: crate::Session,
}

impl Session {
    /// The session id.
    pub fn id(&self) -> &str {
        self.inner.id()
    }

    /// Where the CLI keeps this session's state, if it said.
    pub fn workspace_path(&self) -> Option<&std::path::Path> {
        self.inner.workspace_path()
    }

    /// Delivery counters ([`crate::Session::stats`]).
    pub fn stats(&self) -> SessionStats {
        self.inner.stats()
    }

    /// What the CLI says this session can do, as it last said
    /// ([`crate::Session::capabilities`]).
    pub fn capabilities(&self) -> crate::SessionCapabilities {
        self.inner.capabilities()
    }

    /// The canvas instances open in this session
    /// ([`crate::Session::open_canvases`]).
    pub fn open_canvases(&self) -> Vec<serde_json::Value> {
        self.inner.open_canvases()
    }

    /// The session's UI calls (confirm, select, input, elicitation), which
    /// need [`capabilities`](Self::capabilities)`().ui.elicitation`.
    pub fn ui(&self) -> SessionUi<'_> {
        self.calls().ui()
    }

    /// The blocking session on the same connection (its calls block the
    /// calling thread).
    pub fn blocking(&self) -> &crate::Session {
        &self.inner
    }

    fn conn(&self) -> &Arc<Connection> {
        &self.inner.conn
    }

    /// The calls of this session with their own `timeout` in place of
    /// [`ClientOptions::request_timeout`](crate::ClientOptions::request_timeout):
    /// `session.with_timeout(Duration::from_secs(2)).abort().await`.
    pub fn with_timeout(&self, timeout: Duration) -> SessionCalls<'_> {
        SessionCalls { session: self, timeout: Some(timeout) }
    }

    fn calls(&self) -> SessionCalls<'_> {
        SessionCalls { session: self, timeout: None }
    }

    /// Sends a prompt; returns the message id. Events of the turn follow.
    pub async fn send(&self, message: impl Into<MessageOptions>) -> Result<String> {
        self.calls().send(message).await
    }

    /// Sends a prompt and waits until the session is idle: the last
    /// `assistant.message` of the turn (`None` if none), or
    /// [`Error::Session`](crate::Error::Session) for a `session.error`. `timeout` covers the whole
    /// call, the send included: past it the call returns
    /// [`Error::Timeout`](crate::Error::Timeout) (the timer thread wakes it; no executor timer is
    /// needed). Dropping this future is safe too: the session stays usable
    /// and its streams lose nothing. When it returns, every handler of
    /// [`on`](Self::on) has run on the turn's events.
    pub async fn send_and_wait(
        &self,
        message: impl Into<MessageOptions>,
        timeout: Duration,
    ) -> Result<Option<Arc<SessionEvent>>> {
        self.inner.ops(None).send_and_wait(message.into(), timeout).await
    }

    /// Runs a slash command declared with [`SessionConfig::command`](crate::SessionConfig::command) (or by
    /// another client): `session.commands.execute`. Returns the error text
    /// its handler reported, if any.
    pub async fn execute_command(&self, name: &str, args: &str) -> Result<Option<String>> {
        self.calls().execute_command(name, args).await
    }

    /// Aborts the running turn (harmless when idle).
    pub async fn abort(&self) -> Result<()> {
        self.calls().abort().await
    }

    /// Calls a session method this crate does not wrap; `sessionId` is
    /// added to `params` (a JSON object, or null for none).
    pub async fn call_raw(&self, method: &str, params: Value) -> Result<Value> {
        self.calls().call_raw(method, params).await
    }

    /// The session's persisted events (`session.getMessages`).
    pub async fn messages(&self) -> Result<Vec<SessionEvent>> {
        self.calls().messages().await
    }

    /// A stream of this session's events. The first subscriber (stream or
    /// handler) also receives every event that arrived before it.
    pub fn events(&self) -> EventStream {
        let inbox = self.inner.inner.inbox();
        self.inner.inner.subscribe(Sink::Stream(InboxTx(Arc::clone(&inbox))), true);
        EventStream { rx: EventRx { inbox } }
    }

    /// Calls `handler` for every event, on the session's dispatcher thread
    /// (never on the executor), as [`crate::Session::on`] does; dropping
    /// the subscription unsubscribes. The first subscriber also receives
    /// earlier events. For async work per event, read [`events`](Self::events).
    pub fn on(&self, handler: impl Fn(&SessionEvent) + Send + Sync + 'static) -> Subscription {
        self.inner.on(handler)
    }

    /// Destroys the session in the CLI and ends its streams, waiting for
    /// the CLI at most [`ClientOptions::shutdown_grace`](crate::ClientOptions::shutdown_grace); the session is
    /// released whatever the CLI does (or if this future is dropped).
    pub async fn destroy(self) -> Result<()> {
        let grace = self.conn().deadlines.grace;
        self.destroy_within(grace).await
    }

    /// [`destroy`](Self::destroy), waiting for the CLI at most `grace`.
    pub async fn destroy_within(self, grace: Duration) -> Result<()> {
        self.inner.ops(None).destroy_within(grace).await
    }
}

/// The calls of an async [`Session`] with a timeout of their own
/// ([`Session::with_timeout`]).
#[derive(Debug, Clone, Copy)]
pub struct SessionCalls<'a> {
    session: &'a Session,
    timeout: Option<Duration>,
}

impl<'a> SessionCalls<'a> {
    fn ops(&self) -> SessionOps<'_> {
        self.session.inner.ops(self.timeout)
    }

    /// See [`Session::ui`]; each call waits at most this timeout.
    pub fn ui(&self) -> SessionUi<'a> {
        SessionUi { session: &self.session.inner, timeout: self.timeout }
    }

    /// Sends a prompt; returns the message id.
    pub async fn send(&self, message: impl Into<MessageOptions>) -> Result<String> {
        self.ops().send(message.into()).await
    }

    /// See [`Session::execute_command`].
    pub async fn execute_command(&self, name: &str, args: &str) -> Result<Option<String>> {
        self.ops().execute_command(name, args).await
    }

    /// See [`Session::abort`].
    pub async fn abort(&self) -> Result<()> {
        self.ops().abort().await
    }

    /// See [`Session::call_raw`].
    pub async fn call_raw(&self, method: &str, params: Value) -> Result<Value> {
        self.ops().call_raw(method, params).await
    }

    /// See [`Session::messages`].
    pub async fn messages(&self) -> Result<Vec<SessionEvent>> {
        self.ops().messages().await
    }
}
