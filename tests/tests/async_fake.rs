//! The async API over the fake CLI: 1,000 sessions driven from one thread
//! of a `current_thread` runtime, a `send_and_wait` dropped mid-turn, the
//! same calls under a minimal executor of this file's own, the async form
//! of every blocking call, per-call deadlines, calls waiting for room to
//! send (a frozen CLI) while the executor thread runs other tasks, and
//! async handlers of every kind (on the handler pool, dropped past the
//! handler deadline), and a client dropped without `stop`.

use std::future::Future;
use std::io::Read;
use std::pin::{pin, Pin};
use std::sync::{mpsc, Arc, Condvar, Mutex};
use std::task::{Context, Poll, Wake, Waker};
use std::thread::Thread;
use std::time::Duration;

use copilot_host::asynch::{self, Client, EventStream, Session};
use copilot_host::{
    ClientOptions, ElicitationResponse, Error, EventKind, ExitPlanModeResponse, OAuthToken, PermissionDecision,
    SessionConfig, UserInputResponse,
};
use copilot_tests::fake_server::{FakeServer, FakeServerConfig};
use serde_json::{json, Value};

const SESSIONS: usize = 1000;
/// A guard against a hang, not a bound that is asserted.
const WAIT: Duration = Duration::from_secs(120);
const REPLY: &str = "four, said the fake";

async fn client(config: FakeServerConfig) -> (FakeServer, Client) {
    let (server, from_server, to_server) = FakeServer::pipes(config);
    let client = Client::from_streams(from_server, to_server, None, ClientOptions::default()).await.expect("handshake");
    (server, client)
}

/// The event types of one turn of the fake with a reply text.
fn turn_types() -> Vec<String> {
    let mut types = vec!["user.message".to_owned(), "assistant.turn_start".to_owned()];
    types.extend(REPLY.split_inclusive(' ').map(|_| "assistant.message_delta".to_owned()));
    types.extend(["assistant.message", "assistant.turn_end", "session.idle"].map(String::from));
    types
}

/// The types of the events up to and including the next `session.idle`.
async fn one_turn(events: &mut EventStream) -> Vec<String> {
    let mut seen = Vec::new();
    while let Some(e) = events.next().await {
        seen.push(e.event_type().to_owned());
        if matches!(e.kind, EventKind::SessionIdle(_)) {
            break;
        }
    }
    seen
}

/// One session's life: every event of a turn reaches its stream, and
/// `send_and_wait` returns the reply.
async fn drive(session: Session, i: usize) {
    let mut events = session.events();
    let reply = session.send_and_wait(format!("prompt {i}"), WAIT).await.expect("turn").expect("a reply");
    match &reply.kind {
        EventKind::AssistantMessage(m) => assert_eq!(m.content, REPLY),
        other => panic!("not a reply: {other:?}"),
    }
    let first = events.next().await.expect("session.start");
    assert_eq!(first.event_type(), "session.start");
    assert_eq!(one_turn(&mut events).await, turn_types(), "session {i}");
    session.destroy().await.expect("destroy");
    // The destroy's `session.shutdown`, then the end.
    let last = events.next().await.expect("session.shutdown");
    assert_eq!(last.event_type(), "session.shutdown");
    if let Some(e) = events.next().await {
        panic!("the stream goes on after destroy: {e:?}");
    }
}

#[test]
fn a_thousand_sessions_on_one_current_thread_runtime_get_every_event() {
    let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
    rt.block_on(async {
        let (_server, client) = client(FakeServerConfig::default().with_reply_text(REPLY)).await;
        let client = Arc::new(client);
        let mut tasks = Vec::new();
        for i in 0..SESSIONS {
            let client = Arc::clone(&client);
            // Every create and turn is in flight at once, all on this thread.
            tasks.push(tokio::spawn(async move {
                let session = client.create_session(SessionConfig::default()).await.expect("create");
                drive(session, i).await;
            }));
        }
        for t in tasks {
            t.await.expect("a session task");
        }
        assert_eq!(client.blocking().stats().unknown_session, 0);
        Arc::try_unwrap(client).expect("one client").stop().await.expect("stop");
    });
}

