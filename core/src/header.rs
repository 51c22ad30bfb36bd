//! The header block of a frame: `Name: value` lines ended by CRLF, then an
//! empty line (see `frame` for the rules). The common block,
//! `Content-Length: N` alone, is read by a short cut; any other goes through
//! the line parser, which also finds where to resynchronise after an error.

use core::fmt;

/// The longest header block (everything up to and including the empty line)
/// the decoder accepts, or the buffer size if that is smaller. Real headers
/// are under 100 bytes.
pub const MAX_HEADER_LEN: usize = 1024;

/// What went wrong in the byte stream. Every error is reported once; the
/// decoder then recovers by itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum FrameError {
    /// Bytes that do not start a header where a header must start (for
    /// example a log line written to the protocol stream).
    Garbage,
    /// A header line that is not `Name: value` followed by CRLF (a bare LF
    /// or CR counts here too).
    InvalidHeader,
    /// A header block without `Content-Length`.
    MissingLength,
    /// A `Content-Length` that is not a decimal number, does not fit in a
    /// `usize`, or appears twice with different values.
    InvalidLength,
    /// The header block is longer than [`MAX_HEADER_LEN`] (or the buffer).
    HeaderTooLong,
    /// The stream ended inside a frame (see [`FrameDecoder::finish`]).
    Truncated,
    /// The body is larger than the buffer; it is skipped.
    TooLarge {
        /// The frame's `Content-Length`.
        length: usize,
        /// The decoder's buffer size.
        capacity: usize,
    },
}

impl FrameError {
    /// The JSON-RPC error code a peer would use for this error.
    pub const fn code(&self) -> i64 {
        -32700
    }
}

impl FrameError {
    /// Writes the message that [`Display`](fmt::Display) shows, in parts,
    /// without `core::fmt` (for builds that leave it out).
    pub fn write_message(&self, out: &mut dyn FnMut(&str)) {
        use crate::text::write_decimal;
        match self {
            FrameError::Garbage => out(crate::messages::FRAME_GARBAGE),
            FrameError::InvalidHeader => out(crate::messages::FRAME_INVALID_HEADER),
            FrameError::MissingLength => out(crate::messages::FRAME_MISSING_LENGTH),
            FrameError::InvalidLength => out(crate::messages::FRAME_INVALID_LENGTH),
            FrameError::HeaderTooLong => {
                out(crate::messages::FRAME_HEADER_TOO_LONG);
                write_decimal(MAX_HEADER_LEN as u64, out);
                out(crate::messages::BYTES);
            }
            FrameError::Truncated => out(crate::messages::FRAME_TRUNCATED),
            FrameError::TooLarge { length, capacity } => {
                out(crate::messages::FRAME_OF);
                write_decimal(*length as u64, out);
                out(crate::messages::FRAME_EXCEEDS);
                write_decimal(*capacity as u64, out);
                out(crate::messages::FRAME_SKIPPED);
            }
        }
    }
}

impl fmt::Display for FrameError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        crate::text::fmt_parts(f, |out| self.write_message(out))
    }
}

impl core::error::Error for FrameError {}

#[cfg_attr(test, derive(Debug, PartialEq))]
pub(crate) enum HeaderParse {
    /// Consistent so far; more bytes needed.
    Partial,
    Frame {
        header_len: usize,
        body_len: usize,
    },
    /// `skip` bytes may be dropped before resynchronising.
    Error {
        error: FrameError,
        skip: usize,
    },
}

