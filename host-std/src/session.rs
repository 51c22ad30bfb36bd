//! Sessions: the per-session event queue, event streams and callbacks, and
//! the blocking `Session` API.
//!
//! The reader thread only appends an event's bytes to the session's queue
//! (unbounded: it never blocks and never drops) and queues the session on
//! the connection's event pool, once at a time, so its events keep their
//! order. A pool thread parses each event and hands it to every
//! subscriber. Waits of the agent go to the handler pool.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex, OnceLock, Weak};
use std::time::{Duration, Instant};

use copilot_core::SessionHandle;
use serde::Serialize;
use serde_json::{json, Map, Value};

use crate::connection::{Connection, Job, SessionSink};
use crate::error::{Error, Result};
use crate::events::{EventKind, SessionEvent};
use crate::handlers::{
    Command, ElicitationHandler, ExitPlanModeHandler, McpOAuthHandler, PermissionHandler, SessionHandlers, Tool,
    UserInputHandler,
};
use crate::pool::Pool;

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Events waiting for the dispatcher. Their bytes sit end to end in one
/// buffer, so queueing an event allocates nothing in the steady state, and
/// the dispatcher takes the whole batch in one swap.
#[derive(Default)]
struct Queue {
    bytes: Vec<u8>,
    /// End offset of each event in `bytes`.
    ends: Vec<usize>,
    /// A subscriber was added: deliver what was kept for it.
    wake: bool,
    /// The session ended; set after every event it follows was queued.
    close: Option<String>,
    /// The session is queued on (or being delivered by) the event pool.
    scheduled: bool,
}

impl Queue {
    fn is_empty(&self) -> bool {
        self.ends.is_empty() && !self.wake && self.close.is_none()
    }
}

/// Events kept for a first subscriber that has yet to come, at most: the
/// first `MAX_KEPT_EVENTS` events, or `MAX_KEPT_BYTES` of their JSON,
/// whichever comes first. A whole turn (tens of events) fits many times
/// over, so subscribing right after `create_session` returns loses nothing;
/// a session used only through `send_and_wait` keeps memory flat. Events
/// past the bound are not kept for the late subscriber (they are still
/// delivered to every subscriber present) and are counted in
/// [`Session::stats`].
pub const MAX_KEPT_EVENTS: usize = 1024;
/// See [`MAX_KEPT_EVENTS`].
pub const MAX_KEPT_BYTES: usize = 4 << 20;

pub(crate) enum Sink {
    Stream(mpsc::Sender<Arc<SessionEvent>>),
    /// An async stream, or (`waiter`) an async `send_and_wait`, fed after
    /// the callbacks as `Waiter` is.
    #[cfg(feature = "async")]
    Async {
        tx: crate::asynch::EventTx,
        waiter: bool,
    },
    Callback(Arc<dyn Fn(&SessionEvent) + Send + Sync>),
    /// `send_and_wait`: fed after the callbacks have run on the same event,
    /// so that when it returns every handler has seen the turn.
    Waiter(mpsc::Sender<Arc<SessionEvent>>),
}

struct Subscriber {
    id: u64,
    sink: Sink,
    /// Events received before anyone subscribed, owed to this subscriber.
    owed: Vec<Arc<SessionEvent>>,
}

#[derive(Default)]
struct Subscribers {
    next_id: u64,
    list: Vec<Subscriber>,
    /// Whether a user (not an internal waiter) has subscribed yet. Until
    /// then events are kept, so that subscribing late loses nothing.
    claimed: bool,
    kept: Vec<Arc<SessionEvent>>,
    /// The JSON size of the events in `kept`.
    kept_bytes: usize,
    /// Events past the bound, not kept for a late first subscriber.
    not_kept: u64,
    /// Events handed to the subscribers (or kept).
    delivered: u64,
    closed: Option<String>,
}

/// A session's delivery counters ([`Session::stats`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct SessionStats {
    /// Events parsed and handed to the subscribers present (or kept).
    pub events: u64,
    /// Events that arrived before any subscriber, past the bound
    /// ([`MAX_KEPT_EVENTS`], [`MAX_KEPT_BYTES`]), and so not kept for the
    /// first subscriber.
    pub not_kept: u64,
    /// Events whose JSON could not be read into a [`SessionEvent`].
    pub unreadable: u64,
}