#[test]
fn a_send_and_wait_dropped_mid_turn_loses_no_event_and_the_session_goes_on() {
    let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
    rt.block_on(async {
        // The turn stops after its first event until it is let go.
        let held = FakeServerConfig::default().with_reply_text(REPLY).with_hold_turns(true);
        let (server, client) = client(held).await;
        let session = client.create_session(SessionConfig::default()).await.expect("create");
        let mut events = session.events();
        assert_eq!(events.next().await.expect("start").event_type(), "session.start");
        // Poll the turn until the stream has seen it begin, then drop it.
        {
            let mut turn = pin!(session.send_and_wait("first", WAIT));
            let mut seen = Vec::new();
            // The server holds the turn after `user.message`: the turn
            // cannot end before it is dropped.
            std::future::poll_fn(|cx| {
                match std::pin::Pin::new(&mut events).poll_next_item(cx) {
                    Poll::Ready(Some(e)) => {
                        seen.push(e.event_type().to_owned());
                        return Poll::Ready(());
                    }
                    Poll::Ready(None) => panic!("the stream ended"),
                    Poll::Pending => {}
                }
                if let Poll::Ready(r) = turn.as_mut().poll(cx) {
                    panic!("the turn ended before it was seen to begin: {r:?}");
                }
                Poll::Pending
            })
            .await;
            assert_eq!(seen, ["user.message"]);
        }
        server.release_turns();
        // The rest of the first turn still reaches the stream, in order.
        assert_eq!(one_turn(&mut events).await, turn_types()[1..]);
        // The session is used again: the reply, and every event once.
        let reply = session.send_and_wait("second", WAIT).await.expect("turn").expect("a reply");
        assert!(matches!(&reply.kind, EventKind::AssistantMessage(m) if m.content == REPLY));
        assert_eq!(one_turn(&mut events).await, turn_types());
        assert!(events.try_next().is_none());
        assert_eq!(server.received().iter().filter(|m| m["method"] == "session.send").count(), 2);
        session.destroy().await.expect("destroy");
        client.stop().await.expect("stop");
    });
}

/// `Stream::poll_next` through a name of this file.
trait PollNextItem {
    fn poll_next_item(self, cx: &mut Context<'_>) -> Poll<Option<Arc<copilot_host::SessionEvent>>>;
}

impl PollNextItem for std::pin::Pin<&mut EventStream> {
    fn poll_next_item(self, cx: &mut Context<'_>) -> Poll<Option<Arc<copilot_host::SessionEvent>>> {
        futures_core::Stream::poll_next(self, cx)
    }
}

/// A minimal executor: polls one future on this thread, parking between
/// wakes.
fn block_on<F: Future>(future: F) -> F::Output {
    struct Unpark(Thread);
    impl Wake for Unpark {
        fn wake(self: Arc<Self>) {
            self.0.unpark();
        }
    }
    let waker = Waker::from(Arc::new(Unpark(std::thread::current())));
    let mut cx = Context::from_waker(&waker);
    let mut future = pin!(future);
    loop {
        if let Poll::Ready(out) = future.as_mut().poll(&mut cx) {
            return out;
        }
        std::thread::park();
    }
}

#[test]
fn the_async_api_needs_no_runtime() {
    block_on(async {
        let (_server, client) = client(FakeServerConfig::default().with_reply_text(REPLY)).await;
        let sessions = [
            client.create_session(SessionConfig::default()).await.expect("create"),
            client.create_session(SessionConfig::default()).await.expect("create"),
        ];
        for (i, s) in sessions.into_iter().enumerate() {
            drive(s, i).await;
        }
        client.stop().await.expect("stop");
    });
}

// -------------------------------------------------------------------------
// A fake CLI that can be frozen: it reads nothing while its gate is closed.

/// Closed, the fake CLI's reads wait: a CLI that stopped reading.
#[derive(Clone, Default)]
struct Gate(Arc<(Mutex<GateState>, Condvar)>);

#[derive(Default)]
struct GateState {
    closed: bool,
    /// A read waits at the closed gate.
    waiting: bool,
}

impl Gate {
    fn set_closed(&self, closed: bool) {
        self.0 .0.lock().unwrap().closed = closed;
        self.0 .1.notify_all();
    }

