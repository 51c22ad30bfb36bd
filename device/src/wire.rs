//! JSON text written piece by piece to a sink, and into a fixed buffer,
//! without an allocator: what the device host sends besides the engine's
//! own answers (the request bodies and a tool's result).

/// Writes `s` as a JSON string (quotes included) to `out`, escaping what
/// JSON requires (the core's escaping).
pub(crate) fn put_str(out: &mut dyn FnMut(&[u8]), s: &str) {
    copilot_core::json::emit_escaped(s, &mut |b: &[u8]| out(b));
}

/// Writes into a fixed buffer, remembering whether everything fitted.
pub(crate) struct SliceWriter<'b> {
    buf: &'b mut [u8],
    len: usize,
    overflowed: bool,
}

impl<'b> SliceWriter<'b> {
    /// An empty writer over `buf`.
    pub(crate) fn new(buf: &'b mut [u8]) -> Self {
        SliceWriter { buf, len: 0, overflowed: false }
    }

    /// Appends `bytes`, or marks the writer overflowed.
    pub(crate) fn push(&mut self, bytes: &[u8]) {
        match self.buf.get_mut(self.len..self.len + bytes.len()) {
            Some(room) if !self.overflowed => {
                room.copy_from_slice(bytes);
                self.len += bytes.len();
            }
            _ => self.overflowed = true,
        }
    }

    /// What was written, or `None` if it did not fit.
    pub(crate) fn finish(self) -> Option<&'b [u8]> {
        let SliceWriter { buf, len, overflowed } = self;
        (!overflowed).then_some(&buf[..len])
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use std::vec::Vec;

    use super::*;

    fn string(s: &str) -> Vec<u8> {
        let mut v = Vec::new();
        put_str(&mut |b: &[u8]| v.extend_from_slice(b), s);
        v
    }

    #[test]
    fn strings_are_escaped_as_json_requires() {
        assert_eq!(string("plain"), b"\"plain\"");
        assert_eq!(string("a\"b\\c\nd\u{1}é"), "\"a\\\"b\\\\c\\nd\\u0001é\"".as_bytes());
    }

    #[test]
    fn a_slice_writer_reports_overflow() {
        let mut buf = [0; 4];
        let mut w = SliceWriter::new(&mut buf);
        w.push(b"ab");
        w.push(b"cd");
        assert_eq!(w.finish(), Some(&b"abcd"[..]));
        let mut w = SliceWriter::new(&mut buf);
        w.push(b"abc");
        w.push(b"de");
        w.push(b"");
        assert_eq!(w.finish(), None);
    }
}
