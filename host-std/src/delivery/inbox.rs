//! One stream subscriber's queue of events, shared by the blocking and the
//! async event streams.
//!
//! The reader hands it whole batches of raw event JSON (as the reader
//! queued them, one allocation per batch, shared by every subscriber of the
//! session) and the stream's own consumer takes each event from the batch
//! when it reads it (parsed once for all subscribers, see `batch`). So an
//! event waits as its ~300 bytes of JSON rather than as a parsed
//! `SessionEvent` (over 1.5 KB), the parsing runs on a consumer's thread
//! beside the reader, and the consumer is woken once per batch, only when
//! it sleeps, rather than once per event. A batch's memory is given back
//! when the last subscriber has read past it.

use std::collections::VecDeque;
use std::future::poll_fn;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::Instant;

use super::batch::{Batch, Parser};
use crate::events::SessionEvent;
use crate::wait::block_on_until;

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

enum Item {
    /// An event parsed already (`send_and_wait`'s, handed over by the
    /// dispatcher after the callbacks).
    Parsed(Arc<SessionEvent>),
    /// The events of a batch from `next` to before `end`.
    Raw { batch: Arc<Batch>, next: usize, end: usize },
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
/// a batch, taken from it after.
enum Next {
    Parsed(Arc<SessionEvent>),
    Raw(Arc<Batch>, usize),
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

    /// Queues every event of `batch`; `false` once the receiver is gone.
    pub(crate) fn send_batch(&self, batch: &Arc<Batch>) -> bool {
        self.send_events(batch, 0..batch.len())
    }

    /// Queues the events `range` of `batch`; `false` once the receiver is gone.
    pub(crate) fn send_events(&self, batch: &Arc<Batch>, range: std::ops::Range<usize>) -> bool {
        if range.is_empty() {
            return !lock(&self.state).gone;
        }
        self.push(|items| items.push_back(Item::Raw { batch: Arc::clone(batch), next: range.start, end: range.end }))
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
            Item::Raw { batch, next, end } => {
                let taken = Next::Raw(Arc::clone(batch), *next);
                *next += 1;
                if *next < *end {
                    return Some(taken);
                }
                taken
            }
        };
        s.items.pop_front();
        Some(taken)
    }

    fn finish_take(&self, taken: Next) -> Arc<SessionEvent> {
        match taken {
            Next::Parsed(e) => e,
            Next::Raw(batch, i) => batch.take(i, &Parser { unreadable: &self.unreadable, session: &self.session }),
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
    use std::sync::atomic::Ordering;

    use super::*;

    /// A batch of `events` that `readers` subscribers read.
    fn batch(events: &[&str], readers: u32) -> Arc<Batch> {
        let mut bytes = Vec::new();
        let mut ends = Vec::new();
        for e in events {
            bytes.extend_from_slice(e.as_bytes());
            ends.push(bytes.len());
        }
        Arc::new(Batch::new(bytes, ends, readers, &Arc::default()))
    }

    fn event(id: &str) -> String {
        format!(r#"{{"id":"{id}","timestamp":"t","type":"session.idle","data":{{}}}}"#)
    }

    #[test]
    fn batches_and_parsed_events_come_out_in_order_then_the_end() {
        let inbox = Inbox::new("s".into(), Arc::default());
        let tx = InboxTx(Arc::clone(&inbox));
        let (a, b, c, d) = (event("a"), event("b"), event("c"), event("d"));
        assert!(tx.0.send_batch(&batch(&[&a, &b], 1)));
        assert!(tx.0.send(Arc::new(SessionEvent::from_json(c.as_bytes()).unwrap())));
        assert!(tx.0.send_batch(&batch(&[], 1)));
        assert!(tx.0.send_events(&batch(&[&a, &d, &b], 1), 1..2));
        drop(tx);
        let ids: Vec<String> = std::iter::from_fn(|| inbox.recv(None).unwrap()).map(|e| e.id.clone()).collect();
        assert_eq!(ids, ["a", "b", "c", "d"]);
        assert_eq!(inbox.recv(None), Ok(None));
    }

    #[test]
    fn an_event_read_by_several_streams_is_parsed_once_and_shared() {
        let unreadable = Arc::new(AtomicU64::new(0));
        let streams: Vec<Arc<Inbox>> = (0..3).map(|_| Inbox::new("s".into(), Arc::clone(&unreadable))).collect();
        // A lone surrogate: valid on the wire, refused by serde.
        let bad = r#"{"id":"\udc00","timestamp":"t","type":"session.idle","data":{}}"#;
        let (a, b) = (event("a"), event("b"));
        let shared = batch(&[&a, bad, &b], 3);
        for s in &streams {
            assert!(s.send_batch(&shared));
        }
        let taken: Vec<Vec<Arc<SessionEvent>>> =
            streams.iter().map(|s| std::iter::from_fn(|| s.try_recv()).collect()).collect();
        assert_eq!(shared.parses.load(Ordering::Relaxed), 3, "each of the 3 events parsed once, not once a stream");
        for (i, first) in taken[0].iter().enumerate() {
            assert!(Arc::ptr_eq(first, &taken[1][i]) && Arc::ptr_eq(first, &taken[2][i]));
        }
        assert!(matches!(taken[2][1].kind, crate::events::EventKind::Other { .. }), "delivered raw");
        assert_eq!(unreadable.load(Ordering::Relaxed), 1, "counted once");
    }

    #[test]
    fn nothing_is_queued_once_the_receiver_is_gone() {
        let inbox = Inbox::new("s".into(), Arc::default());
        assert!(inbox.send_batch(&batch(&[&event("a")], 1)));
        inbox.receiver_gone();
        assert!(!inbox.send_batch(&batch(&[&event("b")], 1)));
        assert!(inbox.try_recv().is_none());
    }
}
