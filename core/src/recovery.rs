//! Recovery after the connection to the CLI is lost while the client did
//! not end it (the CLI it started exited, a server's connection dropped),
//! once for every host: when to try again, how often, and what a resume
//! after it asks.
//!
//! The steps: the engine forgets what the next connection cannot settle
//! ([`Engine::connection_lost`](crate::Engine::connection_lost)); the host
//! starts the CLI again (or reconnects), after each of
//! [`RECOVERY_BACKOFF_MS`] in turn until one attempt succeeds; it runs the
//! handshake, then resumes every session still open with the options it
//! was opened with and [`RECOVERY_RESUME_FLAG`], and the engine
//! reconciles each ([`Engine::reconcile`](crate::Engine::reconcile)): the
//! waits the CLI lists are answered, once. When every attempt failed, the
//! host ends the connection with the last failure as its cause.

/// How long to wait before each attempt to start the CLI again (or to
/// reconnect), in milliseconds: one attempt per entry, then recovery gives
/// up. The first is short (a CLI that was killed usually starts at once);
/// the later ones leave room for a machine under load.
pub static RECOVERY_BACKOFF_MS: &[u64] = &[250, 1_000, 4_000];

/// The member set `true` in the params of the resume that follows a
/// recovery: the CLI carries on with the turn it was running and keeps
/// its waits pending (without it, their tool calls are ended as
/// interrupted at the next prompt; see `session.resume` in the schema).
pub const RECOVERY_RESUME_FLAG: &str = "continuePendingWork";
