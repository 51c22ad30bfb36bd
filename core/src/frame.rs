//! `Content-Length` framing, as in the Language Server Protocol.
//!
//! A frame is a header block of `Name: value` lines, each ended by CRLF, an
//! empty line, then exactly `Content-Length` bytes of body:
//!
//! ```text
//! Content-Length: 17\r\n
//! Content-Type: application/vscode-jsonrpc; charset=utf-8\r\n
//! \r\n
//! {"jsonrpc":"2.0"}
//! ```
//!
//! Header names are case-insensitive; `Content-Type` and unknown headers are
//! accepted and ignored. Line ends must be CRLF. After any error the decoder
//! resynchronises on the next `Content-Length:` or `Content-Type:` header, so
//! a valid frame after bad bytes is still decoded; one run of bad bytes
//! between two good frames is reported as one error. Such a header found
//! inside a line (`Warning: disk low` glued to `Content-Length: 2`, with no
//! line feed between them) starts a frame there: the bytes before it are the
//! bad bytes, so they cannot carry the frame away with them. A frame larger
//! than the buffer is reported once and its body skipped without being
//! stored.

use crate::header::{find_header_start, parse_header, HeaderParse};
pub use crate::header::{FrameError, MAX_HEADER_LEN};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// At the start of a header block.
    Header,
    /// Waiting for `len` body bytes at the start of the buffered data.
    Body { len: usize },
    /// Discarding the body of an oversize frame.
    Skip { remaining: usize },
    /// Looking for the next header after an error.
    Resync,
}

/// Storage for a [`FrameDecoder`].
///
/// Every `AsRef<[u8]> + AsMut<[u8]>` (an array, `&mut [u8]`, a `Vec<u8>`)
/// is a buffer of fixed size. A host with an allocator can implement this
/// trait on a type of its own whose [`grow`](Self::grow) enlarges it, so
/// that the buffer starts small and grows, up to the decoder's limit, only
/// when a larger frame arrives.
pub trait FrameBuffer {
    /// The whole buffer.
    fn bytes(&self) -> &[u8];
    /// The whole buffer, writable.
    fn bytes_mut(&mut self) -> &mut [u8];
    /// Makes the buffer at least `len` bytes long, keeping its contents.
    /// Returns whether it now is. Fixed buffers cannot grow.
    fn grow(&mut self, len: usize) -> bool {
        self.bytes().len() >= len
    }

    /// Whether [`grow`](Self::grow)`(len)` would succeed. The decoder asks
    /// when a header announces a frame larger than the buffer, and grows the
    /// buffer only as the frame's bytes arrive, so a header alone never
    /// costs the memory it announces.
    fn can_grow(&self, len: usize) -> bool {
        self.bytes().len() >= len
    }

    /// Whether [`grow`](Self::grow) always succeeds (a heap buffer with no
    /// bound of its own). The engine then leaves out, at compile time, what
    /// it does when its transmit store is full, which cannot happen.
    const GROWS_WITHOUT_BOUND: bool = false;
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> FrameBuffer for T {
    fn bytes(&self) -> &[u8] {
        self.as_ref()
    }

    fn bytes_mut(&mut self) -> &mut [u8] {
        self.as_mut()
    }
}

/// A heap buffer for hosts with an allocator (feature `alloc`): it starts at
/// `initial` bytes and grows, doubling, only as the bytes of a larger frame
/// arrive (up to the decoder's [limit](FrameDecoder::with_limit)). Memory
/// taken by an allocation is never read before it is written.
#[cfg(feature = "alloc")]
pub struct GrowingBuffer(alloc::vec::Vec<u8>);

#[cfg(feature = "alloc")]
impl GrowingBuffer {
    /// A buffer of `initial` bytes.
    pub fn new(initial: usize) -> Self {
        GrowingBuffer(alloc::vec![0; initial])
    }
}

#[cfg(feature = "alloc")]
impl FrameBuffer for GrowingBuffer {
    fn bytes(&self) -> &[u8] {
        &self.0
    }

