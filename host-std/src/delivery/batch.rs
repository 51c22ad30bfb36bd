//! A batch of a session's events as they arrived (their JSON end to end),
//! shared by every subscriber it was handed to, each of which reads it at
//! its own pace. An event is parsed at most once whatever the number of
//! subscribers: the first to read it parses it, and keeps the result in the
//! event's cell for the others until the last of them has taken it. So the
//! backlog of a subscriber is bytes (about 300 per event), and a parsed
//! event (over 1.5 KB) lives only while some subscribers have read it and
//! others have not. A session holds at most [`MAX_SHARED_PARSES`] such
//! parses: past that (one subscriber far behind the others) the later
//! readers parse the event again, so memory stays bounded by the bytes not
//! yet read.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use crate::driver::{Backlog, Charge};
use crate::events::SessionEvent;

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Events as they arrived: their JSON end to end, and where each ends.
pub(crate) struct Batch {
    pub(crate) bytes: Vec<u8>,
    /// End offset of each event in `bytes`.
    pub(crate) ends: Vec<usize>,
    /// Whether each event may move a `send_and_wait` turn, by its type
    /// (empty: each may).
    moves: Vec<bool>,
    /// One cell per event when more than one subscriber reads the batch:
    /// the readers yet to take the event, and the event once parsed.
    cells: Vec<Mutex<Cell>>,
    /// The session's count of parses held in cells (of every batch).
    held: Arc<AtomicUsize>,
    /// The batch's memory, counted in the connection's backlog while
    /// subscribers have yet to take it (see [`Batch::charge`]).
    charge: Option<Charge>,
    /// Events of this batch parsed (tests check that each is parsed once
    /// however many subscribers read it).
    #[cfg(test)]
    pub(crate) parses: AtomicU64,
}

/// An event's parse, shared by its readers.
struct Cell {
    readers: u32,
    parsed: Option<Arc<SessionEvent>>,
}

/// Parses a session holds for subscribers yet to read them, at most
/// (about 1 MB): subscribers that keep pace with one another share every
/// parse; one that falls this far behind parses for itself.
pub(crate) const MAX_SHARED_PARSES: usize = 512;

/// Where a batch's parse counts what serde could not read, and which
/// session's log says so.
pub(crate) struct Parser<'a> {
    pub(crate) unreadable: &'a AtomicU64,
    pub(crate) session: &'a str,
}

impl Batch {
    /// A batch of `bytes` (`ends`: where each event ends) that `readers`
    /// subscribers will read, each event once; `held` counts the session's
    /// parses held for readers to come.
    pub(crate) fn new(bytes: Vec<u8>, ends: Vec<usize>, readers: u32, held: &Arc<AtomicUsize>) -> Batch {
        let cells = if readers > 1 {
            ends.iter().map(|_| Mutex::new(Cell { readers, parsed: None })).collect()
        } else {
            Vec::new()
        };
        Batch {
            bytes,
            ends,
            moves: Vec::new(),
            cells,
            held: Arc::clone(held),
            charge: None,
            #[cfg(test)]
            parses: AtomicU64::new(0),
        }
    }

    /// The batch, knowing which of its events may move a turn (one flag
    /// per event, by its type).
    pub(crate) fn with_moves(mut self, moves: Vec<bool>) -> Batch {
        debug_assert!(moves.is_empty() || moves.len() == self.ends.len());
        self.moves = moves;
        self
    }

    /// The batch, its memory counted in `backlog` until it is dropped
    /// (when its last subscriber has taken it).
    pub(crate) fn charged_to(mut self, backlog: &Arc<Backlog>) -> Batch {
        let bytes = self.bytes.capacity()
            + self.ends.capacity() * std::mem::size_of::<usize>()
            + self.moves.capacity()
            + self.cells.capacity() * std::mem::size_of::<Mutex<Cell>>();
        self.charge = Some(backlog.charge(bytes));
        self
    }

    /// Whether event `i` may move a `send_and_wait` turn (by its type, as
    /// the reader was told it): one that may not need not be parsed for a
    /// turn.
    pub(crate) fn may_move(&self, i: usize) -> bool {
        self.moves.get(i).copied().unwrap_or(true)
    }

    /// How many events.
    pub(crate) fn len(&self) -> usize {
        self.ends.len()
    }

    /// The JSON of event `i`.
    pub(crate) fn event(&self, i: usize) -> &[u8] {
        let start = if i == 0 { 0 } else { self.ends[i - 1] };
        &self.bytes[start..self.ends[i]]
    }

