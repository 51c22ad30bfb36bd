//! The conformance table of issue 8 for the Rust host: every obligation kind
//! of `copilot_core::ANSWERS` x every way its answer can go wrong, over the
//! `conformance_cli` fake, which checks that exactly one answer with the
//! expected payload reached it for each cell.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use copilot_host::events::{CommandExecuteData, ElicitationRequestedData, McpOauthRequiredData};
use copilot_host::{
    generic_request_names, Canvas, CanvasAction, CanvasContext, Client, ClientOptions, Command, ElicitationResponse,
    ExitPlanModeRequest, ExitPlanModeResponse, IncomingRequest, OAuthToken, PermissionDecision, PermissionRequest,
    PreToolUseOutput, SessionConfig, SessionHooks, Tool, ToolInvocation, ToolResult, UserInputRequest,
    UserInputResponse,
};
use serde_json::{json, Value};

/// The handler kinds this host has typed handlers for.
const TYPED_KINDS: [&str; 9] =
    ["permission", "tool", "elicitation", "mcpOAuth", "command", "userInput", "exitPlanMode", "hooks", "canvas"];

/// The kinds answered by a generic handler (`on_request`).
const GENERIC_KINDS: [&str; 14] = [
    "mcpHeadersRefresh",
    "autoModeSwitch",
    "sampling",
    "sessionLimits",
    "queuedCommand",
    "gitHubToken",
    "sessionFs",
    "skillProvider",
    "workflow",
    "tasks",
    "host",
    "extensionLaunch",
    "uiThread",
    "installations",
];

/// Whether this host has a handler for the kind (typed or generic).
fn handled(kind: &str) -> bool {
    TYPED_KINDS.contains(&kind) || GENERIC_KINDS.contains(&kind)
}

/// What this host's handlers answer, per row (the payload the CLI must get).
fn handler_answer(row: &Row) -> Value {
    let kind = row.handler.as_str();
    if GENERIC_KINDS.contains(&kind) {
        return json!({"answeredBy": row.name});
    }
    match kind {
        "permission" => json!({"kind": "approve-once"}),
        "tool" => json!({"textResultForLlm": "ran", "resultType": "success"}),
        "elicitation" => json!({"action": "decline"}),
        "mcpOAuth" => json!({"kind": "token", "accessToken": "tok"}),
        "command" => Value::Null,
        "userInput" => json!({"answer": "a", "wasFreeform": false}),
        "exitPlanMode" => json!({"approved": true}),
        "hooks" => json!({"permissionDecision": "allow"}),
        "canvas" => match row.name.as_str() {
            "canvas.open" => json!({"url": "https://example.test/i-1"}),
            "canvas.close" => Value::Null,
            _ => json!({"acted": {"x": 1}}),
        },
        other => panic!("no handler for {other}"),
    }
}

/// How the handlers behave.
#[derive(Clone, Copy, PartialEq)]
enum Mode {
    Answer,
    Panic,
    /// Block until the gate opens, then answer.
    Gated,
}

/// A gate the blocking handlers wait on, and counts of entries and returns.
#[derive(Default)]
struct Gate {
    open: Mutex<bool>,
    changed: Condvar,
    entered: AtomicUsize,
    returned: AtomicUsize,
}

impl Gate {
    fn pass(&self) {
        self.entered.fetch_add(1, Ordering::SeqCst);
        let mut open = self.open.lock().unwrap();
        while !*open {
            open = self.changed.wait(open).unwrap();
        }
    }

    fn set(&self, value: bool) {
        *self.open.lock().unwrap() = value;
        self.changed.notify_all();
    }
}

/// Runs `f` as a handler in `mode`.
fn act<T>(mode: Mode, gate: &Gate, f: impl FnOnce() -> T) -> T {
    match mode {
        Mode::Answer => f(),
        Mode::Panic => panic!("a handler that fails"),
        Mode::Gated => {
            gate.pass();
            let v = f();
            gate.returned.fetch_add(1, Ordering::SeqCst);
            v
        }
    }
}

