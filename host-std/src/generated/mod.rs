//! Types generated from the Copilot CLI's own schemas by `copilot-codegen`
//! (`cargo run -p copilot-codegen`); the files beside this one are its
//! output, committed and checked by its test.

#[rustfmt::skip]
pub mod events;
// Typed params and results of all 619 methods: about four times the
// build time of the rest of the crate, so it is opt-in.
#[cfg(feature = "rpc-types")]
#[rustfmt::skip]
pub mod rpc;
