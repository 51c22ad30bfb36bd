//! The inference request handler against the real Copilot CLI 1.0.102 on
//! the scripted model. With `request_handler` set, the client registers
//! as the CLI's inference provider (`llmInference.setProvider`) and every
//! model request of the CLI (the model catalogue, each turn's completion)
//! comes to the handler as `llmInference.httpRequestStart` and
//! `httpRequestChunk`; here the handler forwards it to the scripted model
//! over HTTP and streams the answer back in small chunks
//! (`httpResponseStart`, `httpResponseChunk`s): the turn completes with
//! the scripted text, which arrives whole only if the chunks arrive in
//! order. A handler that fails gives the CLI an error for each request,
//! and the turn ends with a `session.error` that quotes it (no hang).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use copilot_host::{Client, CopilotHeaders, CopilotRequest, CopilotResponse, EventKind, Transport};
use copilot_testkit::scripted_model::{Reply, ScriptedModel};
use copilot_tests::real_cli::{scripted_options, scripted_session, TempDir};

const TURN: Duration = Duration::from_secs(90);

/// What the handler saw: (method, url, the authorization header as Debug shows it).
type Seen = Arc<Mutex<Vec<(String, String)>>>;

/// A plain HTTP/1.1 exchange with the scripted model (loopback, no TLS):
/// the status, headers and body of its answer.
fn forward(request: &mut CopilotRequest) -> Result<(u16, CopilotHeaders, Vec<u8>), String> {
    let body = request.read_body()?;
    let rest = request.url.strip_prefix("http://").ok_or("a loopback http URL")?;
    let (host, path) = rest.split_once('/').map(|(h, p)| (h, format!("/{p}"))).unwrap_or((rest, "/".into()));
    let mut s = TcpStream::connect(host).map_err(|e| e.to_string())?;
    let mut head = format!("{} {path} HTTP/1.1\r\nhost: {host}\r\nconnection: close\r\n", request.method);
    for (name, values) in &request.headers {
        if copilot_host::core::INFERENCE_HOP_HEADERS.contains(&name.as_str()) {
            continue;
        }
        for v in values {
            head.push_str(&format!("{name}: {v}\r\n"));
        }
    }
    head.push_str(&format!("content-length: {}\r\n\r\n", body.len()));
    s.write_all(head.as_bytes()).and_then(|()| s.write_all(&body)).map_err(|e| e.to_string())?;
    let mut answer = Vec::new();
    s.read_to_end(&mut answer).map_err(|e| e.to_string())?;
    let split = answer.windows(4).position(|w| w == b"\r\n\r\n").ok_or("an HTTP answer")?;
    let text = String::from_utf8_lossy(&answer[..split]).into_owned();
    let mut lines = text.split("\r\n");
    let status = lines.next().and_then(|l| l.split(' ').nth(1)).and_then(|c| c.parse().ok()).ok_or("a status")?;
    let mut headers = CopilotHeaders::new();
    for line in lines {
        if let Some((k, v)) = line.split_once(':') {
            let k = k.trim().to_ascii_lowercase();
            if !copilot_host::core::INFERENCE_HOP_HEADERS.contains(&k.as_str()) {
                headers.entry(k).or_default().push(v.trim().to_owned());
            }
        }
    }
    Ok((status, headers, answer[split + 4..].to_vec()))
}

#[test]
fn model_requests_go_through_the_handler_and_a_streamed_response_completes_the_turn() {
    let dir = TempDir::new("copilot-inference");
    let model = ScriptedModel::start().expect("start the scripted model");
    let seen: Seen = Arc::default();
    let chunks = Arc::new(Mutex::new(0usize));
    let (s, c) = (seen.clone(), chunks.clone());
    let handler = move |mut request: CopilotRequest, response: &mut CopilotResponse| {
        s.lock().unwrap().push((request.method.clone(), format!("{request:?}")));
        let (status, headers, body) = forward(&mut request)?;
        response.start(status, &headers)?;
        // Streamed in small pieces: the CLI reads them in order.
        for piece in body.chunks(7) {
            response.write(piece)?;
            *c.lock().unwrap() += 1;
        }
        response.end()
    };
    let options = scripted_options(Transport::Stdio, dir.path(), &model).request_handler(handler);
    let client = Client::start(options).expect("start the CLI");
    let session = client.create_session(scripted_session(dir.path(), "inference")).expect("create");
    let text = "a reply that came back through the request handler, seven bytes at a time";
    model.script(session.id(), vec![Reply::text(text)]);
    let reply = session.send_and_wait("Say something.", TURN).expect("the turn");
    match reply.as_ref().map(|e| &e.kind) {
        Some(EventKind::AssistantMessage(m)) => assert_eq!(m.content, text),
        other => panic!("the turn's reply: {other:?}"),
    }
    let seen = seen.lock().unwrap();
    let posts: Vec<&(String, String)> =
        seen.iter().filter(|(m, d)| m == "POST" && d.contains("/chat/completions")).collect();
    assert_eq!(posts.len(), 1, "the turn's completion went through the handler: {seen:?}");
    // The model got it: the handler forwarded it.
    assert_eq!(model.requests_for(session.id()).len(), 1);
    assert!(*chunks.lock().unwrap() > 10, "the response was streamed in pieces");
    // The CLI's token is in the request's headers, never in its Debug.
    for (_, debug) in seen.iter() {
        assert!(debug.contains("\"authorization\": \"<redacted>\""), "{debug}");
        assert!(!debug.contains("Bearer"), "{debug}");
    }
}

