//! The core's table of session options (`copilot_core::OPEN_OPTIONS`) is the
//! one both hosts offer: the Rust crate's `SessionConfig` options (the same
//! words in snake case) and the JavaScript package's config lists (the same
//! names, in the same order), scope by scope. When the hosts read the
//! table, this stays true by construction; until then it holds them to it.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

use copilot_core::{OptionScope, OPEN_OPTIONS};
use copilot_host::SessionConfig;
use serde_json::Value;

/// The same word in either case: `github_token` and `gitHubToken` alike.
fn word(name: &str) -> String {
    name.chars().filter(|c| *c != '_').flat_map(char::to_lowercase).collect()
}

fn core_names(scope: OptionScope) -> Vec<&'static str> {
    OPEN_OPTIONS.iter().filter(|o| o.scope == scope).map(|o| o.name).collect()
}

fn js_lists() -> Value {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("tests/ has a parent");
    let module = root.join("wasm/npm/src/config.js");
    let script = format!(
        "const c = await import({:?}); console.log(JSON.stringify({{both: c.SESSION_OPTIONS, \
         create: c.CREATE_ONLY_OPTIONS, resume: c.RESUME_ONLY_OPTIONS}}))",
        format!("file://{}", module.display())
    );
    let out = Command::new("node").args(["--input-type=module", "-e", &script]).output().expect("run node");
    assert!(out.status.success(), "node: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).expect("the lists as JSON")
}

#[test]
fn the_core_options_are_the_javascript_packages_in_order() {
    let js = js_lists();
    for (key, scope) in
        [("both", OptionScope::Both), ("create", OptionScope::CreateOnly), ("resume", OptionScope::ResumeOnly)]
    {
        let listed: Vec<&str> = js[key].as_array().unwrap().iter().map(|v| v.as_str().unwrap()).collect();
        assert_eq!(core_names(scope), listed, "{key}");
    }
}

#[test]
fn the_core_options_are_the_rust_crates_words() {
    let words = |names: &[&str]| names.iter().map(|n| word(n)).collect::<BTreeSet<_>>();
    let rust = SessionConfig::option_names();
    let shared: Vec<&str> = rust
        .iter()
        .copied()
        .filter(|n| !SessionConfig::CREATE_ONLY.contains(n) && !SessionConfig::RESUME_ONLY.contains(n))
        .collect();
    assert_eq!(words(&core_names(OptionScope::Both)), words(&shared));
    assert_eq!(words(&core_names(OptionScope::CreateOnly)), words(SessionConfig::CREATE_ONLY));
    assert_eq!(words(&core_names(OptionScope::ResumeOnly)), words(SessionConfig::RESUME_ONLY));
}
