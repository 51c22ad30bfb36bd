//! The async API: the same [`Client`], [`Session`] and event stream as the
//! blocking API, with `async fn` calls and events as a
//! [`futures_core::Stream`].
//!
//! It is a layer over the same connection: the same reader pump, the same
//! engine and its deadlines (kept by the same timer thread), the same
//! per-session event queues and dispatchers, the same handler pool. A call
//! inserts its waiter in the engine as a blocking call does, but the waiter
//! is a slot whose waker the reader (or the timer, or the end of the
//! connection) wakes; no executor is required and none is named, so it runs
//! under tokio (either runtime), async-std, smol or a minimal `block_on`.
//! No executor thread ever blocks: sending only queues a frame for the
//! writer thread (if the outbox is full, the call fails at once with
//! [`Error::Timeout`] instead of waiting for room), and every answer and
//! event arrives through a waker. Starting a CLI (a process and a
//! handshake) and [`Client::stop`] run on a one-off thread that completes
//! their future.
//!
//! Handlers ([`SessionConfig::on_permission`], tools, ...) run on the
//! client's handler pool, never on the user's executor, under the engine's
//! handler deadline (past it the engine refuses and a late answer is not
//! sent). Async handlers ([`permission_handler`], [`tool`]) are futures the
//! pool thread drives with a small executor of its own: the library then
//! needs no spawn hook into the user's runtime and a slow handler never
//! holds up the user's tasks. A handler future that needs a runtime's
//! reactor (its timers, its sockets) spawns that work on the runtime and
//! awaits the join handle, which completes through a waker like any future.
//!
//! Cancel safety: dropping any future of this module is safe. A dropped
//! call's request is forgotten (a late answer is counted as unmatched); a
//! dropped [`Session::send_and_wait`] unsubscribes its waiter, and every
//! event still goes to the session's streams, so the session is used again
//! as if nothing happened.
//!
//! ```no_run
//! # async fn run() -> copilot_host::Result<()> {
//! use copilot_host::asynch::Client;
//! use copilot_host::{ClientOptions, SessionConfig};
//! use std::time::Duration;
//!
//! let client = Client::start(ClientOptions::default()).await?;
//! let session = client.create_session(SessionConfig::with_model("claude-sonnet-4.5")).await?;
//! if let Some(reply) = session.send_and_wait("What is 2 + 2?", Duration::from_secs(60)).await? {
//!     println!("{reply:?}");
//! }
//! client.stop().await?;
//! # Ok(())
//! # }
//! ```

use std::collections::VecDeque;
use std::future::{poll_fn, Future};
use std::io::{Read, Write};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::Instant;

use copilot_core::RequestId;
use serde::Serialize;
use serde_json::{json, Map, Value};

use crate::connection::{Completion, Connection, Reply, ReplyTx, Waiter};
use crate::error::{Error, Result};
use crate::events::SessionEvent;
use crate::handlers::{PermissionDecision, PermissionHandler, PermissionRequest, Tool, ToolInvocation, ToolResult};
use crate::session::{MessageOptions, SessionConfig, SessionInner, SessionStats, Sink, Subscription, Turn};
use crate::ClientOptions;

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

// -------------------------------------------------------------------------
// Events: an unbounded queue the dispatcher fills and a future drains.

#[derive(Default)]
struct QueueState {
    events: VecDeque<Arc<SessionEvent>>,
    /// The sender is gone: the stream ends after what is queued.
    ended: bool,
    /// The receiver is gone: the subscription ends at the next event.
    gone: bool,
    waker: Option<Waker>,
}

#[derive(Default)]
struct EventQueue {
    state: Mutex<QueueState>,
}

impl EventQueue {
    fn change(&self, f: impl FnOnce(&mut QueueState)) {
        let mut s = lock(&self.state);
        f(&mut s);
        let waker = s.waker.take();
        drop(s);
        if let Some(w) = waker {
            w.wake();
        }
    }
}

