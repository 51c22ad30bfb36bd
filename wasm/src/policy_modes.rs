//! `wasm/policy.json`'s `modes` and `config.largeOutputRenames`, held to the
//! core (see policy.rs for the rest of the file).
//!
//! - `modes` `{names, empty, baseDirectoryEnv, emptyEnv,
//!   emptyNeedsBaseDirectory, emptyToolsOption, emptyNeedsAvailableTools,
//!   emptyDefaults, emptySection, systemMessageCustomize,
//!   systemMessageKeptModes, optionsUpdate, optionsUpdateMembers,
//!   emptyUpdateFixed}`: a client's `mode` is one of `names` (the first by
//!   default). A started CLI gets `baseDirectory` in `baseDirectoryEnv`;
//!   in the mode `empty` a client that starts its CLI without
//!   `baseDirectory` is refused with `emptyNeedsBaseDirectory`, its CLI
//!   gets each `[variable, value]` of `emptyEnv` (after the user's
//!   environment and `baseDirectoryEnv`), a session without the option
//!   `emptyToolsOption` is refused with `emptyNeedsAvailableTools` before
//!   anything is sent, each option of `emptyDefaults` left unset (or
//!   `null`) takes its value there, and the system message's wire form
//!   (`mode` always given) is sent as given when its mode is one of
//!   `systemMessageKeptModes` or it is a `systemMessageCustomize` one
//!   whose sections name `emptySection[0]`; another customized one gets
//!   that section with `{action: emptySection[1]}`; any other (or none)
//!   becomes `{mode: systemMessageCustomize, content (if given), sections:
//!   {<emptySection[0]>: {action: emptySection[1]}}}`. Once the session is
//!   open (after the follow-ups) the client sends `optionsUpdate` with
//!   `{sessionId}` and, for each `[option, emptyDefault]` of
//!   `optionsUpdateMembers` in order, the user's value, else in the mode
//!   `empty` its `emptyDefault` (in any other mode it is left out), then in
//!   the mode `empty` the members of `emptyUpdateFixed`; nothing is sent
//!   when only the session id would be. When it fails, the session is
//!   destroyed and the open fails with its error
//!   (`copilot_core::ClientMode`, `EMPTY_MODE_DEFAULTS`,
//!   `empty_mode_system_message`, `write_options_update`).
//! - `config.largeOutputRenames` `[[name, wire]]`: the members of a
//!   `largeOutput` config sent under another name
//!   (`copilot_core::LARGE_OUTPUT_RENAMES`).
//! - `options.toolFilters`, `options.bareToolWildcard`,
//!   `options.bareToolWildcardRefusal`: a session whose option of
//!   `toolFilters` lists `bareToolWildcard` is refused (in any mode),
//!   before anything is sent, with the option's name and the refusal
//!   (`copilot_core::TOOL_FILTER_OPTIONS`, `BARE_TOOL_WILDCARD`).
//! - `options.toolSources`, `toolSourceWildcard`, `toolNameChars`,
//!   `toolNameRefusal`, `builtinToolsIsolated`: the `ToolSet` builder's
//!   entries are `<source>:<name>`, the name the wildcard or of the
//!   characters `toolNameChars` (a character class), else refused with
//!   `invalid <source> tool name "<name>"` and the refusal
//!   (`copilot_core::TOOL_SOURCES`, `tool_filter_name_ok`,
//!   `BUILTIN_TOOLS_ISOLATED`).

use copilot_core::{ClientMode, SystemMessageStep};
use serde_json::{json, Value};

fn modes() -> Value {
    let policy: Value = serde_json::from_str(include_str!("../policy.json")).expect("the policy is JSON");
    assert_eq!(policy["config"]["largeOutputRenames"], json!(copilot_core::LARGE_OUTPUT_RENAMES));
    let o = &policy["options"];
    assert_eq!(o["toolFilters"], json!(copilot_core::TOOL_FILTER_OPTIONS));
    assert_eq!(o["bareToolWildcard"], copilot_core::BARE_TOOL_WILDCARD);
    assert_eq!(o["bareToolWildcardRefusal"], copilot_core::BARE_TOOL_WILDCARD_REFUSAL);
    assert_eq!(o["toolSources"], json!(copilot_core::TOOL_SOURCES));
    assert_eq!(o["toolSourceWildcard"], copilot_core::TOOL_SOURCE_WILDCARD);
    assert_eq!(o["toolNameChars"], copilot_core::TOOL_NAME_CHARS);
    assert_eq!(o["toolNameRefusal"], copilot_core::TOOL_NAME_REFUSAL);
    assert_eq!(o["builtinToolsIsolated"], json!(copilot_core::BUILTIN_TOOLS_ISOLATED));
    policy["modes"].clone()
}

