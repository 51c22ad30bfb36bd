//! Streams one agent turn to the terminal: the reply as it is written, the
//! tools the agent runs, the permission prompts it asks, the final message.
//!
//! ```sh
//! cargo run -p copilot-host --example chat -- "Explain what a monad is in one paragraph"
//! cargo run -p copilot-host --example chat -- --offline
//! cargo run -p copilot-host --example chat -- --tcp "Hello"
//! ```
//!
//! The CLI is found as `Client::start` finds it (`COPILOT_CLI_PATH`, `PATH`,
//! `./node_modules/.bin/copilot`) and installed with npm into the user's
//! cache folder if it is nowhere. With the CLI's Copilot login (or
//! `GH_TOKEN`) the turn goes to the real model. Without one, or with
//! `--offline`, the CLI runs against a scripted model on 127.0.0.1 and the
//! turn shows everything a real one does: a streamed reply, a call of this
//! example's own tool, and a shell command that asks for permission here.

use std::ffi::OsString;
use std::io::{BufRead, IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use copilot_host::{
    Client, ClientOptions, EventKind, PermissionDecision, PermissionRequest, SessionConfig, SessionEvent, Tool,
    ToolInvocation, Transport,
};
use copilot_testkit::scripted_model::{Reply, ScriptedModel, ToolCall};
use serde_json::json;

const MODEL: &str = "claude-sonnet-4.5";

fn main() -> ExitCode {
    let mut transport = Transport::Stdio;
    let mut offline = false;
    let mut words = Vec::new();
    for arg in std::env::args().skip(1) {
        match arg.as_str() {
            "--tcp" => transport = Transport::Tcp { port: 0 },
            "--offline" => offline = true,
            "-h" | "--help" => {
                println!("usage: chat [--tcp] [--offline] [PROMPT...]");
                return ExitCode::SUCCESS;
            }
            _ => words.push(arg),
        }
    }
    let prompt =
        if words.is_empty() { "Roll a die for me, then greet me from the shell.".to_owned() } else { words.join(" ") };
    match run(transport, offline, &prompt) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("chat: {e}");
            ExitCode::FAILURE
        }
    }
}

/// What an offline run needs kept alive: the scripted model and the CLI's
/// private state folder.
struct Offline {
    model: ScriptedModel,
    state: PathBuf,
}

impl Drop for Offline {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.state);
    }
}

fn offline_options(transport: Transport) -> copilot_host::Result<(ClientOptions, Offline)> {
    let model = ScriptedModel::start()?;
    let state = std::env::temp_dir().join(format!("copilot-chat-{}", std::process::id()));
    let mut env: Vec<(OsString, OsString)> = ["COPILOT_HOME", "XDG_CONFIG_HOME", "XDG_STATE_HOME", "XDG_CACHE_HOME"]
        .iter()
        .map(|name| (OsString::from(name), state.join(name.to_lowercase()).into_os_string()))
        .collect();
    env.extend(model.env());
    let options = ClientOptions {
        transport,
        install_if_missing: true,
        env,
        // The scripted model takes any token; a real login is not used.
        auth_token: Some("offline".into()),
        extra_args: vec!["--no-auto-login".into()],
        ..ClientOptions::default()
    };
    Ok((options, Offline { model, state }))
}

