//! A session's capabilities, and what the UI calls of a session need. One
//! rule for every host: a host keeps a [`Capabilities`] per session, set
//! from the open's answer and changed by each `capabilities.changed`
//! event, in the order the frames came; its UI calls ask
//! [`check_ui_call`] first, send the form that [`write_ui_form`] writes
//! and read their answer with [`read_ui_answer`].
//!
//! Seen with CLI 1.0.102: the answer of `session.create`/`resume` has
//! `capabilities: {ui: {elicitation, mcpApps, canvases}, extensions}`, all
//! `false` for a headless CLI whose clients answer no elicitation. When a
//! client opens the session with `requestElicitation: true` every client
//! of the session gets `capabilities.changed {ui: {elicitation: true}}`;
//! when the last such client's connection closes, `{ui: {elicitation:
//! false}}`. (After that client's `session.destroy`, the CLI did not always
//! say so: it kept elicitation true, and a UI call then waited forever.)
//! The event names only what changed: a member it leaves out keeps its
//! value ([`Capabilities::apply_change`]), where the official SDK's
//! shallow merge would forget `ui.mcpApps` and `ui.canvases`.
//!
//! Without a client that answers elicitations, `session.ui.elicitation`
//! is never answered (the CLI emits `elicitation.requested` and waits), so
//! the UI calls fail before asking, as the official SDKs do
//! ([`MissingCapability`]).

use crate::json::{Kind, Value};

/// The member of the open's answer that holds the capabilities.
pub const OPEN_ANSWER_CAPABILITIES: &str = "capabilities";

/// The event that changes them; its `data` has the changed members.
pub const CAPABILITIES_CHANGED_EVENT: &str = "capabilities.changed";

/// A capability the CLI reports for a session.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Capability {
    /// `ui.elicitation`: a client of the session answers elicitations
    /// (forms), so the session's UI calls are answered.
    Elicitation,
    /// `ui.mcpApps`: MCP Apps (SEP-1865) UI passthrough.
    McpApps,
    /// `ui.canvases`: canvas rendering.
    Canvases,
    /// `extensions`: extensions are enabled for the session.
    Extensions,
}

/// Every capability the core keeps, in order.
pub static CAPABILITIES: &[Capability] =
    &[Capability::Elicitation, Capability::McpApps, Capability::Canvases, Capability::Extensions];

impl Capability {
    /// Where the CLI reports it: the member of `capabilities` that groups
    /// it (`ui`), if any, and its own name.
    pub const fn path(self) -> (Option<&'static str>, &'static str) {
        match self {
            Capability::Elicitation => (Some("ui"), "elicitation"),
            Capability::McpApps => (Some("ui"), "mcpApps"),
            Capability::Canvases => (Some("ui"), "canvases"),
            Capability::Extensions => (None, "extensions"),
        }
    }

    const fn bit(self) -> u8 {
        1 << self as u8
    }
}

/// What the CLI said of each [`Capability`] of a session: `Some(true)`,
/// `Some(false)`, or `None` when it has not said.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Capabilities {
    said: u8,
    on: u8,
}

impl Capabilities {
    /// Nothing said yet.
    pub const NONE: Capabilities = Capabilities { said: 0, on: 0 };

    /// Whether a client of the session other than this one may answer a
    /// wait of `handler` that this client has no handler for (a broadcast
    /// wait, [`Unhandled::Leave`](crate::Unhandled)), as far as the CLI
    /// has said: an elicitation is answered only by a client with an
    /// elicitation handler, and the CLI says whether the session has one
    /// ([`Capability::Elicitation`]); of the other kinds it says nothing,
    /// so another client may. A wait nobody else can answer is refused at
    /// once; one left to others and not answered by its deadline gets the
    /// refusal then.
    pub const fn others_may_answer(&self, handler: crate::HandlerKind) -> bool {
        match handler {
            crate::HandlerKind::Elicitation => !matches!(self.get(Capability::Elicitation), Some(false)),
            _ => true,
        }
    }

    /// What the CLI said of `c`, if anything.
    pub const fn get(&self, c: Capability) -> Option<bool> {
        if self.said & c.bit() == 0 {
            None
        } else {
            Some(self.on & c.bit() != 0)
        }
    }

    /// Whether the session has `c` (the CLI said `true`).
    pub const fn has(&self, c: Capability) -> bool {
        self.on & c.bit() != 0
    }

