//! A fake Copilot CLI for the conformance table of issue 8: every
//! obligation kind of `copilot_core::ANSWERS` x every way its answer can go
//! wrong, checked for exactly one answer with the expected payload.
//!
//! ```text
//! conformance_cli --stdio [--ack-delay-ms N]
//! ```
//!
//! It speaks the CLI's protocol over stdin/stdout (`connect`, `ping`,
//! `status.get`, `session.create` with or without a `sessionId`,
//! `session.resume`, `session.destroy`, other `session.*` calls answered
//! `{}`), plus three methods of its own that the client under test calls:
//!
//! - `conformance.rows` -> `{"rows": [{"row", "trigger": "event"|"request",
//!   "name", "handler", "unhandled": "leave"|"refuse", "via":
//!   "rpc"|"response", "method"?, "key"?}],
//!   "paths": [..]}`: the rows come from `copilot_core::ANSWERS`, so a kind
//!   added to the core cannot be left out of a client's table.
//! - `conformance.trigger` with `{"sessionId", "row", "path", "expect",
//!   "data"?, "fill"?}` sends the row's trigger (a `session.event` whose
//!   `data.requestId` names the cell, or a server request whose id names it)
//!   and then answers `{"cell", "requestId"}`, so when the client reads the
//!   answer its reader has already routed the trigger. `expect` is
//!   `"refusal"` (the row's default refusal must arrive),
//!   `{"answer": <payload>}` (the handler's answer: the value under the
//!   answering RPC's key, `null` for the key left out, or the response's
//!   `result`), `{"failure": <text>}` (the answering RPC with the text
//!   under the row's failure member and no answer: a failed tool),
//!   `{"error": <error>}` (a JSON-RPC error with each member given as
//!   given: a failed canvas handler's coded error) or
//!   `"nothing"` (no answer at all: a wait left to another client). `path` shapes the data: `drifted` sends only the
//!   `requestId` (and the session id) where the handler's types want more;
//!   `unreadable` makes every string of the data (but `sessionId`) a lone
//!   surrogate `"\udc00"` and adds a number `1e400`, which the wire accepts
//!   but typed readers may not; `parkOverflow` sends
//!   nothing yet: the next `session.create` without a `sessionId` first
//!   sends `fill` (default 10,000) `session.info` events for the id it
//!   assigns, then the trigger, then its answer. Other paths (`handler`,
//!   `noHandler`, `handlerPanics`, `deadline`, `sessionDropped`,
//!   `destroyedMidDecision`) send the default data; `data` replaces it.
//! - `conformance.report` -> `{"ok", "cells": [{"cell", "row", "name",
//!   "path", "expect", "answers": [..], "ok", "why"?}]}`: `ok` when every
//!   cell got exactly one answer with the expected payload (none where
//!   `"nothing"` is expected). The same JSON
//!   is printed as the last line on stderr when stdin ends.
//!
//! Answers are acknowledged `{"success": true}`, after `--ack-delay-ms`
//! each when given (one ack at a time, on a thread of their own, as a busy
//! CLI would).

use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::process::ExitCode;
use std::sync::mpsc;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use copilot_core::{frame_header, AnswerRow, AnswerVia, FrameDecoder, Refusal, Trigger, ANSWERS, MAX_FRAME_HEADER_LEN};
use serde_json::{json, Value};

/// The paths of the table, in order.
const PATHS: [&str; 9] = [
    "handler",
    "noHandler",
    "handlerPanics",
    "deadline",
    "unreadable",
    "drifted",
    "sessionDropped",
    "destroyedMidDecision",
    "parkOverflow",
];

/// Stands for the lone surrogate in data that serde cannot write.
const UNREADABLE_MARK: &str = "\u{1}unreadable\u{1}";
/// Stands for `1e400`.
const HUGE_MARK: &str = "\u{1}huge\u{1}";

#[derive(Clone)]
struct Writer(Arc<Mutex<io::Stdout>>);

impl Writer {
    fn frame(&self, body: &[u8]) {
        let mut header = [0; MAX_FRAME_HEADER_LEN];
        let n = frame_header(body.len(), &mut header);
        let mut frame = Vec::with_capacity(n + body.len());
        frame.extend_from_slice(&header[..n]);
        frame.extend_from_slice(body);
        let mut out = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        // A client that went away ends the run at the next read.
        let _ = out.write_all(&frame).and_then(|()| out.flush());
    }

