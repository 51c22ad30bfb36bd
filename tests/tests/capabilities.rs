//! A session's capabilities and its UI calls against the real Copilot CLI
//! 1.0.102 on the scripted model: the capabilities as created; changed
//! when a second client joins the session with an elicitation handler and
//! when it leaves (the CLI's `capabilities.changed`); a UI call refused
//! before it is sent while no client answers elicitations (the headless
//! CLI would wait forever); and the UI calls answered by the session's
//! elicitation handler, through the blocking and the async API. And, with
//! an in-memory peer, that they follow the frames' order: a change written
//! right behind the open's answer counts.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use copilot_host::{
    Client, ElicitationResponse, Error, EventStream, Session, SessionCapabilities, SessionConfig, Transport,
    UiInputOptions,
};
use copilot_testkit::scripted_model::ScriptedModel;
use copilot_tests::real_cli::{scripted_options, scripted_session, TempDir};
use serde_json::{json, Value};

/// A guard against a hang, not a bound that is asserted.
const GUARD: Duration = Duration::from_secs(90);

/// The capabilities with only `ui.elicitation` set as given (the CLI
/// 1.0.102 reports every member, the others `false`).
fn with_elicitation(elicitation: bool) -> SessionCapabilities {
    let mut caps = SessionCapabilities::default();
    caps.ui.elicitation = elicitation;
    caps
}

/// Takes events off `events` up to the next `capabilities.changed`, and
/// returns what the session's capabilities were once it was delivered.
fn next_change(events: &EventStream, session: &Session) -> (Value, SessionCapabilities) {
    loop {
        let event = events.next_timeout(GUARD).expect("an event").expect("the stream is open");
        if event.event_type() == "capabilities.changed" {
            let data = event.kind.data_value();
            return (data, session.capabilities());
        }
    }
}

/// Every UI call of `session` fails before anything is sent, naming the call
/// and the capability it lacks.
fn every_ui_call_is_refused(session: &Session) {
    let ui = session.ui();
    let results = [
        ("confirm", ui.confirm("Deploy?").map(drop)),
        ("select", ui.select("Which?", &["a", "b"]).map(drop)),
        ("input", ui.input("Name?", None).map(drop)),
        ("elicitation", ui.elicitation("Form?", json!({"type": "object", "properties": {}})).map(drop)),
    ];
    for (call, result) in results {
        match result {
            Err(Error::MissingCapability(missing)) => {
                assert_eq!(missing.call, call);
                let text = Error::MissingCapability(missing).to_string();
                assert!(text.starts_with(&format!("session.ui.{call}: ")), "{text}");
                assert!(text.contains("lacks the elicitation capability"), "{text}");
            }
            other => panic!("session.ui.{call} without the capability: {other:?}"),
        }
    }
}

#[test]
fn capabilities_follow_the_clients_that_answer_elicitations() {
    let dir = TempDir::new("copilot-caps");
    let model = ScriptedModel::start().expect("start the scripted model");
    let mut options = scripted_options(Transport::Tcp { port: 0 }, dir.path(), &model);
    options.connection_token = Some("caps-token".into());
    let owner = Client::start(options).expect("start the CLI");
    let addr = owner.peer_addr().expect("a TCP client knows its peer");

    // As created, by a client without an elicitation handler.
    let first = owner.create_session(scripted_session(dir.path(), "caps")).expect("create");
    assert_eq!(first.capabilities(), with_elicitation(false));
    every_ui_call_is_refused(&first);
    let events = first.events();

    // A second client joins with an elicitation handler.
    let joiner = Client::connect(addr, Some("caps-token")).expect("a second client");
    let config =
        SessionConfig { working_directory: Some(dir.path().join("work").join("caps")), ..SessionConfig::default() }
            .on_elicitation(|_: &_| ElicitationResponse::Cancel);
    let second = joiner.resume_session(first.id(), config).expect("join the session");
    assert_eq!(second.capabilities(), with_elicitation(true), "the resume's answer says it");
    let (data, seen) = next_change(&events, &first);
    assert_eq!(data, json!({"ui": {"elicitation": true}}));
    assert_eq!(seen, with_elicitation(true), "changed before the event is delivered; the rest kept");

    // It leaves: the CLI says so when its connection closes. The session is
    // detached first (dropped, not destroyed): after the joiner's
    // `session.destroy`, CLI 1.0.102 did not always say so (it kept
    // elicitation true, and a UI call then waited forever).
    drop(second);
    joiner.stop().expect("the second client stops");
    let (data, seen) = next_change(&events, &first);
    assert_eq!(data, json!({"ui": {"elicitation": false}}));
    assert_eq!(seen, with_elicitation(false));
    every_ui_call_is_refused(&first);
    owner.stop().expect("stop");
}

