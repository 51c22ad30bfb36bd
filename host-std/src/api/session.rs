//! The blocking [`Session`]: an open session's calls, and its events
//! through the delivery layer's queue. Its calls are written once as
//! futures ([`SessionOps`]): the async session awaits them and this one
//! waits on them ([`block_on`](crate::wait::block_on)), so the turn rule of
//! `send_and_wait` and every other call of a session exist here only.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::Poll;
use std::time::{Duration, Instant};

use copilot_core::SessionHandle;
use serde::Serialize;
use serde_json::{json, Map, Value};

use super::replies::parse;
use super::telemetry::{with_trace_context, TraceContextProvider};
use crate::delivery::{event_channel, EventStream, InboxTx, SessionInner, SessionStats, Sink, Subscription, Turn};
use crate::driver::Connection;
use crate::error::{Error, Result};
use crate::events::SessionEvent;
use crate::wait::block_on;

/// What to send: a prompt and optional attachments and mode.
#[derive(Debug, Clone, Default, Serialize)]
pub struct MessageOptions {
    /// The prompt.
    pub prompt: String,
    /// Attachments: files, directories, editor selections, blobs, ...
    /// ([`Attachment::file`](crate::rpc::Attachment::file) and friends).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub attachments: Vec<crate::rpc::Attachment>,
    /// `enqueue` (the default) or `immediate`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
}

impl From<&str> for MessageOptions {
    fn from(prompt: &str) -> Self {
        MessageOptions { prompt: prompt.to_owned(), ..Self::default() }
    }
}

impl From<String> for MessageOptions {
    fn from(prompt: String) -> Self {
        MessageOptions { prompt, ..Self::default() }
    }
}

/// An open session. Methods block until the CLI answers.
///
/// Dropping it without [`destroy`](Self::destroy) detaches it: its events
/// are no longer delivered here, and the CLI keeps the session (resume it
/// later).
pub struct Session {
    pub(crate) inner: Arc<SessionInner>,
    pub(crate) conn: Arc<Connection>,
    pub(crate) handle: SessionHandle,
    pub(crate) id: String,
    workspace_path: Option<PathBuf>,
    ended: AtomicBool,
    /// The caller's trace context, for every send.
    pub(crate) trace: Option<TraceContextProvider>,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session").field("id", &self.id).finish_non_exhaustive()
    }
}

impl Session {
    pub(crate) fn new(
        inner: Arc<SessionInner>,
        conn: Arc<Connection>,
        handle: SessionHandle,
        id: String,
        result: &Value,
    ) -> Self {
        let workspace_path = result.get("workspacePath").and_then(Value::as_str).map(PathBuf::from);
        Session { inner, conn, handle, id, workspace_path, ended: AtomicBool::new(false), trace: None }
    }

    /// The session id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Where the CLI keeps this session's state, if it said.
    pub fn workspace_path(&self) -> Option<&std::path::Path> {
        self.workspace_path.as_deref()
    }