    fn wait_open(&self) {
        let mut state = self.0 .0.lock().unwrap();
        while state.closed {
            state.waiting = true;
            self.0 .1.notify_all();
            state = self.0 .1.wait(state).unwrap();
        }
        state.waiting = false;
    }

    /// Blocks until a read waits at the gate.
    fn wait_frozen(&self) {
        let mut state = self.0 .0.lock().unwrap();
        while !state.waiting {
            state = self.0 .1.wait(state).unwrap();
        }
    }
}

struct Gated<R> {
    gate: Gate,
    inner: R,
}

impl<R: Read> Read for Gated<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        self.gate.wait_open();
        self.inner.read(buf)
    }
}

async fn gated_client(options: ClientOptions) -> (FakeServer, Client, Gate) {
    let (client_reader, server_writer) = std::io::pipe().unwrap();
    let (server_reader, client_writer) = std::io::pipe().unwrap();
    let gate = Gate::default();
    let reader = Gated { gate: gate.clone(), inner: server_reader };
    let server = FakeServer::serve(FakeServerConfig::default(), Box::new(reader), Box::new(server_writer));
    let client = Client::from_streams(client_reader, client_writer, None, options).await.expect("handshake");
    (server, client, gate)
}

/// Freezes the fake CLI. A read already under way when the gate closes
/// returns with the ping's frame; the next one waits at the gate.
async fn freeze(client: &Client, gate: &Gate) {
    gate.set_closed(true);
    let mut ping = Box::pin(client.ping(Some("freeze")));
    // Queues its frame; it is answered, or read once the gate opens.
    let _ = poll_once(&mut ping).await;
    gate.wait_frozen();
}

/// Opens `gate` after [`WAIT`] unless told first: a thread that blocked
/// then shows as a failed assertion instead of a hang.
struct Watchdog {
    stop: mpsc::Sender<()>,
    opened_by_watchdog: std::thread::JoinHandle<bool>,
}

impl Watchdog {
    fn start(gate: &Gate) -> Watchdog {
        let (stop, stopped) = mpsc::channel();
        let gate = gate.clone();
        let opened_by_watchdog = std::thread::spawn(move || {
            let timed_out = stopped.recv_timeout(WAIT) == Err(mpsc::RecvTimeoutError::Timeout);
            gate.set_closed(false);
            timed_out
        });
        Watchdog { stop, opened_by_watchdog }
    }

    /// Whether the watchdog had to open the gate.
    fn finish(self) -> bool {
        let _ = self.stop.send(());
        self.opened_by_watchdog.join().unwrap()
    }
}

/// Polls `future` once.
async fn poll_once<F: Future + Unpin>(future: &mut F) -> Poll<F::Output> {
    std::future::poll_fn(|cx| Poll::Ready(Pin::new(&mut *future).poll(cx))).await
}

