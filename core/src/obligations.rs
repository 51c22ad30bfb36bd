//! The table of open obligations: waits of the agent that this client has
//! taken on and not yet answered.
//!
//! A slot is reached only through an [`ObligationId`] (index and
//! generation). Answering takes the slot out, and freeing it changes its
//! generation, so a second answer or a stale id finds nothing: every
//! obligation is discharged exactly once by construction.
//!
//! The table also remembers the waits it discharged last ([`Recent`]):
//! a wait the CLI names again (its event after the same wait came in a
//! pending list, or the reverse) is known, and not taken on twice.

use core::fmt;

use heapless::Vec;

use crate::session::SessionHandle;

/// The longest session id kept, as written on the wire (escapes kept).
pub const MAX_KEPT_SESSION_ID: usize = 96;
/// The longest request id kept, as JSON text (quotes and escapes kept).
pub const MAX_KEPT_REQUEST_ID: usize = 80;

/// A handle to one open obligation. Copy it to the code that calls the
/// user's handler; give it back to [`Engine::answer`](crate::Engine::answer)
/// or [`Engine::refuse`](crate::Engine::refuse).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ObligationId {
    index: u32,
    generation: u32,
}

impl ObligationId {
    /// The id as one number (for a binding that passes numbers around).
    pub const fn to_bits(self) -> u64 {
        ((self.generation as u64) << 32) | self.index as u64
    }

    /// The id from [`to_bits`](Self::to_bits).
    pub const fn from_bits(bits: u64) -> Self {
        ObligationId { index: bits as u32, generation: (bits >> 32) as u32 }
    }
}

impl fmt::Display for ObligationId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.index, self.generation)
    }
}

/// No deadline.
pub(crate) const NEVER: u64 = u64::MAX;

/// What an open obligation remembers: enough to answer it without the frame.
pub(crate) struct Open {
    /// Index into [`crate::answers::ANSWERS`].
    pub(crate) row: u16,
    pub(crate) session: Option<SessionHandle>,
    /// The session id as written (no quotes); empty if the wait names none.
    pub(crate) session_id: Vec<u8, MAX_KEPT_SESSION_ID>,
    /// The event's `requestId` or the request's JSON-RPC id, as JSON text.
    pub(crate) request_id: Vec<u8, MAX_KEPT_REQUEST_ID>,
    pub(crate) opened: u64,
    pub(crate) deadline: u64,
    /// Left to another client of the session: settled for the host (its id
    /// reaches nothing), kept until the CLI reports the wait answered or
    /// the deadline passes, and never answered from here.
    pub(crate) left: bool,
    /// The CLI reported the wait answered (by another client) while it was
    /// still the host's: if the host leaves it, it is forgotten at once.
    pub(crate) reported: bool,
}

struct Slot {
    generation: u32,
    open: Option<Open>,
}

impl Slot {
    const FREE: Self = Slot { generation: 0, open: None };
}

/// The ids of the last `N` waits discharged, as hashes
/// ([`wait_hash`]): a ring, the oldest forgotten first. Its bound is the
/// obligation table's capacity, so a client remembers at least as many
/// answered waits as it can have open at once; a wait answered more than
/// `N` discharges ago and named again is taken on again (its second answer
/// gets the CLI's `{success:false}`).
pub(crate) struct Recent<const N: usize> {
    hashes: crate::slots::Fixed<u64, N>,
    /// Beside each hash, the number of the answering RPC its answer went
    /// in (`answer-<n>`) until the CLI acknowledged it; 0: acknowledged,
    /// or answered in a response (nothing acknowledges those).
    unconfirmed: crate::slots::Fixed<u64, N>,
    /// Where the next hash goes.
    at: usize,
}

impl<const N: usize> Recent<N> {
    fn new() -> Self {
        #[cfg(not(feature = "alloc"))]
        let (hashes, unconfirmed) = ([0; N], [0; N]);
        #[cfg(feature = "alloc")]
        let (hashes, unconfirmed) = (alloc::vec![0; N], alloc::vec![0; N]);
        Recent { hashes, unconfirmed, at: 0 }
    }