/// What the session table stores for a session: shared by the reader (which
/// pushes events), the event pool and the `Session` handle.
pub(crate) struct SessionInner {
    me: Weak<SessionInner>,
    id: OnceLock<String>,
    unreadable: std::sync::atomic::AtomicU64,
    handlers: Arc<SessionHandlers>,
    queue: Mutex<Queue>,
    subscribers: Mutex<Subscribers>,
    dispatchers: Arc<Pool>,
    workers: Arc<Pool>,
}

impl SessionSink for SessionInner {
    fn id(&self) -> Option<String> {
        self.name()
    }

    fn named(&self, id: &str) {
        let _ = self.id.set(id.to_owned());
    }

    fn push_event(&self, event: &[u8]) {
        self.push(|q| {
            q.bytes.extend_from_slice(event);
            q.ends.push(q.bytes.len());
        });
    }

    fn obligation(&self, job: Job) {
        let handlers = Arc::clone(&self.handlers);
        let session_id = self.name().unwrap_or_default();
        self.workers.submit(move || crate::handlers::run(job, &handlers, &session_id));
    }

    fn close(&self, reason: &str) {
        self.push(|q| {
            q.close.get_or_insert_with(|| reason.to_owned());
        });
    }
}

impl SessionInner {
    /// A session of `conn`. `id` is `None` while the server has yet to name it.
    pub(crate) fn new(id: Option<&str>, handlers: SessionHandlers, conn: &Connection) -> Arc<SessionInner> {
        let inner = Arc::new_cyclic(|me| SessionInner {
            me: me.clone(),
            id: OnceLock::new(),
            unreadable: std::sync::atomic::AtomicU64::new(0),
            handlers: Arc::new(handlers),
            queue: Mutex::new(Queue::default()),
            subscribers: Mutex::new(Subscribers::default()),
            dispatchers: Arc::clone(&conn.dispatchers),
            workers: Arc::clone(&conn.workers),
        });
        if let Some(id) = id {
            inner.named(id);
        }
        inner
    }

    /// The session id, once known.
    pub(crate) fn name(&self) -> Option<String> {
        self.id.get().cloned()
    }

    fn id_str(&self) -> &str {
        self.id.get().map_or("(unnamed)", String::as_str)
    }

    /// Ends delivery (streams end after what is queued).
    pub(crate) fn close(&self, reason: &str) {
        SessionSink::close(self, reason);
    }

    fn push(&self, change: impl FnOnce(&mut Queue)) {
        let mut q = lock(&self.queue);
        change(&mut q);
        if q.scheduled || q.is_empty() {
            return;
        }
        q.scheduled = true;
        drop(q);
        if let Some(me) = self.me.upgrade() {
            self.dispatchers.submit(move || me.dispatch());
        }
    }

    pub(crate) fn subscribe(&self, sink: Sink, user: bool) -> u64 {
        let mut subs = lock(&self.subscribers);
        subs.next_id += 1;
        let id = subs.next_id;
        let owed = if user && !subs.claimed {
            subs.claimed = true;
            subs.kept_bytes = 0;
            std::mem::take(&mut subs.kept)
        } else {
            Vec::new()
        };
        let has_owed = !owed.is_empty();
        if subs.closed.is_some() {
            // Nothing will come any more: a stream ends at once (its sender
            // is dropped here), after what was owed to it.
            match &sink {
                Sink::Stream(tx) | Sink::Waiter(tx) => {
                    for e in owed {
                        let _ = tx.send(e);
                    }
                }
                #[cfg(feature = "async")]
                Sink::Async { tx, .. } => {
                    for e in owed {
                        tx.send(e);
                    }
                }
                Sink::Callback(_) => {}
            }
            return id;
        }
        subs.list.push(Subscriber { id, sink, owed });
        drop(subs);
        if has_owed {
            self.push(|q| q.wake = true);
        }
        id
    }

    pub(crate) fn unsubscribe(&self, id: u64) {
        lock(&self.subscribers).list.retain(|s| s.id != id);
    }

