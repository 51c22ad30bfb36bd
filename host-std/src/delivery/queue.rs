//! A session's queue: the events the reader has read and not yet flushed,
//! and the batches, wakes and end waiting for the dispatcher.

use std::collections::VecDeque;
use std::sync::atomic::AtomicUsize;
use std::sync::Arc;

use super::batch::Batch;
use crate::driver::Ticket;

/// The reader's events not yet flushed: their bytes sit end to end in one
/// buffer, so queueing an event allocates nothing in the steady state, and
/// a flush takes the whole batch in one swap. Then what the dispatcher has
/// to do (run callbacks, feed `send_and_wait`).
#[derive(Default)]
pub(super) struct Queue {
    pub(super) bytes: Vec<u8>,
    /// End offset of each event in `bytes`.
    pub(super) ends: Vec<usize>,
    /// Whether each event may move a `send_and_wait` turn (by its type).
    moves: Vec<bool>,
    /// Batches for the callbacks and waiters, each with the last
    /// subscriber id it is for (those who subscribed later get it not),
    /// and its ticket of the delivery fence (back once it is delivered).
    pub(super) batches: VecDeque<(Arc<Batch>, u64, Ticket)>,
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
    /// Parses the session's batches hold for readers to come.
    shared_parses: Arc<AtomicUsize>,
}

impl Queue {
    /// Whether the dispatcher has nothing to do.
    pub(super) fn is_empty(&self) -> bool {
        self.batches.is_empty() && !self.wake && self.close.is_none()
    }

    /// Queues one event's bytes; `moves`: whether it may move a turn
    /// ([`Turn::may_move`](super::Turn::may_move) of its type).
    pub(super) fn push(&mut self, event: &[u8], moves: bool) {
        if self.ends.capacity() == 0 {
            // Made by the reader, so a batch's memory stays in its
            // allocator arena however many threads deliver.
            self.bytes.reserve(self.room.0);
            self.ends.reserve(self.room.1);
            self.moves.reserve(self.room.1);
        }
        self.bytes.extend_from_slice(event);
        let end = self.bytes.len();
        self.ends.push(end);
        self.moves.push(moves);
    }

    /// Takes the events queued as a batch that `readers` subscribers will
    /// read; the next batch starts with room for as many.
    pub(super) fn take_batch(&mut self, readers: u32) -> Batch {
        self.room = (self.bytes.len().min(KEEP_QUEUE_BYTES), self.ends.len().min(KEEP_QUEUE_BYTES / 256));
        let batch =
            Batch::new(std::mem::take(&mut self.bytes), std::mem::take(&mut self.ends), readers, &self.shared_parses);
        batch.with_moves(std::mem::take(&mut self.moves))
    }
}

/// The queue's buffers start each batch this large at most (the size of
/// the previous batch): a steady flow reuses its size without growing step
/// by step, and a burst's memory is given back once it has passed.
const KEEP_QUEUE_BYTES: usize = 1 << 20;
