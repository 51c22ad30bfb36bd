//! Encoding requests, notifications, responses and error responses, framed
//! with their `Content-Length` header, into a caller's buffer or an
//! [`embedded_io::Write`].

use core::fmt;

use crate::envelope::Id;
use crate::json::{self, Value};
use crate::pending::RequestId;
use crate::text::itoa;

/// Longest header this encoder writes: `Content-Length: ` + 20 digits + CRLF CRLF.
pub const MAX_FRAME_HEADER_LEN: usize = 16 + 20 + 4;

/// Why a message could not be encoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum EncodeError {
    /// The output buffer is too small for the message.
    BufferTooSmall,
    /// serde-json-core could not serialize the payload.
    Serialize,
}

impl EncodeError {
    /// The message that [`Display`](fmt::Display) shows, for builds that
    /// leave `core::fmt` out.
    pub const fn message(&self) -> &'static str {
        match self {
            EncodeError::BufferTooSmall => crate::messages::ENCODE_BUFFER_TOO_SMALL,
            EncodeError::Serialize => crate::messages::ENCODE_SERIALIZE,
        }
    }
}

impl fmt::Display for EncodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.message())
    }
}

impl core::error::Error for EncodeError {}

/// Why [`Outgoing::write_to`] failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteError<E> {
    /// Encoding failed; nothing was written.
    Encode(EncodeError),
    /// The writer failed.
    Io(E),
}

impl<E: fmt::Debug> fmt::Display for WriteError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WriteError::Encode(e) => e.fmt(f),
            WriteError::Io(e) => write!(f, "write failed: {e:?}"),
        }
    }
}

impl<E: fmt::Debug> core::error::Error for WriteError<E> {}

/// JSON for `params`, `result` or `error.data`.
///
/// Implemented for [`Value`] (validated JSON, copied as it is) and [`Ser`]
/// (any `serde::Serialize`, through serde-json-core). An implementation must
/// write exactly one valid JSON value.
pub trait Payload {
    /// Writes the JSON into `out` and returns its length.
    fn write_json(&self, out: &mut [u8]) -> Result<usize, EncodeError>;
}

impl Payload for Value<'_> {
    fn write_json(&self, out: &mut [u8]) -> Result<usize, EncodeError> {
        let raw = self.raw().as_bytes();
        out.get_mut(..raw.len()).ok_or(EncodeError::BufferTooSmall)?.copy_from_slice(raw);
        Ok(raw.len())
    }
}

/// A payload serialized with serde-json-core: `Ser(&params)`.
pub struct Ser<'a, T: ?Sized>(pub &'a T);

impl<T: serde::Serialize + ?Sized> Payload for Ser<'_, T> {
    fn write_json(&self, out: &mut [u8]) -> Result<usize, EncodeError> {
        serde_json_core::to_slice(self.0, out).map_err(|e| match e {
            serde_json_core::ser::Error::BufferFull => EncodeError::BufferTooSmall,
            _ => EncodeError::Serialize,
        })
    }
}

/// A message to send.
#[derive(Clone, Copy)]
pub enum Outgoing<'a> {
    /// A call that expects a response; `id` comes from the pending table.
    Request {
        /// The request's id.
        id: RequestId,
        /// The method name.
        method: &'a str,
        /// Parameters: an object or array.
        params: Option<&'a dyn Payload>,
    },
    /// A call without a response.
    Notification {
        /// The method name.
        method: &'a str,
        /// Parameters: an object or array.
        params: Option<&'a dyn Payload>,
    },
    /// A successful answer to a server request.
    Response {
        /// The id of the request, as it arrived.
        id: Id<'a>,
        /// The result.
        result: &'a dyn Payload,
    },
    /// A failed answer to a server request.
    Error {
        /// The id of the request, as it arrived (`Id::Null` if unreadable).
        id: Id<'a>,
        /// The error code, such as -32601.
        code: i64,
        /// A message for a person.
        message: &'a str,
        /// Optional extra data.
        data: Option<&'a dyn Payload>,
    },
}