fn handlers(mode: Mode, gate: &Arc<Gate>) -> SessionConfig {
    let g = Arc::clone(gate);
    let mut config = SessionConfig::default()
        .on_permission(move |_: &PermissionRequest| act(mode, &g, || PermissionDecision::ApproveOnce));
    let g = Arc::clone(gate);
    config =
        config.tool(Tool::new("conformance_tool", "a tool", json!({"type": "object"}), move |_: &ToolInvocation| {
            act(mode, &g, || ToolResult::Text("ran".into()))
        }));
    let g = Arc::clone(gate);
    config = config.on_elicitation(move |_: &ElicitationRequestedData| act(mode, &g, || ElicitationResponse::Decline));
    let g = Arc::clone(gate);
    config = config.on_mcp_oauth(move |_: &McpOauthRequiredData| {
        act(mode, &g, || Some(OAuthToken { access_token: "tok".into(), token_type: None, expires_in: None }))
    });
    let g = Arc::clone(gate);
    config = config
        .command(Command::new("conformance", "a command", move |_: &CommandExecuteData| act(mode, &g, || Ok(()))));
    let g = Arc::clone(gate);
    config = config.on_user_input(move |_: &UserInputRequest| {
        act(mode, &g, || Some(UserInputResponse { answer: "a".into(), was_freeform: false }))
    });
    let g = Arc::clone(gate);
    config = config.on_exit_plan_mode(move |_: &ExitPlanModeRequest| {
        act(mode, &g, || ExitPlanModeResponse { approved: true, selected_action: None, feedback: None })
    });
    let g = Arc::clone(gate);
    config = config
        .hooks(SessionHooks::new().on_pre_tool_use(move |_, _| act(mode, &g, || Some(PreToolUseOutput::allow()))));
    let (g, close, action) = (Arc::clone(gate), Arc::clone(gate), Arc::clone(gate));
    let canvas = Canvas::new("conformance", "Conformance", "a canvas", move |_: &CanvasContext| {
        act(mode, &g, || Ok(json!({"url": "https://example.test/i-1"})))
    })
    .on_close(move |_: &CanvasContext| act(mode, &close, || Ok(())))
    .action(CanvasAction::new("act", move |c: &CanvasContext| act(mode, &action, || Ok(json!({"acted": c.input})))));
    config = config.canvas(canvas);
    for name in generic_request_names() {
        let g = Arc::clone(gate);
        config =
            config.on_request(name, move |r: &IncomingRequest| act(mode, &g, || Ok(json!({"answeredBy": r.name}))));
    }
    config
}

fn options(handler_timeout: Duration) -> ClientOptions {
    ClientOptions {
        cli_path: Some(env!("CARGO_BIN_EXE_conformance_cli").into()),
        handler_timeout,
        ..ClientOptions::default()
    }
}

fn start(handler_timeout: Duration) -> Client {
    Client::start(options(handler_timeout)).expect("start the conformance CLI")
}

struct Row {
    row: u64,
    name: String,
    handler: String,
    /// Raised by an event (else a server request).
    event: bool,
    /// Left to another client of the session by a client without the
    /// handler (the core's table), else refused.
    leaves: bool,
}

fn rows(client: &Client) -> Vec<Row> {
    let v = client.call("conformance.rows", &json!({})).expect("rows");
    let rows: Vec<Row> = v["rows"]
        .as_array()
        .expect("rows")
        .iter()
        .map(|r| Row {
            row: r["row"].as_u64().unwrap(),
            name: r["name"].as_str().unwrap().to_owned(),
            handler: r["handler"].as_str().unwrap().to_owned(),
            event: r["trigger"] == "event",
            leaves: r["unhandled"] == "leave",
        })
        .collect();
    assert_eq!(rows.len(), copilot_host::core::ANSWERS.len(), "one row per obligation kind of the core");
    rows
}

fn trigger(client: &Client, session: &str, row: &Row, path: &str, expect: Value) {
    let params = json!({"sessionId": session, "row": row.row, "path": path, "expect": expect});
    client.call("conformance.trigger", &params).unwrap_or_else(|e| panic!("trigger {} {path}: {e}", row.name));
}

/// Waits for `done` (a safety bound only: the order of events decides).
fn wait_for(what: &str, done: impl Fn() -> bool) {
    let until = Instant::now() + Duration::from_secs(60);
    while !done() {
        assert!(Instant::now() < until, "waited a minute for {what}");
        std::thread::sleep(Duration::from_millis(2));
    }
}

fn expect_answer_if(has_handler: bool, row: &Row) -> Value {
    if has_handler {
        json!({"answer": handler_answer(row)})
    } else {
        json!("refusal")
    }
}

