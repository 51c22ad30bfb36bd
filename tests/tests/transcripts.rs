//! Every message of the six real CLI transcripts decodes and routes through
//! `copilot_core::Router` exactly as a client host would see it: events to
//! their session, responses to their request, lifecycle to its listeners,
//! with zero errors, whatever the byte chunking.

use copilot_core::{Envelope, FrameDecoder, Message, Outgoing, Route, Router, Value};
use copilot_tests::{transcript, Direction, Recorded, TRANSCRIPTS};

/// Session targets are `1`; a response's waiter is the recorded request id.
type TestRouter = Router<u32, u64, 8, 64>;

fn frame(body: &str) -> Vec<u8> {
    let mut header = [0u8; copilot_core::MAX_FRAME_HEADER_LEN];
    let n = copilot_core::frame_header(body.len(), &mut header);
    [&header[..n], body.as_bytes()].concat()
}

fn json(body: &str) -> serde_json::Value {
    serde_json::from_str(body).unwrap()
}

/// Moves the pending table's id counter to `first` (earlier scenarios of the
/// same recording used the ids before it).
fn skip_ids(router: &TestRouter, first: u64) {
    for expected in 1..first {
        let id = router.pending().insert(0).unwrap();
        assert_eq!(id.0, expected, "a fresh table allocates ids from 1");
        router.pending().take(id.0);
    }
}

#[derive(Default)]
struct Seen {
    events: usize,
    lifecycle: usize,
    responses: usize,
    notifications: usize,
    awaited: Vec<String>,
}

fn check(name: &str, route: Route<'_, u32, u64>, seen: &mut Seen) {
    match route {
        Route::Event { target, event, session_id, .. } => {
            assert_eq!(target, 1, "{name}: event for {session_id} reached the wrong target");
            if let Some(r) = event.request_id {
                seen.awaited.push(r.to_string());
            }
            seen.events += 1;
        }
        Route::Lifecycle { .. } => seen.lifecycle += 1,
        Route::Response { request, waiter, result } => {
            assert_eq!(request.0, waiter, "{name}: response delivered to another request");
            assert!(result.is_ok(), "{name}: request {waiter} failed: {result:?}");
            seen.responses += 1;
        }
        Route::Notification { method, .. } => {
            assert_eq!(method, "host.event", "{name}: unexpected notification");
            seen.notifications += 1;
        }
        other => panic!("{name}: {other:?}"),
    }
}

/// Replays a transcript in recorded order, as the client saw it.
fn replay(name: &str, lines: &[Recorded]) -> Seen {
    let router = TestRouter::new();
    let mut decoder = FrameDecoder::with_buffer(vec![0u8; 64 * 1024]);
    let mut seen = Seen::default();
    let first = lines.iter().find(|l| l.direction == Direction::Out).map(|l| json(&l.body)["id"].as_u64().unwrap());
    skip_ids(&router, first.unwrap());
    let mut answered = Vec::new();
    for line in lines {
        let m = json(&line.body);
        match line.direction {
            Direction::Out => {
                let id = router.pending().insert(m["id"].as_u64().unwrap()).unwrap();
                assert_eq!(Some(id.0), m["id"].as_u64(), "{name}: request ids follow the recording");
                if m["method"] == "session.create" {
                    router.sessions().reserve(m["params"]["sessionId"].as_str().unwrap(), 1).unwrap();
                }
                if let Some(r) = m["params"]["requestId"].as_str() {
                    answered.push(r.to_owned());
                }
            }
            Direction::In => {
                let bytes = frame(&line.body);
                // Split each frame in three to cross header and body bounds.
                let (a, rest) = bytes.split_at(bytes.len() / 3);
                let (b, c) = rest.split_at(rest.len() / 2);
                for piece in [a, b, c] {
                    assert_eq!(decoder.feed(piece), piece.len());
                    while let Some(route) = router.poll(&mut decoder) {
                        check(name, route, &mut seen);
                    }
                }
            }
        }
    }
    assert!(decoder.is_idle());
    let stats = router.stats();
    assert_eq!(stats.malformed + stats.oversize + stats.unknown_session + stats.unmatched_responses, 0, "{stats:?}");
    assert_eq!(stats.frames as usize, lines.iter().filter(|l| l.direction == Direction::In).count());
    assert!(router.pending().is_empty(), "{name}: every request was answered");
    assert_eq!(seen.awaited, answered, "{name}: each awaited event is the one the client answered");
    seen
}

