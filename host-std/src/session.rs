//! Sessions: the per-session event queue, event streams and callbacks, and
//! the blocking `Session` API.
//!
//! The reader thread appends an event's bytes to the session's queue
//! (unbounded: it never blocks and never drops); after each read, outside
//! the engine's lock, it flushes each session it fed: the queued events
//! leave as one batch, and a session is on the event pool once at a time,
//! so its events keep their order. When only blocking streams
//! listen, the reader hands the batch to each of them itself, under one
//! lock, unparsed (each stream's consumer parses its events, see `inbox`);
//! otherwise a pool thread delivers it: whole to async streams, or parsing
//! each event once for handlers and waiters. Waits of the agent go to the
//! handler pool.

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
use crate::handlers::SessionHandlers;
use crate::inbox::{Batch, Inbox, InboxTx};
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
    /// Room to make for the next batch (bytes, events): the size of the
    /// last one, up to [`KEEP_QUEUE_BYTES`].
    room: (usize, usize),
}

impl Queue {
    fn is_empty(&self) -> bool {
        self.ends.is_empty() && !self.wake && self.close.is_none()
    }

    /// Takes the events queued; the next batch starts with room for as many.
    fn take_batch(&mut self) -> Batch {
        self.room = (self.bytes.len().min(KEEP_QUEUE_BYTES), self.ends.len().min(KEEP_QUEUE_BYTES / 256));
        Batch { bytes: std::mem::take(&mut self.bytes), ends: std::mem::take(&mut self.ends) }
    }
}

/// The queue's buffers start each batch this large at most (the size of
/// the previous batch): a steady flow reuses its size without growing step
/// by step, and a burst's memory is given back once it has passed.
const KEEP_QUEUE_BYTES: usize = 1 << 20;

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
    Stream(InboxTx),
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