fn run(transport: Transport, offline: bool, prompt: &str) -> copilot_host::Result<()> {
    let started = Instant::now();
    let mut scripted = None;
    let client = if offline {
        let (options, o) = offline_options(transport)?;
        scripted = Some(o);
        Client::start(options)?
    } else {
        eprintln!("starting the Copilot CLI ({transport:?})...");
        let client = Client::start(ClientOptions { transport, install_if_missing: true, ..ClientOptions::default() })?;
        let auth = client.auth_status()?;
        if auth.is_authenticated {
            eprintln!("logged in as {}", auth.login.as_deref().unwrap_or("?"));
            client
        } else {
            eprintln!(
                "The Copilot CLI has no Copilot login here{} (log in with `copilot` then `/login`, or export \
                 GH_TOKEN). Showing a full turn against a scripted model on 127.0.0.1 instead.",
                auth.status_message.as_deref().map(|m| format!(": {m}")).unwrap_or_default()
            );
            client.stop()?;
            let (options, o) = offline_options(transport)?;
            scripted = Some(o);
            Client::start(options)?
        }
    };
    let info = client.server_info();
    eprintln!(
        "[connected to CLI {} over {transport:?} in {:.1?}{}]",
        info.version.as_deref().unwrap_or("?"),
        started.elapsed(),
        if scripted.is_some() { ", scripted model" } else { "" }
    );

    let workdir = std::env::temp_dir().join(format!("copilot-chat-work-{}", std::process::id()));
    std::fs::create_dir_all(&workdir)?;
    let config =
        SessionConfig { streaming: true, working_directory: Some(workdir.clone()), ..SessionConfig::with_model(MODEL) }
            .tool(dice_tool())
            .on_permission(ask_on_terminal);
    let session = client.create_session(config)?;
    if let Some(o) = &scripted {
        o.model.script(
            session.id(),
            vec![
                Reply::TextAndToolCalls {
                    text: "Let me roll the die first. ".into(),
                    tool_calls: vec![ToolCall::new("roll_die", json!({ "sides": 6 }))],
                },
                Reply::tool_call(
                    "bash",
                    json!({ "command": "echo Hello from the shell of $(hostname)", "description": "Greet from the shell" }),
                ),
                Reply::text(
                    "The die has been rolled by the example's own tool, and the shell said hello once you allowed \
                     it. That was a full agent turn: a streamed reply, a client tool call, and a permission prompt.",
                ),
            ],
        );
    }
    let _printer = session.on(show);
    println!("> {prompt}\n");
    let sent = Instant::now();
    let reply = session.send_and_wait(prompt, Duration::from_secs(300));
    println!();
    match reply {
        Ok(Some(_)) => eprintln!("[turn complete in {:.2?}]", sent.elapsed()),
        Ok(None) => eprintln!("[the turn ended without a message]"),
        Err(e) => eprintln!("[the turn failed: {e}]"),
    }
    session.destroy()?;
    client.stop()?;
    let _ = std::fs::remove_dir_all(&workdir);
    drop(scripted);
    Ok(())
}

/// Prints each event as it happens.
fn show(event: &SessionEvent) {
    let mut out = std::io::stdout().lock();
    let _ = match &event.kind {
        EventKind::AssistantMessageDelta(d) => write!(out, "{}", d.delta_content),
        EventKind::ToolExecutionStart(t) => {
            writeln!(out, "\n[tool {} starts: {}]", t.tool_name, t.arguments.clone().unwrap_or_default())
        }
        EventKind::ToolExecutionComplete(t) => {
            let text = t.result.as_ref().map(|r| r.content.trim().to_owned()).unwrap_or_default();
            writeln!(out, "[tool call {}: {text}]", if t.success { "succeeded" } else { "failed" })
        }
        EventKind::SessionError(e) => writeln!(out, "\n[session error: {}]", e.message),
        _ => Ok(()),
    };
    let _ = out.flush();
}

/// An example tool the model can call; this program runs it.
fn dice_tool() -> Tool {
    Tool::new(
        "roll_die",
        "Roll a fair die with the given number of sides.",
        json!({ "type": "object", "properties": { "sides": { "type": "integer", "minimum": 2 } }, "required": ["sides"] }),
        |call: &ToolInvocation| {
            let sides = call.arguments["sides"].as_u64().unwrap_or(6).max(2);
            let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
            format!("The die shows {}.", u64::from(nanos) % sides + 1)
        },
    )
    .skip_permission()
}

/// Asks the person at the terminal; without a terminal, approves and says so.
fn ask_on_terminal(request: &PermissionRequest) -> PermissionDecision {
    let what = request.data.permission_request["fullCommandText"]
        .as_str()
        .or_else(|| request.data.permission_request["toolName"].as_str())
        .unwrap_or("a tool")
        .to_owned();
    let stdin = std::io::stdin();
    if !stdin.is_terminal() {
        println!("\n[permission ({}) for `{what}`: approved, no terminal to ask]", request.kind);
        return PermissionDecision::ApproveOnce;
    }
    print!("\n[permission ({})] allow `{what}`? [y/N] ", request.kind);
    let _ = std::io::stdout().flush();
    let mut answer = String::new();
    let _ = stdin.lock().read_line(&mut answer);
    if answer.trim().eq_ignore_ascii_case("y") {
        PermissionDecision::ApproveOnce
    } else {
        PermissionDecision::reject("The user declined at the terminal.")
    }
}
