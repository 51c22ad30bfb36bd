//! Canvases against the real Copilot CLI 1.0.102 on the scripted model.
//! With `request_canvas_renderer` the CLI offers the agent its canvas tools
//! (`open_canvas`, `invoke_canvas_action`, ...) and lists the session's
//! declared canvases (`session.canvas.list`); when the agent calls them, the
//! CLI sends this client `canvas.open` and `canvas.action.invoke`, and a
//! `session.canvas.close` sends it `canvas.close`. Each is answered once by
//! the canvas's handler, and the agent reads the answer: the open's result,
//! the action's result, a handler's error (its message), the official SDKs'
//! error for an action without a handler, and a panic's text. (The CLI
//! itself refuses an action the canvas did not declare, and a canvas the
//! session did not declare, without asking the client.)

use std::sync::{Arc, Mutex};
use std::time::Duration;

use copilot_host::asynch;
use copilot_host::{
    approve_all, Canvas, CanvasAction, CanvasContext, CanvasError, CanvasProviderIdentity, Client, EventKind,
    ExtensionInfo, Transport,
};
use copilot_testkit::scripted_model::{Reply, ScriptedModel};
use copilot_tests::real_cli::{scripted_options, scripted_session, TempDir};
use serde_json::{json, Value};

const TURN: Duration = Duration::from_secs(90);

/// What each handler was called with: (handler, canvas, instance, input).
type Calls = Arc<Mutex<Vec<(String, String, String, Option<Value>)>>>;

fn record(calls: &Calls, what: &str, ctx: &CanvasContext) {
    calls.lock().unwrap().push((what.into(), ctx.canvas_id.clone(), ctx.instance_id.clone(), ctx.input.clone()));
}

fn canvases(calls: &Calls) -> Vec<Canvas> {
    let (open, close, inc, boom) = (calls.clone(), calls.clone(), calls.clone(), calls.clone());
    let counter = Canvas::new("counter", "Counter", "Counts things.", move |ctx: &CanvasContext| {
        record(&open, "open", ctx);
        Ok(json!({ "url": format!("https://example.test/{}/{}", ctx.canvas_id, ctx.instance_id), "title": "Count" }))
    })
    .input_schema(json!({"type": "object", "properties": {"start": {"type": "number"}}}))
    .on_close(move |ctx: &CanvasContext| {
        record(&close, "close", ctx);
        Ok(())
    })
    .action(
        CanvasAction::new("increment", move |ctx: &CanvasContext| {
            record(&inc, "increment", ctx);
            Ok(json!({ "count": 5 }))
        })
        .description("Add to the count"),
    )
    .action(CanvasAction::new("explode", move |ctx: &CanvasContext| {
        record(&boom, "explode", ctx);
        panic!("the counter exploded")
    }))
    .action(CanvasAction::without_handler("missing"));
    let broken = Canvas::new("broken", "Broken", "Never opens.", |_: &CanvasContext| {
        Err(CanvasError::new("broken_canvas", "this canvas is broken"))
    });
    vec![counter, broken]
}

fn config_provider() -> Option<CanvasProviderIdentity> {
    Some(CanvasProviderIdentity { id: "app:test:1".into(), name: Some("Test app".into()) })
}

fn open(canvas: &str, instance: &str, input: Value) -> Reply {
    Reply::tool_call("open_canvas", json!({"canvasId": canvas, "instanceId": instance, "input": input}))
}

fn invoke(instance: &str, action: &str, input: Value) -> Reply {
    Reply::tool_call("invoke_canvas_action", json!({"instanceId": instance, "actionName": action, "input": input}))
}

