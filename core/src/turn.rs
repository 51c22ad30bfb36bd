//! The `send_and_wait` rule: which events of a session end a turn, and what
//! the turn's outcome is. One rule for every host: a host classifies each
//! event with [`turn_step`] and feeds it to a [`Turn`], which holds the
//! host's own event values.
//!
//! The outcome: at [`TURN_END_EVENT`], the turn's last [`TURN_ERROR_EVENT`]
//! if it had one, else its last top-level [`TURN_REPLY_EVENT`] (a message
//! of a sub-agent, whose data has [`TURN_REPLY_UNLESS`], is not the reply),
//! else none. An error does not end the wait at once: the session is idle
//! when the call returns, so the next send starts a new turn.

/// The event whose data is the turn's reply (the last one counts).
pub const TURN_REPLY_EVENT: &str = "assistant.message";
/// A member of a reply event's `data` that marks it as a sub-agent's
/// message, not the reply.
pub const TURN_REPLY_UNLESS: &str = "parentToolCallId";
/// The event that makes the turn fail (the last one counts).
pub const TURN_ERROR_EVENT: &str = "session.error";
/// The event that ends the turn.
pub const TURN_END_EVENT: &str = "session.idle";

/// What one event does to a turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TurnStep {
    /// The turn's reply so far.
    Reply,
    /// The turn failed (it still ends at [`TurnStep::End`]).
    Error,
    /// The turn is over.
    End,
    /// Nothing to the turn.
    Other,
}

/// What the event of type `event_type` does to a turn; `sub_agent`: its
/// `data` has [`TURN_REPLY_UNLESS`] (not null).
pub fn turn_step(event_type: &str, sub_agent: bool) -> TurnStep {
    match event_type {
        TURN_REPLY_EVENT if !sub_agent => TurnStep::Reply,
        TURN_ERROR_EVENT => TurnStep::Error,
        TURN_END_EVENT => TurnStep::End,
        _ => TurnStep::Other,
    }
}

/// One `send_and_wait` turn, holding the host's event values `E`: the
/// last reply and the last error.
#[derive(Debug, Clone)]
pub struct Turn<E> {
    reply: Option<E>,
    error: Option<E>,
}

impl<E> Default for Turn<E> {
    fn default() -> Self {
        Turn { reply: None, error: None }
    }
}

impl<E> Turn<E> {
    /// A turn that has seen nothing.
    pub const fn new() -> Self {
        Turn { reply: None, error: None }
    }

    /// Takes one event of the turn, classified by [`turn_step`]; `event`
    /// makes the host's value of it (called only for a reply or an error).
    /// Returns the outcome once the turn has ended: `Ok(reply)` (the last
    /// reply, if any) or `Err(error)` (the last error).
    #[must_use]
    pub fn see(&mut self, step: TurnStep, event: impl FnOnce() -> E) -> Option<Result<Option<E>, E>> {
        match step {
            TurnStep::Reply => self.reply = Some(event()),
            TurnStep::Error => self.error = Some(event()),
            TurnStep::End => {
                return Some(match self.error.take() {
                    Some(e) => Err(e),
                    None => Ok(self.reply.take()),
                })
            }
            TurnStep::Other => {}
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(events: &[(&'static str, bool)]) -> Option<Result<Option<usize>, usize>> {
        let mut turn = Turn::new();
        for (i, (ty, sub)) in events.iter().enumerate() {
            if let Some(outcome) = turn.see(turn_step(ty, *sub), || i) {
                return Some(outcome);
            }
        }
        None
    }

    #[cfg_attr(not(target_arch = "wasm32"), test)]
    #[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
    fn the_last_top_level_message_is_the_reply_at_idle() {
        let events = [
            ("user.message", false),
            ("assistant.message", false),
            ("assistant.message", true),
            ("assistant.message", false),
            ("assistant.message", true),
            ("session.idle", false),
            ("assistant.message", false),
        ];
        assert_eq!(run(&events), Some(Ok(Some(3))));
        assert_eq!(run(&[("assistant.turn_end", false), ("session.idle", false)]), Some(Ok(None)));
        assert_eq!(run(&[("assistant.message", false)]), None, "not over before idle");
    }

    #[cfg_attr(not(target_arch = "wasm32"), test)]
    #[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
    fn an_error_wins_at_idle_and_the_last_error_counts() {
        let events = [
            ("session.error", false),
            ("assistant.message", false),
            ("session.error", false),
            ("assistant.message", false),
            ("session.idle", false),
        ];
        assert_eq!(run(&events), Some(Err(2)));
        assert_eq!(run(&[("session.error", false)]), None, "the session is idle when the call returns");
    }
}