    fn push(&mut self, hash: u64) {
        if N == 0 {
            return;
        }
        self.hashes[self.at] = hash;
        self.unconfirmed[self.at] = 0;
        self.at = (self.at + 1) % N;
    }

    /// Notes that the wait pushed last, if its hash is `hash`, was answered
    /// in the answering RPC numbered `answer`, not yet acknowledged.
    fn sent_as(&mut self, hash: u64, answer: u64) {
        let last = (self.at + N.max(1) - 1) % N.max(1);
        if N > 0 && self.hashes[last] == hash {
            self.unconfirmed[last] = answer;
        }
    }

    /// The CLI acknowledged the answering RPC numbered `answer`: its wait
    /// stays known if the CLI `took` the answer, and is forgotten if not.
    fn confirm(&mut self, answer: u64, took: bool) {
        if let Some(i) = self.unconfirmed.iter().position(|a| *a == answer) {
            self.unconfirmed[i] = 0;
            if !took {
                self.hashes[i] = 0;
            }
        }
    }

    /// Forgets the waits whose answer was not acknowledged (it may have
    /// been lost with the connection) and went in an answering RPC
    /// numbered before `queued` (from it on, they are still queued).
    fn forget_unconfirmed(&mut self, queued: u64) {
        for (hash, answer) in self.hashes.iter_mut().zip(self.unconfirmed.iter_mut()) {
            if *answer != 0 && *answer < queued {
                (*hash, *answer) = (0, 0);
            }
        }
    }

    /// Forgets the hash pushed last (its discharge was undone).
    fn pop(&mut self) {
        if N == 0 {
            return;
        }
        self.at = (self.at + N - 1) % N;
        self.hashes[self.at] = 0;
        self.unconfirmed[self.at] = 0;
    }

    fn contains(&self, hash: u64) -> bool {
        self.hashes.contains(&hash)
    }
}

/// The hash of a wait's kind and ids, as [`Open`] keeps them: its row, the
/// session id as written and the request id as JSON text, given in parts
/// (a server request's id and an event's request id never match, being of
/// other rows). FNV-1a (64 bits), never 0 (0 marks an empty place). Two
/// waits of the CLI's (UUIDs) sharing a hash is a 1 in 2^64 chance per
/// pair remembered.
pub(crate) fn wait_hash(row: u16, session_id: &[u8], request_id: [&[u8]; 3]) -> u64 {
    const PRIME: u64 = 0x0000_0100_0000_01b3;
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut eat = |bytes: &[u8]| {
        for &b in bytes {
            h = (h ^ u64::from(b)).wrapping_mul(PRIME);
        }
    };
    eat(&row.to_le_bytes());
    eat(session_id);
    // A byte no JSON text of an id holds between the two: ("ab","c") and
    // ("a","bc") differ.
    eat(&[0xff]);
    request_id.iter().for_each(|p| eat(p));
    h.max(1)
}

/// Up to `N` open obligations.
pub(crate) struct Obligations<const N: usize> {
    slots: crate::slots::Slots<Slot, N>,
    recent: Recent<N>,
    /// The waits refused at once (no obligation: the table full, their
    /// data unreadable), apart, so that a burst of them does not push the
    /// answered waits out of `recent`.
    refused: Recent<N>,
    len: usize,
    /// Of `len`, those left to another client.
    left: usize,
    /// Where the search for a free slot starts (the slot after the last one
    /// taken), so opening is cheap while the table is far from full.
    hint: usize,
}

impl<const N: usize> Obligations<N> {
    const FITS: () = assert!(N <= u32::MAX as usize, "too many obligations");

    pub(crate) fn new() -> Self {
        #[allow(clippy::let_unit_value)]
        let () = Self::FITS;
        Obligations {
            slots: crate::slots::slots![Slot::FREE; N],
            recent: Recent::new(),
            refused: Recent::new(),
            len: 0,
            left: 0,
            hint: 0,
        }
    }

