//! The WebAssembly build of `copilot-core`.
//!
//! Status: the crate builds the core for `wasm32-unknown-unknown` and
//! re-exports it as [`core`]. The wasm-bindgen bindings, the npm package
//! and its JS/TS client are not written yet.
#![no_std]

pub use copilot_core as core;