#[test]
fn calls_waiting_for_room_to_send_leave_the_executor_thread_free() {
    let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
    rt.block_on(async {
        let (server, client, gate) = gated_client(ClientOptions::default()).await;
        freeze(&client, &gate).await;
        let watchdog = Watchdog::start(&gate);
        // 40 calls of 512 KiB: more than the outbox holds (16 MiB) beside
        // the frame the writer thread is stuck on, so some wait for room.
        let params = json!({ "pad": "x".repeat(512 << 10) });
        let mut calls: Vec<_> = (0..40).map(|_| Box::pin(client.call("test.pad", &params))).collect();
        for (i, call) in calls.iter_mut().enumerate() {
            assert!(poll_once(call).await.is_pending(), "call {i} neither failed nor blocked the thread");
        }
        // A second task runs on this same thread meanwhile: it unfreezes the CLI.
        let opener = gate.clone();
        tokio::spawn(async move { opener.set_closed(false) }).await.unwrap();
        for (i, call) in calls.into_iter().enumerate() {
            match call.await {
                Err(Error::Rpc { code: -32601, .. }) => {}
                other => panic!("call {i}: expected the fake's answer (method not found), got {other:?}"),
            }
        }
        assert!(!watchdog.finish(), "the executor thread was blocked until the watchdog opened the gate");
        assert_eq!(server.received().iter().filter(|m| m["method"] == "test.pad").count(), 40);
        client.stop().await.expect("stop");
    });
}

#[test]
fn a_create_a_destroy_and_stop_awaiting_a_frozen_cli_leave_the_executor_thread_free() {
    let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
    rt.block_on(async {
        // Nothing ends by its own deadline: only the CLI's answers end the waits.
        let hour = Duration::from_secs(3600);
        let options = ClientOptions { request_timeout: hour, shutdown_grace: hour, ..ClientOptions::default() };
        let (server, client, gate) = gated_client(options).await;
        let doomed = client.create_session(SessionConfig::default()).await.expect("create");
        let doomed_id = doomed.id().to_owned();
        freeze(&client, &gate).await;
        let watchdog = Watchdog::start(&gate);
        let mut create = Box::pin(client.create_session(SessionConfig::default()));
        let mut destroy = Box::pin(doomed.destroy());
        assert!(poll_once(&mut create).await.is_pending(), "the create waits for the CLI");
        assert!(poll_once(&mut destroy).await.is_pending(), "the destroy waits for the CLI");
        // A second task runs on this same thread meanwhile: it unfreezes the CLI.
        let opener = gate.clone();
        tokio::spawn(async move { opener.set_closed(false) }).await.unwrap();
        let created = create.await.expect("the create is answered");
        destroy.await.expect("the destroy is answered");
        assert!(!watchdog.finish(), "the executor thread was blocked until the watchdog opened the gate");

        // The same for stop (it destroys the sessions still open, then waits
        // for the connection to end).
        freeze(&client, &gate).await;
        let watchdog = Watchdog::start(&gate);
        let mut stop = Box::pin(client.stop());
        assert!(poll_once(&mut stop).await.is_pending(), "stop waits for the CLI");
        let opener = gate.clone();
        tokio::spawn(async move { opener.set_closed(false) }).await.unwrap();
        stop.await.expect("stop");
        assert!(!watchdog.finish(), "the executor thread was blocked until the watchdog opened the gate");
        let destroyed: Vec<Value> = server
            .received()
            .into_iter()
            .filter(|m| m["method"] == "session.destroy")
            .map(|m| m["params"]["sessionId"].clone())
            .collect();
        assert_eq!(destroyed, [json!(doomed_id), json!(created.id())]);
    });
}

#[test]
fn an_answer_that_came_before_the_connection_ended_is_the_calls_result() {
    block_on(async {
        let (_server, client) = client(FakeServerConfig::default()).await;
        // The fake answers `runtime.shutdown`, then closes the connection.
        let params = json!({});
        let mut call = Box::pin(client.call("runtime.shutdown", &params));
        let first = poll_once(&mut call).await;
        // The reader routed the answer before it read the end of the stream.
        assert!(client.wait_closed(None).await.is_some());
        let result = match first {
            Poll::Ready(result) => result,
            Poll::Pending => call.await,
        };
        assert_eq!(result.expect("the answer, although the connection has ended since"), json!({}));
    });
}

