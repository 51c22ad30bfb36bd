//! The threads and locks of the std host's threaded parts (the handler
//! and event pools, the blocking wait, a call's completion): `std`'s, or,
//! under `--cfg loom`, loom's, so that their real code is model-checked
//! over every interleaving (`scripts/test` runs
//! `RUSTFLAGS="--cfg loom" cargo test -p copilot-host --lib loom`).

#[cfg(loom)]
pub(crate) use loom::sync::{Condvar, Mutex, MutexGuard};
#[cfg(loom)]
pub(crate) use loom::thread;
#[cfg(not(loom))]
pub(crate) use std::sync::{Condvar, Mutex, MutexGuard};
#[cfg(not(loom))]
pub(crate) use std::thread;
