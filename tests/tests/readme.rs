//! The README's JavaScript example is `wasm/npm/examples/quickstart.mjs`,
//! which the npm package's tests run (`wasm/npm/test/quickstart.test.mjs`).
//! This keeps the two the same, so the README shows tested code; and its
//! Rust examples the same as the crate's doc examples, which `cargo test`
//! compiles.

use std::path::Path;

#[test]
fn the_readme_js_example_is_the_tested_quickstart() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let example = std::fs::read_to_string(root.join("wasm/npm/examples/quickstart.mjs")).unwrap();
    let shown = readme
        .split("```js\n")
        .nth(1)
        .and_then(|rest| rest.split("\n```").next())
        .expect("the README has a ```js block");
    // The file opens with comments on how to run it; the README says that itself.
    let code: Vec<&str> = example.lines().skip_while(|l| l.starts_with("//")).collect();
    assert_eq!(shown.trim(), code.join("\n").trim(), "README's JS example differs from examples/quickstart.mjs");
}

/// The lines of the first `no_run` doc example of `file` (a crate or
/// module doc), without the lines rustdoc hides.
fn doc_example(file: &str) -> String {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let text = std::fs::read_to_string(root.join(file)).unwrap();
    let lines: Vec<&str> = text
        .lines()
        .filter_map(|l| l.strip_prefix("//!"))
        .map(|l| l.strip_prefix(' ').unwrap_or(l))
        .skip_while(|l| *l != "```no_run")
        .skip(1)
        .take_while(|l| *l != "```")
        .filter(|l| *l != "#" && !l.starts_with("# "))
        .collect();
    assert!(!lines.is_empty(), "{file} has a no_run example");
    lines.join("\n")
}

#[test]
fn the_readme_rust_examples_are_the_compiled_doc_examples() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let shown: Vec<&str> =
        readme.split("```rust\n").skip(1).filter_map(|rest| rest.split("\n```").next()).map(str::trim).collect();
    assert_eq!(shown.len(), 3, "the README shows a blocking, an async and a typed-call Rust example");
    assert_eq!(shown[0], doc_example("host-std/src/lib.rs"), "README's blocking example differs from the crate docs'");
    assert_eq!(shown[1], doc_example("host-std/src/asynch.rs"), "README's async example differs from asynch's docs'");
    assert_eq!(shown[2], doc_example("host-std/src/rpc.rs"), "README's typed-call example differs from rpc's docs'");
}
