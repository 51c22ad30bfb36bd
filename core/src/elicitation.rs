//! The answer to `elicitation.requested`, shaped from the handler's
//! outcome once for every host: `{"action":"accept","content":{..}}`,
//! `{"action":"decline"}` or `{"action":"cancel"}`.
//!
//! The CLI's schema says `content` is the form's values, "present when
//! action is 'accept'": an accept whose handler gives no content (or
//! `null`) sends `{}` ([`ELICITATION_ACCEPT_CONTENT`]), as the JS client
//! did, not `null` or nothing, as the Rust host did. Content that is not a
//! JSON object is not an answer: the host treats it as a failed handler
//! (the refusal, `cancel`, goes). It is the `elicitation` row of
//! [`ANSWER_SHAPES`](crate::ANSWER_SHAPES) for hosts with typed values (a
//! test holds the two together).

use crate::json::{Kind, Value};

/// The content of an accept whose handler gave none.
pub const ELICITATION_ACCEPT_CONTENT: &str = "{}";

/// What the user did with an elicitation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ElicitationAction {
    /// Submitted the form (or opened the URL).
    Accept,
    /// Rejected it.
    Decline,
    /// Dismissed it.
    Cancel,
}

impl ElicitationAction {
    /// The wire name: `accept`, `decline`, `cancel`.
    pub const fn name(self) -> &'static str {
        match self {
            ElicitationAction::Accept => "accept",
            ElicitationAction::Decline => "decline",
            ElicitationAction::Cancel => "cancel",
        }
    }
}

/// The content given to [`write_elicitation_answer`] is neither absent,
/// `null`, nor a JSON object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ContentNotAnObject;

impl ContentNotAnObject {
    /// The message that [`Display`](core::fmt::Display) shows.
    pub const fn message(&self) -> &'static str {
        crate::messages::CONTENT_NOT_AN_OBJECT
    }
}

impl core::fmt::Display for ContentNotAnObject {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(self.message())
    }
}

/// Writes the answer (the `result` of
/// `session.ui.handlePendingElicitation`) for `action` and the handler's
/// `content` (JSON; read only for an accept) to `out`. Nothing is written
/// on an error.
pub fn write_elicitation_answer(
    action: ElicitationAction,
    content: Option<&[u8]>,
    out: &mut impl FnMut(&[u8]),
) -> Result<(), ContentNotAnObject> {
    let content = match (action, content.map(crate::json::trim_ws)) {
        (ElicitationAction::Accept, Some(c)) => match Value::parse(c).map(|v| v.kind()) {
            Ok(Kind::Object) => Some(c),
            Ok(Kind::Null) => Some(ELICITATION_ACCEPT_CONTENT.as_bytes()),
            _ => return Err(ContentNotAnObject),
        },
        (ElicitationAction::Accept, None) => Some(ELICITATION_ACCEPT_CONTENT.as_bytes()),
        _ => None,
    };
    out(br#"{"action":""#);
    out(action.name().as_bytes());
    out(b"\"");
    if let Some(c) = content {
        out(br#","content":"#);
        out(c);
    }
    out(b"}");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(action: ElicitationAction, content: Option<&str>) -> Result<heapless::String<128>, ContentNotAnObject> {
        let mut s = heapless::String::new();
        write_elicitation_answer(action, content.map(str::as_bytes), &mut |b: &[u8]| {
            s.push_str(core::str::from_utf8(b).unwrap()).unwrap()
        })?;
        Ok(s)
    }

    #[cfg_attr(not(target_arch = "wasm32"), test)]
    #[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
    fn an_accept_always_carries_an_object_and_the_others_none() {
        use ElicitationAction::{Accept, Cancel, Decline};
        assert_eq!(answer(Accept, Some(r#" {"a":1} "#)).unwrap(), r#"{"action":"accept","content":{"a":1}}"#);
        assert_eq!(answer(Accept, None).unwrap(), r#"{"action":"accept","content":{}}"#);
        assert_eq!(answer(Accept, Some("null")).unwrap(), r#"{"action":"accept","content":{}}"#);
        assert_eq!(answer(Decline, Some(r#"{"a":1}"#)).unwrap(), r#"{"action":"decline"}"#);
        assert_eq!(answer(Cancel, None).unwrap(), r#"{"action":"cancel"}"#);
        for bad in ["[]", "\"x\"", "1", "{"] {
            assert_eq!(answer(Accept, Some(bad)), Err(ContentNotAnObject), "{bad}");
        }
        assert!(answer(Decline, Some("[]")).is_ok(), "content is read only for an accept");
    }
}