    /// Hands one event (or, for `None`, only what is owed) to every
    /// subscriber. Streams are fed under the lock (a send never blocks);
    /// callbacks run after it is released, as they are user code.
    fn deliver(&self, event: Option<(Arc<SessionEvent>, usize)>) {
        type Callback = Arc<dyn Fn(&SessionEvent) + Send + Sync>;
        let mut callbacks: Vec<(Callback, Vec<Arc<SessionEvent>>)> = Vec::new();
        let mut waiters: Vec<mpsc::Sender<Arc<SessionEvent>>> = Vec::new();
        #[cfg(feature = "async")]
        let mut async_waiters: Vec<crate::asynch::EventTx> = Vec::new();
        let (event, size) = match event {
            Some((e, size)) => (Some(e), size),
            None => (None, 0),
        };
        {
            let mut subs = lock(&self.subscribers);
            if let Some(e) = &event {
                subs.delivered += 1;
                if !subs.claimed {
                    if subs.kept.len() < MAX_KEPT_EVENTS && subs.kept_bytes + size <= MAX_KEPT_BYTES {
                        subs.kept.push(Arc::clone(e));
                        subs.kept_bytes += size;
                    } else {
                        if subs.not_kept == 0 {
                            log::warn!(
                                "session {}: nobody has subscribed and {} events are kept; later ones are not kept \
                                 for a first subscriber (counted in Session::stats)",
                                self.id_str(),
                                subs.kept.len()
                            );
                        }
                        subs.not_kept += 1;
                    }
                }
            }
            subs.list.retain_mut(|s| {
                let owed = std::mem::take(&mut s.owed);
                match &s.sink {
                    // A dropped receiver ends the subscription.
                    Sink::Stream(tx) => owed.into_iter().chain(event.clone()).all(|e| tx.send(e).is_ok()),
                    Sink::Callback(f) => {
                        callbacks.push((Arc::clone(f), owed));
                        true
                    }
                    // Never owed anything: it is not a user's subscriber.
                    Sink::Waiter(tx) => {
                        waiters.push(tx.clone());
                        true
                    }
                    #[cfg(feature = "async")]
                    Sink::Async { tx, waiter: false } => owed.into_iter().chain(event.clone()).all(|e| tx.send(e)),
                    #[cfg(feature = "async")]
                    Sink::Async { tx, waiter: true } => {
                        async_waiters.push(tx.clone());
                        true
                    }
                }
            });
        }
        for (f, owed) in callbacks {
            for e in owed.iter().chain(event.iter()) {
                if catch_unwind(AssertUnwindSafe(|| f(e))).is_err() {
                    log::error!("an event handler panicked on {}; it stays subscribed", e.event_type());
                }
            }
        }
        if let Some(e) = &event {
            for tx in waiters {
                // A waiter that gave up unsubscribes itself.
                let _ = tx.send(Arc::clone(e));
            }
            #[cfg(feature = "async")]
            for tx in async_waiters {
                tx.send(Arc::clone(e));
            }
        }
    }

    pub(crate) fn stats(&self) -> SessionStats {
        let subs = lock(&self.subscribers);
        SessionStats {
            events: subs.delivered,
            not_kept: subs.not_kept,
            unreadable: self.unreadable.load(Ordering::Relaxed),
        }
    }

    /// Why delivery ended, once it has.
    pub(crate) fn end_reason(&self) -> Option<String> {
        lock(&self.subscribers).closed.clone()
    }

    fn finish(&self, reason: String) {
        let mut subs = lock(&self.subscribers);
        subs.closed = Some(reason);
        // Dropping the senders ends every stream.
        subs.list.clear();
    }
}

impl SessionInner {
    /// Delivers what is queued, on the event pool; queues the session again
    /// if more came meanwhile, so one busy session does not hold a thread.
    fn dispatch(self: Arc<Self>) {
        let mut batch = {
            let mut q = lock(&self.queue);
            let mut batch = Queue::default();
            std::mem::swap(&mut *q, &mut batch);
            q.scheduled = true;
            batch
        };
        if lock(&self.subscribers).closed.is_none() {
            let mut start = 0;
            for &end in &batch.ends {
                let bytes = &batch.bytes[start..end];
                let event = SessionEvent::from_json(bytes).unwrap_or_else(|e| {
                    // Whatever serde cannot read is still delivered, raw.
                    self.unreadable.fetch_add(1, Ordering::Relaxed);
                    log::warn!("session {}: an event serde cannot read is delivered raw: {e}", self.id_str());
                    SessionEvent::raw(bytes)
                });
                self.deliver(Some((Arc::new(event), end - start)));
                start = end;
            }
            if std::mem::take(&mut batch.wake) {
                self.deliver(None);
            }
            if let Some(reason) = batch.close.take() {
                self.deliver(None);
                self.finish(reason);
            }
        }
        let mut q = lock(&self.queue);
        if q.is_empty() {
            q.scheduled = false;
        } else {
            drop(q);
            let me = Arc::clone(&self);
            self.dispatchers.submit(move || me.dispatch());
        }
    }
}