#[test]
fn with_timeout_gives_a_call_its_own_deadline() {
    // A plain `block_on`: the deadline is kept by the client's timer thread.
    block_on(async {
        // A default deadline long enough that only the call's own can end the wait.
        let options = ClientOptions { request_timeout: Duration::from_secs(3600), ..ClientOptions::default() };
        let (_server, client, gate) = gated_client(options).await;
        let session = client.create_session(SessionConfig::default()).await.expect("create");
        freeze(&client, &gate).await;
        // If a call ignored its own deadline, the watchdog's opening lets the
        // fake answer it, and the match below fails.
        let watchdog = Watchdog::start(&gate);
        let short = Duration::from_millis(50);
        match client.with_timeout(short).ping(None).await {
            Err(Error::Timeout { what, .. }) => assert!(what.contains("ping"), "{what}"),
            other => panic!("expected Timeout, got {other:?}"),
        }
        match session.with_timeout(short).abort().await {
            Err(Error::Timeout { what, .. }) => assert!(what.contains("session.abort"), "{what}"),
            other => panic!("expected Timeout, got {other:?}"),
        }
        assert!(!watchdog.finish(), "a call waited past its own deadline");
        // The default deadline still holds for the calls given none.
        assert!(client.ping(None).await.is_ok());
        session.destroy().await.expect("destroy");
        client.stop().await.expect("stop");
    });
}

#[test]
fn every_call_of_the_blocking_api_has_its_async_form() {
    let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
    rt.block_on(async {
        let (server, client) = client(FakeServerConfig::default().with_reply_text(REPLY)).await;
        let mut lifecycle = client.lifecycle_events();
        assert_eq!(client.ping(Some("hi")).await.expect("ping").message.as_deref(), Some("pong: hi"));
        assert_eq!(client.with_timeout(WAIT).status().await.expect("status").version, "fake");
        assert!(matches!(client.auth_status().await, Err(Error::Rpc { code: -32601, .. })), "sent and answered");
        assert_eq!(client.call("status.get", &json!({})).await.expect("call")["version"], "fake");

        let session = client.create_session(SessionConfig::default()).await.expect("create");
        let created = lifecycle.next().await.expect("a lifecycle notification");
        assert_eq!((created.kind.as_str(), created.session_id.as_str()), ("session.created", session.id()));
        assert_eq!(
            session.workspace_path(),
            Some(std::path::Path::new(&format!("/tmp/fake-copilot/session-state/{}", session.id())))
        );
        let listed: Vec<String> =
            client.list_sessions().await.expect("list").into_iter().map(|s| s.session_id).collect();
        assert_eq!(listed, [session.id()]);
        assert_eq!(client.last_session_id().await.expect("last id").as_deref(), Some(session.id()));

        // `on` handlers have run on the turn's events when send_and_wait returns.
        let seen = Arc::new(Mutex::new(Vec::new()));
        let _subscription = session.on({
            let seen = Arc::clone(&seen);
            move |e| seen.lock().unwrap().push(e.event_type().to_owned())
        });
        session.send_and_wait("prompt", WAIT).await.expect("turn");
        assert_eq!(seen.lock().unwrap().last().map(String::as_str), Some("session.idle"));
        assert!(!session.send("again").await.expect("send").is_empty(), "a message id");
        session.with_timeout(WAIT).abort().await.expect("abort");
        assert!(session.messages().await.expect("messages").is_empty());
        assert_eq!(session.call_raw("session.getMessages", Value::Null).await.expect("raw")["events"], json!([]));
        match session.execute_command("deploy", "prod").await {
            Err(Error::Rpc { code: -32601, .. }) => {}
            other => panic!("expected the fake's method not found, got {other:?}"),
        }
        let command = server
            .received()
            .into_iter()
            .find(|m| m["method"] == "session.commands.execute")
            .expect("session.commands.execute was sent");
        assert_eq!(command["params"], json!({"sessionId": session.id(), "commandName": "deploy", "args": "prod"}));

        let id = session.id().to_owned();
        session.destroy_within(WAIT).await.expect("destroy");
        client.delete_session(&id).await.expect("delete");
        assert!(client.list_sessions().await.expect("list").is_empty());
        assert!(client.delete_session(&id).await.is_err(), "{{success: false}} is a failure");

        // The connection's end: wait_closed says why, the lifecycle stream ends.
        assert_eq!(client.wait_closed(Some(Duration::from_millis(10))).await, None, "still open");
        assert_eq!(client.closed(), None);
        server.close();
        assert_eq!(client.wait_closed(None).await, Some(copilot_host::CloseCause::PeerClosed));
        assert!(lifecycle.next().await.is_none(), "the lifecycle stream ends with the connection");
        assert!(client.lifecycle_events().next().await.is_none(), "a stream made after the end ends at once");
        client.force_stop().await;
    });
}

