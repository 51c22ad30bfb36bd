//! How a client starts the CLI, once for every host (security-relevant: a
//! secret never goes on the command line, where other local users can read
//! it).
//!
//! [`launch_items`] gives, in order, the arguments and the secret
//! environment variables of a start; a host then appends the user's own
//! arguments, and sets the user's environment first and the secrets last
//! (a secret is never overridden by an inherited or user variable of the
//! same name). Every variable a secret is passed in is named to the CLI in
//! `--secret-env-vars=`, so the CLI keeps it from the shells and MCP
//! servers it starts. The CLI starts in its own process group
//! ([`LAUNCH_OWN_PROCESS_GROUP`]): `node_modules/.bin/copilot` is a loader
//! that starts the native binary as its child, so stopping the loader alone
//! would leave the CLI running; a host ends the group.

use crate::text::itoa;

macro_rules! auth_token_env {
    () => {
        "COPILOT_SDK_AUTH_TOKEN"
    };
}
macro_rules! connection_token_env {
    () => {
        "COPILOT_CONNECTION_TOKEN"
    };
}

/// The variable a started CLI reads the user's GitHub token from
/// (`--auth-token-env`).
pub const AUTH_TOKEN_ENV: &str = auth_token_env!();
/// The variable a started TCP server reads its connection token from: a
/// `connect` without that token is refused (-32002).
pub const CONNECTION_TOKEN_ENV: &str = connection_token_env!();
/// The variable that names the CLI to run when the host is given none.
pub const CLI_PATH_ENV: &str = "COPILOT_CLI_PATH";
/// One place a host looks for the CLI to start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CliCandidate {
    /// The path the user gave; if it is not a file, the search ends there
    /// with an error (never some other CLI in its place).
    Explicit,
    /// The path in this environment variable, when set and not empty.
    Variable(&'static str),
    /// This file name in each folder of `PATH`, in order.
    PathFolders(&'static str),
    /// This path, relative to the working folder.
    Relative(&'static str),
}

/// Where a host looks for the CLI, in order; the first file found is
/// started (the native binary beside it when it is npm's loader).
pub static CLI_SEARCH: &[CliCandidate] = &[
    CliCandidate::Explicit,
    CliCandidate::Variable(CLI_PATH_ENV),
    CliCandidate::PathFolders("copilot"),
    CliCandidate::Relative("node_modules/.bin/copilot"),
];

/// Set to `true` for a started CLI when the user configures telemetry: the
/// CLI then exports its own OpenTelemetry traces.
pub const TELEMETRY_ENABLED_ENV: &str = "COPILOT_OTEL_ENABLED";

/// The variable each telemetry option sets for a started CLI, as the
/// official SDKs set them (`[option, variable]`; the options by their
/// JavaScript names, snake_case in Rust; a flag's value is `true` or
/// `false`). Set after the user's environment, before the secrets.
pub static TELEMETRY_ENV: &[(&str, &str)] = &[
    ("otlpEndpoint", "OTEL_EXPORTER_OTLP_ENDPOINT"),
    ("otlpProtocol", "OTEL_EXPORTER_OTLP_PROTOCOL"),
    ("filePath", "COPILOT_OTEL_FILE_EXPORTER_PATH"),
    ("exporterType", "COPILOT_OTEL_EXPORTER_TYPE"),
    ("sourceName", "COPILOT_OTEL_SOURCE_NAME"),
    ("captureContent", "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"),
];

/// The members of a W3C trace context that go, when the user's provider
/// gives them, at the top of the params of `session.create`,
/// `session.resume` and `session.send`, and that a tool call's event
/// carries for its handler.
pub static TRACE_CONTEXT_MEMBERS: &[&str] = &["traceparent", "tracestate"];

/// The client options that only start a CLI (by their JavaScript names,
/// snake_case in Rust): a client that connects to a CLI it did not start
/// (a server, a stream, a bridge) refuses them rather than drop them
/// unseen (a GitHub token given there would never reach the CLI, which
/// keeps its own login), as the official SDKs refuse a token with a URL.
pub static SPAWN_ONLY_OPTIONS: &[&str] =
    &["cliPath", "args", "env", "cwd", "authToken", "logLevel", "telemetry", "baseDirectory"];

/// Why a client that did not start its CLI refuses an option of
/// [`SPAWN_ONLY_OPTIONS`]; the option's name follows.
pub const SPAWN_ONLY_REFUSAL: &str = "only a client that starts its CLI takes the option ";

/// The CLI's `--log-level` unless the user says otherwise.
pub const DEFAULT_LOG_LEVEL: &str = "error";
/// The CLI starts in a process group of its own, which the host ends.
pub const LAUNCH_OWN_PROCESS_GROUP: bool = true;
/// What a TCP server prints on its stdout once it listens, before the port
/// (see [`read_announced_port`]).
pub const PORT_ANNOUNCEMENT: &str = "listening on port";

/// How the started CLI talks to the client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LaunchTransport {
    /// Its stdin and stdout (`--stdio`).
    Stdio,
    /// A TCP port on the loopback address (`--port N`; 0: any free port,
    /// which it announces on stdout).
    Tcp {
        /// The port to ask for.
        port: u16,
    },
}

/// What a start asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Launch<'a> {
    /// How the CLI talks to the client.
    pub transport: LaunchTransport,
    /// The CLI's `--log-level` ([`DEFAULT_LOG_LEVEL`] unless the user says).
    pub log_level: &'a str,
    /// Whether the user gave a GitHub token (an empty token is none).
    pub auth_token: bool,
}

