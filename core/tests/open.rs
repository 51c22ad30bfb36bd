//! The params of an open request: the user's options as given, then what
//! the core announces for the members they leave out.
#![cfg(not(loom))]

use copilot_core::{write_open_params, Announce, HandlerKind, OptionsNotAnObject, OPEN_ANNOUNCEMENTS};

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
