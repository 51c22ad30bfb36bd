//! What the simulated CLI does with each message of this client: the
//! session RPCs, the pending lists, the log, the answers to its waits (by
//! the answering method the answer table names), and the responses to its
//! server requests.

use copilot_core::{AnswerVia, Trigger, ANSWERS, EVENT_LOG_READ, PENDING_LISTS};
use serde_json::Value;

use super::ledger::{Client, Outcome, WaitKey, WaitState};
use super::session::Phase;
use super::{waits, Cli};

const NOT_FOUND: i64 = -32603;

impl Cli {
    /// Processes one message of this client, now that its time has come.
    pub(super) fn process(&mut self, now: u64, msg: Value) {
        let id = msg.get("id").cloned();
        let method = msg.get("method").and_then(Value::as_str).map(str::to_owned);
        let params = msg.get("params").cloned().unwrap_or(Value::Null);
        match (id, method) {
            (Some(id), Some(method)) => {
                self.ledger.requests += 1;
                self.request(now, &id, &method, &params);
            }
            (Some(Value::Number(id)), None) => match id.as_u64() {
                Some(id) => self.response(now, id, &msg),
                None => self.ledger.violation(now, format!("a response with id {id}")),
            },
            (_, method) => self.ledger.violation(now, format!("a message the CLI cannot take: {msg} ({method:?})")),
        }
    }

