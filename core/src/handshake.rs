//! The handshake, once for every host: what to send first, how to read each
//! answer, and when the connection is ready.
//!
//! 1. `connect` with `{"supportedTaskKinds":[],"token"?:..}` (the token
//!    the server was started with, if any: a server with
//!    `COPILOT_CONNECTION_TOKEN` set refuses a `connect` without it).
//! 2. A CLI that does not know `connect` answers -32601 (method not found):
//!    then `ping` with `{}`. Any other error ends the handshake with that
//!    error.
//! 3. The answer's `protocolVersion` must be [`PROTOCOL_VERSION`]; the
//!    server's `version` (from `connect` only) is what the host reports.

use crate::envelope::METHOD_NOT_FOUND;
use crate::json::{JsonStr, Kind, Value};
use crate::limits::PROTOCOL_VERSION;

/// The first request of the handshake; its params are written by
/// [`write_connect_params`].
pub const HANDSHAKE_CONNECT: &str = "connect";
/// The request sent instead when the CLI does not know `connect`, with
/// params `{}`.
pub const HANDSHAKE_PING: &str = "ping";
/// The error code of a `connect` answer that falls back to `ping`.
pub const HANDSHAKE_FALLBACK_CODE: i64 = METHOD_NOT_FOUND;

/// Writes the params of `connect`: `{"supportedTaskKinds":[]}`, with the
/// connection `token` (its text, not yet JSON) if there is one.
pub fn write_connect_params(token: Option<&str>, out: &mut impl FnMut(&[u8])) {
    out(br#"{"supportedTaskKinds":[]"#);
    if let Some(token) = token {
        out(br#","token":"#);
        crate::json::emit_escaped(token, out);
    }
    out(b"}");
}

/// Which handshake request an answer is to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HandshakeRequest {
    /// [`HANDSHAKE_CONNECT`].
    Connect,
    /// [`HANDSHAKE_PING`].
    Ping,
}

/// What to do after an answer of the handshake.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HandshakeStep<'a> {
    /// Send [`HANDSHAKE_PING`] with params `{}`, and read its answer.
    Ping,
    /// The connection is ready; `version` is the server's version, if it
    /// said (a JSON string as it arrived).
    Ready {
        /// The server's `version`.
        version: Option<JsonStr<'a>>,
    },
    /// The handshake failed.
    Failed(HandshakeError),
}

/// Why a handshake failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum HandshakeError {
    /// The request was answered with an error that is not a fallback: the
    /// host reports that error as it came (-32002: a wrong or missing
    /// connection token).
    Refused,
    /// The server speaks another protocol version (`None`: it did not say
    /// one, or said one that is not a whole number).
    Version {
        /// The server's `protocolVersion`.
        server: Option<u64>,
    },
}

impl HandshakeError {
    /// A message a user can act on (for [`HandshakeError::Version`], the
    /// host adds the numbers).
    pub const fn message(&self) -> &'static str {
        match self {
            HandshakeError::Refused => "the CLI refused the handshake",
            HandshakeError::Version { .. } => "the CLI speaks another protocol version than this client",
        }
    }
}

impl core::fmt::Display for HandshakeError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(self.message())
    }
}

/// Reads the answer to the handshake request `to`: `Ok(result)` with the
/// response's `result` JSON, or `Err(code)` with its error code.
pub fn read_handshake_answer(to: HandshakeRequest, answer: Result<&[u8], i64>) -> HandshakeStep<'_> {
    let result = match answer {
        Err(HANDSHAKE_FALLBACK_CODE) if to == HandshakeRequest::Connect => return HandshakeStep::Ping,
        Err(_) => return HandshakeStep::Failed(HandshakeError::Refused),
        Ok(result) => Value::parse(crate::json::trim_ws(result)).ok().filter(|v| v.kind() == Kind::Object),
    };
    let server = result.and_then(|r| r.get("protocolVersion")).and_then(|v| v.as_number()).and_then(|n| n.as_u64());
    if server != Some(PROTOCOL_VERSION) {
        return HandshakeStep::Failed(HandshakeError::Version { server });
    }
    let version = match to {
        HandshakeRequest::Connect => result.and_then(|r| r.get("version")).and_then(|v| v.as_str()),
        // `ping`'s answer has no server version.
        HandshakeRequest::Ping => None,
    };
    HandshakeStep::Ready { version }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(token: Option<&str>) -> heapless::Vec<u8, 128> {
        let mut out = heapless::Vec::new();
        write_connect_params(token, &mut |b: &[u8]| out.extend_from_slice(b).unwrap());
        out
    }

    #[cfg_attr(not(target_arch = "wasm32"), test)]
    #[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
    fn connect_carries_the_token_escaped_when_there_is_one() {
        assert_eq!(params(None), br#"{"supportedTaskKinds":[]}"#[..]);
        assert_eq!(params(Some("t\"1")), br#"{"supportedTaskKinds":[],"token":"t\"1"}"#[..]);
    }

    #[cfg_attr(not(target_arch = "wasm32"), test)]
    #[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
    fn method_not_found_falls_back_to_ping_once_and_other_errors_fail() {
        use HandshakeRequest::{Connect, Ping};
        assert_eq!(read_handshake_answer(Connect, Err(-32601)), HandshakeStep::Ping);
        assert_eq!(read_handshake_answer(Ping, Err(-32601)), HandshakeStep::Failed(HandshakeError::Refused));
        assert_eq!(read_handshake_answer(Connect, Err(-32002)), HandshakeStep::Failed(HandshakeError::Refused));
    }

    #[cfg_attr(not(target_arch = "wasm32"), test)]
    #[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
    fn the_protocol_version_must_be_three() {
        use HandshakeRequest::{Connect, Ping};
        let ok = br#"{"ok":true,"protocolVersion":3,"version":"1.0.102","taskKinds":["agent","shell"]}"#;
        match read_handshake_answer(Connect, Ok(ok)) {
            HandshakeStep::Ready { version: Some(v) } => assert_eq!(v, "1.0.102"),
            other => panic!("{other:?}"),
        }
        let pong = br#"{"message":"pong","timestamp":1,"protocolVersion":3}"#;
        assert_eq!(read_handshake_answer(Ping, Ok(pong)), HandshakeStep::Ready { version: None });
        let version = |server| HandshakeStep::Failed(HandshakeError::Version { server });
        assert_eq!(read_handshake_answer(Connect, Ok(br#"{"protocolVersion":2}"#)), version(Some(2)));
        assert_eq!(read_handshake_answer(Ping, Ok(br#"{"protocolVersion":"3"}"#)), version(None));
        assert_eq!(read_handshake_answer(Connect, Ok(b"{}")), version(None));
        assert_eq!(read_handshake_answer(Connect, Ok(b"null")), version(None));
        assert_eq!(read_handshake_answer(Connect, Ok(b"{x")), version(None));
    }
}