    /// The capabilities of an open's answer (the `result` of
    /// `session.create`/`resume`, JSON); none said when it has none or is
    /// unreadable.
    pub fn from_open_answer(result: &[u8]) -> Capabilities {
        let mut caps = Capabilities::default();
        if let Some(c) = Value::parse(crate::json::trim_ws(result)).ok().and_then(|r| r.get(OPEN_ANSWER_CAPABILITIES)) {
            caps.merge(c);
        }
        caps
    }

    /// Applies the `data` (JSON) of a [`CAPABILITIES_CHANGED_EVENT`]: each
    /// capability it names with a boolean takes that value, every other
    /// keeps its own. Unreadable data changes nothing.
    pub fn apply_change(&mut self, data: &[u8]) {
        if let Ok(v) = Value::parse(crate::json::trim_ws(data)) {
            self.merge(v);
        }
    }

    /// [`apply_change`](Self::apply_change) with the `data` of `event` (a
    /// session event object, JSON) when its `type` is
    /// [`CAPABILITIES_CHANGED_EVENT`]; returns whether it was.
    pub fn apply_event(&mut self, event: &[u8]) -> bool {
        let Ok(e) = Value::parse(crate::json::trim_ws(event)) else { return false };
        if !e.get("type").and_then(|t| t.as_str()).is_some_and(|t| t == CAPABILITIES_CHANGED_EVENT) {
            return false;
        }
        if let Some(data) = e.get("data") {
            self.merge(data);
        }
        true
    }

    /// Takes what `v` (a `capabilities` object, or a change's `data`)
    /// says: each capability it names with a boolean takes that value.
    pub(crate) fn merge(&mut self, v: Value<'_>) {
        if v.kind() != Kind::Object {
            return;
        }
        for &c in CAPABILITIES {
            let said = match c.path() {
                (Some(group), name) => v.get(group).and_then(|g| g.get(name)),
                (None, name) => v.get(name),
            };
            if let Some(on) = said.and_then(|s| s.as_bool()) {
                self.said |= c.bit();
                if on {
                    self.on |= c.bit();
                } else {
                    self.on &= !c.bit();
                }
            }
        }
    }
}

/// The method every UI call of a session sends (a form for the user).
pub const UI_ELICITATION_METHOD: &str = "session.ui.elicitation";

/// A UI call of a session (`session.ui.confirm`, ...): what it needs, and
/// the one form field it asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UiCall {
    /// Its name under `session.ui`.
    pub name: &'static str,
    /// The capability the session must have.
    pub needs: Capability,
    /// The form's one field (the call's answer is the accepted form's
    /// value of it), and the field's schema (JSON) before the call's own
    /// members; `None`: the caller gives the whole form.
    pub field: Option<(&'static str, &'static str)>,
    /// The answer is only a `true` (a yes or no question).
    pub only_true: bool,
}

