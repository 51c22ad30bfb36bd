//! A session's delivery: its event queue, event streams, callbacks and
//! waiters (the blocking `Session` API is `api/session.rs`).
//!
//! The reader thread appends an event's bytes to the session's queue
//! (unbounded: it never blocks and never drops), with the connection's
//! lock released; after each read it flushes each session it fed: the
//! queued events leave as one batch of bytes, the same for every
//! subscriber. The reader hands it to each stream (blocking or async)
//! itself, under one lock: a stream is a queue and a waker, no user code
//! runs and nothing waits. If callbacks or `send_and_wait` listen, it also
//! queues the batch for the event pool, where a session is once at a time,
//! so its events keep their order. Each event is parsed once, by whichever subscriber reads it first
//! (see `batch`). Events kept for a first subscriber are kept as bytes too.
//! Waits of the agent go to the handler pool.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::{Duration, Instant};

use copilot_core::limits::keeps_for_first_subscriber;

use super::batch::{Batch, Parser};
use super::event_channel::EventTx;
use super::inbox::{Inbox, InboxTx};
use super::open_canvases::OpenCanvases;
use super::queue::Queue;
use super::turn::Turn;
use crate::driver::{Backlog, Connection, Delivering, DeliveryFence, Job, SessionSink};
use crate::error::{Error, Result};
use crate::events::SessionEvent;
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
    Callback(Callback),
}

/// An event handler (`Session::on`).
type Callback = Arc<dyn Fn(&SessionEvent) + Send + Sync>;

/// An event kept for a first subscriber: event `.1` of batch `.0`.
type Kept = (Arc<Batch>, usize);

struct Subscriber {
    id: u64,
    sink: Sink,
    /// Events received before anyone subscribed, owed to this callback (a
    /// stream is handed them as it subscribes).
    owed: Vec<Kept>,
    /// Cleared as it unsubscribes: a callback the event pool holds for a
    /// batch is not called again.
    live: Arc<AtomicBool>,
}

#[derive(Default)]
struct Subscribers {
    next_id: u64,
    list: Vec<Subscriber>,
    /// Whether a user (not an internal waiter) has subscribed yet. Until
    /// then events are kept, so that subscribing late loses nothing.
    claimed: bool,
    kept: Vec<Kept>,
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
    /// The connection's count of bytes not yet taken by subscribers.
    backlog: Arc<Backlog>,
    /// The connection's batches on their way to callbacks and waiters.
    fence: Arc<DeliveryFence>,
    /// As the CLI last said (the reader keeps them, in frame order).
    capabilities: Mutex<copilot_core::Capabilities>,
    /// The canvas instances open, as the CLI last said (kept by the reader).
    open_canvases: Mutex<OpenCanvases>,
    /// Why the session ended, from the moment its end is decided (its
    /// delivery ends after the events already queued).
    ending: OnceLock<String>,
}

impl SessionSink for SessionInner {
    fn id(&self) -> Option<String> {
        self.name()
    }

    fn named(&self, id: &str) {
        let _ = self.id.set(id.to_owned());
    }

    fn push_event(&self, event: &[u8], event_type: Option<&str>) {
        let q = &mut *lock(&self.queue);
        if let Some(held) = &mut q.held {
            held.push(event.to_vec());
            return;
        }
        // A type with escapes (the CLI writes none) is not read here: it may.
        q.push(event, event_type.is_none_or(Turn::may_move));
    }

    fn hold(&self) {
        lock(&self.queue).held.get_or_insert_with(Vec::new);
    }

    fn release_held(&self, gap: Vec<Vec<u8>>) {
        {
            // Under the queue's lock: no live event can come between.
            let q = &mut *lock(&self.queue);
            let held = q.held.take().unwrap_or_default();
            let ids = |events: &[Vec<u8>]| -> Vec<Option<u64>> {
                events.iter().map(|e| copilot_core::event_id_of(e)).collect()
            };
            // In wire order, each event once (the core's merge). Their
            // types unread here: each may move a turn.
            for source in copilot_core::gap_delivery_order(&ids(&gap), &ids(&held)) {
                let event = match source {
                    copilot_core::GapEvent::Log(i) => &gap[i],
                    copilot_core::GapEvent::Held(i) => &held[i],
                };
                q.push(event, true);
            }
        }
        self.flush();
    }

