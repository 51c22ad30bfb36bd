//! The answer table against the pinned CLI's own schemas (vendored in
//! `core/schemas/1.0.102/`): every kind of wait the schema describes has a
//! row, every row's answer is a method and member the schema knows, and
//! every refusal is valid JSON of the shape the schema asks for.
#![cfg(not(loom))]

use std::collections::BTreeSet;

use copilot_core::{AnswerVia, Refusal, Trigger, Unhandled, ANSWERS, NOT_OBLIGATIONS};
use serde_json::Value;

const API: &str = include_str!("../schemas/1.0.102/api.schema.json");
const EVENTS: &str = include_str!("../schemas/1.0.102/session-events.schema.json");

/// Server requests the CLI sends that its schema does not list.
const HAND_WRITTEN: [&str; 4] =
    ["userInput.request", "exitPlanMode.request", "autoModeSwitch.request", "systemMessage.transform"];

fn resolve<'a>(defs: &'a Value, mut v: &'a Value) -> &'a Value {
    while let Some(r) = v.get("$ref").and_then(Value::as_str) {
        v = &defs[r.rsplit('/').next().unwrap()];
    }
    v
}

/// Every `rpcMethod` under `scope`, with its definition.
fn methods<'a>(v: &'a Value, out: &mut Vec<(&'a str, &'a Value)>) {
    if let Some(obj) = v.as_object() {
        if let Some(m) = obj.get("rpcMethod").and_then(Value::as_str) {
            out.push((m, v));
            return;
        }
        for child in obj.values() {
            methods(child, out);
        }
    }
}

fn table_requests() -> BTreeSet<&'static str> {
    ANSWERS
        .iter()
        .filter_map(|r| match r.trigger {
            Trigger::Request(m) => Some(m),
            Trigger::Event(_) => None,
        })
        .collect()
}

