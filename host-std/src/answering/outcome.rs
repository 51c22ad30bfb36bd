//! What a handler made of a wait, before the core decides what is sent.

use copilot_core::json::Kind;
use copilot_core::{answer_shape, shape_answer, Cause, Given, ShapeError, Shaped};
use serde_json::Value;

/// What a handler made of a wait.
pub(super) enum Outcome {
    /// This answer goes (JSON text; `null` leaves the answer's key out):
    /// a generic handler's or a hook's, read by the engine.
    Answer(Vec<u8>),
    /// This answer, shaped by the core, goes as it is, with the members of
    /// the second beside it, if any.
    Shaped(Shaped, Option<Shaped>),
    /// Nothing goes: the wait is left to another client of the session.
    Decline,
    /// The engine's refusal goes, for this reason.
    Refuse(Cause),
    /// The handler failed with this text: the engine's failure answer goes
    /// (the refusal, or for a tool the call's `error`, with the text).
    Fail(String),
    /// The handler failed with this machine code and text (a canvas
    /// handler's error): the engine's failure answer goes, with the code.
    FailCoded(String, String),
}

/// `value`'s JSON text.
pub(super) fn json(value: &Value) -> Vec<u8> {
    value.to_string().into_bytes()
}

/// The answer the core shapes ([`copilot_core::ANSWER_SHAPES`]) from what
/// the handler of `shape` gave (`None`: nothing), or why there is none:
/// the refusal the core names for nothing, else a failed handler. The core
/// reads the handler's value member by member ([`Given`]) and writes the
/// answer once: no JSON text is written for it to read back.
pub(super) fn shaped(shape: &str, given: Option<&Value>) -> Result<Shaped, Outcome> {
    let Some(shape) = answer_shape(shape) else {
        return Err(Outcome::Fail(format!("the core has no answer shape {shape}")));
    };
    match shape_answer(shape, given.map(Handed).as_ref()) {
        Ok(answer) => Ok(answer),
        Err(ShapeError::Nothing(cause)) => Err(Outcome::Refuse(cause)),
        Err(e) => Err(Outcome::Fail(e.to_string())),
    }
}

/// The outcome of a handler whose answer `shape` shapes.
pub(super) fn answer(shape: &str, given: Option<&Value>) -> Outcome {
    match shaped(shape, given) {
        Ok(v) => Outcome::Shaped(v, None),
        Err(o) => o,
    }
}

/// A handler's value as the core reads it.
#[derive(Clone, Copy)]
struct Handed<'a>(&'a Value);

impl Given for Handed<'_> {
    fn kind(&self) -> Kind {
        match self.0 {
            Value::Null => Kind::Null,
            Value::Bool(_) => Kind::Bool,
            Value::Number(_) => Kind::Number,
            Value::String(_) => Kind::String,
            Value::Array(_) => Kind::Array,
            Value::Object(_) => Kind::Object,
        }
    }

    fn get(&self, name: &str) -> Option<Self> {
        self.0.as_object()?.get(name).map(Handed)
    }

    fn is_str(&self, s: &str) -> bool {
        self.0.as_str() == Some(s)
    }

    fn is_integer(&self) -> bool {
        self.0.as_i64().is_some()
    }

    fn write_json(&self, out: &mut dyn FnMut(&[u8])) {
        out(self.0.to_string().as_bytes());
    }

    fn each_member(&self, f: &mut dyn FnMut(&[u8], &Self)) {
        for (k, v) in self.0.as_object().into_iter().flatten() {
            // The name as the inside of a JSON string.
            let quoted = Value::String(k.clone()).to_string();
            f(&quoted.as_bytes()[1..quoted.len() - 1], &Handed(v));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The core's answer from the value read member by member is the one
    /// it writes from the value's JSON text, for every shape.
    #[test]
    fn a_value_read_member_by_member_is_shaped_as_its_json_text_is() {
        let givens = [
            json!({"kind": "approve-once", "rules": [{"a\"b": 1}], "esc\n": "x"}),
            json!({"outcome": "approved", "source": "user", "userFeedback": "ok", "extra": 1}),
            json!({"textResultForLlm": "done", "sessionLog": "l"}),
            json!({"result": 1, "text": "a \"quoted\"\nline"}),
            json!("plain text"),
            json!(42),
            json!({"answer": "a", "wasFreeform": true}),
            json!({"action": "accept", "content": {"x": [1, 2]}}),
            json!({"action": "decline", "content": {"x": 1}}),
            json!({"accessToken": "t", "tokenType": null, "expiresIn": 60}),
            json!({"expiresIn": 1.5, "accessToken": "t"}),
            json!({"approved": false, "feedback": "no"}),
            json!({"sections": {"s": {"action": "replace", "content": "c"}}}),
            json!({"token": 5}),
            json!({}),
        ];
        for shape in copilot_core::ANSWER_SHAPES {
            for given in &givens {
                let text = given.to_string();
                let mut expected = Vec::new();
                let from_text =
                    copilot_core::write_answer(shape, Some(text.as_bytes()), &mut |b| expected.extend_from_slice(b));
                let from_value = shape_answer(shape, Some(&Handed(given)));
                match (from_text, from_value) {
                    (Ok(()), Ok(shaped)) => assert_eq!(shaped.as_bytes(), &expected[..], "{} {given}", shape.name),
                    (Err(a), Err(b)) => assert_eq!(a, b, "{} {given}", shape.name),
                    (a, b) => panic!("{} {given}: {a:?} against {b:?}", shape.name),
                }
            }
        }
    }
}
