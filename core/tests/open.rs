//! The params of an open request: the user's options as given, then what
//! the core announces for the members they leave out.
#![cfg(not(loom))]

use copilot_core::{
    write_follow_ups, write_open_params, Announce, HandlerKind, OptionsNotAnObject, SessionIdTooLong, Trigger,
    OPEN_ANNOUNCEMENTS, OPEN_FOLLOW_UPS,
};

fn params(options: &str, handlers: &[HandlerKind]) -> Result<String, OptionsNotAnObject> {
    let mut out = Vec::new();
    write_open_params(options.as_bytes(), |k| handlers.contains(&k), &mut |b: &[u8]| out.extend_from_slice(b))?;
    Ok(String::from_utf8(out).unwrap())
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn without_options_or_handlers_the_defaults_go_and_every_wait_is_declined() {
    assert_eq!(
        params(" {\n} ", &[]).unwrap(),
        r#"{"requestPermission":false,"requestUserInput":false,"requestElicitation":false,"requestExitPlanMode":false,"requestAutoModeSwitch":false,"envValueMode":"direct","toolFilterPrecedence":"excluded","streaming":false,"includeSubAgentStreamingEvents":true}"#
    );
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn the_options_come_first_as_given_and_what_they_set_is_not_announced_again() {
    let options = r#"{ "sessionId":"s\"1", "streaming" :true,"model":"m" }"#;
    let text = params(options, &[HandlerKind::Permission, HandlerKind::Hooks]).unwrap();
    assert!(
        text.starts_with(r#"{"sessionId":"s\"1", "streaming" :true,"model":"m","requestPermission":true,"#),
        "{text}"
    );
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["streaming"], true);
    assert_eq!((v["hooks"].clone(), v["requestUserInput"].clone()), (true.into(), false.into()));
    assert_eq!(text.matches("\"streaming\"").count(), 1, "{text}");
    // Escaped keys are the same keys.
    let v: serde_json::Value = serde_json::from_str(&params(r#"{"stream\u0069ng":true}"#, &[]).unwrap()).unwrap();
    assert_eq!(v.as_object().unwrap().keys().filter(|k| *k == "streaming").count(), 1);
    assert_eq!(v["streaming"], true);
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn options_that_are_not_an_object_write_nothing() {
    let deep = format!(r#"{{"a":{}1{}}}"#, "[".repeat(200), "]".repeat(200));
    for bad in ["", "[]", "{", "null", r#"{"a":1}x"#, &deep] {
        let mut out = Vec::new();
        let r = write_open_params(bad.as_bytes(), |_| true, &mut |b: &[u8]| out.extend_from_slice(b));
        assert_eq!(r, Err(OptionsNotAnObject), "{bad}");
        assert!(out.is_empty());
    }
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn every_announcement_is_json_and_every_handler_announced_is_in_the_answer_table() {
    for (key, a) in OPEN_ANNOUNCEMENTS {
        match a {
            Announce::Default(v) => {
                serde_json::from_str::<serde_json::Value>(v).unwrap_or_else(|e| panic!("{key}: {e}"));
            }
            Announce::Handler(k) | Announce::HandlerIfSet(k) => {
                assert!(copilot_core::ANSWERS.iter().any(|r| r.handler == *k), "{key}: {k:?}")
            }
        }
    }
}

fn follow_ups(id: &str, handlers: &[HandlerKind]) -> Vec<(&'static str, String)> {
    let mut sent = Vec::new();
    write_follow_ups(id, |k| handlers.contains(&k), &mut |m, p: &[u8]| {
        sent.push((m, String::from_utf8(p.to_vec()).unwrap()))
    })
    .unwrap();
    sent
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn an_mcp_oauth_handler_registers_interest_in_its_event_after_the_open() {
    assert_eq!(follow_ups("s-1", &[]), []);
    assert_eq!(follow_ups("s-1", &[HandlerKind::Permission, HandlerKind::Tool]), []);
    assert_eq!(
        follow_ups("s-1", &[HandlerKind::McpOAuth]),
        [("session.eventLog.registerInterest", r#"{"sessionId":"s-1","eventType":"mcp.oauth_required"}"#.to_owned())]
    );
    // The id is escaped as JSON, at the longest the core keeps.
    let odd = format!("\"\\\n{}", "\u{1}".repeat(copilot_core::MAX_SESSION_ID_LEN - 3));
    let sent = follow_ups(&odd, &[HandlerKind::McpOAuth]);
    let v: serde_json::Value = serde_json::from_str(&sent[0].1).unwrap();
    assert_eq!(v["sessionId"], odd.as_str());
    let long = "x".repeat(copilot_core::MAX_SESSION_ID_LEN + 1);
    let r = write_follow_ups(&long, |_| true, &mut |_, _: &[u8]| panic!("nothing is sent"));
    assert_eq!(r, Err(SessionIdTooLong));
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn every_follow_up_is_a_method_of_the_schema_for_an_event_its_handler_answers() {
    let api: serde_json::Value = serde_json::from_str(include_str!("../schemas/1.0.102/api.schema.json")).unwrap();
    let events = include_str!("../schemas/1.0.102/session-events.schema.json");
    for f in OPEN_FOLLOW_UPS {
        let path: Vec<&str> = f.method.split('.').collect();
        let def = path.iter().fold(&api["session"], |v, k| if *k == "session" { v } else { &v[*k] });
        assert_eq!(def["rpcMethod"], f.method, "{f:?} is not a session method of the schema");
        let params = &def["params"]["properties"];
        assert!(params.get("sessionId").is_some() && params.get("eventType").is_some(), "{f:?}: {params}");
        assert!(events.contains(&format!("\"const\": \"{}\"", f.event_type)), "{f:?}: no such event");
        let row = copilot_core::ANSWERS.iter().find(|r| r.trigger == Trigger::Event(f.event_type));
        assert_eq!(row.map(|r| r.handler), Some(f.handler), "{f:?}: the event is answered by another handler");
    }
}
