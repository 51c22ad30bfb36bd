//! The shape of each typed handler's answer, once for every host: which
//! members the answer has, of which JSON type, which are required, which
//! are left out when absent and which take a default; and what a handler
//! that gives nothing means. [`write_answer`] applies a shape to what the
//! handler gave; the JavaScript client applies the same table (from
//! `policy.json`) with a small generic function.
//!
//! The shapes follow the pinned CLI's schema (`core/schemas/<version>/`)
//! and the official SDKs where the schema leaves a choice:
//! - a tool's result needs `textResultForLlm`; `resultType` is `success`
//!   unless given (the SDKs send a result without one as success), and
//!   its other members (`sessionLog`, `binaryResultsForLlm`, ...) go as
//!   given; a tool that gives nothing answers with empty text;
//! - a permission decision needs its `kind`; its other members depend on
//!   the kind and go as given. Its `decisionContext` (sent beside it)
//!   needs `outcome` and `source`; `surface` is `sdk` unless given (the
//!   schema requires it);
//! - an MCP OAuth token answer is `{kind:"token", accessToken,
//!   tokenType?, expiresIn?}`; a handler that gives nothing cancels
//!   (`{kind:"cancelled"}`);
//! - an elicitation's `content` goes only with `accept`, `{}` when the
//!   handler gives none (the schema: "present when action is 'accept'").

use crate::json::{Kind, Value};
use crate::Cause;

/// The JSON type of an answer's member.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemberType {
    /// A string.
    String,
    /// `true` or `false`.
    Boolean,
    /// A number without fraction or exponent.
    Integer,
    /// An object.
    Object,
    /// One of these strings.
    OneOf(&'static [&'static str]),
}

impl MemberType {
    /// The name `policy.json` gives it (`oneOf` lists its strings beside).
    pub const fn name(self) -> &'static str {
        match self {
            MemberType::String | MemberType::OneOf(_) => "string",
            MemberType::Boolean => "boolean",
            MemberType::Integer => "integer",
            MemberType::Object => "object",
        }
    }
}

/// When a member is in the answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Presence {
    /// Always; an answer without it (or with `null`) is not an answer.
    Required,
    /// When given; absent or `null`, it is left out.
    Optional,
    /// As given; absent or `null`, this JSON.
    Default(&'static str),
    /// Always this JSON, whatever is given.
    Const(&'static str),
}

/// One member of an answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AnswerMember {
    /// Its name.
    pub name: &'static str,
    /// Its JSON type.
    pub ty: MemberType,
    /// When it is in the answer.
    pub presence: Presence,
    /// It belongs to the answer only when the given member `.0` is the
    /// string `.1` (otherwise it is left out, whatever was given).
    pub when: Option<(&'static str, &'static str)>,
}

/// What a handler that gives nothing (`None`, `null`, `undefined`) means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GivenNothing {
    /// This answer (JSON), as it is.
    Answer(&'static str),
    /// The engine's refusal for this cause.
    Refuse(Cause),
}

/// The shape of one handler kind's answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AnswerShape {
    /// The handler kind's name ([`HandlerKind::name`](crate::HandlerKind::name)),
    /// or `permissionDecisionContext` for the members sent beside a
    /// permission decision.
    pub name: &'static str,
    /// Its members, in the order they are written.
    pub members: &'static [AnswerMember],
    /// Whether members the table does not name go as given (after the
    /// named ones); otherwise they are left out.
    pub open: bool,
    /// What a handler that gives nothing means.
    pub nothing: GivenNothing,
    /// A handler's answer that is not an object with a string of this
    /// member is the answer `{<member>: <text>}`: a string is the text,
    /// any other value its JSON text (as the official SDKs send a tool's
    /// result that is no result object).
    pub text: Option<&'static str>,
}

const fn member(name: &'static str, ty: MemberType, presence: Presence) -> AnswerMember {
    AnswerMember { name, ty, presence, when: None }
}