#[test]
fn canvas_requests_of_the_real_cli_are_answered_once_by_the_canvas_handlers() {
    let dir = TempDir::new("copilot-canvas");
    let model = ScriptedModel::start().expect("start the scripted model");
    let client = Client::start(scripted_options(Transport::Stdio, dir.path(), &model)).expect("start the CLI");
    let calls: Calls = Arc::default();
    // The CLI asks before each canvas tool runs.
    let mut config = scripted_session(dir.path(), "canvas").on_permission_shared(approve_all());
    config.request_canvas_renderer = Some(true);
    config.canvas_provider = config_provider();
    for c in canvases(&calls) {
        config = config.canvas(c);
    }
    let session = client.create_session(config).expect("create");
    assert!(session.capabilities().ui.canvases, "the CLI renders canvases through this client");

    // The declarations arrived, under the provider id given.
    let listed = session.call_raw("session.canvas.list", json!({})).expect("session.canvas.list");
    let listed = listed["canvases"].as_array().expect("a list").clone();
    let ids: Vec<(&str, &str)> =
        listed.iter().map(|c| (c["extensionId"].as_str().unwrap(), c["canvasId"].as_str().unwrap())).collect();
    assert_eq!(ids, [("app:test:1", "counter"), ("app:test:1", "broken")], "{listed:?}");
    assert_eq!(listed[0]["actions"][0], json!({"name": "increment", "description": "Add to the count"}));
    assert_eq!(listed[0]["inputSchema"]["properties"]["start"]["type"], "number");

    model.script(
        session.id(),
        vec![
            open("counter", "c1", json!({"start": 3})),
            invoke("c1", "increment", json!({"by": 2})),
            invoke("c1", "missing", json!({})),
            invoke("c1", "explode", json!({})),
            open("broken", "b1", json!({})),
            Reply::text("done"),
        ],
    );
    let reply = session.send_and_wait("Count with a canvas.", TURN).expect("the turn");
    assert!(matches!(reply.as_ref().map(|e| &e.kind), Some(EventKind::AssistantMessage(m)) if m.content == "done"));

    // What the agent read, call by call.
    let requests = model.requests_for(session.id());
    let results = requests.last().expect("the model was called").tool_results();
    assert_eq!(results.len(), 5, "{results:#?}");
    let opened: Value = serde_json::from_str(&results[0]).expect("the open's result, as JSON");
    assert_eq!(opened["url"], "https://example.test/counter/c1");
    assert_eq!(opened["title"], "Count");
    let action: Value = serde_json::from_str(&results[1]).expect("the action's result, as JSON");
    assert_eq!(action, json!({"result": {"count": 5}}), "the CLI hands the agent the result under `result`");
    assert!(results[2].ends_with("No handler implemented for this canvas action"), "{}", results[2]);
    assert!(results[3].contains("the counter exploded"), "a panic's text: {}", results[3]);
    assert!(results[4].ends_with("this canvas is broken"), "a handler's error: {}", results[4]);

    // The instances open, kept from the CLI's events: c1 (b1 never opened).
    let open = session.open_canvases();
    assert_eq!(open.len(), 1, "{open:?}");
    assert_eq!((&open[0]["instanceId"], &open[0]["url"]), (&json!("c1"), &json!("https://example.test/counter/c1")));
    // A resume's answer lists them: the session resumed (on this client:
    // the new handle takes the session over) starts with c1 open (the CLI
    // opens it again with its provider, the same provider id).
    let mut again = scripted_session(dir.path(), "canvas").on_permission_shared(approve_all());
    again.request_canvas_renderer = Some(true);
    // The same provider id: the instance stays this provider's.
    again.canvas_provider = config_provider();
    for c in canvases(&calls) {
        again = again.canvas(c);
    }
    let session = client.resume_session(session.id(), again).expect("resume");
    assert_eq!(session.open_canvases(), open, "as the resume's answer lists them");

    // The panel closed by the client: the CLI tells its canvas, and says so.
    let events = session.events();
    let closed = session.call_raw("session.canvas.close", json!({"instanceId": "c1"})).expect("close");
    assert_eq!(closed, Value::Null);
    let open_now = session.call_raw("session.canvas.listOpen", json!({})).expect("listOpen");
    assert_eq!(open_now["openCanvases"], json!([]), "c1 closed, b1 never opened");
    while events.next_timeout(TURN).expect("an event").expect("open").event_type() != "session.canvas.closed" {}
    assert_eq!(session.open_canvases(), Vec::<Value>::new(), "closed before the event was delivered");

    // Each request reached its handler once, with what the agent asked.
    let calls = calls.lock().unwrap().clone();
    let c1 = |what: &str, input: Option<Value>| (what.to_owned(), "counter".to_owned(), "c1".to_owned(), input);
    assert_eq!(
        calls,
        [
            c1("open", Some(json!({"start": 3}))),
            c1("increment", Some(json!({"by": 2}))),
            c1("explode", Some(json!({}))),
            // The resume under the same provider id restores the instance.
            c1("open", Some(json!({"start": 3}))),
            c1("close", None),
        ]
    );
    session.destroy().unwrap();
    client.stop().unwrap();
}

