//! The async [`Session`].

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Serialize;
use serde_json::{json, Value};

use super::call::{request, until};
use super::streams::EventStream;
use crate::api::replies::parse;
use crate::api::session::{
    raw_params, read_command_error, read_message_id, read_messages, send_params, MessageOptions,
};
use crate::delivery::{event_channel, SessionStats, Sink, Subscription, Turn};
use crate::driver::Connection;
use crate::error::{Error, Result};
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
    /// [`Error::Session`] for a `session.error`. `timeout` covers the whole
    /// call, the send included: past it the call returns
    /// [`Error::Timeout`] (the timer thread wakes it; no executor timer is
    /// needed). Dropping this future is safe too: the session stays usable
    /// and its streams lose nothing. When it returns, every handler of
    /// [`on`](Self::on) has run on the turn's events.
    pub async fn send_and_wait(
        &self,
        message: impl Into<MessageOptions>,
        timeout: Duration,
    ) -> Result<Option<Arc<SessionEvent>>> {
        let deadline = Instant::now() + timeout;
        // Subscribe before sending so nothing of the turn can be missed.
        let (tx, rx) = event_channel(self.inner.inner.inbox());
        let id = self.inner.inner.subscribe(Sink::Async { tx, waiter: true }, false);
        let _unsubscribe = Subscription { session: Arc::downgrade(&self.inner.inner), id };
        let calls = self.calls();
        calls.send_until(message.into(), deadline.min(calls.deadline())).await?;
        let mut turn = Turn::default();
        loop {
            let Some(next) = until(self.conn(), deadline, |cx| rx.poll_recv(cx)).await else {
                return Err(Error::Timeout { what: "session.idle".into(), after: timeout });
            };
            let Some(event) = next else {
                let why = self.inner.inner.end_reason().unwrap_or_else(|| "its delivery ended".into());
                return Err(Error::Disconnected(format!("the session ended before it was idle: {why}")));
            };
            if turn.see(&event) {
                break;
            }
        }
        turn.finish()
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
        let (tx, rx) = event_channel(self.inner.inner.inbox());
        self.inner.inner.subscribe(Sink::Async { tx, waiter: false }, true);
        EventStream { rx }
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
        let s = self.inner;
        s.conn.close_session(s.handle);
        let result = match request(&s.conn, "session.destroy", &json!({ "sessionId": s.id() }), Instant::now() + grace)
        {
            Ok(call) => call.await,
            Err(e) => Err(e),
        };
        s.end("destroyed");
        result.map(drop)
    }
}

/// The calls of an async [`Session`] with a timeout of their own
/// ([`Session::with_timeout`]).
#[derive(Debug, Clone, Copy)]
pub struct SessionCalls<'a> {
    session: &'a Session,
    timeout: Option<Duration>,
}

impl SessionCalls<'_> {
    fn deadline(&self) -> Instant {
        Instant::now() + self.timeout.unwrap_or(self.session.conn().deadlines.request)
    }

    fn id(&self) -> &str {
        self.session.id()
    }

    async fn call_until<P: Serialize + ?Sized>(&self, method: &str, params: &P, deadline: Instant) -> Result<Value> {
        parse(&request(self.session.conn(), method, params, deadline)?.await?, method)
    }

    async fn call<P: Serialize + ?Sized>(&self, method: &str, params: &P) -> Result<Value> {
        self.call_until(method, params, self.deadline()).await
    }

    /// Sends a prompt; returns the message id.
    pub async fn send(&self, message: impl Into<MessageOptions>) -> Result<String> {
        self.send_until(message.into(), self.deadline()).await
    }

    async fn send_until(&self, message: MessageOptions, deadline: Instant) -> Result<String> {
        let params = send_params(self.id(), message)?;
        Ok(read_message_id(&self.call_until("session.send", &params, deadline).await?))
    }

    /// See [`Session::execute_command`].
    pub async fn execute_command(&self, name: &str, args: &str) -> Result<Option<String>> {
        let params = json!({ "sessionId": self.id(), "commandName": name, "args": args });
        Ok(read_command_error(&self.call("session.commands.execute", &params).await?))
    }

    /// See [`Session::abort`].
    pub async fn abort(&self) -> Result<()> {
        self.call("session.abort", &json!({ "sessionId": self.id() })).await.map(drop)
    }

    /// See [`Session::call_raw`].
    pub async fn call_raw(&self, method: &str, params: Value) -> Result<Value> {
        let params = raw_params(self.id(), method, params)?;
        self.call(method, &params).await
    }

    /// See [`Session::messages`].
    pub async fn messages(&self) -> Result<Vec<SessionEvent>> {
        read_messages(&self.call("session.getMessages", &json!({ "sessionId": self.id() })).await?)
    }
}
