//! What a handler made of a wait, before the core decides what is sent.

use copilot_core::Cause;
use serde_json::Value;

/// What a handler made of a wait.
pub(super) enum Outcome {
    /// This answer goes (JSON; `null` leaves the answer's key out).
    Answer(Value),
    /// This answer goes, with these members beside it (a JSON object).
    AnswerWith(Value, Value),
    /// Nothing goes: the wait is left to another client of the session.
    Decline,
    /// The engine's refusal goes, for this reason.
    Refuse(Cause),
    /// The handler failed with this text: the engine's failure answer goes
    /// (the refusal, or for a tool the generic failure with the text in
    /// `error`).
    Fail(String),
}
