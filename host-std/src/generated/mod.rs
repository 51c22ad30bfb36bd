//! Types generated from the Copilot CLI's own schemas by `copilot-codegen`
//! (`cargo run -p copilot-codegen`); the files beside this one are its
//! output, committed and checked by its test.

#[rustfmt::skip]
pub mod events;
// The RPC types every build needs (model list, attachments, model and
// agent selection).
#[rustfmt::skip]
pub mod rpc_core;
// Typed params, results and calls of all 619 methods: a large compile,
// so it is opt-in.
#[cfg(feature = "rpc-types")]
#[rustfmt::skip]
pub mod rpc;
