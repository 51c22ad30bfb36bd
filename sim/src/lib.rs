//! A deterministic simulator of the Copilot CLI client, in the style of
//! TigerBeetle's VOPR and FoundationDB's simulation: the real protocol
//! engine ([`copilot_core::Engine`], not a model of it) runs against a
//! simulated Copilot CLI ([`cli`]) on a virtual clock, with no threads;
//! one `u64` seed fixes every choice of a run, and the invariants
//! ([`check`]) are checked after every step. A failing seed replays
//! exactly, and shrinks to the shortest prefix of steps that still fails.
//!
//! A run ([`run`]): the seed draws a profile ([`profile`]: latencies,
//! handler outcomes, how the CLI behaves, what the scheduler favours),
//! then the scheduler ([`world`]) takes `steps` steps: bytes cross
//! between the CLI and the engine in pieces cut anywhere (a piece may end
//! inside a frame or join several), time passes to at most the next timer
//! of either end, the CLI acts in a session (events, waits of every row
//! of the answer table, the end of a turn), the host ([`host`]) creates,
//! joins (resumes, also taking over a session open here), destroys and
//! prompts sessions, its handlers settle obligations (answer, fail,
//! decline, have none, run past the deadline, answer invalid JSON), and
//! the connection drops (the CLI's process dies; the host recovers as
//! [`copilot_core::Recovery`] sequences it: the CLI started again, each
//! open session resumed, the pending lists read, the log read back page
//! by page). Then a drain: the CLI stops acting, every byte crosses and
//! time passes every deadline, and the end-state invariants are checked.
//!
//! The invariants: each wait the CLI holds is answered at most once by
//! this client, exactly once across the session's clients by the end (the
//! other client of a shared session answers the broadcast waits it has a
//! handler for), and an answer reaches the wait its handler answered;
//! what the engine sends is valid protocol; every request and obligation
//! ends by its deadline and the engine reports its next deadline; the
//! engine's tables stay within their capacities; each event reaches its
//! own session once and in wire order, none that reached the engine is
//! lost, and the durable events missed during a lost connection are read
//! back; nothing is left open at the end. The known issues of today's
//! engine ([`Known`]) are let pass and counted unless made strict
//! ([`Expect`]); `tests/findings.rs` keeps one (ignored) test per issue.
//!
//! The driver mode ([`driver`], [`Options::driver`], `--driver`) runs a
//! second host model: copilot-host's own connection logic, its sans-IO
//! `DriverState` (reached through copilot-host's `simulation` feature),
//! driven as its threaded shell drives it, with no thread: bytes through
//! its reader, each read's events flushed per session (streams at once,
//! callbacks through a simulated event pool whose batches hold fence
//! tickets and are delivered at steps the scheduler picks), answers told
//! after the flush with the fence's mark, and a call returning only once
//! its reply is there and the fence passed; subscribers are added and
//! dropped, also in the churn pattern (a callback subscribed when a create
//! returns, dropped the moment the destroy returns). Its invariant: every
//! event routed to a session while a subscriber was registered reaches
//! that subscriber exactly once, in wire order, and before any call whose
//! answer followed it on the wire returns; none reaches another session.
//! Run on a copy without the fence, it finds the churn's lost tail event
//! (`tests/driver.rs` keeps the trace).
//!
//! Not modelled (yet): in the driver mode, a dropped connection and its
//! recovery, the events kept for a first subscriber, `send_and_wait`'s
//! waiters, calls made from inside a callback, the backlog's bound, and
//! handlers that answer (they decline or refuse); the JavaScript client
//! (the CLI speaks bytes so that it can drive it); a TCP server that
//! outlives a connection (a drop here is the CLI's process dying, the
//! case `shared/protocol/recovery.md` describes); malformed frames and
//! unknown methods from the CLI (the core's own tests and fuzz targets
//! cover them); inference, canvases and UI calls beyond their waits.
//!
//! ```
//! let summary = copilot_sim::run(7, 100).expect("seed 7 holds every invariant");
//! assert!(summary.steps >= 100);
//! ```
//!
//! `cargo run --release -p copilot-sim -- --seeds 0..100000 [--driver]` runs seeds;
//! `--seed N --steps K --trace` replays one; `scripts/sim` runs any range
//! for as long as one wants.
#![forbid(unsafe_code)]

pub mod check;
pub mod cli;
pub mod driver;
pub mod host;
pub mod profile;
pub mod rng;
mod run;
pub mod wire;
pub mod world;

pub use check::{Counts, Expect, Known, Violation};
pub use run::{run, run_with, shrink, Failure, Options, Summary};