    fn json(&self, v: &Value) {
        self.frame(&serde_json::to_vec(v).expect("serializable"));
    }

    fn result(&self, id: &Value, result: Value) {
        self.json(&json!({"jsonrpc": "2.0", "id": id, "result": result}));
    }

    fn error(&self, id: &Value, code: i64, message: &str) {
        self.json(&json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}}));
    }
}

/// One cell of the table.
struct Cell {
    cell: String,
    row: usize,
    path: String,
    expect: Value,
    answers: Vec<Value>,
}

/// A park-overflow trigger waiting for the next server-assigned create.
struct ParkPlan {
    cell: String,
    row: usize,
    data: Option<Value>,
    fill: usize,
}

struct State {
    out: Writer,
    acks: mpsc::Sender<Value>,
    cells: Vec<Cell>,
    by_id: HashMap<String, usize>,
    park: Option<ParkPlan>,
    next_session: u64,
    next_event: u64,
}

/// The default data of a trigger: what the client's typed readers expect.
fn default_data(row: usize, session_id: &str) -> Value {
    match ANSWERS[row].trigger {
        Trigger::Event(ty) => match ty {
            "permission.requested" => {
                json!({"permissionRequest": {"kind": "shell", "fullCommandText": "ls", "intention": "list"}})
            }
            "external_tool.requested" => {
                json!({"sessionId": session_id, "toolCallId": "call-1", "toolName": "conformance_tool", "arguments": {"x": 1}})
            }
            "elicitation.requested" => {
                json!({"message": "Pick one", "requestedSchema": {"type": "object", "properties": {}}})
            }
            "sampling.requested" => json!({"serverName": "srv", "mcpRequestId": "m-1", "request": {"messages": []}}),
            "auto_mode_switch.requested" => json!({"errorCode": "rate_limited"}),
            "session_limits_exhausted.requested" => json!({"limitType": "premium"}),
            "mcp.oauth_required" => {
                json!({"serverName": "srv", "serverUrl": "https://127.0.0.1/mcp", "reason": "initial"})
            }
            "mcp.headers_refresh_required" => json!({"serverName": "srv", "serverUrl": "https://127.0.0.1/mcp"}),
            "command.execute" => json!({"command": "/conformance a b", "commandName": "conformance", "args": "a b"}),
            "command.queued" => json!({"command": "/conformance"}),
            _ => json!({}),
        },
        Trigger::Request(method) => {
            let mut p = match method {
                "userInput.request" => json!({"question": "Which?", "choices": ["a", "b"], "allowFreeform": true}),
                "exitPlanMode.request" => {
                    json!({"summary": "plan", "planContent": "do it", "actions": ["exit_only"], "recommendedAction": "exit_only"})
                }
                "autoModeSwitch.request" => json!({"errorCode": "rate_limited"}),
                "systemMessage.transform" => json!({"sections": {}}),
                "hooks.invoke" => json!({"hookType": "preToolUse", "input": {}}),
                "canvas.open" | "canvas.close" => {
                    json!({"extensionId": "connection:1", "canvasId": "conformance", "instanceId": "i-1"})
                }
                "canvas.action.invoke" => json!({"extensionId": "connection:1", "canvasId": "conformance",
                    "instanceId": "i-1", "actionName": "act", "input": {"x": 1}}),
                _ => json!({}),
            };
            p["sessionId"] = session_id.into();
            p
        }
    }
}

/// The data of a cell's trigger, shaped by its path.
fn trigger_data(row: usize, path: &str, session_id: &str, data: Option<Value>) -> Value {
    let mut d = match (path, data) {
        (_, Some(d)) => d,
        ("drifted", None) => match ANSWERS[row].trigger {
            Trigger::Event(_) => json!({"drift": true}),
            Trigger::Request(_) => json!({"sessionId": session_id, "drift": true}),
        },
        (_, None) => default_data(row, session_id),
    };
    if path == "unreadable" {
        mark_strings(&mut d);
        if let Some(o) = d.as_object_mut() {
            o.insert("unreadable".into(), UNREADABLE_MARK.into());
            o.insert("huge".into(), HUGE_MARK.into());
        }
    }
    d
}

/// Makes every string of the data (but the session id) a lone surrogate.
fn mark_strings(v: &mut Value) {
    match v {
        Value::String(s) => *s = UNREADABLE_MARK.into(),
        Value::Array(a) => a.iter_mut().for_each(mark_strings),
        Value::Object(o) => o.iter_mut().filter(|(k, _)| *k != "sessionId").for_each(|(_, v)| mark_strings(v)),
        _ => {}
    }
}

