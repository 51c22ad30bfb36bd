//! Typed session events: the `params.event` object of a `session.event`
//! notification, and the params of a `session.lifecycle` notification.
//!
//! The CLI's event schema grows with every release, so parsing never loses an
//! event: a type without a typed variant, or a typed one whose `data` no
//! longer fits its struct, becomes [`EventKind::Other`] with the data kept.
//! Only an envelope that is not an object with a string `type` is an error.
//!
//! The data types and [`EventKind`] are generated from the CLI's own event
//! schema (`core/schemas/`, by `copilot-codegen`): a variant for every event
//! type it lists. Fields the schema marks optional are `Option`s; unknown
//! fields are ignored. Enumerations (abort reasons, modes, ...) keep a value
//! they do not know in their `Unknown` variant, so a new value does not turn
//! a whole event into `Other`.

use std::borrow::Cow;
use std::fmt;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::Value;

/// Reads a member of a wait's data as the official SDKs read it: missing,
/// or of a kind its type does not take, it is its empty value. The core
/// refuses a wait whose handler's own members are unreadable
/// ([`HandlerKind::reads`](copilot_core::HandlerKind::reads)), so no host
/// refuses one for any other member.
pub(crate) fn lenient<'de, D: Deserializer<'de>, T: de::DeserializeOwned + Default>(d: D) -> Result<T, D::Error> {
    let value = Value::deserialize(d)?;
    Ok(T::deserialize(value).unwrap_or_default())
}

/// A hook input's time ([`HOOK_INPUT_TIME`](copilot_core::HOOK_INPUT_TIME)):
/// Unix time in milliseconds on the wire; anything else is no time.
pub(crate) fn time_from_ms<'de, D: Deserializer<'de>>(d: D) -> Result<Option<SystemTime>, D::Error> {
    let ms = Value::deserialize(d)?.as_f64();
    Ok(ms.filter(|ms| ms.is_finite() && (0.0..1e17).contains(ms)).map(|ms| {
        // Whole milliseconds exactly; a fraction of one to the nanosecond.
        let whole = ms.trunc();
        UNIX_EPOCH + Duration::from_millis(whole as u64) + Duration::from_nanos(((ms - whole) * 1e6) as u64)
    }))
}

/// One event of a session: the `params.event` object of a `session.event`
/// notification.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionEvent {
    /// `id`: the event's UUID (empty if the event has none).
    pub id: String,
    /// `parentId`: the event this one follows, `None` for the first.
    pub parent_id: Option<String>,
    /// `timestamp`: ISO 8601 (empty if the event has none).
    pub timestamp: String,
    /// `ephemeral`: the event is not persisted to the session's log.
    pub ephemeral: bool,
    /// `agentId`: the sub-agent that produced the event, `None` for the root agent.
    pub agent_id: Option<String>,
    /// The `type` and its `data`.
    pub kind: EventKind,
}

impl SessionEvent {
    /// The wire `type` of the event, such as `assistant.message`.
    pub fn event_type(&self) -> &str {
        self.kind.event_type()
    }

    /// An event that serde cannot read (a lone surrogate in a string, a
    /// number out of range) though it is valid on the wire: delivered as
    /// [`EventKind::Other`] with its raw `data` text as a JSON string.
    pub(crate) fn raw(event: &[u8]) -> SessionEvent {
        let v = copilot_core::Value::parse(event).ok();
        let text = |key: &str| {
            let s = v.as_ref().and_then(|v| v.get(key)).and_then(|s| s.as_str())?;
            let mut buf = vec![0; s.raw().len()];
            s.decode_into(&mut buf).map(str::to_owned)
        };
        let data = v.as_ref().and_then(|v| v.get("data")).map(|d| String::from_utf8_lossy(d.as_bytes()).into_owned());
        SessionEvent {
            id: text("id").unwrap_or_default(),
            parent_id: text("parentId"),
            timestamp: text("timestamp").unwrap_or_default(),
            ephemeral: false,
            agent_id: text("agentId"),
            kind: EventKind::Other {
                event_type: text("type").unwrap_or_default(),
                data: data.map_or(serde_json::Value::Null, serde_json::Value::String),
            },
        }
    }

    /// Parses the JSON of a `params.event` object
    /// (`{type, data, id, timestamp, parentId, ephemeral?, agentId?}`).
    ///
    /// Fails only when `event` is not a JSON object with a string `type`.
    /// Data that does not fit the typed variant of its type gives
    /// [`EventKind::Other`]; an absent `data` is read as `{}`; an absent or
    /// non-string `id` or `timestamp` gives an empty string.
    pub fn from_json(event: &[u8]) -> Result<SessionEvent, serde_json::Error> {
        let mut parsed = SessionEvent::empty();
        parsed.read(event)?;
        Ok(parsed)
    }

    /// As [`from_json`](Self::from_json), read where it is shared from:
    /// the event (over 1.5 KB) is written in place rather than moved there.
    pub(crate) fn from_json_shared(event: &[u8]) -> Result<std::sync::Arc<SessionEvent>, serde_json::Error> {
        let mut shared = std::sync::Arc::new(SessionEvent::empty());
        std::sync::Arc::get_mut(&mut shared).expect("not shared yet").read(event)?;
        Ok(shared)
    }

    fn empty() -> SessionEvent {
        SessionEvent {
            id: String::new(),
            parent_id: None,
            timestamp: String::new(),
            ephemeral: false,
            agent_id: None,
            kind: EventKind::Other { event_type: String::new(), data: Value::Null },
        }
    }

