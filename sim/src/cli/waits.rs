//! The data of the waits the simulated CLI raises, one shape per row of the
//! answer table: the members each kind's handler reads (from
//! [`copilot_core::HandlerKind::reads`], so a row added to the table is
//! raised with what its handler needs), plus the members the real CLI
//! sends for the kinds seen on the wire (`shared/protocol/handlers.md`).

use copilot_core::json::Kind;
use copilot_core::{AnswerRow, AnswerVia, Trigger, Unhandled, ANSWERS};

/// The event types of the durable waits (their events, and those that
/// report them answered, are kept in the session's log): `permission.*`
/// and `external_tool.*`; every other `*.requested` is ephemeral.
pub fn is_durable(event_type: &str) -> bool {
    event_type.starts_with("permission.") || event_type.starts_with("external_tool.")
}

/// Whether the row is a list the engine reads after a resume (and so a
/// wait the CLI keeps across a restart, under `continuePendingWork`).
pub fn survives_restart(row: usize) -> bool {
    matches!(ANSWERS[row].trigger, Trigger::Event(t) if copilot_core::PENDING_LISTS.iter().any(|l| l.event_type == t))
}

/// The event that reports a wait of `row` answered, if the CLI sends one:
/// the row's `reported_by`, or `command.completed` for a command.
pub fn completed_event(row: usize) -> Option<&'static str> {
    match (ANSWERS[row].unhandled, ANSWERS[row].trigger) {
        (Unhandled::Leave { reported_by }, _) => Some(reported_by),
        (_, Trigger::Event("command.execute")) => Some("command.completed"),
        _ => None,
    }
}

/// The answering method of an event row.
pub fn answer_method(row: &AnswerRow) -> Option<(&'static str, &'static str)> {
    match row.via {
        AnswerVia::Rpc { method, key } => Some((method, key)),
        AnswerVia::Response { .. } => None,
    }
}

/// Members the handler of `row` reads, of the kind it reads them, as JSON
/// object members (no braces); with `unreadable`, the first one is left out
/// (the engine must refuse such a wait at once).
fn read_members(row: &AnswerRow, unreadable: bool) -> Vec<String> {
    let mut members = Vec::new();
    for (i, (name, kind)) in row.handler.reads().enumerate() {
        if unreadable && i == 0 {
            continue;
        }
        let value = match kind {
            Kind::Object => "{}",
            _ => "\"x\"",
        };
        members.push(format!("\"{name}\":{value}"));
    }
    members
}

/// What the real CLI adds to an event of these types (seen on the wire).
fn wire_members(event_type: &str) -> &'static [&'static str] {
    match event_type {
        "permission.requested" => &[
            r#""promptRequest":{"kind":"commands","fullCommandText":"ls","toolCallId":"t1","canOfferSessionApproval":true}"#,
        ],
        "external_tool.requested" => &[r#""toolCallId":"call_1","arguments":{"city":"Paris"}"#],
        "elicitation.requested" => &[r#""requestedSchema":{"type":"object"},"mode":"form""#],
        "mcp.oauth_required" => &[r#""reason":"initial""#],
        "command.execute" => &[r#""command":"/deploy prod","args":"prod""#],
        _ => &[],
    }
}

/// The members of the `data` of a wait event of `row` (no braces, no `n`).
pub fn event_data(row: usize, request_id: &str, unreadable: bool) -> String {
    let r = &ANSWERS[row];
    let Trigger::Event(event_type) = r.trigger else { return String::new() };
    let mut members = vec![format!("\"requestId\":\"{request_id}\"")];
    // The permission kind the handler reads is an object; the CLI's is a
    // shell prompt (its `promptRequest` is the listed shape).
    let reads = read_members(r, unreadable);
    for m in reads {
        if m.starts_with("\"permissionRequest\"") {
            members.push(r#""permissionRequest":{"kind":"shell","fullCommandText":"ls","toolCallId":"t1"}"#.into());
        } else {
            members.push(m);
        }
    }
    members.extend(wire_members(event_type).iter().map(|s| s.to_string()));
    members.join(",")
}

/// The `params` of a server request of `row` for session `session`.
pub fn request_params(row: usize, session: &str, unreadable: bool) -> String {
    let r = &ANSWERS[row];
    let mut members = vec![format!("\"sessionId\":\"{session}\"")];
    members.extend(read_members(r, unreadable));
    if let Trigger::Request("hooks.invoke") = r.trigger {
        members.push(r#""input":{"cwd":"/w","timestamp":1}"#.into());
    }
    format!("{{{}}}", members.join(","))
}

/// An item of the pending list that names a wait of `row` (the shapes of
/// `shared/protocol/recovery.md`), or `None` for a row no list names.
pub fn list_item(row: usize, request_id: &str) -> Option<String> {
    match ANSWERS[row].trigger {
        Trigger::Event("external_tool.requested") => Some(format!(
            r#"{{"requestId":"{request_id}","toolCallId":"call_1","toolName":"x","arguments":{{"city":"Paris"}}}}"#
        )),
        Trigger::Event("permission.requested") => Some(format!(
            r#"{{"requestId":"{request_id}","request":{{"kind":"commands","fullCommandText":"ls","toolCallId":"t1","canOfferSessionApproval":true}}}}"#
        )),
        _ => None,
    }
}

/// The event type of the double delivery of a request row (the CLI sends
/// both the request and this event for one wait), if it has one.
pub fn double_delivery(row: usize) -> Option<&'static str> {
    match ANSWERS[row].trigger {
        Trigger::Request("userInput.request") => Some("user_input.requested"),
        Trigger::Request("exitPlanMode.request") => Some("exit_plan_mode.requested"),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_row_raises_data_its_handler_can_read() {
        for (i, row) in ANSWERS.iter().enumerate() {
            let text = match row.trigger {
                Trigger::Event(_) => format!("{{{}}}", event_data(i, "r-1", false)),
                Trigger::Request(_) => request_params(i, "s", false),
            };
            let value = copilot_core::Value::parse(text.as_bytes()).unwrap();
            assert!(row.handler.can_read(Some(value)), "{row:?}: {text}");
            if row.handler.reads().next().is_some() {
                let text = match row.trigger {
                    Trigger::Event(_) => format!("{{{}}}", event_data(i, "r-1", true)),
                    Trigger::Request(_) => request_params(i, "s", true),
                };
                let value = copilot_core::Value::parse(text.as_bytes()).unwrap();
                assert!(!row.handler.can_read(Some(value)), "{row:?}: {text}");
            }
        }
    }

    #[test]
    fn the_listed_rows_are_the_ones_that_survive_a_restart() {
        let listed: Vec<usize> = (0..ANSWERS.len()).filter(|r| list_item(*r, "x").is_some()).collect();
        let surviving: Vec<usize> = (0..ANSWERS.len()).filter(|r| survives_restart(*r)).collect();
        assert_eq!(listed, surviving);
        assert_eq!(listed.len(), copilot_core::PENDING_LISTS.len());
    }
}
