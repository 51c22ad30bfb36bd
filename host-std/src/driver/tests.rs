//! The driver over scripted byte streams: in-memory pipes that the test
//! writes the CLI's side of, split at awkward boundaries, and reads back
//! what the driver wrote. Time is the driver's manual clock.

use std::future::Future;
use std::io::{self, Read, Write};
use std::pin::Pin;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::SeqCst;
use std::sync::{mpsc, Arc, Mutex};
use std::task::{Context, Waker};
use std::thread;
use std::time::{Duration, Instant};

use copilot_core::HandlerKind;
use serde_json::{json, Value};

use super::connection::{ClientWide, Clock, Connection, Deadlines, Job, Reply, SessionSink, Waiter};
use super::Call;
use crate::error::Error;
use crate::transport::CloseCause;

/// Chunk sizes the script is cut into, in turn: headers and bodies are
/// split mid-word, and several frames share one read.
const CUTS: [usize; 7] = [1, 5, 2, 17, 3, 64, 11];

/// The CLI's side of the connection: what it writes reaches the driver's
/// reader in chunks of [`CUTS`]; dropping it is the end of the stream.
struct Peer {
    to_driver: Option<mpsc::Sender<Vec<u8>>>,
    cut: usize,
    from_driver: mpsc::Receiver<Vec<u8>>,
    written: Vec<u8>,
}

impl Peer {
    /// Sends `message` as one frame, cut into chunks.
    fn send(&mut self, message: &Value) {
        self.send_raw(&frame(message));
    }

    fn send_raw(&mut self, bytes: &[u8]) {
        let tx = self.to_driver.as_ref().expect("the stream is open");
        let mut rest = bytes;
        while !rest.is_empty() {
            let n = CUTS[self.cut % CUTS.len()].min(rest.len());
            self.cut += 1;
            tx.send(rest[..n].to_vec()).expect("the reader is running");
            rest = &rest[n..];
        }
    }

    /// Ends the stream (the CLI closed its end).
    fn close(&mut self) {
        self.to_driver = None;
    }

    /// The next frame the driver wrote, as JSON (waits for it).
    fn next(&mut self) -> Value {
        loop {
            if let Some(end) = find(&self.written, b"\r\n\r\n") {
                let head = std::str::from_utf8(&self.written[..end]).expect("an ASCII header");
                let len: usize = head
                    .strip_prefix("Content-Length: ")
                    .and_then(|l| l.parse().ok())
                    .unwrap_or_else(|| panic!("a Content-Length header: {head:?}"));
                if self.written.len() >= end + 4 + len {
                    let body: Vec<u8> = self.written.drain(..end + 4 + len).skip(end + 4).collect();
                    return serde_json::from_slice(&body).expect("a JSON body");
                }
            }
            let more = self.from_driver.recv().expect("the driver's writer is running");
            self.written.extend_from_slice(&more);
        }
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

fn frame(message: &Value) -> Vec<u8> {
    let body = message.to_string();
    let mut f = format!("Content-Length: {}\r\n\r\n", body.len()).into_bytes();
    f.extend_from_slice(body.as_bytes());
    f
}

/// The driver's reading end: a read returns what one chunk holds at most.
struct ScriptReader {
    rx: mpsc::Receiver<Vec<u8>>,
    pending: Vec<u8>,
}

impl Read for ScriptReader {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.pending.is_empty() {
            match self.rx.recv() {
                Ok(chunk) => self.pending = chunk,
                Err(mpsc::RecvError) => return Ok(0),
            }
        }
        let n = buf.len().min(self.pending.len());
        buf[..n].copy_from_slice(&self.pending[..n]);
        self.pending.drain(..n);
        Ok(n)
    }
}

/// The driver's writing end: every write reaches the peer.
struct ScriptWriter(mpsc::Sender<Vec<u8>>);

impl Write for ScriptWriter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.send(buf.to_vec()).map_err(|_| io::Error::from(io::ErrorKind::BrokenPipe))?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// What a session of the test saw, in order.
#[derive(Default)]
struct Recorder {
    id: Mutex<Option<String>>,
    log: Mutex<Vec<String>>,
    events: Mutex<Vec<Value>>,
    /// Told at each flush and close.
    seen: Mutex<Option<mpsc::Sender<()>>>,
    jobs: Mutex<Option<mpsc::Sender<Job>>>,
}

impl Recorder {
    fn new(id: Option<&str>) -> (Arc<Recorder>, mpsc::Receiver<()>, mpsc::Receiver<Job>) {
        let (seen, seen_rx) = mpsc::channel();
        let (jobs, jobs_rx) = mpsc::channel();
        let r = Recorder {
            id: Mutex::new(id.map(str::to_owned)),
            seen: Mutex::new(Some(seen)),
            jobs: Mutex::new(Some(jobs)),
            ..Recorder::default()
        };
        (Arc::new(r), seen_rx, jobs_rx)
    }

