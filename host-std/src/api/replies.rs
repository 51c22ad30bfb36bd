//! What the CLI answers to the client's calls, read from its JSON.

use serde::Deserialize;
use serde_json::Value;

use crate::error::{Error, Result};

/// The answer to `status.get`.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct Status {
    /// The CLI's version.
    pub version: String,
    /// The protocol version it speaks.
    pub protocol_version: u64,
}

/// The answer to `ping`.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct Pong {
    /// The message sent, echoed.
    #[serde(default)]
    pub message: Option<String>,
    /// When the server answered.
    #[serde(default)]
    pub timestamp: Option<Value>,
    /// The protocol version, if the server says.
    #[serde(default)]
    pub protocol_version: Option<u64>,
}

/// One entry of `session.list`.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct SessionMetadata {
    /// The session id.
    pub session_id: String,
    /// When it started.
    #[serde(default)]
    pub start_time: Option<String>,
    /// When it last changed.
    #[serde(default)]
    pub modified_time: Option<String>,
    /// A summary, once the CLI has one.
    #[serde(default)]
    pub summary: Option<String>,
    /// Whether it runs remotely.
    #[serde(default)]
    pub is_remote: bool,
    /// Where it runs (cwd, repository, ...).
    #[serde(default)]
    pub context: Option<Value>,
}

/// The answer to `auth.getStatus`: whether the CLI has a Copilot login.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct AuthStatus {
    /// Whether the CLI can call the model with the login it has.
    pub is_authenticated: bool,
    /// How it is authenticated (`user`, `env`, `gh-cli`, `token`, ...).
    #[serde(default)]
    pub auth_type: Option<String>,
    /// The GitHub host.
    #[serde(default)]
    pub host: Option<String>,
    /// The user's login name.
    #[serde(default)]
    pub login: Option<String>,
    /// A message for a person.
    #[serde(default)]
    pub status_message: Option<String>,
}

/// What the handshake learned.
#[derive(Debug, Clone)]
pub struct ServerInfo {
    /// The protocol version agreed.
    pub protocol_version: u64,
    /// The CLI's version, if it said.
    pub version: Option<String>,
}

pub(crate) fn parse<T: for<'de> Deserialize<'de>>(body: &[u8], method: &str) -> Result<T> {
    serde_json::from_slice(body).map_err(|e| Error::Protocol(format!("unreadable {method} answer: {e}")))
}

/// The sessions of a `session.list` answer (blocking and async).
pub(crate) fn read_session_list(body: &[u8]) -> Result<Vec<SessionMetadata>> {
    #[derive(Deserialize)]
    struct List {
        sessions: Vec<SessionMetadata>,
    }
    Ok(parse::<List>(body, "session.list")?.sessions)
}

/// A `session.delete` answer: `{success: false, error}` is a failure.
pub(crate) fn read_delete(body: &[u8], session_id: &str) -> Result<()> {
    let v: Value = parse(body, "session.delete")?;
    match v.get("success").and_then(Value::as_bool) {
        // Which session and why, as the official SDKs say it.
        Some(false) => Err(Error::Rpc {
            code: 0,
            message: format!(
                "failed to delete session {session_id}: {}",
                v.get("error").and_then(Value::as_str).unwrap_or("the CLI gave no reason")
            ),
            data: None,
        }),
        _ => Ok(()),
    }
}

/// The session id of a `session.getLastId` answer, if any.
pub(crate) fn read_last_id(body: &[u8]) -> Result<Option<String>> {
    let v: Value = parse(body, "session.getLastId")?;
    Ok(v.get("sessionId").and_then(Value::as_str).map(String::from))
}

/// JSON text the core wrote, to be sent as it is (a request's params).
pub(crate) fn raw_json(json: Vec<u8>) -> Result<Box<serde_json::value::RawValue>> {
    let text = String::from_utf8(json).map_err(|e| Error::Protocol(format!("the core wrote no UTF-8: {e}")))?;
    serde_json::value::RawValue::from_string(text).map_err(|e| Error::Protocol(format!("the core wrote no JSON: {e}")))
}
