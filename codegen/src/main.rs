//! `cargo run -p copilot-codegen`: rewrites the generated files from the
//! vendored schemas and prints what it generated.

use std::path::Path;
use std::process::ExitCode;

fn main() -> ExitCode {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("the crate is in the workspace").to_owned();
    let (outputs, counts) = match copilot_codegen::generate(&root) {
        Ok(v) => v,
        Err(e) => {
            eprintln!("copilot-codegen: {e}");
            return ExitCode::FAILURE;
        }
    };
    for output in &outputs {
        let path = root.join(&output.path);
        let unchanged = std::fs::read_to_string(&path).is_ok_and(|old| old == output.text);
        if !unchanged {
            if let Some(dir) = path.parent() {
                if let Err(e) = std::fs::create_dir_all(dir) {
                    eprintln!("copilot-codegen: {}: {e}", dir.display());
                    return ExitCode::FAILURE;
                }
            }
            if let Err(e) = std::fs::write(&path, &output.text) {
                eprintln!("copilot-codegen: {}: {e}", path.display());
                return ExitCode::FAILURE;
            }
        }
        let state = if unchanged { "unchanged" } else { "written" };
        println!("{state:9} {} ({} lines)", output.path.display(), output.text.lines().count());
    }
    println!(
        "event types: {} + {} seen on the wire ({} types); methods: {:?} ({} types); typed calls: {:?}",
        counts.event_types,
        counts.observed_event_types,
        counts.event_type_defs,
        counts.methods,
        counts.rpc_type_defs,
        counts.calls
    );
    ExitCode::SUCCESS
}
