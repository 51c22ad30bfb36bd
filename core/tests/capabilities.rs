//! The capabilities and UI calls of the core (`copilot_core::CAPABILITIES`,
//! `UI_CALLS`) against the pinned CLI's schemas (`core/schemas/1.0.102/`):
//! the capabilities a `capabilities.changed` event can name are those the
//! core keeps, and the UI calls' method takes a message and a form and
//! answers with an action and the form's content. Drift fails here.
#![cfg(not(loom))]

use copilot_core::{Capability, CAPABILITIES, CAPABILITIES_CHANGED_EVENT, UI_CALLS, UI_ELICITATION_METHOD};
use serde_json::Value;

const API: &str = include_str!("../schemas/1.0.102/api.schema.json");
const EVENTS: &str = include_str!("../schemas/1.0.102/session-events.schema.json");

fn resolve<'a>(defs: &'a Value, mut v: &'a Value) -> &'a Value {
    while let Some(r) = v.get("$ref").and_then(Value::as_str) {
        v = &defs[r.rsplit('/').next().unwrap()];
    }
    v
}

fn members(v: &Value) -> Vec<String> {
    let mut m: Vec<String> = v["properties"].as_object().map_or_else(Vec::new, |o| o.keys().cloned().collect());
    m.sort();
    m
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn the_ui_capabilities_are_those_a_change_can_name() {
    let schema: Value = serde_json::from_str(EVENTS).unwrap();
    let defs = &schema["definitions"];
    let event = resolve(defs, &schema)["anyOf"]
        .as_array()
        .unwrap()
        .iter()
        .map(|alt| resolve(defs, alt))
        .find(|alt| alt["properties"]["type"]["const"] == CAPABILITIES_CHANGED_EVENT)
        .expect("the schema has the event");
    let data = resolve(defs, &event["properties"]["data"]);
    assert_eq!(members(data), ["ui"], "a change names ui capabilities only");
    let ui = resolve(defs, &data["properties"]["ui"]);
    let mut core: Vec<String> = CAPABILITIES
        .iter()
        .filter_map(|c| match c.path() {
            (Some("ui"), name) => Some(name.to_owned()),
            _ => None,
        })
        .collect();
    core.sort();
    assert_eq!(members(ui), core);
    for name in members(ui) {
        assert_eq!(ui["properties"][&name]["type"], "boolean", "{name}");
    }
    assert_eq!(Capability::Extensions.path(), (None, "extensions"), "seen in the open's answer");
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn the_ui_calls_method_takes_a_form_and_answers_an_action_and_content() {
    fn find(v: &Value, name: &str) -> Option<Value> {
        let obj = v.as_object()?;
        if obj.get("rpcMethod").and_then(Value::as_str) == Some(name) {
            return Some(v.clone());
        }
        obj.values().find_map(|c| find(c, name))
    }
    let api: Value = serde_json::from_str(API).unwrap();
    let defs = &api["definitions"];
    let method = find(&api, UI_ELICITATION_METHOD).expect("the schema has the method");
    let required: Vec<&str> =
        method["params"]["required"].as_array().unwrap().iter().filter_map(Value::as_str).collect();
    assert_eq!(required, ["sessionId", "message", "requestedSchema"]);
    let form = resolve(defs, &method["params"]["properties"]["requestedSchema"]);
    assert_eq!(form["properties"]["type"]["const"], "object");
    assert!(form["properties"]["properties"].is_object() && form["properties"]["required"].is_object());
    let result = resolve(defs, &method["result"]);
    let action = resolve(defs, &result["properties"]["action"]);
    assert_eq!(action["enum"], serde_json::json!(["accept", "decline", "cancel"]));
    assert!(result["properties"]["content"].is_object());
    // Each call's field schema is a JSON object with a type.
    for call in UI_CALLS {
        if let Some((_, schema)) = call.field {
            let v: Value = serde_json::from_str(schema).unwrap();
            assert!(v["type"].is_string(), "{}", call.name);
        }
    }
}
