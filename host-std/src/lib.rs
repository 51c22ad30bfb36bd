//! The std host of `copilot-core`.
//!
//! Status: only the protocol core is available so far, re-exported as
//! [`core`]. The stdio and TCP transports, the reader pump and the blocking
//! `Client` / `Session` API are not written yet.

pub use copilot_core as core;
