//! Events not lost across a gap: after a connection was lost and the
//! session resumed, the durable events the CLI persisted that this client
//! did not deliver are read back from the session's event log and
//! delivered, in order, each once, before the live stream goes on.
//!
//! The engine notes, per session, the id of the last durable (not
//! `ephemeral`) event it routed ([`Engine::last_durable_event`]). The log
//! holds the durable events in the order the live stream had them, with
//! the same ids (read with [`EVENT_LOG_READ`], ephemeral events left out:
//! a restarted CLI has none of the old ones). What follows the noted id
//! in the log is what was not delivered ([`undelivered_from`]); an event
//! of it that the live stream also brought after the resume is delivered
//! once, by its id.

use super::Engine;
use crate::frame::FrameBuffer;
use crate::session::SessionHandle;

/// The request that reads a session's event log: params `{sessionId,
/// direction: "backward", max, includeEphemeral: false, cursor?}`, result
/// `{events, cursor, hasMore}`. A backward read gives its events oldest
/// first, and its `cursor` reads on further back.
pub const EVENT_LOG_READ: &str = "session.eventLog.read";

/// Events asked per read of the log.
pub const EVENT_LOG_PAGE: usize = 200;

/// Reads of the log, at most, looking back for the last event delivered;
/// past them the gap is reported as unknown and nothing is delivered from
/// the log.
pub const EVENT_LOG_MAX_PAGES: usize = 10;

/// The hash of an event id as its JSON text has it (FNV-1a, 64 bits,
/// never 0).
pub fn event_id_hash(id: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in id {
        h = (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3);
    }
    h.max(1)
}

/// The [`event_id_hash`] of the `id` of an event (its JSON object), if
/// it has one.
pub fn event_id_of(event: &[u8]) -> Option<u64> {
    let id = crate::json::Value::parse(event).ok()?.get("id")?.as_str()?;
    Some(event_id_hash(id.raw().as_bytes()))
}

/// Where the events not delivered start in a log whose events' ids hash
/// to `ids` ([`event_id_of`]; oldest first): just after the event whose id
/// hashes to `last` ([`Engine::last_durable_event`]). `None` when it is not
/// among them (read further back).
pub fn undelivered_from(last: u64, ids: impl IntoIterator<Item = Option<u64>>) -> Option<usize> {
    let mut found = None;
    for (i, id) in ids.into_iter().enumerate() {
        if id == Some(last) {
            found = Some(i + 1);
        }
    }
    found
}

/// One event of a recovery's delivery ([`gap_delivery_order`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GapEvent {
    /// The gap's event at this index (of the `gap` given).
    Log(usize),
    /// The live event held at this index (of the `held` given).
    Held(usize),
}

/// The order in which a recovery delivers a session's events
/// ([`RecoveryStep::Deliver`](crate::RecoveryStep)): `gap`, the ids
/// ([`event_id_of`]) of the log's events not delivered (the log read back
/// from the step's `from` on, oldest first), and `held`, those of the live
/// events held since the resume, in the order they came. The two are
/// merged in wire order: the gap's events up to the first that is also
/// held (they came before the resume), then the held ones in their live
/// order, any other gap event that was not held just before the next held
/// event that comes after it in the log (the rest at the end). An event in both (by id) is delivered once,
/// as held. An event without an id (`None`) is never taken for another.
pub fn gap_delivery_order<'a>(gap: &'a [Option<u64>], held: &'a [Option<u64>]) -> impl Iterator<Item = GapEvent> + 'a {
    let in_held = move |id: Option<u64>| id.is_some() && held.contains(&id);
    // The gap's events before the first held one came before the resume.
    let first = gap.iter().position(|e| in_held(*e)).unwrap_or(gap.len());
    let (mut g, mut h) = (0, 0);
    core::iter::from_fn(move || loop {
        if g < first {
            g += 1;
            return Some(GapEvent::Log(g - 1));
        }
        // Where the next held event is in the gap, if it is.
        let at = held.get(h).map(|id| gap.iter().skip(g).position(|e| id.is_some() && e == id).map(|p| g + p));
        match at {
            // Past the held events: the rest of the gap not held.
            None => {
                let e = gap.get(g)?;
                g += 1;
                if !in_held(*e) {
                    return Some(GapEvent::Log(g - 1));
                }
            }
            // The gap's events before it first.
            Some(Some(p)) if g < p => {
                g += 1;
                if !in_held(gap[g - 1]) {
                    return Some(GapEvent::Log(g - 1));
                }
            }
            Some(p) => {
                g += usize::from(p.is_some());
                h += 1;
                return Some(GapEvent::Held(h - 1));
            }
        }
    })
}

