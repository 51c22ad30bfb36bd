//! The fixed-capacity session table.
//!
//! A session is reserved BEFORE its `session.create` or `session.resume` is
//! sent, so events that race the answer already find it. Where the server
//! assigns the id, the slot waits without an id; while any such slot waits,
//! the router parks frames for unknown sessions instead of reporting them.
//!
//! The table's storage sits behind a private lock and no function returns a
//! reference into it: every read clones the slot's target `T` (an `Arc` on
//! std, a small index on bare metal) and releases the lock before the caller
//! delivers anything. `T::clone` runs under the lock, so it must be cheap and
//! must not touch the table.

use core::fmt;

use heapless::String;

use crate::json::JsonStr;
use crate::lock::Lock;

/// The longest session id the table stores (the CLI uses 36-byte UUIDs).
pub const MAX_SESSION_ID_LEN: usize = 64;

/// A reference to one use of a slot. When the slot is released its
/// generation changes, so an old handle never reaches a later session.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SessionHandle {
    index: u16,
    generation: u32,
}

impl SessionHandle {
    /// The slot index.
    pub fn index(&self) -> usize {
        usize::from(self.index)
    }

    /// How many times the slot had been released before this use.
    pub fn generation(&self) -> u32 {
        self.generation
    }

    /// The handle of `index` and `generation` (as the engine wrote them in
    /// a request id of its own); `None` for an index no table has.
    pub(crate) fn from_parts(index: usize, generation: u32) -> Option<Self> {
        Some(SessionHandle { index: u16::try_from(index).ok()?, generation })
    }
}

/// Where a session is in its life. Events route to it in every state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionState {
    /// Reserved under a client-chosen id; the create/resume RPC is in flight.
    Reserved,
    /// A create without an id is in flight; the server will name it.
    AwaitingId,
    /// Created or resumed.
    Active,
    /// A destroy is in flight; its last events still arrive.
    Closing,
}

/// Why a reservation failed. The target is given back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReserveError<T> {
    /// The reason.
    pub kind: ReserveErrorKind,
    /// The target that was not stored.
    pub target: T,
}

impl<T> ReserveError<T> {
    /// Takes the target back.
    pub fn into_inner(self) -> T {
        self.target
    }
}

/// The reason a reservation or an id assignment failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ReserveErrorKind {
    /// Every slot is in use.
    Full,
    /// A live session already has this id.
    Duplicate,
    /// The id is empty or longer than [`MAX_SESSION_ID_LEN`].
    InvalidId,
    /// The handle's slot has been released (or was never this use).
    StaleHandle,
    /// The slot is not waiting for a server-assigned id.
    NotAwaitingId,
}

impl ReserveErrorKind {
    /// The message that [`Display`](fmt::Display) shows, for builds that
    /// leave `core::fmt` out.
    pub const fn message(&self) -> &'static str {
        match self {
            ReserveErrorKind::Full => crate::messages::RESERVE_FULL,
            ReserveErrorKind::Duplicate => crate::messages::RESERVE_DUPLICATE,
            ReserveErrorKind::InvalidId => crate::messages::RESERVE_INVALID_ID,
            ReserveErrorKind::StaleHandle => crate::messages::STALE_HANDLE,
            ReserveErrorKind::NotAwaitingId => crate::messages::RESERVE_NOT_AWAITING_ID,
        }
    }
}

impl fmt::Display for ReserveErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.message())
    }
}

impl<T> fmt::Display for ReserveError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.kind.fmt(f)
    }
}

impl<T: fmt::Debug> core::error::Error for ReserveError<T> {}
impl core::error::Error for ReserveErrorKind {}

/// A handle whose session has been released.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StaleHandle;

impl StaleHandle {
    /// The message that [`Display`](fmt::Display) shows, for builds that
    /// leave `core::fmt` out.
    pub const fn message(&self) -> &'static str {
        crate::messages::STALE_HANDLE
    }
}

impl fmt::Display for StaleHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.message())
    }
}

impl core::error::Error for StaleHandle {}

