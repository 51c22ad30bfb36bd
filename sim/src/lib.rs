//! A deterministic simulator of the Copilot CLI client, in the style of
//! TigerBeetle's VOPR and FoundationDB's simulation: the real protocol
//! engine ([`copilot_core::Engine`], not a model of it) runs against a
//! simulated Copilot CLI ([`cli`]) on a virtual clock, with no threads;
//! one `u64` seed fixes every choice of a run (how the bytes between the
//! two are cut and delayed, what the CLI does and when, what the host's
//! handlers do, when the connection drops), and the invariants
//! ([`check`]) are checked after every step. A failing seed replays
//! exactly, and shrinks to the shortest prefix of steps that still fails.
//!
//! It does: the engine with a simulated host around it ([`host`]): the
//! sessions' creates, joins, destroys and prompts, the obligations handed
//! to handlers that answer, fail, decline, have none, run past their
//! deadline or answer with invalid JSON; requests timing out; and the
//! recovery of a dropped connection as [`copilot_core::Recovery`]
//! sequences it (a new CLI process, the sessions resumed, the lists of
//! pending waits read, the log read back).
//!
//! It does not (yet): drive `copilot-host`'s driver or the JavaScript
//! client (the CLI speaks bytes so that it can, once the driver is one
//! sans-IO state); model a TCP server that outlives a connection (a drop
//! here is the CLI's process dying, the case `shared/protocol/recovery.md`
//! describes); send malformed frames.
//!
//! ```
//! let summary = copilot_sim::run(7, 100).expect("seed 7 holds every invariant");
//! assert!(summary.steps >= 100);
//! ```
#![forbid(unsafe_code)]

pub mod check;
pub mod cli;
pub mod host;
pub mod profile;
pub mod rng;
mod run;
pub mod wire;
pub mod world;

pub use check::{Counts, Expect, Known, Violation};
pub use run::{run, run_with, shrink, Failure, Options, Summary};