    fn reply(&mut self, id: &Value, result: &str) {
        self.ledger.answered_requests += 1;
        self.write(&format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{result}}}"#), None);
    }

    fn reply_error(&mut self, id: &Value, code: i64, message: &str) {
        self.ledger.answered_requests += 1;
        self.write(&format!(r#"{{"jsonrpc":"2.0","id":{id},"error":{{"code":{code},"message":"{message}"}}}}"#), None);
    }

    /// The session named by `params.sessionId`, if it is active.
    fn active(&self, params: &Value) -> Option<usize> {
        let s = self.find(params.get("sessionId")?.as_str()?)?;
        (self.sessions[s].phase == Phase::Active).then_some(s)
    }

    fn request(&mut self, now: u64, id: &Value, method: &str, params: &Value) {
        match method {
            "connect" | "ping" => self.reply(id, r#"{"protocolVersion":3,"version":"1.0.102"}"#),
            "session.create" => self.create(now, id, params),
            "session.resume" => self.resume(now, id, params),
            "session.destroy" => match self.find(params.get("sessionId").and_then(Value::as_str).unwrap_or("")) {
                Some(s) if self.sessions[s].phase != Phase::Ended => {
                    self.end(s, "its session was destroyed");
                    self.reply(id, r#"{"success":true}"#);
                }
                _ => self.reply(id, r#"{"success":false}"#),
            },
            "session.send" => match self.active(params) {
                Some(s) if self.sessions[s].this_attached => {
                    self.reply(id, &format!(r#"{{"messageId":"m-{}"}}"#, self.ledger.events.len()));
                    self.sessions[s].turn = true;
                    self.emit(now, s, "user.message", true, r#""content":"hi""#, None);
                    self.emit(now, s, copilot_core::TURN_START_EVENT, true, "", None);
                }
                _ => self.reply_error(id, NOT_FOUND, "Session not found"),
            },
            m if m == EVENT_LOG_READ => match self.active(params) {
                Some(s) => {
                    let result = self.sessions[s].read_log(params, self.profile.page_cap);
                    self.reply(id, &result);
                }
                None => self.reply_error(id, NOT_FOUND, "Session not found"),
            },
            m if PENDING_LISTS.iter().any(|l| l.method == m) => self.list(id, m, params),
            m => match ANSWERS.iter().position(|r| matches!(r.via, AnswerVia::Rpc { method, .. } if method == m)) {
                Some(_) => self.answer(now, id, m, params),
                None => self.reply_error(id, -32601, "Unhandled method"),
            },
        }
    }

    fn create(&mut self, now: u64, id: &Value, params: &Value) {
        if self.rng.chance(self.profile.reject_percent) {
            self.reply_error(id, NOT_FOUND, "Model not available");
            return;
        }
        let sid = match params.get("sessionId").and_then(Value::as_str) {
            Some(given) if self.find(given).is_none() => given.to_owned(),
            Some(_) => return self.reply_error(id, NOT_FOUND, "Session id in use"),
            None => format!("c{}-{}", self.conns, self.sessions.len()),
        };
        let s = self.add_session(sid.clone());
        self.sessions[s].this_attached = true;
        self.ledger.attached.push((sid.clone(), self.ledger.events.len() as u64));
        self.sessions[s].this_elicits = params.get("requestElicitation").and_then(Value::as_bool) == Some(true);
        if self.rng.chance(self.profile.share_percent) {
            self.share(s, true);
        }
        // The lifecycle notice comes before the answer, and sometimes
        // events (and a wait) of the session do too.
        self.lifecycle("session.created", &sid);
        if self.rng.chance(self.profile.early_percent) {
            for _ in 0..self.rng.range(1, 3) {
                self.emit(now, s, "session.tools_updated", false, "", None);
            }
            if self.rng.chance(30) {
                let row = self.random_event_row();
                self.raise(now, s, row);
            }
        }
        let caps = self.sessions[s].capabilities();
        self.sessions[s].told_elicitation = Some(self.sessions[s].elicitation());
        self.reply(id, &format!(r#"{{"sessionId":"{sid}","workspacePath":null,"capabilities":{caps}}}"#));
        self.emit(now, s, "session.start", true, r#""selectedModel":"claude-sonnet-4.5""#, None);
    }

    fn resume(&mut self, now: u64, id: &Value, params: &Value) {
        let Some(s) = self.find(params.get("sessionId").and_then(Value::as_str).unwrap_or("")) else {
            return self.reply_error(id, NOT_FOUND, "Session not found");
        };
        if self.sessions[s].phase == Phase::Ended {
            return self.reply_error(id, NOT_FOUND, "Session file is missing");
        }
        let carry_on = params.get(copilot_core::RECOVERY_RESUME_FLAG).and_then(Value::as_bool) == Some(true);
        let was_active = self.sessions[s].phase == Phase::Active;
        if !was_active && !carry_on {
            // The waits persisted from before are ended as interrupted.
            let sid = self.sessions[s].id.clone();
            for w in &mut self.ledger.waits {
                if w.session == sid && w.state == WaitState::Pending {
                    w.state = WaitState::Cancelled { why: "resumed without continuePendingWork" };
                }
            }
        }
        self.sessions[s].phase = Phase::Active;
        self.sessions[s].this_attached = true;
        let next = self.ledger.events.len() as u64;
        self.ledger.attached.push((self.sessions[s].id.clone(), next));
        self.sessions[s].this_elicits = params.get("requestElicitation").and_then(Value::as_bool) == Some(true);
        let members = format!(r#""continuePendingWork":{carry_on},"sessionWasActive":{was_active}"#);
        self.emit(now, s, "session.resume", true, &members, None);
        let sid = self.sessions[s].id.clone();
        let caps = self.sessions[s].capabilities();
        self.sessions[s].told_elicitation = Some(self.sessions[s].elicitation());
        self.reply(id, &format!(r#"{{"sessionId":"{sid}","workspacePath":null,"capabilities":{caps}}}"#));
    }

    /// A pending list: the session's waits of the list's row still pending.
    fn list(&mut self, id: &Value, method: &str, params: &Value) {
        let Some(s) = self.active(params) else { return self.reply_error(id, NOT_FOUND, "Session not found") };
        let list = PENDING_LISTS.iter().find(|l| l.method == method).expect("a list method");
        let sid = self.sessions[s].id.clone();
        let mut items = Vec::new();
        for w in &mut self.ledger.waits {
            let listed = matches!(ANSWERS[w.row].trigger, Trigger::Event(t) if t == list.event_type);
            if listed && w.session == sid && w.state == WaitState::Pending {
                if let WaitKey::Event { request_id } = &w.key {
                    items.extend(waits::list_item(w.row, request_id));
                    w.told_this = true;
                    w.listed += 1;
                }
            }
        }
        self.reply(id, &format!(r#"{{"items":[{}]}}"#, items.join(",")));
    }

    /// An answering RPC: the first answer to a pending wait resolves it
    /// (`*.completed` first, then `{success:true}`); any other gets
    /// `{success:false}`, as the real CLI answers an unknown or answered id.
    fn answer(&mut self, now: u64, id: &Value, method: &str, params: &Value) {
        let request_id = params.get("requestId").and_then(Value::as_str).unwrap_or("");
        let Some(w) = self.ledger.wait_by_request_id(request_id) else {
            // The event half of a double delivery is not answered by an
            // engine (the request is); anything else unknown is a bug.
            if !request_id.starts_with("u-") && !request_id.starts_with("h-") {
                self.ledger.violation(now, format!("{method} for requestId {request_id:?}, which no wait has"));
            }
            return self.reply(id, r#"{"success":false}"#);
        };
        let (row, session) = (self.ledger.waits[w].row, self.ledger.waits[w].session.clone());
        let Some((expected, key)) = waits::answer_method(&ANSWERS[row]) else { unreachable!("an event row") };
        if expected != method {
            let text = format!("wait {w} ({request_id}) answered with {method}; its row says {expected}");
            self.ledger.violation(now, text);
        }
        let given = params.get("sessionId").and_then(Value::as_str).unwrap_or("");
        if given != session {
            let text = format!("wait {w} of session {session} answered for session {given:?}");
            self.ledger.violation(now, text);
        }
        let payload = params.get(key).or_else(|| params.get("error")).map_or("-".into(), Value::to_string);
        let pending = self.ledger.waits[w].state == WaitState::Pending;
        let takes = pending && self.find(&session).is_some_and(|s| self.sessions[s].phase == Phase::Active);
        let outcome = match (takes, pending) {
            (true, _) => Outcome::Took,
            (false, true) => Outcome::NotLoaded,
            (false, false) => Outcome::Late,
        };
        let wait = &mut self.ledger.waits[w];
        wait.answers_from_this += u32::from(outcome != Outcome::NotLoaded);
        wait.answers.push((now, self.conn.unwrap_or(0), payload.clone(), outcome));
        wait.first_answer.get_or_insert(payload);
        if takes {
            self.resolve(now, w, Client::This);
            self.reply(id, r#"{"success":true}"#);
        } else {
            self.reply(id, r#"{"success":false}"#);
        }
    }

    /// A response to a server request: the wait's answer (a result or an
    /// error alike), taken if it is the first.
    fn response(&mut self, now: u64, id: u64, msg: &Value) {
        let conn = self.conn.unwrap_or(0);
        let key = WaitKey::Request { conn, id };
        let Some(w) = self.ledger.waits.iter().position(|w| w.key == key) else {
            self.ledger.stray_responses.push((now, conn, id));
            return;
        };
        let payload = msg.get("result").or_else(|| msg.get("error")).map_or("-".into(), Value::to_string);
        let wait = &mut self.ledger.waits[w];
        wait.answers_from_this += 1;
        let outcome = if wait.state == WaitState::Pending { Outcome::Took } else { Outcome::Late };
        wait.answers.push((now, conn, payload.clone(), outcome));
        wait.first_answer.get_or_insert(payload);
        if wait.state == WaitState::Pending {
            self.resolve(now, w, Client::This);
        }
    }
}