/// The dispatcher's end of an async subscription. Dropping the last clone
/// (the subscription ended) ends the stream.
pub(crate) struct EventTx {
    queue: Arc<EventQueue>,
    /// Shared by the clones: the last one dropped ends the stream.
    _end: Arc<EndOnDrop>,
}

struct EndOnDrop(Arc<EventQueue>);

impl Drop for EndOnDrop {
    fn drop(&mut self) {
        self.0.change(|s| s.ended = true);
    }
}

impl Clone for EventTx {
    fn clone(&self) -> Self {
        EventTx { queue: Arc::clone(&self.queue), _end: Arc::clone(&self._end) }
    }
}

impl EventTx {
    /// Queues `event` and wakes the reader; `false` once the receiver is gone.
    pub(crate) fn send(&self, event: Arc<SessionEvent>) -> bool {
        let mut gone = false;
        self.queue.change(|s| {
            gone = s.gone;
            if !gone {
                s.events.push_back(event);
            }
        });
        !gone
    }
}

fn event_channel() -> (EventTx, EventRx) {
    let queue = Arc::new(EventQueue::default());
    let end = Arc::new(EndOnDrop(Arc::clone(&queue)));
    (EventTx { queue: Arc::clone(&queue), _end: end }, EventRx { queue })
}

struct EventRx {
    queue: Arc<EventQueue>,
}

impl EventRx {
    fn poll_recv(&self, cx: &mut Context<'_>) -> Poll<Option<Arc<SessionEvent>>> {
        let mut s = lock(&self.queue.state);
        if let Some(e) = s.events.pop_front() {
            return Poll::Ready(Some(e));
        }
        if s.ended {
            return Poll::Ready(None);
        }
        match &mut s.waker {
            Some(w) if w.will_wake(cx.waker()) => {}
            w => *w = Some(cx.waker().clone()),
        }
        Poll::Pending
    }
}

impl Drop for EventRx {
    fn drop(&mut self) {
        let mut s = lock(&self.queue.state);
        s.gone = true;
        s.events.clear();
    }
}

/// An async stream of a session's events ([`Session::events`]). It never
/// drops an event and ends when the session is destroyed, dropped or
/// disconnected.
pub struct EventStream {
    rx: EventRx,
}

impl std::fmt::Debug for EventStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventStream").finish_non_exhaustive()
    }
}

impl EventStream {
    /// The next event; `None` once the stream ended. Cancel-safe: an event
    /// is taken only by the poll that returns it.
    pub async fn next(&mut self) -> Option<Arc<SessionEvent>> {
        poll_fn(|cx| self.rx.poll_recv(cx)).await
    }

    /// The next event if one is already here.
    pub fn try_next(&mut self) -> Option<Arc<SessionEvent>> {
        lock(&self.rx.queue.state).events.pop_front()
    }
}

impl futures_core::Stream for EventStream {
    type Item = Arc<SessionEvent>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.rx.poll_recv(cx)
    }
}

// -------------------------------------------------------------------------
// Calls: a request whose answer completes a slot.

/// One request in flight. Dropping it before its answer forgets the
/// request in the engine.
pub(crate) struct Call {
    conn: Arc<Connection>,
    slot: Arc<Completion<Reply>>,
    id: Option<RequestId>,
    method: String,
    started: Instant,
}

impl Call {
    /// Sends `method`; `waiter` is built around the call's slot.
    fn start<P: Serialize + ?Sized>(
        conn: &Arc<Connection>,
        method: &str,
        params: &P,
        waiter: impl FnOnce(ReplyTx) -> Waiter,
        deadline: Instant,
    ) -> Result<Call> {
        let slot = Arc::new(Completion::default());
        let started = Instant::now();
        let id = conn.send_request_async(method, params, waiter(ReplyTx::Async(Arc::clone(&slot))), deadline)?;
        Ok(Call { conn: Arc::clone(conn), slot, id: Some(id), method: method.to_owned(), started })
    }
}