/// What a lookup by id found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Lookup<T> {
    /// A live session.
    Found(SessionHandle, T),
    /// No session has this id, but a create without an id is in flight: the
    /// id may be about to register, so the frame should be parked.
    Pending,
    /// No session has this id and none is expected.
    Unknown,
}

struct Slot<T> {
    generation: u32,
    state: SessionState,
    id: String<MAX_SESSION_ID_LEN>,
    /// `None` when the slot is free.
    target: Option<T>,
    /// The next named slot in the same hash bucket ([`NIL`] ends the chain).
    next: u16,
}

/// The end of a bucket chain (no slot has this index: `N <= 65535`).
const NIL: u16 = u16::MAX;

/// FNV-1a over the id's UTF-8 bytes; the same for a `&str` and for the
/// decoded form of a [`JsonStr`].
fn hash_bytes(h: u32, bytes: &[u8]) -> u32 {
    bytes.iter().fold(h, |h, &b| (h ^ u32::from(b)).wrapping_mul(0x0100_0193))
}

const FNV_OFFSET: u32 = 0x811c_9dc5;

fn hash_str(id: &str) -> u32 {
    hash_bytes(FNV_OFFSET, id.as_bytes())
}

fn hash_json(id: JsonStr<'_>) -> u32 {
    match id.as_plain() {
        Some(s) => hash_str(s),
        None => id.chars().fold(FNV_OFFSET, |h, c| hash_bytes(h, c.encode_utf8(&mut [0; 4]).as_bytes())),
    }
}

impl<T> Slot<T> {
    const FREE: Self =
        Slot { generation: 0, state: SessionState::Reserved, id: String::new(), target: None, next: NIL };

    fn is_use(&self, handle: SessionHandle) -> bool {
        self.target.is_some() && self.generation == handle.generation
    }

    fn is_named(&self) -> bool {
        self.target.is_some() && self.state != SessionState::AwaitingId
    }
}

struct Slots<T, const N: usize> {
    slots: crate::slots::Slots<Slot<T>, N>,
    /// The first named slot of each hash bucket (bucket = hash % N): a
    /// chained index over the slots themselves, so a lookup by id costs a
    /// hash and a short walk whatever the table's size, with no allocator.
    heads: crate::slots::Fixed<u16, N>,
    /// Slots in `AwaitingId`.
    awaiting: usize,
    len: usize,
}

impl<T, const N: usize> Slots<T, N> {
    fn slot(&mut self, handle: SessionHandle) -> Option<&mut Slot<T>> {
        self.slots.get_mut(handle.index()).filter(|s| s.is_use(handle))
    }

    fn bucket(hash: u32) -> usize {
        hash as usize % N.max(1)
    }

    fn chain(&self, hash: u32, mut matches: impl FnMut(&Slot<T>) -> bool) -> Option<usize> {
        let mut at = *self.heads.get(Self::bucket(hash))?;
        while at != NIL {
            let slot = &self.slots[usize::from(at)];
            if slot.is_named() && matches(slot) {
                return Some(usize::from(at));
            }
            at = slot.next;
        }
        None
    }

    fn find(&self, id: JsonStr<'_>) -> Option<usize> {
        self.chain(hash_json(id), |s| id == s.id.as_str())
    }

    fn find_plain(&self, id: &str) -> Option<usize> {
        self.chain(hash_str(id), |s| s.id == id)
    }

    /// Links a slot that just got its id into its bucket.
    fn link(&mut self, index: usize) {
        let b = Self::bucket(hash_str(&self.slots[index].id));
        self.slots[index].next = self.heads[b];
        self.heads[b] = index as u16;
    }

    /// Unlinks a named slot from its bucket (before its id is cleared).
    fn unlink(&mut self, index: usize) {
        let b = Self::bucket(hash_str(&self.slots[index].id));
        let next = self.slots[index].next;
        if usize::from(self.heads[b]) == index {
            self.heads[b] = next;
        } else {
            let mut at = self.heads[b];
            while at != NIL {
                let slot = &mut self.slots[usize::from(at)];
                if usize::from(slot.next) == index {
                    slot.next = next;
                    break;
                }
                at = slot.next;
            }
        }
        self.slots[index].next = NIL;
    }

