//! What the host does with each [`Output`] of the engine: the frames fed
//! in, each route acted on, the opens completed, the lists handed back.
//! An output is first copied into a [`Digest`] (it borrows the decoder or
//! the engine), then acted on with the engine free again.

use copilot_core::{
    event_id_hash, row_for_event, row_for_request, Id, JsonStr, Obligation, Output, RequestId, Route, Trigger, Value,
    ANSWERS,
};

use super::{Fate, Fault, Host, RecState, Waiter};

/// An output, owned.
#[derive(Debug)]
pub(super) enum Digest {
    /// An event delivered to session `key`.
    Event {
        key: u32,
        wire_sid: String,
        n: Option<u64>,
        id_hash: Option<u64>,
        ob: Option<(Obligation, usize, String)>,
        /// The tag of a wait the engine refused at once.
        refused: Option<String>,
    },
    /// A server request that became an obligation (or was refused: its tag).
    Request { session: Option<u32>, ob: Option<(Obligation, usize, String)>, refused: Option<String> },
    /// The response to a request of the host's.
    Response { id: RequestId, waiter: Waiter, result: Result<Vec<u8>, String> },
    /// A lifecycle notice or another notification.
    Notice,
    /// Kept by the engine (parked: `kept` names the event), or lost to a
    /// full parking storage (`dropped`).
    Park { dropped: Option<u64>, kept: Option<u64>, refused: Option<String> },
    /// An event or request for a session not in the table (the tag of a
    /// wait refused).
    Unknown { sid: String, n: Option<u64>, refused: Option<String> },
    /// A response matching no request of the host's.
    Unmatched { engine_own: bool },
    /// A frame the engine could not read.
    Broken(String),
}

/// The event number the simulated CLI puts in every event's data.
fn number(data: Option<Value<'_>>) -> Option<u64> {
    data?.get("n")?.as_number()?.as_u64()
}

fn text(s: JsonStr<'_>) -> String {
    let mut buf = vec![0; s.decoded_len().max(1)];
    s.decode_into(&mut buf).map(str::to_owned).unwrap_or_else(|| s.raw().to_owned())
}

/// The tag of a server request's wait: `req:<connection>/<id>`.
pub(super) fn request_tag(conn: u32, id: &Id<'_>) -> String {
    match id {
        Id::Number(n) => format!("req:{conn}/{}", n.raw()),
        Id::String(s) => format!("req:{conn}/\"{}\"", s.raw()),
        Id::Null => format!("req:{conn}/null"),
    }
}