#[test]
fn a_failing_handler_ends_the_turn_with_its_error() {
    let dir = TempDir::new("copilot-inference-fail");
    let model = ScriptedModel::start().expect("start the scripted model");
    let calls = Arc::new(Mutex::new(0usize));
    let c = calls.clone();
    let handler = move |mut request: CopilotRequest, response: &mut CopilotResponse| {
        if request.url.ends_with("/chat/completions") {
            *c.lock().unwrap() += 1;
            return Err("the inference backend is down".to_owned());
        }
        // The catalogue still comes from the model, so the session opens.
        let (status, headers, body) = forward(&mut request)?;
        response.start(status, &headers)?;
        response.write(&body)?;
        response.end()
    };
    let options = scripted_options(Transport::Stdio, dir.path(), &model).request_handler(handler);
    let client = Client::start(options).expect("start the CLI");
    let session = client.create_session(scripted_session(dir.path(), "inference-fail")).expect("create");
    model.script(session.id(), vec![Reply::text("never read")]);
    let err = session.send_and_wait("Say something.", TURN).expect_err("the turn fails");
    assert!(err.to_string().contains("the inference backend is down"), "{err}");
    assert!(*calls.lock().unwrap() >= 1);
    assert!(model.requests_for(session.id()).is_empty(), "nothing reached the model");
}

#[test]
fn an_aborted_turn_cancels_the_request_in_flight() {
    let dir = TempDir::new("copilot-inference-cancel");
    let model = ScriptedModel::start().expect("start the scripted model");
    let (started_tx, started) = std::sync::mpsc::channel::<()>();
    let (cancelled_tx, cancelled) = std::sync::mpsc::channel::<(String, Result<(), String>)>();
    let (started_tx, cancelled_tx) = (Mutex::new(started_tx), Mutex::new(cancelled_tx));
    let handler = move |mut request: CopilotRequest, response: &mut CopilotResponse| {
        if !request.url.ends_with("/chat/completions") {
            let (status, headers, body) = forward(&mut request)?;
            response.start(status, &headers)?;
            response.write(&body)?;
            return response.end();
        }
        // The head and a first piece, then the stream stalls until the CLI
        // gives up on it.
        request.read_body()?;
        let sse = CopilotHeaders::from([("content-type".to_owned(), vec!["text/event-stream".to_owned()])]);
        response.start(200, &sse)?;
        response
            .write(b"data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"par\"}}]}\n\n")?;
        started_tx.lock().unwrap().send(()).unwrap();
        let why = request.wait_cancelled();
        let write_after = response.write(b"data: [DONE]\n\n");
        cancelled_tx.lock().unwrap().send((why.clone(), write_after)).unwrap();
        Err(why)
    };
    let options = scripted_options(Transport::Stdio, dir.path(), &model).request_handler(handler);
    let client = Client::start(options).expect("start the CLI");
    let mut config = scripted_session(dir.path(), "inference-cancel");
    config.streaming = true;
    let session = client.create_session(config).expect("create");
    let events = session.events();
    session.send("Say something long.").expect("send");
    started.recv().expect("the completion's response started");
    session.abort().expect("abort");
    let (why, write_after) = cancelled.recv().expect("the handler saw the cancel");
    assert!(!why.is_empty(), "the CLI gives a reason");
    assert!(write_after.is_err(), "a cancelled response takes no more chunks");
    // The turn ends: the session goes idle.
    assert!(events.into_iter().any(|e| e.event_type() == "session.idle"));
}
