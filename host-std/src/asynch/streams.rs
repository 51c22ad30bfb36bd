//! Async streams of session events and lifecycle notifications.

use std::collections::VecDeque;
use std::future::poll_fn;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};

use crate::delivery::EventRx;
use crate::events::{LifecycleEvent, SessionEvent};

pub(super) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

pub(super) struct QueueState<T> {
    items: VecDeque<T>,
    /// The sender is gone: the stream ends after what is queued.
    ended: bool,
    /// The receiver is gone: the subscription ends at the next item.
    gone: bool,
    waker: Option<Waker>,
}

pub(super) struct Queue<T> {
    state: Mutex<QueueState<T>>,
}

impl<T> Queue<T> {
    fn new() -> Self {
        Queue { state: Mutex::new(QueueState { items: VecDeque::new(), ended: false, gone: false, waker: None }) }
    }

    fn change(&self, f: impl FnOnce(&mut QueueState<T>)) {
        let mut s = lock(&self.state);
        f(&mut s);
        let waker = s.waker.take();
        drop(s);
        if let Some(w) = waker {
            w.wake();
        }
    }
}

/// The producer's end of a [`Queue`]. Dropping it ends the stream.
pub(super) struct QueueTx<T> {
    queue: Arc<Queue<T>>,
}

impl<T> Drop for QueueTx<T> {
    fn drop(&mut self) {
        self.queue.change(|s| s.ended = true);
    }
}

impl<T> QueueTx<T> {
    /// Queues `item` and wakes the receiver; `false` once the receiver is gone.
    pub(super) fn send(&self, item: T) -> bool {
        let mut gone = false;
        self.queue.change(|s| {
            gone = s.gone;
            if !gone {
                s.items.push_back(item);
            }
        });
        !gone
    }
}

pub(super) fn queue_channel<T>() -> (QueueTx<T>, QueueRx<T>) {
    let queue = Arc::new(Queue::new());
    (QueueTx { queue: Arc::clone(&queue) }, QueueRx { queue })
}

pub(super) struct QueueRx<T> {
    queue: Arc<Queue<T>>,
}

impl<T> QueueRx<T> {
    fn poll_recv(&self, cx: &mut Context<'_>) -> Poll<Option<T>> {
        let mut s = lock(&self.queue.state);
        if let Some(e) = s.items.pop_front() {
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

    fn try_recv(&self) -> Option<T> {
        lock(&self.queue.state).items.pop_front()
    }
}

impl<T> Drop for QueueRx<T> {
    fn drop(&mut self) {
        let mut s = lock(&self.queue.state);
        s.gone = true;
        s.items.clear();
    }
}

/// An async stream of a session's events ([`Session::events`](super::Session::events)). It never
/// drops an event and ends when the session is destroyed, dropped or
/// disconnected.
pub struct EventStream {
    pub(super) rx: EventRx,
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
        self.rx.inbox.try_recv()
    }
}

impl futures_core::Stream for EventStream {
    type Item = Arc<SessionEvent>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.rx.poll_recv(cx)
    }
}

/// An async stream of `session.lifecycle` notifications
/// ([`Client::lifecycle_events`](super::Client::lifecycle_events)): every one from its creation on, in
/// order. It ends when the connection does.
pub struct LifecycleStream {
    pub(super) rx: QueueRx<LifecycleEvent>,
}

impl std::fmt::Debug for LifecycleStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LifecycleStream").finish_non_exhaustive()
    }
}

impl LifecycleStream {
    /// The next notification; `None` once the connection ended.
    /// Cancel-safe.
    pub async fn next(&mut self) -> Option<LifecycleEvent> {
        poll_fn(|cx| self.rx.poll_recv(cx)).await
    }

    /// The next notification if one is already here.
    pub fn try_next(&mut self) -> Option<LifecycleEvent> {
        self.rx.try_recv()
    }
}

impl futures_core::Stream for LifecycleStream {
    type Item = LifecycleEvent;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.rx.poll_recv(cx)
    }
}
