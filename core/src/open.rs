//! What a client tells the CLI when it opens a session (`session.create`,
//! `session.resume`) besides the user's options: which waits it answers
//! (the CLI only asks for permissions, user input, elicitation, plan
//! approval and hooks when the client says it handles them) and the
//! defaults the official SDKs send. One table for every host: a host turns
//! its typed options into their wire names, and the core adds the rest.

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
        "the session options are not a JSON object nested at most 128 deep"
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