    pub(crate) fn open(&mut self, open: Open) -> Option<ObligationId> {
        if self.len == N {
            return None;
        }
        // `len < N` guarantees a free slot.
        let (index, slot) =
            crate::slots::claim::<_, N>(&mut self.slots, self.hint, |s| s.open.is_none(), || Slot::FREE)?;
        slot.open = Some(open);
        self.len += 1;
        self.hint = index + 1;
        Some(ObligationId { index: index as u32, generation: slot.generation })
    }

    /// The slot of an obligation still the host's to settle (open, not left).
    fn slot(&self, id: ObligationId) -> Option<&Slot> {
        self.slots
            .get(id.index as usize)
            .filter(|s| s.generation == id.generation && s.open.as_ref().is_some_and(|o| !o.left))
    }

    /// How many obligations are left to another client.
    pub(crate) fn left(&self) -> usize {
        self.left
    }

    /// Whether no obligation is held (the left ones included).
    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The CLI reported the wait of answer row `row` with the request id
    /// `rid` (as written, without quotes) answered in `session`: a left
    /// one is forgotten (`true`); one still the host's is marked
    /// `reported`.
    pub(crate) fn note_answered(&mut self, session: SessionHandle, row: u16, rid: &[u8]) -> bool {
        let found = self.slots.iter().position(|s| {
            s.open.as_ref().is_some_and(|o| {
                o.row == row
                    && o.session == Some(session)
                    && o.request_id.len() == rid.len() + 2
                    && o.request_id[1..o.request_id.len() - 1] == *rid
            })
        });
        let Some(index) = found else { return false };
        match self.slots[index].open.as_mut() {
            Some(o) if !o.left => {
                o.reported = true;
                false
            }
            _ => self.remove(index).is_some(),
        }
    }

    pub(crate) fn get(&self, id: ObligationId) -> Option<&Open> {
        self.slot(id).and_then(|s| s.open.as_ref())
    }

    pub(crate) fn take(&mut self, id: ObligationId) -> Option<Open> {
        self.slot(id)?;
        self.remove(id.index as usize)
    }

    /// Takes the obligation out of its slot; remembered as discharged.
    fn remove(&mut self, index: usize) -> Option<Open> {
        let open = self.forget(index)?;
        self.recent.push(wait_hash(open.row, &open.session_id, [&open.request_id, b"", b""]));
        Some(open)
    }

    /// Takes the obligation out of its slot without remembering it.
    fn forget(&mut self, index: usize) -> Option<Open> {
        let slot = &mut self.slots[index];
        let open = slot.open.take()?;
        slot.generation = slot.generation.wrapping_add(1);
        self.len -= 1;
        self.left -= usize::from(open.left);
        Some(open)
    }

    /// Puts back the obligation just taken as `id` (its frame found no
    /// room, or it is now left to another client): `id` reaches it again,
    /// unless it is left, and it is no longer remembered as discharged.
    /// Nothing else can have used the slot or the memory meanwhile: the
    /// table was borrowed throughout.
    pub(crate) fn restore(&mut self, id: ObligationId, open: Open) {
        if let Some(slot) = self.slots.get_mut(id.index as usize) {
            slot.generation = id.generation;
            self.left += usize::from(open.left);
            slot.open = Some(open);
            self.len += 1;
            self.recent.pop();
        }
    }

    /// Forgets every open obligation without remembering them as
    /// discharged (the connection is gone: none was answered, so a list
    /// read after a reconnect may name them again). Returns how many.
    pub(crate) fn forget_all(&mut self) -> usize {
        let mut n = 0;
        for index in 0..self.slots.len() {
            n += usize::from(self.forget(index).is_some());
        }
        n
    }