    fn insert(&mut self, id: &str, state: SessionState, target: T) -> Result<SessionHandle, ReserveError<T>> {
        let fail = |kind, target| Err(ReserveError { kind, target });
        let mut name = String::new();
        if state != SessionState::AwaitingId && (id.is_empty() || name.push_str(id).is_err()) {
            return fail(ReserveErrorKind::InvalidId, target);
        }
        if state != SessionState::AwaitingId && self.find_plain(id).is_some() {
            return fail(ReserveErrorKind::Duplicate, target);
        }
        let Some((index, slot)) =
            crate::slots::claim::<_, N>(&mut self.slots, 0, |s| s.target.is_none(), || Slot::FREE)
        else {
            return fail(ReserveErrorKind::Full, target);
        };
        slot.state = state;
        slot.id = name;
        slot.target = Some(target);
        let generation = slot.generation;
        self.len += 1;
        if state == SessionState::AwaitingId {
            self.awaiting += 1;
        } else {
            self.link(index);
        }
        Ok(SessionHandle { index: index as u16, generation })
    }

    fn remove(&mut self, index: usize) -> Option<(SessionHandle, T)> {
        if self.slots[index].target.is_some() && self.slots[index].state != SessionState::AwaitingId {
            self.unlink(index);
        }
        let slot = &mut self.slots[index];
        let target = slot.target.take()?;
        let handle = SessionHandle { index: index as u16, generation: slot.generation };
        slot.generation = slot.generation.wrapping_add(1);
        if slot.state == SessionState::AwaitingId {
            self.awaiting -= 1;
        }
        slot.id.clear();
        self.len -= 1;
        Some((handle, target))
    }
}

/// A fixed table of up to `N` sessions, safe to share between threads.
pub struct SessionTable<T, const N: usize> {
    inner: Lock<Slots<T, N>>,
}

impl<T: Clone, const N: usize> Default for SessionTable<T, N> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T: Clone, const N: usize> SessionTable<T, N> {
    const FITS: () = assert!(N <= u16::MAX as usize, "at most 65535 sessions");

    /// An empty table.
    #[cfg(not(any(loom, feature = "alloc")))]
    pub const fn new() -> Self {
        #[allow(clippy::let_unit_value)]
        let () = Self::FITS;
        SessionTable { inner: Lock::new(Slots { slots: [Slot::FREE; N], heads: [NIL; N], awaiting: 0, len: 0 }) }
    }

    /// An empty table. With the `alloc` feature it is on the heap, its
    /// slots made as they are first used (so a table of any capacity needs
    /// no stack, and little memory until it fills).
    #[cfg(any(loom, feature = "alloc"))]
    pub fn new() -> Self {
        #[allow(clippy::let_unit_value)]
        let () = Self::FITS;
        let (slots, heads) = (crate::slots::slots![Slot::FREE; N], crate::slots::fixed![NIL; N]);
        SessionTable { inner: Lock::new(Slots { slots, heads, awaiting: 0, len: 0 }) }
    }

    /// Reserves a slot for the session `id` before its create or resume RPC
    /// is sent; events for `id` route to `target` from now on.
    pub fn reserve(&self, id: &str, target: T) -> Result<SessionHandle, ReserveError<T>> {
        self.inner.with(|t| t.insert(id, SessionState::Reserved, target))
    }

    /// Reserves the session `id` for a resume, taking the id over from a
    /// session still open under it on this client: that session is released
    /// and returned, so the host can end its handle with a clear reason.
    /// The two steps happen under one lock, so no event falls between them.
    #[allow(clippy::type_complexity)]
    pub fn reserve_takeover(
        &self,
        id: &str,
        target: T,
    ) -> Result<(SessionHandle, Option<(SessionHandle, T)>), ReserveError<T>> {
        self.inner.with(|t| {
            // Freeing the old slot first means a full table still takes the
            // id over; insert cannot then fail for a valid, found id.
            let old = t.find_plain(id).and_then(|i| t.remove(i));
            t.insert(id, SessionState::Reserved, target).map(|h| (h, old))
        })
    }