/// Writes `v` with the marks replaced by what serde cannot write.
fn raw_text(v: &Value) -> Vec<u8> {
    let text = serde_json::to_string(v).expect("serializable");
    let marked = |m: &str| serde_json::to_string(m).expect("serializable");
    text.replace(&marked(UNREADABLE_MARK), r#""\udc00""#).replace(&marked(HUGE_MARK), "1e400").into_bytes()
}

impl State {
    fn trigger_frame(&mut self, cell: &str, row: usize, path: &str, session_id: &str, data: Option<Value>) -> Vec<u8> {
        let mut d = trigger_data(row, path, session_id, data);
        match ANSWERS[row].trigger {
            Trigger::Event(ty) => {
                if let Some(o) = d.as_object_mut() {
                    o.insert("requestId".into(), cell.into());
                }
                self.next_event += 1;
                raw_text(&json!({
                    "jsonrpc": "2.0",
                    "method": "session.event",
                    "params": {"sessionId": session_id, "event": {
                        "type": ty, "data": d, "id": format!("ev-{}", self.next_event),
                        "timestamp": "2026-01-01T00:00:00.000Z", "parentId": null}},
                }))
            }
            Trigger::Request(method) => raw_text(&json!({"jsonrpc": "2.0", "id": cell, "method": method, "params": d})),
        }
    }

    fn trigger(&mut self, id: &Value, p: &Value) {
        let row = p.get("row").and_then(Value::as_u64).map(|r| r as usize).filter(|r| *r < ANSWERS.len());
        let path = p.get("path").and_then(Value::as_str).filter(|s| PATHS.contains(s));
        let (Some(row), Some(path), Some(expect)) = (row, path, p.get("expect")) else {
            return self.out.error(id, -32602, "conformance.trigger needs row, path (one of the paths) and expect");
        };
        let failure = expect.get("failure").is_some() && ANSWERS[row].failure().is_some();
        let coded = expect.get("error").is_some() && ANSWERS[row].failure_error().is_some();
        let valid_expect =
            expect == "refusal" || expect == "nothing" || expect.get("answer").is_some() || failure || coded;
        if !valid_expect {
            let message =
                "expect is \"refusal\", \"nothing\", {\"answer\": payload}, {\"failure\": text} or {\"error\": error}";
            return self.out.error(id, -32602, message);
        }
        let cell = format!("c-{}", self.cells.len());
        self.by_id.insert(cell.clone(), self.cells.len());
        self.cells.push(Cell {
            cell: cell.clone(),
            row,
            path: path.into(),
            expect: expect.clone(),
            answers: Vec::new(),
        });
        let data = p.get("data").cloned();
        if path == "parkOverflow" {
            let fill = p.get("fill").and_then(Value::as_u64).unwrap_or(10_000) as usize;
            self.park = Some(ParkPlan { cell: cell.clone(), row, data, fill });
        } else {
            let sid = p.get("sessionId").and_then(Value::as_str).unwrap_or_default().to_owned();
            let frame = self.trigger_frame(&cell, row, path, &sid, data);
            self.out.frame(&frame);
        }
        self.out.result(id, json!({"cell": cell, "requestId": cell}));
    }

    fn open(&mut self, id: &Value, p: &Value, resume: bool) {
        let sid = match p.get("sessionId").and_then(Value::as_str) {
            Some(s) => s.to_owned(),
            None => {
                self.next_session += 1;
                format!("conf-{}", self.next_session)
            }
        };
        let assigned = p.get("sessionId").is_none() && !resume;
        if let (true, Some(plan)) = (assigned, self.park.take()) {
            for n in 0..plan.fill {
                self.next_event += 1;
                self.out.json(&json!({"jsonrpc": "2.0", "method": "session.event", "params": {"sessionId": sid,
                    "event": {"type": "session.info", "data": {"infoType": "fill", "message": n.to_string()},
                    "id": format!("ev-{}", self.next_event), "timestamp": "2026-01-01T00:00:00.000Z", "parentId": null}}}));
            }
            let frame = self.trigger_frame(&plan.cell, plan.row, "parkOverflow", &sid, plan.data);
            self.out.frame(&frame);
        }
        self.out.result(
            id,
            json!({"sessionId": sid, "nativeSessionId": sid, "startTime": "2026-01-01T00:00:00.000Z",
                "isRemote": false, "mode": "interactive", "workspacePath": "/tmp/conformance",
                "modelState": {"modelId": "fake-model"}}),
        );
    }

    /// A client request: an answer of a cell, or a call to serve.
    fn request(&mut self, id: Value, method: &str, p: Value) {
        let rpc_row = ANSWERS.iter().position(|r| matches!(r.via, AnswerVia::Rpc { method: m, .. } if m == method));
        if rpc_row.is_some() {
            let cell = p.get("requestId").and_then(Value::as_str).and_then(|c| self.by_id.get(c)).copied();
            match cell {
                Some(c) => self.cells[c].answers.push(json!({"method": method, "params": p})),
                None => eprintln!("conformance_cli: answer for no cell: {method} {p}"),
            }
            let _ = self.acks.send(id);
            return;
        }
        match method {
            "connect" => self.out.result(&id, json!({"ok": true, "protocolVersion": 3, "version": "conformance"})),
            "ping" => self.out.result(&id, json!({"message": "pong", "timestamp": 0, "protocolVersion": 3})),
            "status.get" => self.out.result(&id, json!({"version": "conformance", "protocolVersion": 3})),
            "session.create" => self.open(&id, &p, false),
            "session.resume" => self.open(&id, &p, true),
            "session.destroy" => {
                let sid = p.get("sessionId").cloned().unwrap_or(Value::Null);
                self.next_event += 1;
                self.out.json(&json!({"jsonrpc": "2.0", "method": "session.event", "params": {"sessionId": sid,
                    "event": {"type": "session.shutdown", "data": {}, "id": format!("ev-{}", self.next_event),
                    "timestamp": "2026-01-01T00:00:00.000Z", "parentId": null}}}));
                self.out.result(&id, json!({"success": true}));
            }
            "conformance.rows" => self.out.result(&id, rows()),
            "conformance.trigger" => self.trigger(&id, &p),
            "conformance.report" => self.out.result(&id, self.report()),
            m if m.starts_with("session.") => self.out.result(&id, json!({})),
            other => self.out.error(&id, -32601, &format!("Method not found: {other}")),
        }
    }

    fn report(&self) -> Value {
        let cells: Vec<Value> = self.cells.iter().map(check).collect();
        let ok = cells.iter().all(|c| c["ok"] == true);
        json!({"ok": ok, "cells": cells})
    }
}

fn rows() -> Value {
    let rows: Vec<Value> = ANSWERS
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let (trigger, name) = match r.trigger {
                Trigger::Event(t) => ("event", t),
                Trigger::Request(m) => ("request", m),
            };
            let unhandled = if r.leaves_unhandled() { "leave" } else { "refuse" };
            let mut row =
                json!({"row": i, "trigger": trigger, "name": name, "handler": r.handler.name(), "unhandled": unhandled});
            match r.via {
                AnswerVia::Rpc { method, key } => {
                    row["via"] = "rpc".into();
                    row["method"] = method.into();
                    row["key"] = key.into();
                }
                AnswerVia::Response { member } => {
                    row["via"] = "response".into();
                    row["member"] = member.into();
                }
            }
            row
        })
        .collect();
    json!({"rows": rows, "paths": PATHS})
}