impl<
        T: Clone,
        W,
        P: FrameBuffer,
        X: FrameBuffer,
        const SESSIONS: usize,
        const PENDING: usize,
        const OBLIGATIONS: usize,
    > Engine<T, W, P, X, SESSIONS, PENDING, OBLIGATIONS>
{
    /// The hash ([`event_id_hash`]) of the id of the last durable event
    /// routed to session `handle`, if one was.
    pub fn last_durable_event(&self, handle: SessionHandle) -> Option<u64> {
        let (hash, generation) = *self.core.last_durable.get(handle.index())?;
        (hash != 0 && generation == handle.generation()).then_some(hash)
    }

    /// Sets the mark of session `handle`'s last durable event delivered
    /// (0: none).
    pub(crate) fn set_last_durable(&mut self, handle: SessionHandle, hash: u64) {
        if let Some(slot) = self.core.last_durable.get_mut(handle.index()) {
            *slot = (hash, handle.generation());
        }
    }

    /// Whether session `handle` was created here (not resumed or joined):
    /// every durable event of its log is this client's to deliver.
    pub(crate) fn created_here(&self, handle: SessionHandle) -> bool {
        self.core.resumed.get(handle.index()) == Some(&false)
    }

    /// The events of session `handle`'s gap were delivered by the host,
    /// the last with the id hashing to `last`: it is the last delivered
    /// unless a live durable event was routed since the mark `mark` was
    /// taken (that one is later in the log; 0: there was none).
    pub(crate) fn gap_delivered(&mut self, handle: SessionHandle, mark: u64, last: u64) {
        if self.last_durable_event(handle).unwrap_or(0) == mark {
            if let Some(slot) = self.core.last_durable.get_mut(handle.index()) {
                *slot = (last, handle.generation());
            }
        }
    }
}

impl<T: Clone, W, X: FrameBuffer, const SESSIONS: usize, const PENDING: usize, const OBLIGATIONS: usize>
    super::Core<T, W, X, SESSIONS, PENDING, OBLIGATIONS>
{
    /// Notes a routed event of session `handle`, if durable.
    pub(super) fn note_delivered(&mut self, handle: SessionHandle, event: &crate::envelope::EventInfo<'_>) {
        if event.ephemeral {
            return;
        }
        if let (Some(id), Some(slot)) = (event.id, self.last_durable.get_mut(handle.index())) {
            *slot = (event_id_hash(id.raw().as_bytes()), handle.generation());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn order(gap: &[Option<u64>], held: &[Option<u64>]) -> ([GapEvent; 8], usize) {
        let mut out = [GapEvent::Log(99); 8];
        let mut n = 0;
        for (slot, e) in out.iter_mut().zip(gap_delivery_order(gap, held)) {
            *slot = e;
            n += 1;
        }
        (out, n)
    }

    #[cfg_attr(not(target_arch = "wasm32"), test)]
    #[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
    fn a_recovery_delivers_the_gap_and_the_held_events_in_wire_order() {
        use GapEvent::{Held, Log};
        let [a, b, c, d] = [Some(1), Some(2), Some(3), Some(4)];
        // The log has a, b before the resume, then c and d, which came
        // live with an ephemeral event (no id in the log) between them.
        let (out, n) = order(&[a, b, c, d], &[c, None, d]);
        assert_eq!(out[..n], [Log(0), Log(1), Held(0), Held(1), Held(2)], "c, the ephemeral one, then d");
        // Nothing held, or nothing of the log.
        assert_eq!(order(&[a, b], &[]).0[..2], [Log(0), Log(1)]);
        assert_eq!(order(&[a, b], &[]).1, 2);
        let (out, n) = order(&[], &[None, c]);
        assert_eq!(out[..n], [Held(0), Held(1)]);
        // A gap event the live stream did not bring goes before the next
        // held one after it in the log, and the rest of the gap at the end.
        let (out, n) = order(&[a, b, c, d], &[None, b, d]);
        assert_eq!(out[..n], [Log(0), Held(0), Held(1), Log(2), Held(2)]);
        let (out, n) = order(&[a, b, c], &[a, None]);
        assert_eq!(out[..n], [Held(0), Held(1), Log(1), Log(2)]);
        // Events without an id are never taken for one another.
        let (out, n) = order(&[None, a], &[None]);
        assert_eq!(out[..n], [Log(0), Log(1), Held(0)]);
    }

    #[cfg_attr(not(target_arch = "wasm32"), test)]
    #[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
    fn the_undelivered_events_start_after_the_last_one_delivered() {
        let ids = [Some(event_id_hash(b"a")), Some(event_id_hash(b"b")), None, Some(event_id_hash(b"c"))];
        assert_eq!(undelivered_from(event_id_hash(b"b"), ids), Some(2));
        assert_eq!(undelivered_from(event_id_hash(b"c"), ids), Some(4), "nothing missed");
        assert_eq!(undelivered_from(event_id_hash(b"z"), ids), None, "read further back");
    }
}