impl Outgoing<'_> {
    /// Writes the JSON body alone (no frame header); returns its length.
    pub fn encode_body(&self, out: &mut [u8]) -> Result<usize, EncodeError> {
        self.write_body(out).ok_or(EncodeError::BufferTooSmall)?
    }

    fn write_body(&self, out: &mut [u8]) -> Option<Result<usize, EncodeError>> {
        let mut at = 0;
        let put = json::put;
        put(out, &mut at, b"{\"jsonrpc\":\"2.0\",")?;
        let payload = |out: &mut [u8], at: &mut usize, p: &dyn Payload| -> Option<Result<(), EncodeError>> {
            match p.write_json(out.get_mut(*at..)?) {
                Ok(n) => {
                    *at += n;
                    Some(Ok(()))
                }
                Err(EncodeError::BufferTooSmall) => None,
                Err(e) => Some(Err(e)),
            }
        };
        match *self {
            Outgoing::Request { id, method, params } => {
                put(out, &mut at, b"\"id\":")?;
                put(out, &mut at, itoa(id.0, &mut [0; 20]))?;
                put(out, &mut at, b",\"method\":")?;
                json::write_escaped(out, &mut at, method)?;
                if let Some(p) = params {
                    put(out, &mut at, b",\"params\":")?;
                    if let Err(e) = payload(out, &mut at, p)? {
                        return Some(Err(e));
                    }
                }
            }
            Outgoing::Notification { method, params } => {
                put(out, &mut at, b"\"method\":")?;
                json::write_escaped(out, &mut at, method)?;
                if let Some(p) = params {
                    put(out, &mut at, b",\"params\":")?;
                    if let Err(e) = payload(out, &mut at, p)? {
                        return Some(Err(e));
                    }
                }
            }
            Outgoing::Response { id, result } => {
                put(out, &mut at, b"\"id\":")?;
                id.write(out, &mut at)?;
                put(out, &mut at, b",\"result\":")?;
                if let Err(e) = payload(out, &mut at, result)? {
                    return Some(Err(e));
                }
            }
            Outgoing::Error { id, code, message, data } => {
                put(out, &mut at, b"\"id\":")?;
                id.write(out, &mut at)?;
                put(out, &mut at, b",\"error\":{\"code\":")?;
                let mut digits = [0; 20];
                if code < 0 {
                    put(out, &mut at, b"-")?;
                }
                put(out, &mut at, itoa(code.unsigned_abs(), &mut digits))?;
                put(out, &mut at, b",\"message\":")?;
                json::write_escaped(out, &mut at, message)?;
                if let Some(d) = data {
                    put(out, &mut at, b",\"data\":")?;
                    if let Err(e) = payload(out, &mut at, d)? {
                        return Some(Err(e));
                    }
                }
                put(out, &mut at, b"}")?;
            }
        }
        put(out, &mut at, b"}")?;
        Some(Ok(at))
    }

    /// Writes the whole frame (header and body) into `out`; returns its length.
    pub fn encode(&self, out: &mut [u8]) -> Result<usize, EncodeError> {
        // The body goes after room for the longest header, then the header is
        // written in front of it and the frame moved to the start of `out`.
        let body_len = self.encode_body(out.get_mut(MAX_FRAME_HEADER_LEN..).ok_or(EncodeError::BufferTooSmall)?)?;
        let mut header = [0u8; MAX_FRAME_HEADER_LEN];
        let header_len = frame_header(body_len, &mut header);
        out.copy_within(MAX_FRAME_HEADER_LEN..MAX_FRAME_HEADER_LEN + body_len, header_len);
        out[..header_len].copy_from_slice(&header[..header_len]);
        Ok(header_len + body_len)
    }

    /// Encodes the whole frame into a new `Vec` (feature `alloc`), starting
    /// from `size_hint` bytes and doubling until it fits.
    #[cfg(feature = "alloc")]
    pub fn to_vec(&self, size_hint: usize) -> Result<alloc::vec::Vec<u8>, EncodeError> {
        let mut buf = alloc::vec![0u8; size_hint.max(MAX_FRAME_HEADER_LEN * 4)];
        loop {
            match self.encode(&mut buf) {
                Ok(n) => {
                    buf.truncate(n);
                    return Ok(buf);
                }
                Err(EncodeError::BufferTooSmall) => buf.resize(buf.len() * 2, 0),
                Err(e) => return Err(e),
            }
        }
    }

    /// Encodes the frame into `scratch`, then writes it to `w` with one
    /// `write_all` (one write keeps header and body in one TCP segment).
    pub fn write_to<W: embedded_io::Write>(
        &self,
        w: &mut W,
        scratch: &mut [u8],
    ) -> Result<usize, WriteError<W::Error>> {
        let n = self.encode(scratch).map_err(WriteError::Encode)?;
        w.write_all(&scratch[..n]).map_err(WriteError::Io)?;
        Ok(n)
    }
}

/// Writes `Content-Length: N\r\n\r\n` into `out`; returns its length.
pub fn frame_header(body_len: usize, out: &mut [u8; MAX_FRAME_HEADER_LEN]) -> usize {
    let mut at = 0;
    let mut digits = [0; 20];
    // The array is sized for the longest header: these cannot fail.
    for part in [&b"Content-Length: "[..], itoa(body_len as u64, &mut digits), b"\r\n\r\n"] {
        out[at..at + part.len()].copy_from_slice(part);
        at += part.len();
    }
    at
}

#[cfg(test)]
mod tests {
    use super::*;

    extern crate std;

    fn body(m: Outgoing<'_>) -> std::string::String {
        let mut buf = [0u8; 256];
        let n = m.encode_body(&mut buf).unwrap();
        std::string::String::from_utf8(buf[..n].to_vec()).unwrap()
    }

