//! The one error type of the crate.

use std::fmt;
use std::io;
use std::path::PathBuf;
use std::time::Duration;

/// Everything that can go wrong, in forms a caller can act on.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// No Copilot CLI was found. `searched` lists where we looked.
    CliNotFound {
        /// The places tried, in order.
        searched: Vec<String>,
    },
    /// The CLI could not be started.
    Spawn {
        /// The program we tried to run.
        program: PathBuf,
        /// Why it failed.
        source: io::Error,
    },
    /// The CLI exited (or closed its output) before it was ready.
    CliExited {
        /// Its exit code, if it exited and had one.
        code: Option<i32>,
        /// The last lines it wrote to stderr.
        stderr: String,
    },
    /// Installing the CLI with npm failed.
    Install(String),
    /// Reading or writing the connection failed.
    Io(io::Error),
    /// The server speaks a protocol version this client does not.
    ProtocolVersion {
        /// The version it reported, if any.
        server: Option<u64>,
        /// The version this client speaks.
        supported: u64,
    },
    /// The server sent something this client cannot use.
    Protocol(String),
    /// The server answered a request with a JSON-RPC error.
    Rpc {
        /// The error code (for example -32601, method not found).
        code: i64,
        /// The server's message.
        message: String,
        /// Extra data, if any.
        data: Option<serde_json::Value>,
    },
    /// The connection is closed; the request may or may not have been seen.
    Disconnected(String),
    /// No answer in time.
    Timeout {
        /// What was being waited for.
        what: String,
        /// How long we waited.
        after: Duration,
    },
    /// The session reported an error (`session.error`) while a turn ran.
    Session {
        /// The error type, such as `authentication` or `rate_limit`.
        error_type: String,
        /// The message.
        message: String,
    },
    /// A configuration that cannot work, such as a session id that is
    /// already open on this client.
    Config(String),
    /// Too many sessions or requests at once for the client's tables.
    Capacity(String),
    /// A call the session cannot answer was refused before it was sent:
    /// the session lacks the capability it needs (a UI call without a
    /// client that answers elicitations).
    MissingCapability(copilot_core::MissingCapability),
}

impl Error {
    /// The JSON-RPC error code, for [`Error::Rpc`].
    pub fn rpc_code(&self) -> Option<i64> {
        match self {
            Error::Rpc { code, .. } => Some(*code),
            _ => None,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::CliNotFound { searched } => write!(
                f,
                "Copilot CLI not found (looked in: {}); install it with `npm install -g @github/copilot`, \
                 set COPILOT_CLI_PATH, or enable installation in ClientOptions",
                searched.join(", ")
            ),
            Error::Spawn { program, source } => write!(f, "cannot start {}: {source}", program.display()),
            Error::CliExited { code, stderr } => {
                match code {
                    Some(c) => write!(f, "Copilot CLI exited with code {c} before it was ready")?,
                    None => write!(f, "Copilot CLI exited before it was ready")?,
                }
                if stderr.trim().is_empty() {
                    Ok(())
                } else {
                    write!(f, "; its stderr ends with:\n{}", stderr.trim_end())
                }
            }
            Error::Install(why) => write!(f, "installing the Copilot CLI failed: {why}"),
            Error::Io(e) => write!(f, "connection I/O failed: {e}"),
            Error::ProtocolVersion { server: Some(v), supported } => {
                write!(f, "server speaks protocol version {v}; this client speaks version {supported}")
            }
            Error::ProtocolVersion { server: None, supported } => {
                write!(f, "server reports no protocol version; this client speaks version {supported}")
            }
            Error::Protocol(what) => write!(f, "protocol error: {what}"),
            Error::Rpc { code, message, .. } => write!(f, "server error {code}: {message}"),
            Error::Disconnected(why) => write!(f, "disconnected from the Copilot CLI: {why}"),
            Error::Timeout { what, after } => write!(f, "no answer to {what} within {after:?}"),
            Error::Session { error_type, message } => write!(f, "session error ({error_type}): {message}"),
            Error::Config(what) => write!(f, "invalid configuration: {what}"),
            Error::Capacity(what) => write!(f, "capacity exceeded: {what}"),
            Error::MissingCapability(missing) => write!(f, "{missing}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Spawn { source, .. } => Some(source),
            Error::Io(e) => Some(e),
            _ => None,
        }
    }
}

impl From<io::Error> for Error {
    fn from(e: io::Error) -> Self {
        Error::Io(e)
    }
}

/// The crate's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;
