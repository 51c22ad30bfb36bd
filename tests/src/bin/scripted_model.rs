//! The scripted model server (`copilot_testkit::scripted_model::ScriptedModel`)
//! as a program, for tests that run the real CLI from another language.
//!
//! It starts the server on a free port of 127.0.0.1 and prints ONE line of
//! JSON on stdout:
//!
//! ```text
//! {"url": "http://127.0.0.1:PORT", "model": "claude-sonnet-4.5", "env": {"COPILOT_API_URL": "...", ...}, "mcpOAuth": {...}}
//! ```
//!
//! `env` is what to add to the CLI's environment ([`ScriptedModel::env`]);
//! `model` is the one model to pass in `session.create`; `mcpOAuth`
//! `{path, token, tool}` is its MCP server behind OAuth (the testkit's
//! `MCP_OAUTH_PATH`, `MCP_OAUTH_TOKEN`, `MCP_OAUTH_TOOL`). Script a session
//! with `POST {url}/_scripted/script` and read what the model was sent with
//! `GET {url}/_scripted/requests` (see the module documentation of
//! `copilot_testkit::scripted_model`). It serves until its stdin closes.

use std::io::{Read, Write};
use std::process::ExitCode;

use copilot_testkit::scripted_model::{ScriptedModel, MCP_OAUTH_PATH, MCP_OAUTH_TOKEN, MCP_OAUTH_TOOL};
use serde_json::{json, Map, Value};

fn main() -> ExitCode {
    let model = match ScriptedModel::start() {
        Ok(m) => m,
        Err(e) => {
            eprintln!("scripted_model: cannot start: {e}");
            return ExitCode::FAILURE;
        }
    };
    let env: Map<String, Value> = model
        .env()
        .into_iter()
        .map(|(k, v)| (k.to_string_lossy().into_owned(), v.to_string_lossy().into_owned().into()))
        .collect();
    let mcp_oauth = json!({ "path": MCP_OAUTH_PATH, "token": MCP_OAUTH_TOKEN, "tool": MCP_OAUTH_TOOL });
    let line = json!({ "url": model.url(), "model": ScriptedModel::MODEL, "env": env, "mcpOAuth": mcp_oauth });
    let mut stdout = std::io::stdout();
    if writeln!(stdout, "{line}").and_then(|()| stdout.flush()).is_err() {
        return ExitCode::FAILURE;
    }
    // Serve until whoever started us closes our stdin (or exits).
    let mut sink = [0u8; 256];
    let mut stdin = std::io::stdin();
    while matches!(stdin.read(&mut sink), Ok(n) if n > 0) {}
    drop(model);
    ExitCode::SUCCESS
}
