//! The handler kinds this client offers.

use copilot_core::{HandlerKind, GENERIC_HANDLER_KINDS, TYPED_HANDLER_KINDS};

/// The kinds of wait this client has handlers for: every kind of the core's
/// answer table. The core's [`TYPED_HANDLER_KINDS`] come first, with typed
/// handlers or options of their own; then its [`GENERIC_HANDLER_KINDS`],
/// answered by generic handlers, by name
/// ([`SessionConfig::on_request`](crate::SessionConfig::on_request)). The
/// JavaScript package offers the same.
pub const OFFERED_HANDLER_KINDS: &[HandlerKind] = &OFFERED;

/// The core's two lists, one after the other (built at compile time, so
/// neither list is written here again).
const OFFERED: [HandlerKind; TYPED_HANDLER_KINDS.len() + GENERIC_HANDLER_KINDS.len()] = {
    let mut all = [HandlerKind::Permission; TYPED_HANDLER_KINDS.len() + GENERIC_HANDLER_KINDS.len()];
    let mut i = 0;
    while i < all.len() {
        all[i] = if i < TYPED_HANDLER_KINDS.len() {
            TYPED_HANDLER_KINDS[i]
        } else {
            GENERIC_HANDLER_KINDS[i - TYPED_HANDLER_KINDS.len()]
        };
        i += 1;
    }
    all
};