    /// Event `i`, for one of its readers: parsed by the first to ask (which
    /// counts it if serde cannot read it), handed to the others, and let go
    /// by the batch when the last has taken it.
    pub(crate) fn take(&self, i: usize, parser: &Parser<'_>) -> Arc<SessionEvent> {
        let Some(cell) = self.cells.get(i) else {
            return self.parse(i, parser);
        };
        let mut cell = lock(cell);
        cell.readers = cell.readers.saturating_sub(1);
        let event = match &cell.parsed {
            Some(e) => Arc::clone(e),
            None => {
                let e = self.parse(i, parser);
                if cell.readers > 0 && self.held.fetch_add(1, Ordering::Relaxed) < MAX_SHARED_PARSES {
                    cell.parsed = Some(Arc::clone(&e));
                } else if cell.readers > 0 {
                    self.held.fetch_sub(1, Ordering::Relaxed);
                }
                e
            }
        };
        if cell.readers == 0 && cell.parsed.take().is_some() {
            self.held.fetch_sub(1, Ordering::Relaxed);
        }
        event
    }

    /// Event `i` is passed over by one of its readers, unparsed: the
    /// others still take it, and the last lets go of its parse.
    pub(crate) fn skip(&self, i: usize) {
        let Some(cell) = self.cells.get(i) else { return };
        let mut cell = lock(cell);
        cell.readers = cell.readers.saturating_sub(1);
        if cell.readers == 0 && cell.parsed.take().is_some() {
            self.held.fetch_sub(1, Ordering::Relaxed);
        }
    }

    /// Parses event `i`; whatever serde cannot read is still delivered, raw.
    fn parse(&self, i: usize, parser: &Parser<'_>) -> Arc<SessionEvent> {
        #[cfg(test)]
        self.parses.fetch_add(1, Ordering::Relaxed);
        let bytes = self.event(i);
        SessionEvent::from_json_shared(bytes).unwrap_or_else(|e| {
            parser.unreadable.fetch_add(1, Ordering::Relaxed);
            log::warn!("session {}: an event serde cannot read is delivered raw: {e}", parser.session);
            Arc::new(SessionEvent::raw(bytes))
        })
    }
}

impl Drop for Batch {
    fn drop(&mut self) {
        // Parses held for readers that never came (a stream dropped).
        let mut held = 0;
        for cell in &mut self.cells {
            held += usize::from(cell.get_mut().unwrap_or_else(std::sync::PoisonError::into_inner).parsed.is_some());
        }
        self.held.fetch_sub(held, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batch(n: usize, readers: u32, held: &Arc<AtomicUsize>) -> Batch {
        let (mut bytes, mut ends) = (Vec::new(), Vec::new());
        for i in 0..n {
            bytes.extend_from_slice(
                format!(r#"{{"id":"{i}","timestamp":"t","type":"session.idle","data":{{}}}}"#).as_bytes(),
            );
            ends.push(bytes.len());
        }
        Batch::new(bytes, ends, readers, held)
    }

    #[test]
    fn a_parse_is_held_for_the_readers_to_come_and_let_go_by_the_last() {
        let held = Arc::default();
        let unreadable = AtomicU64::new(0);
        let parser = Parser { unreadable: &unreadable, session: "s" };
        let b = batch(2, 2, &held);
        let first = b.take(0, &parser);
        assert_eq!(held.load(Ordering::Relaxed), 1, "held for the second reader");
        assert!(Arc::ptr_eq(&first, &b.take(0, &parser)));
        assert_eq!(held.load(Ordering::Relaxed), 0, "let go by the last reader");
        b.take(1, &parser);
        assert_eq!(held.load(Ordering::Relaxed), 1);
        drop(b);
        assert_eq!(held.load(Ordering::Relaxed), 0, "let go with the batch when a reader never came");
    }

    #[test]
    fn past_the_bound_a_reader_far_behind_parses_for_itself() {
        let held = Arc::default();
        let unreadable = AtomicU64::new(0);
        let parser = Parser { unreadable: &unreadable, session: "s" };
        let n = MAX_SHARED_PARSES + 10;
        let b = batch(n, 2, &held);
        let ahead: Vec<_> = (0..n).map(|i| b.take(i, &parser)).collect();
        assert_eq!(held.load(Ordering::Relaxed), MAX_SHARED_PARSES, "no more parses held than the bound");
        let behind: Vec<_> = (0..n).map(|i| b.take(i, &parser)).collect();
        assert_eq!(b.parses.load(Ordering::Relaxed), (n + 10) as u64, "the events past the bound parsed twice");
        assert!(Arc::ptr_eq(&ahead[0], &behind[0]) && !Arc::ptr_eq(&ahead[n - 1], &behind[n - 1]));
        assert_eq!(held.load(Ordering::Relaxed), 0);
    }
}
