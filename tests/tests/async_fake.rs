//! The async API over the fake CLI: 1,000 sessions driven from one thread
//! of a `current_thread` runtime, a `send_and_wait` dropped mid-turn, and
//! the same calls under a minimal executor of this file's own.

use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::thread::Thread;

use copilot_host::asynch::{Client, EventStream, Session};
use copilot_host::{ClientOptions, EventKind, SessionConfig};
use copilot_tests::fake_server::{FakeServer, FakeServerConfig};

const SESSIONS: usize = 1000;
/// A guard against a hang, not a bound that is asserted.
const WAIT: std::time::Duration = std::time::Duration::from_secs(120);
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
        let (server, client) = client(FakeServerConfig::default().with_reply_text(REPLY)).await;
        let session = client.create_session(SessionConfig::default()).await.expect("create");
        let mut events = session.events();
        assert_eq!(events.next().await.expect("start").event_type(), "session.start");
        // Poll the turn until the stream has seen it begin, then drop it.
        {
            let mut turn = pin!(session.send_and_wait("first", WAIT));
            let mut seen = Vec::new();
            // The stream is fed before the waiter, so it is polled first:
            // the turn cannot have ended unseen.
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
