//! The README's JavaScript example is `wasm/npm/examples/quickstart.mjs`,
//! which the npm package's tests run (`wasm/npm/test/quickstart.test.mjs`).
//! This keeps the two the same, so the README shows tested code.

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
