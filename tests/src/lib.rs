//! Fixtures shared by the project's tests: real wire transcripts of the
//! Copilot CLI 1.0.102 (`fixtures/transcripts/*.jsonl`), one JSON object a
//! line: `{"direction": "out" | "in", "t_ms": ms since spawn, "message": {...}}`
//! where `out` is client to CLI.

use std::path::PathBuf;

pub mod fake_server;
pub mod flood_mix;
pub mod real_cli;

/// The six recorded scenarios, each over stdio and TCP.
pub const TRANSCRIPTS: [&str; 6] =
    ["reply-stdio", "reply-tcp", "client_tool-stdio", "client_tool-tcp", "permission-stdio", "permission-tcp"];

/// Which way a recorded message went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// Client to CLI.
    Out,
    /// CLI to client.
    In,
}

/// One recorded message.
#[derive(Debug, Clone)]
pub struct Recorded {
    /// Which way it went.
    pub direction: Direction,
    /// Milliseconds since the CLI was spawned.
    pub t_ms: f64,
    /// The JSON-RPC message, serialized compactly.
    pub body: String,
}

/// The path of a fixture file.
pub fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures").join(name)
}

/// Reads the transcript `name` (one of [`TRANSCRIPTS`]).
pub fn transcript(name: &str) -> Vec<Recorded> {
    let path = fixture(&format!("transcripts/{name}.jsonl"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|line| {
            let v: serde_json::Value = serde_json::from_str(line).expect("transcript line is JSON");
            let direction = match v["direction"].as_str() {
                Some("out") => Direction::Out,
                Some("in") => Direction::In,
                other => panic!("bad direction {other:?}"),
            };
            Recorded {
                direction,
                t_ms: v["t_ms"].as_f64().unwrap_or(0.0),
                body: serde_json::to_string(&v["message"]).expect("serializable"),
            }
        })
        .collect()
}
