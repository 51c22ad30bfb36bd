//! A polled receiver of a session's events: the async event stream's end
//! of its queue, and `send_and_wait`'s channel, which the dispatcher fills
//! after the callbacks have run.

use std::sync::Arc;
use std::task::{Context, Poll};

use super::inbox::{Inbox, InboxTx};
use crate::events::SessionEvent;

/// The dispatcher's end of `send_and_wait`'s channel. Dropping the last
/// clone (the subscription ended) ends it.
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
