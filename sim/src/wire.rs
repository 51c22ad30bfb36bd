//! The simulated wire: `Content-Length` frames written and read without the
//! core's decoder (the simulated CLI must not trust the code under test to
//! read what that code wrote), and the ordered, delayed byte stream that
//! carries them one way between the two ends.

use std::collections::VecDeque;

/// `body` framed: `Content-Length: <n>\r\n\r\n<body>`.
pub fn frame(body: &str) -> Vec<u8> {
    let mut out = format!("Content-Length: {}\r\n\r\n", body.len()).into_bytes();
    out.extend_from_slice(body.as_bytes());
    out
}

/// Reads frames from bytes fed in pieces of any size: an independent
/// reader of the framing (strict: CRLF line ends, one `Content-Length`).
#[derive(Debug, Default)]
pub struct FrameReader {
    buf: Vec<u8>,
}

impl FrameReader {
    /// Adds bytes read from the wire.
    pub fn feed(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
    }

    /// Bytes of an unfinished frame held.
    pub fn buffered(&self) -> usize {
        self.buf.len()
    }

    /// The next whole frame's body; `Err` for framing the reader rejects
    /// (the buffer is then dropped: the writer broke the stream).
    pub fn next_body(&mut self) -> Option<Result<Vec<u8>, String>> {
        let end = self.buf.windows(4).position(|w| w == b"\r\n\r\n")?;
        let header = String::from_utf8_lossy(&self.buf[..end]).into_owned();
        let mut len = None;
        for line in header.split("\r\n") {
            let Some((name, value)) = line.split_once(':') else {
                self.buf.clear();
                return Some(Err(format!("header line without a colon: {line:?}")));
            };
            if name.eq_ignore_ascii_case("content-length") {
                match value.trim().parse::<usize>() {
                    Ok(n) if len.is_none() => len = Some(n),
                    _ => {
                        self.buf.clear();
                        return Some(Err(format!("bad or repeated Content-Length: {line:?}")));
                    }
                }
            }
        }
        let Some(len) = len else {
            self.buf.clear();
            return Some(Err(format!("no Content-Length in {header:?}")));
        };
        let start = end + 4;
        if self.buf.len() < start + len {
            return None;
        }
        let body = self.buf[start..start + len].to_vec();
        self.buf.drain(..start + len);
        Some(Ok(body))
    }
}

/// One direction of a connection: bytes in write order, each write
/// arriving after its latency but never before an earlier write (a stream
/// keeps its order), taken by the reader in pieces of any size. Marks
/// name the frames in it (an event's number at the offset where its frame
/// ends), so the world knows which frames got through whole and which
/// were cut off when the connection dropped.
#[derive(Debug, Default)]
pub struct Pipe {
    /// `(arrival time, bytes)`, the first possibly part taken.
    segments: VecDeque<(u64, Vec<u8>)>,
    front_taken: usize,
    last_arrival: u64,
    /// Offsets (from the stream's start) of frame ends, with their mark.
    marks: VecDeque<(u64, u64)>,
    written: u64,
    delivered: u64,
}

impl Pipe {
    /// Writes `bytes` at `now`, arriving `latency` ms later (or with the
    /// write before it, if that arrives later); `marks` are `(end offset
    /// within bytes, mark)` of the frames in it.
    pub fn write(&mut self, now: u64, latency: u64, bytes: Vec<u8>, marks: &[(usize, u64)]) {
        if bytes.is_empty() {
            return;
        }
        for (end, mark) in marks {
            self.marks.push_back((self.written + *end as u64, *mark));
        }
        self.written += bytes.len() as u64;
        let at = self.last_arrival.max(now + latency);
        self.last_arrival = at;
        self.segments.push_back((at, bytes));
    }

    /// Bytes arrived by `now` and not yet taken.
    pub fn ready(&self, now: u64) -> usize {
        let mut n = 0;
        for (i, (at, bytes)) in self.segments.iter().enumerate() {
            if *at > now {
                break;
            }
            n += bytes.len() - if i == 0 { self.front_taken } else { 0 };
        }
        n
    }

    /// Takes up to `max` of the bytes arrived by `now` (across writes: a
    /// piece may end inside a frame or join several); also the marks of
    /// the frames whose last byte it took.
    pub fn take(&mut self, now: u64, max: usize) -> (Vec<u8>, Vec<u64>) {
        let mut out = Vec::new();
        while out.len() < max {
            let Some((at, bytes)) = self.segments.front() else { break };
            if *at > now {
                break;
            }
            let rest = &bytes[self.front_taken..];
            let n = rest.len().min(max - out.len());
            out.extend_from_slice(&rest[..n]);
            self.front_taken += n;
            if self.front_taken == bytes.len() {
                self.segments.pop_front();
                self.front_taken = 0;
            }
        }
        self.delivered += out.len() as u64;
        let mut passed = Vec::new();
        while let Some((end, mark)) = self.marks.front() {
            if *end > self.delivered {
                break;
            }
            passed.push(*mark);
            self.marks.pop_front();
        }
        (out, passed)
    }

    /// When the next bytes not yet arrived arrive, if any.
    pub fn next_arrival(&self, now: u64) -> Option<u64> {
        self.segments.iter().map(|(at, _)| *at).find(|at| *at > now)
    }

    /// Whether nothing is in flight.
    pub fn is_empty(&self) -> bool {
        self.segments.is_empty()
    }

    /// The connection dropped: everything in flight is lost. Returns the
    /// marks of the frames that never got through whole.
    pub fn cut(&mut self) -> Vec<u64> {
        self.segments.clear();
        self.front_taken = 0;
        self.delivered = self.written;
        self.marks.drain(..).map(|(_, mark)| mark).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_read_back_from_any_cut() {
        let mut bytes = frame("{\"a\":1}");
        bytes.extend(frame("{}"));
        for cut in 0..bytes.len() {
            let mut r = FrameReader::default();
            let mut bodies = Vec::new();
            for piece in [&bytes[..cut], &bytes[cut..]] {
                r.feed(piece);
                while let Some(b) = r.next_body() {
                    bodies.push(String::from_utf8(b.unwrap()).unwrap());
                }
            }
            assert_eq!(bodies, ["{\"a\":1}", "{}"]);
        }
    }

    #[test]
    fn a_pipe_keeps_order_and_reports_frames_cut_off() {
        let mut p = Pipe::default();
        p.write(0, 50, b"abcd".to_vec(), &[(4, 1)]);
        p.write(10, 0, b"ef".to_vec(), &[(2, 2)]);
        assert_eq!(p.ready(20), 0, "the second write waits for the first");
        assert_eq!(p.next_arrival(20), Some(50));
        let (got, marks) = p.take(50, 5);
        assert_eq!((got, marks), (b"abcde".to_vec(), vec![1]));
        assert_eq!(p.cut(), [2]);
        assert!(p.is_empty());
    }
}