impl Sink {
    /// Whether it takes whole batches of unparsed events (see `inbox`).
    fn takes_batches(&self) -> bool {
        match self {
            Sink::Stream(_) => true,
            #[cfg(feature = "async")]
            Sink::Async { waiter, .. } => !waiter,
            Sink::Callback(_) | Sink::Waiter(_) => false,
        }
    }
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
    /// Events handed to the subscribers present (or kept).
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
    /// Shared with the streams, which parse their events themselves.
    unreadable: Arc<std::sync::atomic::AtomicU64>,
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
        let q = &mut *lock(&self.queue);
        if q.ends.capacity() == 0 {
            // Made by the reader, so a batch's memory stays in its
            // allocator arena however many threads deliver.
            q.bytes.reserve(q.room.0);
            q.ends.reserve(q.room.1);
        }
        q.bytes.extend_from_slice(event);
        let end = q.bytes.len();
        q.ends.push(end);
    }

    fn flush(&self) {
        {
            // Only blocking streams listen: the reader feeds them itself,
            // one hop fewer (a stream is a condition variable; no user
            // code runs, and nothing waits). Not while the event pool has
            // the session: the batch would overtake the one it delivers.
            let mut subs = lock(&self.subscribers);
            if subs.claimed && subs.closed.is_none() && subs.list.iter().all(|s| matches!(s.sink, Sink::Stream(_))) {
                let mut q = lock(&self.queue);
                if !q.scheduled && !q.wake && q.close.is_none() && !q.ends.is_empty() {
                    let batch = Arc::new(q.take_batch());
                    drop(q);
                    feed_streams(&mut subs, &batch);
                    return;
                }
            }
        }
        self.push(|_| {});
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
            unreadable: Arc::default(),
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

    /// A new, empty queue for one event stream of this session.
    pub(crate) fn inbox(&self) -> Arc<Inbox> {
        Inbox::new(self.id_str().to_owned(), Arc::clone(&self.unreadable))
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
                Sink::Stream(tx) => {
                    for e in owed {
                        tx.0.send(e);
                    }
                }
                Sink::Waiter(tx) => {
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
                    Sink::Stream(tx) => owed.into_iter().chain(event.clone()).all(|e| tx.0.send(e)),
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
        let (batch, wake, close) = {
            let mut q = lock(&self.queue);
            let batch = q.take_batch();
            (batch, std::mem::take(&mut q.wake), q.close.take())
        };
        if lock(&self.subscribers).closed.is_none() {
            self.deliver_batch(Arc::new(batch));
            if wake {
                self.deliver(None);
            }
            if let Some(reason) = close {
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

    /// Hands a batch to every subscriber: whole and under one lock when
    /// only streams listen (they parse the events themselves), else event
    /// by event, parsed once for all.
    fn deliver_batch(&self, batch: Arc<Batch>) {
        if batch.len() == 0 {
            return;
        }
        {
            let mut subs = lock(&self.subscribers);
            if subs.claimed && subs.list.iter().all(|s| s.sink.takes_batches()) {
                feed_streams(&mut subs, &batch);
                return;
            }
        }
        for i in 0..batch.len() {
            let bytes = batch.event(i);
            let event = SessionEvent::from_json(bytes).unwrap_or_else(|e| {
                // Whatever serde cannot read is still delivered, raw.
                self.unreadable.fetch_add(1, Ordering::Relaxed);
                log::warn!("session {}: an event serde cannot read is delivered raw: {e}", self.id_str());
                SessionEvent::raw(bytes)
            });
            self.deliver(Some((Arc::new(event), bytes.len())));
        }
    }
}

/// Hands a whole batch to every subscriber, each a stream that takes
/// batches (what is owed to it first).
fn feed_streams(subs: &mut Subscribers, batch: &Arc<Batch>) {
    subs.delivered += batch.len() as u64;
    // One stream counts the batch's unreadable events.
    let mut counts = true;
    subs.list.retain_mut(|s| {
        let owed = std::mem::take(&mut s.owed);
        // A receiver that is gone ends the subscription.
        let kept = match &s.sink {
            Sink::Stream(tx) => owed.into_iter().all(|e| tx.0.send(e)) && tx.0.send_batch(batch, counts),
            #[cfg(feature = "async")]
            Sink::Async { tx, .. } => owed.into_iter().all(|e| tx.send(e)) && tx.send_batch(batch, counts),
            Sink::Callback(_) | Sink::Waiter(_) => true,
        };
        counts &= !kept;
        kept
    });
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
    inbox: Arc<Inbox>,
}

impl EventStream {
    /// The next event, waiting at most `timeout`. `Ok(None)` means the
    /// stream ended.
    pub fn next_timeout(&self, timeout: Duration) -> Result<Option<Arc<SessionEvent>>> {
        self.inbox
            .recv(Some(Instant::now() + timeout))
            .map_err(|()| Error::Timeout { what: "the next event".into(), after: timeout })
    }

    /// The next event if one is already here.
    pub fn try_next(&self) -> Option<Arc<SessionEvent>> {
        self.inbox.try_recv()
    }
}

impl Iterator for EventStream {
    type Item = Arc<SessionEvent>;

    fn next(&mut self) -> Option<Self::Item> {
        self.inbox.recv(None).unwrap_or(None)
    }
}

impl Drop for EventStream {
    fn drop(&mut self) {
        self.inbox.receiver_gone();
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
        let params = send_params(&self.session.id, message)?;
        Ok(read_message_id(&self.call_until("session.send", &params, deadline)?))
    }

    /// See [`Session::execute_command`].
    pub fn execute_command(&self, name: &str, args: &str) -> Result<Option<String>> {
        let params = json!({ "sessionId": self.session.id, "commandName": name, "args": args });
        Ok(read_command_error(&self.call("session.commands.execute", &params)?))
    }

    /// See [`Session::call_raw`].
    pub fn call_raw(&self, method: &str, params: Value) -> Result<Value> {
        self.call(method, &raw_params(&self.session.id, method, params)?)
    }

    /// See [`Session::abort`].
    pub fn abort(&self) -> Result<()> {
        self.call("session.abort", &json!({ "sessionId": self.session.id })).map(drop)
    }

    /// See [`Session::messages`].
    pub fn messages(&self) -> Result<Vec<SessionEvent>> {
        read_messages(&self.call("session.getMessages", &json!({ "sessionId": self.session.id }))?)
    }

    fn call<P: Serialize + ?Sized>(&self, method: &str, params: &P) -> Result<Value> {
        self.call_until(method, params, self.deadline())
    }

    fn call_until<P: Serialize + ?Sized>(&self, method: &str, params: &P, deadline: Instant) -> Result<Value> {
        let body = self.session.conn.request_until(method, params, deadline)?;
        serde_json::from_slice(&body).map_err(|e| Error::Protocol(format!("unreadable {method} answer: {e}")))
    }
}

/// The params of `session.send` (blocking and async).
pub(crate) fn send_params(session_id: &str, message: MessageOptions) -> Result<Value> {
    let mut params = serde_json::to_value(message).map_err(|e| Error::Protocol(e.to_string()))?;
    params["sessionId"] = session_id.into();
    Ok(params)
}

/// The message id of a `session.send` answer.
pub(crate) fn read_message_id(result: &Value) -> String {
    result.get("messageId").and_then(Value::as_str).unwrap_or_default().to_owned()
}

/// The error text of a `session.commands.execute` answer, if any.
pub(crate) fn read_command_error(result: &Value) -> Option<String> {
    result.get("error").and_then(Value::as_str).map(String::from)
}

/// The params of a raw session call: `params` (an object, or null for
/// none) with `sessionId` added.
pub(crate) fn raw_params(session_id: &str, method: &str, params: Value) -> Result<Map<String, Value>> {
    let mut params = match params {
        Value::Object(map) => map,
        Value::Null => Map::new(),
        other => {
            return Err(Error::Config(format!(
                "the params of {method} must be a JSON object (sessionId is added to it), not {other}"
            )))
        }
    };
    params.insert("sessionId".into(), session_id.into());
    Ok(params)
}

/// The events of a `session.getMessages` answer.
pub(crate) fn read_messages(result: &Value) -> Result<Vec<SessionEvent>> {
    let events = result.get("events").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
    events
        .iter()
        .map(|e| {
            let bytes = serde_json::to_vec(e).map_err(|e| Error::Protocol(e.to_string()))?;
            SessionEvent::from_json(&bytes).map_err(|e| Error::Protocol(format!("unreadable event: {e}")))
        })
        .collect()
}

impl Drop for Session {
    fn drop(&mut self) {
        self.end("session handle dropped");
    }
}
