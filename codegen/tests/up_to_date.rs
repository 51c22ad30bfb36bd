//! The committed generated files are what the vendored schemas give: a
//! schema bump without `cargo run -p copilot-codegen`, or a hand edit of a
//! generated file, fails here.

use std::path::Path;

#[test]
fn committed_files_match_the_schemas() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("workspace root");
    let (outputs, counts) = copilot_codegen::generate(root).expect("the schemas generate");
    let scratch = std::env::temp_dir().join(format!("copilot-codegen-{}", std::process::id()));
    let mut stale = Vec::new();
    for output in &outputs {
        // Written to a scratch folder too, for `diff -r` by hand.
        let fresh = scratch.join(&output.path);
        std::fs::create_dir_all(fresh.parent().expect("parent")).expect("scratch folder");
        std::fs::write(&fresh, &output.text).expect("scratch file");
        let committed = std::fs::read_to_string(root.join(&output.path)).unwrap_or_default();
        if committed != output.text {
            stale.push(format!("{} (fresh copy: {})", output.path.display(), fresh.display()));
        }
    }
    assert!(
        stale.is_empty(),
        "generated files differ from the schemas; run `cargo run -p copilot-codegen` and review the diff: {stale:#?}"
    );
    std::fs::remove_dir_all(&scratch).expect("scratch folder removed");
    assert_eq!(counts.event_types, 163, "the CLI 1.0.102 event schema lists 163 event types");
    assert_eq!(counts.observed_event_types, 9, "nine more `model.*` types are in the real transcripts");
    assert_eq!(counts.methods.values().sum::<usize>(), 619, "the CLI 1.0.102 API schema lists 619 methods");
    // Every method a client calls has a typed call: 249 on a client, 332 on a session.
    assert_eq!(counts.calls.get("server"), counts.methods.get("server"));
    assert_eq!(counts.calls.get("session"), counts.methods.get("session"));
    assert_eq!(counts.calls.values().sum::<usize>(), 581);
}
