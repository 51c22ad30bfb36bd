//! The outgoing side of one WebSocket: the frames a connection's threads
//! have to send, queued for the one thread that writes the socket
//! ([`write_out`]).
//!
//! No lock is held across a write: the queue's lock is taken only to put a
//! frame in or take one out. A page that stops reading blocks the writing
//! thread alone, until the socket's write timeout ends the connection; the
//! reader's keepalive and its close never wait behind that write. The CLI's
//! output waits for room in a short queue (a slow page slows its CLI, and a
//! connection holds at most [`QUEUED`] messages besides the socket's own
//! buffer); a ping or a pong goes ahead of it.

use std::collections::VecDeque;
use std::io::{self, Write};
use std::sync::{Condvar, Mutex, MutexGuard};

use tungstenite::protocol::frame::coding::{Data, OpCode};
use tungstenite::protocol::frame::Frame;
use tungstenite::protocol::CloseFrame;
use tungstenite::Bytes;

/// Messages of output queued at most, besides the one being written.
const QUEUED: usize = 4;

/// The connection is closing or has ended: the output was not taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Ended;

/// The frames waiting for a WebSocket's writer.
pub(crate) struct Outbox {
    queue: Mutex<Queue>,
    /// Signalled when there is something for the writer, or at the end.
    ready: Condvar,
    /// Signalled when output leaves the queue, or at a close or the end.
    room: Condvar,
}

#[derive(Default)]
struct Queue {
    /// Output, and the close frame after it.
    frames: VecDeque<Outgoing>,
    /// A ping to send before the output.
    ping: bool,
    /// A pong to send before the output (the latest ping's).
    pong: Option<Bytes>,
    /// A close frame is queued: no more output is taken.
    closing: bool,
    /// Nothing more is written.
    ended: bool,
}

enum Outgoing {
    Output(Bytes),
    Ping,
    Pong(Bytes),
    Close(Option<CloseFrame>),
}

impl Outgoing {
    fn frame(self) -> Frame {
        match self {
            Outgoing::Output(b) => Frame::message(b, OpCode::Data(Data::Binary), true),
            Outgoing::Ping => Frame::ping(Bytes::new()),
            Outgoing::Pong(p) => Frame::pong(p),
            Outgoing::Close(c) => Frame::close(c),
        }
    }
}

impl Outbox {
    pub(crate) fn new() -> Outbox {
        Outbox { queue: Mutex::new(Queue::default()), ready: Condvar::new(), room: Condvar::new() }
    }

    fn lock(&self) -> MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Runs `f` on the queue, then wakes the writer and whoever waits for
    /// room (what `f` changed may concern both).
    fn with<R>(&self, f: impl FnOnce(&mut Queue) -> R) -> R {
        let r = f(&mut self.lock());
        self.ready.notify_one();
        self.room.notify_all();
        r
    }

    /// Queues output of the CLI after what is queued; waits while
    /// [`QUEUED`] messages wait already (never for a write itself).
    pub(crate) fn send(&self, output: Vec<u8>) -> Result<(), Ended> {
        let queue = self.lock();
        let mut queue = self
            .room
            .wait_while(queue, |q| !q.closing && !q.ended && q.frames.len() >= QUEUED)
            .unwrap_or_else(|p| p.into_inner());
        if queue.closing || queue.ended {
            return Err(Ended);
        }
        queue.frames.push_back(Outgoing::Output(output.into()));
        drop(queue);
        self.ready.notify_one();
        Ok(())
    }

    /// Queues a ping, ahead of the output. Never waits.
    pub(crate) fn ping(&self) {
        self.with(|q| q.ping = true);
    }

    /// Queues the answer to the page's ping, ahead of the output. Never
    /// waits.
    pub(crate) fn pong(&self, payload: Bytes) {
        self.with(|q| q.pong = Some(payload));
    }

    /// The output is complete: queues the close frame after it (the
    /// writer stops once it is written). Never waits.
    pub(crate) fn finish(&self, frame: Option<CloseFrame>) {
        self.with(|q| {
            if !q.closing {
                q.closing = true;
                q.frames.push_back(Outgoing::Close(frame));
            }
        });
    }

    /// Closes now: the output still queued is dropped (a write under way
    /// ends first), and the close frame goes next (or the one queued
    /// already). Never waits.
    pub(crate) fn close(&self, frame: Option<CloseFrame>) {
        self.with(|q| {
            q.frames.retain(|f| matches!(f, Outgoing::Close(_)));
            if !q.closing {
                q.closing = true;
                q.frames.push_back(Outgoing::Close(frame));
            }
        });
    }