    /// The connection is lost, and another may follow (a restarted CLI, a
    /// reconnect): forgets the open obligations `keep` does not keep, and
    /// the discharged waits whose answer the CLI did not acknowledge and
    /// went to the lost connection, in an answering RPC numbered before
    /// `queued` (it may have been lost: a list read later names them
    /// again, and they are taken on again); those from `queued` on are
    /// still queued for the next connection, and stay discharged. Returns
    /// how many open obligations it forgot.
    pub(crate) fn connection_lost(&mut self, queued: u64, mut keep: impl FnMut(&Open) -> bool) -> usize {
        let mut n = 0;
        for index in 0..self.slots.len() {
            if self.slots[index].open.as_ref().is_some_and(|o| !keep(o)) {
                n += usize::from(self.forget(index).is_some());
            }
        }
        self.recent.forget_unconfirmed(queued);
        self.refused.forget_unconfirmed(queued);
        n
    }

    /// `open`, discharged last, was answered in the answering RPC numbered
    /// `answer`: until [`confirm`](Self::confirm)ed, the loss of the
    /// connection forgets it was answered.
    pub(crate) fn sent_as(&mut self, open: &Open, answer: u64) {
        self.recent.sent_as(wait_hash(open.row, &open.session_id, [&open.request_id, b"", b""]), answer);
    }

    /// Remembers the wait `(row, session_id, request_id)` (as for
    /// [`knows`](Self::knows)) as discharged without an obligation: it was
    /// refused at once, in the answering RPC numbered `answer` (0: none).
    pub(crate) fn discharged(&mut self, row: u16, session_id: &[u8], request_id: [&[u8]; 3], answer: u64) {
        let hash = wait_hash(row, session_id, request_id);
        self.refused.push(hash);
        self.refused.sent_as(hash, answer);
    }

    /// The CLI acknowledged the answering RPC numbered `answer`, and `took`
    /// it or refused it (`success:false`: the wait is not pending there;
    /// a list that names it later finds it pending again, as when its
    /// session was not loaded in a restarted CLI, and it is taken on
    /// again; a wait another client answered is never listed again).
    pub(crate) fn confirm(&mut self, answer: u64, took: bool) {
        self.recent.confirm(answer, took);
        self.refused.confirm(answer, took);
    }

    /// Whether the wait `(row, session_id, request_id)` (as [`Open`] keeps
    /// them; `request_id` as JSON text in parts) is open here, or among
    /// the waits discharged last.
    pub(crate) fn knows(&self, row: u16, session_id: &[u8], request_id: [&[u8]; 3]) -> bool {
        let same = |o: &Open| {
            o.row == row && o.session_id == session_id && {
                let [a, b, c] = request_id;
                o.request_id.len() == a.len() + b.len() + c.len()
                    && o.request_id.starts_with(a)
                    && o.request_id[a.len()..].starts_with(b)
                    && o.request_id.ends_with(c)
            }
        };
        let hash = wait_hash(row, session_id, request_id);
        self.recent.contains(hash)
            || self.refused.contains(hash)
            || self.slots.iter().filter_map(|s| s.open.as_ref()).any(same)
    }

    /// Makes every obligation matching `f` due now (its deadline passed),
    /// so [`next_deadline`](Self::next_deadline) reports it.
    pub(crate) fn make_due(&mut self, mut f: impl FnMut(&Open) -> bool) {
        for open in self.slots.iter_mut().filter_map(|s| s.open.as_mut()) {
            if f(open) {
                open.deadline = 0;
            }
        }
    }

    /// Takes one obligation matching `f`, if any.
    pub(crate) fn take_where(&mut self, mut f: impl FnMut(&Open) -> bool) -> Option<(ObligationId, Open)> {
        let index = self.slots.iter().position(|s| s.open.as_ref().is_some_and(&mut f))?;
        let generation = self.slots[index].generation;
        self.remove(index).map(|o| (ObligationId { index: index as u32, generation }, o))
    }