/// The extension options reach the CLI: with `request_extensions` the
/// session has the `extensions` capability and the agent is offered the
/// extension tools; `extension_info` and `extension_sdk_path` (a folder
/// that does not exist: the CLI falls back to its own SDK) are taken. A
/// session without them has neither.
#[test]
fn the_extension_options_reach_the_real_cli() {
    let dir = TempDir::new("copilot-extensions");
    let model = ScriptedModel::start().expect("start the scripted model");
    let client = Client::start(scripted_options(Transport::Stdio, dir.path(), &model)).expect("start the CLI");
    let mut with = scripted_session(dir.path(), "with");
    with.request_extensions = Some(true);
    with.extension_info = Some(ExtensionInfo { source: "github-app".into(), name: "test".into() });
    with.extension_sdk_path = Some(dir.path().join("no-such-sdk"));
    let without = scripted_session(dir.path(), "without");
    // The one without first: the CLI offers the extension tools to every
    // later session of a connection that asked for them once.
    for (config, on) in [(without, false), (with, true)] {
        let session = client.create_session(config).expect("create");
        assert_eq!(session.capabilities().extensions, on);
        assert!(!session.capabilities().ui.canvases, "no canvas renderer asked for");
        model.script(session.id(), vec![Reply::text("ok")]);
        session.send_and_wait("Hello", TURN).expect("the turn");
        let tools = model.requests_for(session.id()).last().expect("the model was called").tool_names();
        assert_eq!(tools.iter().any(|t| t == "extensions_manage"), on, "{tools:?}");
        assert!(!tools.iter().any(|t| t == "open_canvas"), "{tools:?}");
        session.destroy().unwrap();
    }
    client.stop().unwrap();
}

/// Async canvas handlers (`asynch::canvas`, `asynch::canvas_action`), each
/// awaiting work spawned on the caller's runtime, answer the real CLI's
/// requests through the async client.
#[test]
fn async_canvas_handlers_answer_the_real_cli() {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_time().build().unwrap();
    rt.block_on(async {
        let dir = TempDir::new("copilot-canvas-async");
        let model = ScriptedModel::start().expect("start the scripted model");
        let client = asynch::Client::start(scripted_options(Transport::Stdio, dir.path(), &model)).await.unwrap();
        let handle = tokio::runtime::Handle::current();
        let later = move |v: Value| {
            let handle = handle.clone();
            async move {
                let v = handle
                    .spawn(async move {
                        tokio::time::sleep(Duration::from_millis(20)).await;
                        v
                    })
                    .await
                    .unwrap();
                Ok(v)
            }
        };
        let (open_later, action_later) = (later.clone(), later);
        let counter = asynch::canvas("counter", "Counter", "Counts.", move |ctx: CanvasContext| {
            open_later(json!({ "title": format!("Count {}", ctx.instance_id) }))
        })
        .action(asynch::canvas_action("increment", move |ctx: CanvasContext| {
            action_later(json!({ "got": ctx.input }))
        }));
        let mut config = scripted_session(dir.path(), "async").on_permission_shared(approve_all()).canvas(counter);
        config.request_canvas_renderer = Some(true);
        let session = client.create_session(config).await.expect("create");
        model.script(
            session.id(),
            vec![open("counter", "c1", json!({})), invoke("c1", "increment", json!({"by": 1})), Reply::text("done")],
        );
        session.send_and_wait("Count.", TURN).await.expect("the turn");
        let results = model.requests_for(session.id()).last().expect("the model was called").tool_results();
        let opened: Value = serde_json::from_str(&results[0]).expect("the open's result");
        assert_eq!(opened["title"], "Count c1");
        let action: Value = serde_json::from_str(&results[1]).expect("the action's result");
        assert_eq!(action, json!({"result": {"got": {"by": 1}}}));
        assert_eq!(session.open_canvases().len(), 1);
        session.destroy().await.unwrap();
        client.stop().await.unwrap();
    });
}
