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

    /// The events of session `handle`'s gap were delivered by the host,
    /// the last with the id hashing to `last`: it is the last delivered
    /// unless a live durable event was routed since the mark `mark` was
    /// taken (that one is later in the log).
    pub(crate) fn gap_delivered(&mut self, handle: SessionHandle, mark: u64, last: u64) {
        if self.last_durable_event(handle) == Some(mark) {
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

    #[cfg_attr(not(target_arch = "wasm32"), test)]
    #[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
    fn the_undelivered_events_start_after_the_last_one_delivered() {
        let ids = [Some(event_id_hash(b"a")), Some(event_id_hash(b"b")), None, Some(event_id_hash(b"c"))];
        assert_eq!(undelivered_from(event_id_hash(b"b"), ids), Some(2));
        assert_eq!(undelivered_from(event_id_hash(b"c"), ids), Some(4), "nothing missed");
        assert_eq!(undelivered_from(event_id_hash(b"z"), ids), None, "read further back");
    }
}