/// What `send_and_wait` (blocking and async) makes of a turn's events: the
/// last top-level `assistant.message`, or the `session.error` it had.
#[derive(Default)]
pub(crate) struct Turn {
    last: Option<Arc<SessionEvent>>,
    error: Option<Error>,
}

impl Turn {
    /// Takes one event of the turn; `true` once the session is idle.
    pub(crate) fn see(&mut self, event: &Arc<SessionEvent>) -> bool {
        match &event.kind {
            EventKind::AssistantMessage(m) if m.parent_tool_call_id.is_none() => self.last = Some(Arc::clone(event)),
            EventKind::SessionError(e) => {
                self.error = Some(Error::Session { error_type: e.error_type.clone(), message: e.message.clone() })
            }
            EventKind::SessionIdle(_) => return true,
            _ => {}
        }
        false
    }

    /// The turn's result.
    pub(crate) fn finish(self) -> Result<Option<Arc<SessionEvent>>> {
        match self.error {
            Some(e) => Err(e),
            None => Ok(self.last),
        }
    }
}

/// A blocking iterator over a session's events. It never drops an event and
/// ends when the session is destroyed, dropped or disconnected.
pub struct EventStream {
    rx: mpsc::Receiver<Arc<SessionEvent>>,
}

impl EventStream {
    /// The next event, waiting at most `timeout`. `Ok(None)` means the
    /// stream ended.
    pub fn next_timeout(&self, timeout: Duration) -> Result<Option<Arc<SessionEvent>>> {
        match self.rx.recv_timeout(timeout) {
            Ok(e) => Ok(Some(e)),
            Err(mpsc::RecvTimeoutError::Disconnected) => Ok(None),
            Err(mpsc::RecvTimeoutError::Timeout) => {
                Err(Error::Timeout { what: "the next event".into(), after: timeout })
            }
        }
    }

    /// The next event if one is already here.
    pub fn try_next(&self) -> Option<Arc<SessionEvent>> {
        self.rx.try_recv().ok()
    }
}

impl Iterator for EventStream {
    type Item = Arc<SessionEvent>;

    fn next(&mut self) -> Option<Self::Item> {
        self.rx.recv().ok()
    }
}

/// Keeps an event handler registered; dropping it unsubscribes.
#[must_use = "dropping the subscription unsubscribes the handler"]
pub struct Subscription {
    pub(crate) session: Weak<SessionInner>,
    pub(crate) id: u64,
}

impl Drop for Subscription {
    fn drop(&mut self) {
        if let Some(s) = self.session.upgrade() {
            s.unsubscribe(self.id);
        }
    }
}

/// Options of `session.create` and `session.resume`.
#[derive(Debug, Clone, Default)]
pub struct SessionConfig {
    /// The session id to use. `None`: a fresh UUID v4 chosen by the client,
    /// so that the session is known before the CLI answers.
    pub session_id: Option<String>,
    /// Send no id and let the CLI name the session. Frames for unknown
    /// sessions are then held until the answer names it.
    pub server_assigned_id: bool,
    /// The model, such as `claude-sonnet-4.5`. Pass it: without it the CLI
    /// picks its own default.
    pub model: Option<String>,
    /// The directory tools run in.
    pub working_directory: Option<PathBuf>,
    /// Deliver `assistant.message_delta` events as the reply streams.
    pub streaming: bool,
    /// A name shown by `session.list`.
    pub client_name: Option<String>,
    /// Any other `session.create` parameter, passed through as is.
    pub extra: Map<String, Value>,
    /// What the session answers the agent's requests with.
    pub handlers: SessionHandlers,
}

impl SessionConfig {
    /// A config for `model`.
    pub fn with_model(model: impl Into<String>) -> Self {
        SessionConfig { model: Some(model.into()), ..Self::default() }
    }

    /// Answers permission prompts with `handler` (and asks the CLI for
    /// prompts: without a handler it denies every tool that needs one).
    pub fn on_permission(mut self, handler: impl PermissionHandler + 'static) -> Self {
        self.handlers.permission = Some(Arc::new(handler));
        self
    }