    fn bytes_mut(&mut self) -> &mut [u8] {
        &mut self.0
    }

    fn grow(&mut self, len: usize) -> bool {
        if self.0.len() < len {
            self.0.resize(len.max(self.0.len().saturating_mul(2)), 0);
        }
        true
    }

    fn can_grow(&self, _len: usize) -> bool {
        true
    }

    const GROWS_WITHOUT_BOUND: bool = true;
}

/// Decodes `Content-Length` frames from bytes fed in pieces of any size.
///
/// The caller supplies the buffer `B`: an array (`FrameDecoder::<[u8; 4096]>::new()`,
/// usable in a `static`), any heap or borrowed slice
/// ([`with_buffer`](Self::with_buffer)), or a [`FrameBuffer`] that grows up
/// to a [limit](Self::with_limit). The largest body that can be decoded is
/// the buffer's size (or the limit, for a buffer that grows). The decoder is
/// sans-IO: [`feed`](Self::feed) (or [`spare`](Self::spare) plus
/// [`commit`](Self::commit)) bytes in, then call [`poll`](Self::poll) until
/// it returns `None`.
pub struct FrameDecoder<B> {
    buf: B,
    /// The largest frame body accepted.
    limit: usize,
    /// Buffered, not yet consumed bytes are `buf[start..end]`.
    start: usize,
    end: usize,
    /// Bytes of a frame handed out by `poll`, consumed on the next call.
    lent: usize,
    state: State,
    /// An error was reported and no frame has decoded since: further errors
    /// are the same run of bad bytes and are not reported again.
    recovering: bool,
}

/// The smallest buffer a decoder accepts: room for a minimal header.
pub const MIN_FRAME_BUFFER: usize = 64;

impl<const N: usize> Default for FrameDecoder<[u8; N]> {
    fn default() -> Self {
        Self::new()
    }
}

impl<const N: usize> FrameDecoder<[u8; N]> {
    const MIN_CAPACITY: () = assert!(N >= MIN_FRAME_BUFFER, "FrameDecoder needs a buffer of at least 64 bytes");

    /// An empty decoder with an inline buffer of `N` bytes.
    pub const fn new() -> Self {
        #[allow(clippy::let_unit_value)]
        let () = Self::MIN_CAPACITY;
        FrameDecoder { buf: [0; N], limit: N, start: 0, end: 0, lent: 0, state: State::Header, recovering: false }
    }
}

impl<B: FrameBuffer> FrameDecoder<B> {
    /// An empty decoder over `buf` (for example `vec![0; 1 << 20]`). Only
    /// the bytes actually received are written, so a large zeroed heap
    /// buffer costs memory only as far as frames fill it.
    ///
    /// # Panics
    /// If `buf` is shorter than [`MIN_FRAME_BUFFER`].
    pub fn with_buffer(buf: B) -> Self {
        let limit = buf.bytes().len();
        assert!(limit >= MIN_FRAME_BUFFER, "FrameDecoder needs a buffer of at least 64 bytes");
        FrameDecoder { buf, limit, start: 0, end: 0, lent: 0, state: State::Header, recovering: false }
    }

    /// Accepts frames up to `limit` bytes, growing a [`FrameBuffer`] that
    /// can grow when one arrives (a fixed buffer still bounds what fits).
    pub fn with_limit(mut self, limit: usize) -> Self {
        self.limit = limit.max(self.capacity());
        self
    }

    /// The buffer's current size.
    pub fn capacity(&self) -> usize {
        self.buf.bytes().len()
    }

    /// The largest frame body accepted.
    pub fn limit(&self) -> usize {
        self.limit
    }