    /// Reads `event` into `self` (an empty event).
    fn read(&mut self, event: &[u8]) -> Result<(), serde_json::Error> {
        // One pass, the data read straight into its variant, when `type`
        // comes before `data` (as the CLI writes every event) and the data
        // fits; otherwise (drifted data, unreadable JSON, a repeated `type`
        // after the data) the reading in two steps below decides.
        let envelope = match read_envelope(event, Some(&mut self.kind)) {
            Ok(envelope) => envelope,
            Err(_) => read_envelope(event, None)?,
        };
        match envelope.data {
            EventData::Typed => {}
            // `Some` only when a repeated `type` named a typed one after the
            // data was read for an untyped one.
            EventData::Parsed(data) => {
                self.kind = match EventKind::parse_typed_value(&envelope.event_type, &data) {
                    Some(kind) => kind,
                    None => EventKind::Other { event_type: envelope.event_type.into_owned(), data },
                }
            }
            EventData::Raw(raw) => {
                // Every event type's data is an object in the schema, and an
                // object lets the structs whose fields are all optional parse.
                let data = raw.map_or("{}", RawValue::get);
                self.kind = match EventKind::parse_typed(&envelope.event_type, data) {
                    Some(kind) => kind,
                    None => EventKind::Other {
                        event_type: envelope.event_type.into_owned(),
                        data: serde_json::from_str(data)?,
                    },
                }
            }
        }
        self.id = envelope.id.unwrap_or_default();
        self.parent_id = envelope.parent_id;
        self.timestamp = envelope.timestamp.unwrap_or_default();
        self.ephemeral = envelope.ephemeral;
        self.agent_id = envelope.agent_id;
        Ok(())
    }
}

/// Reads the outer event object; with `direct`, the data of a `type` read
/// before it goes straight into its variant there, and failing that fails.
fn read_envelope<'a>(event: &'a [u8], direct: Option<&mut EventKind>) -> Result<Envelope<'a>, serde_json::Error> {
    // UTF-8 checked once for the whole event, not string by string (JSON
    // text that is not UTF-8 is unreadable anyway).
    let text = std::str::from_utf8(event).map_err(de::Error::custom)?;
    let mut de = serde_json::Deserializer::from_str(text);
    let envelope = de.deserialize_map(EnvelopeVisitor { direct, _input: std::marker::PhantomData })?;
    de.end()?;
    Ok(envelope)
}

pub use crate::generated::events::*;

/// The data of `assistant.turn_start` (the name this crate used before the
/// events were generated).
pub type TurnStartData = AssistantTurnStartData;
/// The data of `assistant.turn_end`.
pub type TurnEndData = AssistantTurnEndData;
/// A tool call requested by an assistant message.
pub type ToolRequest = AssistantMessageToolRequest;
/// The result of a successful tool call (`tool.execution_complete`).
pub type ToolResult = ToolExecutionCompleteResult;
/// The error of a failed tool call (`tool.execution_complete`).
pub type ToolError = ToolExecutionCompleteError;

impl PermissionRequestedData {
    /// `permissionRequest.kind`, such as `shell` or `custom-tool`.
    pub fn kind(&self) -> Option<&str> {
        self.permission_request.get("kind").and_then(Value::as_str)
    }
}

impl PermissionCompletedData {
    /// `result.kind`, such as `approved` or `denied-interactively-by-user`.
    pub fn result_kind(&self) -> Option<&str> {
        self.result.get("kind").and_then(Value::as_str)
    }
}

/// A change to a session's life: the params of a `session.lifecycle`
/// notification.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LifecycleEvent {
    /// `type`: what happened.
    #[serde(rename = "type")]
    pub kind: LifecycleKind,
    /// The session it concerns.
    pub session_id: String,
    /// What the CLI says about the session (not on `session.deleted`);
    /// `None` too for metadata that does not fit, so the event still
    /// arrives.
    #[serde(default, deserialize_with = "lenient")]
    pub metadata: Option<LifecycleMetadata>,
}

/// The `type` of a [`LifecycleEvent`].
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum LifecycleKind {
    /// `session.created`.
    Created,
    /// `session.deleted`.
    Deleted,
    /// `session.updated`: its summary or modification time changed.
    Updated,
    /// `session.foreground`: a CLI with a terminal UI shows it.
    Foreground,
    /// `session.background`: a CLI with a terminal UI no longer shows it.
    Background,
    /// A type this version does not know, as received.
    Other(String),
}

impl LifecycleKind {
    /// The wire `type`, such as `session.created`.
    pub fn as_str(&self) -> &str {
        match self {
            LifecycleKind::Created => "session.created",
            LifecycleKind::Deleted => "session.deleted",
            LifecycleKind::Updated => "session.updated",
            LifecycleKind::Foreground => "session.foreground",
            LifecycleKind::Background => "session.background",
            LifecycleKind::Other(other) => other,
        }
    }
}

impl From<&str> for LifecycleKind {
    fn from(value: &str) -> Self {
        match value {
            "session.created" => LifecycleKind::Created,
            "session.deleted" => LifecycleKind::Deleted,
            "session.updated" => LifecycleKind::Updated,
            "session.foreground" => LifecycleKind::Foreground,
            "session.background" => LifecycleKind::Background,
            other => LifecycleKind::Other(other.to_owned()),
        }
    }
}