    /// Reserves a slot for a create whose id the server will assign. Until
    /// [`assign`](Self::assign) or [`release`](Self::release), frames for
    /// unknown sessions are parked rather than reported.
    pub fn reserve_unassigned(&self, target: T) -> Result<SessionHandle, ReserveError<T>> {
        self.inner.with(|t| t.insert("", SessionState::AwaitingId, target))
    }

    /// Names a slot reserved with [`reserve_unassigned`](Self::reserve_unassigned)
    /// and makes it active. Re-route the parked frames afterwards.
    pub fn assign(&self, handle: SessionHandle, id: &str) -> Result<(), ReserveErrorKind> {
        self.inner.with(|t| {
            let mut name = String::new();
            if id.is_empty() || name.push_str(id).is_err() {
                return Err(ReserveErrorKind::InvalidId);
            }
            if t.find_plain(id).is_some() {
                return Err(ReserveErrorKind::Duplicate);
            }
            let slot = t.slot(handle).ok_or(ReserveErrorKind::StaleHandle)?;
            if slot.state != SessionState::AwaitingId {
                return Err(ReserveErrorKind::NotAwaitingId);
            }
            slot.id = name;
            slot.state = SessionState::Active;
            t.awaiting -= 1;
            t.link(handle.index());
            Ok(())
        })
    }

    /// Marks a reserved session as created (its create/resume succeeded).
    pub fn activate(&self, handle: SessionHandle) -> Result<(), StaleHandle> {
        self.set_state(handle, SessionState::Active)
    }

    /// Marks a session as closing (its destroy is in flight). Its events
    /// still route until [`release`](Self::release).
    pub fn close(&self, handle: SessionHandle) -> Result<(), StaleHandle> {
        self.set_state(handle, SessionState::Closing)
    }

    fn set_state(&self, handle: SessionHandle, state: SessionState) -> Result<(), StaleHandle> {
        self.inner.with(|t| {
            let slot = t.slot(handle).filter(|s| s.state != SessionState::AwaitingId).ok_or(StaleHandle)?;
            slot.state = state;
            Ok(())
        })
    }

    /// Frees the slot and returns its target; `None` for a stale handle.
    pub fn release(&self, handle: SessionHandle) -> Option<T> {
        self.inner.with(|t| {
            t.slot(handle)?;
            t.remove(handle.index()).map(|(_, target)| target)
        })
    }

    /// The target of a live handle.
    pub fn get(&self, handle: SessionHandle) -> Option<T> {
        self.inner.with(|t| t.slot(handle).and_then(|s| s.target.clone()))
    }

    /// The id of a live, named handle.
    pub(crate) fn name(&self, handle: SessionHandle) -> Option<String<MAX_SESSION_ID_LEN>> {
        self.inner.with(|t| t.slot(handle).filter(|s| s.state != SessionState::AwaitingId).map(|s| s.id.clone()))
    }

    /// The first active session in a slot from `index` on.
    pub(crate) fn active_from(&self, index: usize) -> Option<SessionHandle> {
        self.inner.with(|t| {
            let at = t.slots.iter().skip(index).position(|s| s.target.is_some() && s.state == SessionState::Active)?;
            Some(SessionHandle { index: (index + at) as u16, generation: t.slots[index + at].generation })
        })
    }

    /// The state of a live handle.
    pub fn state(&self, handle: SessionHandle) -> Option<SessionState> {
        self.inner.with(|t| t.slot(handle).map(|s| s.state))
    }

    /// The live session named `id`.
    pub fn find(&self, id: &str) -> Option<(SessionHandle, T)> {
        self.inner.with(|t| {
            let i = t.find_plain(id)?;
            let slot = &t.slots[i];
            Some((SessionHandle { index: i as u16, generation: slot.generation }, slot.target.clone()?))
        })
    }

    /// Looks a session id up as it arrived on the wire.
    pub fn lookup(&self, id: JsonStr<'_>) -> Lookup<T> {
        self.inner.with(|t| match t.find(id) {
            Some(i) => {
                let slot = &t.slots[i];
                let handle = SessionHandle { index: i as u16, generation: slot.generation };
                slot.target.clone().map_or(Lookup::Unknown, |target| Lookup::Found(handle, target))
            }
            None if t.awaiting > 0 => Lookup::Pending,
            None => Lookup::Unknown,
        })
    }

