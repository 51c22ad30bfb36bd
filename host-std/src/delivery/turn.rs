//! `send_and_wait`'s reading of a turn: the core's turn rule over this
//! host's events.

use std::sync::Arc;

use copilot_core::{turn_step, TurnStep, TURN_REPLY_UNLESS};

use crate::error::{Error, Result};
use crate::events::{EventKind, SessionEvent};

/// What `send_and_wait` (blocking and async) makes of a turn's events:
/// the core's rule ([`copilot_core::Turn`], [`turn_step`]), holding this
/// host's events; a `session.error` becomes [`Error::Session`].
#[derive(Default)]
pub(crate) struct Turn {
    rule: copilot_core::Turn<Arc<SessionEvent>>,
    outcome: Option<std::result::Result<Option<Arc<SessionEvent>>, Arc<SessionEvent>>>,
}

impl Turn {
    /// Whether an event of type `event_type` may do anything to a turn,
    /// whatever its data (its data only tells a sub-agent's message, which
    /// does not): an event that may not is never parsed for a turn.
    pub(crate) fn may_move(event_type: &str) -> bool {
        turn_step(event_type, false) != TurnStep::Other
    }

    /// Whether `event` does anything to a turn (a reply, an error, the end).
    pub(crate) fn moves(event: &SessionEvent) -> bool {
        turn_step(event.event_type(), sub_agent(event)) != TurnStep::Other
    }

    /// Takes one event of the turn; `true` once the turn is over.
    pub(crate) fn see(&mut self, event: &Arc<SessionEvent>) -> bool {
        let step = turn_step(event.event_type(), sub_agent(event));
        self.outcome = self.rule.see(step, || Arc::clone(event));
        self.outcome.is_some()
    }

    /// The turn's result.
    pub(crate) fn finish(self) -> Result<Option<Arc<SessionEvent>>> {
        match self.outcome {
            Some(Ok(reply)) => Ok(reply),
            Some(Err(error)) => Err(session_error(&error)),
            None => Ok(None),
        }
    }
}

/// Whether the event's `data` has the member that marks a sub-agent's
/// message ([`TURN_REPLY_UNLESS`], not null).
fn sub_agent(event: &SessionEvent) -> bool {
    match &event.kind {
        EventKind::AssistantMessage(m) => m.parent_tool_call_id.is_some(),
        EventKind::Other { data, .. } => !data.get(TURN_REPLY_UNLESS).is_none_or(serde_json::Value::is_null),
        _ => false,
    }
}

/// The [`Error::Session`] of a turn's error event.
fn session_error(event: &SessionEvent) -> Error {
    match &event.kind {
        EventKind::SessionError(e) => Error::Session { error_type: e.error_type.clone(), message: e.message.clone() },
        other => {
            let text = |key: &str| match other {
                EventKind::Other { data, .. } => data.get(key).and_then(|v| v.as_str()).unwrap_or_default().to_owned(),
                _ => String::new(),
            };
            Error::Session { error_type: text("errorType"), message: text("message") }
        }
    }
}