    /// The calls of this session with their own `timeout` in place of
    /// [`ClientOptions::request_timeout`](crate::ClientOptions::request_timeout):
    /// `session.with_timeout(Duration::from_secs(2)).abort()`.
    pub fn with_timeout(&self, timeout: Duration) -> SessionCalls<'_> {
        SessionCalls { session: self, timeout: Some(timeout) }
    }

    fn calls(&self) -> SessionCalls<'_> {
        SessionCalls { session: self, timeout: None }
    }

    /// Sends a prompt; returns the message id. Events of the turn follow.
    pub fn send(&self, message: impl Into<MessageOptions>) -> Result<String> {
        self.calls().send(message)
    }

    /// Sends a prompt and waits until the session is idle. Returns the last
    /// `assistant.message` of the turn (`None` if there was none); a
    /// `session.error` during the turn is returned as [`Error::Session`](crate::Error::Session).
    /// `timeout` covers the whole call, the send included: a CLI that does
    /// not answer makes it return [`Error::Timeout`](crate::Error::Timeout) by then. When it
    /// returns, every handler of [`on`](Self::on) has run on the turn's
    /// events.
    pub fn send_and_wait(
        &self,
        message: impl Into<MessageOptions>,
        timeout: Duration,
    ) -> Result<Option<Arc<SessionEvent>>> {
        block_on(self.ops(None).send_and_wait(message.into(), timeout))
    }

    /// Runs a slash command declared with [`SessionConfig::command`](crate::SessionConfig::command) (or by
    /// another client): `session.commands.execute`. Returns the error text
    /// its handler reported, if any.
    pub fn execute_command(&self, name: &str, args: &str) -> Result<Option<String>> {
        self.calls().execute_command(name, args)
    }

    /// Calls a session method this crate does not wrap; `sessionId` is added
    /// to `params`, which must be a JSON object (or null for none).
    pub fn call_raw(&self, method: &str, params: Value) -> Result<Value> {
        self.calls().call_raw(method, params)
    }

    /// Aborts the running turn (harmless when idle).
    pub fn abort(&self) -> Result<()> {
        self.calls().abort()
    }

    /// The session's persisted events (`session.getMessages`).
    pub fn messages(&self) -> Result<Vec<SessionEvent>> {
        self.calls().messages()
    }

    /// Delivery counters: events delivered, events not kept for a late
    /// first subscriber (see [`MAX_KEPT_EVENTS`](crate::MAX_KEPT_EVENTS)), unreadable events.
    pub fn stats(&self) -> SessionStats {
        self.inner.stats()
    }

    /// A stream of this session's events. The first subscriber (stream or
    /// handler) also receives every event that arrived before it.
    pub fn events(&self) -> EventStream {
        let inbox = self.inner.inbox();
        self.inner.subscribe(Sink::Stream(InboxTx(Arc::clone(&inbox))), true);
        EventStream { inbox }
    }

    /// Calls `handler` for every event, on the session's dispatcher thread.
    /// The first subscriber also receives earlier events. A handler that
    /// panics is reported and stays subscribed.
    pub fn on(&self, handler: impl Fn(&SessionEvent) + Send + Sync + 'static) -> Subscription {
        let id = self.inner.subscribe(Sink::Callback(Arc::new(handler)), true);
        Subscription { session: Arc::downgrade(&self.inner), id }
    }

    /// Destroys the session in the CLI and ends its event stream. Waits
    /// for the CLI's answer at most
    /// [`ClientOptions::shutdown_grace`](crate::ClientOptions::shutdown_grace);
    /// the session is released here whatever the CLI does.
    pub fn destroy(self) -> Result<()> {
        let grace = self.conn.deadlines.grace;
        self.destroy_within(grace)
    }

    /// [`destroy`](Self::destroy), waiting for the CLI at most `grace`.
    pub fn destroy_within(self, grace: Duration) -> Result<()> {
        block_on(self.ops(None).destroy_within(grace))
    }

    /// This session's calls, as futures (the async API awaits them).
    pub(crate) fn ops(&self, timeout: Option<Duration>) -> SessionOps<'_> {
        SessionOps { session: self, timeout }
    }

    pub(crate) fn end(&self, reason: &str) {
        if !self.ended.swap(true, Ordering::SeqCst) {
            self.conn.release(self.handle);
            self.inner.close(reason);
        }
    }
}

/// The calls of a [`Session`] with a timeout of their own
/// ([`Session::with_timeout`]).
#[derive(Debug, Clone, Copy)]
pub struct SessionCalls<'a> {
    pub(super) session: &'a Session,
    pub(super) timeout: Option<Duration>,
}

impl SessionCalls<'_> {
    fn ops(&self) -> SessionOps<'_> {
        self.session.ops(self.timeout)
    }

    /// Sends a prompt; returns the message id.
    pub fn send(&self, message: impl Into<MessageOptions>) -> Result<String> {
        block_on(self.ops().send(message.into()))
    }

    /// See [`Session::execute_command`].
    pub fn execute_command(&self, name: &str, args: &str) -> Result<Option<String>> {
        block_on(self.ops().execute_command(name, args))
    }

    /// See [`Session::call_raw`].
    pub fn call_raw(&self, method: &str, params: Value) -> Result<Value> {
        block_on(self.ops().call_raw(method, params))
    }

    /// See [`Session::abort`].
    pub fn abort(&self) -> Result<()> {
        block_on(self.ops().abort())
    }

    /// See [`Session::messages`].
    pub fn messages(&self) -> Result<Vec<SessionEvent>> {
        block_on(self.ops().messages())
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        self.end("session handle dropped");
    }
}

/// A session's calls, with a timeout of their own or the connection's.
pub(crate) struct SessionOps<'a> {
    pub(crate) session: &'a Session,
    pub(crate) timeout: Option<Duration>,
}

