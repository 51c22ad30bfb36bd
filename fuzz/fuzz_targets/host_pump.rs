//! copilot-host's reader pump, through `Client::from_streams`: a scripted
//! peer answers the handshake and a `session.create` for the canary session,
//! then sends arbitrary bytes with canary events between them, in reads of
//! any size, and closes the stream.
//!
//! Checks, besides "no panic" and "no hang" (every wait here is bounded and
//! panics when it expires): the session's event stream ends after the
//! stream closes; canaries arrive in order, at most once; and while every
//! junk segment so far cannot form a header, every canary arrives.
#![no_main]

use std::hash::{BuildHasher, Hasher};
use std::io::{self, Read, Write};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::Duration;

use copilot_fuzz::{canary_frame, canary_seq, cannot_form_header, Input, Reads, CANARY_SESSION};
use copilot_host::{Client, SessionConfig};
use libfuzzer_sys::fuzz_target;

/// Longer than any step takes even under load; expiring means a hang.
const HANG: Duration = Duration::from_secs(30);

fn nonce() -> u64 {
    static NONCE: OnceLock<u64> = OnceLock::new();
    *NONCE.get_or_init(|| std::collections::hash_map::RandomState::new().build_hasher().finish())
}

#[derive(Default)]
struct Peer {
    /// What the client wrote, until the session is created.
    written: Vec<u8>,
    /// The client has subscribed: the junk may flow.
    go: bool,
}

#[derive(Default)]
struct Shared {
    peer: Mutex<Peer>,
    changed: Condvar,
}

impl Shared {
    fn wait_until<T>(&self, what: &str, mut ready: impl FnMut(&mut Peer) -> Option<T>) -> T {
        let mut peer = self.peer.lock().unwrap();
        loop {
            if let Some(t) = ready(&mut peer) {
                return t;
            }
            let (p, timeout) = self.changed.wait_timeout(peer, HANG).unwrap();
            assert!(!timeout.timed_out(), "hang: waited {HANG:?} for {what}");
            peer = p;
        }
    }
}

/// The client's writing side: keeps requests for the peer to answer.
struct ToPeer(Arc<Shared>);

impl Write for ToPeer {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let mut peer = self.0.peer.lock().unwrap();
        // Past the create, only handler answers come: nothing to keep.
        if !peer.go {
            peer.written.extend_from_slice(buf);
        }
        drop(peer);
        self.0.changed.notify_all();
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// The first whole request in `written` with `method`, removed: its id.
fn take_request(written: &mut Vec<u8>, method: &str) -> Option<serde_json::Value> {
    let header_end = written.windows(4).position(|w| w == b"\r\n\r\n")? + 4;
    let header = std::str::from_utf8(&written[..header_end]).expect("an ASCII header");
    let len: usize = header.trim().strip_prefix("Content-Length: ").expect("a Content-Length header").parse().unwrap();
    if written.len() < header_end + len {
        return None;
    }
    let body: serde_json::Value = serde_json::from_slice(&written[header_end..header_end + len]).unwrap();
    written.drain(..header_end + len);
    assert_eq!(body["method"], method, "the client sent {body} where {method} was expected");
    Some(body["id"].clone())
}

#[derive(Clone, Copy, PartialEq)]
enum Step {
    Connect,
    Create,
    Subscribed,
    Stream,
    Closed,
}

/// The client's reading side: the scripted peer.
struct FromPeer {
    shared: Arc<Shared>,
    step: Step,
    /// What is being sent now, from `at` on.
    out: Vec<u8>,
    at: usize,
    stream: Vec<u8>,
    reads: Reads,
}

fn frame(id: serde_json::Value, result: serde_json::Value) -> Vec<u8> {
    let body = serde_json::to_vec(&serde_json::json!({ "jsonrpc": "2.0", "id": id, "result": result })).unwrap();
    let mut out = format!("Content-Length: {}\r\n\r\n", body.len()).into_bytes();
    out.extend_from_slice(&body);
    out
}

impl Read for FromPeer {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        while self.at == self.out.len() {
            let shared = Arc::clone(&self.shared);
            (self.out, self.step) = match self.step {
                Step::Connect => {
                    let id = shared.wait_until("connect", |p| take_request(&mut p.written, "connect"));
                    (frame(id, serde_json::json!({ "protocolVersion": 3 })), Step::Create)
                }
                Step::Create => {
                    let id = shared.wait_until("session.create", |p| take_request(&mut p.written, "session.create"));
                    (frame(id, serde_json::json!({ "sessionId": CANARY_SESSION })), Step::Subscribed)
                }
                Step::Subscribed => {
                    // No canary depends on the backlog kept for a late
                    // first subscriber.
                    shared.wait_until("the subscription", |p| p.go.then_some(()));
                    (std::mem::take(&mut self.stream), Step::Stream)
                }
                Step::Stream | Step::Closed => return Ok(0),
            };
            self.at = 0;
            if self.out.is_empty() {
                self.step = Step::Closed;
            }
        }
        let mut n = buf.len().min(self.out.len() - self.at);
        if self.step == Step::Stream {
            n = n.min(self.reads.next_len());
        }
        buf[..n].copy_from_slice(&self.out[self.at..self.at + n]);
        self.at += n;
        Ok(n)
    }
}

fuzz_target!(|data: &[u8]| {
    let input = Input::parse(data);
    let nonce = nonce();
    let mut stream = Vec::new();
    let mut guaranteed = 0;
    for (seq, junk) in input.junk.iter().enumerate() {
        stream.extend_from_slice(junk);
        stream.extend_from_slice(&canary_frame(seq, nonce));
        if guaranteed == seq && cannot_form_header(junk) {
            guaranteed += 1;
        }
    }
    let shared = Arc::new(Shared::default());
    let reader = FromPeer {
        shared: Arc::clone(&shared),
        step: Step::Connect,
        out: Vec::new(),
        at: 0,
        stream,
        reads: Reads::new(input.config),
    };
    let client = Client::from_streams(reader, ToPeer(Arc::clone(&shared)), None).expect("handshake");
    let config = SessionConfig { session_id: Some(CANARY_SESSION.into()), ..SessionConfig::default() };
    let session = client.create_session(config).expect("create");
    let events = session.events();
    shared.peer.lock().unwrap().go = true;
    shared.changed.notify_all();
    let mut delivered = Vec::new();
    loop {
        match events.next_timeout(HANG) {
            Ok(Some(event)) => {
                if let Some(seq) = canary_seq(&event.id, nonce) {
                    delivered.push(seq);
                }
            }
            Ok(None) => break,
            Err(e) => panic!("hang: the event stream neither ended nor delivered: {e}"),
        }
    }
    assert!(delivered.windows(2).all(|w| w[0] < w[1]), "canaries in order, once each: {delivered:?}");
    let expected: Vec<usize> = (0..guaranteed).collect();
    assert!(delivered.starts_with(&expected), "canaries 0..{guaranteed} all arrive: got {delivered:?}");
    drop(session);
    client.force_stop();
});
