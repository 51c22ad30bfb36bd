//! Why a connection ended, and how a transport finds out.

use std::fmt;

/// Why a connection ended, as [`Client::closed`](crate::Client::closed)
/// reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum CloseCause {
    /// The CLI process this client started exited.
    CliExited {
        /// Its exit code, if it exited with one.
        code: Option<i32>,
        /// The signal that ended it, if one did.
        signal: Option<i32>,
        /// The last lines it wrote to stderr.
        stderr: String,
    },
    /// The other end closed the connection (end of stream).
    PeerClosed,
    /// Reading from the connection failed.
    ReadFailed(String),
    /// The client's reader failed on its own (a panic in it or in the
    /// caller's stream); every waiter was told, every stream ended.
    ReaderFailed(String),
    /// This client stopped the connection.
    Stopped,
}

impl fmt::Display for CloseCause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CloseCause::CliExited { code, signal, stderr } => {
                match (code, signal) {
                    (Some(c), _) => write!(f, "the Copilot CLI exited with code {c}")?,
                    (None, Some(s)) => write!(f, "the Copilot CLI was ended by signal {s}")?,
                    (None, None) => write!(f, "the Copilot CLI exited")?,
                }
                if stderr.trim().is_empty() {
                    Ok(())
                } else {
                    write!(f, "; its stderr ends with:\n{}", stderr.trim_end())
                }
            }
            CloseCause::PeerClosed => write!(f, "the CLI closed the connection"),
            CloseCause::ReadFailed(e) => write!(f, "reading the connection failed: {e}"),
            CloseCause::ReaderFailed(e) => write!(f, "the client's reader failed: {e}"),
            CloseCause::Stopped => write!(f, "the client was stopped"),
        }
    }
}

/// Finds out why the stream ended (the CLI exited?), once the reader saw it
/// end. Runs on the reader thread, before any waiter is told.
pub(crate) type CauseProbe = Box<dyn FnOnce(CloseCause) -> CloseCause + Send>;
