//! The Node host: the npm package's client (`copilot-wasm`, from its
//! sources in wasm/npm) and the Node floor, each run by `tests/js/flood.mjs`
//! in a fresh Node process against this binary as the fake CLI.

use std::path::PathBuf;
use std::process::Command;

use crate::options::{Options, Style, TransportName};

/// The Node floor's run name: framing plus `JSON.parse` per body.
pub const FLOOR: &str = "json";
/// What the Node rows' names start with.
pub const PREFIX: &str = "node-";

/// The Node run of `style`, if the package has one: its `events()` is the
/// async iterator, so `async` is the same run as `events` there.
pub fn run_of(style: Style) -> Option<&'static str> {
    match style {
        Style::On => Some("on"),
        Style::Events => Some("events"),
        Style::Async => None,
        Style::Wait => Some("wait"),
        Style::Mixed => Some("mixed"),
    }
}

fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Why Node runs cannot be made here, if they cannot: no `node`, or the
/// package's module not built (`scripts/build-wasm`).
pub fn unavailable() -> Option<String> {
    let module = repo_root().join("wasm/npm/dist/copilot_wasm_bg.wasm");
    if !module.exists() {
        return Some(format!("{} is missing (run scripts/build-wasm)", module.display()));
    }
    match Command::new("node").arg("--version").output() {
        Ok(out) if out.status.success() => None,
        Ok(out) => Some(format!("node --version failed: {}", out.status)),
        Err(e) => Some(format!("cannot run node: {e}")),
    }
}

/// The command of one Node run (`run` is a style's [`run_of`] or [`FLOOR`]).
pub fn command(run: &str, transport: TransportName, options: &Options) -> Result<Command, String> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot find this executable: {e}"))?;
    let mut command = Command::new("node");
    command.arg(repo_root().join("tests/js/flood.mjs")).args([run, transport.as_str(), &options.events.to_string()]);
    command.arg(exe).arg(options.prompt());
    Ok(command)
}
