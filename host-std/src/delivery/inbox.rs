//! One stream subscriber's queue of events, shared by the blocking and the
//! async event streams.
//!
//! The reader (or the event pool) hands it whole batches of raw event JSON
//! (as the reader queued them, one allocation per batch, shared by every
//! stream of the session) and the stream's own consumer parses each event
//! when it takes it. So an event waits as its ~300 bytes of JSON rather than as a parsed
//! `SessionEvent` (over 1.5 KB), the parsing runs on the consumer's thread
//! beside the reader, and the consumer is woken once per batch, only when
//! it sleeps, rather than once per event. A batch's memory is given back
//! when the last stream has read past it.

use std::collections::VecDeque;
use std::future::poll_fn;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::Instant;

use crate::events::SessionEvent;
use crate::wait::block_on_until;

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Events as they arrived: their JSON end to end, and where each ends.
#[derive(Default)]
pub(crate) struct Batch {
    pub(crate) bytes: Vec<u8>,
    /// End offset of each event in `bytes`.
    pub(crate) ends: Vec<usize>,
}

impl Batch {
    /// How many events.
    pub(crate) fn len(&self) -> usize {
        self.ends.len()
    }

    /// The JSON of event `i`.
    pub(crate) fn event(&self, i: usize) -> &[u8] {
        let start = if i == 0 { 0 } else { self.ends[i - 1] };
        &self.bytes[start..self.ends[i]]
    }
}

enum Item {
    /// An event parsed already (one kept for a late subscriber, or one of
    /// a session that also has callbacks).
    Parsed(Arc<SessionEvent>),
    /// The events of a batch from `next` on; `counts`: this stream counts
    /// the unreadable ones (one stream per batch does, so each is counted once).
    Raw { batch: Arc<Batch>, next: usize, counts: bool },
}

#[derive(Default)]
struct State {
    items: VecDeque<Item>,
    /// The sender is gone: the stream ends after what is queued.
    ended: bool,
    /// The receiver is gone: the subscription ends at the next delivery.
    gone: bool,
    /// The receiver's waker (a blocking receiver's unparks its thread).
    waker: Option<Waker>,
}

/// The next event as taken under the lock: parsed already, or event `i` of
/// a batch (and whether this stream counts it if unreadable), parsed after.
enum Next {
    Parsed(Arc<SessionEvent>),
    Raw(Arc<Batch>, usize, bool),
}

/// What [`Inbox::take`] found.
enum Taken {
    Event(Arc<SessionEvent>),
    Ended,
    Empty,
}

/// The queue itself; the sender and the receiver each hold it.
pub(crate) struct Inbox {
    state: Mutex<State>,
    /// The session's count of events serde could not read.
    unreadable: Arc<AtomicU64>,
    /// The session's id, for the log.
    session: String,
}

impl Inbox {
    /// An empty inbox of a session whose unreadable events are counted in `unreadable`.
    pub(crate) fn new(session: String, unreadable: Arc<AtomicU64>) -> Arc<Inbox> {
        Arc::new(Inbox { state: Mutex::default(), unreadable, session })
    }

    /// Queues what `add` adds unless the receiver is gone (`false` then),
    /// and wakes the receiver if it waits.
    fn push(&self, add: impl FnOnce(&mut VecDeque<Item>)) -> bool {
        let mut s = lock(&self.state);
        if s.gone {
            return false;
        }
        add(&mut s.items);
        self.wake(s);
        true
    }

    /// Wakes a waiting receiver (outside the lock).
    fn wake(&self, mut s: std::sync::MutexGuard<'_, State>) {
        let waker = s.waker.take();
        drop(s);
        if let Some(w) = waker {
            w.wake();
        }
    }

    /// Queues a parsed event; `false` once the receiver is gone.
    pub(crate) fn send(&self, event: Arc<SessionEvent>) -> bool {
        self.push(|items| items.push_back(Item::Parsed(event)))
    }

    /// Queues every event of `batch` (`counts`: see [`Item::Raw`]);
    /// `false` once the receiver is gone.
    pub(crate) fn send_batch(&self, batch: &Arc<Batch>, counts: bool) -> bool {
        if batch.len() == 0 {
            return !lock(&self.state).gone;
        }
        self.push(|items| items.push_back(Item::Raw { batch: Arc::clone(batch), next: 0, counts }))
    }

    /// The sender is gone: the stream ends after what is queued.
    pub(crate) fn end(&self) {
        let mut s = lock(&self.state);
        s.ended = true;
        self.wake(s);
    }

    /// The receiver is gone: nothing more is queued, what is is dropped.
    pub(crate) fn receiver_gone(&self) {
        let items = {
            let mut s = lock(&self.state);
            s.gone = true;
            std::mem::take(&mut s.items)
        };
        drop(items);
    }

    /// Takes the next event; a raw one is parsed after the lock is released.
    fn take_locked(s: &mut State) -> Option<Next> {
        let front = s.items.front_mut()?;
        let taken = match front {
            Item::Parsed(e) => Next::Parsed(Arc::clone(e)),
            Item::Raw { batch, next, counts } => {
                let taken = Next::Raw(Arc::clone(batch), *next, *counts);
                *next += 1;
                if *next < batch.len() {
                    return Some(taken);
                }
                taken
            }
        };
        s.items.pop_front();
        Some(taken)
    }

