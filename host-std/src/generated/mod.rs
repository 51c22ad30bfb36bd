//! Types generated from the Copilot CLI's own schemas by `copilot-codegen`
//! (`cargo run -p copilot-codegen`); the files beside this one are its
//! output, committed and checked by its test.

#[rustfmt::skip]
pub mod events;
#[rustfmt::skip]
pub mod rpc;
