//! The Rust crate and the JavaScript package offer the same session config:
//! the same options (snake_case here, camelCase there: the same words), the
//! same create-only and resume-only options, and the same handler kinds,
//! which are the core's kinds but for a documented list neither offers.
//!
//! The JavaScript side is read three ways: its config module
//! (`wasm/npm/src/config.js`, whose key list is what `createSession`
//! checks against, so a key missing there is refused), and the shipped
//! TypeScript types (`wasm/npm/types/index.d.ts`).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use copilot_core::ANSWERS;
use copilot_host::{SessionConfig, OFFERED_HANDLER_KINDS};
use serde_json::Value;

/// Handler kinds of the core that neither language offers a handler for,
/// and why: their waits get the engine's refusal.
const NOT_OFFERED: &[(&str, &str)] = &[];

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("tests/ has a parent").to_owned()
}

/// The same word in either case: `github_token` and `gitHubToken` alike.
fn word(name: &str) -> String {
    name.chars().filter(|c| *c != '_').flat_map(char::to_lowercase).collect()
}

fn words<'a>(names: impl IntoIterator<Item = &'a str>) -> BTreeSet<String> {
    names.into_iter().map(word).collect()
}

/// The key lists of the JavaScript config module, read by Node.
fn js_config() -> Value {
    let module = root().join("wasm/npm/src/config.js");
    let script = format!(
        "const c = await import({:?}); console.log(JSON.stringify({{options: c.SESSION_OPTIONS, \
         create: c.CREATE_ONLY_OPTIONS, resume: c.RESUME_ONLY_OPTIONS, handlers: c.HANDLER_OPTIONS, \
         generic: c.GENERIC_HANDLER_KINDS, reserved: c.RESERVED_OPTIONS, client: c.CLIENT_HANDLER_OPTIONS}}))",
        format!("file://{}", module.display())
    );
    let out = Command::new("node").args(["--input-type=module", "-e", &script]).output().expect("run node");
    assert!(out.status.success(), "node: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).expect("the lists as JSON")
}

fn strings(v: &Value) -> Vec<&str> {
    v.as_array().expect("a list").iter().map(|s| s.as_str().expect("a string")).collect()
}

/// The members of `interface NAME ... { .. }` in a TypeScript declaration
/// file: the names at the interface's own depth.
fn interface_keys(dts: &str, name: &str) -> BTreeSet<String> {
    let start = dts.find(&format!("export interface {name} ")).unwrap_or_else(|| panic!("interface {name}"));
    let body = &dts[start + dts[start..].find('{').unwrap() + 1..];
    let mut depth = 0usize;
    let mut keys = BTreeSet::new();
    for line in body.lines() {
        let trimmed = line.trim_start();
        if depth == 0 && !trimmed.starts_with("/**") && !trimmed.starts_with('*') {
            if let Some(colon) = trimmed.find(':') {
                let key = trimmed[..colon].trim_end_matches('?');
                if !key.is_empty() && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
                    keys.insert(key.to_owned());
                }
            }
        }
        for c in line.chars() {
            match c {
                '{' | '(' => depth += 1,
                '}' | ')' if depth == 0 => return keys,
                '}' | ')' => depth -= 1,
                _ => {}
            }
        }
    }
    panic!("interface {name} does not end");
}

/// The string members of `export type NAME = | "a" | "b";`.
fn union_members(dts: &str, name: &str) -> BTreeSet<String> {
    let start = dts.find(&format!("export type {name} =")).unwrap_or_else(|| panic!("type {name}"));
    let body = &dts[start..start + dts[start..].find(';').unwrap()];
    body.split('"').skip(1).step_by(2).map(String::from).collect()
}

/// Fails with what each side has that the other lacks.
fn assert_same<T: Ord + std::fmt::Debug>(a: &BTreeSet<T>, b: &BTreeSet<T>, what: &str) {
    let only_a: Vec<&T> = a.difference(b).collect();
    let only_b: Vec<&T> = b.difference(a).collect();
    assert!(
        only_a.is_empty() && only_b.is_empty(),
        "{what}: only in the first {only_a:?}, only in the second {only_b:?}"
    );
}