impl Future for Call {
    type Output = Result<Vec<u8>>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let reply = match self.slot.poll_take(cx) {
            Poll::Pending => return Poll::Pending,
            Poll::Ready(reply) => reply,
        };
        self.id = None;
        Poll::Ready(match reply {
            Some(Err(Error::Timeout { .. })) => {
                Err(Error::Timeout { what: format!("`{}`", self.method), after: self.started.elapsed() })
            }
            Some(reply) => reply,
            None => Err(Error::Disconnected("the call was already answered".into())),
        })
    }
}

impl Drop for Call {
    fn drop(&mut self) {
        if let Some(id) = self.id.take() {
            if !self.slot.is_done() {
                self.conn.forget(id);
            }
        }
    }
}

pub(crate) fn request<P: Serialize + ?Sized>(
    conn: &Arc<Connection>,
    method: &str,
    params: &P,
    deadline: Instant,
) -> Result<Call> {
    Call::start(conn, method, params, Waiter::Reply, deadline)
}

fn parse<T: for<'de> serde::Deserialize<'de>>(body: &[u8], method: &str) -> Result<T> {
    serde_json::from_slice(body).map_err(|e| Error::Protocol(format!("unreadable {method} answer: {e}")))
}

/// Runs a blocking step (a process start, a handshake, a stop) on a one-off
/// thread whose end completes the future.
async fn on_thread<T: Send + 'static>(name: &str, f: impl FnOnce() -> Result<T> + Send + 'static) -> Result<T> {
    let slot: Arc<Completion<Result<T>>> = Arc::new(Completion::default());
    let done = Arc::clone(&slot);
    std::thread::Builder::new().name(name.to_owned()).spawn(move || done.complete(f())).map_err(Error::Io)?;
    poll_fn(|cx| slot.poll_take(cx))
        .await
        .unwrap_or_else(|| Err(Error::Disconnected("the start thread ended without an answer".into())))
}

// -------------------------------------------------------------------------
// Async handlers.

/// Drives `future` on this thread (a handler pool thread), parking it
/// between wakes.
fn drive<F: Future>(future: F) -> F::Output {
    struct Unpark(std::thread::Thread);
    impl std::task::Wake for Unpark {
        fn wake(self: Arc<Self>) {
            self.0.unpark();
        }
    }
    let waker = Waker::from(Arc::new(Unpark(std::thread::current())));
    let mut cx = Context::from_waker(&waker);
    let mut future = std::pin::pin!(future);
    loop {
        if let Poll::Ready(out) = future.as_mut().poll(&mut cx) {
            return out;
        }
        std::thread::park();
    }
}

/// A permission handler whose decision is a future (a web request, a
/// person asked over a socket): pass it to
/// [`SessionConfig::on_permission_shared`]. The future runs on the
/// handler pool under the engine's handler deadline.
pub fn permission_handler<F, Fut>(handler: F) -> Arc<dyn PermissionHandler>
where
    F: Fn(PermissionRequest) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = PermissionDecision>,
{
    Arc::new(move |request: &PermissionRequest| drive(handler(request.clone())))
}

/// A tool whose calls an async `handler` answers (as [`Tool::new`]); the
/// future runs on the handler pool under the engine's handler deadline.
pub fn tool<F, Fut, R>(name: impl Into<String>, description: impl Into<String>, parameters: Value, handler: F) -> Tool
where
    F: Fn(ToolInvocation) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = R>,
    R: Into<ToolResult>,
{
    Tool::new(name, description, parameters, move |call: &ToolInvocation| drive(handler(call.clone())))
}

// -------------------------------------------------------------------------
// The client.

/// An async client: [`crate::Client`]'s connection, awaited.
#[derive(Debug)]
pub struct Client {
    inner: crate::Client,
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

    /// The blocking client on the same connection, for the calls this
    /// module does not wrap (status, session listing, ...).
    pub fn blocking(&self) -> &crate::Client {
        &self.inner
    }