fn check(report: &Value, cells: usize) {
    let bad: Vec<&Value> = report["cells"].as_array().unwrap().iter().filter(|c| c["ok"] != true).collect();
    assert!(bad.is_empty(), "{} of {} cells failed: {:#}", bad.len(), cells, json!(bad));
    assert_eq!(report["cells"].as_array().unwrap().len(), cells);
}

/// The paths that need a handler still running when the answer is decided:
/// past the handler's deadline, and the session destroyed meanwhile. The
/// late answers come before the report is asked for.
#[test]
fn late_answers_are_not_sent_after_a_deadline_or_a_destroy() {
    let client = start(Duration::from_millis(200));
    let rows = rows(&client);
    let mut cells = 0;

    // Past the deadline: the engine refuses, the handler's answer is dropped.
    let gate = Arc::new(Gate::default());
    let session = client.create_session(handlers(Mode::Gated, &gate)).expect("create");
    for row in &rows {
        let refused = client.engine_stats().refused(copilot_host::core::Cause::Deadline);
        let entered = gate.entered.load(Ordering::SeqCst);
        trigger(&client, session.id(), row, "deadline", json!("refusal"));
        cells += 1;
        if handled(&row.handler) {
            wait_for("the handler", || gate.entered.load(Ordering::SeqCst) > entered);
            wait_for("the deadline's refusal", || {
                client.engine_stats().refused(copilot_host::core::Cause::Deadline) > refused
            });
            gate.set(true);
            wait_for("the late answer", || gate.returned.load(Ordering::SeqCst) > entered);
            gate.set(false);
        }
    }
    drop(session);

    // Destroyed while the handler decides: the release refuses.
    for row in &rows {
        let gate = Arc::new(Gate::default());
        let session = client.create_session(handlers(Mode::Gated, &gate)).expect("create");
        trigger(&client, session.id(), row, "destroyedMidDecision", json!("refusal"));
        cells += 1;
        let has = handled(&row.handler);
        if has {
            wait_for("the handler", || gate.entered.load(Ordering::SeqCst) == 1);
        }
        session.destroy().expect("destroy");
        gate.set(true);
        if has {
            wait_for("the late answer", || gate.returned.load(Ordering::SeqCst) == 1);
        }
    }
    // Every late answer has been passed to the engine before this request.
    let report = client.call("conformance.report", &json!({})).expect("report");
    check(&report, cells);
    client.stop().expect("stop");
}