    /// Copies as much of `input` as fits and returns how many bytes were
    /// taken. Takes nothing only when the buffer is full, which cannot happen
    /// after `poll` has returned `None`; so feed, poll until `None`, and feed
    /// the rest.
    pub fn feed(&mut self, input: &[u8]) -> usize {
        self.release_lent();
        let mut taken = 0;
        // The body of an oversize frame is dropped without being buffered.
        if let State::Skip { remaining } = self.state {
            if self.start == self.end {
                let n = remaining.min(input.len());
                self.state = if n == remaining { State::Header } else { State::Skip { remaining: remaining - n } };
                taken = n;
            }
        }
        let spare = self.spare();
        let n = spare.len().min(input.len() - taken);
        spare[..n].copy_from_slice(&input[taken..taken + n]);
        self.end += n;
        taken + n
    }

    /// The free tail of the buffer, for a reader to fill directly; call
    /// [`commit`](Self::commit) with the number of bytes written. Empty only
    /// when the buffer holds an unpolled frame.
    pub fn spare(&mut self) -> &mut [u8] {
        self.release_lent();
        // Keep buffered bytes at the front. At most the start of one frame
        // moves, once; and new bytes always land low in the buffer, so a
        // large buffer is only touched as far as the largest frame reaches.
        if self.start > 0 {
            self.buf.bytes_mut().copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        // A frame larger than the buffer (accepted because the buffer can
        // grow): grow, doubling, only once the bytes received fill it, so
        // memory follows what arrived rather than what a header announced.
        if let State::Body { len } = self.state {
            let capacity = self.capacity();
            if self.end == capacity && capacity < len {
                let grown = self.buf.grow(len.min(capacity.saturating_mul(2)));
                debug_assert!(grown, "FrameBuffer::can_grow promised room for the frame");
            }
        }
        let end = self.end;
        &mut self.buf.bytes_mut()[end..]
    }

    /// Marks `n` bytes written into [`spare`](Self::spare) as received.
    pub fn commit(&mut self, n: usize) {
        assert!(self.end + n <= self.capacity(), "committed more bytes than spare() offered");
        self.end += n;
    }

    /// Number of bytes buffered and not yet decoded.
    pub fn buffered(&self) -> usize {
        self.end - self.start - self.lent
    }

    /// Whether the decoder is between frames (nothing partial buffered).
    pub fn is_idle(&self) -> bool {
        self.buffered() == 0 && self.state == State::Header
    }

    /// Call when the stream has ended: reports a frame cut short, or stray
    /// bytes not yet reported, and resets the decoder for a new stream.
    pub fn finish(&mut self) -> Result<(), FrameError> {
        self.release_lent();
        let unreported = !self.recovering && (self.start != self.end || self.state != State::Header);
        (self.start, self.end, self.state, self.recovering) = (0, 0, State::Header, false);
        if unreported {
            Err(FrameError::Truncated)
        } else {
            Ok(())
        }
    }

    fn release_lent(&mut self) {
        self.start += self.lent;
        self.lent = 0;
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
        }
    }

