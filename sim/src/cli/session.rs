//! A session of the simulated CLI: who is attached to it, whether the
//! process holds it, its event log (with `session.eventLog.read` over it),
//! and what the other client of the session can answer.

use serde_json::Value;

/// Where a session is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Loaded by the running process: its turn runs, its events go out.
    Active,
    /// Persisted but not loaded (the process that held it died); a resume
    /// loads it again.
    Dormant,
    /// Destroyed, or its state lost: every resume fails.
    Ended,
}

/// The other client attached to a session: which rows it has a handler
/// for (it answers those waits, broadcast to every client, after a delay).
#[derive(Debug, Clone)]
pub struct Other {
    /// Per row of [`copilot_core::ANSWERS`].
    pub handles: Vec<bool>,
    /// Attached now (it re-attaches after a restart, some time later).
    pub attached: bool,
}

/// One session.
#[derive(Debug)]
pub struct Session {
    /// Its id.
    pub id: String,
    /// Where it is.
    pub phase: Phase,
    /// This client is attached (created or resumed it on its connection).
    pub this_attached: bool,
    /// The other client, if it shares the session.
    pub other: Option<Other>,
    /// A turn runs (from `session.send` to `session.idle`).
    pub turn: bool,
    /// This client opened it with `requestElicitation: true`.
    pub this_elicits: bool,
    /// What this client was last told of `capabilities.ui.elicitation`.
    pub told_elicitation: Option<bool>,
    /// The log: `(event number, durable, the event's JSON)`, oldest first.
    /// A restart keeps only the durable ones.
    pub log: Vec<(u64, bool, String)>,
}

impl Session {
    /// A new active session.
    pub fn new(id: String) -> Self {
        Session {
            id,
            phase: Phase::Active,
            this_attached: false,
            other: None,
            turn: false,
            this_elicits: false,
            told_elicitation: None,
            log: Vec::new(),
        }
    }

    /// The process died: the session is persisted, its ephemeral events gone.
    pub fn unload(&mut self) {
        if self.phase == Phase::Active {
            self.phase = Phase::Dormant;
        }
        self.this_attached = false;
        self.told_elicitation = None;
        if let Some(o) = &mut self.other {
            o.attached = false;
        }
        self.log.retain(|(_, durable, _)| *durable);
    }

    /// Whether a client attached answers elicitations (the CLI's
    /// `capabilities.ui.elicitation`).
    pub fn elicitation(&self) -> bool {
        let row = copilot_core::ANSWERS.iter().position(|r| r.handler == copilot_core::HandlerKind::Elicitation);
        (self.this_attached && self.this_elicits) || row.is_some_and(|r| self.other_handles(r))
    }

    /// The `capabilities` of an open's answer, as CLI 1.0.102 gives them.
    pub fn capabilities(&self) -> String {
        let e = self.elicitation();
        format!(r#"{{"ui":{{"elicitation":{e},"mcpApps":false,"canvases":false}},"extensions":false}}"#)
    }

    /// Whether the other client is attached and answers waits of `row`.
    pub fn other_handles(&self, row: usize) -> bool {
        self.other.as_ref().is_some_and(|o| o.attached && o.handles[row])
    }

    /// The result of `session.eventLog.read` with `params`: a window of
    /// the log, oldest first, and the cursor to read on (backward reads
    /// give `"b:<index of the window's oldest>"`, as the real CLI's
    /// `"b:<id>"`; a cursor it cannot read restarts from the end with
    /// `cursorStatus:"expired"`, as the real CLI does). A window holds at
    /// most `cap` events: fewer than `max`, as the real CLI's can when
    /// hidden events take places in it, with `hasMore` still true.
    pub fn read_log(&self, params: &Value, cap: usize) -> String {
        let ephemeral = params.get("includeEphemeral").and_then(Value::as_bool).unwrap_or(true);
        let events: Vec<&String> = self.log.iter().filter(|(_, d, _)| *d || ephemeral).map(|(_, _, e)| e).collect();
        let max = (params.get("max").and_then(Value::as_u64).unwrap_or(200).max(1) as usize).min(cap.max(1));
        let cursor = params.get("cursor").and_then(Value::as_str);
        let backward = params.get("direction").and_then(Value::as_str) == Some("backward");
        let mut expired = false;
        let (start, end, next) = if backward {
            let end = match cursor {
                None => events.len(),
                Some(c) => match c.strip_prefix("b:").and_then(|i| i.parse::<usize>().ok()) {
                    Some(i) if i <= events.len() => i,
                    _ => {
                        expired = true;
                        events.len()
                    }
                },
            };
            let start = end.saturating_sub(max);
            (start, end, format!("b:{start}"))
        } else {
            let start = match cursor {
                None => 0,
                Some(c) => match c.parse::<usize>() {
                    Ok(i) if i <= events.len() => i,
                    _ => {
                        expired = true;
                        0
                    }
                },
            };
            let end = (start + max).min(events.len());
            (start, end, format!("{end}"))
        };
        let more = if backward { start > 0 } else { end < events.len() };
        let list: Vec<&str> = events[start..end].iter().map(|e| e.as_str()).collect();
        let status = if expired { r#","cursorStatus":"expired""# } else { "" };
        format!(r#"{{"events":[{}],"cursor":"{next}","hasMore":{more}{status}}}"#, list.join(","))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn session(n: u64) -> Session {
        let mut s = Session::new("s".into());
        for i in 0..n {
            s.log.push((i, i % 2 == 0, format!("{{\"id\":\"e{i}\"}}")));
        }
        s
    }

    #[test]
    fn backward_reads_page_from_the_end_and_read_on_with_their_cursor() {
        let s = session(7);
        let p = serde_json::json!({"direction":"backward","max":2,"includeEphemeral":false});
        let first: Value = serde_json::from_str(&s.read_log(&p, 100)).unwrap();
        assert_eq!(first["events"], serde_json::json!([{"id":"e4"},{"id":"e6"}]));
        assert_eq!(first["hasMore"], true);
        let mut p2 = p.clone();
        p2["cursor"] = first["cursor"].clone();
        let second: Value = serde_json::from_str(&s.read_log(&p2, 100)).unwrap();
        assert_eq!(second["events"], serde_json::json!([{"id":"e0"},{"id":"e2"}]));
        assert_eq!(second["hasMore"], false);
        p2["cursor"] = "garbage".into();
        let again: Value = serde_json::from_str(&s.read_log(&p2, 100)).unwrap();
        assert_eq!(again["cursorStatus"], "expired");
        assert_eq!(again["events"], first["events"]);
    }
}
