//! The `copilot-bridge` command line: its arguments, its log on stderr, and
//! what it prints when ready. Public so that a program that brings its own
//! [`ModelStandIn`] (the project's offline launcher) is the same command.

use std::io::{self, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use crate::{Bridge, BridgeConfig, ModelStandIn};

/// The command's usage line.
pub const USAGE: &str = "usage: copilot-bridge [--listen ADDR:PORT] [--token TOKEN] [--allow-origin ORIGIN]... \
[--serve [DIR]] [--offline] [--cli HOST:PORT] [--cli-path PATH] [--allow-remote] \
[--max-message-bytes N] [--max-connections N] [-v]";

/// Why `--offline` is refused without a stand-in.
const NO_STAND_IN: &str = "--offline needs a stand-in for the model, which this build has none of \
(the project's tests crate has one: its copilot-bridge-offline program)";

/// Starts the model stand-in that `--offline` runs the CLIs against.
pub type StartStandIn = fn() -> io::Result<Arc<dyn ModelStandIn>>;

/// Logs to stderr: `copilot-bridge: LEVEL message`.
struct StderrLog;

impl log::Log for StderrLog {
    fn enabled(&self, metadata: &log::Metadata<'_>) -> bool {
        metadata.level() <= log::max_level()
    }

    fn log(&self, record: &log::Record<'_>) {
        if self.enabled(record.metadata()) {
            let _ = writeln!(std::io::stderr().lock(), "copilot-bridge: {} {}", record.level(), record.args());
        }
    }

    fn flush(&self) {}
}

/// The npm package folder of the source tree this was built from, which
/// `--serve` serves by default (`scripts/build-wasm` builds its `dist/`).
fn default_web_root() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../wasm/npm"))
}

/// The configuration the arguments ask for, and whether they ask for
/// `--offline`.
fn parse(args: &[String]) -> Result<(BridgeConfig, bool), String> {
    let mut config = BridgeConfig::default();
    let mut offline = false;
    let mut i = 0;
    let value = |i: &mut usize, name: &str| -> Result<String, String> {
        *i += 1;
        args.get(*i).cloned().ok_or_else(|| format!("{name} needs a value"))
    };
    while i < args.len() {
        match args[i].as_str() {
            "--listen" => {
                let v = value(&mut i, "--listen")?;
                config.listen = v.parse().map_err(|e| format!("--listen {v}: {e} (expected ADDR:PORT)"))?;
            }
            "--token" => config.token = Some(value(&mut i, "--token")?),
            "--allow-origin" => config.allow_origins.push(value(&mut i, "--allow-origin")?),
            "--serve" => {
                let dir = args.get(i + 1).filter(|a| !a.starts_with("--")).cloned();
                if dir.is_some() {
                    i += 1;
                }
                config.serve = Some(dir.map_or_else(default_web_root, PathBuf::from));
            }
            "--offline" => offline = true,
            "--cli" => config.cli_addr = Some(value(&mut i, "--cli")?),
            "--cli-path" => config.cli_path = Some(PathBuf::from(value(&mut i, "--cli-path")?)),
            "--allow-remote" => config.allow_remote = true,
            "--max-message-bytes" => {
                config.max_message_bytes =
                    value(&mut i, "--max-message-bytes")?.parse().map_err(|e| format!("--max-message-bytes: {e}"))?;
            }
            "--max-connections" => {
                config.max_connections =
                    value(&mut i, "--max-connections")?.parse().map_err(|e| format!("--max-connections: {e}"))?;
            }
            "-v" | "--verbose" => log::set_max_level(log::LevelFilter::Debug),
            other => return Err(format!("unknown argument {other}")),
        }
        i += 1;
    }
    Ok((config, offline))
}

/// Runs the command with `args` (without the program name) until the
/// bridge stops. `--offline` starts the stand-in with `stand_in`; without
/// one it is refused. When ready it prints `listening on http://ADDR:PORT/`
/// to stdout, then the page's address with the token in its fragment
/// (`--serve`) or the token.
pub fn run(args: &[String], stand_in: Option<StartStandIn>) -> ExitCode {
    let _ = log::set_logger(&StderrLog);
    log::set_max_level(log::LevelFilter::Info);
    if args.iter().any(|a| a == "-h" || a == "--help") {
        println!("{USAGE}");
        return ExitCode::SUCCESS;
    }
    let fail = |e: &dyn std::fmt::Display| {
        eprintln!("copilot-bridge: {e}");
        ExitCode::from(2)
    };
    let config = match parse(args) {
        Ok((config, false)) => config,
        Ok((config, true)) => {
            let Some(start) = stand_in else {
                return fail(&NO_STAND_IN);
            };
            match start() {
                Ok(model) => BridgeConfig { offline: Some(model), ..config },
                Err(e) => return fail(&format!("cannot start the model stand-in: {e}")),
            }
        }
        Err(e) => return fail(&format!("{e}\n{USAGE}")),
    };
    let serving = config.serve.is_some();
    let bridge = match Bridge::start(config) {
        Ok(b) => b,
        Err(e) => return fail(&e),
    };
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "listening on {}", bridge.url());
    if serving {
        // The token travels in the fragment, which the browser keeps to itself.
        let _ = writeln!(out, "open {}", bridge.page_url());
    } else {
        let _ = writeln!(out, "token {}", bridge.token());
    }
    let _ = out.flush();
    drop(out);
    bridge.wait();
    ExitCode::FAILURE
}
