//! What a handler made of a wait, before the core decides what is sent.

use copilot_core::{answer_shape, write_answer, Cause, ShapeError};
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

/// The answer the core shapes ([`copilot_core::ANSWER_SHAPES`]) from what
/// the handler of `shape` gave (`None`: nothing), or why there is none:
/// the refusal the core names for nothing, else a failed handler.
pub(super) fn shaped(shape: &str, given: Option<&Value>) -> Result<Value, Outcome> {
    let Some(shape) = answer_shape(shape) else {
        return Err(Outcome::Fail(format!("the core has no answer shape {shape}")));
    };
    let given = given.map(Value::to_string);
    let mut answer = Vec::new();
    match write_answer(shape, given.as_deref().map(str::as_bytes), &mut |b| answer.extend_from_slice(b)) {
        Ok(()) => serde_json::from_slice(&answer).map_err(|e| Outcome::Fail(format!("the answer is not JSON: {e}"))),
        Err(ShapeError::Nothing(cause)) => Err(Outcome::Refuse(cause)),
        Err(e) => Err(Outcome::Fail(e.to_string())),
    }
}

/// The outcome of a handler whose answer `shape` shapes.
pub(super) fn answer(shape: &str, given: Option<&Value>) -> Outcome {
    match shaped(shape, given) {
        Ok(v) => Outcome::Answer(v),
        Err(o) => o,
    }
}
