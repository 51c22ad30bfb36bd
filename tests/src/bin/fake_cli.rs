//! The fake Copilot CLI of `copilot_tests::fake_server` as a program, for
//! clients that spawn the CLI themselves (the npm package's Node tests, an
//! example run without an account).
//!
//! ```text
//! fake_cli (--stdio | --port N) [--early-events N] [--early-permission-requests N]
//!          [--create-delay-ms N] [--reply TEXT] [--legacy-connect] [--protocol-version N]
//!          [--record FILE]
//! ```
//!
//! It takes the flags a client passes to the real CLI (`--headless`,
//! `--no-auto-update`, `--log-level L`, `--auth-token-env NAME`,
//! `--no-auto-login`, ...) and ignores them. `--stdio` serves stdin and
//! stdout; `--port` (any value) binds a free port of 127.0.0.1, prints
//! `CLI server listening on port N` as the real CLI does, and serves the
//! first connection. Like the real CLI it requires the token in
//! `COPILOT_CONNECTION_TOKEN`, if set, in `connect`.
//!
//! The rest configures [`FakeServerConfig`]: events and permission prompts
//! sent before the `session.create` answer, a delay of that answer, and the
//! reply of every turn (`--reply`, or `FAKE_CLI_REPLY` in the environment;
//! without one a turn ends in `session.error` as the real CLI's does with
//! no login). The prompt `flood:N` floods N `assistant.message_delta` events;
//! the prompt `obligations:TOOL` raises one wait of each kind a client
//! answers (a permission prompt, an elicitation, two hook calls, a call of
//! the client's tool TOOL, an MCP OAuth request, a user input request, an
//! exit-plan-mode request, a system message transform, a provider token
//! request, a request nobody serves, an unknown request, then waits of the
//! same kinds with unreadable data) and ends the turn when all are answered. `--record FILE` writes the body of
//! every frame the client sent to FILE as it came, one line each, and its
//! own arguments to FILE.argv as a JSON array, and the variables of
//! [`RECORDED_ENV`] it was given to FILE.env as a JSON object.

use std::process::ExitCode;
use std::time::Duration;

use copilot_tests::fake_server::{run_stdio, run_tcp_announcing, FakeServerConfig};

/// Flags of the real CLI that take a value, skipped with it.
const CLI_FLAGS_WITH_VALUE: [&str; 4] = ["--log-level", "--auth-token-env", "--model", "--config-dir"];

/// The variables `--record` writes down: those a client's mode sets.
const RECORDED_ENV: [&str; 2] = ["COPILOT_HOME", "COPILOT_DISABLE_KEYTAR"];

enum Mode {
    Stdio,
    Tcp,
}

fn parse(args: &[String]) -> Result<(Mode, FakeServerConfig), String> {
    let mut config = FakeServerConfig::default();
    if let Some(reply) = std::env::var("FAKE_CLI_REPLY").ok().filter(|r| !r.is_empty()) {
        config.reply_text = Some(reply);
    }
    if let Some(token) = std::env::var("COPILOT_CONNECTION_TOKEN").ok().filter(|t| !t.is_empty()) {
        config.token = Some(token);
    }
    let mut mode = None;
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        let mut value = || args.next().ok_or_else(|| format!("{arg} needs a value"));
        let number = |v: &String| v.parse::<u64>().map_err(|_| format!("{arg} needs a number, not {v:?}"));
        match arg.as_str() {
            "--stdio" => mode = Some(Mode::Stdio),
            "--port" => {
                value()?;
                mode = Some(Mode::Tcp);
            }
            "--early-events" => config.early_events = number(value()?)? as usize,
            "--early-permission-requests" => config.early_permission_requests = number(value()?)? as usize,
            "--create-delay-ms" => config.create_response_delay = Duration::from_millis(number(value()?)?),
            "--reply" => config.reply_text = Some(value()?.clone()),
            "--record" => config.record_to = Some(value()?.into()),
            "--legacy-connect" => config.legacy_connect = true,
            "--fail-options-update" => config.fail_options_update = true,
            "--protocol-version" => {
                config.protocol_version = u32::try_from(number(value()?)?).map_err(|e| e.to_string())?
            }
            flag if CLI_FLAGS_WITH_VALUE.contains(&flag) => {
                value()?;
            }
            _ => {} // --headless, --no-auto-update, --no-auto-login, ...
        }
    }
    let mode = mode.ok_or("neither --stdio nor --port was given")?;
    Ok((mode, config))
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (mode, config) = match parse(&args) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("fake_cli: {e} (argv: {args:?})");
            return ExitCode::from(2);
        }
    };
    if let Some(record) = &config.record_to {
        // The command line the client started it with, beside the frames.
        let mut argv = record.clone().into_os_string();
        argv.push(".argv");
        if let Err(e) = std::fs::write(&argv, serde_json::to_vec(&args).unwrap_or_default()) {
            eprintln!("fake_cli: write {}: {e}", argv.to_string_lossy());
            return ExitCode::FAILURE;
        }
        let env: serde_json::Map<String, serde_json::Value> =
            RECORDED_ENV.iter().filter_map(|n| Some(((*n).to_owned(), std::env::var(n).ok()?.into()))).collect();
        let mut file = record.clone().into_os_string();
        file.push(".env");
        if let Err(e) = std::fs::write(&file, serde_json::to_vec(&env).unwrap_or_default()) {
            eprintln!("fake_cli: write {}: {e}", file.to_string_lossy());
            return ExitCode::FAILURE;
        }
    }
    let served = match mode {
        Mode::Stdio => run_stdio(config),
        Mode::Tcp => run_tcp_announcing(config),
    };
    match served {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("fake_cli: {e}");
            ExitCode::FAILURE
        }
    }
}