fn is_token(b: u8) -> bool {
    // RFC 9110 token characters.
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// Parses a header block at the start of `data`.
pub(crate) fn parse_header(data: &[u8], limit: usize) -> HeaderParse {
    // Builds sized for space (wasm, bare metal) do without the short cut.
    #[cfg(not(any(target_arch = "wasm32", target_os = "none")))]
    if let Some(frame) = plain_header(data, limit) {
        return frame;
    }
    parse_header_lines(data, limit)
}

/// Parses any header block, line by line.
fn parse_header_lines(data: &[u8], limit: usize) -> HeaderParse {
    let mut length: Option<usize> = None;
    // A bad length is reported once the block is complete, so that the whole
    // block can be skipped rather than re-read from its next line.
    let mut bad_length = false;
    let mut line_start = 0;
    loop {
        let rest = &data[line_start..];
        // A header name inside a line: the bytes before it are junk glued to
        // a header (a log line without its line feed, say). Skipping exactly
        // them keeps the frame that follows.
        if let Some(at) = embedded_header_start(rest) {
            let error = if line_start == 0 { FrameError::Garbage } else { FrameError::InvalidHeader };
            return HeaderParse::Error { error, skip: line_start + at };
        }
        // The empty line ends the block.
        if rest.first() == Some(&b'\r') || rest.is_empty() {
            if line_start == 0 && !rest.is_empty() {
                // A blank line where a header block must start.
                return HeaderParse::Error { error: FrameError::Garbage, skip: 1 };
            }
            match rest.get(1) {
                None => return partial_or_too_long(data, limit),
                Some(b'\n') => {
                    let header_len = line_start + 2;
                    if header_len > limit {
                        return HeaderParse::Error { error: FrameError::HeaderTooLong, skip: 1 };
                    }
                    return match (length, bad_length) {
                        (_, true) => HeaderParse::Error { error: FrameError::InvalidLength, skip: header_len },
                        (None, _) => HeaderParse::Error { error: FrameError::MissingLength, skip: header_len },
                        (Some(body_len), _) => HeaderParse::Frame { header_len, body_len },
                    };
                }
                Some(_) => return HeaderParse::Error { error: FrameError::InvalidHeader, skip: 1 },
            }
        }
        // A header line: token ':' value CRLF.
        let name_len = rest.iter().position(|&b| !is_token(b)).unwrap_or(rest.len());
        match rest.get(name_len) {
            None => return partial_or_too_long(data, limit),
            Some(b':') if name_len > 0 => {}
            // Nothing header-like where the block starts: stray bytes.
            _ if line_start == 0 => return HeaderParse::Error { error: FrameError::Garbage, skip: 1 },
            _ => return HeaderParse::Error { error: FrameError::InvalidHeader, skip: 1 },
        }
        let value_start = name_len + 1;
        let Some(cr) = rest[value_start..].iter().position(|&b| b == b'\r' || b == b'\n') else {
            return partial_or_too_long(data, limit);
        };
        let value_end = value_start + cr;
        match rest.get(value_end..value_end + 2) {
            None => return partial_or_too_long(data, limit),
            Some(b"\r\n") => {}
            Some(_) => return HeaderParse::Error { error: FrameError::InvalidHeader, skip: 1 },
        }
        if rest[..name_len].eq_ignore_ascii_case(b"content-length") {
            match (parse_length(&rest[value_start..value_end]), length) {
                // A repeated header with the same value is harmless (RFC 9110).
                (Some(n), None) => length = Some(n),
                (Some(n), Some(m)) if n == m => {}
                _ => bad_length = true,
            }
        }
        line_start += value_end + 2;
        if line_start > limit {
            return HeaderParse::Error { error: FrameError::HeaderTooLong, skip: 1 };
        }
    }
}

/// The block almost every frame has, `Content-Length: N` and the empty line,
/// read without the general parser's line-by-line search; `None` for
/// anything else, including a length too large to read, which the general
/// parser then reads and reports exactly as it would have.
#[cfg_attr(any(target_arch = "wasm32", target_os = "none"), allow(dead_code))]
#[inline]
fn plain_header(data: &[u8], limit: usize) -> Option<HeaderParse> {
    const NAME: &[u8] = b"Content-Length: ";
    let digits = data.strip_prefix(NAME)?;
    let len = digits.iter().take(20).take_while(|b| b.is_ascii_digit()).count();
    let header_len = NAME.len() + len + 4;
    if len == 0 || digits.get(len..len + 4)? != b"\r\n\r\n" || header_len > limit {
        return None;
    }
    let body_len = parse_length(&digits[..len])?;
    Some(HeaderParse::Frame { header_len, body_len })
}

fn partial_or_too_long(data: &[u8], limit: usize) -> HeaderParse {
    if data.len() >= limit {
        HeaderParse::Error { error: FrameError::HeaderTooLong, skip: 1 }
    } else {
        HeaderParse::Partial
    }
}

/// A decimal length, optional spaces or tabs around it.
fn parse_length(v: &[u8]) -> Option<usize> {
    let v = trim_ows(v);
    if v.is_empty() || !v.iter().all(u8::is_ascii_digit) {
        return None;
    }
    v.iter().try_fold(0usize, |n, &d| n.checked_mul(10)?.checked_add(usize::from(d - b'0')))
}

fn trim_ows(mut v: &[u8]) -> &[u8] {
    while let [b' ' | b'\t', rest @ ..] = v {
        v = rest;
    }
    while let [rest @ .., b' ' | b'\t'] = v {
        v = rest;
    }
    v
}

/// Headers that can start a frame; resynchronisation looks for these.
const RESYNC_NAMES: [&[u8]; 2] = [b"content-length:", b"content-type:"];

/// The offset of a header that can start a frame inside the line at the start
/// of `rest` (past its first byte, before its line end), if there is one.
/// Only a complete line is searched: until its end arrives the line cannot
/// end a block, and one too long to wait for is skipped byte by byte.
fn embedded_header_start(rest: &[u8]) -> Option<usize> {
    let line_end = rest.iter().position(|&b| b == b'\r' || b == b'\n')?;
    let line = rest.get(1..line_end)?;
    find_header_start(line).ok().map(|at| at + 1)
}

/// The offset of the next header that can start a frame, or `Err(keep)`: how
/// many trailing bytes to keep because they may be the start of one.
pub(crate) fn find_header_start(data: &[u8]) -> Result<usize, usize> {
    for at in 0..data.len() {
        if !matches!(data[at], b'c' | b'C') {
            continue;
        }
        for name in RESYNC_NAMES {
            let n = name.len().min(data.len() - at);
            if data[at..at + n].eq_ignore_ascii_case(&name[..n]) {
                if n == name.len() {
                    return Ok(at);
                }
                return Err(data.len() - at);
            }
        }
    }
    Err(0)
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use std::vec::Vec;

    /// The common block's short cut reads what the line parser reads, or
    /// leaves the block to it: lengths of every size (past u64 too), other
    /// spellings and spacing, every cut of the block, and tight limits.
    #[cfg_attr(not(target_arch = "wasm32"), test)]
    #[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
    fn the_plain_header_short_cut_agrees_with_the_line_parser() {
        let mut blocks: Vec<Vec<u8>> = Vec::new();
        for digits in
            ["0", "7", "0042", "1993", "18446744073709551615", "18446744073709551616", "9".repeat(25).as_str()]
        {
            for form in [
                "Content-Length: {}\r\n\r\n",
                "Content-Length:{}\r\n\r\n",
                "Content-Length: {} \r\n\r\n",
                "content-length: {}\r\n\r\n",
                "Content-Length: {}\r\nX: y\r\n\r\n",
                "Content-Length: {}\n\r\n",
                "Content-Length: {}\r\n\r\r",
                "Content-Length: {}x\r\n\r\n",
            ] {
                blocks.push(std::format!("{}{{}}", form.replace("{}", digits)).into_bytes());
            }
        }
        for block in &blocks {
            for cut in 0..=block.len() {
                for limit in [16, 20, 24, 30, 64, MAX_HEADER_LEN] {
                    let data = &block[..cut];
                    if let Some(short) = plain_header(data, limit) {
                        assert_eq!(
                            short,
                            parse_header_lines(data, limit),
                            "{:?}",
                            std::string::String::from_utf8_lossy(data)
                        );
                    }
                }
            }
        }
        // It does take the common block.
        assert_eq!(
            plain_header(b"Content-Length: 12\r\n\r\n", 64),
            Some(HeaderParse::Frame { header_len: 22, body_len: 12 })
        );
    }
}