impl Digest {
    /// Copies what the host needs of `out`; `dropped`: the engine counted
    /// a plain event lost to the parking storage while deciding it.
    pub(super) fn of(out: Output<'_, u32, Waiter>, dropped: bool, conn: u32) -> Digest {
        let Output { route, obligation, refused, answer_ack, listed } = out;
        match route {
            Route::Event { target, session_id, event, .. } => {
                let tag = event.request_id.map(|r| format!("rid:{}", text(r)));
                let row = row_for_event(event.event_type).map(|(i, _)| usize::from(i));
                Digest::Event {
                    key: target,
                    wire_sid: text(session_id),
                    n: number(event.data),
                    id_hash: event.id.map(|id| event_id_hash(id.raw().as_bytes())),
                    refused: tag.clone().filter(|_| refused.is_some()),
                    ob: obligation.map(|ob| (ob, row.unwrap_or(0), tag.unwrap_or_default())),
                }
            }
            Route::Request { id, method, session, .. } => {
                let row = row_for_request(method).map(|(i, _)| usize::from(i));
                Digest::Request {
                    session: session.map(|(_, key)| key),
                    refused: refused.map(|_| request_tag(conn, &id)),
                    ob: obligation.map(|ob| (ob, row.unwrap_or(0), request_tag(conn, &id))),
                }
            }
            Route::Response { request, waiter, result } => Digest::Response {
                id: request,
                waiter,
                result: result
                    .map(|v| v.as_bytes().to_vec())
                    .map_err(|e| format!(r#"{{"code":{},"message":"{}"}}"#, e.code, e.message.raw())),
            },
            Route::Lifecycle { .. } | Route::Notification { .. } => Digest::Notice,
            Route::Park { body, .. } => {
                let value = Value::parse(body).ok();
                let n = value.and_then(|v| number(v.pointer(&["params", "event", "data"])));
                let rid = value.and_then(|v| v.pointer(&["params", "event", "data", "requestId"])?.as_str());
                let tag = match (rid, value.and_then(|v| v.get("id"))) {
                    (Some(rid), _) => Some(format!("rid:{}", text(rid))),
                    (None, Some(id)) => Some(format!("req:{conn}/{}", id.raw())),
                    _ => None,
                };
                let refused = tag.filter(|_| refused.is_some());
                // Lost to a full parking storage: a plain event is dropped
                // (counted), a wait refused; neither reaches a session.
                if dropped || refused.is_some() {
                    Digest::Park { dropped: n, kept: None, refused }
                } else {
                    Digest::Park { dropped: None, kept: n, refused: None }
                }
            }
            Route::UnknownSession { session_id, event, reply_to, .. } => {
                let tag = match (event.and_then(|e| e.request_id), reply_to) {
                    (Some(rid), _) => Some(format!("rid:{}", text(rid))),
                    (None, Some(id)) => Some(request_tag(conn, &id)),
                    _ => None,
                };
                Digest::Unknown {
                    sid: text(session_id),
                    n: event.and_then(|e| number(e.data)),
                    refused: tag.filter(|_| refused.is_some()),
                }
            }
            Route::UnmatchedResponse { .. } => {
                Digest::Unmatched { engine_own: answer_ack.is_some() || listed.is_some() || refused.is_some() }
            }
            Route::Malformed(e) => Digest::Broken(format!("{e:?}")),
            Route::FrameError(e) => Digest::Broken(format!("{e:?}")),
        }
    }
}

impl Host {
    /// Bytes from the CLI: fed to the engine, every output acted on.
    pub fn receive(&mut self, now: u64, bytes: &[u8]) {
        let Some(mut decoder) = self.decoder.take() else { return };
        let mut rest = bytes;
        loop {
            let n = decoder.feed(rest);
            rest = &rest[n..];
            let mut any = false;
            loop {
                let before = self.engine.stats(now).park_dropped;
                let Some(out) = self.engine.poll(&mut decoder, now) else { break };
                any = true;
                let dropped = self.engine.stats(now).park_dropped > before;
                if let Some(listed) = &out.listed {
                    let mut found = Vec::new();
                    let refused_before: u64 = self.engine.stats(now).refused.iter().sum();
                    self.engine.open_listed(listed, now, |wait| {
                        let mut data = Vec::new();
                        wait.write_event(&mut |b: &[u8]| data.extend_from_slice(b));
                        found.push((wait.obligation, wait.target, wait.event_type, data));
                    });
                    // Items the engine refused at once (a full table) are
                    // remembered as discharged, somewhere among the items
                    // taken: counted before them (the memory's bound is
                    // then judged leniently).
                    let refused = self.engine.stats(now).refused.iter().sum::<u64>() - refused_before;
                    let mut taken = Vec::new();
                    for (ob, key, event_type, data) in found {
                        let rid = Value::parse(&data)
                            .ok()
                            .and_then(|v| v.pointer(&["data", "requestId"]))
                            .and_then(|r| r.as_str())
                            .map(text)
                            .unwrap_or_default();
                        let row = ANSWERS.iter().position(|r| r.trigger == Trigger::Event(event_type)).unwrap_or(0);
                        taken.push(format!("rid:{rid}"));
                        self.take_obligation(now, ob, row, Some(key), format!("rid:{rid}"));
                    }
                    // They are among those not taken (duplicates are
                    // skipped silently, not refused).
                    if refused > 0 {
                        for item in listed.items.elements() {
                            let rid = item.get("requestId").and_then(|r| r.as_str()).map(text);
                            let tag = format!("rid:{}", rid.unwrap_or_default());
                            if !taken.contains(&tag) {
                                self.refused_at_once(Some(tag));
                            }
                        }
                    }
                }
                let digest = Digest::of(out, dropped, self.conn);
                self.act_on(now, digest);
            }
            if rest.is_empty() || (n == 0 && !any) {
                break;
            }
        }
        self.decoder = Some(decoder);
    }

    /// Acts on one output.
    pub(super) fn act_on(&mut self, now: u64, digest: Digest) {
        match digest {
            Digest::Event { key, wire_sid, n, id_hash, ob, refused } => {
                self.deliver(now, key, &wire_sid, n, id_hash);
                self.refused_at_once(refused);
                if let Some((ob, row, tag)) = ob {
                    self.take_obligation(now, ob, row, Some(key), tag);
                }
            }
            Digest::Request { session, ob, refused } => {
                self.refused_at_once(refused);
                if let Some((ob, row, tag)) = ob {
                    self.take_obligation(now, ob, row, session, tag);
                }
            }
            Digest::Response { id, waiter, result } => self.response(now, id, waiter, result),
            Digest::Notice => self.seen.notices += 1,
            Digest::Park { dropped: Some(n), refused, .. } => {
                self.notes.push(format!("event #{n} lost to a full parking (refused: {refused:?})"));
                self.seen.fates.insert(n, Fate::ParkDropped);
                self.refused_at_once(refused);
            }
            Digest::Park { kept, refused, .. } => {
                if let Some(n) = kept {
                    self.seen.parked.insert(n, now);
                }
                if let Some(tag) = &refused {
                    self.notes.push(format!("{tag} refused for a full parking"));
                }
                self.refused_at_once(refused);
            }
            Digest::Unknown { sid, n, refused } => {
                let what = n.map_or("a request".into(), |n| format!("event #{n}"));
                self.notes.push(format!("{what} of {sid} for no session (refused: {refused:?})"));
                self.refused_at_once(refused);
                let open = self.sessions.iter().find(|(_, s)| {
                    s.state != RecState::Released && s.state != RecState::Opening && s.cli_id.as_deref() == Some(&sid)
                });
                if let Some((key, _)) = open {
                    self.failures
                        .push(format!("a frame of session {sid} routed to no session, while key {key} has it open"));
                }
                if let Some(n) = n {
                    self.note_fate(n, Fate::UnknownSession);
                }
            }
            Digest::Unmatched { engine_own } => {
                if !engine_own {
                    self.seen.late_responses += 1;
                }
            }
            Digest::Broken(e) => self.failures.push(format!("the engine could not read a frame of the CLI: {e}")),
        }
    }

    fn note_fate(&mut self, n: u64, fate: Fate) {
        if let Some(before) = self.seen.fates.insert(n, fate) {
            self.failures.push(format!("event #{n} came out of the engine twice: {before:?}, then {fate:?}"));
        }
    }

    /// An event for session `key`: delivered, or held while the recovery
    /// resumes the session.
    fn deliver(&mut self, _now: u64, key: u32, wire_sid: &str, n: Option<u64>, id_hash: Option<u64>) {
        let Some(n) = n else {
            self.failures.push(format!("an event of {wire_sid} without its number reached the host"));
            return;
        };
        let Some(rec) = self.sessions.get_mut(&key) else {
            self.failures.push(format!("event #{n} routed to key {key}, which the host never reserved"));
            return;
        };
        if rec.state == RecState::Released {
            self.failures.push(format!("event #{n} routed to key {key}, released before"));
        }
        if rec.cli_id.as_deref().is_some_and(|id| id != wire_sid) {
            let id = rec.cli_id.clone().unwrap_or_default();
            self.failures.push(format!("event #{n} of session {wire_sid} routed to key {key}, which is {id}"));
        }
        if let Some(held) = &mut rec.held {
            held.push((n, id_hash));
            if let Some(before) = self.seen.fates.get(&n) {
                self.failures.push(format!("event #{n} came out of the engine twice: {before:?}, then held"));
            }
            return;
        }
        self.deliveries += 1;
        match (self.profile.fault, self.deliveries) {
            (Some(Fault::LoseEvent), 20) => return,
            (Some(Fault::SwapEvents), 20) if !rec.delivered.is_empty() => {
                let last = rec.delivered.len() - 1;
                rec.delivered.insert(last, n);
            }
            _ => rec.delivered.push(n),
        }
        self.note_fate(n, Fate::Delivered(key));
    }

    /// The response to a request of the host's.
    fn response(&mut self, now: u64, id: RequestId, waiter: Waiter, result: Result<Vec<u8>, String>) {
        if self.requests.remove(&id.0).is_none() {
            self.failures.push(format!("a response to request {} the host has not in flight", id.0));
        }
        match waiter {
            Waiter::Connect => {
                self.connected = true;
                if self.recovering.is_some() {
                    self.recovery_next(now, copilot_core::RecoveryReport::Connected);
                }
            }
            Waiter::Open { key, handle } => self.opened(now, key, handle, result),
            Waiter::Destroy { key, .. } => self.release(now, key),
            Waiter::Send { .. } => {}
            Waiter::Resume { key } => self.resumed(now, key, result),
            Waiter::ReadLog { key } => self.log_read(now, key, result),
        }
    }

    /// A create's or a join's answer: the engine completes the open.
    fn opened(&mut self, now: u64, key: u32, handle: copilot_core::SessionHandle, result: Result<Vec<u8>, String>) {
        let Some(rec) = self.sessions.get_mut(&key) else { return };
        if rec.state == RecState::Released {
            return;
        }
        let outcome = match &result {
            Ok(body) => {
                let value = Value::parse(body).expect("the engine passed on a JSON result");
                if rec.cli_id.is_none() {
                    rec.cli_id = value.get("sessionId").and_then(|s| s.as_str()).map(text);
                }
                self.engine.complete_open(handle, Ok(value))
            }
            Err(error) => {
                let value = Value::parse(error.as_bytes()).expect("written as JSON above");
                let message = value.get("message").and_then(|m| m.as_str()).expect("written above");
                let code = value.get("code").and_then(|c| c.as_number()).and_then(|c| c.as_i64()).unwrap_or(0);
                self.engine.complete_open(handle, Err(copilot_core::RpcError { code, message, data: None }))
            }
        };
        let rec = self.sessions.get_mut(&key).expect("present");
        match outcome {
            Ok(()) => rec.state = RecState::Open,
            Err(e) => {
                if result.is_ok() {
                    self.failures.push(format!("complete_open of key {key} refused a good answer: {e:?}"));
                }
                rec.state = RecState::Released;
                rec.released_at = Some(now);
            }
        }
        self.drain_parked(now);
    }
}