/// A secret value the host holds, passed in an environment variable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LaunchSecret {
    /// The user's GitHub token.
    AuthToken,
    /// The TCP server's connection token: the user's, or else one the host
    /// makes at random (a UUID v4), so that no other local process can
    /// drive a CLI this client started. The host's handshake sends it.
    ConnectionToken,
}

/// One item of a start, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LaunchItem<'a> {
    /// The next argument.
    Arg(&'a str),
    /// Set the variable `name` to the value of `secret`.
    Secret {
        /// The variable.
        name: &'static str,
        /// Its value, which the host holds.
        secret: LaunchSecret,
    },
}

/// Calls `out` with each argument and secret variable of the start
/// `launch`, in order: `--headless --no-auto-update --log-level <level>`,
/// `--auth-token-env COPILOT_SDK_AUTH_TOKEN` with a token, `--stdio` or
/// `--port <port>` (with a connection token), and `--secret-env-vars=` of
/// the secrets' variables. The user's arguments go after these.
pub fn launch_items(launch: &Launch<'_>, out: &mut impl FnMut(LaunchItem<'_>)) {
    for arg in ["--headless", "--no-auto-update", "--log-level", launch.log_level] {
        out(LaunchItem::Arg(arg));
    }
    if launch.auth_token {
        out(LaunchItem::Arg("--auth-token-env"));
        out(LaunchItem::Arg(AUTH_TOKEN_ENV));
        out(LaunchItem::Secret { name: AUTH_TOKEN_ENV, secret: LaunchSecret::AuthToken });
    }
    let tcp = match launch.transport {
        LaunchTransport::Stdio => {
            out(LaunchItem::Arg("--stdio"));
            false
        }
        LaunchTransport::Tcp { port } => {
            out(LaunchItem::Arg("--port"));
            let mut digits = [0; 20];
            // Decimal digits are ASCII: never the fallback.
            out(LaunchItem::Arg(core::str::from_utf8(itoa(port.into(), &mut digits)).unwrap_or("0")));
            out(LaunchItem::Secret { name: CONNECTION_TOKEN_ENV, secret: LaunchSecret::ConnectionToken });
            true
        }
    };
    let names = match (launch.auth_token, tcp) {
        (false, false) => return,
        (true, false) => concat!("--secret-env-vars=", auth_token_env!()),
        (false, true) => concat!("--secret-env-vars=", connection_token_env!()),
        (true, true) => concat!("--secret-env-vars=", auth_token_env!(), ",", connection_token_env!()),
    };
    out(LaunchItem::Arg(names));
}

