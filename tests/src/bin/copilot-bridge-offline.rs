//! `copilot-bridge` with its offline mode: the same command
//! (`copilot_bridge::command_line`), whose `--offline` runs the CLIs it
//! spawns against the scripted model (`copilot_testkit`) on 127.0.0.1, so a
//! page shows full turns with no login and nothing leaves the machine.
//!
//! It lives here, not in the `copilot-bridge` crate, because the scripted
//! model is test support that is never published; the published bridge
//! takes any [`ModelStandIn`] and ships none.
//!
//! ```sh
//! cargo run -p copilot-tests --bin copilot-bridge-offline -- --serve --offline
//! ```

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use copilot_bridge::ModelStandIn;
use copilot_testkit::scripted_model::ScriptedModel;

/// The largest answer read from the model's control endpoint.
const MAX_ANSWER: u64 = 64 << 10;

/// The scripted model as the bridge's stand-in.
struct Scripted(ScriptedModel);

impl ModelStandIn for Scripted {
    fn cli_env(&self) -> Vec<(std::ffi::OsString, std::ffi::OsString)> {
        self.0.env()
    }

    /// Passes the page's script (`{"sessionId", "replies"}`) on to the
    /// model's control endpoint, and its answer back.
    fn script(&self, body: &[u8]) -> io::Result<(u16, Vec<u8>)> {
        let url = self.0.url();
        let host = url.trim_start_matches("http://");
        let mut s = TcpStream::connect(host)?;
        s.set_read_timeout(Some(Duration::from_secs(10)))?;
        write!(
            s,
            "POST /_scripted/script HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n\
             Content-Length: {}\r\nConnection: close\r\n\r\n",
            body.len()
        )?;
        s.write_all(body)?;
        let mut answer = Vec::new();
        s.take(MAX_ANSWER).read_to_end(&mut answer)?;
        let at = answer.windows(4).position(|w| w == b"\r\n\r\n").ok_or_else(|| io::Error::other("no answer"))?;
        let status = std::str::from_utf8(&answer[..at])
            .ok()
            .and_then(|head| head.split(' ').nth(1)?.parse().ok())
            .ok_or_else(|| io::Error::other("no status"))?;
        Ok((status, answer.split_off(at + 4)))
    }
}

fn start() -> io::Result<Arc<dyn ModelStandIn>> {
    let model = ScriptedModel::start()?;
    log::info!("offline: scripted model on {}", model.url());
    Ok(Arc::new(Scripted(model)))
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    copilot_bridge::command_line::run(&args, Some(start))
}
