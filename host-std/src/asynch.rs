//! The async API: the same [`Client`], [`Session`] and event stream as the
//! blocking API, with `async fn` calls and events as a
//! [`futures_core::Stream`].
//!
//! It is the client itself, not a layer beside it: every call, the open
//! sequence and `send_and_wait` are futures written once, which this API
//! awaits and the blocking API waits on (parking its thread until a waker
//! unparks it). A call inserts its waiter in the engine; the waiter is a
//! slot whose waker the reader (or the timer, or the end of the
//! connection) wakes. No executor is required and none is named, so it
//! runs under tokio (either runtime), async-std, smol or a minimal
//! `block_on`.
//!
//! No executor thread ever blocks. Sending queues a frame for the writer
//! thread; when a CLI that reads nothing has let the outbox fill, the call
//! awaits room (woken by the writer thread) until its deadline, which the
//! engine's timer keeps. Every answer and event arrives through a waker.
//! Starting a CLI (a process and a handshake), [`Client::stop`] and
//! [`Client::force_stop`] run on a one-off thread that completes their
//! future; a client dropped without `stop` kills and reaps its CLI on one
//! too. Every call of the blocking API has its async form here, under
//! the same name; [`Client::with_timeout`] and [`Session::with_timeout`]
//! give calls their own deadline, as the blocking ones do.
//!
//! Handlers ([`SessionConfig::on_permission`](crate::SessionConfig::on_permission), tools, ...) run on the
//! client's handler pool, never on the user's executor, under the engine's
//! handler deadline (past it the engine refuses and a late answer is not
//! sent). Every handler kind has an async form whose answer is a future:
//! [`permission_handler`], [`user_input_handler`], [`elicitation_handler`],
//! [`mcp_oauth_handler`], [`exit_plan_mode_handler`], [`tool`] and
//! [`command`], all one adapter ([`AsyncHandler`]). The pool thread drives
//! the future with a small executor of its own: the library then needs no
//! spawn hook into the user's runtime and a slow handler never holds up the
//! user's tasks. Once the deadline has passed and the engine has refused
//! the wait, the future is dropped, which releases what it holds and gives
//! its pool thread back (a blocking handler can only run on until it
//! returns). A handler future that needs a runtime's reactor (its timers,
//! its sockets) spawns that work on the runtime and awaits the join handle,
//! which completes through a waker like any future.
//!
//! Cancel safety: dropping any future of this module is safe. A dropped
//! call's request is forgotten (a late answer is counted as unmatched; a
//! frame still waiting for room is not sent); a dropped
//! [`Session::send_and_wait`] unsubscribes its waiter, and every event
//! still goes to the session's streams, so the session is used again as if
//! nothing happened.
//!
//! ```no_run
//! # async fn run() -> copilot_host::Result<()> {
//! use copilot_host::asynch::{self, Client};
//! use copilot_host::{ClientOptions, PermissionDecision, SessionConfig};
//! use std::time::Duration;
//!
//! let client = Client::start(ClientOptions::default()).await?;
//! // Handlers may be async too: this one could await a web request.
//! let config = SessionConfig::with_model("claude-sonnet-4.5").on_permission(asynch::permission_handler(
//!     |request| async move {
//!         println!("allowing {}", request.kind);
//!         PermissionDecision::ApproveOnce
//!     },
//! ));
//! let session = client.create_session(config).await?;
//! let mut events = session.events(); // a Stream; `events.next().await` also works
//! // The timeout covers the whole turn; dropping the future is safe too.
//! if let Some(reply) = session.send_and_wait("What is 2 + 2?", Duration::from_secs(60)).await? {
//!     println!("{reply:?}");
//! }
//! # drop(events.try_next());
//! client.stop().await?;
//! # Ok(())
//! # }
//! ```

mod client;
mod handlers;
mod session;
mod streams;
mod ui;

pub use client::{Calls, Client};
pub use handlers::{
    canvas, canvas_action, command, elicitation_handler, exit_plan_mode_handler, mcp_oauth_handler, permission_handler,
    tool, user_input_handler, AsyncHandler,
};
pub use session::{Session, SessionCalls};
pub use streams::{EventStream, LifecycleStream};
pub use ui::SessionUi;