/// Every UI call. Its form, when it has a `field`, is `{"type":"object",
/// "properties":{<field>: <schema and the call's members>},
/// "required":[<field>]}`; its answer is the field's value when the
/// result's `action` is `accept` and the value is there (with
/// [`only_true`](UiCall::only_true): that it is `true`), else none.
pub static UI_CALLS: &[UiCall] = &[
    UiCall { name: "elicitation", needs: Capability::Elicitation, field: None, only_true: false },
    UiCall {
        name: "confirm",
        needs: Capability::Elicitation,
        field: Some(("confirmed", r#"{"type":"boolean","default":true}"#)),
        only_true: true,
    },
    // The options go as the field's `enum`.
    UiCall {
        name: "select",
        needs: Capability::Elicitation,
        field: Some(("selection", r#"{"type":"string"}"#)),
        only_true: false,
    },
    // The caller's title, description, length bounds, format and default
    // go as the field's members of those names.
    UiCall {
        name: "input",
        needs: Capability::Elicitation,
        field: Some(("value", r#"{"type":"string"}"#)),
        only_true: false,
    },
];

/// The UI call named `name`.
pub fn ui_call(name: &str) -> Option<&'static UiCall> {
    UI_CALLS.iter().find(|c| c.name == name)
}

/// The `extra` given to [`write_ui_form`] is not a JSON object, or the
/// call has no field (its caller gives the whole form).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NoFormField;

impl core::fmt::Display for NoFormField {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("a UI call's members are not a JSON object, or the call has no form field")
    }
}

impl core::error::Error for NoFormField {}

/// Writes the form (`requestedSchema`) of `call` to `out`: its field with
/// the field's schema, then the members of `extra` (a JSON object: the
/// call's own, such as a select's `enum`; `None`: none) after it. Nothing
/// is written on an error.
pub fn write_ui_form(call: &UiCall, extra: Option<&[u8]>, out: &mut impl FnMut(&[u8])) -> Result<(), NoFormField> {
    let (field, schema) = call.field.ok_or(NoFormField)?;
    let inner = match extra.map(crate::json::trim_ws) {
        None => &[][..],
        Some(e) => match Value::parse(e) {
            // The object's members without its braces.
            Ok(v) if v.kind() == Kind::Object => crate::json::trim_ws(&e[1..e.len() - 1]),
            _ => return Err(NoFormField),
        },
    };
    out(br#"{"type":"object","properties":{""#);
    out(field.as_bytes());
    out(br#"":"#);
    out(&schema.as_bytes()[..schema.len() - 1]);
    if !inner.is_empty() {
        out(b",");
        out(inner);
    }
    out(br#"}},"required":[""#);
    out(field.as_bytes());
    out(br#""]}"#);
    Ok(())
}

/// The answer of `call` in the `result` (JSON) of its
/// [`UI_ELICITATION_METHOD`]: the value of its field when the action is
/// `accept` and the value is there and not `null` (with
/// [`only_true`](UiCall::only_true), only a `true`). `None` for a call
/// without a field.
pub fn read_ui_answer<'a>(call: &UiCall, result: &'a [u8]) -> Option<Value<'a>> {
    let (field, _) = call.field?;
    let r = Value::parse(crate::json::trim_ws(result)).ok()?;
    if !r.get("action").and_then(|a| a.as_str()).is_some_and(|a| a == "accept") {
        return None;
    }
    let v = r.get("content")?.get(field).filter(|v| !v.is_null())?;
    if call.only_true && v.as_bool() != Some(true) {
        return None;
    }
    Some(v)
}

/// A UI call was refused before it was sent: the session lacks the
/// capability it needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MissingCapability {
    /// The call's name under `session.ui`.
    pub call: &'static str,
    /// What it needs.
    pub needs: Capability,
}

/// Why a session lacks the elicitation capability, for a user to act on.
pub const MISSING_ELICITATION_TEXT: &str = "the session lacks the elicitation capability: no client of this session \
     answers elicitations (a headless CLI has no UI of its own, and the CLI would wait for an answer forever); open \
     the session, or join it from another client, with an elicitation handler, and check the session's capabilities \
     (ui.elicitation) before calling its UI methods";

impl MissingCapability {
    /// Why, without the call's name (hosts put `session.ui.<call>: ` in
    /// front).
    pub const fn message(&self) -> &'static str {
        match self.needs {
            Capability::Elicitation => MISSING_ELICITATION_TEXT,
            Capability::McpApps => "the session lacks the mcpApps capability",
            Capability::Canvases => "the session lacks the canvases capability",
            Capability::Extensions => "the session lacks the extensions capability",
        }
    }
}

impl core::fmt::Display for MissingCapability {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("session.ui.")?;
        f.write_str(self.call)?;
        f.write_str(": ")?;
        f.write_str(self.message())
    }
}

impl core::error::Error for MissingCapability {}

/// Whether `call` may be sent for a session with `caps`: the capability
/// it needs must have been said `true`.
pub fn check_ui_call(caps: &Capabilities, call: &'static UiCall) -> Result<(), MissingCapability> {
    if caps.has(call.needs) {
        Ok(())
    } else {
        Err(MissingCapability { call: call.name, needs: call.needs })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CREATED: &str = r#"{"sessionId":"s","capabilities":{"ui":{"elicitation":false,"mcpApps":false,"canvases":true},"extensions":false}}"#;

    #[cfg_attr(not(target_arch = "wasm32"), test)]
    #[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
    fn the_open_answer_sets_them_and_a_change_moves_only_what_it_names() {
        let mut caps = Capabilities::from_open_answer(CREATED.as_bytes());
        assert_eq!(caps.get(Capability::Elicitation), Some(false));
        assert_eq!(caps.get(Capability::Canvases), Some(true));
        assert_eq!(caps.get(Capability::Extensions), Some(false));
        caps.apply_change(br#"{"ui":{"elicitation":true}}"#);
        assert!(caps.has(Capability::Elicitation));
        assert_eq!(caps.get(Capability::Canvases), Some(true), "a member the change leaves out keeps its value");
        assert_eq!(caps.get(Capability::McpApps), Some(false));
        caps.apply_change(br#"{"ui":{"elicitation":false,"mcpApps":"yes"},"extensions":true}"#);
        assert_eq!(caps.get(Capability::Elicitation), Some(false));
        assert_eq!(caps.get(Capability::McpApps), Some(false), "a value that is no boolean changes nothing");
        assert!(caps.has(Capability::Extensions));
        let before = caps;
        for bad in [&b"["[..], b"null", b"[]", b"{\"ui\":1}"] {
            caps.apply_change(bad);
            assert_eq!(caps, before);
        }
        assert_eq!(Capabilities::from_open_answer(b"{}"), Capabilities::default());
        assert_eq!(Capabilities::default().get(Capability::Elicitation), None);
    }

    #[cfg_attr(not(target_arch = "wasm32"), test)]
    #[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
    fn only_a_capabilities_event_changes_them() {
        let mut caps = Capabilities::default();
        assert!(!caps.apply_event(br#"{"type":"session.idle","data":{"ui":{"elicitation":true}}}"#));
        assert!(!caps.has(Capability::Elicitation));
        assert!(caps.apply_event(br#"{"id":"1","type":"capabilities.changed","data":{"ui":{"elicitation":true}}}"#));
        assert!(caps.has(Capability::Elicitation));
    }

    #[cfg_attr(not(target_arch = "wasm32"), test)]
    #[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
    fn a_ui_call_needs_its_capability_said_true() {
        let mut caps = Capabilities::default();
        for call in UI_CALLS {
            let missing = check_ui_call(&caps, call).unwrap_err();
            assert_eq!(missing, MissingCapability { call: call.name, needs: Capability::Elicitation });
        }
        caps.apply_change(br#"{"ui":{"elicitation":true}}"#);
        assert!(UI_CALLS.iter().all(|c| check_ui_call(&caps, c).is_ok()));
        assert_eq!(ui_call("confirm").unwrap().field.unwrap().0, "confirmed");
        assert!(ui_call("nope").is_none());
    }

    fn form(name: &str, extra: Option<&str>) -> Result<heapless::String<256>, NoFormField> {
        let mut s = heapless::String::new();
        write_ui_form(ui_call(name).unwrap(), extra.map(str::as_bytes), &mut |b: &[u8]| {
            s.push_str(core::str::from_utf8(b).unwrap()).unwrap()
        })?;
        Ok(s)
    }

    #[cfg_attr(not(target_arch = "wasm32"), test)]
    #[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
    fn a_ui_calls_form_is_its_field_with_the_calls_members() {
        assert_eq!(
            form("confirm", None).unwrap(),
            r#"{"type":"object","properties":{"confirmed":{"type":"boolean","default":true}},"required":["confirmed"]}"#
        );
        assert_eq!(
            form("select", Some(r#" {"enum":["a","b"]} "#)).unwrap(),
            r#"{"type":"object","properties":{"selection":{"type":"string","enum":["a","b"]}},"required":["selection"]}"#
        );
        assert_eq!(form("input", Some("{}")).unwrap(), form("input", None).unwrap());
        assert_eq!(form("input", Some("[]")), Err(NoFormField));
        assert_eq!(form("elicitation", None), Err(NoFormField));
    }

    #[cfg_attr(not(target_arch = "wasm32"), test)]
    #[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
    fn a_ui_calls_answer_is_its_accepted_field() {
        let answer = |name: &str, result: &'static str| read_ui_answer(ui_call(name).unwrap(), result.as_bytes());
        assert_eq!(answer("confirm", r#"{"action":"accept","content":{"confirmed":true}}"#).unwrap().raw(), "true");
        assert!(answer("confirm", r#"{"action":"accept","content":{"confirmed":false}}"#).is_none());
        assert!(answer("confirm", r#"{"action":"decline"}"#).is_none());
        assert_eq!(answer("select", r#"{"content":{"selection":"b"},"action":"accept"}"#).unwrap().raw(), r#""b""#);
        assert!(answer("select", r#"{"action":"cancel","content":{"selection":"b"}}"#).is_none());
        assert!(answer("input", r#"{"action":"accept","content":{"value":null}}"#).is_none());
        assert!(answer("input", r#"{"action":"accept"}"#).is_none());
        assert!(answer("elicitation", r#"{"action":"accept","content":{}}"#).is_none());
    }
}