    fn deadline(&self) -> Instant {
        Instant::now() + self.inner.conn().deadlines.request
    }

    /// A call this crate does not wrap; its answer's `result`.
    pub async fn call(&self, method: &str, params: &Value) -> Result<Value> {
        let body = request(self.inner.conn(), method, params, self.deadline())?.await?;
        parse(&body, method)
    }

    /// Creates a session; its slot is reserved before `session.create` is
    /// sent, so events that race the answer are delivered.
    pub async fn create_session(&self, config: SessionConfig) -> Result<Session> {
        self.open("session.create", config, None).await
    }

    /// Resumes a session by id.
    pub async fn resume_session(&self, session_id: &str, config: SessionConfig) -> Result<Session> {
        self.open("session.resume", config, Some(session_id.to_owned())).await
    }

    async fn open(&self, method: &str, config: SessionConfig, resume: Option<String>) -> Result<Session> {
        config.check()?;
        let conn = self.inner.conn();
        let resuming = resume.is_some();
        let id = match (resume, config.server_assigned_id) {
            (Some(id), _) => Some(id),
            (None, true) => None,
            (None, false) => Some(config.session_id.clone().unwrap_or_else(|| uuid::Uuid::new_v4().to_string())),
        };
        let inner = SessionInner::new(id.as_deref(), config.handlers.clone(), conn);
        let handle = conn.reserve(id.as_deref(), resuming, inner.clone())?;
        let target = inner.clone();
        // The reader completes the open in the engine and releases the slot
        // on any failure; dropping the call (or its timeout) releases it too.
        let call = Call::start(
            conn,
            method,
            &config.to_params(id.as_deref()),
            |reply| Waiter::Open { handle, target, reply },
            self.deadline(),
        );
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
        if config.handlers.mcp_oauth.is_some() {
            let params = json!({ "sessionId": session.id(), "eventType": "mcp.oauth_required" });
            request(conn, "session.eventLog.registerInterest", &params, self.deadline())?.await?;
        }
        Ok(session)
    }

    /// Stops the client ([`crate::Client::stop`], bounded by
    /// [`ClientOptions::shutdown_grace`], on a one-off thread).
    pub async fn stop(self) -> Result<()> {
        let inner = self.inner;
        on_thread("copilot-stop", move || inner.stop()).await
    }
}

impl From<crate::Client> for Client {
    fn from(inner: crate::Client) -> Self {
        Client { inner }
    }
}

// -------------------------------------------------------------------------
// Sessions.

/// An open session, awaited. Dropping it detaches it, as dropping a
/// [`crate::Session`] does.
#[derive(Debug)]
pub struct Session {
    inner: crate::Session,
}

impl Session {
    /// The session id.
    pub fn id(&self) -> &str {
        self.inner.id()
    }

    /// Delivery counters ([`crate::Session::stats`]).
    pub fn stats(&self) -> SessionStats {
        self.inner.stats()
    }

    /// The blocking session, for what this module does not wrap (`on`).
    pub fn blocking(&self) -> &crate::Session {
        &self.inner
    }

    fn conn(&self) -> &Arc<Connection> {
        &self.inner.conn
    }

    fn deadline(&self) -> Instant {
        Instant::now() + self.conn().deadlines.request
    }

    async fn call<P: Serialize + ?Sized>(&self, method: &str, params: &P) -> Result<Value> {
        let body = request(self.conn(), method, params, self.deadline())?.await?;
        parse(&body, method)
    }

    /// Sends a prompt; returns the message id. Events of the turn follow.
    pub async fn send(&self, message: impl Into<MessageOptions>) -> Result<String> {
        let mut params = serde_json::to_value(message.into()).map_err(|e| Error::Protocol(e.to_string()))?;
        params["sessionId"] = self.id().into();
        let result = self.call("session.send", &params).await?;
        Ok(result.get("messageId").and_then(Value::as_str).unwrap_or_default().to_owned())
    }

