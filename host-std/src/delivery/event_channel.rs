//! An async subscription's channel: an unbounded queue the dispatcher
//! fills and a future drains (the blocking stream's `Inbox`, polled).

use std::sync::Arc;
use std::task::{Context, Poll};

use super::inbox::{Batch, Inbox, InboxTx};
use crate::events::SessionEvent;

/// The dispatcher's end of an async subscription. Dropping the last clone
/// (the subscription ended) ends the stream.
pub(crate) struct EventTx {
    inbox: Arc<Inbox>,
    /// Shared by the clones: the last one dropped ends the stream.
    _end: Arc<InboxTx>,
}

impl Clone for EventTx {
    fn clone(&self) -> Self {
        EventTx { inbox: Arc::clone(&self.inbox), _end: Arc::clone(&self._end) }
    }
}

impl EventTx {
    /// Queues `event` and wakes the reader; `false` once the receiver is gone.
    pub(crate) fn send(&self, event: Arc<SessionEvent>) -> bool {
        self.inbox.send(event)
    }

    /// Queues a batch of unparsed events (see `Inbox::send_batch`).
    pub(crate) fn send_batch(&self, batch: &Arc<Batch>, counts: bool) -> bool {
        self.inbox.send_batch(batch, counts)
    }
}

pub(crate) fn event_channel(inbox: Arc<Inbox>) -> (EventTx, EventRx) {
    let end = Arc::new(InboxTx(Arc::clone(&inbox)));
    (EventTx { inbox: Arc::clone(&inbox), _end: end }, EventRx { inbox })
}

pub(crate) struct EventRx {
    pub(crate) inbox: Arc<Inbox>,
}

impl EventRx {
    pub(crate) fn poll_recv(&self, cx: &mut Context<'_>) -> Poll<Option<Arc<SessionEvent>>> {
        self.inbox.poll_recv(cx)
    }
}

impl Drop for EventRx {
    fn drop(&mut self) {
        self.inbox.receiver_gone();
    }
}
