//! A session's delivery without a connection: events pushed as the reader
//! pushes them, taken as a user would.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::event_channel::event_channel;
use super::inbox::InboxTx;
use super::session::{SessionInner, Sink};
use crate::driver::SessionSink;
use crate::events::{EventKind, SessionEvent};
use crate::pool::Pool;

/// A guard against a hang, not a timing: the dispatcher answers at once.
const WAIT: Duration = Duration::from_secs(20);

fn session() -> Arc<SessionInner> {
    let pool = |name| Pool::start(name, 1).expect("a pool thread");
    SessionInner::with_pools(
        Some("s"),
        Arc::new(|_, _| {}),
        pool("events"),
        pool("handlers"),
        Arc::default(),
        Arc::default(),
    )
}

/// An event of `event_type`; `readable: false` puts a lone surrogate in
/// its id: valid on the wire, refused by serde.
fn event(id: &str, event_type: &str, data: &str, readable: bool) -> String {
    let id = if readable { id.to_owned() } else { format!("{id}\\udc00") };
    format!(r#"{{"id":"{id}","timestamp":"t","type":"{event_type}","data":{data}}}"#)
}

fn push(session: &SessionInner, event: &str) {
    let value = copilot_core::Value::parse(event.as_bytes()).expect("an event object");
    let event_type = value.get("type").and_then(|t| t.as_str()).expect("a type");
    session.push_event(event.as_bytes(), event_type.as_plain());
}

/// A session that only `send_and_wait` listens to is handed the events
/// that end its turn, reply included, and parses none of the others for
/// it; an unreadable one that ends the turn still does so, counted; and
/// the events passed over are all still kept for a first subscriber, and
/// parsed as it reads them.
#[test]
fn a_session_only_waited_on_parses_just_what_moves_its_turn() {
    let session = session();
    let (tx, rx) = event_channel(session.inbox());
    session.subscribe(Sink::Waiter(tx), false);
    let turn = [
        event("1", "assistant.turn_start", r#"{"turnId":"0"}"#, true),
        event("2", "assistant.message_delta", r#"{"messageId":"m","deltaContent":"fo"}"#, false),
        event("3", "assistant.message_delta", r#"{"messageId":"m","deltaContent":"ur"}"#, false),
        event("4", "assistant.message", r#"{"messageId":"m","content":"four"}"#, true),
        event("5", "assistant.turn_end", r#"{"turnId":"0"}"#, false),
        event("6", "session.idle", "{}", false),
    ];
    for e in &turn {
        push(&session, e);
    }
    session.flush();
    let next = || rx.inbox.recv(Some(Instant::now() + WAIT)).expect("an event in time").expect("open");
    let reply = next();
    assert!(matches!(&reply.kind, EventKind::AssistantMessage(m) if m.content == "four"), "{reply:?}");
    let idle = next();
    assert_eq!(idle.event_type(), "session.idle", "the end, unreadable, delivered raw");
    assert!(rx.inbox.try_recv().is_none(), "nothing else is handed to the waiter");
    assert_eq!(session.stats().unreadable, 1, "only the end was parsed: the deltas and turn end were not");
    // A first subscriber still gets every event, each parsed as it reads.
    let stream = session.inbox();
    session.subscribe(Sink::Stream(InboxTx(Arc::clone(&stream))), true);
    let got: Vec<Arc<SessionEvent>> = std::iter::from_fn(|| stream.try_recv()).collect();
    let types: Vec<&str> = got.iter().map(|e| e.event_type()).collect();
    let sent = ["assistant.turn_start", "assistant.message_delta", "assistant.message_delta", "assistant.message"];
    assert_eq!(types, [&sent[..], &["assistant.turn_end", "session.idle"]].concat(), "all, in order");
    assert!(Arc::ptr_eq(&got[5], &idle), "the end's parse shared with the subscriber kept for");
    assert_eq!(session.stats().unreadable, 1 + 3, "the three passed over counted as they were read");
}