    /// Sends a prompt and waits until the session is idle: the last
    /// `assistant.message` of the turn (`None` if none), or
    /// [`Error::Session`] for a `session.error`. `timeout` covers the whole
    /// call, the send included: past it the call returns
    /// [`Error::Timeout`] (the timer thread wakes it; no executor timer is
    /// needed). Dropping this future is safe too: the session stays usable
    /// and its streams lose nothing. When it returns, every handler of `on`
    /// has run on the turn's events.
    pub async fn send_and_wait(
        &self,
        message: impl Into<MessageOptions>,
        timeout: std::time::Duration,
    ) -> Result<Option<Arc<SessionEvent>>> {
        let deadline = Instant::now() + timeout;
        // Subscribe before sending so nothing of the turn can be missed.
        let (tx, rx) = event_channel();
        let id = self.inner.inner.subscribe(Sink::Async { tx, waiter: true }, false);
        let _unsubscribe = Subscription { session: Arc::downgrade(&self.inner.inner), id };
        let mut params = serde_json::to_value(message.into()).map_err(|e| Error::Protocol(e.to_string()))?;
        params["sessionId"] = self.id().into();
        request(self.conn(), "session.send", &params, deadline.min(self.deadline()))?.await?;
        let slot = Arc::new(Mutex::new(None::<Waker>));
        let mut armed = false;
        let mut turn = Turn::default();
        loop {
            let next = poll_fn(|cx| {
                if let Poll::Ready(event) = rx.poll_recv(cx) {
                    return Poll::Ready(Ok(event));
                }
                if Instant::now() >= deadline {
                    return Poll::Ready(Err(Error::Timeout { what: "session.idle".into(), after: timeout }));
                }
                *slot.lock().unwrap_or_else(|p| p.into_inner()) = Some(cx.waker().clone());
                if !armed {
                    armed = true;
                    self.conn().wake_at(deadline, Arc::clone(&slot));
                }
                Poll::Pending
            })
            .await?;
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

    /// Aborts the running turn (harmless when idle).
    pub async fn abort(&self) -> Result<()> {
        self.call("session.abort", &json!({ "sessionId": self.id() })).await.map(drop)
    }

    /// Calls a session method this crate does not wrap; `sessionId` is
    /// added to `params` (a JSON object, or null for none).
    pub async fn call_raw(&self, method: &str, params: Value) -> Result<Value> {
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

    /// The session's persisted events (`session.getMessages`).
    pub async fn messages(&self) -> Result<Vec<SessionEvent>> {
        let result = self.call("session.getMessages", &json!({ "sessionId": self.id() })).await?;
        let events = result.get("events").and_then(Value::as_array).cloned().unwrap_or_default();
        events
            .iter()
            .map(|e| {
                let bytes = serde_json::to_vec(e).map_err(|e| Error::Protocol(e.to_string()))?;
                SessionEvent::from_json(&bytes).map_err(|e| Error::Protocol(format!("unreadable event: {e}")))
            })
            .collect()
    }

    /// A stream of this session's events. The first subscriber (stream or
    /// handler) also receives every event that arrived before it.
    pub fn events(&self) -> EventStream {
        let (tx, rx) = event_channel();
        self.inner.inner.subscribe(Sink::Async { tx, waiter: false }, true);
        EventStream { rx }
    }

    /// Destroys the session in the CLI and ends its streams, waiting for
    /// the CLI at most [`ClientOptions::shutdown_grace`]; the session is
    /// released whatever the CLI does (or if this future is dropped).
    pub async fn destroy(self) -> Result<()> {
        let s = self.inner;
        s.conn.close_session(s.handle);
        let deadline = Instant::now() + s.conn.deadlines.grace;
        let result = match request(&s.conn, "session.destroy", &json!({ "sessionId": s.id() }), deadline) {
            Ok(call) => call.await,
            Err(e) => Err(e),
        };
        s.end("destroyed");
        result.map(drop)
    }
}
