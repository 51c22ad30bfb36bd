//! Why the engine answered a wait of the agent with its refusal: a leaf
//! of the crate, named by the engine, the answer shapes and the hosts.

/// Why the engine answered a wait with its refusal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Cause {
    /// The host has no handler of this kind.
    NoHandler,
    /// The handler failed (panicked, threw, returned an error).
    HandlerFailed,
    /// The handler did not answer before its deadline.
    Deadline,
    /// The data cannot be read (not an object, or not what the handler's
    /// types accept), or its ids are too long to keep.
    Unreadable,
    /// The session is not (or no longer) open on this client.
    SessionGone,
    /// Parking storage was full during a server-assigned create.
    ParkOverflow,
    /// Every obligation slot was in use.
    TableFull,
    /// A server request for a method this client does not know.
    NotServed,
    /// A request that is not a valid message (answered with its error code).
    Malformed,
}

impl Cause {
    /// Every cause, in the order of [`EngineStats::refused`](crate::EngineStats::refused).
    pub const ALL: [Cause; 9] = [
        Cause::NoHandler,
        Cause::HandlerFailed,
        Cause::Deadline,
        Cause::Unreadable,
        Cause::SessionGone,
        Cause::ParkOverflow,
        Cause::TableFull,
        Cause::NotServed,
        Cause::Malformed,
    ];

    pub(crate) fn index(self) -> usize {
        Cause::ALL.iter().position(|c| *c == self).unwrap_or(0)
    }

    /// A stable camel-case name.
    pub const fn name(self) -> &'static str {
        match self {
            Cause::NoHandler => "noHandler",
            Cause::HandlerFailed => "handlerFailed",
            Cause::Deadline => "deadline",
            Cause::Unreadable => "unreadable",
            Cause::SessionGone => "sessionGone",
            Cause::ParkOverflow => "parkOverflow",
            Cause::TableFull => "tableFull",
            Cause::NotServed => "notServed",
            Cause::Malformed => "malformed",
        }
    }
}
