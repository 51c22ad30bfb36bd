//! Tests of the inference state (inference.rs) without a connection.

use super::*;

fn frame(id: &str, data: &str, end: bool) -> Frame {
    Frame { request_id: id.into(), method: "POST".into(), data: data.into(), end, ..Frame::default() }
}

/// A handler that hands over what it read of the body.
fn reading(tx: std::sync::mpsc::Sender<Result<Vec<u8>, String>>) -> Arc<Inference> {
    let tx = Mutex::new(tx);
    let handler = move |mut r: CopilotRequest, _: &mut CopilotResponse| {
        tx.lock().unwrap().send(r.read_body()).unwrap();
        Ok(())
    };
    Inference::new(Arc::new(handler), Duration::from_secs(1))
}

#[test]
fn chunks_before_their_start_are_kept_in_order_and_past_the_bound_fail_the_request() {
    let (tx, rx) = std::sync::mpsc::channel();
    let inference = reading(tx);
    // The pool may run a chunk's job before its start's.
    inference.chunk(frame("a", "he", false));
    inference.chunk(frame("a", "llo", true));
    inference.start(frame("a", "", false));
    assert_eq!(rx.recv().unwrap(), Ok(b"hello".to_vec()));

    for _ in 0..MAX_INFERENCE_BUFFERED_CHUNKS {
        inference.chunk(frame("b", "x", false));
    }
    inference.chunk(frame("b", "one too many", true));
    inference.start(frame("b", "", false));
    assert_eq!(rx.recv().unwrap(), Err(INFERENCE_OVERFLOW.message.to_owned()));
}

#[test]
fn a_debug_request_shows_no_secret_header() {
    let (_tx, body) = sync_channel(1);
    let headers = CopilotHeaders::from([
        ("authorization".to_owned(), vec!["Bearer sekrit".to_owned()]),
        ("content-type".to_owned(), vec!["application/json".to_owned()]),
    ]);
    let request = CopilotRequest {
        request_id: "r".into(),
        session_id: None,
        method: "POST".into(),
        url: "http://127.0.0.1/chat/completions".into(),
        headers,
        transport: "http".into(),
        agent_id: None,
        parent_agent_id: None,
        interaction_type: None,
        body,
        shared: Arc::default(),
        done: false,
    };
    let shown = format!("{request:?}");
    assert!(!shown.contains("sekrit") && shown.contains("<redacted>") && shown.contains("application/json"), "{shown}");
}

#[test]
fn base64_round_trips() {
    for s in [&b""[..], b"f", b"fo", b"foo", b"foob", b"\xff\x00\xfe"] {
        assert_eq!(super::super::exchange::unbase64(&super::super::exchange::base64(s)).unwrap(), s);
    }
    assert_eq!(super::super::exchange::base64(b"foob"), "Zm9vYg==");
}

#[test]
fn chunks_of_requests_that_ended_or_never_start_are_not_kept() {
    let (tx, rx) = std::sync::mpsc::channel();
    let inference = reading(tx);
    inference.start(frame("a", "", false));
    inference.chunk(frame("a", "body", true));
    assert_eq!(rx.recv().unwrap(), Ok(b"body".to_vec()));
    // Served (its entry gone once the handler returned): a late chunk,
    // such as a cancel after the end, is dropped rather than kept.
    while inference.table().contains_key("a") {
        std::thread::yield_now();
    }
    inference.chunk(Frame { cancel: true, end: true, ..frame("a", "", true) });
    assert!(inference.table().is_empty(), "no entry for a request that ended");
    // Chunks of requests whose start has not come: kept for as many as may run.
    for i in 0..MAX_INFERENCE_IN_FLIGHT + 3 {
        inference.chunk(frame(&format!("early-{i}"), "x", false));
    }
    assert_eq!(inference.table().len(), MAX_INFERENCE_IN_FLIGHT);
}