#[test]
fn the_modes_data_is_the_cores() {
    let m = modes();
    let names: Vec<&str> = ClientMode::ALL.iter().map(|c| c.name()).collect();
    assert_eq!(m["names"], json!(names));
    assert_eq!(m["names"][0], ClientMode::default().name());
    assert_eq!(m["empty"], ClientMode::Empty.name());
    assert_eq!(m["baseDirectoryEnv"], copilot_core::BASE_DIRECTORY_ENV);
    assert_eq!(m["emptyEnv"], json!(copilot_core::EMPTY_MODE_ENV));
    assert_eq!(m["emptyNeedsBaseDirectory"], copilot_core::EMPTY_MODE_NEEDS_BASE_DIRECTORY);
    assert_eq!(m["emptyToolsOption"], copilot_core::EMPTY_MODE_TOOLS_OPTION);
    assert_eq!(m["emptyNeedsAvailableTools"], copilot_core::EMPTY_MODE_NEEDS_AVAILABLE_TOOLS);
    let defaults: serde_json::Map<String, Value> = copilot_core::EMPTY_MODE_DEFAULTS
        .iter()
        .map(|(name, v)| ((*name).to_owned(), serde_json::from_str(v).unwrap()))
        .collect();
    assert_eq!(m["emptyDefaults"], Value::Object(defaults));
    assert_eq!(m["emptySection"], json!(copilot_core::EMPTY_MODE_SECTION));
    assert_eq!(m["systemMessageCustomize"], copilot_core::SYSTEM_MESSAGE_CUSTOMIZE);
    assert_eq!(m["systemMessageKeptModes"], json!(copilot_core::SYSTEM_MESSAGE_KEPT_MODES));
    assert_eq!(m["optionsUpdate"], copilot_core::OPTIONS_UPDATE_METHOD);
    assert_eq!(m["optionsUpdateMembers"], json!(copilot_core::OPTIONS_UPDATE));
    let fixed: serde_json::Map<String, Value> = copilot_core::EMPTY_MODE_UPDATE_FIXED
        .iter()
        .map(|(name, v)| ((*name).to_owned(), serde_json::from_str(v).unwrap()))
        .collect();
    assert_eq!(m["emptyUpdateFixed"], Value::Object(fixed));
}

/// The policy's system message rule, as the JS client applies it
/// (`systemMessageForMode`): what it does to a given wire form.
fn step_from_policy(given: &Value) -> SystemMessageStep {
    let m = modes();
    let mode = &given["mode"];
    let customize = given.is_object() && *mode == m["systemMessageCustomize"];
    let has_section = !given["sections"][m["emptySection"][0].as_str().unwrap()].is_null();
    if m["systemMessageKeptModes"].as_array().unwrap().contains(mode) || (customize && has_section) {
        SystemMessageStep::AsGiven
    } else if customize {
        SystemMessageStep::AddSection
    } else {
        SystemMessageStep::Customize
    }
}

#[test]
fn the_policys_system_message_rule_is_the_cores() {
    let cases = [
        Value::Null,
        json!({"mode": "append", "content": "c"}),
        json!({"mode": "replace", "content": "c"}),
        json!({"mode": "customize", "sections": {}}),
        json!({"mode": "customize", "sections": {"environment_context": {"action": "append", "content": "x"}}}),
        json!({"mode": "customize", "sections": {"tone": {"action": "remove"}}}),
    ];
    for given in cases {
        let has = !given["sections"]["environment_context"].is_null();
        let core = copilot_core::empty_mode_system_message(given["mode"].as_str(), has);
        assert_eq!(step_from_policy(&given), core, "{given}");
    }
}

/// The patch as the JS client writes it from the policy.
fn update_from_policy(empty: bool, given: &[Option<bool>]) -> Option<Value> {
    let m = modes();
    let mut patch = serde_json::Map::new();
    patch.insert("sessionId".into(), "s\"1".into());
    for (member, value) in m["optionsUpdateMembers"].as_array().unwrap().iter().zip(given) {
        let v = value.map(Value::from).or_else(|| empty.then(|| member[1].clone()));
        if let Some(v) = v {
            patch.insert(member[0].as_str().unwrap().into(), v);
        }
    }
    if empty {
        patch.extend(m["emptyUpdateFixed"].as_object().unwrap().clone());
    }
    (patch.len() > 1).then_some(Value::Object(patch))
}

#[test]
fn the_policys_options_update_is_the_cores_for_every_case() {
    let choices = [None, Some(true), Some(false)];
    let n = copilot_core::OPTIONS_UPDATE.len();
    for mode in ClientMode::ALL {
        for case in 0..3usize.pow(n as u32) {
            let given: Vec<Option<bool>> = (0..n).map(|i| choices[case / 3usize.pow(i as u32) % 3]).collect();
            let mut core = Vec::new();
            let at = |name: &str| copilot_core::OPTIONS_UPDATE.iter().position(|(o, _)| *o == name).unwrap();
            let wrote = copilot_core::write_options_update("s\"1", mode, |name| given[at(name)], &mut |b| {
                core.extend_from_slice(b)
            });
            let core = wrote.then(|| serde_json::from_slice::<Value>(&core).unwrap());
            assert_eq!(update_from_policy(mode == ClientMode::Empty, &given), core, "{mode:?} {given:?}");
        }
    }
}