fn table_events() -> BTreeSet<&'static str> {
    ANSWERS
        .iter()
        .filter_map(|r| match r.trigger {
            Trigger::Event(e) => Some(e),
            Trigger::Request(_) => None,
        })
        .collect()
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn every_client_method_with_a_result_has_a_row() {
    let api: Value = serde_json::from_str(API).unwrap();
    let mut found = Vec::new();
    methods(&api["clientSession"], &mut found);
    methods(&api["clientGlobal"], &mut found);
    assert!(found.len() > 30, "the schema's client methods were not found");
    let table = table_requests();
    let mut expected: BTreeSet<&str> = found
        .iter()
        .filter(|(_, d)| d.get("notification").and_then(Value::as_bool) != Some(true))
        .map(|(m, _)| *m)
        .collect();
    expected.extend(HAND_WRITTEN);
    let missing: Vec<_> = expected.difference(&table).collect();
    assert!(missing.is_empty(), "server requests without a row in ANSWERS: {missing:?}");
    let extra: Vec<_> = table.difference(&expected).collect();
    assert!(extra.is_empty(), "rows for requests the CLI does not send: {extra:?}");
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn every_event_with_a_request_id_is_a_row_or_explained() {
    let schema: Value = serde_json::from_str(EVENTS).unwrap();
    let defs = &schema["definitions"];
    let root = resolve(defs, &schema);
    let mut with_request_id = BTreeSet::new();
    for alt in root["anyOf"].as_array().unwrap() {
        let alt = resolve(defs, alt);
        let ty = alt["properties"]["type"]["const"].as_str().unwrap();
        let data = resolve(defs, &alt["properties"]["data"]);
        if data["properties"].get("requestId").is_some() {
            with_request_id.insert(ty);
        }
    }
    assert!(with_request_id.len() > 20, "the schema's events were not found");
    let rows = table_events();
    let explained: BTreeSet<&str> = NOT_OBLIGATIONS.iter().map(|(t, _)| *t).collect();
    assert!(rows.is_disjoint(&explained), "an event is both a row and not an obligation");
    let known: BTreeSet<&str> = rows.union(&explained).copied().collect();
    let unknown: Vec<_> = with_request_id.difference(&known).collect();
    assert!(unknown.is_empty(), "events with a requestId neither answered nor explained: {unknown:?}");
    let stale: Vec<_> = known.difference(&with_request_id).collect();
    assert!(stale.is_empty(), "rows for events the schema does not have: {stale:?}");
    // The core's list of awaited events (whose requestId the envelope
    // reads) agrees with the table both ways.
    for t in copilot_core::REQUEST_EVENT_TYPES {
        assert!(rows.contains(t) || explained.contains(t), "{t}");
    }
    for t in &rows {
        assert!(copilot_core::REQUEST_EVENT_TYPES.contains(t), "the envelope does not read the requestId of {t}");
    }
}

/// A small check of `value` against the parts of a JSON schema the
/// refusals use: type, const, enum, required, properties, anyOf.
fn conforms(defs: &Value, schema: &Value, value: &Value) -> bool {
    let schema = resolve(defs, schema);
    if let Some(any) = schema.get("anyOf").and_then(Value::as_array) {
        return any.iter().any(|s| conforms(defs, s, value));
    }
    if let Some(c) = schema.get("const") {
        return c == value;
    }
    if let Some(e) = schema.get("enum").and_then(Value::as_array) {
        return e.contains(value);
    }
    let type_ok = match schema.get("type").and_then(Value::as_str) {
        Some("object") => value.is_object(),
        Some("string") => value.is_string(),
        Some("boolean") => value.is_boolean(),
        Some("number" | "integer") => value.is_number(),
        _ => true,
    };
    if !type_ok {
        return false;
    }
    if let (Some(obj), Some(props)) = (value.as_object(), schema.get("properties").and_then(Value::as_object)) {
        let required = schema.get("required").and_then(Value::as_array).cloned().unwrap_or_default();
        if !required.iter().all(|k| obj.contains_key(k.as_str().unwrap())) {
            return false;
        }
        return obj.iter().all(|(k, v)| props.get(k).is_none_or(|s| conforms(defs, s, v)));
    }
    true
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn every_refusal_is_valid_and_fits_the_answering_method() {
    let api: Value = serde_json::from_str(API).unwrap();
    let defs = &api["definitions"];
    let mut session_methods = Vec::new();
    methods(&api["session"], &mut session_methods);
    for row in ANSWERS {
        if let Refusal::Payload(p) = row.refusal {
            serde_json::from_str::<Value>(p).unwrap_or_else(|e| panic!("{row:?}: {e}"));
        }
        let AnswerVia::Rpc { method, key } = row.via else { continue };
        let (_, def) = session_methods
            .iter()
            .find(|(m, _)| *m == method)
            .unwrap_or_else(|| panic!("{method} is not in the schema"));
        let params = resolve(defs, &def["params"]);
        let member = params["properties"].get(key).unwrap_or_else(|| panic!("{method} has no member {key}"));
        match row.refusal {
            Refusal::Payload(p) => {
                let value: Value = serde_json::from_str(p).unwrap();
                assert!(conforms(defs, member, &value), "{method}: refusal {p} does not fit {key}");
            }
            Refusal::Omit => {
                let required = params["required"].as_array().unwrap();
                assert!(!required.iter().any(|k| k == key), "{method} requires {key}");
            }
            Refusal::Error { .. } => panic!("{method}: an RPC answer cannot be a JSON-RPC error"),
        }
    }
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn every_failure_answer_and_result_member_fits_the_schema() {
    let api: Value = serde_json::from_str(API).unwrap();
    let defs = &api["definitions"];
    let mut all = Vec::new();
    for scope in ["session", "clientSession", "clientGlobal"] {
        methods(&api[scope], &mut all);
    }
    let def = |m: &str| all.iter().find(|(n, _)| *n == m).map(|(_, d)| *d);
    let mut failures = 0;
    for row in ANSWERS {
        if let Some(member) = row.failure() {
            failures += 1;
            // The failure's text goes as a string under `member`, in place
            // of the answer: the method must take it.
            let AnswerVia::Rpc { method, key } = row.via else { panic!("{row:?}: failures of RPC answers only") };
            assert_ne!(member, key, "{row:?}: the failure goes in place of the answer");
            let params = resolve(defs, &def(method).unwrap()["params"]);
            let text = Value::from("text");
            assert!(conforms(defs, &params["properties"][member], &text), "{method}: no string member {member}");
            let required = params.get("required").and_then(Value::as_array).cloned().unwrap_or_default();
            assert!(!required.iter().any(|k| k == key), "{method} requires {key}: a failure without it would not fit");
        }
        if let AnswerVia::Response { member: Some(key) } = row.via {
            let Trigger::Request(m) = row.trigger else { panic!("{row:?}: a result is a request's") };
            let result = resolve(defs, &def(m).unwrap_or_else(|| panic!("{m} is not in the schema"))["result"]);
            assert!(result["properties"].get(key).is_some(), "{m}'s result has no member {key}");
            let required = result.get("required").and_then(Value::as_array).cloned().unwrap_or_default();
            assert!(!required.iter().any(|k| k == key), "{m} requires {key}: `{{}}` would not fit");
            assert!(matches!(row.refusal, Refusal::Omit | Refusal::Error { .. }), "{row:?}");
        }
    }
    assert_eq!(failures, 1, "the tool's failure");
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn every_handler_kind_is_typed_or_generic_once() {
    use copilot_core::{generic_request_names, HandlerKind, GENERIC_HANDLER_KINDS, TYPED_HANDLER_KINDS};
    let in_table: BTreeSet<&str> = ANSWERS.iter().map(|r| r.handler.name()).collect();
    let typed: BTreeSet<&str> = TYPED_HANDLER_KINDS.iter().map(|k| k.name()).collect();
    let generic: BTreeSet<&str> = GENERIC_HANDLER_KINDS.iter().map(|k| k.name()).collect();
    assert_eq!((typed.len(), generic.len()), (TYPED_HANDLER_KINDS.len(), GENERIC_HANDLER_KINDS.len()), "a kind twice");
    assert!(typed.is_disjoint(&generic));
    assert_eq!(typed.union(&generic).copied().collect::<BTreeSet<_>>(), in_table);
    for k in TYPED_HANDLER_KINDS {
        assert!(!k.is_generic(), "{k:?}");
    }
    for k in GENERIC_HANDLER_KINDS {
        assert!(k.is_generic(), "{k:?}");
    }
    // What a user sets a generic handler for: the rows of the generic kinds.
    let names: Vec<&str> = generic_request_names().collect();
    assert!(names.contains(&"sessionFs.readFile") && names.contains(&"sampling.requested"), "{names:?}");
    assert!(!names.contains(&"permission.requested") && !names.contains(&"hooks.invoke"), "{names:?}");
    let generic_rows = ANSWERS.iter().filter(|r| GENERIC_HANDLER_KINDS.contains(&r.handler)).count();
    assert_eq!(names.len(), generic_rows);
    assert!(HandlerKind::Sampling.is_generic());
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn every_elicitation_answer_fits_the_schema() {
    use copilot_core::{write_elicitation_answer, ElicitationAction};
    let api: Value = serde_json::from_str(API).unwrap();
    let defs = &api["definitions"];
    let mut session_methods = Vec::new();
    methods(&api["session"], &mut session_methods);
    let row = ANSWERS.iter().find(|r| r.trigger == Trigger::Event("elicitation.requested")).unwrap();
    let AnswerVia::Rpc { method, key } = row.via else { panic!("{row:?}") };
    let (_, def) = session_methods.iter().find(|(m, _)| *m == method).unwrap();
    let member = &resolve(defs, &def["params"])["properties"][key];
    let result = resolve(defs, member);
    // The schema says content is present on an accept.
    assert!(result["properties"]["content"]["description"].as_str().unwrap().contains("accept"));
    for action in [ElicitationAction::Accept, ElicitationAction::Decline, ElicitationAction::Cancel] {
        for content in [None, Some("null"), Some(r#"{"name":"x","n":1,"ok":true,"tags":["a"]}"#)] {
            let mut out = Vec::new();
            write_elicitation_answer(action, content.map(str::as_bytes), &mut |b: &[u8]| out.extend_from_slice(b))
                .unwrap();
            let v: Value = serde_json::from_slice(&out).unwrap();
            assert!(conforms(defs, member, &v), "{v} does not fit {method}'s {key}");
            assert_eq!(v.get("content").is_some(), action == ElicitationAction::Accept, "{v}");
            assert!(v.get("content").is_none_or(Value::is_object), "{v}");
        }
    }
}

/// The `data` schema of the event type `ty`.
fn event_data<'a>(schema: &'a Value, ty: &str) -> Option<&'a Value> {
    let defs = &schema["definitions"];
    resolve(defs, schema)["anyOf"].as_array()?.iter().map(|alt| resolve(defs, alt)).find_map(|alt| {
        (alt["properties"]["type"]["const"].as_str() == Some(ty)).then(|| resolve(defs, &alt["properties"]["data"]))
    })
}

/// Every row says what a client without the handler does: a server request
/// reaches this client only, so it is refused; a left event is one the CLI
/// sends to every client of the session, answered by an RPC (which any
/// client may send), whose answer the CLI reports with an event of the
/// schema that carries the same `requestId`.
#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn every_left_wait_is_a_broadcast_event_whose_answer_the_cli_reports() {
    let events: Value = serde_json::from_str(EVENTS).unwrap();
    let mut left = 0;
    for row in ANSWERS {
        match (row.trigger, row.unhandled) {
            (Trigger::Request(_), Unhandled::Refuse) => {}
            (Trigger::Request(m), Unhandled::Leave { .. }) => panic!("{m}: a request to this client cannot be left"),
            (Trigger::Event(_), Unhandled::Refuse) => {}
            (Trigger::Event(ty), Unhandled::Leave { reported_by }) => {
                left += 1;
                assert!(matches!(row.via, AnswerVia::Rpc { .. }), "{ty}: answered by an RPC");
                assert!(row.leaves_unhandled());
                let reason = NOT_OBLIGATIONS.iter().find(|(t, _)| *t == reported_by).map(|(_, r)| *r);
                assert_eq!(reason, Some("reports an answer"), "{ty}: {reported_by} reports the answer");
                let data =
                    event_data(&events, reported_by).unwrap_or_else(|| panic!("{reported_by} is not in the schema"));
                assert!(data["properties"].get("requestId").is_some(), "{reported_by} carries the requestId");
            }
        }
    }
    assert!(left >= 9, "the broadcast events are left: {left}");
}