/// What the elicitation handler was asked: (message, form).
type Asked = Arc<Mutex<Vec<(String, Value)>>>;

/// A session whose elicitation handler answers each UI call's form: yes,
/// the second option, a name, or the whole form's content; it declines
/// what ends in "no?".
fn answering_config(dir: &TempDir, asked: &Asked) -> SessionConfig {
    let asked = Arc::clone(asked);
    scripted_session(dir.path(), "ui").on_elicitation(
        move |request: &copilot_host::events::ElicitationRequestedData| {
            let form = serde_json::to_value(&request.requested_schema).unwrap();
            asked.lock().unwrap().push((request.message.clone(), form.clone()));
            if request.message.to_lowercase().ends_with("no?") {
                return ElicitationResponse::Decline;
            }
            let field = form["properties"].as_object().and_then(|p| p.keys().next().cloned()).unwrap_or_default();
            match field.as_str() {
                "confirmed" => ElicitationResponse::Accept(json!({"confirmed": true})),
                "selection" => {
                    ElicitationResponse::Accept(json!({"selection": form["properties"]["selection"]["enum"][1]}))
                }
                "value" => ElicitationResponse::Accept(json!({"value": "Ada"})),
                _ => ElicitationResponse::Accept(json!({"color": "green"})),
            }
        },
    )
}

/// The form of a UI call of one field, as the session sends it.
fn one_field(field: &str, schema: Value) -> Value {
    json!({"type": "object", "properties": {field: schema}, "required": [field]})
}

#[test]
fn the_ui_calls_are_answered_by_the_sessions_elicitation_handler() {
    let dir = TempDir::new("copilot-ui");
    let model = ScriptedModel::start().expect("start the scripted model");
    let options = scripted_options(Transport::Stdio, dir.path(), &model);
    let rt = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
    let asked = Asked::default();
    let (client, session) = rt.block_on(async {
        let client = copilot_host::asynch::Client::start(options).await.expect("start the CLI");
        let session = client.create_session(answering_config(&dir, &asked)).await.expect("create");
        (client, session)
    });
    assert_eq!(session.capabilities(), with_elicitation(true), "its own handler gives the session the capability");

    // Through the async API.
    rt.block_on(async {
        let ui = session.ui();
        assert!(ui.confirm("Deploy?").await.expect("confirm"));
        assert_eq!(ui.select("Which?", &["red", "green"]).await.expect("select").as_deref(), Some("green"));
        let input = UiInputOptions { title: Some("Name".into()), min_length: Some(1), ..UiInputOptions::default() };
        assert_eq!(ui.input("Name?", Some(&input)).await.expect("input").as_deref(), Some("Ada"));
    });
    // Through the blocking API, on the same session.
    let ui = session.blocking().ui();
    let form = json!({"type": "object", "properties": {"color": {"type": "string"}}});
    assert_eq!(
        ui.elicitation("Color?", form.clone()).expect("elicitation"),
        ElicitationResponse::Accept(json!({"color": "green"}))
    );
    assert_eq!(ui.elicitation("Say no?", form.clone()).expect("elicitation"), ElicitationResponse::Decline);
    assert!(!ui.confirm("Still no?").expect("a declined confirm is false"));
    assert_eq!(ui.select("Pick or no?", &["x"]).expect("select"), None, "a declined select is none");

    let asked = asked.lock().unwrap().clone();
    let expected = vec![
        ("Deploy?".to_owned(), one_field("confirmed", json!({"type": "boolean", "default": true}))),
        ("Which?".to_owned(), one_field("selection", json!({"type": "string", "enum": ["red", "green"]}))),
        ("Name?".to_owned(), one_field("value", json!({"type": "string", "title": "Name", "minLength": 1}))),
        ("Color?".to_owned(), form.clone()),
        ("Say no?".to_owned(), form),
        ("Still no?".to_owned(), one_field("confirmed", json!({"type": "boolean", "default": true}))),
        ("Pick or no?".to_owned(), one_field("selection", json!({"type": "string", "enum": ["x"]}))),
    ];
    assert_eq!(asked.len(), expected.len(), "{asked:#?}");
    for (got, want) in asked.iter().zip(&expected) {
        assert_eq!(got.0, want.0);
        // The CLI hands the form on as it came, member for member.
        assert_eq!(got.1, want.1, "{}", got.0);
    }
    rt.block_on(async {
        drop(session);
        client.stop().await.expect("stop");
    });
}