impl<'de> Deserialize<'de> for LifecycleKind {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Ok(LifecycleKind::from(&*Cow::<'de, str>::deserialize(deserializer)?))
    }
}

/// The `metadata` of a [`LifecycleEvent`].
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct LifecycleMetadata {
    /// When the session was created (ISO 8601).
    #[serde(default)]
    pub start_time: String,
    /// When the session last changed (ISO 8601).
    #[serde(default)]
    pub modified_time: String,
    /// A summary of the session, once there is one.
    #[serde(default)]
    pub summary: Option<String>,
}

impl LifecycleEvent {
    /// Parses the JSON of a `session.lifecycle` notification's params
    /// (`{type, sessionId, metadata?}`). Fails when `type` or `sessionId` is
    /// not a string.
    pub fn from_json(params: &[u8]) -> Result<LifecycleEvent, serde_json::Error> {
        serde_json::from_slice(params)
    }
}

// The outer event object, read in one pass. `type` borrows from the input
// unless it has escapes.
struct Envelope<'a> {
    event_type: Cow<'a, str>,
    data: EventData<'a>,
    id: Option<String>,
    timestamp: Option<String>,
    parent_id: Option<String>,
    ephemeral: bool,
    agent_id: Option<String>,
}

// The event's `data`. When `type` comes first (as the CLI writes it), the
// data is read in one pass: into its variant (`Typed`, when reading
// directly), or into a `Value` when the type has no variant. Otherwise it
// stays raw text (`None` if absent), parsed once the type is known and
// parsed again as a `Value` only if it does not fit its struct.
enum EventData<'a> {
    Raw(Option<&'a RawValue>),
    Parsed(Value),
    /// Read into the variant, in place.
    Typed,
}

// The data of a `type` already read, straight into its variant (in the
// event's `kind`), or into a `Value` when the type has none.
struct DataOf<'t, 'k>(&'t str, &'k mut EventKind);

impl<'de> DeserializeSeed<'de> for DataOf<'_, '_> {
    type Value = EventData<'de>;

    fn deserialize<D: Deserializer<'de>>(self, data: D) -> Result<EventData<'de>, D::Error> {
        match EventKind::deserialize_typed_into(self.0, data, self.1) {
            Ok(read) => read.map(|()| EventData::Typed),
            Err(data) => Value::deserialize(data).map(EventData::Parsed),
        }
    }
}

#[derive(Deserialize)]
#[serde(field_identifier, rename_all = "camelCase")]
enum EnvelopeField {
    Type,
    Data,
    Id,
    Timestamp,
    ParentId,
    Ephemeral,
    AgentId,
    #[serde(other)]
    Unknown,
}

impl<'de: 'a, 'a> Deserialize<'de> for Envelope<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(EnvelopeVisitor { direct: None, _input: std::marker::PhantomData })
    }
}

struct EnvelopeVisitor<'a, 'k> {
    /// Where to read a typed event's data straight into its variant.
    direct: Option<&'k mut EventKind>,
    _input: std::marker::PhantomData<&'a ()>,
}

impl<'de: 'a, 'a> Visitor<'de> for EnvelopeVisitor<'a, '_> {
    type Value = Envelope<'a>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a session event object with a string \"type\"")
    }

    // A repeated key keeps its last value, as a generic JSON parser would,
    // instead of failing the event.
    fn visit_map<A: MapAccess<'de>>(mut self, mut map: A) -> Result<Envelope<'a>, A::Error> {
        let mut event_type: Option<Cow<'a, str>> = None;
        let mut envelope = Envelope {
            event_type: Cow::Borrowed(""),
            data: EventData::Raw(None),
            id: None,
            timestamp: None,
            parent_id: None,
            ephemeral: false,
            agent_id: None,
        };
        while let Some(field) = map.next_key::<EnvelopeField>()? {
            // Metadata of the wrong JSON type is dropped rather than failing
            // the event: only `type` is needed to deliver it.
            match field {
                EnvelopeField::Type => {
                    if matches!(envelope.data, EventData::Typed) {
                        // Read for a type this one replaces: the reading
                        // in two steps decides.
                        return Err(de::Error::custom("a repeated \"type\" after the data"));
                    }
                    event_type = Some(map.next_value::<EventTypeStr<'a>>()?.0)
                }
                EnvelopeField::Data => {
                    envelope.data = match (&event_type, self.direct.as_deref_mut()) {
                        (Some(known), Some(out)) => map.next_value_seed(DataOf(known, out))?,
                        (Some(known), None) if !EventKind::is_typed(known) => EventData::Parsed(map.next_value()?),
                        _ => EventData::Raw(Some(map.next_value()?)),
                    }
                }
                EnvelopeField::Id => envelope.id = map.next_value::<LenientScalar>()?.into_string(),
                EnvelopeField::Timestamp => envelope.timestamp = map.next_value::<LenientScalar>()?.into_string(),
                EnvelopeField::ParentId => envelope.parent_id = map.next_value::<LenientScalar>()?.into_string(),
                EnvelopeField::AgentId => envelope.agent_id = map.next_value::<LenientScalar>()?.into_string(),
                EnvelopeField::Ephemeral => {
                    envelope.ephemeral = matches!(map.next_value::<LenientScalar>()?, LenientScalar::Bool(true))
                }
                EnvelopeField::Unknown => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        envelope.event_type = event_type.ok_or_else(|| de::Error::missing_field("type"))?;
        Ok(envelope)
    }
}

// The event `type`, borrowed from the input when it has no escapes.
struct EventTypeStr<'a>(Cow<'a, str>);

impl<'de: 'a, 'a> Deserialize<'de> for EventTypeStr<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct EventTypeVisitor<'a>(std::marker::PhantomData<&'a ()>);

        impl<'de: 'a, 'a> Visitor<'de> for EventTypeVisitor<'a> {
            type Value = EventTypeStr<'a>;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("the event type as a string")
            }

            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(EventTypeStr(Cow::Borrowed(v)))
            }

            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(EventTypeStr(Cow::Owned(v.to_owned())))
            }

            fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
                Ok(EventTypeStr(Cow::Owned(v)))
            }
        }

        deserializer.deserialize_str(EventTypeVisitor(std::marker::PhantomData))
    }
}