// -------------------------------------------------------------------------
// Async handlers of every kind.

/// `value`, from another thread: the first poll is always pending, and the
/// future completes only when that thread wakes it.
fn later<T: Send + 'static>(value: T) -> impl Future<Output = T> {
    let slot = Arc::new(Mutex::new((None::<T>, None::<Waker>)));
    let mut value = Some(value);
    std::future::poll_fn(move |cx| {
        let mut s = slot.lock().unwrap();
        if let Some(v) = s.0.take() {
            return Poll::Ready(v);
        }
        s.1 = Some(cx.waker().clone());
        if let Some(v) = value.take() {
            let slot = Arc::clone(&slot);
            std::thread::spawn(move || {
                let mut s = slot.lock().unwrap();
                s.0 = Some(v);
                let waker = s.1.take();
                drop(s);
                waker.expect("polled before").wake();
            });
        }
        Poll::Pending
    })
}

/// Pushes a waiting event for `session` and returns the client's answer RPC.
fn answer_to(server: &FakeServer, session: &str, event_type: &str, data: Value, method: &str) -> Value {
    let request_id = data["requestId"].clone();
    let event = json!({
        "jsonrpc": "2.0",
        "method": "session.event",
        "params": { "sessionId": session, "event": { "type": event_type, "id": "w1", "timestamp": "t", "data": data } }
    });
    server.send_raw(&event.to_string()).expect("push the event");
    server
        .wait_received(WAIT, |m| m["method"] == method && m["params"]["requestId"] == request_id)
        .unwrap_or_else(|| panic!("no {method} answer to {event_type}"))["params"]
        .clone()
}

/// The name of the thread a handler runs on.
fn thread_name() -> String {
    std::thread::current().name().unwrap_or("(unnamed)").to_owned()
}

