//! What the engine decided to send and the host has not taken yet: whole
//! frames, in the order the engine decided them, in caller-supplied
//! storage (a [`FrameBuffer`], as for the parking storage).
//!
//! The host pulls them after each call that feeds the engine
//! ([`Engine::transmit`](crate::Engine::transmit) and
//! [`Engine::transmitted`](crate::Engine::transmitted), or
//! [`Engine::poll_transmit`](crate::Engine::poll_transmit)), as quinn-proto's
//! `poll_transmit`: one shape of output for every host.
//!
//! A frame is written whole or not at all. A storage that grows (a host
//! with an allocator: [`GrowingBuffer`](crate::GrowingBuffer)) always has
//! room. A fixed one (`[u8; N]`) may be full: the engine then never drops a
//! frame it owes, it leaves the wait open until there is room (see
//! [`Engine`](crate::Engine)'s section on a full transmit store).

use crate::encode::{frame_header, MAX_FRAME_HEADER_LEN};
use crate::frame::FrameBuffer;
use crate::json::put;

/// The frame did not fit the store: nothing of it was written.
#[derive(Debug)]
pub(crate) struct NoRoom;

/// The frames queued to send.
pub(crate) struct Transmit<X> {
    buf: X,
    /// Start of the queued bytes: what was taken before it is free again
    /// once the queue is empty.
    start: usize,
    /// End of the queued bytes.
    len: usize,
}

impl<X: FrameBuffer> Transmit<X> {
    pub(crate) fn new(buf: X) -> Self {
        Transmit { buf, start: 0, len: 0 }
    }

    /// Queues one frame made of `parts` (its body), header first, or
    /// nothing when the storage has no room for all of it.
    pub(crate) fn emit(&mut self, parts: &[&[u8]]) -> Result<(), NoRoom> {
        let mut body = 0;
        for part in parts {
            body += part.len();
        }
        let mut header = [0; MAX_FRAME_HEADER_LEN];
        let n = frame_header(body, &mut header);
        let end = self.len + n + body;
        if !self.buf.grow(end) {
            return Err(NoRoom);
        }
        let buf = self.buf.bytes_mut();
        let mut at = self.len;
        let _ = put(buf, &mut at, &header[..n]);
        for part in parts {
            let _ = put(buf, &mut at, part);
        }
        self.len = end;
        Ok(())
    }

    /// Whether `sent` found no room. Always `false` for a storage that
    /// grows without bound, known at compile time: the full-store paths
    /// that test it are left out of such an engine.
    pub(crate) fn full(sent: Result<(), NoRoom>) -> bool {
        !X::GROWS_WITHOUT_BOUND && sent.is_err()
    }

    /// The queued bytes.
    pub(crate) fn queued(&self) -> &[u8] {
        &self.buf.bytes()[self.start..self.len]
    }

    /// The first `n` queued bytes were taken (`n` beyond the queue: all).
    pub(crate) fn taken(&mut self, n: usize) {
        self.start = self.len.min(self.start.saturating_add(n));
        if self.start == self.len {
            (self.start, self.len) = (0, 0);
        }
    }

    /// The connection the frames were for is lost: keeps the queued frames
    /// whose body `keep` keeps, in order, for the next one. A frame taken
    /// in part (its start went to the lost connection) goes with it.
    pub(crate) fn retain(&mut self, mut keep: impl FnMut(&[u8]) -> bool) {
        // Since the queue was last empty, the store holds whole frames
        // from its start, those taken too: read from there.
        let (mut at, mut to) = (0, self.start);
        while at < self.len {
            let bytes = &self.buf.bytes()[at..self.len];
            // The header as `emit` writes it: `Content-Length: <n>\r\n\r\n`.
            let (mut body, mut n) = (16, 0);
            while let Some(d @ b'0'..=b'9') = bytes.get(body) {
                n = n * 10 + usize::from(d - b'0');
                body += 1;
            }
            let end = (body + 4 + n).min(bytes.len());
            if at >= self.start && keep(&bytes[(body + 4).min(end)..end]) {
                self.buf.bytes_mut().copy_within(at..at + end, to);
                to += end;
            }
            at += end;
        }
        self.len = to;
        self.taken(0);
    }

    /// Copies as many queued bytes as fit into `out` and takes them.
    pub(crate) fn pull(&mut self, out: &mut [u8]) -> Option<usize> {
        let queued = self.queued();
        let n = queued.len().min(out.len());
        if n == 0 {
            return None;
        }
        out[..n].copy_from_slice(&queued[..n]);
        self.taken(n);
        Some(n)
    }
}