/// The port a TCP server announces in a line of its stdout
/// (`CLI server listening on port 4321`; [`PORT_ANNOUNCEMENT`] in any
/// case, then spaces, then the port), if the line is that announcement.
pub fn read_announced_port(line: &str) -> Option<u16> {
    let bytes = line.as_bytes();
    let key = PORT_ANNOUNCEMENT.as_bytes();
    let at = bytes.windows(key.len()).position(|w| w.eq_ignore_ascii_case(key))? + key.len();
    let rest = &bytes[at..];
    let start = rest.iter().position(|b| !b.is_ascii_whitespace())?;
    let digits = &rest[start..];
    let len = digits.iter().position(|b| !b.is_ascii_digit()).unwrap_or(digits.len());
    let mut port: u32 = 0;
    for d in &digits[..len.min(6)] {
        port = port * 10 + u32::from(d - b'0');
    }
    match u16::try_from(port) {
        Ok(port) if len > 0 && len < 6 && port > 0 => Some(port),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn items(launch: Launch<'_>) -> heapless::Vec<heapless::String<80>, 16> {
        let mut v = heapless::Vec::new();
        launch_items(&launch, &mut |item| {
            let mut s = heapless::String::new();
            match item {
                LaunchItem::Arg(a) => s.push_str(a).unwrap(),
                LaunchItem::Secret { name, secret } => {
                    s.push_str(if secret == LaunchSecret::AuthToken { "$auth " } else { "$conn " }).unwrap();
                    s.push_str(name).unwrap();
                }
            }
            v.push(s).unwrap();
        });
        v
    }

    #[cfg_attr(not(target_arch = "wasm32"), test)]
    #[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
    fn stdio_without_a_token_names_no_secret() {
        let got = items(Launch { transport: LaunchTransport::Stdio, log_level: "error", auth_token: false });
        assert_eq!(got, ["--headless", "--no-auto-update", "--log-level", "error", "--stdio"]);
    }

    #[cfg_attr(not(target_arch = "wasm32"), test)]
    #[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
    fn tokens_go_in_variables_the_cli_is_told_to_keep_secret() {
        let got = items(Launch { transport: LaunchTransport::Tcp { port: 0 }, log_level: "debug", auth_token: true });
        assert_eq!(
            got,
            [
                "--headless",
                "--no-auto-update",
                "--log-level",
                "debug",
                "--auth-token-env",
                "COPILOT_SDK_AUTH_TOKEN",
                "$auth COPILOT_SDK_AUTH_TOKEN",
                "--port",
                "0",
                "$conn COPILOT_CONNECTION_TOKEN",
                "--secret-env-vars=COPILOT_SDK_AUTH_TOKEN,COPILOT_CONNECTION_TOKEN",
            ]
        );
        let got = items(Launch { transport: LaunchTransport::Tcp { port: 4321 }, log_level: "e", auth_token: false });
        assert_eq!(
            &got[4..],
            ["--port", "4321", "$conn COPILOT_CONNECTION_TOKEN", "--secret-env-vars=COPILOT_CONNECTION_TOKEN"]
        );
        let got = items(Launch { transport: LaunchTransport::Stdio, log_level: "e", auth_token: true });
        assert_eq!(got.last().unwrap(), "--secret-env-vars=COPILOT_SDK_AUTH_TOKEN");
    }

    #[cfg_attr(not(target_arch = "wasm32"), test)]
    #[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
    fn the_port_is_read_from_its_announcement_only() {
        assert_eq!(read_announced_port("CLI server listening on port 4321"), Some(4321));
        assert_eq!(read_announced_port("Listening On Port\t65535\r"), Some(65535));
        assert_eq!(read_announced_port("listening on port 8080 (tcp)"), Some(8080));
        assert_eq!(read_announced_port("Listening on port 7\r"), Some(7));
        assert_eq!(read_announced_port("Warning: No COPILOT_CONNECTION_TOKEN was set"), None);
        for line in [
            "listening on port",
            "listening on port x",
            "listening on port 0",
            "listening on port 65536",
            "port 80",
            "listening on port 1234567",
        ] {
            assert_eq!(read_announced_port(line), None, "{line}");
        }
    }
}