    /// Answers permission prompts with a shared handler such as
    /// [`approve_all`](crate::approve_all).
    pub fn on_permission_shared(mut self, handler: Arc<dyn PermissionHandler>) -> Self {
        self.handlers.permission = Some(handler);
        self
    }

    /// Offers `tool` to the model; this client runs it.
    pub fn tool(mut self, tool: Tool) -> Self {
        self.handlers.tools.push(tool);
        self
    }

    /// Answers the agent's questions to the user (adds the `ask_user` tool).
    pub fn on_user_input(mut self, handler: impl UserInputHandler + 'static) -> Self {
        self.handlers.user_input = Some(Arc::new(handler));
        self
    }

    /// Answers elicitations (forms and URLs MCP servers ask for).
    pub fn on_elicitation(mut self, handler: impl ElicitationHandler + 'static) -> Self {
        self.handlers.elicitation = Some(Arc::new(handler));
        self
    }

    /// Provides OAuth tokens to MCP servers that need them.
    pub fn on_mcp_oauth(mut self, handler: impl McpOAuthHandler + 'static) -> Self {
        self.handlers.mcp_oauth = Some(Arc::new(handler));
        self
    }

    /// Answers requests to leave plan mode.
    pub fn on_exit_plan_mode(mut self, handler: impl ExitPlanModeHandler + 'static) -> Self {
        self.handlers.exit_plan_mode = Some(Arc::new(handler));
        self
    }

    /// Declares a slash command this client runs.
    pub fn command(mut self, command: Command) -> Self {
        self.handlers.commands.push(command);
        self
    }

    /// Refuses configurations that would hang: prompts asked for with nobody
    /// to answer them.
    pub(crate) fn check(&self) -> Result<()> {
        if self.extra.get("requestPermission") == Some(&Value::Bool(true)) && self.handlers.permission.is_none() {
            return Err(Error::Config(
                "requestPermission is set but no permission handler is: the first tool call would wait forever; \
                 add one with SessionConfig::on_permission"
                    .into(),
            ));
        }
        Ok(())
    }

    pub(crate) fn to_params(&self, id: Option<&str>) -> Value {
        let mut p = self.extra.clone();
        let h = &self.handlers;
        if h.permission.is_some() {
            p.insert("requestPermission".into(), true.into());
        }
        if !h.tools.is_empty() {
            p.insert("tools".into(), h.tools.iter().map(Tool::definition).collect::<Vec<_>>().into());
        }
        if h.user_input.is_some() {
            p.insert("requestUserInput".into(), true.into());
        }
        if h.elicitation.is_some() {
            p.insert("requestElicitation".into(), true.into());
        }
        if h.exit_plan_mode.is_some() {
            p.insert("requestExitPlanMode".into(), true.into());
        }
        if !h.commands.is_empty() {
            let commands: Vec<Value> =
                h.commands.iter().map(|c| json!({ "name": c.name, "description": c.description })).collect();
            p.insert("commands".into(), commands.into());
        }
        if let Some(id) = id {
            p.insert("sessionId".into(), id.into());
        }
        if let Some(m) = &self.model {
            p.insert("model".into(), m.clone().into());
        }
        if let Some(d) = &self.working_directory {
            p.insert("workingDirectory".into(), d.to_string_lossy().into_owned().into());
        }
        p.insert("streaming".into(), self.streaming.into());
        if let Some(n) = &self.client_name {
            p.insert("clientName".into(), n.clone().into());
        }
        Value::Object(p)
    }
}

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
        Session { inner, conn, handle, id, workspace_path, ended: AtomicBool::new(false) }
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
    /// `session.error` during the turn is returned as [`Error::Session`].
    /// `timeout` covers the whole call, the send included: a CLI that does
    /// not answer makes it return [`Error::Timeout`] by then. When it
    /// returns, every handler of [`on`](Self::on) has run on the turn's
    /// events.
    pub fn send_and_wait(
        &self,
        message: impl Into<MessageOptions>,
        timeout: Duration,
    ) -> Result<Option<Arc<SessionEvent>>> {
        let started = Instant::now();
        let deadline = started + timeout;
        // Subscribe before sending so nothing of the turn can be missed.
        let (tx, rx) = mpsc::channel();
        let id = self.inner.subscribe(Sink::Waiter(tx), false);
        let _unsubscribe = Subscription { session: Arc::downgrade(&self.inner), id };
        self.calls().send_until(message.into(), deadline)?;
        let mut turn = Turn::default();
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let event = match rx.recv_timeout(left) {
                Ok(e) => e,
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    return Err(Error::Timeout { what: "session.idle".into(), after: started.elapsed() })
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    let why = self.inner.end_reason().unwrap_or_else(|| "its delivery ended".into());
                    return Err(Error::Disconnected(format!("the session ended before it was idle: {why}")));
                }
            };
            if turn.see(&event) {
                break;
            }
        }
        turn.finish()
    }

    /// Runs a slash command declared with [`SessionConfig::command`] (or by
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
    /// first subscriber (see [`MAX_KEPT_EVENTS`]), unreadable events.
    pub fn stats(&self) -> SessionStats {
        self.inner.stats()
    }

    /// A stream of this session's events. The first subscriber (stream or
    /// handler) also receives every event that arrived before it.
    pub fn events(&self) -> EventStream {
        let (tx, rx) = mpsc::channel();
        self.inner.subscribe(Sink::Stream(tx), true);
        EventStream { rx }
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
        self.conn.close_session(self.handle);
        let result = self.conn.request("session.destroy", &json!({ "sessionId": self.id }), Some(grace));
        self.end("destroyed");
        result.map(drop)
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
    session: &'a Session,
    timeout: Option<Duration>,
}