    /// Number of occupied slots.
    pub fn len(&self) -> usize {
        self.inner.with(|t| t.len)
    }

    /// Whether no slot is occupied.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Number of creates in flight whose id the server will assign.
    pub fn awaiting_ids(&self) -> usize {
        self.inner.with(|t| t.awaiting)
    }

    /// The table's capacity, `N`.
    pub const fn capacity(&self) -> usize {
        N
    }

    /// Releases every session, one per `next()` (the lock is taken and
    /// dropped for each, never held while the caller handles one).
    pub fn drain(&self) -> Drain<'_, T, N> {
        Drain { table: self }
    }

    /// Visits the live sessions in slot order, cloning one per `next()`
    /// under the lock (never held between items). Sessions reserved or
    /// released meanwhile may or may not be seen.
    pub fn iter(&self) -> Iter<'_, T, N> {
        Iter { table: self, next: 0 }
    }
}

/// Iterator returned by [`SessionTable::iter`].
pub struct Iter<'t, T, const N: usize> {
    table: &'t SessionTable<T, N>,
    next: usize,
}

impl<T: Clone, const N: usize> Iterator for Iter<'_, T, N> {
    type Item = (SessionHandle, SessionState, T);

    fn next(&mut self) -> Option<Self::Item> {
        self.table.inner.with(|t| {
            while self.next < t.slots.len() {
                let i = self.next;
                self.next += 1;
                let slot = &t.slots[i];
                if let Some(target) = &slot.target {
                    let handle = SessionHandle { index: i as u16, generation: slot.generation };
                    return Some((handle, slot.state, target.clone()));
                }
            }
            None
        })
    }
}

/// Iterator returned by [`SessionTable::drain`].
pub struct Drain<'t, T, const N: usize> {
    table: &'t SessionTable<T, N>,
}