    fn log(&self) -> Vec<String> {
        self.log.lock().unwrap().clone()
    }
}

impl SessionSink for Recorder {
    fn id(&self) -> Option<String> {
        self.id.lock().unwrap().clone()
    }

    fn named(&self, id: &str) {
        *self.id.lock().unwrap() = Some(id.to_owned());
        self.log.lock().unwrap().push(format!("named {id}"));
    }

    fn push_event(&self, event: &[u8], _event_type: Option<&str>) {
        let event: Value = serde_json::from_slice(event).expect("an event object");
        self.log.lock().unwrap().push(format!("event {}", event["id"].as_str().unwrap_or("?")));
        self.events.lock().unwrap().push(event);
    }

    fn flush(&self) {
        if let Some(seen) = &*self.seen.lock().unwrap() {
            let _ = seen.send(());
        }
    }

    fn obligation(&self, job: Job) {
        if let Some(jobs) = &*self.jobs.lock().unwrap() {
            let _ = jobs.send(job);
        }
    }

    fn close(&self, reason: &str) {
        self.log.lock().unwrap().push(format!("closed: {reason}"));
        if let Some(seen) = &*self.seen.lock().unwrap() {
            let _ = seen.send(());
        }
    }
}

/// A driver over scripted streams on a manual clock at 0 ms, whose
/// client-wide waits go to the returned receiver.
fn driver() -> (Arc<Connection>, Peer, Arc<AtomicU64>, mpsc::Receiver<Job>, thread::JoinHandle<()>) {
    let (to_driver, rx) = mpsc::channel();
    let (tx, from_driver) = mpsc::channel();
    let (wide_tx, wide_rx) = mpsc::channel();
    let wide_tx = Mutex::new(wide_tx);
    let client_wide: ClientWide = Arc::new(move |job| {
        let _ = wide_tx.lock().unwrap().send(job);
    });
    let now = Arc::new(AtomicU64::new(0));
    let deadlines = Deadlines {
        request: Duration::from_secs(60),
        grace: Duration::from_secs(3),
        handler: Duration::from_secs(300),
        handler_threads: 2,
        stall: Some(Duration::from_secs(30)),
        backlog_stall: Duration::from_millis(copilot_core::limits::BACKLOG_STALL_MS),
    };
    let (conn, reader) = Connection::start_on(
        Clock::manual(Arc::clone(&now)),
        "script".into(),
        Box::new(ScriptReader { rx, pending: Vec::new() }),
        Box::new(ScriptWriter(tx)),
        deadlines,
        None,
        client_wide,
    )
    .expect("the driver starts");
    let peer = Peer { to_driver: Some(to_driver), cut: 0, from_driver, written: Vec::new() };
    (conn, peer, now, wide_rx, reader)
}

/// A call whose frame is queued (it was polled once), not yet answered.
struct InFlight(Call);

impl InFlight {
    /// Waits for the answer as the blocking API does.
    fn wait(self) -> Reply {
        crate::wait::block_on(self.0)
    }
}

/// Queues `call`'s frame (its first poll) and checks it is not answered yet.
fn sent(mut call: Call) -> InFlight {
    let mut cx = Context::from_waker(Waker::noop());
    assert!(Pin::new(&mut call).poll(&mut cx).is_pending(), "answered before it was sent");
    InFlight(call)
}

/// Sends `method`; the engine's deadline is `deadline`.
fn call(conn: &Arc<Connection>, method: &str, params: &Value, deadline: Instant) -> InFlight {
    sent(conn.request(method, params, deadline).expect("sent"))
}

fn later() -> Instant {
    Instant::now() + Duration::from_secs(3600)
}

fn event(session: &str, id: &str, ty: &str, data: Value) -> Value {
    json!({"jsonrpc": "2.0", "method": "session.event",
        "params": {"sessionId": session, "event": {"id": id, "type": ty, "data": data}}})
}

#[test]
fn a_call_is_written_once_and_its_answer_returned() {
    let (conn, mut peer, _, _, _) = driver();
    let pending = call(&conn, "ping", &json!({"message": "hi"}), later());
    let sent = peer.next();
    assert_eq!(sent["method"], "ping");
    assert_eq!(sent["params"], json!({"message": "hi"}));
    // Garbage before a header is skipped; the answer still arrives.
    peer.send_raw(b"noise\r\n");
    peer.send(&json!({"jsonrpc": "2.0", "id": sent["id"], "result": {"message": "pong: hi"}}));
    let body = pending.wait().expect("answered");
    assert_eq!(serde_json::from_slice::<Value>(&body).unwrap(), json!({"message": "pong: hi"}));
}

#[test]
fn an_event_reaches_its_reserved_session_and_its_wait_is_answered() {
    let (conn, mut peer, _, _, _) = driver();
    let (session, seen, jobs) = Recorder::new(Some("s1"));
    conn.reserve(Some("s1"), false, session.clone()).expect("reserved");
    peer.send(&event("other", "e0", "assistant.message", json!({"content": "not for s1"})));
    peer.send(&event("s1", "e1", "assistant.message", json!({"content": "hi"})));
    peer.send(&event("s1", "e2", "permission.requested", json!({"requestId": "r1", "permissionRequest": {}})));
    let job = jobs.recv().expect("the wait is handed to the session");
    assert_eq!((job.kind, job.name), (HandlerKind::Permission, "permission.requested"));
    assert_eq!(serde_json::from_slice::<Value>(&job.data).unwrap()["data"]["requestId"], "r1");
    while session.events.lock().unwrap().len() < 2 {
        seen.recv().expect("flushed");
    }
    assert_eq!(session.log(), ["event e1", "event e2"]);
    assert_eq!(session.events.lock().unwrap()[0]["data"]["content"], "hi");

    job.reply.answer(json!({"kind": "approve-once"}).to_string().as_bytes());
    let answer = peer.next();
    assert_eq!(answer["method"], "session.permissions.handlePendingPermissionRequest");
    assert_eq!(answer["params"], json!({"sessionId": "s1", "requestId": "r1", "result": {"kind": "approve-once"}}));
    // A second answer to the same wait is not sent: the next frame is the ping.
    job.reply.answer(json!({"kind": "reject"}).to_string().as_bytes());
    let _pending = call(&conn, "ping", &json!({}), later());
    assert_eq!(peer.next()["method"], "ping");
}

#[test]
fn an_early_event_for_a_server_assigned_id_is_parked_until_the_create_names_it() {
    let (conn, mut peer, _, _, _) = driver();
    let (session, seen, _jobs) = Recorder::new(None);
    let handle = conn.reserve(None, false, session.clone()).expect("reserved");
    let target = session.clone();
    let open = conn.request_with("session.create", &json!({}), |reply| Waiter::Open { handle, target, reply }, later());
    let open = sent(open.expect("sent"));
    let create = peer.next();
    assert_eq!(create["method"], "session.create");
    // The CLI's events run ahead of its answer, as the real one's do.
    peer.send(&event("srv-1", "e1", "session.start", json!({})));
    peer.send(&event("srv-1", "e2", "session.info", json!({})));
    peer.send(&json!({"jsonrpc": "2.0", "id": create["id"], "result": {"sessionId": "srv-1"}}));
    open.wait().expect("opened");
    while session.events.lock().unwrap().len() < 2 {
        seen.recv().expect("flushed");
    }
    assert_eq!(session.log(), ["named srv-1", "event e1", "event e2"]);
    assert_eq!((conn.stats().unknown_session, conn.stats().parked), (0, 2));
}

#[test]
fn a_client_wide_request_is_handed_up_and_its_answer_written() {
    let (_conn, mut peer, _, wide, _) = driver();
    peer.send(&json!({"jsonrpc": "2.0", "id": 41, "method": "sessionFs.exists", "params": {"path": "/x"}}));
    let job = wide.recv().expect("handed to the client-wide answerer");
    assert_eq!((job.kind, job.name), (HandlerKind::SessionFs, "sessionFs.exists"));
    assert_eq!(serde_json::from_slice::<Value>(&job.data).unwrap(), json!({"path": "/x"}));
    job.reply.answer(json!({"exists": true}).to_string().as_bytes());
    assert_eq!(peer.next(), json!({"jsonrpc": "2.0", "id": 41, "result": {"exists": true}}));
}

#[test]
fn the_end_of_the_stream_ends_every_pending_call_and_session_with_its_cause() {
    let (conn, mut peer, _, _, reader) = driver();
    let (session, seen, _jobs) = Recorder::new(Some("s1"));
    conn.reserve(Some("s1"), false, session.clone()).expect("reserved");
    let first = call(&conn, "ping", &json!({}), later());
    let second = call(&conn, "status.get", &json!({}), later());
    assert_eq!(peer.next()["method"], "ping");
    assert_eq!(peer.next()["method"], "status.get");
    // Half a frame, then the end.
    peer.send_raw(b"Content-Length: 40\r\n\r\n{\"jsonrpc\"");
    peer.close();
    reader.join().expect("the reader ends");
    for pending in [first, second] {
        match pending.wait() {
            Err(Error::Disconnected(why)) => assert_eq!(why, CloseCause::PeerClosed.to_string()),
            other => panic!("expected Disconnected, got {other:?}"),
        }
    }
    assert_eq!(conn.close_cause(), Some(CloseCause::PeerClosed));
    assert!(conn.is_closed());
    seen.recv().expect("the session was told");
    assert_eq!(session.log(), [format!("closed: {}", CloseCause::PeerClosed)]);
    // A call after the end fails at once, with the cause.
    match conn.request("ping", &json!({}), later()) {
        Err(Error::Disconnected(why)) => assert_eq!(why, CloseCause::PeerClosed.to_string()),
        Err(e) => panic!("expected Disconnected, got {e:?}"),
        Ok(_) => panic!("expected Disconnected, got a call in flight"),
    }
}

#[test]
fn deadlines_expire_on_the_drivers_clock() {
    let (conn, mut peer, now, _, _) = driver();
    let (session, _seen, jobs) = Recorder::new(Some("s1"));
    conn.reserve(Some("s1"), false, session).expect("reserved");
    let pending = call(&conn, "ping", &json!({}), Instant::now() + Duration::from_secs(5));
    assert_eq!(peer.next()["method"], "ping");
    peer.send(&event("s1", "e1", "permission.requested", json!({"requestId": "r1", "permissionRequest": {}})));
    let job = jobs.recv().expect("handed to the session");

    // Past the call's deadline (5 s), short of the handler's (300 s).
    now.store(10_000, SeqCst);
    let _ = conn.on_timer();
    match pending.wait() {
        Err(Error::Timeout { what, .. }) => assert_eq!(what, "`ping`"),
        other => panic!("expected Timeout, got {other:?}"),
    }
    // The wait of the agent is still open: its deadline is its own.
    assert_eq!(conn.engine_stats().open_obligations, 1);

    // Past the handler's deadline: the engine's refusal goes, once.
    now.store(301_000, SeqCst);
    let _ = conn.on_timer();
    let refusal = peer.next();
    assert_eq!(refusal["method"], "session.permissions.handlePendingPermissionRequest");
    assert_eq!(refusal["params"]["requestId"], "r1");
    assert_ne!(refusal["params"]["result"]["kind"], "approve-once");
    assert_eq!(conn.engine_stats().open_obligations, 0);
    // The handler's late answer is not sent: the next frame is the ping.
    job.reply.answer(json!({"kind": "approve-once"}).to_string().as_bytes());
    let _next = call(&conn, "ping", &json!({}), later());
    assert_eq!(peer.next()["method"], "ping");
}

#[test]
fn a_turn_silent_for_the_stall_interval_is_reconciled_and_its_lost_wait_answered() {
    let (conn, mut peer, now, _, _) = driver();
    let (session, seen, jobs) = Recorder::new(Some("s1"));
    let handle = conn.reserve(Some("s1"), false, session.clone()).expect("reserved");
    let target = session.clone();
    let open = conn.request_with("session.create", &json!({}), |reply| Waiter::Open { handle, target, reply }, later());
    let open = sent(open.expect("sent"));
    let create = peer.next();
    peer.send(&json!({"jsonrpc": "2.0", "id": create["id"], "result": {"sessionId": "s1"}}));
    open.wait().expect("opened");
    // A turn starts at 0 ms; then nothing (its tool call's event was lost).
    peer.send(&event("s1", "e1", "assistant.turn_start", json!({})));
    while session.events.lock().unwrap().is_empty() {
        seen.recv().expect("flushed");
    }
    now.store(30_000, SeqCst);
    let _ = conn.on_timer();
    // Written after what the timer decided: a ping shows nothing came before.
    let _ping = call(&conn, "ping", &json!({}), later());
    let tools = peer.next();
    assert_eq!(tools["method"], "session.tools.listPendingRequests");
    assert_eq!(peer.next()["method"], "session.permissions.pendingRequests");
    assert_eq!(peer.next()["method"], "ping");
    assert_eq!(tools["params"], json!({"sessionId": "s1"}));
    let item = json!({"requestId": "r-lost", "toolCallId": "c1", "toolName": "t", "arguments": {"x": 1}});
    peer.send(&json!({"jsonrpc": "2.0", "id": tools["id"], "result": {"items": [item]}}));
    let job = jobs.recv().expect("the lost wait is handed to the session");
    assert_eq!((job.kind, job.name), (HandlerKind::Tool, "external_tool.requested"));
    let data: Value = serde_json::from_slice(&job.data).unwrap();
    assert_eq!(data["data"]["requestId"], "r-lost");
    assert_eq!(data["data"]["sessionId"], "s1");
    job.reply.answer(json!({"textResultForLlm": "ok"}).to_string().as_bytes());
    let answer = peer.next();
    assert_eq!(answer["method"], "session.tools.handlePendingToolCall");
    assert_eq!(answer["params"]["requestId"], "r-lost");
    assert_eq!(session.log(), ["event e1"], "the lost wait is not delivered as an event");
    assert_eq!(conn.engine_stats().stalls, 1);
}