impl SessionOps<'_> {
    fn deadline(&self) -> Instant {
        Instant::now() + self.timeout.unwrap_or(self.session.conn.deadlines.request)
    }

    fn id(&self) -> &str {
        self.session.id()
    }

    async fn call_until<P: Serialize + ?Sized>(&self, method: &str, params: &P, deadline: Instant) -> Result<Value> {
        parse(&self.session.conn.request(method, params, deadline)?.await?, method)
    }

    pub(super) async fn call<P: Serialize + ?Sized>(&self, method: &str, params: &P) -> Result<Value> {
        self.call_until(method, params, self.deadline()).await
    }

    pub(crate) async fn send(&self, message: MessageOptions) -> Result<String> {
        self.send_until(message, self.deadline()).await
    }

    async fn send_until(&self, message: MessageOptions, deadline: Instant) -> Result<String> {
        // A session that ended (destroyed, or refused at a recovery's
        // resume) is not sent to, as in the JS client.
        if let Some(why) = self.session.inner.ending() {
            return Err(Error::Disconnected(format!("session {} has ended: {why}", self.id())));
        }
        let mut params = serde_json::to_value(message).map_err(|e| Error::Protocol(e.to_string()))?;
        params["sessionId"] = self.id().into();
        let params = with_trace_context(self.session.trace.as_ref(), params);
        let result = self.call_until("session.send", &params, deadline).await?;
        Ok(result.get("messageId").and_then(Value::as_str).unwrap_or_default().to_owned())
    }

    /// Sends a prompt and waits until the session is idle, by the core's
    /// turn rule ([`Turn`]). `timeout` covers the whole call, the send
    /// included; the connection's timer ends the wait at the deadline.
    pub(crate) async fn send_and_wait(
        &self,
        message: MessageOptions,
        timeout: Duration,
    ) -> Result<Option<Arc<SessionEvent>>> {
        // The turn in a span of its own (feature `tracing`): the trace
        // context its send carries is this span's.
        #[cfg(feature = "tracing")]
        {
            use tracing::Instrument;
            let span = tracing::info_span!("copilot.turn", session_id = %self.session.id);
            self.turn(message, timeout).instrument(span).await
        }
        #[cfg(not(feature = "tracing"))]
        self.turn(message, timeout).await
    }

    /// [`send_and_wait`](Self::send_and_wait)'s turn.
    async fn turn(&self, message: MessageOptions, timeout: Duration) -> Result<Option<Arc<SessionEvent>>> {
        let started = Instant::now();
        let deadline = started + timeout;
        let inner = &self.session.inner;
        // Subscribe before sending so nothing of the turn can be missed.
        let (tx, rx) = event_channel(inner.inbox());
        let id = inner.subscribe(Sink::Waiter(tx), false);
        let _unsubscribe = Subscription { session: Arc::downgrade(inner), id };
        self.send_until(message, deadline.min(self.deadline())).await?;
        let mut turn = Turn::default();
        // One wait for the whole turn: the deadline is given to the timer
        // once, not again at each event read.
        let over = self.session.conn.until(deadline, |cx| loop {
            match rx.poll_recv(cx) {
                Poll::Ready(Some(event)) if turn.see(&event) => return Poll::Ready(true),
                Poll::Ready(Some(_)) => {}
                Poll::Ready(None) => return Poll::Ready(false),
                Poll::Pending => return Poll::Pending,
            }
        });
        match over.await {
            None => Err(Error::Timeout { what: "session.idle".into(), after: started.elapsed() }),
            Some(true) => turn.finish(),
            Some(false) => {
                let why = inner.end_reason().unwrap_or_else(|| "its delivery ended".into());
                Err(Error::Disconnected(format!("the session ended before it was idle: {why}")))
            }
        }
    }

    pub(crate) async fn execute_command(&self, name: &str, args: &str) -> Result<Option<String>> {
        let params = json!({ "sessionId": self.id(), "commandName": name, "args": args });
        let result = self.call("session.commands.execute", &params).await?;
        Ok(result.get("error").and_then(Value::as_str).map(String::from))
    }

    pub(crate) async fn abort(&self) -> Result<()> {
        self.call("session.abort", &json!({ "sessionId": self.id() })).await.map(drop)
    }

    /// `params` (an object, or null for none) with `sessionId` added.
    pub(crate) async fn call_raw(&self, method: &str, params: Value) -> Result<Value> {
        let mut params = match params {
            Value::Object(map) => map,
            Value::Null => Map::new(),
            other => {
                return Err(Error::Config(format!(
                    "the params of {method} must be a JSON object (sessionId is added to it), not {other}"
                )))
            }
        };
        params.insert("sessionId".into(), self.id().into());
        self.call(method, &params).await
    }

    pub(crate) async fn messages(&self) -> Result<Vec<SessionEvent>> {
        let result = self.call("session.getMessages", &json!({ "sessionId": self.id() })).await?;
        let events = result.get("events").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
        events
            .iter()
            .map(|e| {
                let bytes = serde_json::to_vec(e).map_err(|e| Error::Protocol(e.to_string()))?;
                SessionEvent::from_json(&bytes).map_err(|e| Error::Protocol(format!("unreadable event: {e}")))
            })
            .collect()
    }

    /// `session.destroy`, waiting for the CLI at most `grace`; the session
    /// is released whatever the CLI does (also when this future is dropped:
    /// the session's own drop releases it).
    pub(crate) async fn destroy_within(&self, grace: Duration) -> Result<()> {
        let s = self.session;
        s.conn.close_session(s.handle);
        let result = match s.conn.request("session.destroy", &json!({ "sessionId": s.id() }), Instant::now() + grace) {
            Ok(call) => call.await,
            Err(e) => Err(e),
        };
        s.end("destroyed");
        result.map(drop)
    }
}