    /// Points the obligations of session `from` at session `to`.
    pub(crate) fn retarget(&mut self, from: SessionHandle, to: SessionHandle) {
        for open in self.slots.iter_mut().filter_map(|s| s.open.as_mut()) {
            if open.session == Some(from) {
                open.session = Some(to);
            }
        }
    }

    pub(crate) fn next_deadline(&self) -> Option<u64> {
        let next = self.slots.iter().filter_map(|s| s.open.as_ref()).fold(NEVER, |next, o| next.min(o.deadline));
        (next != NEVER).then_some(next)
    }

    /// When the oldest obligation still the host's was opened.
    pub(crate) fn oldest(&self) -> Option<u64> {
        let open = self.slots.iter().filter_map(|s| s.open.as_ref()).filter(|o| !o.left);
        open.fold(None, |oldest: Option<u64>, o| Some(oldest.map_or(o.opened, |t| t.min(o.opened))))
    }

    /// Obligations still the host's to settle (the left ones aside).
    pub(crate) fn len(&self) -> usize {
        self.len - self.left
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    fn open(opened: u64) -> Open {
        Open {
            row: 0,
            session: None,
            session_id: Vec::new(),
            request_id: Vec::new(),
            opened,
            deadline: NEVER,
            left: false,
            reported: false,
        }
    }

    #[cfg_attr(not(target_arch = "wasm32"), test)]
    #[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
    fn each_obligation_is_taken_once_and_stale_ids_find_nothing() {
        let mut t: Obligations<2> = Obligations::new();
        let a = t.open(open(1)).unwrap();
        let b = t.open(open(2)).unwrap();
        assert!(t.open(open(3)).is_none(), "full");
        assert_eq!(t.oldest(), Some(1));
        assert!(t.take(a).is_some());
        assert!(t.take(a).is_none(), "a second answer finds nothing");
        let c = t.open(open(4)).unwrap();
        assert_eq!(c.index, a.index, "the slot is reused");
        assert!(t.get(a).is_none(), "the old id does not reach the new obligation");
        assert_eq!(ObligationId::from_bits(c.to_bits()), c);
        assert!(t.take(b).is_some() && t.take(c).is_some());
        assert_eq!((t.len(), t.oldest()), (0, None));
    }

    fn wait(row: u16, request_id: &[u8]) -> Open {
        Open {
            row,
            session: None,
            session_id: Vec::from_slice(b"s").unwrap(),
            request_id: Vec::from_slice(request_id).unwrap(),
            opened: 0,
            deadline: NEVER,
            left: false,
            reported: false,
        }
    }

    #[cfg_attr(not(target_arch = "wasm32"), test)]
    #[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
    fn waits_are_known_while_open_and_after_their_answer_within_the_bound() {
        let mut t: Obligations<2> = Obligations::new();
        let rid = [&b"\""[..], b"r1", b"\""];
        assert!(!t.knows(0, b"s", rid));
        let a = t.open(wait(0, b"\"r1\"")).unwrap();
        assert!(t.knows(0, b"s", rid), "open");
        assert!(!t.knows(1, b"s", rid), "another row's wait of the same id");
        assert!(!t.knows(0, b"t", rid), "another session's");
        // Taken and put back (no room to send): open again, not answered.
        let open = t.take(a).unwrap();
        t.restore(a, open);
        assert_eq!(t.recent.hashes.iter().filter(|h| **h != 0).count(), 0, "the undone discharge is forgotten");
        t.take(a).unwrap();
        assert!(t.knows(0, b"s", rid), "answered");
        // Two more answered: the bound (2) forgets the first.
        for id in [&b"\"r2\""[..], b"\"r3\""] {
            let o = t.open(wait(0, id)).unwrap();
            t.take(o).unwrap();
        }
        assert!(!t.knows(0, b"s", rid), "forgotten at the bound");
        // The connection's end forgets open waits without remembering them.
        t.open(wait(0, b"\"r4\"")).unwrap();
        assert_eq!(t.forget_all(), 1);
        assert!(!t.knows(0, b"s", [&b"\""[..], b"r4", b"\""]));
    }
}