    /// Ends the connection: nothing more is written (what is queued is
    /// dropped) and whoever waits on the outbox goes on. Never waits.
    pub(crate) fn end(&self) {
        self.with(|q| q.ended = true);
    }

    /// Whether the writer has stopped or been told to.
    pub(crate) fn is_ended(&self) -> bool {
        self.lock().ended
    }

    /// The writer's next frame: a pong, then a ping, then the output and
    /// the close frame in order; waits for one. `None` once ended.
    fn next(&self) -> Option<Outgoing> {
        let queue = self.lock();
        let mut queue = self
            .ready
            .wait_while(queue, |q| !q.ended && !q.ping && q.pong.is_none() && q.frames.is_empty())
            .unwrap_or_else(|p| p.into_inner());
        if queue.ended {
            return None;
        }
        let next = match queue.pong.take() {
            Some(p) => Outgoing::Pong(p),
            None if std::mem::take(&mut queue.ping) => Outgoing::Ping,
            None => queue.frames.pop_front()?,
        };
        drop(queue);
        self.room.notify_one();
        Some(next)
    }
}

/// The writing thread's work: writes the frames of `outbox` to `socket`,
/// each whole, until the outbox ends, a close frame is written, or a write
/// fails (on a socket with a write timeout, a page that stopped reading:
/// `WouldBlock` or `TimedOut`). The outbox is ended when it returns; an
/// error after the outbox was ended (the socket shut under the write) is
/// none.
pub(crate) fn write_out(outbox: &Outbox, mut socket: impl Write) -> io::Result<()> {
    let mut bytes = Vec::new();
    let result = loop {
        let Some(next) = outbox.next() else { break Ok(()) };
        let last = matches!(next, Outgoing::Close(_));
        bytes.clear();
        if let Err(e) = next.frame().format(&mut bytes) {
            break Err(io::Error::other(e));
        }
        if let Err(e) = socket.write_all(&bytes).and_then(|()| socket.flush()) {
            break if outbox.is_ended() { Ok(()) } else { Err(e) };
        }
        if last {
            break Ok(());
        }
    };
    outbox.end();
    result
}

#[cfg(test)]
mod tests {
    use std::sync::{mpsc, Arc};
    use std::thread::{self, JoinHandle};
    use std::time::Duration;

    use tungstenite::protocol::frame::coding::CloseCode;

    use super::*;

    /// How long a test waits for what it expects before it fails: only a
    /// writer that never goes on reaches it.
    const BOUND: Duration = Duration::from_secs(60);

    const BINARY: u8 = 0x2;
    const CLOSE: u8 = 0x8;
    const PING: u8 = 0x9;
    const PONG: u8 = 0xa;

    /// A page's socket as the writer sees it: each write is told to the
    /// test, then held until the test lets it through or fails it (as a
    /// write timeout does).
    struct Socket {
        written: mpsc::Sender<Vec<u8>>,
        verdicts: mpsc::Receiver<io::Result<()>>,
    }

    impl Write for Socket {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.written.send(buf.to_vec()).unwrap();
            match self.verdicts.recv() {
                Ok(Ok(())) => Ok(buf.len()),
                Ok(Err(e)) => Err(e),
                Err(_) => Err(io::ErrorKind::BrokenPipe.into()),
            }
        }

        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    /// The test's end of the socket.
    struct Page {
        written: mpsc::Receiver<Vec<u8>>,
        verdicts: mpsc::Sender<io::Result<()>>,
    }

    impl Page {
        /// The frame the writer writes next (held in its write): its
        /// opcode and payload.
        fn frame(&self) -> (u8, Vec<u8>) {
            let bytes = self.written.recv_timeout(BOUND).expect("the writer writes");
            assert!(bytes[0] & 0x80 != 0 && bytes[1] < 126, "a whole small frame: {bytes:02x?}");
            assert_eq!(bytes.len(), 2 + usize::from(bytes[1]), "one frame per write: {bytes:02x?}");
            (bytes[0] & 0x0f, bytes[2..].to_vec())
        }

        fn pass(&self) {
            self.verdicts.send(Ok(())).unwrap();
        }

        fn fail(&self, kind: io::ErrorKind) {
            self.verdicts.send(Err(kind.into())).unwrap();
        }
    }