    fn parse(&self, batch: &Batch, i: usize, counts: bool) -> Arc<SessionEvent> {
        let bytes = batch.event(i);
        Arc::new(SessionEvent::from_json(bytes).unwrap_or_else(|e| {
            // Whatever serde cannot read is still delivered, raw.
            if counts {
                self.unreadable.fetch_add(1, Ordering::Relaxed);
                log::warn!("session {}: an event serde cannot read is delivered raw: {e}", self.session);
            }
            SessionEvent::raw(bytes)
        }))
    }

    fn finish_take(&self, taken: Next) -> Arc<SessionEvent> {
        match taken {
            Next::Parsed(e) => e,
            Next::Raw(batch, i, counts) => self.parse(&batch, i, counts),
        }
    }

    fn take(&self) -> Taken {
        let taken = {
            let mut s = lock(&self.state);
            match Self::take_locked(&mut s) {
                Some(t) => t,
                None if s.ended => return Taken::Ended,
                None => return Taken::Empty,
            }
        };
        Taken::Event(self.finish_take(taken))
    }

    /// The next event if one is queued.
    pub(crate) fn try_recv(&self) -> Option<Arc<SessionEvent>> {
        match self.take() {
            Taken::Event(e) => Some(e),
            Taken::Ended | Taken::Empty => None,
        }
    }

    /// The next event, waiting until `deadline` (if any): `Ok(None)` once
    /// the stream ended, `Err(())` at the deadline. It waits on
    /// [`poll_recv`](Self::poll_recv), as the async stream does.
    pub(crate) fn recv(&self, deadline: Option<Instant>) -> Result<Option<Arc<SessionEvent>>, ()> {
        block_on_until(poll_fn(|cx| self.poll_recv(cx)), deadline).ok_or(())
    }

    /// The next event for an async receiver; else `cx`'s waker is kept.
    pub(crate) fn poll_recv(&self, cx: &mut Context<'_>) -> Poll<Option<Arc<SessionEvent>>> {
        let taken = {
            let mut s = lock(&self.state);
            match Self::take_locked(&mut s) {
                Some(t) => t,
                None if s.ended => return Poll::Ready(None),
                None => {
                    match &mut s.waker {
                        Some(w) if w.will_wake(cx.waker()) => {}
                        w => *w = Some(cx.waker().clone()),
                    }
                    return Poll::Pending;
                }
            }
        };
        Poll::Ready(Some(self.finish_take(taken)))
    }
}

/// The sending end held by a subscription; dropping it ends the stream.
pub(crate) struct InboxTx(pub(crate) Arc<Inbox>);

impl Drop for InboxTx {
    fn drop(&mut self) {
        self.0.end();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batch(events: &[&str]) -> Arc<Batch> {
        let mut b = Batch::default();
        for e in events {
            b.bytes.extend_from_slice(e.as_bytes());
            b.ends.push(b.bytes.len());
        }
        Arc::new(b)
    }

    fn event(id: &str) -> String {
        format!(r#"{{"id":"{id}","timestamp":"t","type":"session.idle","data":{{}}}}"#)
    }

    #[test]
    fn batches_and_parsed_events_come_out_in_order_then_the_end() {
        let inbox = Inbox::new("s".into(), Arc::default());
        let tx = InboxTx(Arc::clone(&inbox));
        let (a, b, c) = (event("a"), event("b"), event("c"));
        assert!(tx.0.send_batch(&batch(&[&a, &b]), true));
        assert!(tx.0.send(Arc::new(SessionEvent::from_json(c.as_bytes()).unwrap())));
        assert!(tx.0.send_batch(&batch(&[]), true));
        drop(tx);
        let ids: Vec<String> = std::iter::from_fn(|| inbox.recv(None).unwrap()).map(|e| e.id.clone()).collect();
        assert_eq!(ids, ["a", "b", "c"]);
        assert_eq!(inbox.recv(None), Ok(None));
    }

    #[test]
    fn an_unreadable_event_is_delivered_raw_and_counted_by_the_counting_stream_only() {
        let unreadable = Arc::new(AtomicU64::new(0));
        let counting = Inbox::new("s".into(), Arc::clone(&unreadable));
        let other = Inbox::new("s".into(), Arc::clone(&unreadable));
        // A lone surrogate: valid on the wire, refused by serde.
        let bad = r#"{"id":"\udc00","timestamp":"t","type":"session.idle","data":{}}"#;
        let shared = batch(&[bad]);
        assert!(counting.send_batch(&shared, true));
        assert!(other.send_batch(&shared, false));
        assert!(matches!(counting.try_recv().unwrap().kind, crate::events::EventKind::Other { .. }));
        assert!(other.try_recv().is_some());
        assert_eq!(unreadable.load(Ordering::Relaxed), 1);
    }

    #[test]
    fn nothing_is_queued_once_the_receiver_is_gone() {
        let inbox = Inbox::new("s".into(), Arc::default());
        assert!(inbox.send_batch(&batch(&[&event("a")]), true));
        inbox.receiver_gone();
        assert!(!inbox.send_batch(&batch(&[&event("b")]), true));
        assert!(inbox.try_recv().is_none());
    }
}