    fn flush(&self) {
        let mut subs = lock(&self.subscribers);
        let mut q = lock(&self.queue);
        if q.ends.is_empty() {
            return;
        }
        if subs.closed.is_some() {
            // Nobody listens any more.
            q.take_batch(0);
            return;
        }
        let streams = subs.list.iter().filter(|s| matches!(s.sink, Sink::Stream(_))).count();
        let pooled = streams < subs.list.len();
        let readers = streams + usize::from(pooled) + usize::from(!subs.claimed);
        let batch = q.take_batch(u32::try_from(readers).unwrap_or(u32::MAX));
        // Counted while subscribers have it to read; events kept for a
        // first subscriber are bounded apart.
        let batch = Arc::new(if subs.claimed { batch.charged_to(&self.backlog) } else { batch });
        let schedule = pooled && !q.scheduled;
        if pooled {
            q.batches.push_back((Arc::clone(&batch), subs.next_id, self.fence.ticket()));
            q.scheduled = true;
        }
        drop(q);
        subs.delivered += batch.len() as u64;
        if !subs.claimed {
            self.keep(&mut subs, &batch);
        }
        // A receiver that is gone ends the subscription.
        subs.list.retain(|s| match &s.sink {
            Sink::Stream(tx) => tx.0.send_batch(&batch),
            Sink::Waiter(_) | Sink::Callback(_) => true,
        });
        drop(subs);
        if schedule {
            self.schedule();
        }
    }

    fn obligation(&self, job: Job) {
        let answer = Arc::clone(&self.answer);
        let session_id = self.name().unwrap_or_default();
        self.workers.submit(move || answer(job, &session_id));
    }