    fn start() -> (Arc<Outbox>, Page, JoinHandle<io::Result<()>>) {
        let outbox = Arc::new(Outbox::new());
        let (written_tx, written) = mpsc::channel();
        let (verdicts, verdicts_rx) = mpsc::channel();
        let socket = Socket { written: written_tx, verdicts: verdicts_rx };
        let writer = {
            let outbox = Arc::clone(&outbox);
            thread::spawn(move || write_out(&outbox, socket))
        };
        (outbox, Page { written, verdicts }, writer)
    }

    /// Runs `f` on a thread of its own and gives back what it returns:
    /// while the test holds a write, nothing but that write may wait for
    /// it (a wait would deadlock the test; this makes it a failure).
    fn returns<T: Send + 'static>(what: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
        let (done, finished) = mpsc::channel();
        thread::spawn(move || {
            let _ = done.send(f());
        });
        finished.recv_timeout(BOUND).unwrap_or_else(|_| panic!("{what} waited for the blocked write"))
    }

    /// `outbox.send(output)`, which must not wait for the held write.
    fn send(outbox: &Arc<Outbox>, output: &'static [u8]) -> Result<(), Ended> {
        let outbox = Arc::clone(outbox);
        returns("output with room in the queue", move || outbox.send(output.to_vec()))
    }

    fn close_frame(code: CloseCode, reason: &'static str) -> Option<CloseFrame> {
        Some(CloseFrame { code, reason: reason.into() })
    }

    #[test]
    fn a_ping_and_a_pong_go_ahead_of_the_output_while_a_write_blocks() {
        let (outbox, page, writer) = start();
        send(&outbox, b"first").unwrap();
        assert_eq!(page.frame(), (BINARY, b"first".to_vec()));
        // The writer is in its write now, and stays there.
        send(&outbox, b"second").unwrap();
        let o = Arc::clone(&outbox);
        returns("the ping", move || o.ping());
        let o = Arc::clone(&outbox);
        returns("the pong", move || o.pong(Bytes::from_static(b"hi")));
        page.pass();
        assert_eq!(page.frame(), (PONG, b"hi".to_vec()));
        page.pass();
        assert_eq!(page.frame(), (PING, Vec::new()));
        page.pass();
        assert_eq!(page.frame(), (BINARY, b"second".to_vec()));
        page.pass();
        outbox.end();
        writer.join().unwrap().unwrap();
    }

    #[test]
    fn a_close_goes_next_while_a_write_blocks_and_ends_the_writer() {
        let (outbox, page, writer) = start();
        send(&outbox, b"first").unwrap();
        assert_eq!(page.frame(), (BINARY, b"first".to_vec()));
        send(&outbox, b"dropped").unwrap();
        let o = Arc::clone(&outbox);
        returns("the close", move || o.close(close_frame(CloseCode::Normal, "bye")));
        assert_eq!(send(&outbox, b"late"), Err(Ended), "no output after the close");
        page.pass();
        assert_eq!(page.frame(), (CLOSE, b"\x03\xe8bye".to_vec()));
        page.pass();
        writer.join().unwrap().unwrap();
        assert!(outbox.is_ended(), "nothing is written after the close frame");
    }

    #[test]
    fn the_close_at_the_end_of_the_output_comes_after_it() {
        let (outbox, page, writer) = start();
        send(&outbox, b"last words").unwrap();
        let o = Arc::clone(&outbox);
        returns("the close", move || o.finish(close_frame(CloseCode::Away, "the CLI exited")));
        assert_eq!(send(&outbox, b"late"), Err(Ended));
        assert_eq!(page.frame(), (BINARY, b"last words".to_vec()));
        page.pass();
        assert_eq!(page.frame(), (CLOSE, b"\x03\xe9the CLI exited".to_vec()));
        page.pass();
        writer.join().unwrap().unwrap();
    }

    #[test]
    fn a_write_that_times_out_ends_the_connection_and_frees_the_output() {
        let (outbox, page, writer) = start();
        send(&outbox, b"first").unwrap();
        assert_eq!(page.frame(), (BINARY, b"first".to_vec()));
        for _ in 0..QUEUED {
            send(&outbox, b"queued").unwrap();
        }
        // The queue is full: this waits for room (or ends with the
        // connection, whichever the failed write below leaves it).
        let pump = {
            let outbox = Arc::clone(&outbox);
            thread::spawn(move || outbox.send(b"waiting".to_vec()))
        };
        page.fail(io::ErrorKind::WouldBlock);
        let e = writer.join().unwrap().unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::WouldBlock);
        assert!(outbox.is_ended());
        assert_eq!(pump.join().unwrap(), Err(Ended), "the CLI's output stops with the connection");
    }
}
