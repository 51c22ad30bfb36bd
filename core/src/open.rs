//! What a client tells the CLI when it opens a session (`session.create`,
//! `session.resume`) besides the user's options: which waits it answers
//! (the CLI only asks for permissions, user input, elicitation, plan
//! approval and hooks when the client says it handles them) and the
//! defaults the official SDKs send. One table for every host: a host turns
//! its typed options into their wire names, and the core adds the rest.
//!
//! Then the requests a client sends once the session is open
//! ([`OPEN_FOLLOW_UPS`], [`write_follow_ups`]): the CLI asks some waits
//! only of clients that registered interest in their event.

use crate::answers::HandlerKind;
use crate::json::{Kind, Value};

/// One member the core adds to the params of an open request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Announce {
    /// `true` when a handler of this kind is set, else `false`.
    Handler(HandlerKind),
    /// `true` when a handler of this kind is set; left out otherwise.
    HandlerIfSet(HandlerKind),
    /// This JSON, when the user's options leave the member out.
    Default(&'static str),
}

/// Every member the core adds, by wire name. A member the user's options
/// already have is left as the user set it.
pub static OPEN_ANNOUNCEMENTS: &[(&str, Announce)] = &[
    ("requestPermission", Announce::Handler(HandlerKind::Permission)),
    ("requestUserInput", Announce::Handler(HandlerKind::UserInput)),
    ("requestElicitation", Announce::Handler(HandlerKind::Elicitation)),
    ("requestExitPlanMode", Announce::Handler(HandlerKind::ExitPlanMode)),
    // Auto-mode switches are answered by name when asked, but not asked for.
    ("requestAutoModeSwitch", Announce::Default("false")),
    ("hooks", Announce::HandlerIfSet(HandlerKind::Hooks)),
    // Environment values of MCP servers are the values, not names of
    // variables to read.
    ("envValueMode", Announce::Default(r#""direct""#)),
    // A tool both available and excluded is excluded.
    ("toolFilterPrecedence", Announce::Default(r#""excluded""#)),
    // Whole messages unless deltas are asked for.
    ("streaming", Announce::Default("false")),
    ("includeSubAgentStreamingEvents", Announce::Default("true")),
];

/// The user's options given to [`write_open_params`] are not a JSON object
/// the core reads (valid, and nested at most [`MAX_DEPTH`](crate::json::MAX_DEPTH) deep).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OptionsNotAnObject;

impl OptionsNotAnObject {
    /// The message that [`Display`](core::fmt::Display) shows, for builds
    /// that leave `core::fmt` out.
    pub const fn message(&self) -> &'static str {
        crate::messages::OPTIONS_NOT_AN_OBJECT
    }
}

impl core::fmt::Display for OptionsNotAnObject {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(self.message())
    }
}

/// Writes the params of `session.create` or `session.resume` to `out`: the
/// members of `options` (a JSON object: the user's options under their
/// wire names, the session id among them), then each member of
/// [`OPEN_ANNOUNCEMENTS`] that `options` leaves out. `has(kind)` says
/// whether a handler of that kind is set. Nothing is written when
/// `options` is not a JSON object.
pub fn write_open_params(
    options: &[u8],
    has: impl Fn(HandlerKind) -> bool,
    out: &mut impl FnMut(&[u8]),
) -> Result<(), OptionsNotAnObject> {
    let options = crate::json::trim_ws(options);
    let parsed = Value::parse(options).map_err(|_| OptionsNotAnObject)?;
    if parsed.kind() != Kind::Object {
        return Err(OptionsNotAnObject);
    }
    let members = crate::json::trim_ws(&options[1..options.len() - 1]);
    out(b"{");
    out(members);
    let mut first = members.is_empty();
    for (key, announce) in OPEN_ANNOUNCEMENTS {
        if parsed.get(key).is_some() {
            continue;
        }
        let value: &[u8] = match announce {
            Announce::Handler(kind) if has(*kind) => b"true",
            Announce::Handler(_) => b"false",
            Announce::HandlerIfSet(kind) if has(*kind) => b"true",
            Announce::HandlerIfSet(_) => continue,
            Announce::Default(v) => v.as_bytes(),
        };
        out(if first { b"\"" } else { b",\"" });
        out(key.as_bytes());
        out(b"\":");
        out(value);
        first = false;
    }
    out(b"}");
    Ok(())
}

/// A request a client sends once a session is open (its create or resume
/// answered), when a handler of `handler` is set:
/// `session.eventLog.registerInterest {sessionId, eventType}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FollowUp {
    /// The handler whose presence asks for the request.
    pub handler: HandlerKind,
    /// The method sent.
    pub method: &'static str,
    /// The event type interest is registered in (the params' `eventType`).
    pub event_type: &'static str,
}

/// Every request sent after an open, in the order sent.
pub static OPEN_FOLLOW_UPS: &[FollowUp] = &[
    // The CLI sends `mcp.oauth_required` only to a client that registered
    // interest; without it the MCP server just goes `needs-auth`. MCP
    // servers connect at the first send, so right after the open is in time.
    FollowUp {
        handler: HandlerKind::McpOAuth,
        method: "session.eventLog.registerInterest",
        event_type: "mcp.oauth_required",
    },
];

/// The session id given to [`write_follow_ups`] is longer than any session
/// the core keeps ([`MAX_SESSION_ID_LEN`](crate::MAX_SESSION_ID_LEN)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SessionIdTooLong;

impl SessionIdTooLong {
    /// The message that [`Display`](core::fmt::Display) shows.
    pub const fn message(&self) -> &'static str {
        crate::messages::SESSION_ID_TOO_LONG
    }
}

impl core::fmt::Display for SessionIdTooLong {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(self.message())
    }
}

/// Room for the params of a follow-up: the longest session id, each byte
/// escaped, and the longest event type.
const FOLLOW_UP_ROOM: usize = 6 * crate::session::MAX_SESSION_ID_LEN + 96;

/// Calls `send(method, params)` for each of [`OPEN_FOLLOW_UPS`] whose
/// handler is set (`has(kind)`), in order, once session `session_id` (its
/// text, not yet JSON) is open; `params` is the request's JSON params,
/// `{"sessionId":..,"eventType":..}`. A host sends each as an ordinary
/// request and waits for its answer before it hands the session over, so
/// no wait is asked before the client says it answers it.
pub fn write_follow_ups(
    session_id: &str,
    has: impl Fn(HandlerKind) -> bool,
    send: &mut impl FnMut(&'static str, &[u8]),
) -> Result<(), SessionIdTooLong> {
    if session_id.len() > crate::session::MAX_SESSION_ID_LEN {
        return Err(SessionIdTooLong);
    }
    let mut buf = [0u8; FOLLOW_UP_ROOM];
    for follow in OPEN_FOLLOW_UPS.iter().filter(|f| has(f.handler)) {
        let mut at = 0;
        let written = (|| {
            crate::json::put(&mut buf, &mut at, br#"{"sessionId":"#)?;
            crate::json::write_escaped(&mut buf, &mut at, session_id)?;
            crate::json::put(&mut buf, &mut at, br#","eventType":"#)?;
            crate::json::write_escaped(&mut buf, &mut at, follow.event_type)?;
            crate::json::put(&mut buf, &mut at, b"}")
        })();
        // Cannot fail: the id's length is checked and the room is for its
        // worst case.
        if written.is_some() {
            send(follow.method, &buf[..at]);
        }
    }
    Ok(())
}
