//! The protocol's constants, the client's defaults and its capacities, once
//! for every host. The Rust host sizes its engine and its queues with them;
//! the JavaScript client reads them through the binding (`policy()`), so a
//! bound or a default cannot differ between the two.
//!
//! Times are milliseconds (the core reads no clock; a host converts).

/// The protocol version this client speaks: the `protocolVersion` that
/// `connect` (or `ping`) must report.
pub const PROTOCOL_VERSION: u64 = 3;

/// How long a call to the CLI may take unless the caller says otherwise.
pub const DEFAULT_REQUEST_TIMEOUT_MS: u64 = 60_000;
/// How long a user's handler may take to answer a wait of the agent before
/// the engine refuses in its place ([`EngineConfig::handler_timeout`](crate::EngineConfig)).
pub const DEFAULT_HANDLER_TIMEOUT_MS: u64 = 5 * 60_000;
/// How long a running turn may be silent (no event of its session) before
/// the engine asks the CLI which of its waits are pending
/// ([`EngineConfig::stall_interval`](crate::EngineConfig)): a wait whose
/// event was lost on the way is found then, not never. Each ask is two
/// small requests. A turn that stays silent is asked again after twice the
/// previous wait, up to [`MAX_STALL_INTERVAL_MS`]: a lost wait (the turn
/// goes silent at once) is found within 2 s, and a turn silent for long on
/// purpose (a long tool run, a model thinking) costs two requests at 2, 6,
/// 14, 30 and 60 s, then every 30 s.
pub const DEFAULT_STALL_INTERVAL_MS: u64 = 2_000;
/// The longest wait between two asks of a turn that stays silent (see
/// [`DEFAULT_STALL_INTERVAL_MS`]).
pub const MAX_STALL_INTERVAL_MS: u64 = 30_000;
/// How long a session's destroy, and a whole stop, wait for a CLI that does
/// not answer before everything is released.
pub const DEFAULT_SHUTDOWN_GRACE_MS: u64 = 3_000;
/// How long starting a CLI and its handshake may take.
pub const DEFAULT_STARTUP_TIMEOUT_MS: u64 = 60_000;

/// Sessions one client can have open at once (the engine's `SESSIONS`).
pub const MAX_SESSIONS: usize = 16_384;
/// Requests one client can have in flight at once (the engine's `PENDING`).
pub const MAX_PENDING_REQUESTS: usize = 1024;
/// Waits of the agent open at once (the engine's `OBLIGATIONS`); past it a
/// new wait is refused at once, never dropped.
pub const MAX_OBLIGATIONS: usize = 4096;
/// Frames parked while a create whose id the server assigns is in flight,
/// at most ([`EngineConfig::park_frames`](crate::EngineConfig)). A burst of
/// this many events before the create's answer reaches the session whole.
pub const MAX_PARKED_FRAMES: usize = 10_000;
/// Bytes of those parked frames, at most (the engine's parking storage).
pub const MAX_PARKED_BYTES: usize = 8 << 20;
/// The largest frame accepted. Read buffers start small and grow to it
/// only when such a frame arrives.
pub const MAX_FRAME_BYTES: usize = 64 << 20;

/// Bytes of events a host holds for subscribers that have not taken them
/// yet, across a connection's sessions, before it stops reading (the
/// host's reader pauses, as [`Backlog`](crate::Backlog) says: a consumer
/// slower than the CLI holds the CLI back instead of growing memory).
/// Reading goes on when half of it has been taken, or at once when a
/// request waits for its answer.
pub const MAX_BACKLOG_BYTES: usize = 1 << 20;
/// How long a full backlog may stay untouched before the reader reads on
/// anyway (a subscriber that never reads must not stop the others).
pub const BACKLOG_STALL_MS: u64 = 1_000;

/// Events a session keeps for a first subscriber that has yet to come, at
/// most (see [`keeps_for_first_subscriber`]).
pub const MAX_KEPT_EVENTS: usize = 1024;
/// Bytes of the JSON of those events, at most.
pub const MAX_KEPT_BYTES: usize = 4 << 20;

/// Whether a session that nobody has subscribed to yet keeps an event of
/// `size` bytes (its JSON) for its first subscriber, when it keeps `events`
/// events of `bytes` bytes so far and has already left out `left_out`.
///
/// The kept events are a prefix of the session's events: at most
/// [`MAX_KEPT_EVENTS`] and [`MAX_KEPT_BYTES`], and once one event is left
/// out no later one is kept, so a late first subscriber sees the session's
/// first events without a gap, then the live ones. A whole turn (tens of
/// events) fits many times over; a session used only through
/// `send_and_wait` keeps its memory flat. Events left out are still
/// delivered to every subscriber present; hosts count them.
pub const fn keeps_for_first_subscriber(events: usize, bytes: usize, left_out: u64, size: usize) -> bool {
    left_out == 0 && events < MAX_KEPT_EVENTS && size <= MAX_KEPT_BYTES.saturating_sub(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg_attr(not(target_arch = "wasm32"), test)]
    #[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
    fn the_first_events_are_kept_up_to_either_bound_and_none_after_a_gap() {
        assert!(keeps_for_first_subscriber(0, 0, 0, 100));
        assert!(keeps_for_first_subscriber(MAX_KEPT_EVENTS - 1, 0, 0, 1));
        assert!(!keeps_for_first_subscriber(MAX_KEPT_EVENTS, 0, 0, 1), "count bound");
        assert!(keeps_for_first_subscriber(1, MAX_KEPT_BYTES - 10, 0, 10));
        assert!(!keeps_for_first_subscriber(1, MAX_KEPT_BYTES - 10, 0, 11), "byte bound");
        assert!(!keeps_for_first_subscriber(0, 0, 0, MAX_KEPT_BYTES + 1), "one event over the bytes");
        // A small event after one left out is not kept: no gap.
        assert!(!keeps_for_first_subscriber(1, 10, 1, 1));
        // No overflow near the ends of usize.
        assert!(!keeps_for_first_subscriber(0, usize::MAX, 0, usize::MAX));
    }

    #[cfg_attr(not(target_arch = "wasm32"), test)]
    #[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
    fn the_engine_defaults_are_these_limits() {
        let config = crate::EngineConfig::default();
        assert_eq!(config.handler_timeout, Some(DEFAULT_HANDLER_TIMEOUT_MS));
        assert_eq!(config.request_timeout, Some(DEFAULT_REQUEST_TIMEOUT_MS));
        assert_eq!(config.park_frames, MAX_PARKED_FRAMES);
    }
}
