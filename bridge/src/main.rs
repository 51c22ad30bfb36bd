//! `copilot-bridge`: lets a browser page drive a Copilot CLI over a
//! token-guarded WebSocket (see the `copilot_bridge` library).
//!
//! ```sh
//! copilot-bridge [--listen ADDR:PORT] [--token TOKEN] [--allow-origin ORIGIN]...
//!                [--serve [DIR]] [--cli HOST:PORT] [--cli-path PATH]
//!                [--allow-remote] [--max-message-bytes N] [--max-connections N] [-v]
//! ```
//!
//! When ready it prints `listening on http://ADDR:PORT/` to stdout, then the
//! page's address with the token in its fragment. `--offline` needs a model
//! stand-in, which this program has none of.

use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    copilot_bridge::command_line::run(&args, None)
}