    /// The next complete frame body or error, or `None` when more bytes are
    /// needed. The body stays valid until the next call on the decoder.
    #[must_use = "poll until it returns None, or frames stay buffered"]
    pub fn poll(&mut self) -> Option<Result<&[u8], FrameError>> {
        self.release_lent();
        loop {
            let n = self.capacity();
            let data = &self.buf.bytes()[self.start..self.end];
            match self.state {
                State::Body { len } => {
                    if data.len() < len {
                        return None;
                    }
                    self.state = State::Header;
                    self.recovering = false;
                    self.lent = len;
                    return Some(Ok(&self.buf.bytes()[self.start..self.start + len]));
                }
                State::Skip { remaining } => {
                    let n = remaining.min(data.len());
                    self.start += n;
                    if n < remaining {
                        self.state = State::Skip { remaining: remaining - n };
                        return None;
                    }
                    self.state = State::Header;
                }
                State::Resync => match find_header_start(data) {
                    Ok(at) => {
                        self.start += at;
                        self.state = State::Header;
                    }
                    Err(keep) => {
                        self.start = self.end - keep;
                        return None;
                    }
                },
                State::Header => {
                    if data.is_empty() {
                        return None;
                    }
                    match parse_header(data, n.min(MAX_HEADER_LEN)) {
                        HeaderParse::Partial => return None,
                        HeaderParse::Frame { header_len, body_len } => {
                            self.start += header_len;
                            if body_len <= n || (body_len <= self.limit && self.buf.can_grow(body_len)) {
                                self.state = State::Body { len: body_len };
                            } else {
                                self.state = State::Skip { remaining: body_len };
                                // The header was sound: framing is in step again.
                                self.recovering = false;
                                // Over the limit: the limit; else the buffer could not grow.
                                let capacity = if body_len > self.limit { self.limit } else { self.capacity() };
                                return Some(Err(FrameError::TooLarge { length: body_len, capacity }));
                            }
                        }
                        HeaderParse::Error { error, skip } => {
                            self.start += skip;
                            self.state = State::Resync;
                            if !self.recovering {
                                self.recovering = true;
                                return Some(Err(error));
                            }
                        }
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use std::vec::Vec;

    /// Feeds `input` in one go and collects everything the decoder yields.
    fn decode<const N: usize>(input: &[u8]) -> Vec<Result<Vec<u8>, FrameError>> {
        let mut d = FrameDecoder::<[u8; N]>::new();
        let mut out = Vec::new();
        let mut rest = input;
        loop {
            let n = d.feed(rest);
            rest = &rest[n..];
            while let Some(r) = d.poll() {
                out.push(r.map(<[u8]>::to_vec));
            }
            if rest.is_empty() {
                return out;
            }
        }
    }

    fn ok(body: &str) -> Result<Vec<u8>, FrameError> {
        Ok(body.as_bytes().to_vec())
    }

    #[cfg_attr(not(target_arch = "wasm32"), test)]
    #[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
    fn decodes_plain_frames_with_any_case_and_content_type() {
        let input = b"Content-Length: 2\r\n\r\n{}content-length:3\r\nContent-Type: application/vscode-jsonrpc; charset=utf-8\r\n\r\n[1]CONTENT-TYPE: x\r\nCONTENT-LENGTH: \t4 \r\nX-Other: y\r\n\r\nnull";
        assert_eq!(decode::<256>(input), [ok("{}"), ok("[1]"), ok("null")]);
    }

    #[cfg_attr(not(target_arch = "wasm32"), test)]
    #[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
    fn finish_reports_a_cut_frame_once() {
        let mut d = FrameDecoder::<[u8; 64]>::new();
        d.feed(b"Content-Length: 5\r\n\r\nab");
        assert_eq!(d.poll(), None);
        assert_eq!(d.finish(), Err(FrameError::Truncated));
        assert!(d.is_idle());
        assert_eq!(d.finish(), Ok(()));
        d.feed(b"Content-Le");
        assert_eq!(d.poll(), None);
        assert_eq!(d.finish(), Err(FrameError::Truncated));
        // Garbage already reported is not reported again.
        d.feed(b"junk\n");
        assert_eq!(d.poll(), Some(Err(FrameError::Garbage)));
        assert_eq!(d.poll(), None);
        assert_eq!(d.finish(), Ok(()));
    }

    #[cfg_attr(not(target_arch = "wasm32"), test)]
    #[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
    fn repeated_equal_length_is_accepted() {
        assert_eq!(decode::<64>(b"Content-Length: 2\r\ncontent-length: 02\r\n\r\n{}"), [ok("{}")]);
    }

    #[cfg_attr(not(target_arch = "wasm32"), test)]
    #[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
    fn empty_body_is_a_frame() {
        assert_eq!(decode::<64>(b"Content-Length: 0\r\n\r\n"), [ok("")]);
    }

    #[cfg_attr(not(target_arch = "wasm32"), test)]
    #[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
    fn reports_each_header_error_once_and_recovers() {
        let good = "Content-Length: 2\r\n\r\n{}";
        let cases: &[(&str, FrameError)] = &[
            ("Hello, world\n", FrameError::Garbage),
            ("\r\nxyz", FrameError::Garbage),
            ("Content-Length: 2\n\n{}", FrameError::InvalidHeader),
            ("Content-Length: 2\r\r\n", FrameError::InvalidHeader),
            ("Content-Length 2\r\n\r\n", FrameError::Garbage),
            ("Content-Type: x\r\nbad line\r\n\r\n", FrameError::InvalidHeader),
            ("Content-Type: x\r\n\r\n{}", FrameError::MissingLength),
            ("Content-Length: abc\r\n\r\n", FrameError::InvalidLength),
            ("Content-Length: \r\n\r\n", FrameError::InvalidLength),
            ("Content-Length: 99999999999999999999999\r\n\r\n", FrameError::InvalidLength),
            ("Content-Length: 2\r\nContent-Length: 3\r\n\r\n{}", FrameError::InvalidLength),
            ("Content-Length: 3\r\nContent-Type: x\r\nContent-Length: 2\r\n\r\n{}", FrameError::InvalidLength),
            ("Content-Length: -1\r\n\r\n", FrameError::InvalidLength),
        ];
        for (bad, error) in cases {
            let input = std::format!("{bad}{good}");
            assert_eq!(decode::<64>(input.as_bytes()), [Err(*error), ok("{}")], "{bad:?}");
        }
    }

    #[cfg_attr(not(target_arch = "wasm32"), test)]
    #[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
    fn junk_glued_before_a_header_costs_only_the_junk() {
        let good = "Content-Length: 2\r\n\r\n{}";
        let cases: &[(&str, FrameError)] = &[
            ("zz", FrameError::Garbage),
            ("a:", FrameError::Garbage),
            ("Warning: disk low", FrameError::Garbage),
            ("Content-Lengt", FrameError::Garbage),
            ("Content-Type: x", FrameError::Garbage),
            ("X-Note: 1\r\nzz", FrameError::InvalidHeader),
            ("X-Note: 1\r\nb: c", FrameError::InvalidHeader),
        ];
        for (junk, error) in cases {
            for second in [good, "content-type: y\r\ncontent-length:2\r\n\r\n{}"] {
                // At the start of the stream, and after a frame.
                let input = std::format!("{junk}{second}");
                assert_eq!(decode::<64>(input.as_bytes()), [Err(*error), ok("{}")], "{input:?}");
                let input = std::format!("{good}{junk}{second}");
                assert_eq!(decode::<64>(input.as_bytes()), [ok("{}"), Err(*error), ok("{}")], "{input:?}");
                // Byte by byte.
                let mut d = FrameDecoder::<[u8; 64]>::new();
                let mut out = Vec::new();
                for b in input.as_bytes() {
                    assert_eq!(d.feed(core::slice::from_ref(b)), 1);
                    while let Some(r) = d.poll() {
                        out.push(r.map(<[u8]>::to_vec));
                    }
                }
                assert_eq!(out, [ok("{}"), Err(*error), ok("{}")], "{input:?} byte by byte");
            }
        }
        // Junk after an error is the same run: still one report.
        assert_eq!(
            decode::<64>(b"\r\nzzWarning: lowContent-Length: 2\r\n\r\n{}"),
            [Err(FrameError::Garbage), ok("{}")]
        );
        // A header name inside a value marks what precedes it as junk, even
        // in a block that would be complete without it.
        assert_eq!(decode::<64>(b"X-Note: content-length: 2\r\n\r\n{}"), [Err(FrameError::Garbage), ok("{}")]);
    }

    #[cfg_attr(not(target_arch = "wasm32"), test)]
    #[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
    fn header_too_long_is_reported_and_skipped() {
        let mut input = Vec::from(&b"X-Pad: "[..]);
        input.resize(2000, b'a');
        input.extend_from_slice(b"\r\nContent-Length: 1\r\n\r\n1");
        assert_eq!(decode::<4096>(&input), [Err(FrameError::HeaderTooLong), ok("1")]);
        // A small buffer lowers the limit to its own size.
        let mut input = Vec::from(&b"X-Pad: "[..]);
        input.resize(100, b'a');
        input.extend_from_slice(b"\r\nContent-Length: 1\r\n\r\n1");
        assert_eq!(decode::<64>(&input), [Err(FrameError::HeaderTooLong), ok("1")]);
    }

    #[cfg_attr(not(target_arch = "wasm32"), test)]
    #[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
    fn oversize_frame_is_reported_once_and_skipped() {
        let mut input = Vec::from(&b"Content-Length: 1000\r\n\r\n"[..]);
        // The skipped body even contains something that looks like a header.
        input.extend(core::iter::repeat_n(b'x', 500));
        let lookalike = b"Content-Length: 1\r\n\r\n1";
        input.extend_from_slice(lookalike);
        input.extend(core::iter::repeat_n(b'y', 1000 - 500 - lookalike.len()));
        input.extend_from_slice(b"Content-Length: 2\r\n\r\n{}");
        assert_eq!(decode::<128>(&input), [Err(FrameError::TooLarge { length: 1000, capacity: 128 }), ok("{}")]);
    }

    #[cfg_attr(not(target_arch = "wasm32"), test)]
    #[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
    fn frame_exactly_the_buffer_size_decodes() {
        let body = [b'7'; 64];
        let mut input = Vec::from(&b"Content-Length: 64\r\n\r\n"[..]);
        input.extend_from_slice(&body);
        let frames = decode::<64>(&input);
        assert_eq!(frames, [Ok(body.to_vec())]);
    }

    #[cfg_attr(not(target_arch = "wasm32"), test)]
    #[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
    fn resync_finds_a_header_split_across_feeds() {
        let mut d = FrameDecoder::<[u8; 64]>::new();
        assert_eq!(d.feed(b"garbage Conte"), 13);
        assert_eq!(d.poll(), Some(Err(FrameError::Garbage)));
        assert_eq!(d.poll(), None);
        d.feed(b"nt-Length: 2\r\n\r\n{}");
        assert_eq!(d.poll(), Some(Ok(&b"{}"[..])));
        assert_eq!(d.poll(), None);
        assert!(d.is_idle());
    }

    #[cfg_attr(not(target_arch = "wasm32"), test)]
    #[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
    fn spare_and_commit_fill_the_buffer_directly() {
        let mut d = FrameDecoder::<[u8; 64]>::new();
        let input = b"Content-Length: 5\r\n\r\nhelloContent-Length: 5\r\n\r\nworld";
        let mut fed = 0;
        let mut out = Vec::new();
        while fed < input.len() {
            let spare = d.spare();
            let n = spare.len().min(7).min(input.len() - fed);
            spare[..n].copy_from_slice(&input[fed..fed + n]);
            d.commit(n);
            fed += n;
            while let Some(f) = d.poll() {
                out.push(f.unwrap().to_vec());
            }
        }
        assert_eq!(out, [b"hello".to_vec(), b"world".to_vec()]);
    }

    #[cfg_attr(not(target_arch = "wasm32"), test)]
    #[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
    fn a_large_buffer_is_only_written_as_far_as_frames_reach() {
        let mut big = std::vec![0u8; 1 << 20];
        let d = FrameDecoder::with_buffer(&mut big[..]);
        assert_eq!(d.capacity(), 1 << 20);
        let frame = b"Content-Length: 100\r\n\r\n";
        let mut input = Vec::new();
        for _ in 0..1000 {
            input.extend_from_slice(frame);
            input.extend_from_slice(&[b'z'; 100]);
        }
        // Read in pieces of 1000 bytes, as a reader capped at that would.
        let mut frames = 0;
        {
            let mut d = d;
            for piece in input.chunks(1000) {
                let spare = d.spare();
                spare[..piece.len()].copy_from_slice(piece);
                d.commit(piece.len());
                while let Some(f) = d.poll() {
                    assert_eq!(f.unwrap().len(), 100);
                    frames += 1;
                }
            }
        }
        assert_eq!(frames, 1000);
        let touched = big.iter().rposition(|&b| b != 0).unwrap() + 1;
        assert!(touched < 2000, "wrote up to byte {touched} of a 1 MiB buffer for 124-byte frames");
    }

    #[cfg(feature = "alloc")]
    #[cfg_attr(not(target_arch = "wasm32"), test)]
    #[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
    fn a_growing_buffer_grows_only_when_a_larger_frame_arrives() {
        let mut d = FrameDecoder::with_buffer(GrowingBuffer::new(64)).with_limit(10_000);
        assert_eq!((d.capacity(), d.limit()), (64, 10_000));
        let mut input = Vec::new();
        for len in [10, 5000, 20, 20_000, 7] {
            input.extend_from_slice(std::format!("Content-Length: {len}\r\n\r\n").as_bytes());
            input.extend(core::iter::repeat_n(b'g', len));
        }
        let mut out = Vec::new();
        for piece in input.chunks(100) {
            let mut rest = piece;
            while !rest.is_empty() {
                rest = &rest[d.feed(rest)..];
                while let Some(f) = d.poll() {
                    out.push(f.map(<[u8]>::len));
                }
            }
        }
        let too_large = FrameError::TooLarge { length: 20_000, capacity: 10_000 };
        assert_eq!(out, [Ok(10), Ok(5000), Ok(20), Err(too_large), Ok(7)]);
        assert!(d.capacity() >= 5000 && d.capacity() <= 10_000, "grew for the 5000-byte frame only: {}", d.capacity());
        // A fixed buffer does not grow, whatever the limit says.
        let mut fixed = FrameDecoder::<[u8; 64]>::new().with_limit(10_000);
        fixed.feed(b"Content-Length: 100\r\n\r\n");
        assert_eq!(fixed.poll(), Some(Err(FrameError::TooLarge { length: 100, capacity: 64 })));
    }

    #[cfg(feature = "alloc")]
    #[cfg_attr(not(target_arch = "wasm32"), test)]
    #[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
    fn a_header_alone_does_not_grow_the_buffer_to_the_size_it_announces() {
        let mut d = FrameDecoder::with_buffer(GrowingBuffer::new(64)).with_limit(1 << 20);
        d.feed(b"Content-Length: 1000000\r\n\r\n");
        assert_eq!(d.poll(), None);
        assert_eq!(d.capacity(), 64, "grown before any body byte arrived");
        // The buffer follows the bytes received, doubling.
        let body = std::vec![b'b'; 1_000_000];
        let mut fed = 0;
        while fed < 10_000 {
            fed += d.feed(&body[fed..10_000]);
            assert_eq!(d.poll(), None);
        }
        assert!(d.capacity() <= 2 * 10_000, "{} bytes of buffer for 10,000 received", d.capacity());
        while fed < body.len() {
            fed += d.feed(&body[fed..]);
            if fed < body.len() {
                assert_eq!(d.poll(), None);
            }
        }
        assert_eq!(d.poll().map(|f| f.map(<[u8]>::len)), Some(Ok(1_000_000)));
        assert_eq!(d.poll(), None);
        assert!(d.is_idle());
    }

    #[cfg_attr(not(target_arch = "wasm32"), test)]
    #[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
    #[should_panic(expected = "at least 64 bytes")]
    fn tiny_buffers_are_refused() {
        let _ = FrameDecoder::with_buffer([0u8; 10]);
    }

    #[cfg_attr(not(target_arch = "wasm32"), test)]
    #[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
    fn feed_takes_nothing_only_while_a_frame_is_unpolled() {
        let mut d = FrameDecoder::<[u8; 64]>::new();
        let mut input = Vec::from(&b"Content-Length: 40\r\n\r\n"[..]);
        input.extend_from_slice(&[b'a'; 40]);
        input.extend_from_slice(b"Content-Length: 1\r\n\r\n1");
        let n = d.feed(&input);
        assert_eq!(n, 64);
        assert_eq!(d.poll().unwrap().unwrap().len(), 40);
        assert_eq!(d.poll(), None);
        let m = d.feed(&input[n..]);
        assert_eq!(m, input.len() - n);
        assert_eq!(d.poll(), Some(Ok(&b"1"[..])));
    }
}