impl SessionCalls<'_> {
    fn deadline(&self) -> Instant {
        Instant::now() + self.timeout.unwrap_or(self.session.conn.deadlines.request)
    }

    /// Sends a prompt; returns the message id.
    pub fn send(&self, message: impl Into<MessageOptions>) -> Result<String> {
        self.send_until(message.into(), self.deadline())
    }

    fn send_until(&self, message: MessageOptions, deadline: Instant) -> Result<String> {
        let mut params = serde_json::to_value(&message).map_err(|e| Error::Protocol(e.to_string()))?;
        params["sessionId"] = self.session.id.clone().into();
        let result = self.call_until("session.send", &params, deadline)?;
        Ok(result.get("messageId").and_then(Value::as_str).unwrap_or_default().to_owned())
    }

    /// See [`Session::execute_command`].
    pub fn execute_command(&self, name: &str, args: &str) -> Result<Option<String>> {
        let params = json!({ "sessionId": self.session.id, "commandName": name, "args": args });
        let result = self.call("session.commands.execute", &params)?;
        Ok(result.get("error").and_then(Value::as_str).map(String::from))
    }

    /// See [`Session::call_raw`].
    pub fn call_raw(&self, method: &str, params: Value) -> Result<Value> {
        let mut params = match params {
            Value::Object(map) => map,
            Value::Null => Map::new(),
            other => {
                return Err(Error::Config(format!(
                    "the params of {method} must be a JSON object (sessionId is added to it), not {other}"
                )))
            }
        };
        params.insert("sessionId".into(), self.session.id.clone().into());
        self.call(method, &params)
    }

    /// See [`Session::abort`].
    pub fn abort(&self) -> Result<()> {
        self.call("session.abort", &json!({ "sessionId": self.session.id })).map(drop)
    }

    /// See [`Session::messages`].
    pub fn messages(&self) -> Result<Vec<SessionEvent>> {
        let result = self.call("session.getMessages", &json!({ "sessionId": self.session.id }))?;
        let events = result.get("events").and_then(Value::as_array).cloned().unwrap_or_default();
        events
            .iter()
            .map(|e| {
                let bytes = serde_json::to_vec(e).map_err(|e| Error::Protocol(e.to_string()))?;
                SessionEvent::from_json(&bytes).map_err(|e| Error::Protocol(format!("unreadable event: {e}")))
            })
            .collect()
    }

    fn call<P: Serialize + ?Sized>(&self, method: &str, params: &P) -> Result<Value> {
        self.call_until(method, params, self.deadline())
    }

    fn call_until<P: Serialize + ?Sized>(&self, method: &str, params: &P, deadline: Instant) -> Result<Value> {
        let body = self.session.conn.request_until(method, params, deadline)?;
        serde_json::from_slice(&body).map_err(|e| Error::Protocol(format!("unreadable {method} answer: {e}")))
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        self.end("session handle dropped");
    }
}