impl<T, const N: usize> Iterator for Drain<'_, T, N> {
    type Item = (SessionHandle, T);

    fn next(&mut self) -> Option<Self::Item> {
        self.table.inner.with(|t| {
            let index = t.slots.iter().position(|s| s.target.is_some())?;
            t.remove(index)
        })
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    extern crate std;

    /// The string inside a JSON string literal, as the router sees it on the wire.
    fn js(text: &'static str) -> JsonStr<'static> {
        crate::json::Value::parse(text.as_bytes()).unwrap().as_str().unwrap()
    }

    #[cfg_attr(not(target_arch = "wasm32"), test)]
    #[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
    fn reserve_find_activate_release() {
        let table: SessionTable<u32, 2> = SessionTable::new();
        let a = table.reserve("a", 1).unwrap();
        assert_eq!(table.state(a), Some(SessionState::Reserved));
        assert_eq!(table.find("a"), Some((a, 1)));
        table.activate(a).unwrap();
        assert_eq!(table.state(a), Some(SessionState::Active));
        table.close(a).unwrap();
        assert_eq!(table.find("a"), Some((a, 1)), "a closing session still receives");
        assert_eq!(table.release(a), Some(1));
        assert_eq!(table.find("a"), None);
        assert!(table.is_empty());
    }

    #[cfg_attr(not(target_arch = "wasm32"), test)]
    #[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
    fn full_and_duplicate_give_the_target_back() {
        let table: SessionTable<&str, 2> = SessionTable::new();
        table.reserve("a", "A").unwrap();
        let dup = table.reserve("a", "A2").unwrap_err();
        assert_eq!((dup.kind, dup.into_inner()), (ReserveErrorKind::Duplicate, "A2"));
        table.reserve("b", "B").unwrap();
        let full = table.reserve("c", "C").unwrap_err();
        assert_eq!((full.kind, full.target), (ReserveErrorKind::Full, "C"));
        let full = table.reserve_unassigned("D").unwrap_err();
        assert_eq!((full.kind, full.target), (ReserveErrorKind::Full, "D"));
        let long = [b'x'; MAX_SESSION_ID_LEN + 1];
        let bad = table.reserve(core::str::from_utf8(&long).unwrap(), "E").unwrap_err();
        assert_eq!(bad.kind, ReserveErrorKind::InvalidId);
        assert_eq!(table.reserve("", "F").unwrap_err().kind, ReserveErrorKind::InvalidId);
    }

    #[cfg_attr(not(target_arch = "wasm32"), test)]
    #[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
    fn stale_handles_never_reach_a_later_session() {
        let table: SessionTable<u32, 1> = SessionTable::new();
        let old = table.reserve("s", 1).unwrap();
        assert_eq!(table.release(old), Some(1));
        let new = table.reserve("s", 2).unwrap();
        assert_eq!(old.index(), new.index());
        assert_ne!(old, new);
        assert_eq!(table.get(old), None);
        assert_eq!(table.release(old), None);
        assert_eq!(table.activate(old), Err(StaleHandle));
        assert_eq!(table.close(old), Err(StaleHandle));
        assert_eq!(table.state(old), None);
        assert_eq!(table.get(new), Some(2));
    }

    #[cfg_attr(not(target_arch = "wasm32"), test)]
    #[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
    fn unassigned_slot_parks_until_named() {
        let table: SessionTable<u32, 4> = SessionTable::new();
        table.reserve("known", 1).unwrap();
        assert_eq!(table.lookup(js("\"x\"")), Lookup::Unknown);
        let h = table.reserve_unassigned(7).unwrap();
        assert_eq!(table.awaiting_ids(), 1);
        assert_eq!(table.state(h), Some(SessionState::AwaitingId));
        assert_eq!(table.lookup(js("\"x\"")), Lookup::Pending);
        assert!(matches!(table.lookup(js("\"known\"")), Lookup::Found(_, 1)));
        assert_eq!(table.activate(h), Err(StaleHandle), "needs an id first");
        assert_eq!(table.assign(h, "known"), Err(ReserveErrorKind::Duplicate));
        table.assign(h, "x").unwrap();
        assert_eq!(table.assign(h, "y"), Err(ReserveErrorKind::NotAwaitingId));
        assert_eq!(table.awaiting_ids(), 0);
        assert_eq!(table.lookup(js("\"x\"")), Lookup::Found(h, 7));
        assert_eq!(table.lookup(js("\"z\"")), Lookup::Unknown);
        // Releasing an unnamed slot ends the parking window too.
        let h2 = table.reserve_unassigned(8).unwrap();
        assert_eq!(table.release(h2), Some(8));
        assert_eq!(table.awaiting_ids(), 0);
        assert_eq!(table.assign(h2, "w"), Err(ReserveErrorKind::StaleHandle));
    }

    #[cfg_attr(not(target_arch = "wasm32"), test)]
    #[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
    fn hashed_index_survives_shared_buckets_and_releases() {
        // 64 ids in 64 buckets: chains form; unlinking from the middle of a
        // chain must keep the rest reachable.
        let table: SessionTable<u32, 64> = SessionTable::new();
        let mut names = [[0u8; 8]; 64];
        let mut handles = [None; 64];
        for (i, name) in names.iter_mut().enumerate() {
            name.copy_from_slice(b"s-000000");
            name[5] = b'0' + (i / 10) as u8;
            name[6] = b'0' + (i % 10) as u8;
            handles[i] = Some(table.reserve(core::str::from_utf8(name).unwrap(), i as u32).unwrap());
        }
        for i in (0..64).step_by(3) {
            assert_eq!(table.release(handles[i].unwrap()), Some(i as u32));
        }
        for (i, name) in names.iter().enumerate() {
            let name = core::str::from_utf8(name).unwrap();
            let expect = (i % 3 != 0).then_some(i as u32);
            assert_eq!(table.find(name).map(|(_, t)| t), expect, "{name}");
            let quoted = [b"\"".as_slice(), name.as_bytes(), b"\""].concat();
            let v = crate::json::Value::parse(&quoted).unwrap();
            assert_eq!(matches!(table.lookup(v.as_str().unwrap()), Lookup::Found(_, t) if t == i as u32), i % 3 != 0);
        }
    }

    #[cfg_attr(not(target_arch = "wasm32"), test)]
    #[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
    fn hashed_index_agrees_with_a_model_under_churn() {
        // Reserve and release in a pseudo-random order; after every step,
        // every id the model holds is found and no other is.
        let table: SessionTable<u32, 16> = SessionTable::new();
        let mut model: std::vec::Vec<(std::string::String, SessionHandle)> = std::vec::Vec::new();
        let mut x: u32 = 12345;
        for step in 0..2000u32 {
            x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
            let name = std::format!("id-{}", (x >> 8) % 40);
            match model.iter().position(|(n, _)| *n == name) {
                Some(i) if !x.is_multiple_of(3) => {
                    let (_, h) = model.swap_remove(i);
                    assert!(table.release(h).is_some());
                }
                Some(_) => assert_eq!(table.reserve(&name, step).unwrap_err().kind, ReserveErrorKind::Duplicate),
                None if model.len() < 16 => model.push((name.clone(), table.reserve(&name, step).unwrap())),
                None => assert_eq!(table.reserve(&name, step).unwrap_err().kind, ReserveErrorKind::Full),
            }
            for k in 0..40 {
                let probe = std::format!("id-{k}");
                let expected = model.iter().find(|(n, _)| *n == probe).map(|(_, h)| *h);
                assert_eq!(table.find(&probe).map(|(h, _)| h), expected, "step {step}: {probe}");
            }
        }
    }

    #[cfg_attr(not(target_arch = "wasm32"), test)]
    #[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
    fn takeover_releases_the_old_holder_of_the_id() {
        let table: SessionTable<u32, 1> = SessionTable::new();
        let old = table.reserve("s", 1).unwrap();
        table.activate(old).unwrap();
        let (new, taken) = table.reserve_takeover("s", 2).unwrap();
        assert_eq!(taken, Some((old, 1)));
        assert_eq!(table.find("s"), Some((new, 2)));
        assert_eq!(table.get(old), None);
        let (_, none) = table.reserve_takeover("s", 3).map(|(h, o)| (h, o.map(|(_, t)| t))).unwrap();
        assert_eq!(none, Some(2));
    }

    #[cfg_attr(not(target_arch = "wasm32"), test)]
    #[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
    fn lookup_compares_decoded_ids() {
        let table: SessionTable<u32, 2> = SessionTable::new();
        table.reserve("a\"b", 1).unwrap();
        let v = crate::json::Value::parse(br#""a\u0022b""#).unwrap();
        assert!(matches!(table.lookup(v.as_str().unwrap()), Lookup::Found(_, 1)));
    }

    #[cfg_attr(not(target_arch = "wasm32"), test)]
    #[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
    fn iter_visits_live_sessions_without_releasing_them() {
        let table: SessionTable<u32, 4> = SessionTable::new();
        let a = table.reserve("a", 1).unwrap();
        let b = table.reserve("b", 2).unwrap();
        table.activate(b).unwrap();
        table.release(a);
        let seen: ([(SessionHandle, SessionState, u32); 1], usize) = {
            let mut out = [(b, SessionState::Reserved, 0); 1];
            let mut n = 0;
            for item in table.iter() {
                out[n] = item;
                n += 1;
            }
            (out, n)
        };
        assert_eq!(seen, ([(b, SessionState::Active, 2)], 1));
        assert_eq!(table.len(), 1);
    }

    #[cfg_attr(not(target_arch = "wasm32"), test)]
    #[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
    fn drain_takes_every_session_once() {
        let table: SessionTable<u32, 4> = SessionTable::new();
        let a = table.reserve("a", 1).unwrap();
        table.reserve_unassigned(2).unwrap();
        table.reserve("c", 3).unwrap();
        let mut got = [0u32; 3];
        for (i, (_, v)) in table.drain().enumerate() {
            got[i] = v;
        }
        got.sort_unstable();
        assert_eq!(got, [1, 2, 3]);
        assert!(table.is_empty());
        assert_eq!(table.awaiting_ids(), 0);
        assert_eq!(table.get(a), None);
        assert_eq!(table.capacity(), 4);
    }
}