#[test]
fn async_handlers_of_every_kind_answer_from_the_handler_pool() {
    // The thread each handler's future ended on.
    let threads = Arc::new(Mutex::new(Vec::<String>::new()));
    let ran = Arc::new(Mutex::new(Vec::<String>::new()));
    let config = {
        let s = || Arc::clone(&threads);
        let (s1, s2, s3, s4, s5, s6, s7) = (s(), s(), s(), s(), s(), s(), s());
        let ran = Arc::clone(&ran);
        SessionConfig::default()
            .on_permission(asynch::permission_handler(move |r| {
                let seen = Arc::clone(&s1);
                async move {
                    let decision = later(PermissionDecision::reject(format!("not {}", r.kind))).await;
                    seen.lock().unwrap().push(thread_name());
                    decision
                }
            }))
            .tool(asynch::tool("weather", "Weather.", json!({"type": "object"}), move |call| {
                let seen = Arc::clone(&s2);
                async move {
                    let text = later(format!("Rain in {}", call.arguments["city"].as_str().unwrap_or("?"))).await;
                    seen.lock().unwrap().push(thread_name());
                    text
                }
            }))
            .on_user_input(asynch::user_input_handler(move |q| {
                let seen = Arc::clone(&s3);
                async move {
                    let answer = later(format!("blue, to {}", q.question)).await;
                    seen.lock().unwrap().push(thread_name());
                    Some(UserInputResponse { answer, was_freeform: true })
                }
            }))
            .on_elicitation(asynch::elicitation_handler(move |r| {
                let seen = Arc::clone(&s4);
                async move {
                    let name = later(r.message.replace('?', "")).await;
                    seen.lock().unwrap().push(thread_name());
                    ElicitationResponse::Accept(json!({ "name": name }))
                }
            }))
            .on_mcp_oauth(asynch::mcp_oauth_handler(move |r| {
                let seen = Arc::clone(&s5);
                async move {
                    let token = later(format!("token-for-{}", r.server_name)).await;
                    seen.lock().unwrap().push(thread_name());
                    Some(OAuthToken { access_token: token, token_type: None, expires_in: None })
                }
            }))
            .on_exit_plan_mode(asynch::exit_plan_mode_handler(move |p| {
                let seen = Arc::clone(&s6);
                async move {
                    let action = later(p.recommended_action.clone()).await;
                    seen.lock().unwrap().push(thread_name());
                    ExitPlanModeResponse { approved: true, selected_action: action, feedback: None }
                }
            }))
            .command(asynch::command("deploy", "Deploy.", move |c| {
                let (seen, ran) = (Arc::clone(&s7), Arc::clone(&ran));
                async move {
                    let args = later(c.args).await;
                    seen.lock().unwrap().push(thread_name());
                    ran.lock().unwrap().push(args.clone());
                    if args == "prod" {
                        Err("not on a Sunday".to_owned())
                    } else {
                        Ok(())
                    }
                }
            }))
    };
    let (server, client) = block_on(client(FakeServerConfig::default()));
    let session = block_on(client.create_session(config)).expect("create");
    let id = session.id();

    let a = answer_to(
        &server,
        id,
        "permission.requested",
        json!({"requestId": "p1", "permissionRequest": {"kind": "shell"}}),
        "session.permissions.handlePendingPermissionRequest",
    );
    assert_eq!(a["result"], json!({"kind": "reject", "feedback": "not shell"}));
    let a = answer_to(
        &server,
        id,
        "external_tool.requested",
        json!({"requestId": "t1", "sessionId": id, "toolCallId": "c1", "toolName": "weather", "arguments": {"city": "Oslo"}}),
        "session.tools.handlePendingToolCall",
    );
    assert_eq!(a["result"], json!({"textResultForLlm": "Rain in Oslo", "resultType": "success"}));
    let a = server
        .request_blocking("userInput.request", json!({"sessionId": id, "question": "colour?"}), json!(1), WAIT)
        .expect("answered");
    assert_eq!(a["result"], json!({"answer": "blue, to colour?", "wasFreeform": true}));
    let a = answer_to(
        &server,
        id,
        "elicitation.requested",
        json!({"requestId": "e1", "message": "Ada?"}),
        "session.ui.handlePendingElicitation",
    );
    assert_eq!(a["result"], json!({"action": "accept", "content": {"name": "Ada"}}));
    let a = answer_to(
        &server,
        id,
        "mcp.oauth_required",
        json!({"requestId": "o1", "serverName": "docs", "serverUrl": "https://x", "reason": "initial"}),
        "session.mcp.oauth.handlePendingRequest",
    );
    assert_eq!(a["result"], json!({"kind": "token", "accessToken": "token-for-docs"}));
    let plan = json!({"sessionId": id, "summary": "s", "planContent": "p", "actions": ["exit_only"], "recommendedAction": "exit_only"});
    let a = server.request_blocking("exitPlanMode.request", plan, json!(2), WAIT).expect("answered");
    assert_eq!(a["result"], json!({"approved": true, "selectedAction": "exit_only"}));
    for (rid, args) in [("c1", "staging"), ("c2", "prod")] {
        let data =
            json!({"requestId": rid, "command": format!("/deploy {args}"), "commandName": "deploy", "args": args});
        let a = answer_to(&server, id, "command.execute", data, "session.commands.handlePendingCommand");
        match args {
            "prod" => assert_eq!(a["error"], "not on a Sunday"),
            _ => assert!(a.get("error").is_none(), "{a}"),
        }
    }
    assert_eq!(*ran.lock().unwrap(), ["staging", "prod"]);
    let threads = threads.lock().unwrap().clone();
    assert_eq!(threads.len(), 8, "each handler's future ran to its end: {threads:?}");
    assert!(threads.iter().all(|t| t.starts_with("copilot-handlers")), "driven on the handler pool: {threads:?}");
    drop(session);
    block_on(client.stop()).expect("stop");
}