// An envelope metadata value read without failing: strings and booleans are
// kept, any other JSON value is skipped.
enum LenientScalar {
    Str(String),
    Bool(bool),
    Other,
}

impl LenientScalar {
    fn into_string(self) -> Option<String> {
        match self {
            LenientScalar::Str(s) => Some(s),
            _ => None,
        }
    }
}

impl<'de> Deserialize<'de> for LenientScalar {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(LenientScalarVisitor)
    }
}

struct LenientScalarVisitor;

impl<'de> Visitor<'de> for LenientScalarVisitor {
    type Value = LenientScalar;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<LenientScalar, E> {
        Ok(LenientScalar::Str(v.to_owned()))
    }

    fn visit_string<E: de::Error>(self, v: String) -> Result<LenientScalar, E> {
        Ok(LenientScalar::Str(v))
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<LenientScalar, E> {
        Ok(LenientScalar::Bool(v))
    }

    fn visit_i64<E: de::Error>(self, _: i64) -> Result<LenientScalar, E> {
        Ok(LenientScalar::Other)
    }

    fn visit_u64<E: de::Error>(self, _: u64) -> Result<LenientScalar, E> {
        Ok(LenientScalar::Other)
    }

    fn visit_f64<E: de::Error>(self, _: f64) -> Result<LenientScalar, E> {
        Ok(LenientScalar::Other)
    }

    fn visit_unit<E: de::Error>(self) -> Result<LenientScalar, E> {
        Ok(LenientScalar::Other)
    }

    fn visit_none<E: de::Error>(self) -> Result<LenientScalar, E> {
        Ok(LenientScalar::Other)
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<LenientScalar, D::Error> {
        deserializer.deserialize_any(self)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<LenientScalar, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(LenientScalar::Other)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<LenientScalar, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(LenientScalar::Other)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use serde_json::json;

    use super::*;

    const TRANSCRIPTS: [(&str, &str); 6] = [
        ("client_tool-stdio", include_str!("../../tests/fixtures/transcripts/client_tool-stdio.jsonl")),
        ("client_tool-tcp", include_str!("../../tests/fixtures/transcripts/client_tool-tcp.jsonl")),
        ("permission-stdio", include_str!("../../tests/fixtures/transcripts/permission-stdio.jsonl")),
        ("permission-tcp", include_str!("../../tests/fixtures/transcripts/permission-tcp.jsonl")),
        ("reply-stdio", include_str!("../../tests/fixtures/transcripts/reply-stdio.jsonl")),
        ("reply-tcp", include_str!("../../tests/fixtures/transcripts/reply-tcp.jsonl")),
    ];

    // One transcript line: `{direction, t_ms, message}`. `params` stays raw
    // so the parsers see the bytes the CLI sent.
    #[derive(Deserialize)]
    struct Line<'a> {
        #[serde(borrow)]
        message: Message<'a>,
    }

    #[derive(Deserialize)]
    struct Message<'a> {
        #[serde(default)]
        method: Option<String>,
        #[serde(borrow, default)]
        params: Option<&'a RawValue>,
    }

    #[derive(Deserialize)]
    struct EventParams<'a> {
        #[serde(borrow)]
        event: &'a RawValue,
    }