/// Writes `body` as one frame.
fn frame(body: &Value) -> Vec<u8> {
    let body = body.to_string();
    format!("Content-Length: {}\r\n\r\n{body}", body.len()).into_bytes()
}

/// A peer that answers as the CLI does, except that its `session.create`
/// answer (capabilities: elicitation false, canvases true) and a
/// `capabilities.changed` (elicitation true) go in one write, and its
/// `ping` answer is followed by a change to elicitation false. The methods
/// it received, in order.
fn serve_peer(stream: std::os::unix::net::UnixStream) -> Arc<Mutex<Vec<String>>> {
    use std::io::{BufRead, BufReader, Read, Write};
    let received = Arc::<Mutex<Vec<String>>>::default();
    let log = Arc::clone(&received);
    std::thread::spawn(move || {
        let session = Mutex::new(Value::Null);
        let mut writer = stream.try_clone().unwrap();
        let mut reader = BufReader::new(stream);
        loop {
            let mut length = 0;
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap_or(0) == 0 {
                    return;
                }
                if let Some(n) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                    length = n.trim().parse().unwrap();
                }
                if line == "\r\n" {
                    break;
                }
            }
            let mut body = vec![0; length];
            reader.read_exact(&mut body).unwrap();
            let m: Value = serde_json::from_slice(&body).unwrap();
            let (Some(method), Some(id)) = (m["method"].as_str(), m.get("id")) else { continue };
            log.lock().unwrap().push(method.to_owned());
            let answer = |result: Value| frame(&json!({"jsonrpc": "2.0", "id": id, "result": result}));
            let change = |sid: &Value, id: &str, on: bool| {
                let event = json!({"id": id, "timestamp": "t", "parentId": null, "ephemeral": true,
                    "type": "capabilities.changed", "data": {"ui": {"elicitation": on}}});
                frame(
                    &json!({"jsonrpc": "2.0", "method": "session.event", "params": {"sessionId": sid, "event": event}}),
                )
            };
            let out = match method {
                "connect" => answer(json!({"ok": true, "protocolVersion": 3, "version": "peer"})),
                "session.create" => {
                    let sid = m["params"]["sessionId"].clone();
                    let caps = json!({"ui": {"elicitation": false, "canvases": true}, "extensions": false});
                    *session.lock().unwrap() = sid.clone();
                    let mut both = answer(json!({"sessionId": sid, "capabilities": caps}));
                    both.extend(change(&sid, "c1", true));
                    both
                }
                "ping" => {
                    let mut both = answer(json!({"message": "pong", "protocolVersion": 3}));
                    both.extend(change(&session.lock().unwrap(), "c2", false));
                    both
                }
                _ => answer(json!({"success": true})),
            };
            if writer.write_all(&out).is_err() {
                return;
            }
        }
    });
    received
}

#[test]
fn the_capabilities_follow_the_frames_order_and_a_refused_call_sends_nothing() {
    let (ours, theirs) = std::os::unix::net::UnixStream::pair().unwrap();
    let received = serve_peer(theirs);
    let client = Client::from_streams(ours.try_clone().unwrap(), ours, None).expect("handshake");
    let session = client.create_session(SessionConfig::default()).expect("create");
    let mut expected = SessionCapabilities::default();
    expected.ui.elicitation = true;
    expected.ui.canvases = true;
    assert_eq!(session.capabilities(), expected, "the change behind the answer counts; the rest kept");

    // The change behind the ping's answer (c1 comes first: it is kept for
    // the first subscriber).
    let events = session.events();
    client.ping(None).expect("ping");
    let seen = loop {
        let event = events.next_timeout(GUARD).expect("an event").expect("the stream is open");
        if event.id == "c2" {
            break session.capabilities();
        }
    };
    expected.ui.elicitation = false;
    assert_eq!(seen, expected);
    assert!(matches!(session.ui().confirm("Go?"), Err(Error::MissingCapability(_))));
    client.ping(None).expect("ping");
    let received = received.lock().unwrap().clone();
    assert_eq!(received.iter().filter(|m| m.starts_with("session.ui.")).count(), 0, "{received:?}");
    drop(session);
    drop(client);
}
