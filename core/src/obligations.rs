//! The table of open obligations: waits of the agent that this client has
//! taken on and not yet answered.
//!
//! A slot is reached only through an [`ObligationId`] (index and
//! generation). Answering takes the slot out, and freeing it changes its
//! generation, so a second answer or a stale id finds nothing: every
//! obligation is discharged exactly once by construction.

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

/// Up to `N` open obligations.
pub(crate) struct Obligations<const N: usize> {
    slots: crate::slots::Slots<Slot, N>,
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
        Obligations { slots: crate::slots::slots![Slot::FREE; N], len: 0, left: 0, hint: 0 }
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

    fn remove(&mut self, index: usize) -> Option<Open> {
        let slot = &mut self.slots[index];
        let open = slot.open.take()?;
        slot.generation = slot.generation.wrapping_add(1);
        self.len -= 1;
        self.left -= usize::from(open.left);
        Some(open)
    }

    /// Puts back the obligation just taken as `id` (its frame found no
    /// room, or it is now left to another client): `id` reaches it again,
    /// unless it is left. Nothing else can have used the slot meanwhile:
    /// the table was borrowed throughout.
    pub(crate) fn restore(&mut self, id: ObligationId, open: Open) {
        if let Some(slot) = self.slots.get_mut(id.index as usize) {
            slot.generation = id.generation;
            self.left += usize::from(open.left);
            slot.open = Some(open);
            self.len += 1;
        }
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
        self.slots.iter().filter_map(|s| s.open.as_ref()).map(|o| o.deadline).filter(|d| *d != NEVER).min()
    }

    /// When the oldest obligation still the host's was opened.
    pub(crate) fn oldest(&self) -> Option<u64> {
        self.slots.iter().filter_map(|s| s.open.as_ref()).filter(|o| !o.left).map(|o| o.opened).min()
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
}
