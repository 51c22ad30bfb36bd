//! The table of requests sent and not yet answered.
//!
//! Each request gets a fresh id and a slot holding its waiter `W` (a channel
//! on std, a tag on bare metal). A response hands the waiter back exactly
//! once; on disconnect [`PendingTable::drain`] hands back every waiter so
//! that none waits forever.

use core::fmt;

use crate::lock::Lock;

/// The id of a request this client sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RequestId(pub u64);

impl fmt::Display for RequestId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// Every slot holds a request in flight; the waiter is given back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PendingFull<W>(pub W);

impl<W> fmt::Display for PendingFull<W> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("too many requests in flight")
    }
}

impl<W: fmt::Debug> core::error::Error for PendingFull<W> {}

/// No deadline.
const NEVER: u64 = u64::MAX;

struct Slots<W, const N: usize> {
    next_id: u64,
    /// `(id, deadline in ms or NEVER, waiter)`.
    slots: crate::slots::Slots<Option<(u64, u64, W)>, N>,
    len: usize,
}

/// Up to `N` requests in flight, safe to share between threads.
pub struct PendingTable<W, const N: usize> {
    inner: Lock<Slots<W, N>>,
}

impl<W, const N: usize> Default for PendingTable<W, N> {
    fn default() -> Self {
        Self::new()
    }
}

impl<W, const N: usize> PendingTable<W, N> {
    const NONE: Option<(u64, u64, W)> = None;

    /// An empty table. Ids start at 1.
    #[cfg(not(any(loom, feature = "alloc")))]
    pub const fn new() -> Self {
        PendingTable { inner: Lock::new(Slots { next_id: 1, slots: [Self::NONE; N], len: 0 }) }
    }

    /// An empty table. Ids start at 1. With the `alloc` feature its slots
    /// are on the heap, made as they are first used.
    #[cfg(any(loom, feature = "alloc"))]
    pub fn new() -> Self {
        PendingTable { inner: Lock::new(Slots { next_id: 1, slots: crate::slots::slots![Self::NONE; N], len: 0 }) }
    }

    /// Allocates an id for a request about to be sent and stores its waiter.
    pub fn insert(&self, waiter: W) -> Result<RequestId, PendingFull<W>> {
        self.insert_with_deadline(waiter, None)
    }

    /// As [`insert`](Self::insert), with a deadline (milliseconds on the
    /// host's clock): [`expire`](Self::expire) hands the waiter back once
    /// `now` reaches it, so no caller waits past it.
    pub fn insert_with_deadline(&self, waiter: W, deadline: Option<u64>) -> Result<RequestId, PendingFull<W>> {
        self.inner.with(|t| {
            let Some((_, slot)) = crate::slots::claim::<_, N>(&mut t.slots, 0, Option::is_none, || Self::NONE) else {
                return Err(PendingFull(waiter));
            };
            let id = t.next_id;
            t.next_id += 1;
            *slot = Some((id, deadline.unwrap_or(NEVER), waiter));
            t.len += 1;
            Ok(RequestId(id))
        })
    }

    /// Takes the waiter of request `id` (a response arrived, or the caller
    /// gave up). `None` if no such request is in flight.
    pub fn take(&self, id: u64) -> Option<W> {
        self.inner.with(|t| {
            let slot = t.slots.iter_mut().find(|s| matches!(s, Some((i, _, _)) if *i == id))?;
            t.len -= 1;
            slot.take().map(|(_, _, w)| w)
        })
    }

    /// The earliest deadline of a request in flight.
    pub fn next_deadline(&self) -> Option<u64> {
        let next = self.inner.with(|t| t.slots.iter().flatten().fold(NEVER, |next, (_, d, _)| next.min(*d)));
        (next != NEVER).then_some(next)
    }

    /// Takes the waiter of every request whose deadline is at or before
    /// `now` and hands each to `expired` (with the lock released).
    pub fn expire(&self, now: u64, mut expired: impl FnMut(RequestId, W)) {
        loop {
            let next = self.inner.with(|t| {
                let slot = t.slots.iter_mut().find(|s| matches!(s, Some((_, d, _)) if *d <= now))?;
                t.len -= 1;
                slot.take().map(|(id, _, w)| (RequestId(id), w))
            });
            match next {
                Some((id, w)) => expired(id, w),
                None => return,
            }
        }
    }

    /// Number of requests in flight.
    pub fn len(&self) -> usize {
        self.inner.with(|t| t.len)
    }

    /// Whether no request is in flight.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Takes every waiter, one per `next()`, for example to fail them all on
    /// disconnect. The lock is not held between items.
    pub fn drain(&self) -> Drain<'_, W, N> {
        Drain { table: self }
    }
}

/// Iterator returned by [`PendingTable::drain`].
pub struct Drain<'t, W, const N: usize> {
    table: &'t PendingTable<W, N>,
}

impl<W, const N: usize> Iterator for Drain<'_, W, N> {
    type Item = (RequestId, W);

    fn next(&mut self) -> Option<Self::Item> {
        self.table.inner.with(|t| {
            let (id, _, w) = t.slots.iter_mut().find_map(Option::take)?;
            t.len -= 1;
            Some((RequestId(id), w))
        })
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[cfg_attr(not(target_arch = "wasm32"), test)]
    #[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
    fn ids_are_fresh_and_complete_once() {
        let table: PendingTable<char, 2> = PendingTable::new();
        let a = table.insert('a').unwrap();
        let b = table.insert('b').unwrap();
        assert_eq!((a, b), (RequestId(1), RequestId(2)));
        assert_eq!(table.insert('c'), Err(PendingFull('c')));
        assert_eq!(table.take(1), Some('a'));
        assert_eq!(table.take(1), None, "a response completes its request once");
        assert_eq!(table.take(99), None);
        assert_eq!(table.insert('d'), Ok(RequestId(3)), "ids are never reused");
        assert_eq!(table.len(), 2);
    }

    #[cfg_attr(not(target_arch = "wasm32"), test)]
    #[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
    fn deadlines_expire_only_their_requests() {
        let table: PendingTable<char, 4> = PendingTable::new();
        let a = table.insert_with_deadline('a', Some(100)).unwrap();
        let _b = table.insert_with_deadline('b', Some(300)).unwrap();
        let _c = table.insert('c').unwrap();
        assert_eq!(table.next_deadline(), Some(100));
        let mut got = None;
        table.expire(99, |id, w| got = Some((id, w)));
        assert_eq!(got, None, "not yet");
        table.expire(100, |id, w| got = Some((id, w)));
        assert_eq!(got, Some((a, 'a')));
        assert_eq!(table.take(a.0), None, "an expired request is answered once");
        assert_eq!(table.next_deadline(), Some(300));
        let mut n = 0;
        table.expire(u64::MAX - 1, |_, _| n += 1);
        assert_eq!((n, table.len(), table.next_deadline()), (1, 1, None));
    }

    #[cfg_attr(not(target_arch = "wasm32"), test)]
    #[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
    fn drain_fails_every_outstanding_request() {
        let table: PendingTable<u8, 4> = PendingTable::new();
        for w in 0..3 {
            table.insert(w).unwrap();
        }
        table.take(2);
        let mut drained = [(RequestId(0), 0u8); 2];
        let mut n = 0;
        for item in table.drain() {
            drained[n] = item;
            n += 1;
        }
        assert_eq!(n, 2);
        assert_eq!(drained, [(RequestId(1), 0), (RequestId(3), 2)]);
        assert!(table.is_empty());
    }
}
