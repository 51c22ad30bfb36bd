//! `copilot-bridge`: lets a browser page drive a Copilot CLI over a
//! token-guarded WebSocket (see `copilot_host::bridge`).
//!
//! ```sh
//! copilot-bridge [--listen ADDR:PORT] [--token TOKEN] [--allow-origin ORIGIN]...
//!                [--serve [DIR]] [--offline] [--cli HOST:PORT] [--cli-path PATH]
//!                [--allow-remote] [--max-message-bytes N] [--max-connections N] [-v]
//! ```
//!
//! When ready it prints `listening on http://ADDR:PORT/` to stdout, then the
//! page's address with the token in its fragment.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use copilot_host::bridge::{Bridge, BridgeConfig};

const USAGE: &str = "usage: copilot-bridge [--listen ADDR:PORT] [--token TOKEN] [--allow-origin ORIGIN]... \
[--serve [DIR]] [--offline] [--cli HOST:PORT] [--cli-path PATH] [--allow-remote] \
[--max-message-bytes N] [--max-connections N] [-v]";

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

/// The npm package folder of this source tree, which `--serve` serves by
/// default (`scripts/build-wasm` builds its `dist/`).
fn default_web_root() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../wasm/npm"))
}

fn parse(args: &[String]) -> Result<BridgeConfig, String> {
    let mut config = BridgeConfig::default();
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
            "--offline" => config.offline = true,
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
    Ok(config)
}

fn main() -> ExitCode {
    let _ = log::set_logger(&StderrLog);
    log::set_max_level(log::LevelFilter::Info);
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "-h" || a == "--help") {
        println!("{USAGE}");
        return ExitCode::SUCCESS;
    }
    let config = match parse(&args) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("copilot-bridge: {e}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let serving = config.serve.is_some();
    let bridge = match Bridge::start(config) {
        Ok(b) => b,
        Err(e) => {
            eprintln!("copilot-bridge: {e}");
            return ExitCode::from(2);
        }
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
