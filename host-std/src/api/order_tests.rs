//! Wire order is API order, through the public API over a scripted CLI: an
//! event read before a call's answer has reached every callback, stream and
//! waiter registered when it arrived by the time the call returns.
//!
//! The scripted CLI sends the event and the answer in one write. The test
//! holds the event pool on the event before (its callback waits at a gate)
//! and opens the gate only once the call has returned or is seen waiting on
//! the delivery fence: a call that returns early is caught every time, not
//! by chance, and no wait depends on time.

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::sync::{mpsc, Arc, Condvar, Mutex};
use std::thread;
use std::time::Duration;

use serde_json::{json, Value};

use crate::{Client, ClientOptions, SessionConfig};

fn frame(message: &Value) -> Vec<u8> {
    let body = message.to_string();
    let mut f = format!("Content-Length: {}\r\n\r\n", body.len()).into_bytes();
    f.extend_from_slice(body.as_bytes());
    f
}

/// Reads one frame's JSON, or `None` at the end of the stream.
fn read_frame(stream: &mut UnixStream, buf: &mut Vec<u8>) -> Option<Value> {
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = std::str::from_utf8(&buf[..end]).expect("an ASCII header");
            let len: usize = head.trim_start_matches("Content-Length: ").parse().expect("a length");
            if buf.len() >= end + 4 + len {
                let body: Vec<u8> = buf.drain(..end + 4 + len).skip(end + 4).collect();
                return Some(serde_json::from_slice(&body).expect("JSON"));
            }
        }
        let mut chunk = [0; 4096];
        match stream.read(&mut chunk) {
            Ok(0) | Err(_) => return None,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
}

fn event(session: &str, id: &str, ty: &str) -> Value {
    json!({"jsonrpc": "2.0", "method": "session.event",
        "params": {"sessionId": session, "event": {"id": id, "timestamp": "t", "type": ty, "data": {}}}})
}

/// A CLI that opens sessions, and for each `method` of `tail` sends an
/// event of the session and then the answer, in one write.
fn scripted_cli(mut input: UnixStream, mut output: UnixStream, tail: &'static [&'static str]) {
    let mut buf = Vec::new();
    let mut n = 0;
    while let Some(msg) = read_frame(&mut input, &mut buf) {
        let (Some(id), Some(method)) = (msg.get("id"), msg["method"].as_str()) else { continue };
        let sid = msg["params"]["sessionId"].as_str().unwrap_or("s1").to_owned();
        let result = match method {
            "connect" => json!({"ok": true, "protocolVersion": 3, "version": "script"}),
            "session.create" => json!({"sessionId": sid}),
            _ => json!({"success": true}),
        };
        let mut out = Vec::new();
        if tail.contains(&method) {
            n += 1;
            out.extend(frame(&event(&sid, &format!("before-{n}"), "session.info")));
            out.extend(frame(&event(&sid, &format!("tail-{n}"), "session.shutdown")));
        }
        out.extend(frame(&json!({"jsonrpc": "2.0", "id": id, "result": result})));
        if output.write_all(&out).is_err() {
            return;
        }
    }
}

/// A gate a callback waits at until the test opens it.
#[derive(Default)]
struct Gate {
    open: Mutex<bool>,
    opened: Condvar,
}

impl Gate {
    fn wait(&self) {
        let mut open = self.open.lock().unwrap();
        while !*open {
            open = self.opened.wait(open).unwrap();
        }
    }

    fn open(&self) {
        *self.open.lock().unwrap() = true;
        self.opened.notify_all();
    }
}

fn client(tail: &'static [&'static str]) -> Client {
    // One stream each way, so that the client's end of writing ends the
    // CLI, whose end ends the client's reader.
    let (to_cli, cli_in) = UnixStream::pair().expect("a socket pair");
    let (cli_out, from_cli) = UnixStream::pair().expect("a socket pair");
    thread::spawn(move || scripted_cli(cli_in, cli_out, tail));
    Client::from_streams_with(from_cli, to_cli, None, &ClientOptions::default()).expect("the client starts")
}

#[test]
fn destroy_returns_after_the_events_before_its_answer_reached_the_callbacks() {
    let client = client(&["session.destroy"]);
    let session = client
        .create_session(SessionConfig { session_id: Some("s1".into()), ..SessionConfig::default() })
        .expect("created");
    let seen = Arc::new(Mutex::new(Vec::new()));
    let gate = Arc::new(Gate::default());
    let _sub = session.on({
        let (seen, gate) = (Arc::clone(&seen), Arc::clone(&gate));
        move |e| {
            if e.id == "before-1" {
                gate.wait();
            }
            seen.lock().unwrap().push(e.id.clone());
        }
    });
    let fence = client.conn.delivery_fence();
    let returned = Arc::new(AtomicBool::new(false));
    let (done_tx, done_rx) = mpsc::channel();
    let destroyer = thread::spawn({
        let (seen, returned) = (Arc::clone(&seen), Arc::clone(&returned));
        move || {
            session.destroy().expect("destroyed");
            // What the callbacks had seen when destroy returned.
            let at_return = seen.lock().unwrap().clone();
            returned.store(true, SeqCst);
            let _ = done_tx.send(());
            at_return
        }
    });
    // The gate opens once destroy returned (too early) or waits for the
    // delivery of what came before its answer.
    while !returned.load(SeqCst) && fence.waiting() == 0 {
        if done_rx.recv_timeout(Duration::from_millis(1)).is_ok() {
            break;
        }
    }
    gate.open();
    let at_return = destroyer.join().expect("the destroying thread");
    assert_eq!(at_return, ["before-1", "tail-1"], "destroy returned before the tail event was delivered");
    client.stop().expect("stopped");
}

#[test]
fn a_callback_that_calls_the_cli_is_not_held_by_its_own_delivery() {
    let client = Arc::new(client(&["session.abort"]));
    let session = Arc::new(
        client
            .create_session(SessionConfig { session_id: Some("s1".into()), ..SessionConfig::default() })
            .expect("created"),
    );
    let (tx, rx) = mpsc::channel();
    let _sub = session.on({
        let session = Arc::clone(&session);
        let tx = Mutex::new(tx);
        move |e| {
            if e.id == "before-1" {
                // Its answer follows `tail-1`, which this very delivery
                // is to hand on after this callback returns.
                // An hour's deadline: were it held by its own delivery,
                // the test would stop at the guard below.
                let _ = tx.lock().unwrap().send(session.with_timeout(Duration::from_secs(3600)).abort());
            }
        }
    });
    session.abort().expect("aborted");
    // A guard against a hang only; the call returns at its answer.
    let inner = rx.recv_timeout(Duration::from_secs(120)).expect("the callback's call returned");
    inner.expect("the callback's abort succeeded");
}