    #[cfg_attr(not(target_arch = "wasm32"), test)]
    #[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
    fn golden_bodies() {
        let params = Value::parse(br#"{"sessionId":"s"}"#).unwrap();
        assert_eq!(
            body(Outgoing::Request { id: RequestId(7), method: "session.send", params: Some(&params) }),
            r#"{"jsonrpc":"2.0","id":7,"method":"session.send","params":{"sessionId":"s"}}"#
        );
        assert_eq!(
            body(Outgoing::Notification { method: "a\"b", params: None }),
            r#"{"jsonrpc":"2.0","method":"a\"b"}"#
        );
        let id = Value::parse(br#""x\"y""#).unwrap().as_str().unwrap();
        let ok = Value::parse(b"true").unwrap();
        assert_eq!(
            body(Outgoing::Response { id: Id::String(id), result: &ok }),
            r#"{"jsonrpc":"2.0","id":"x\"y","result":true}"#
        );
        let big = Value::parse(b"1e400").unwrap().as_number().unwrap();
        assert_eq!(
            body(Outgoing::Error { id: Id::Number(big), code: -32601, message: "no\nsuch", data: Some(&ok) }),
            r#"{"jsonrpc":"2.0","id":1e400,"error":{"code":-32601,"message":"no\nsuch","data":true}}"#
        );
        assert_eq!(
            body(Outgoing::Error { id: Id::Null, code: 5, message: "", data: None }),
            r#"{"jsonrpc":"2.0","id":null,"error":{"code":5,"message":""}}"#
        );
    }

    #[cfg(feature = "alloc")]
    #[cfg_attr(not(target_arch = "wasm32"), test)]
    #[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
    fn to_vec_grows_until_the_frame_fits() {
        let long = std::format!(r#"{{"text":"{}"}}"#, "y".repeat(5000));
        let params = Value::parse(long.as_bytes()).unwrap();
        let frame = Outgoing::Notification { method: "m", params: Some(&params) }.to_vec(16).unwrap();
        let body = std::format!(r#"{{"jsonrpc":"2.0","method":"m","params":{long}}}"#);
        assert_eq!(frame, std::format!("Content-Length: {}\r\n\r\n{body}", body.len()).into_bytes());
    }

    #[derive(serde::Serialize)]
    struct Send<'a> {
        #[serde(rename = "sessionId")]
        session_id: &'a str,
        prompt: &'a str,
    }

    #[cfg_attr(not(target_arch = "wasm32"), test)]
    #[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
    fn serde_payloads_and_framing() {
        let params = Send { session_id: "s", prompt: "hi \"there\"" };
        let mut buf = [0u8; 256];
        let n = Outgoing::Request { id: RequestId(1), method: "session.send", params: Some(&Ser(&params)) }
            .encode(&mut buf)
            .unwrap();
        let expected_body =
            r#"{"jsonrpc":"2.0","id":1,"method":"session.send","params":{"sessionId":"s","prompt":"hi \"there\""}}"#;
        let expected = std::format!("Content-Length: {}\r\n\r\n{expected_body}", expected_body.len());
        assert_eq!(core::str::from_utf8(&buf[..n]).unwrap(), expected);
    }

    #[cfg_attr(not(target_arch = "wasm32"), test)]
    #[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
    fn too_small_buffers_are_reported() {
        let params = Send { session_id: "s", prompt: "a long enough prompt" };
        for len in [0, 10, 40, 60, 100] {
            let mut buf = std::vec![0u8; len];
            let r = Outgoing::Request { id: RequestId(1), method: "m", params: Some(&Ser(&params)) }.encode(&mut buf);
            assert_eq!(r, Err(EncodeError::BufferTooSmall), "len {len}");
        }
    }

    #[cfg_attr(not(target_arch = "wasm32"), test)]
    #[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
    fn write_to_writes_one_frame() {
        struct Sink(std::vec::Vec<std::vec::Vec<u8>>);
        impl embedded_io::ErrorType for Sink {
            type Error = core::convert::Infallible;
        }
        impl embedded_io::Write for Sink {
            fn write(&mut self, buf: &[u8]) -> Result<usize, Self::Error> {
                self.0.push(buf.to_vec());
                Ok(buf.len())
            }
            fn flush(&mut self) -> Result<(), Self::Error> {
                Ok(())
            }
        }
        let mut sink = Sink(std::vec::Vec::new());
        let mut scratch = [0u8; 128];
        let n = Outgoing::Notification { method: "ping", params: None }.write_to(&mut sink, &mut scratch).unwrap();
        assert_eq!(sink.0.len(), 1, "header and body in one write");
        assert_eq!(sink.0[0], b"Content-Length: 33\r\n\r\n{\"jsonrpc\":\"2.0\",\"method\":\"ping\"}");
        assert_eq!(n, sink.0[0].len());
    }
}