/// Whether a cell got exactly one answer, with the expected payload.
fn check(c: &Cell) -> Value {
    let row = &ANSWERS[c.row];
    let name = match row.trigger {
        Trigger::Event(t) | Trigger::Request(t) => t,
    };
    let why = match (c.expect == "nothing", c.answers.as_slice()) {
        (true, []) => None,
        (true, some) => Some(format!("{} answers where none should go", some.len())),
        (false, []) => Some("no answer".to_owned()),
        (false, [one]) => mismatch(row, &c.expect, one),
        (false, many) => Some(format!("{} answers", many.len())),
    };
    let mut v = json!({"cell": c.cell, "row": c.row, "name": name, "path": c.path, "expect": c.expect,
        "answers": c.answers, "ok": why.is_none()});
    if let Some(why) = why {
        v["why"] = why.into();
    }
    v
}

fn mismatch(row: &AnswerRow, expect: &Value, got: &Value) -> Option<String> {
    let parse = |s: &str| serde_json::from_str::<Value>(s).expect("the table's refusals are JSON");
    let refusal = row.refusal;
    if let (Some(text), Some(member), AnswerVia::Rpc { key, .. }) = (expect.get("failure"), row.failure(), row.via) {
        let (got_text, got_key) = (got["params"].get(member), got["params"].get(key));
        return (got_text != Some(text) || got_key.is_some())
            .then(|| format!("expected {member}: {text} and no {key}, got {got}"));
    }
    if let Some(error) = expect.get("error").and_then(Value::as_object) {
        // A failed handler's coded error: each member given (code,
        // message, data) as given.
        let same = error.iter().all(|(k, v)| got["error"].get(k) == Some(v));
        return (!same || got.get("result").is_some()).then(|| format!("expected the error {error:?}, got {got}"));
    }
    match row.via {
        AnswerVia::Rpc { key, .. } => {
            let got = got["params"].get(key);
            let want = match (expect.get("answer"), refusal) {
                (Some(Value::Null), _) => None,
                (Some(a), _) => Some(a.clone()),
                (None, Refusal::Payload(p)) => Some(parse(p)),
                (None, Refusal::Omit | Refusal::Error { .. }) => None,
            };
            (got != want.as_ref()).then(|| format!("{key}: expected {want:?}, got {got:?}"))
        }
        AnswerVia::Response { member } => {
            // The result: the answer, or `{"<member>": answer}` (`{}` for none).
            let result = |a: Option<Value>| match (member, a) {
                (None, a) => a.unwrap_or(Value::Null),
                (Some(_), None | Some(Value::Null)) => json!({}),
                (Some(key), Some(a)) => json!({ key: a }),
            };
            let want = match (expect.get("answer"), refusal) {
                (Some(a), _) => json!({"result": result(Some(a.clone()))}),
                (None, Refusal::Payload(p)) => json!({"result": result(Some(parse(p)))}),
                (None, Refusal::Omit) => json!({"result": result(None)}),
                (None, Refusal::Error { code, .. }) => json!({"error": {"code": code}}),
            };
            let same = match (want.get("error"), got.get("error")) {
                (Some(w), Some(g)) => w["code"] == g["code"],
                (Some(_), None) | (None, Some(_)) => false,
                (None, None) => want.get("result") == got.get("result"),
            };
            (!same).then(|| format!("expected {want}, got {got}"))
        }
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if !args.iter().any(|a| a == "--stdio") {
        eprintln!("conformance_cli: only --stdio is served (argv: {args:?})");
        return ExitCode::from(2);
    }
    let ack_delay = args
        .iter()
        .position(|a| a == "--ack-delay-ms")
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse::<u64>().ok())
        .map(Duration::from_millis)
        .unwrap_or_default();
    let out = Writer(Arc::new(Mutex::new(io::stdout())));
    let (acks, ack_rx) = mpsc::channel::<Value>();
    let ack_out = out.clone();
    let acker = std::thread::Builder::new()
        .name("conformance-acks".into())
        .spawn(move || {
            for id in ack_rx {
                if !ack_delay.is_zero() {
                    std::thread::sleep(ack_delay);
                }
                ack_out.result(&id, json!({"success": true}));
            }
        })
        .expect("spawn the ack thread");
    let mut state =
        State { out, acks, cells: Vec::new(), by_id: HashMap::new(), park: None, next_session: 0, next_event: 0 };
    let mut decoder: FrameDecoder<Vec<u8>> = FrameDecoder::with_buffer(vec![0; 16 << 20]);
    let mut stdin = io::stdin().lock();
    let mut buf = vec![0; 64 * 1024];
    'read: loop {
        let n = match stdin.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        let mut fed = 0;
        while fed < n {
            fed += decoder.feed(&buf[fed..n]);
            while let Some(frame) = decoder.poll() {
                let Ok(body) = frame else { break 'read };
                let Ok(msg) = serde_json::from_slice::<Value>(body) else { continue };
                let method = msg.get("method").and_then(Value::as_str).map(str::to_owned);
                let params = msg.get("params").cloned().unwrap_or(Value::Null);
                match (msg.get("id").cloned(), method) {
                    (Some(id), Some(m)) => state.request(id, &m, params),
                    (None, Some(_)) => {} // a notification
                    (Some(id), None) => {
                        // A response: the answer to a server request of a cell.
                        let cell = id.as_str().and_then(|c| state.by_id.get(c)).copied();
                        match cell {
                            Some(c) => state.cells[c].answers.push(msg.clone()),
                            None => eprintln!("conformance_cli: response for no cell: {msg}"),
                        }
                    }
                    (None, None) => {}
                }
            }
        }
    }
    let report = state.report();
    drop(state);
    let _ = acker.join();
    eprintln!("{report}");
    if report["ok"] == true {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