#[test]
fn every_transcript_message_routes_without_error() {
    for name in TRANSCRIPTS {
        let lines = transcript(name);
        let seen = replay(name, &lines);
        let incoming = lines.iter().filter(|l| l.direction == Direction::In).count();
        assert_eq!(seen.events + seen.lifecycle + seen.responses + seen.notifications, incoming, "{name}");
        assert!(seen.events >= 28, "{name}: a turn has at least 28 events, saw {}", seen.events);
        assert!(seen.lifecycle > 0 && seen.responses >= 4, "{name}");
        if !name.starts_with("reply") {
            assert!(!seen.awaited.is_empty(), "{name}: tool and permission turns carry awaited events");
        }
    }
}

#[test]
fn whole_incoming_stream_routes_in_any_chunking() {
    for name in TRANSCRIPTS {
        let lines = transcript(name);
        let stream: Vec<u8> =
            lines.iter().filter(|l| l.direction == Direction::In).flat_map(|l| frame(&l.body)).collect();
        for chunk in [1, 7, 100, 4096, stream.len()] {
            let router = TestRouter::new();
            let first = lines.iter().find(|l| l.direction == Direction::Out).unwrap();
            skip_ids(&router, json(&first.body)["id"].as_u64().unwrap());
            for l in lines.iter().filter(|l| l.direction == Direction::Out) {
                let m = json(&l.body);
                router.pending().insert(m["id"].as_u64().unwrap()).unwrap();
                if m["method"] == "session.create" {
                    router.sessions().reserve(m["params"]["sessionId"].as_str().unwrap(), 1).unwrap();
                }
            }
            let mut decoder = FrameDecoder::with_buffer(vec![0u8; 64 * 1024]);
            let mut seen = Seen::default();
            for piece in stream.chunks(chunk) {
                let mut rest = piece;
                while !rest.is_empty() {
                    rest = &rest[decoder.feed(rest)..];
                    while let Some(route) = router.poll(&mut decoder) {
                        check(name, route, &mut seen);
                    }
                }
            }
            let stats = router.stats();
            assert_eq!(stats.frames as usize, lines.iter().filter(|l| l.direction == Direction::In).count());
            assert_eq!(stats.malformed + stats.unknown_session + stats.unmatched_responses, 0, "{name} {chunk}");
            assert!(router.pending().is_empty());
        }
    }
}

#[test]
fn client_side_messages_encode_to_the_recorded_messages_and_decode_back_byte_for_byte() {
    // The fixtures keep each message as JSON, not the bytes that were on the
    // wire. So a message the core encodes from the recorded parts must be
    // the recorded message as a value, and as bytes exactly the compact
    // JSON-RPC text (`jsonrpc`, `id`, `method`, `params` in that order, the
    // params as given). Those bytes, framed, decoded and encoded again from
    // the decoded parts, come back unchanged.
    for name in TRANSCRIPTS {
        for line in transcript(name).iter().filter(|l| l.direction == Direction::Out) {
            let m = json(&line.body);
            let params_text = serde_json::to_string(&m["params"]).unwrap();
            let params = Value::parse(params_text.as_bytes()).unwrap();
            let out = Outgoing::Request {
                id: copilot_core::RequestId(m["id"].as_u64().unwrap()),
                method: m["method"].as_str().unwrap(),
                params: Some(&params),
            };
            let mut buf = vec![0u8; line.body.len() + 128];
            let n = out.encode_body(&mut buf).unwrap();
            let sent = &buf[..n];
            let ours: serde_json::Value = serde_json::from_slice(sent).unwrap();
            assert_eq!(ours, m, "{name}");
            let expected =
                format!(r#"{{"jsonrpc":"2.0","id":{},"method":{},"params":{params_text}}}"#, m["id"], m["method"]);
            assert_eq!(std::str::from_utf8(sent).unwrap(), expected, "{name}");

            let mut decoder = FrameDecoder::with_buffer(vec![0u8; 64 * 1024]);
            let framed = frame(std::str::from_utf8(sent).unwrap());
            assert_eq!(decoder.feed(&framed), framed.len());
            let body = decoder.poll().expect("a frame").expect("a valid frame").to_vec();
            assert_eq!(body, sent, "{name}: the frame decoder gives the body back unchanged");
            let Message::Request { id, method, params } = Envelope::decode(&body).unwrap().message else {
                panic!("{name}: not a request: {}", line.body);
            };
            let again = Outgoing::Request {
                id: copilot_core::RequestId(id.as_u64().unwrap()),
                method: method.as_plain().unwrap(),
                params: params.as_ref().map(|p| p as &dyn copilot_core::Payload),
            };
            let mut buf = vec![0u8; n + 128];
            let n = again.encode_body(&mut buf).unwrap();
            assert_eq!(std::str::from_utf8(&buf[..n]).unwrap(), expected, "{name}: decoded and encoded again");
        }
    }
}
