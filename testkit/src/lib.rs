//! Test support for copilot-rs: what the tests, the examples and an offline
//! run need to drive the real Copilot CLI without a network or an account.
//!
//! It holds [`scripted_model`], a scripted fake of the Copilot model
//! endpoint on `127.0.0.1`. It does not depend on the client library, so
//! the client's own tests and examples can use it; it is not published and
//! is no part of the client's API.
#![forbid(unsafe_code)]

pub mod scripted_model;
