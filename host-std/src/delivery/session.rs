//! A session's delivery: its event queue, event streams, callbacks and
//! waiters (the blocking `Session` API is `api/session.rs`).
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
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::{Duration, Instant};

use copilot_core::limits::keeps_for_first_subscriber;
use copilot_core::{turn_step, TurnStep, TURN_REPLY_UNLESS};

use super::event_channel::EventTx;
use super::inbox::{Batch, Inbox, InboxTx};
use super::open_canvases::OpenCanvases;
use super::queue::Queue;
use crate::driver::{Connection, Job, SessionSink};
use crate::error::{Error, Result};
use crate::events::{EventKind, SessionEvent};
use crate::pool::Pool;

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Events kept for a first subscriber that has yet to come, at most (the
/// core's limit; the rule is [`keeps_for_first_subscriber`]): the first
/// `MAX_KEPT_EVENTS` events, or `MAX_KEPT_BYTES` of their JSON, whichever
/// comes first, and none after the first left out, so a late subscriber
/// sees no gap. A whole turn (tens of events) fits many times over, so
/// subscribing right after `create_session` returns loses nothing; a
/// session used only through `send_and_wait` keeps memory flat. Events not
/// kept for the late subscriber are still delivered to every subscriber
/// present, and are counted in [`Session::stats`](crate::Session::stats).
pub const MAX_KEPT_EVENTS: usize = copilot_core::limits::MAX_KEPT_EVENTS;
/// See [`MAX_KEPT_EVENTS`].
pub const MAX_KEPT_BYTES: usize = copilot_core::limits::MAX_KEPT_BYTES;

pub(crate) enum Sink {
    /// An event stream, blocking or async: the same queue, polled.
    Stream(InboxTx),
    /// `send_and_wait`: fed after the callbacks have run on the same
    /// event, so that when it returns every handler has seen the turn.
    Waiter(EventTx),
    Callback(Arc<dyn Fn(&SessionEvent) + Send + Sync>),
}

impl Sink {
    /// Whether it takes whole batches of unparsed events (see `inbox`).
    fn takes_batches(&self) -> bool {
        match self {
            Sink::Stream(_) => true,
            Sink::Waiter(_) | Sink::Callback(_) => false,
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

/// A session's delivery counters ([`Session::stats`](crate::Session::stats)).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct SessionStats {
    /// Events handed to the subscribers present (or kept).
    pub events: u64,
    /// Events that arrived before any subscriber, past the bound
    /// ([`MAX_KEPT_EVENTS`], [`MAX_KEPT_BYTES`]) or after one that was past
    /// it, and so not kept for the first subscriber.
    pub not_kept: u64,
    /// Events whose JSON could not be read into a [`SessionEvent`].
    pub unreadable: u64,
}

/// Answers a wait of the agent for the session named by the second
/// argument (the session's handlers, run by the answering layer). Called on
/// the handler pool.
pub(crate) type Answerer = Arc<dyn Fn(Job, &str) + Send + Sync>;

/// What the session table stores for a session: shared by the reader (which
/// pushes events), the event pool and the `Session` handle.
pub(crate) struct SessionInner {
    me: Weak<SessionInner>,
    id: OnceLock<String>,
    /// Shared with the streams, which parse their events themselves.
    unreadable: Arc<std::sync::atomic::AtomicU64>,
    answer: Answerer,
    queue: Mutex<Queue>,
    subscribers: Mutex<Subscribers>,
    dispatchers: Arc<Pool>,
    workers: Arc<Pool>,
    /// As the CLI last said (the reader keeps them, in frame order).
    capabilities: Mutex<copilot_core::Capabilities>,
    /// The canvas instances open, as the CLI last said (kept by the reader).
    open_canvases: Mutex<OpenCanvases>,
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
        if let Some(held) = &mut q.held {
            held.push(event.to_vec());
            return;
        }
        q.push(event);
    }

    fn hold(&self) {
        lock(&self.queue).held.get_or_insert_with(Vec::new);
    }

    fn release_held(&self, gap: Vec<Vec<u8>>) {
        {
            // Under the queue's lock: no live event can come between.
            let q = &mut *lock(&self.queue);
            let held = q.held.take().unwrap_or_default();
            let from_log: Vec<Option<u64>> = gap.iter().map(|e| copilot_core::event_id_of(e)).collect();
            for event in &gap {
                q.push(event);
            }
            for event in &held {
                let id = copilot_core::event_id_of(event);
                if id.is_none() || !from_log.contains(&id) {
                    q.push(event);
                }
            }
        }
        self.flush();
    }

    fn flush(&self) {
        {
            // Only streams listen (blocking or async): the reader feeds
            // them itself, one hop fewer (a stream is a queue and a waker;
            // no user code runs, and nothing waits). Not while the event pool has
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
        let answer = Arc::clone(&self.answer);
        let session_id = self.name().unwrap_or_default();
        self.workers.submit(move || answer(job, &session_id));
    }

    fn close(&self, reason: &str) {
        self.push(|q| {
            q.close.get_or_insert_with(|| reason.to_owned());
        });
    }

    fn change_capabilities(&self, change: &mut dyn FnMut(&mut copilot_core::Capabilities)) {
        change(&mut lock(&self.capabilities));
    }

    fn change_open_canvases(&self, change: copilot_core::CanvasChange<'_>, first: bool) {
        lock(&self.open_canvases).change(change, first);
    }
}

impl SessionInner {
    /// A session of `conn`. `id` is `None` while the server has yet to name it.
    pub(crate) fn new(id: Option<&str>, answer: Answerer, conn: &Connection) -> Arc<SessionInner> {
        let inner = Arc::new_cyclic(|me| SessionInner {
            me: me.clone(),
            id: OnceLock::new(),
            unreadable: Arc::default(),
            answer,
            queue: Mutex::new(Queue::default()),
            subscribers: Mutex::new(Subscribers::default()),
            dispatchers: Arc::clone(&conn.dispatchers),
            workers: Arc::clone(&conn.workers),
            capabilities: Mutex::default(),
            open_canvases: Mutex::default(),
        });
        if let Some(id) = id {
            inner.named(id);
        }
        inner
    }

    /// The session's capabilities, as the CLI last said.
    pub(crate) fn capabilities(&self) -> copilot_core::Capabilities {
        *lock(&self.capabilities)
    }

    /// The canvas instances open, as the CLI last said.
    pub(crate) fn open_canvases(&self) -> Vec<serde_json::Value> {
        lock(&self.open_canvases).list()
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
        let mut waiters: Vec<EventTx> = Vec::new();
        let (event, size) = match event {
            Some((e, size)) => (Some(e), size),
            None => (None, 0),
        };
        {
            let mut subs = lock(&self.subscribers);
            if let Some(e) = &event {
                subs.delivered += 1;
                if !subs.claimed {
                    if keeps_for_first_subscriber(subs.kept.len(), subs.kept_bytes, subs.not_kept, size) {
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
                    Sink::Waiter(tx) => {
                        waiters.push(tx.clone());
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
        // A waiter is handed only the events that move its turn (the
        // core's turn rule): the deltas of a long turn do not pile up in
        // its queue, and it is woken only for what it reads.
        if let Some(e) = event.as_ref().filter(|e| Turn::moves(e)) {
            for tx in waiters {
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
            Sink::Waiter(_) | Sink::Callback(_) => true,
        };
        counts &= !kept;
        kept
    });
}

/// What `send_and_wait` (blocking and async) makes of a turn's events:
/// the core's rule ([`copilot_core::Turn`], [`turn_step`]), holding this
/// host's events; a `session.error` becomes [`Error::Session`].
#[derive(Default)]
pub(crate) struct Turn {
    rule: copilot_core::Turn<Arc<SessionEvent>>,
    outcome: Option<std::result::Result<Option<Arc<SessionEvent>>, Arc<SessionEvent>>>,
}

impl Turn {
    /// Whether `event` does anything to a turn (a reply, an error, the end).
    pub(crate) fn moves(event: &SessionEvent) -> bool {
        turn_step(event.event_type(), sub_agent(event)) != TurnStep::Other
    }

    /// Takes one event of the turn; `true` once the turn is over.
    pub(crate) fn see(&mut self, event: &Arc<SessionEvent>) -> bool {
        let step = turn_step(event.event_type(), sub_agent(event));
        self.outcome = self.rule.see(step, || Arc::clone(event));
        self.outcome.is_some()
    }

    /// The turn's result.
    pub(crate) fn finish(self) -> Result<Option<Arc<SessionEvent>>> {
        match self.outcome {
            Some(Ok(reply)) => Ok(reply),
            Some(Err(error)) => Err(session_error(&error)),
            None => Ok(None),
        }
    }
}

/// Whether the event's `data` has the member that marks a sub-agent's
/// message ([`TURN_REPLY_UNLESS`], not null).
fn sub_agent(event: &SessionEvent) -> bool {
    match &event.kind {
        EventKind::AssistantMessage(m) => m.parent_tool_call_id.is_some(),
        EventKind::Other { data, .. } => !data.get(TURN_REPLY_UNLESS).is_none_or(serde_json::Value::is_null),
        _ => false,
    }
}

/// The [`Error::Session`] of a turn's error event.
fn session_error(event: &SessionEvent) -> Error {
    match &event.kind {
        EventKind::SessionError(e) => Error::Session { error_type: e.error_type.clone(), message: e.message.clone() },
        other => {
            let text = |key: &str| match other {
                EventKind::Other { data, .. } => data.get(key).and_then(|v| v.as_str()).unwrap_or_default().to_owned(),
                _ => String::new(),
            };
            Error::Session { error_type: text("errorType"), message: text("message") }
        }
    }
}

/// A blocking iterator over a session's events. It never drops an event and
/// ends when the session is destroyed, dropped or disconnected.
pub struct EventStream {
    pub(crate) inbox: Arc<Inbox>,
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