    // The raw `params` of every notification with this method in a transcript.
    fn params_of<'a>(transcript: &'a str, method: &str) -> Vec<&'a RawValue> {
        let mut found = Vec::new();
        for line in transcript.lines().filter(|l| !l.trim().is_empty()) {
            let line: Line<'_> = serde_json::from_str(line).expect("transcript line is JSON");
            if line.message.method.as_deref() == Some(method) {
                found.push(line.message.params.expect("notification has params"));
            }
        }
        found
    }

    fn events_of(transcript: &str) -> Vec<(Value, SessionEvent)> {
        params_of(transcript, "session.event")
            .into_iter()
            .map(|params| {
                let params: EventParams<'_> = serde_json::from_str(params.get()).expect("params has event");
                let raw = event_json(params.event);
                let event = SessionEvent::from_json(params.event.get().as_bytes())
                    .unwrap_or_else(|e| panic!("event {raw} does not parse: {e}"));
                (raw, event)
            })
            .collect()
    }

    // The typed data written back, and `raw`, without the object keys whose
    // value is null (an optional field reads `null` and absent alike) and
    // with every number as a float.
    fn typed_data(kind: &EventKind, raw: &Value) -> (Value, Value) {
        fn strip_nulls(v: &mut Value) {
            match v {
                Value::Object(map) => {
                    map.retain(|_, v| !v.is_null());
                    map.values_mut().for_each(strip_nulls);
                }
                Value::Array(items) => items.iter_mut().for_each(strip_nulls),
                // `1` read into an `f64` field is written back as `1.0`.
                Value::Number(n) => *v = n.as_f64().map_or(Value::Null, Value::from),
                _ => {}
            }
        }
        assert!(!matches!(kind, EventKind::Other { .. }));
        let (mut typed, mut raw) = (kind.data_value(), raw.clone());
        strip_nulls(&mut typed);
        strip_nulls(&mut raw);
        (typed, raw)
    }

    fn event_json(raw: &RawValue) -> Value {
        serde_json::from_str(raw.get()).expect("event is JSON")
    }

    fn transcript(name: &str) -> &'static str {
        TRANSCRIPTS.iter().find(|(n, _)| *n == name).map(|(_, t)| *t).expect("known transcript")
    }

    fn parse(event: Value) -> SessionEvent {
        SessionEvent::from_json(event.to_string().as_bytes()).expect("event parses")
    }

    fn event_with(event_type: &str, data: Value) -> SessionEvent {
        parse(json!({"type": event_type, "data": data, "id": "e-1", "timestamp": "t", "parentId": null}))
    }

    #[test]
    fn every_transcript_event_parses_into_its_typed_variant() {
        let mut typed_seen = BTreeSet::new();
        let mut total = 0;
        for (name, text) in TRANSCRIPTS {
            for (raw, event) in events_of(text) {
                total += 1;
                let wire_type = raw["type"].as_str().expect("type is a string");
                assert_eq!(event.event_type(), wire_type, "{name}");
                assert_eq!(event.id, raw["id"].as_str().expect("id"), "{name}");
                assert_eq!(event.timestamp, raw["timestamp"].as_str().expect("timestamp"), "{name}");
                assert_eq!(event.parent_id.as_deref(), raw["parentId"].as_str(), "{name}");
                assert_eq!(event.ephemeral, raw["ephemeral"].as_bool().unwrap_or(false), "{name}");
                assert_eq!(event.agent_id.as_deref(), raw["agentId"].as_str(), "{name}");
                assert!(EVENT_TYPES.contains(&wire_type), "{name}: {wire_type} has a variant");
                assert!(
                    !matches!(event.kind, EventKind::Other { .. }),
                    "{name}: {wire_type} fell back to Other; its data no longer fits: {}",
                    raw["data"]
                );
                typed_seen.insert(wire_type.to_owned());
                // The typed data holds every field the CLI sent: written
                // back, it is the data received.
                let (typed, sent) = typed_data(&event.kind, &raw["data"]);
                assert_eq!(typed, sent, "{name}: {wire_type} lost or changed a field");
            }
        }
        assert_eq!(total, 334, "the six transcripts hold 334 session.event notifications");
        // Guards against the loop passing because nothing typed was seen:
        // the 40 types of the transcripts, 31 of the schema and nine
        // `model.*` debug events seen on the wire (their data is JSON).
        let expected: BTreeSet<String> = [
            "model.log",
            "model.message",
            "model.messages_snapshot",
            "model.model_call_started",
            "model.model_call_success",
            "model.response",
            "model.tool_execution",
            "model.turn_ended",
            "model.turn_started",
            "assistant.idle",
            "assistant.message",
            "assistant.turn_end",
            "assistant.turn_start",
            "assistant.usage",
            "external_tool.completed",
            "external_tool.requested",
            "model.call_final_result",
            "model.call_finished",
            "model.call_start",
            "pending_messages.modified",
            "permission.completed",
            "permission.requested",
            "sandbox.decision",
            "session.background_tasks_changed",
            "session.idle",
            "session.managed_settings_resolved",
            "session.mcp_server_status_changed",
            "session.mcp_server_tools_loaded",
            "session.mcp_servers_loaded",
            "session.shutdown",
            "session.start",
            "session.title_changed",
            "session.tools_updated",
            "session.usage_info",
            "system.message",
            "tool.execution_complete",
            "tool.execution_partial_result",
            "tool.execution_start",
            "tool.shell_output",
            "user.message",
        ]
        .into_iter()
        .map(String::from)
        .collect();
        assert_eq!(typed_seen, expected);
    }

    #[test]
    fn reply_transcript_values() {
        let events = events_of(transcript("reply-stdio"));
        let messages: Vec<_> = events
            .iter()
            .filter_map(|(_, e)| match &e.kind {
                EventKind::AssistantMessage(m) => Some(m),
                _ => None,
            })
            .collect();
        assert_eq!(messages.len(), 1);
        assert_eq!(messages[0].content, "Hello! This reply came from the scripted fake model.");
        assert_eq!(messages[0].tool_requests.as_deref(), Some(&[][..]));
        assert_eq!(messages[0].turn_id.as_deref(), Some("0"));

        let start = events
            .iter()
            .find_map(|(_, e)| match &e.kind {
                EventKind::SessionStart(s) => Some(s),
                _ => None,
            })
            .expect("session.start");
        assert_eq!(start.session_id, "03758533-fcc5-4377-9de0-183050632a93");
        assert_eq!(start.version, 1);
        assert_eq!(start.producer, "copilot-agent");
        assert_eq!(start.copilot_version, "1.0.102");
        assert_eq!(start.selected_model.as_deref(), Some("claude-sonnet-4.5"));
        assert_eq!(start.already_in_use, Some(false));
        assert_eq!(start.context.as_ref().map(|c| c.cwd.as_str()), Some("/tmp/X/work/reply"));

        let user = events
            .iter()
            .find_map(|(_, e)| match &e.kind {
                EventKind::UserMessage(u) => Some(u),
                _ => None,
            })
            .expect("user.message");
        assert_eq!(user.content, "Say hello.");

        let (_, idle) = events.iter().find(|(_, e)| e.event_type() == "session.idle").expect("session.idle");
        assert!(idle.ephemeral);
        assert!(matches!(&idle.kind, EventKind::SessionIdle(IdleData { aborted: None, .. })));
    }

    #[test]
    fn client_tool_transcript_values() {
        let events = events_of(transcript("client_tool-stdio"));
        let kinds: Vec<&EventKind> = events.iter().map(|(_, e)| &e.kind).collect();

        let tool_request = kinds
            .iter()
            .find_map(|k| match k {
                EventKind::AssistantMessage(m) => m.tool_requests.as_ref()?.first(),
                _ => None,
            })
            .expect("an assistant.message with a tool request");
        assert_eq!(tool_request.tool_call_id, "call_weather_1");
        assert_eq!(tool_request.name, "get_weather");
        assert_eq!(tool_request.arguments, Some(json!({"city": "Paris"})));
        assert_eq!(tool_request.r#type, Some(AssistantMessageToolRequestType::Function));

        let permission = kinds
            .iter()
            .find_map(|k| match k {
                EventKind::PermissionRequested(p) => Some(p),
                _ => None,
            })
            .expect("permission.requested");
        assert_eq!(permission.kind(), Some("custom-tool"));
        assert_eq!(permission.request_id, "2f5ea881-1c9a-4664-95e1-9bba9fc48bb9");
        assert_eq!(permission.resolved_by_hook, None);

        let decided = kinds
            .iter()
            .find_map(|k| match k {
                EventKind::PermissionCompleted(p) => Some(p),
                _ => None,
            })
            .expect("permission.completed");
        assert_eq!(decided.request_id, permission.request_id);
        assert_eq!(decided.result_kind(), Some("approved"));
        assert_eq!(decided.tool_call_id.as_deref(), Some("call_weather_1"));

        let tool_kind =
            kinds.iter().find(|k| matches!(k, EventKind::ExternalToolRequested(_))).expect("external_tool.requested");
        let EventKind::ExternalToolRequested(tool) = tool_kind else { unreachable!() };
        assert_eq!(tool.tool_name, "get_weather");
        assert_eq!(tool.arguments.as_ref().and_then(|a| a["city"].as_str()), Some("Paris"));
        assert_eq!(tool.tool_call_id, "call_weather_1");
        assert_eq!(tool.session_id, "287ad97a-462d-456c-8108-7451595136b8");
        assert_eq!(tool.working_directory.as_deref(), Some("/tmp/X/work/client_tool"));
        assert_eq!(tool_kind.request_id(), Some("efa7f97d-aea1-43e8-90e1-32134ec08931"));

        let completed =
            kinds.iter().find(|k| matches!(k, EventKind::ExternalToolCompleted(_))).expect("external_tool.completed");
        assert_eq!(completed.request_id(), tool_kind.request_id());

        let done = kinds
            .iter()
            .find_map(|k| match k {
                EventKind::ToolExecutionComplete(c) => Some(c),
                _ => None,
            })
            .expect("tool.execution_complete");
        assert!(done.success);
        assert_eq!(done.result.as_ref().map(|r| r.content.as_str()), Some("Sunny, 22 C, light wind from the west."));
        assert!(done.error.is_none());
    }

    #[test]
    fn permission_transcript_asks_for_shell() {
        for name in ["permission-stdio", "permission-tcp"] {
            let events = events_of(transcript(name));
            let permission = events
                .iter()
                .find_map(|(_, e)| match &e.kind {
                    EventKind::PermissionRequested(p) => Some(p),
                    _ => None,
                })
                .expect("permission.requested");
            assert_eq!(permission.kind(), Some("shell"), "{name}");
            assert_eq!(
                permission.permission_request["fullCommandText"].as_str(),
                Some("echo fake-capi-proof-1234 > proof.txt && cat proof.txt")
            );
            let start = events
                .iter()
                .find_map(|(_, e)| match &e.kind {
                    EventKind::ToolExecutionStart(s) => Some(s),
                    _ => None,
                })
                .expect("tool.execution_start");
            assert_eq!(start.tool_name, "bash");
        }
    }

    #[test]
    fn every_transcript_lifecycle_notification_parses() {
        let mut kinds = BTreeSet::new();
        for (name, text) in TRANSCRIPTS {
            for params in params_of(text, "session.lifecycle") {
                let raw = event_json(params);
                let event = LifecycleEvent::from_json(params.get().as_bytes())
                    .unwrap_or_else(|e| panic!("{name}: lifecycle {raw} does not parse: {e}"));
                assert_eq!(event.kind.as_str(), raw["type"].as_str().expect("type"));
                assert!(!matches!(event.kind, LifecycleKind::Other(_)), "{name}: {raw} has a typed kind");
                assert_eq!(event.session_id, raw["sessionId"].as_str().expect("sessionId"));
                let metadata = event.metadata.as_ref().expect("created and updated carry metadata");
                assert_eq!(metadata.start_time, raw["metadata"]["startTime"].as_str().expect("startTime"));
                assert_eq!(metadata.modified_time, raw["metadata"]["modifiedTime"].as_str().expect("modifiedTime"));
                assert_eq!(metadata.summary.as_deref(), raw["metadata"]["summary"].as_str());
                kinds.insert(event.kind.as_str().to_owned());
            }
        }
        assert_eq!(kinds, BTreeSet::from(["session.created".to_owned(), "session.updated".to_owned()]));

        let first = params_of(transcript("client_tool-stdio"), "session.lifecycle")[0];
        let first = LifecycleEvent::from_json(first.get().as_bytes()).expect("parses");
        assert_eq!(first.kind, LifecycleKind::Created);
        assert_eq!(first.session_id, "287ad97a-462d-456c-8108-7451595136b8");
        assert_eq!(first.metadata.as_ref().map(|m| m.start_time.as_str()), Some("2026-11-29T15:13:07.696Z"));
    }

    #[test]
    fn lifecycle_without_session_id_is_an_error() {
        assert!(LifecycleEvent::from_json(br#"{"type":"session.deleted"}"#).is_err());
        assert!(LifecycleEvent::from_json(br#"{"type":7,"sessionId":"s"}"#).is_err());
        assert!(LifecycleEvent::from_json(b"[]").is_err());
        let deleted = LifecycleEvent::from_json(br#"{"type":"session.deleted","sessionId":"s","extra":1}"#)
            .expect("metadata is optional");
        assert_eq!(deleted.metadata, None);
        assert_eq!(deleted.kind, LifecycleKind::Deleted);
    }

    #[test]
    fn every_lifecycle_kind_is_typed_and_drift_still_arrives() {
        for kind in
            ["session.created", "session.deleted", "session.updated", "session.foreground", "session.background"]
        {
            let json = format!(r#"{{"type":"{kind}","sessionId":"s"}}"#);
            let event = LifecycleEvent::from_json(json.as_bytes()).expect("parses");
            assert!(!matches!(event.kind, LifecycleKind::Other(_)), "{kind} is typed");
            assert_eq!(event.kind.as_str(), kind);
        }
        let drifted = br#"{"type":"session.renamed","sessionId":"s","metadata":{"startTime":5}}"#;
        let event = LifecycleEvent::from_json(drifted).expect("an unknown type and unfit metadata still parse");
        assert_eq!(event.kind, LifecycleKind::Other("session.renamed".into()));
        assert_eq!(event.metadata, None);
    }

    #[test]
    fn data_that_does_not_fit_becomes_other_with_the_data_kept() {
        let data = json!({"messageId": "m-1", "content": 42});
        let event = event_with("assistant.message", data.clone());
        assert_eq!(event.event_type(), "assistant.message");
        assert_eq!(event.kind, EventKind::Other { event_type: "assistant.message".into(), data });
        assert_eq!(event.id, "e-1");
    }

    #[test]
    fn an_enum_value_the_schema_does_not_list_keeps_the_event_typed() {
        let event = event_with("abort", json!({"reason": "brand_new_reason"}));
        let EventKind::Abort(abort) = &event.kind else { panic!("{:?}", event.kind) };
        assert_eq!(abort.reason, AbortReason::Unknown("brand_new_reason".into()));
        assert_eq!(abort.reason.as_str(), "brand_new_reason");
        assert_eq!(event.kind.data_value(), json!({"reason": "brand_new_reason"}));
        let known = event_with("abort", json!({"reason": "user_initiated"}));
        assert!(matches!(&known.kind, EventKind::Abort(a) if a.reason == AbortReason::UserInitiated));
    }

    #[test]
    fn drifted_request_keeps_its_request_id() {
        // `permissionRequest` is required; without it the event cannot be
        // typed, but the client must still be able to answer it.
        let event = event_with("permission.requested", json!({"requestId": "r-9"}));
        assert!(matches!(event.kind, EventKind::Other { .. }));
        assert_eq!(event.kind.request_id(), Some("r-9"));
    }

    #[test]
    fn unknown_type_becomes_other() {
        // Sampling is typed now; the raw data of a drifted one is kept.
        let data = json!({"requestId": "r-1", "serverName": "s", "mcpRequestId": 3});
        let event = event_with("sampling.requested", data.clone());
        assert!(matches!(&event.kind, EventKind::SamplingRequested(s) if s.server_name == "s"));
        assert_eq!(event.kind.request_id(), Some("r-1"));
        let drifted = json!({"requestId": "r-2", "serverName": 5});
        let event = event_with("sampling.requested", drifted.clone());
        assert_eq!(event.kind, EventKind::Other { event_type: "sampling.requested".into(), data: drifted });
        assert_eq!(event.kind.request_id(), Some("r-2"));

        let event = event_with("brand.new_type", json!({"x": [1, 2]}));
        assert_eq!(event.kind.request_id(), None);
        assert!(matches!(&event.kind, EventKind::Other { event_type, .. } if event_type == "brand.new_type"));
    }

    #[test]
    fn an_envelope_that_is_not_an_object_with_a_string_type_is_an_error() {
        for bad in [
            &b"[]"[..],
            b"\"session.idle\"",
            b"null",
            b"42",
            b"",
            b"{",
            br#"{"data":{}}"#,
            br#"{"type":null,"data":{}}"#,
            br#"{"type":5,"data":{}}"#,
            br#"{"type":"session.idle","data":{}} trailing"#,
        ] {
            assert!(SessionEvent::from_json(bad).is_err(), "{}", String::from_utf8_lossy(bad));
        }
    }

    #[test]
    fn envelope_metadata_is_lenient() {
        let event = SessionEvent::from_json(br#"{"type":"session.idle","data":{"aborted":true}}"#).expect("parses");
        assert_eq!(event.id, "");
        assert_eq!(event.timestamp, "");
        assert_eq!(event.parent_id, None);
        assert!(!event.ephemeral);
        assert_eq!(event.agent_id, None);
        assert!(matches!(event.kind, EventKind::SessionIdle(IdleData { aborted: Some(true), mode: None, .. })));

        let event = SessionEvent::from_json(
            br#"{"id":7,"timestamp":{"a":[1]},"parentId":false,"ephemeral":"yes","agentId":[null],"type":"abort","data":{"reason":"user_initiated"}}"#,
        )
        .expect("wrong-typed metadata does not lose the event");
        assert_eq!((event.id.as_str(), event.timestamp.as_str()), ("", ""));
        assert_eq!((event.parent_id, event.agent_id, event.ephemeral), (None, None, false));
        assert_eq!(event.kind, EventKind::Abort(AbortData { reason: "user_initiated".into() }));

        let event = SessionEvent::from_json(
            br#"{"type":"assistant.idle","id":"a","timestamp":"t","parentId":"p","ephemeral":true,"agentId":"sub-1","extra":{"k":1}}"#,
        )
        .expect("parses");
        assert!(
            matches!(event.kind, EventKind::AssistantIdle(AssistantIdleData { aborted: None, .. })),
            "absent data reads as {{}}"
        );
        assert_eq!(event.parent_id.as_deref(), Some("p"));
        assert_eq!(event.agent_id.as_deref(), Some("sub-1"));
        assert!(event.ephemeral);
    }

    #[test]
    fn escaped_type_and_repeated_keys() {
        let event = SessionEvent::from_json(
            br#"{"type":"x","type":"session.title_changed","data":{"title":"a\"b"},"id":"1","id":"2"}"#,
        )
        .expect("parses");
        assert_eq!(event.kind, EventKind::SessionTitleChanged(TitleChangedData { title: "a\"b".into() }));
        assert_eq!(event.id, "2");

        let event =
            SessionEvent::from_json(br#"{"type":"session.title\u005fchanged","data":{"title":"t"}}"#).expect("parses");
        assert_eq!(event.event_type(), "session.title_changed");

        // The data is read for an untyped type, then `type` changes to a typed one.
        let event =
            SessionEvent::from_json(br#"{"type":"brand.new","data":{"title":"t"},"type":"session.title_changed"}"#)
                .expect("parses");
        assert_eq!(event.kind, EventKind::SessionTitleChanged(TitleChangedData { title: "t".into() }));
        let event = SessionEvent::from_json(br#"{"type":"brand.new","data":{"x":1},"type":"session.title_changed"}"#)
            .expect("parses");
        assert_eq!(event.kind, EventKind::Other { event_type: "session.title_changed".into(), data: json!({"x": 1}) });

        // The data is read into the variant of a typed type, then `type`
        // changes: the last type decides, as for any repeated key.
        let event =
            SessionEvent::from_json(br#"{"type":"session.title_changed","data":{"title":"t"},"type":"brand.new"}"#)
                .expect("parses");
        assert_eq!(event.kind, EventKind::Other { event_type: "brand.new".into(), data: json!({"title": "t"}) });

        // `data` before `type` takes the raw path, typed or not.
        let event =
            SessionEvent::from_json(br#"{"data":{"title":"t"},"type":"session.title_changed"}"#).expect("parses");
        assert_eq!(event.kind, EventKind::SessionTitleChanged(TitleChangedData { title: "t".into() }));
        let event = SessionEvent::from_json(br#"{"data":{"x":[1]},"type":"brand.new"}"#).expect("parses");
        assert_eq!(event.kind, EventKind::Other { event_type: "brand.new".into(), data: json!({"x": [1]}) });
    }

    #[test]
    fn null_data_of_a_typed_event_becomes_other() {
        let event = event_with("session.idle", Value::Null);
        assert_eq!(event.kind, EventKind::Other { event_type: "session.idle".into(), data: Value::Null });
    }

    // Samples shaped after the schema for typed variants the transcripts do
    // not exercise, with only the required fields and with optional ones.
    #[test]
    fn schema_shaped_samples_parse_into_their_variants() {
        let samples = [
            ("session.resume", json!({"resumeTime": "t", "eventCount": 12, "sessionWasActive": true})),
            (
                "session.error",
                json!({"errorType": "rate_limit", "message": "slow down", "statusCode": 429, "errorCode": "x"}),
            ),
            (
                "session.shutdown",
                json!({"shutdownType": "routine", "totalApiDurationMs": 5, "sessionStartTime": 1,
                       "codeChanges": {"linesAdded": 1, "linesRemoved": 0, "filesModified": ["a.rs"]},
                       "modelMetrics": {}}),
            ),
            ("assistant.message_delta", json!({"messageId": "m", "deltaContent": "He"})),
            ("assistant.reasoning", json!({"reasoningId": "r", "content": "think", "rte": false})),
            ("assistant.reasoning_delta", json!({"reasoningId": "r", "deltaContent": "th"})),
            ("assistant.idle", json!({"aborted": true})),
            ("abort", json!({"reason": "user_initiated"})),
            (
                "tool.execution_complete",
                json!({"toolCallId": "c", "success": false, "error": {"message": "boom", "code": "E1"}}),
            ),
            (
                "user_input.requested",
                json!({"requestId": "r", "question": "Which?", "choices": ["a", "b"], "allowFreeform": false}),
            ),
            ("user_input.completed", json!({"requestId": "r", "answer": "a", "wasFreeform": false})),
            (
                "elicitation.requested",
                json!({"requestId": "r", "message": "Fill in", "mode": "form",
                       "requestedSchema": {"type": "object", "properties": {"name": {"type": "string"}}}}),
            ),
            (
                "mcp.oauth_required",
                json!({"requestId": "r", "serverName": "s", "serverUrl": "https://s", "reason": "initial"}),
            ),
            (
                "command.execute",
                json!({"requestId": "r", "command": "/deploy prod", "commandName": "deploy", "args": "prod"}),
            ),
            (
                "exit_plan_mode.requested",
                json!({"requestId": "r", "summary": "s", "planContent": "p",
                       "actions": ["exit_only", "autopilot"], "recommendedAction": "autopilot"}),
            ),
        ];
        for (event_type, data) in samples {
            let event = event_with(event_type, data);
            assert!(!matches!(event.kind, EventKind::Other { .. }), "{event_type} fell back to Other");
            assert_eq!(event.event_type(), event_type);
            let awaits_answer = event_type.ends_with(".requested")
                || event_type.ends_with(".completed")
                || matches!(event_type, "mcp.oauth_required" | "command.execute");
            assert_eq!(event.kind.request_id().is_some(), awaits_answer, "{event_type}");
        }

        let EventKind::SessionError(error) =
            event_with("session.error", json!({"errorType": "a", "message": "b"})).kind
        else {
            panic!("session.error is typed");
        };
        assert_eq!((error.status_code, error.stack), (None, None));
    }

    #[test]
    fn typed_event_types_are_unique() {
        let unique: BTreeSet<_> = EVENT_TYPES.iter().collect();
        assert_eq!(unique.len(), EVENT_TYPES.len());
        assert_eq!(EVENT_TYPES.len(), 163 + 9, "the CLI 1.0.102 schema's 163 and nine `model.*` seen on the wire");
    }
}