#[test]
fn every_obligation_kind_is_answered_once_whatever_goes_wrong() {
    let client = start(Duration::from_secs(300));
    let rows = rows(&client);
    let never = Arc::new(Gate::default());
    let answering = client.create_session(handlers(Mode::Answer, &never)).expect("create");
    let bare = client.create_session(SessionConfig::default()).expect("create");
    let panicking = client.create_session(handlers(Mode::Panic, &never)).expect("create");
    let mut cells = 0;
    for row in &rows {
        let has = handled(&row.handler);
        let kind = row.handler.as_str();
        trigger(&client, answering.id(), row, "handler", expect_answer_if(has, row));
        // Without a handler, a wait the CLI sends to every client of the
        // session is left to the one that has the handler: nothing goes.
        let unhandled = if row.leaves { json!("nothing") } else { json!("refusal") };
        trigger(&client, bare.id(), row, "noHandler", unhandled);
        // A tool that panics is a tool that failed: its text goes as the
        // call's `error` (no result), as the official SDKs send it; the CLI
        // tells the model only that the tool failed.
        // A canvas handler that panics: the coded error, as the official
        // SDKs answer a handler that throws.
        let panicked = "the handler panicked: a handler that fails";
        let panics = match kind {
            "tool" => json!({"failure": panicked}),
            "canvas" => json!({"error": {"code": -32603, "message": panicked,
                "data": {"code": "canvas_handler_error", "message": panicked}}}),
            _ => json!("refusal"),
        };
        trigger(&client, panicking.id(), row, "handlerPanics", panics);
        // Data the wire accepts but serde cannot read (lone surrogates):
        // the handler's types cannot be filled, the refusal goes.
        trigger(&client, answering.id(), row, "unreadable", json!("refusal"));
        // Data without the fields the handler's types need: refused, except
        // where every field is optional (exit plan mode) or the handler
        // reads JSON as it comes (the generic ones).
        let reads_any = kind == "exitPlanMode" || GENERIC_KINDS.contains(&kind);
        trigger(&client, answering.id(), row, "drifted", expect_answer_if(has && reads_any, row));
        cells += 5;

        let dropped = client.create_session(handlers(Mode::Answer, &never)).expect("create");
        let id = dropped.id().to_owned();
        drop(dropped);
        trigger(&client, &id, row, "sessionDropped", json!("refusal"));
        cells += 1;

        // The trigger comes as the 10,001st frame parked for a create whose
        // id the server assigns: past the parking bound, refused.
        let params = json!({"row": row.row, "path": "parkOverflow", "expect": "refusal", "fill": 10_000});
        client.call("conformance.trigger", &params).expect("park trigger");
        let config = SessionConfig { server_assigned_id: true, ..handlers(Mode::Answer, &never) };
        let parked = client.create_session(config).expect("server-assigned create");
        drop(parked);
        cells += 1;
    }
    let report = client.call("conformance.report", &json!({})).expect("report");
    check(&report, cells);

    // Every waiting event is delivered too, whatever its data: the first
    // subscriber gets the handler, unreadable and drifted ones, in order,
    // the unreadable ones raw (as `Other`, their data as text).
    let events = answering.events();
    for row in rows.iter().filter(|r| r.event) {
        for path in ["handler", "unreadable", "drifted"] {
            let e = loop {
                let e = events.next_timeout(Duration::from_secs(60)).expect("open").expect("an event");
                if e.event_type() == row.name {
                    break e;
                }
            };
            if path == "unreadable" {
                match &e.kind {
                    copilot_host::EventKind::Other { data, .. } => {
                        assert!(data.as_str().is_some_and(|d| d.contains(r"\udc00")), "{e:?}")
                    }
                    _ => panic!("{} with lone surrogates is delivered raw: {e:?}", row.name),
                }
            }
        }
    }
    let stats = client.engine_stats();
    assert_eq!(stats.open_obligations, 0, "{stats:?}");
    client.stop().expect("stop");
}

/// Requests that name no session go to the client's generic handlers: the
/// handler's answer, its failure's refusal, and the refusal for kinds no
/// client-wide handler answers.
#[test]
fn client_wide_requests_are_answered_by_the_client_handlers() {
    let mut options = options(Duration::from_secs(300));
    for name in generic_request_names() {
        options = options.on_request(name, |r: &IncomingRequest| match r.params.get("fail") {
            Some(_) => Err("asked to fail".to_owned()),
            None => Ok(json!({"answeredBy": r.name, "session": r.session_id})),
        });
    }
    let client = Client::start(options).expect("start the conformance CLI");
    let rows = rows(&client);
    let mut cells = 0;
    for row in rows.iter().filter(|r| !r.event) {
        let generic = GENERIC_KINDS.contains(&row.handler.as_str());
        let expect = match generic {
            true => json!({"answer": {"answeredBy": row.name, "session": null}}),
            false => json!("refusal"),
        };
        for (path, data, expect) in
            [("handler", json!({}), expect), ("handlerPanics", json!({"fail": true}), json!("refusal"))]
        {
            let params = json!({"row": row.row, "path": path, "expect": expect, "data": data});
            client.call("conformance.trigger", &params).expect("trigger");
            cells += 1;
        }
    }
    // Every answer is queued before the report is asked for.
    wait_for("every answer", || client.engine_stats().open_obligations == 0);
    let report = client.call("conformance.report", &json!({})).expect("report");
    check(&report, cells);
    client.stop().expect("stop");
}

#[test]
fn a_request_handler_for_a_name_no_generic_handler_answers_is_refused_at_once() {
    let client = start(Duration::from_secs(300));
    let config = SessionConfig::default().on_request("permission.requested", |_: &IncomingRequest| Ok(json!({})));
    let Err(e) = client.create_session(config) else { panic!("a handler for permission.requested is refused") };
    assert!(e.to_string().contains("permission.requested"), "{e}");
    let options = options(Duration::from_secs(1)).on_request("sessionFs.nope", |_: &IncomingRequest| Ok(json!({})));
    let Err(e) = Client::start(options) else { panic!("a handler for sessionFs.nope is refused") };
    assert!(e.to_string().contains("sessionFs.nope"), "{e}");
    client.stop().expect("stop");
}
