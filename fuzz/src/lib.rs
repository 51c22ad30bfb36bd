//! What the fuzz targets share: how an input becomes a byte stream of junk
//! and canary frames, and how it is cut into reads.
//!
//! An input is one configuration byte, then junk segments separated by
//! `0xFF` (a byte that never occurs in UTF-8, so a seed made of framed JSON
//! messages is one segment). The stream is `junk 0, canary 0, junk 1,
//! canary 1, ...`: every junk segment is followed by a canary, a
//! `session.event` for the reserved session [`CANARY_SESSION`] whose event
//! id carries its sequence number.

/// The session every canary event is for.
pub const CANARY_SESSION: &str = "canary-session";

/// Segments beyond this many are joined into the last one (bounds the work
/// per input).
pub const MAX_SEGMENTS: usize = 64;

/// One input, cut into its parts.
pub struct Input<'a> {
    /// The configuration byte (buffer size, read sizes).
    pub config: u8,
    /// The junk segments, each followed by a canary.
    pub junk: Vec<&'a [u8]>,
}

impl<'a> Input<'a> {
    /// Cuts `data` into its configuration byte and junk segments.
    pub fn parse(data: &'a [u8]) -> Input<'a> {
        let Some((&config, rest)) = data.split_first() else {
            return Input { config: 0, junk: vec![&[]] };
        };
        let mut junk: Vec<&[u8]> = rest.splitn(MAX_SEGMENTS, |&b| b == 0xFF).collect();
        if junk.is_empty() {
            junk.push(&[]);
        }
        Input { config, junk }
    }
}

/// Whether `junk` cannot form a frame header: no `Content-Length:` or
/// `Content-Type:` in any case. Junk that can may legitimately swallow the
/// canary after it (as the body of a frame it starts, for one).
pub fn cannot_form_header(junk: &[u8]) -> bool {
    ![&b"content-length:"[..], b"content-type:"]
        .iter()
        .any(|name| junk.windows(name.len()).any(|w| w.eq_ignore_ascii_case(name)))
}

/// The body of canary number `seq`; `nonce` tells the harness's canaries
/// from lookalikes the fuzzer may write.
pub fn canary_body(seq: usize, nonce: u64) -> Vec<u8> {
    format!(
        r#"{{"jsonrpc":"2.0","method":"session.event","params":{{"sessionId":"{CANARY_SESSION}","event":{{"type":"fuzz.canary","id":"{seq}-{nonce}","data":{{}}}}}}}}"#
    )
    .into_bytes()
}

/// The whole frame of canary number `seq`.
pub fn canary_frame(seq: usize, nonce: u64) -> Vec<u8> {
    let body = canary_body(seq, nonce);
    let mut frame = format!("Content-Length: {}\r\n\r\n", body.len()).into_bytes();
    frame.extend_from_slice(&body);
    frame
}

/// The sequence number of a canary event id written with `nonce`, or `None`
/// for any other id. Compares numbers, not text, so the fuzzer's comparison
/// tracing does not hand it the nonce as text to copy.
pub fn canary_seq(event_id: &str, nonce: u64) -> Option<usize> {
    let (seq, n) = event_id.split_once('-')?;
    (n.parse::<u64>().ok()? == nonce).then_some(())?;
    seq.parse().ok()
}

/// Read sizes drawn from the configuration byte: all at once when its low
/// bits are 0, else pseudo-random sizes from 1 to a bound it picks.
pub struct Reads {
    state: u32,
    max: usize,
}

impl Reads {
    /// The read sizes for `config`.
    pub fn new(config: u8) -> Reads {
        let max = match config & 0x7 {
            0 => usize::MAX,
            1 => 1,
            2 => 3,
            3 => 16,
            4 => 64,
            5 => 300,
            6 => 4096,
            _ => 65536,
        };
        Reads { state: u32::from(config).wrapping_mul(2_654_435_761) | 1, max }
    }

    /// The size of the next read.
    pub fn next_len(&mut self) -> usize {
        if self.max == usize::MAX {
            return usize::MAX;
        }
        // xorshift32
        self.state ^= self.state << 13;
        self.state ^= self.state >> 17;
        self.state ^= self.state << 5;
        1 + self.state as usize % self.max
    }
}
