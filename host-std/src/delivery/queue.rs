//! A session's queue of events waiting for the dispatcher.

use super::inbox::Batch;

/// Events waiting for the dispatcher. Their bytes sit end to end in one
/// buffer, so queueing an event allocates nothing in the steady state, and
/// the dispatcher takes the whole batch in one swap.
#[derive(Default)]
pub(super) struct Queue {
    pub(super) bytes: Vec<u8>,
    /// End offset of each event in `bytes`.
    pub(super) ends: Vec<usize>,
    /// A subscriber was added: deliver what was kept for it.
    pub(super) wake: bool,
    /// The session ended; set after every event it follows was queued.
    pub(super) close: Option<String>,
    /// The session is queued on (or being delivered by) the event pool.
    pub(super) scheduled: bool,
    /// Room to make for the next batch (bytes, events): the size of the
    /// last one, up to [`KEEP_QUEUE_BYTES`].
    room: (usize, usize),
    /// Events held while a recovery resumes the session (see
    /// [`SessionSink::hold`]).
    pub(super) held: Option<Vec<Vec<u8>>>,
}

impl Queue {
    pub(super) fn is_empty(&self) -> bool {
        self.ends.is_empty() && !self.wake && self.close.is_none()
    }

    /// Queues one event's bytes.
    pub(super) fn push(&mut self, event: &[u8]) {
        if self.ends.capacity() == 0 {
            // Made by the reader, so a batch's memory stays in its
            // allocator arena however many threads deliver.
            self.bytes.reserve(self.room.0);
            self.ends.reserve(self.room.1);
        }
        self.bytes.extend_from_slice(event);
        let end = self.bytes.len();
        self.ends.push(end);
    }

    /// Takes the events queued; the next batch starts with room for as many.
    pub(super) fn take_batch(&mut self) -> Batch {
        self.room = (self.bytes.len().min(KEEP_QUEUE_BYTES), self.ends.len().min(KEEP_QUEUE_BYTES / 256));
        Batch { bytes: std::mem::take(&mut self.bytes), ends: std::mem::take(&mut self.ends) }
    }
}

/// The queue's buffers start each batch this large at most (the size of
/// the previous batch): a steady flow reuses its size without growing step
/// by step, and a burst's memory is given back once it has passed.
const KEEP_QUEUE_BYTES: usize = 1 << 20;
