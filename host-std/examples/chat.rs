//! Streams one agent turn to the terminal: the reply as it is written, the
//! tools the agent runs, and the final message.
//!
//! ```sh
//! cargo run -p copilot-host --example chat -- "Explain what a monad is in one paragraph"
//! cargo run -p copilot-host --example chat -- --tcp "Hello"
//! ```
//!
//! The CLI is found as `Client::start` finds it (`COPILOT_CLI_PATH`, `PATH`,
//! `./node_modules/.bin/copilot`) and installed with npm into the user's
//! cache folder if it is nowhere. It uses the CLI's own Copilot login (or
//! `GH_TOKEN`); without one it says so and stops.

use std::io::Write;
use std::process::ExitCode;
use std::time::Duration;

use copilot_host::{Client, ClientOptions, EventKind, SessionConfig, Transport};

const MODEL: &str = "claude-sonnet-4.5";

fn main() -> ExitCode {
    let mut transport = Transport::Stdio;
    let mut words = Vec::new();
    for arg in std::env::args().skip(1) {
        match arg.as_str() {
            "--tcp" => transport = Transport::Tcp { port: 0 },
            "-h" | "--help" => {
                println!("usage: chat [--tcp] [PROMPT...]");
                return ExitCode::SUCCESS;
            }
            _ => words.push(arg),
        }
    }
    let prompt =
        if words.is_empty() { "Say hello and tell me which model you are.".to_owned() } else { words.join(" ") };
    match run(transport, &prompt) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("chat: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(transport: Transport, prompt: &str) -> copilot_host::Result<ExitCode> {
    eprintln!("starting the Copilot CLI ({transport:?})...");
    let client = Client::start(ClientOptions { transport, install_if_missing: true, ..ClientOptions::default() })?;
    let info = client.server_info();
    eprintln!("connected: CLI {} (protocol {})", info.version.as_deref().unwrap_or("?"), info.protocol_version);

    let auth = client.auth_status()?;
    if !auth.is_authenticated {
        eprintln!(
            "\nThe Copilot CLI has no Copilot login on this machine{}.\n\
             Log in once with `copilot` (then `/login`), or export GH_TOKEN with a token \
             that has Copilot access, and run this again.",
            auth.status_message.as_deref().map(|m| format!(" ({m})")).unwrap_or_default()
        );
        client.stop()?;
        return Ok(ExitCode::from(2));
    }
    eprintln!("logged in as {}", auth.login.as_deref().unwrap_or("?"));

    let session = client.create_session(SessionConfig { streaming: true, ..SessionConfig::with_model(MODEL) })?;
    let _printer = session.on(|event| {
        let mut out = std::io::stdout().lock();
        match &event.kind {
            EventKind::AssistantMessageDelta(d) => {
                let _ = write!(out, "{}", d.delta_content);
                let _ = out.flush();
            }
            EventKind::ToolExecutionStart(t) => {
                let _ = writeln!(out, "\n[tool {} started]", t.tool_name);
            }
            EventKind::ToolExecutionComplete(t) => {
                let _ = writeln!(out, "[tool {} {}]", t.tool_call_id, if t.success { "done" } else { "failed" });
            }
            _ => {}
        }
    });
    eprintln!("> {prompt}\n");
    let reply = session.send_and_wait(prompt, Duration::from_secs(300));
    println!();
    match reply {
        Ok(Some(message)) => {
            if let EventKind::AssistantMessage(m) = &message.kind {
                eprintln!("\n[final message: {} characters]", m.content.chars().count());
            }
        }
        Ok(None) => eprintln!("[the turn ended without a message]"),
        Err(e) => eprintln!("[the turn failed: {e}]"),
    }
    session.destroy()?;
    client.stop()?;
    Ok(ExitCode::SUCCESS)
}