use MemberType as T;
use Presence::Default as Or;
use Presence::{Const, Optional, Required};

/// The answer shapes of the typed handler kinds. (Hooks are answered
/// through [`read_hook_call`](crate::read_hook_call) and the answer
/// table; a command's answer is its error text or nothing; the generic
/// handlers' answers go as given.)
pub static ANSWER_SHAPES: &[AnswerShape] = &[
    AnswerShape {
        name: "permission",
        members: &[member("kind", T::String, Required)],
        open: true,
        nothing: GivenNothing::Refuse(Cause::HandlerFailed),
        text: None,
    },
    AnswerShape {
        name: "permissionDecisionContext",
        members: &[
            member("outcome", T::String, Required),
            member("source", T::String, Required),
            member("surface", T::String, Or(r#""sdk""#)),
            member("responseCapability", T::String, Optional),
            member("userFeedback", T::String, Optional),
        ],
        open: false,
        nothing: GivenNothing::Refuse(Cause::HandlerFailed),
        text: None,
    },
    AnswerShape {
        name: "tool",
        members: &[
            member("textResultForLlm", T::String, Required),
            member("resultType", T::String, Or(r#""success""#)),
        ],
        open: true,
        nothing: GivenNothing::Answer(r#"{"textResultForLlm":"","resultType":"success"}"#),
        text: Some("textResultForLlm"),
    },
    AnswerShape {
        name: "userInput",
        members: &[member("answer", T::String, Required), member("wasFreeform", T::Boolean, Or("false"))],
        open: false,
        // The model is told the user could not answer.
        nothing: GivenNothing::Refuse(Cause::NoHandler),
        text: None,
    },
    AnswerShape {
        name: "elicitation",
        members: &[
            member("action", T::OneOf(&["accept", "decline", "cancel"]), Required),
            AnswerMember {
                when: Some(("action", "accept")),
                ..member("content", T::Object, Or(crate::ELICITATION_ACCEPT_CONTENT))
            },
        ],
        open: false,
        nothing: GivenNothing::Refuse(Cause::HandlerFailed),
        text: None,
    },
    AnswerShape {
        name: "mcpOAuth",
        members: &[
            member("kind", T::String, Const(r#""token""#)),
            member("accessToken", T::String, Required),
            member("tokenType", T::String, Optional),
            member("expiresIn", T::Integer, Optional),
        ],
        open: false,
        nothing: GivenNothing::Answer(r#"{"kind":"cancelled"}"#),
        text: None,
    },
    AnswerShape {
        name: "exitPlanMode",
        members: &[
            member("approved", T::Boolean, Required),
            member("selectedAction", T::String, Optional),
            member("feedback", T::String, Optional),
        ],
        open: false,
        nothing: GivenNothing::Refuse(Cause::HandlerFailed),
        text: None,
    },
    AnswerShape {
        name: "systemMessageTransform",
        members: &[member("sections", T::Object, Required)],
        open: false,
        nothing: GivenNothing::Refuse(Cause::HandlerFailed),
        text: None,
    },
    AnswerShape {
        name: "providerToken",
        members: &[member("token", T::String, Required)],
        open: false,
        nothing: GivenNothing::Refuse(Cause::HandlerFailed),
        text: None,
    },
];

/// The shape named `name` (a handler kind's name, or
/// `permissionDecisionContext`).
pub fn answer_shape(name: &str) -> Option<&'static AnswerShape> {
    ANSWER_SHAPES.iter().find(|s| s.name == name)
}

/// Why what a handler gave is not an answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShapeError {
    /// It gave nothing, which means the engine's refusal for this cause.
    Nothing(Cause),
    /// It is not a JSON object.
    NotAnObject,
    /// This required member is missing (or `null`).
    Missing(&'static str),
    /// This member is not of its type.
    WrongType(&'static str),
}

impl ShapeError {
    /// What went wrong, for the logs (the member's name aside).
    pub const fn message(&self) -> &'static str {
        match self {
            ShapeError::Nothing(_) => crate::messages::SHAPE_NOTHING,
            ShapeError::NotAnObject => crate::messages::SHAPE_NOT_AN_OBJECT,
            ShapeError::Missing(_) => crate::messages::SHAPE_MISSING,
            ShapeError::WrongType(_) => crate::messages::SHAPE_WRONG_TYPE,
        }
    }
}

impl core::fmt::Display for ShapeError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(self.message())?;
        match self {
            ShapeError::Missing(m) | ShapeError::WrongType(m) => write!(f, ": {m}"),
            _ => Ok(()),
        }
    }
}

/// What a handler gave, as [`write_answer_from`] reads it, member by
/// member: the core's own view of JSON text ([`Value`], what
/// [`write_answer`] reads), or a host's own value (its parsed or typed
/// form), so that a host need not write the answer out as JSON for the
/// core to read it back.
pub trait Given: Sized {
    /// Its JSON kind.
    fn kind(&self) -> Kind;
    /// The member `name` of an object.
    fn get(&self, name: &str) -> Option<Self>;
    /// Whether it is the string `s`.
    fn is_str(&self, s: &str) -> bool;
    /// Whether it is a number without fraction or exponent that fits an `i64`.
    fn is_integer(&self) -> bool;
    /// Writes its JSON text.
    fn write_json(&self, out: &mut dyn FnMut(&[u8]));
    /// Calls `f` with each member of an object, in order: its name as the
    /// text of a JSON string without the quotes (escaped), and its value.
    fn each_member(&self, f: &mut dyn FnMut(&[u8], &Self));
}

impl Given for Value<'_> {
    fn kind(&self) -> Kind {
        Value::kind(self)
    }

    fn get(&self, name: &str) -> Option<Self> {
        Value::get(self, name)
    }

    fn is_str(&self, s: &str) -> bool {
        self.as_str().is_some_and(|v| v == s)
    }

    fn is_integer(&self) -> bool {
        self.as_number().is_some_and(|n| n.as_i64().is_some())
    }

    fn write_json(&self, out: &mut dyn FnMut(&[u8])) {
        out(self.as_bytes());
    }

    fn each_member(&self, f: &mut dyn FnMut(&[u8], &Self)) {
        for (k, v) in self.members() {
            f(k.as_bytes(), &v);
        }
    }
}

/// An answer the core shaped ([`shape_answer`]): a JSON object by
/// construction, so [`Engine::answer_shaped`](crate::Engine::answer_shaped)
/// sends it without reading it again.
#[cfg(feature = "alloc")]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shaped(alloc::vec::Vec<u8>);

#[cfg(feature = "alloc")]
impl Shaped {
    /// Its JSON text.
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }

    /// The object `{"<name>": <this answer>}` (the members sent beside an
    /// answer, such as a permission decision's `decisionContext`).
    pub fn beside(self, name: &'static str) -> Shaped {
        let mut out = alloc::vec::Vec::with_capacity(self.0.len() + name.len() + 5);
        out.extend_from_slice(b"{\"");
        out.extend_from_slice(name.as_bytes());
        out.extend_from_slice(b"\":");
        out.extend_from_slice(&self.0);
        out.push(b'}');
        Shaped(out)
    }

    /// Its members, without the braces.
    pub(crate) fn members(&self) -> &[u8] {
        &self.0[1..self.0.len() - 1]
    }
}

/// The answer of `shape` from a host's value ([`write_answer_from`]), for
/// [`Engine::answer_shaped`](crate::Engine::answer_shaped).
#[cfg(feature = "alloc")]
pub fn shape_answer<G: Given>(shape: &AnswerShape, given: Option<&G>) -> Result<Shaped, ShapeError> {
    let mut out = alloc::vec::Vec::new();
    write_answer_from(shape, given, &mut |b| out.extend_from_slice(b))?;
    Ok(Shaped(out))
}

/// Writes the answer of `shape` from what the handler gave (`given`: the
/// JSON of the answer object, `None` or `null` for nothing) to `out`.
/// Nothing is written on an error: the host then refuses for the cause of
/// [`ShapeError::Nothing`], and otherwise treats the handler as failed.
pub fn write_answer(shape: &AnswerShape, given: Option<&[u8]>, out: &mut impl FnMut(&[u8])) -> Result<(), ShapeError> {
    match given.map(crate::json::trim_ws).map(Value::parse) {
        Some(Ok(v)) => write_answer_from(shape, Some(&v), out),
        Some(Err(_)) => Err(ShapeError::NotAnObject),
        None => write_answer_from::<Value<'_>>(shape, None, out),
    }
}

/// [`write_answer`] from a host's own value ([`Given`]): the same answer,
/// with no JSON text written for the core to read back. The answer is
/// JSON by construction (given members are written by `given` itself).
pub fn write_answer_from<G: Given>(
    shape: &AnswerShape,
    given: Option<&G>,
    out: &mut impl FnMut(&[u8]),
) -> Result<(), ShapeError> {
    let given = match given {
        Some(v) if v.kind() != Kind::Null => v,
        _ => match shape.nothing {
            GivenNothing::Answer(a) => {
                out(a.as_bytes());
                return Ok(());
            }
            GivenNothing::Refuse(cause) => return Err(ShapeError::Nothing(cause)),
        },
    };
    if let Some(text) = shape.text {
        let is_answer = given.get(text).is_some_and(|v| v.kind() == Kind::String);
        if given.kind() != Kind::Object || !is_answer {
            return write_text_answer(shape, text, given, out);
        }
    }
    if given.kind() != Kind::Object {
        return Err(ShapeError::NotAnObject);
    }
    // Check first, so that nothing is written on an error.
    for m in shape.members {
        member_value(m, given)?;
    }
    let mut first = true;
    let mut open = |out: &mut dyn FnMut(&[u8]), name: &[u8]| {
        out(if first { b"{\"" } else { b",\"" });
        first = false;
        out(name);
        out(b"\":");
    };
    for m in shape.members {
        match member_value(m, given) {
            Ok(Some(Member::Text(t))) => {
                open(out, m.name.as_bytes());
                out(t.as_bytes());
            }
            Ok(Some(Member::Given(v))) => {
                open(out, m.name.as_bytes());
                v.write_json(out);
            }
            _ => {}
        }
    }
    if shape.open {
        let named = |k: &[u8]| shape.members.iter().any(|m| k == m.name.as_bytes());
        given.each_member(&mut |k, v| {
            if !named(k) {
                open(out, k);
                v.write_json(out);
            }
        });
    }
    if first {
        out(b"{");
    }
    out(b"}");
    Ok(())
}

/// The answer `{<text>: <given as text>}` of a shape with a
/// [`text`](AnswerShape::text) member; its other members take their
/// constants and defaults.
fn write_text_answer<G: Given>(
    shape: &AnswerShape,
    text: &str,
    given: &G,
    out: &mut impl FnMut(&[u8]),
) -> Result<(), ShapeError> {
    if let Some(m) = shape.members.iter().find(|m| m.name != text && m.presence == Required) {
        return Err(ShapeError::Missing(m.name));
    }
    out(b"{\"");
    out(text.as_bytes());
    out(b"\":");
    if given.kind() == Kind::String {
        given.write_json(out);
    } else {
        // Its JSON text, as a JSON string (escaping is byte by byte, so
        // the text may come in any pieces).
        out(b"\"");
        given.write_json(&mut |piece| crate::json::emit_escaped_inside(piece, out));
        out(b"\"");
    }
    for m in shape.members.iter().filter(|m| m.name != text) {
        if let Const(v) | Or(v) = m.presence {
            out(b",\"");
            out(m.name.as_bytes());
            out(b"\":");
            out(v.as_bytes());
        }
    }
    out(b"}");
    Ok(())
}

/// A member's value in the answer.
enum Member<G> {
    /// JSON text of the table's (a constant or a default).
    Text(&'static str),
    /// The handler's value.
    Given(G),
}

/// What `m` is in the answer (`None`: left out), or why it cannot be.
fn member_value<G: Given>(m: &AnswerMember, given: &G) -> Result<Option<Member<G>>, ShapeError> {
    if let Some((other, is)) = m.when {
        if !given.get(other).is_some_and(|v| v.is_str(is)) {
            return Ok(None);
        }
    }
    let value = given.get(m.name).filter(|v| v.kind() != Kind::Null);
    Ok(Some(match (m.presence, value) {
        (Const(c), _) => Member::Text(c),
        (_, Some(v)) if admits(m.ty, &v) => Member::Given(v),
        (_, Some(_)) => return Err(ShapeError::WrongType(m.name)),
        (Or(d), None) => Member::Text(d),
        (Optional, None) => return Ok(None),
        (Required, None) => return Err(ShapeError::Missing(m.name)),
    }))
}

/// Whether `v` is of type `ty`.
fn admits<G: Given>(ty: MemberType, v: &G) -> bool {
    match ty {
        MemberType::String => v.kind() == Kind::String,
        MemberType::Boolean => v.kind() == Kind::Bool,
        MemberType::Integer => v.is_integer(),
        MemberType::Object => v.kind() == Kind::Object,
        MemberType::OneOf(names) => names.iter().any(|n| v.is_str(n)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::fmt::Write;

    fn answer(name: &str, given: Option<&str>) -> Result<heapless::String<256>, ShapeError> {
        let mut s = heapless::String::new();
        let shape = answer_shape(name).unwrap();
        write_answer(shape, given.map(str::as_bytes), &mut |b: &[u8]| {
            s.push_str(core::str::from_utf8(b).unwrap()).unwrap()
        })?;
        Ok(s)
    }

    #[cfg_attr(not(target_arch = "wasm32"), test)]
    #[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
    fn required_optional_default_and_const_members() {
        let token = r#"{"accessToken":"t","tokenType":null,"expiresIn":60,"kind":"x","other":1}"#;
        assert_eq!(answer("mcpOAuth", Some(token)).unwrap(), r#"{"kind":"token","accessToken":"t","expiresIn":60}"#);
        assert_eq!(answer("mcpOAuth", None).unwrap(), r#"{"kind":"cancelled"}"#, "nothing cancels");
        assert_eq!(answer("mcpOAuth", Some(r#"{"expiresIn":60}"#)), Err(ShapeError::Missing("accessToken")));
        assert_eq!(
            answer("mcpOAuth", Some(r#"{"accessToken":"t","expiresIn":1.5}"#)),
            Err(ShapeError::WrongType("expiresIn"))
        );
        assert_eq!(answer("userInput", Some(r#"{"answer":"a"}"#)).unwrap(), r#"{"answer":"a","wasFreeform":false}"#);
        assert_eq!(answer("userInput", Some("null")), Err(ShapeError::Nothing(Cause::NoHandler)));
        assert_eq!(answer("exitPlanMode", Some(r#"{"approved":"yes"}"#)), Err(ShapeError::WrongType("approved")));
        assert_eq!(answer("providerToken", Some("[]")), Err(ShapeError::NotAnObject));
        assert_eq!(answer("providerToken", Some("{")), Err(ShapeError::NotAnObject));
    }

    #[cfg_attr(not(target_arch = "wasm32"), test)]
    #[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
    fn open_shapes_keep_other_members_and_closed_ones_leave_them_out() {
        let result = r#"{"sessionLog":"l","textResultForLlm":"x"}"#;
        assert_eq!(
            answer("tool", Some(result)).unwrap(),
            r#"{"textResultForLlm":"x","resultType":"success","sessionLog":"l"}"#
        );
        assert_eq!(answer("tool", None).unwrap(), r#"{"textResultForLlm":"","resultType":"success"}"#);
        // Not a result object: its text.
        assert_eq!(answer("tool", Some(r#""hi""#)).unwrap(), r#"{"textResultForLlm":"hi","resultType":"success"}"#);
        assert_eq!(
            answer("tool", Some("{\"a\":\"q\\\"\\n\",\"textResultForLlm\":1}")).unwrap(),
            r#"{"textResultForLlm":"{\"a\":\"q\\\"\\n\",\"textResultForLlm\":1}","resultType":"success"}"#
        );
        assert_eq!(answer("tool", Some("[1]")).unwrap(), r#"{"textResultForLlm":"[1]","resultType":"success"}"#);
        assert_eq!(
            answer("tool", Some(r#"{"textResultForLlm":"x","resultType":1}"#)),
            Err(ShapeError::WrongType("resultType")),
            "a result object is shaped as one"
        );
        let decision = r#"{"kind":"reject","feedback":"no"}"#;
        assert_eq!(answer("permission", Some(decision)).unwrap(), decision);
        let context = r#"{"source":"s","outcome":"o","extra":1}"#;
        assert_eq!(
            answer("permissionDecisionContext", Some(context)).unwrap(),
            r#"{"outcome":"o","source":"s","surface":"sdk"}"#
        );
    }

    #[cfg_attr(not(target_arch = "wasm32"), test)]
    #[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
    fn a_conditional_member_goes_only_with_its_condition() {
        assert_eq!(
            answer("elicitation", Some(r#"{"action":"accept"}"#)).unwrap(),
            r#"{"action":"accept","content":{}}"#
        );
        assert_eq!(
            answer("elicitation", Some(r#"{"action":"decline","content":{"a":1}}"#)).unwrap(),
            r#"{"action":"decline"}"#
        );
        assert_eq!(
            answer("elicitation", Some(r#"{"action":"accept","content":[]}"#)),
            Err(ShapeError::WrongType("content"))
        );
        assert_eq!(answer("elicitation", Some(r#"{"action":"maybe"}"#)), Err(ShapeError::WrongType("action")));
    }

    #[cfg_attr(not(target_arch = "wasm32"), test)]
    #[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
    fn the_elicitation_shape_answers_as_write_elicitation_answer() {
        use crate::ElicitationAction::{Accept, Cancel, Decline};
        for action in [Accept, Decline, Cancel] {
            for content in [None, Some("null"), Some(r#"{"a":1}"#), Some("[]")] {
                let mut given: heapless::String<64> = heapless::String::new();
                let _ = write!(given, r#"{{"action":"{}","content":{}}}"#, action.name(), content.unwrap_or("null"));
                let mut one: heapless::String<64> = heapless::String::new();
                let by_elicitation = crate::write_elicitation_answer(action, content.map(str::as_bytes), &mut |b| {
                    one.push_str(core::str::from_utf8(b).unwrap()).unwrap()
                });
                let by_shape = answer("elicitation", Some(&given));
                match (by_elicitation, by_shape) {
                    (Ok(()), Ok(shaped)) => assert_eq!(one, shaped, "{given}"),
                    (Err(_), Err(ShapeError::WrongType("content"))) => {}
                    other => panic!("{given}: {other:?}"),
                }
            }
        }
    }

    #[cfg_attr(not(target_arch = "wasm32"), test)]
    #[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
    fn every_shape_names_a_typed_kind_and_its_json_is_json() {
        for s in ANSWER_SHAPES {
            let kind = crate::TYPED_HANDLER_KINDS.iter().any(|k| k.name() == s.name);
            assert!(kind || s.name == "permissionDecisionContext", "{}", s.name);
            for m in s.members {
                if let Or(j) | Const(j) = m.presence {
                    assert!(Value::parse(j.as_bytes()).is_ok_and(|v| admits(m.ty, &v)), "{}.{}", s.name, m.name);
                }
            }
            if let GivenNothing::Answer(a) = s.nothing {
                assert!(Value::parse(a.as_bytes()).is_ok_and(|v| v.kind() == Kind::Object), "{}", s.name);
            }
        }
    }
}
