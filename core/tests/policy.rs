//! The core's protocol policy tables against the pinned CLI's schemas
//! (vendored in `core/schemas/1.0.102/`): every event, method and member a
//! table names is one the CLI knows, so drift fails here.
#![cfg(not(loom))]

use serde_json::Value;

const API: &str = include_str!("../schemas/1.0.102/api.schema.json");
const EVENTS: &str = include_str!("../schemas/1.0.102/session-events.schema.json");

fn resolve<'a>(defs: &'a Value, mut v: &'a Value) -> &'a Value {
    while let Some(r) = v.get("$ref").and_then(Value::as_str) {
        v = &defs[r.rsplit('/').next().unwrap()];
    }
    v
}

/// The members of the `data` of the event of type `ty`, if the schema has it.
fn event_data_members(ty: &str) -> Option<Vec<String>> {
    let schema: Value = serde_json::from_str(EVENTS).unwrap();
    let defs = &schema["definitions"];
    let root = resolve(defs, &schema);
    root["anyOf"].as_array().unwrap().iter().map(|alt| resolve(defs, alt)).find_map(|alt| {
        (alt["properties"]["type"]["const"] == ty).then(|| {
            let data = resolve(defs, &alt["properties"]["data"]);
            data["properties"].as_object().map_or_else(Vec::new, |o| o.keys().cloned().collect())
        })
    })
}

/// The definition of the method `name` (`rpcMethod`), anywhere in the API schema.
fn method(name: &str) -> Option<Value> {
    fn find(v: &Value, name: &str) -> Option<Value> {
        let obj = v.as_object()?;
        if obj.get("rpcMethod").and_then(Value::as_str) == Some(name) {
            return Some(v.clone());
        }
        obj.values().find_map(|c| find(c, name))
    }
    find(&serde_json::from_str(API).unwrap(), name)
}

/// The property names of a method's params or result (`part`), resolved.
fn members(def: &Value, part: &str) -> Vec<String> {
    let api: Value = serde_json::from_str(API).unwrap();
    let defs = &api["definitions"];
    let v = resolve(defs, &def[part]);
    v["properties"].as_object().map_or_else(Vec::new, |o| o.keys().cloned().collect())
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn the_turn_rule_names_events_and_members_of_the_schema() {
    use copilot_core::{TURN_END_EVENT, TURN_ERROR_EVENT, TURN_REPLY_EVENT, TURN_REPLY_UNLESS};
    let reply = event_data_members(TURN_REPLY_EVENT).expect("no reply event");
    assert!(reply.iter().any(|m| m == TURN_REPLY_UNLESS), "{reply:?}");
    assert!(reply.iter().any(|m| m == "content"), "{reply:?}");
    let error = event_data_members(TURN_ERROR_EVENT).expect("no error event");
    assert!(error.iter().any(|m| m == "message") && error.iter().any(|m| m == "errorType"), "{error:?}");
    assert!(event_data_members(TURN_END_EVENT).is_some(), "no end event");
    assert!(method("session.send").is_some());
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn the_handshake_sends_and_reads_members_of_the_schema() {
    use copilot_core::{write_connect_params, HANDSHAKE_CONNECT, HANDSHAKE_PING};
    let connect = method(HANDSHAKE_CONNECT).expect("no connect");
    let mut params = Vec::new();
    write_connect_params(Some("t"), &mut |b: &[u8]| params.extend_from_slice(b));
    let params: Value = serde_json::from_slice(&params).unwrap();
    let known = members(&connect, "params");
    for key in params.as_object().unwrap().keys() {
        assert!(known.contains(key), "connect has no param {key}: {known:?}");
    }
    let result = members(&connect, "result");
    assert!(result.contains(&"protocolVersion".into()) && result.contains(&"version".into()), "{result:?}");
    let ping = method(HANDSHAKE_PING).expect("no ping");
    assert!(members(&ping, "result").contains(&"protocolVersion".into()));
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn every_stop_request_is_a_method_of_the_schema() {
    let sent: Vec<&str> = copilot_core::STOP_STEPS.iter().filter_map(|s| s.method()).collect();
    assert_eq!(sent, ["session.destroy", "runtime.shutdown"]);
    // `session.destroy {sessionId}` -> `{success}` is seen on the wire but
    // missing from the schema, as the session lifecycle methods are; if the
    // schema grows it, its params must be the session id.
    if let Some(destroy) = method("session.destroy") {
        assert_eq!(members(&destroy, "params"), ["sessionId"]);
    }
    let shutdown = method("runtime.shutdown").expect("no runtime.shutdown");
    // The params `{}` of a method without params.
    assert!(shutdown["params"].is_null() || members(&shutdown, "params").is_empty());
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn the_hook_types_and_the_hook_call_are_the_schemas() {
    let api: Value = serde_json::from_str(API).unwrap();
    let names: Vec<&str> =
        api["definitions"]["HookType"]["enum"].as_array().unwrap().iter().map(|v| v.as_str().unwrap()).collect();
    assert_eq!(copilot_core::HOOK_TYPES, names.as_slice());
    let invoke = method("hooks.invoke").expect("no hooks.invoke");
    let mut params = members(&invoke, "params");
    params.sort();
    assert_eq!(params, ["hookType", "input", "sessionId"]);
}