    fn close(&self, reason: &str) {
        let _ = self.ending.set(reason.to_owned());
        // What was read before the end is delivered before it.
        self.flush();
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
    pub(crate) fn new(id: Option<&str>, answer: Answerer, conn: &Arc<Connection>) -> Arc<SessionInner> {
        Self::with_pools(
            id,
            answer,
            Arc::clone(&conn.dispatchers),
            Arc::clone(&conn.workers),
            Arc::clone(&conn.backlog),
            conn.delivery_fence(),
        )
    }

    /// A session delivering on `dispatchers` and answering on `workers`.
    pub(super) fn with_pools(
        id: Option<&str>,
        answer: Answerer,
        dispatchers: Arc<Pool>,
        workers: Arc<Pool>,
        backlog: Arc<Backlog>,
        fence: Arc<DeliveryFence>,
    ) -> Arc<SessionInner> {
        let inner = Arc::new_cyclic(|me| SessionInner {
            me: me.clone(),
            id: OnceLock::new(),
            unreadable: Arc::default(),
            answer,
            queue: Mutex::new(Queue::default()),
            subscribers: Mutex::new(Subscribers::default()),
            dispatchers,
            workers,
            backlog,
            fence,
            capabilities: Mutex::default(),
            open_canvases: Mutex::default(),
            ending: OnceLock::new(),
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
        self.schedule();
    }

    /// Puts the session on the event pool (`scheduled` is set already).
    fn schedule(&self) {
        if let Some(me) = self.me.upgrade() {
            self.dispatchers.submit(move || me.dispatch());
        }
    }

    /// Keeps what it may of `batch` for a first subscriber (the core's rule).
    fn keep(&self, subs: &mut Subscribers, batch: &Arc<Batch>) {
        for i in 0..batch.len() {
            let size = batch.event(i).len();
            if keeps_for_first_subscriber(subs.kept.len(), subs.kept_bytes, subs.not_kept, size) {
                subs.kept.push((Arc::clone(batch), i));
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

    fn parser(&self) -> Parser<'_> {
        Parser { unreadable: &self.unreadable, session: self.id_str() }
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
        let owed = match &sink {
            // Under the lock, before any later batch: a stream is handed
            // what was kept for it now. So is a waiter (none is owed).
            Sink::Stream(tx) => {
                send_kept(&tx.0, owed);
                Vec::new()
            }
            Sink::Waiter(_) | Sink::Callback(_) => owed,
        };
        if subs.closed.is_some() {
            // Nothing will come any more: a stream ends at once (its sender
            // is dropped here), after what was owed to it.
            return id;
        }
        let has_owed = !owed.is_empty();
        subs.list.push(Subscriber { id, sink, owed, live: Arc::new(AtomicBool::new(true)) });
        drop(subs);
        if has_owed {
            self.push(|q| q.wake = true);
        }
        id
    }

    pub(crate) fn unsubscribe(&self, id: u64) {
        lock(&self.subscribers).list.retain(|s| {
            let keep = s.id != id;
            if !keep {
                s.live.store(false, Ordering::Release);
            }
            keep
        });
    }

    /// The callbacks and waiters present for a batch read up to subscriber
    /// `upto` (all for `u64::MAX`), with what each callback is owed.
    #[allow(clippy::type_complexity)]
    fn listeners(&self, upto: u64) -> (Vec<(Callback, Arc<AtomicBool>, Vec<Kept>)>, Vec<EventTx>) {
        let mut callbacks = Vec::new();
        let mut waiters = Vec::new();
        for s in lock(&self.subscribers).list.iter_mut().filter(|s| s.id <= upto) {
            match &s.sink {
                Sink::Callback(f) => callbacks.push((Arc::clone(f), Arc::clone(&s.live), std::mem::take(&mut s.owed))),
                Sink::Waiter(tx) => waiters.push(tx.clone()),
                Sink::Stream(_) => {}
            }
        }
        (callbacks, waiters)
    }

    /// Runs the callbacks present for `batch` (and what they are owed first)
    /// on each event, then hands `send_and_wait` the events that move its
    /// turn: when it returns, every handler has seen the turn. Callbacks
    /// run outside every lock, as they are user code.
    fn deliver_batch(&self, batch: Option<&Batch>, upto: u64) {
        let (callbacks, waiters) = self.listeners(upto);
        let parser = self.parser();
        for (f, live, owed) in &callbacks {
            for (kept, i) in owed {
                call(f, live, &kept.take(*i, &parser));
            }
        }
        let Some(batch) = batch else { return };
        if callbacks.is_empty() && waiters.is_empty() {
            return;
        }
        for i in 0..batch.len() {
            let may_move = !waiters.is_empty() && batch.may_move(i);
            if callbacks.is_empty() && !may_move {
                // Only waiters listen here, and the event's type says it
                // cannot move a turn: it is not parsed (for them).
                batch.skip(i);
                continue;
            }
            let event = batch.take(i, &parser);
            for (f, live, _) in &callbacks {
                call(f, live, &event);
            }
            // A waiter is handed only the events that move its turn (the
            // core's turn rule): the deltas of a long turn do not pile up in
            // its queue, and it is woken only for what it reads.
            if may_move && Turn::moves(&event) {
                for tx in &waiters {
                    tx.send(Arc::clone(&event));
                }
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

    /// Why the session ended, once its end is decided.
    pub(crate) fn ending(&self) -> Option<String> {
        self.ending.get().cloned()
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
        // A call a callback makes does not wait for this delivery.
        let _delivering = Delivering::start();
        let (batches, wake, close) = {
            let mut q = lock(&self.queue);
            (std::mem::take(&mut q.batches), std::mem::take(&mut q.wake), q.close.take())
        };
        if lock(&self.subscribers).closed.is_none() {
            // Each batch's ticket goes back as it is delivered.
            for (batch, upto, ticket) in batches {
                self.deliver_batch(Some(&batch), upto);
                drop(ticket);
            }
            if wake || close.is_some() {
                self.deliver_batch(None, u64::MAX);
            }
            if let Some(reason) = close {
                self.finish(reason);
            }
        }
        let mut q = lock(&self.queue);
        if q.is_empty() {
            q.scheduled = false;
        } else {
            drop(q);
            self.schedule();
        }
    }
}

/// Calls a callback unless it has unsubscribed; a panic is reported.
fn call(f: &Callback, live: &AtomicBool, event: &SessionEvent) {
    if live.load(Ordering::Acquire) && catch_unwind(AssertUnwindSafe(|| f(event))).is_err() {
        log::error!("an event handler panicked on {}; it stays subscribed", event.event_type());
    }
}

/// Hands a stream the events kept for it, a run of one batch at a time.
fn send_kept(tx: &Inbox, kept: Vec<Kept>) {
    let mut kept = kept.into_iter().peekable();
    while let Some((batch, first)) = kept.next() {
        let mut end = first + 1;
        while kept.next_if(|(b, i)| Arc::ptr_eq(b, &batch) && *i == end).is_some() {
            end += 1;
        }
        tx.send_events(&batch, first..end);
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