#[test]
fn both_languages_offer_the_same_session_options() {
    let js = js_config();
    let rust = SessionConfig::option_names();
    let rust_shared = rust
        .iter()
        .copied()
        .filter(|n| !SessionConfig::CREATE_ONLY.contains(n) && !SessionConfig::RESUME_ONLY.contains(n));
    assert_same(&words(rust_shared), &words(strings(&js["options"])), "options of both methods (Rust, JS)");
    assert_same(&words(SessionConfig::CREATE_ONLY.iter().copied()), &words(strings(&js["create"])), "create only");
    assert_same(&words(SessionConfig::RESUME_ONLY.iter().copied()), &words(strings(&js["resume"])), "resume only");

    // The shipped types declare exactly the keys the client accepts (but
    // for the reserved ones other modules declare).
    let dts = std::fs::read_to_string(root().join("wasm/npm/types/index.d.ts")).expect("index.d.ts");
    let reserved = words(strings(&js["reserved"]));
    let handler_keys: Vec<&str> = js["handlers"].as_object().expect("an object").keys().map(String::as_str).collect();
    let declared: BTreeSet<String> =
        interface_keys(&dts, "SessionConfigBase").iter().map(|k| word(k)).filter(|k| !reserved.contains(k)).collect();
    let accepted: BTreeSet<String> = words(strings(&js["options"]).into_iter().chain(handler_keys.iter().copied()));
    assert_same(&declared, &accepted, "SessionConfigBase keys (index.d.ts, config.js)");
    let create = words(interface_keys(&dts, "SessionConfig").iter().map(String::as_str));
    assert_same(&create, &words(strings(&js["create"])), "SessionConfig keys (index.d.ts, config.js)");
    let resume = words(interface_keys(&dts, "ResumeSessionConfig").iter().map(String::as_str));
    assert_same(&resume, &words(strings(&js["resume"])), "ResumeSessionConfig keys (index.d.ts, config.js)");
}

#[test]
fn both_languages_offer_the_same_handler_kinds_the_core_has_less_the_documented_ones() {
    let core: BTreeSet<&str> = ANSWERS.iter().map(|r| r.handler.name()).collect();
    let not_offered: BTreeSet<&str> = NOT_OFFERED.iter().map(|(k, _)| *k).collect();
    assert!(not_offered.is_subset(&core), "unknown kinds in NOT_OFFERED: {:?}", not_offered.difference(&core));
    let expected: BTreeSet<&str> = core.difference(&not_offered).copied().collect();

    let rust: BTreeSet<&str> = OFFERED_HANDLER_KINDS.iter().map(|k| k.name()).collect();
    assert_same(&rust, &expected, "handler kinds (Rust, core less NOT_OFFERED)");
    let js = js_config();
    let js: BTreeSet<&str> = js["handlers"]
        .as_object()
        .expect("an object")
        .values()
        .map(|v| v.as_str().expect("a kind"))
        .chain(strings(&js["generic"]))
        .chain(js["client"].as_object().expect("an object").values().map(|v| v.as_str().expect("a kind")))
        .collect();
    assert_same(&js, &expected, "handler kinds (JS, core less NOT_OFFERED)");

    // The types name every kind the engine reports, and the client's own
    // handler options.
    let dts = std::fs::read_to_string(root().join("wasm/npm/types/index.d.ts")).expect("index.d.ts");
    let client_options = interface_keys(&dts, "ClientRequestOptions");
    for key in js_config()["client"].as_object().expect("an object").keys() {
        assert!(client_options.contains(key), "{key} is not declared in ClientRequestOptions");
    }
    let declared = union_members(&dts, "HandlerKind");
    assert_same(&declared.iter().map(String::as_str).collect(), &core, "HandlerKind (index.d.ts, core)");
}