/// Sends on its channel when dropped.
struct SignalOnDrop(mpsc::Sender<()>);

impl Drop for SignalOnDrop {
    fn drop(&mut self) {
        let _ = self.0.send(());
    }
}

#[test]
fn an_async_handler_past_the_handler_deadline_is_refused_and_dropped_freeing_its_thread() {
    // One handler thread, so that the second prompt is answered only if the
    // first handler's thread was given back.
    let options =
        ClientOptions { handler_timeout: Duration::from_secs(1), handler_threads: 1, ..ClientOptions::default() };
    let (dropped_tx, dropped) = mpsc::channel();
    let dropped_tx = Mutex::new(dropped_tx);
    let handler = asynch::permission_handler(move |r| {
        let guard = SignalOnDrop(dropped_tx.lock().unwrap().clone());
        async move {
            let _guard = guard;
            if r.data.request_id == "p1" {
                // Never answers.
                std::future::pending::<()>().await;
            }
            PermissionDecision::ApproveOnce
        }
    });
    let (server, from_server, to_server) = FakeServer::pipes(FakeServerConfig::default());
    let client = block_on(Client::from_streams(from_server, to_server, None, options)).expect("handshake");
    let session = block_on(client.create_session(SessionConfig::default().on_permission(handler))).expect("create");
    let method = "session.permissions.handlePendingPermissionRequest";
    let prompt = |rid: &str| json!({"requestId": rid, "permissionRequest": {"kind": "shell"}});
    let a = answer_to(&server, session.id(), "permission.requested", prompt("p1"), method);
    assert_eq!(a["result"], json!({"kind": "user-not-available"}), "the engine's refusal at the deadline");
    // The hung future is dropped (what it holds is released)...
    dropped.recv_timeout(WAIT).expect("the future past its deadline was dropped");
    // ...and its thread answers the next prompt.
    let a = answer_to(&server, session.id(), "permission.requested", prompt("p2"), method);
    assert_eq!(a["result"], json!({"kind": "approve-once"}), "the only handler thread was given back");
    drop(session);
    block_on(client.stop()).expect("stop");
}

#[test]
fn an_async_client_dropped_without_stop_kills_and_reaps_its_cli() {
    let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
    let pid = rt.block_on(async {
        let options =
            ClientOptions { cli_path: Some(env!("CARGO_BIN_EXE_fake_cli").into()), ..ClientOptions::default() };
        let client = Client::start(options).await.expect("start the fake CLI");
        let pid = client.cli_pid().expect("a CLI this client started");
        client.ping(None).await.expect("ping");
        // Dropped on the executor's thread; the kill and the reaping are
        // done on a thread of its own.
        drop(client);
        pid
    });
    // The CLI's entry goes once it is reaped (a zombie keeps it).
    let proc = format!("/proc/{pid}");
    let give_up = std::time::Instant::now() + WAIT;
    while std::path::Path::new(&proc).exists() {
        assert!(std::time::Instant::now() < give_up, "the CLI (pid {pid}) is still there");
        std::thread::sleep(Duration::from_millis(10));
    }
}
