//! The std host of `copilot-core`: a blocking client for the GitHub Copilot
//! CLI's agent protocol.
//!
//! It starts the CLI (over stdio, or TCP with `--port`) or connects to one
//! already running, performs the `connect` handshake (protocol version 3),
//! and opens sessions whose events are delivered, typed, to iterators and
//! callbacks.
//!
//! Every transport runs the same reader pump: a named thread that feeds the
//! bytes to `copilot_core` and acts on the route its router returns. The
//! router is the only routing code in the project, so stdio, TCP and
//! in-memory connections cannot behave differently. No event is dropped:
//! events go to unbounded per-session queues (the reader never waits for a
//! consumer), sessions are reserved before `session.create` is sent, and
//! events for a session the server has yet to name are held until it does.
//!
//! The async API ([`asynch`], feature `async`, on by default) has the same
//! client, session and handler names with `async fn` calls and events as a
//! `futures_core::Stream`, for any executor. There is one request path:
//! each call is a future, which the async API awaits and the blocking API
//! waits on, its thread parked until the reader, the timer or the end of
//! the connection wakes it.
//!
//! # Layers
//!
//! The crate is drawn in layers whose imports go one way, down this list
//! (`scripts/check-modules` checks it, and that no module needs one that
//! needs it back):
//!
//! - `transport`: the CLI spawned over stdio or TCP, a server reached
//!   over TCP, any byte streams; why a connection ended.
//! - `driver`: one per connection: its decisions in one sans-IO state
//!   around the core's engine, and a reader, a writer and a timer that
//!   move bytes and act on what the state returns. It knows no user
//!   type: sessions are sinks of raw event JSON, waits of the agent are
//!   jobs with a way back, and what it must hand up (a client-wide
//!   request's wait, lifecycle notifications) goes to a closure the layer
//!   above gives it.
//! - `delivery` (per-session queues, streams, callbacks, waiters) and
//!   `answering` (the handler types, running them on the handler pool, the
//!   core deciding the answer), side by side: neither imports the other.
//! - `api`: [`Client`], [`Session`], [`SessionConfig`]; and [`asynch`] and
//!   [`rpc`], modules of the crate root for their public paths.
//!
//! Below them all: `error`, the handler pool (`pool`), how the blocking
//! API waits on a future (`wait`), and the typed events ([`events`], not
//! visible to the driver).
//!
//! Every call to the CLI has a deadline ([`ClientOptions::request_timeout`],
//! or the call's own), `destroy` and `stop` are bounded by
//! [`ClientOptions::shutdown_grace`], and [`Client::closed`] says why a
//! connection ended.
//!
//! ```no_run
//! use copilot_host::{Client, ClientOptions, SessionConfig};
//! use std::time::Duration;
//!
//! let client = Client::start(ClientOptions::default())?;
//! let session = client.create_session(SessionConfig::with_model("claude-sonnet-4.5"))?;
//! if let Some(reply) = session.send_and_wait("What is 2 + 2?", Duration::from_secs(60))? {
//!     println!("{reply:?}");
//! }
//! client.stop()?;
//! # Ok::<(), copilot_host::Error>(())
//! ```
#![deny(unsafe_code)]
// Without `async`, the async API is left out but its parts below it (the
// handler deadline of async handlers, the async streams' channel) stay.
#![cfg_attr(not(feature = "async"), allow(dead_code, unused_imports))]

mod answering;
mod api;
#[cfg(feature = "async")]
pub mod asynch;
mod delivery;
mod driver;
mod error;
pub mod events;
mod generated;
mod pool;
pub mod rpc;
mod sync;
mod transport;
mod wait;

/// Starting a CLI process of one's own, as [`Client::start`] does, for a
/// program that moves the CLI's bytes itself rather than through a
/// [`Client`] (the `copilot-bridge` crate pipes them to a browser).
pub mod launch {
    pub use crate::transport::cli::{CliProcess, Launch, AUTH_TOKEN_ENV};
}

/// Not for applications (feature `simulation`, off by default; no
/// stability promised): the driver's sans-IO state, generic over what a
/// session is, and the types its methods take and return, so that the
/// deterministic simulator (`sim/`) drives the real connection logic on a
/// virtual clock.
#[cfg(feature = "simulation")]
#[doc(hidden)]
pub mod simulation {
    pub use crate::driver::simulation::*;
}

pub use answering::{
    approve_all, deny_all, Command, ElicitationHandler, ElicitationResponse, ExitPlanModeHandler, ExitPlanModeRequest,
    ExitPlanModeResponse, McpOAuthHandler, OAuthToken, PermissionDecision, PermissionDecisionContext,
    PermissionHandler, PermissionRequest, ProviderTokenHandler, ProviderTokenRequest, SectionTransform,
    SessionHandlers, Tool, ToolInvocation, ToolResult, UserInputHandler, UserInputRequest, UserInputResponse,
    OFFERED_HANDLER_KINDS,
};
pub use answering::{generic_request_names, IncomingRequest, RequestHandler, RequestHandlers};
pub use answering::{
    AgentStopInput, AgentStopOutput, ErrorOccurredInput, ErrorOccurredOutput, HookInvocation, HookPermissionDecision,
    HookType, PostToolUseFailureInput, PostToolUseFailureOutput, PostToolUseInput, PostToolUseOutput,
    PreMcpToolCallInput, PreMcpToolCallOutput, PreToolUseInput, PreToolUseOutput, SessionEndInput, SessionEndOutput,
    SessionHooks, SessionStartInput, SessionStartOutput, UserPromptSubmittedInput, UserPromptSubmittedOutput,
    UserPromptTransformedInput, UserPromptTransformedOutput,
};
pub use answering::{Canvas, CanvasAction, CanvasContext, CanvasError, CanvasResult};
pub use answering::{
    CopilotHeaders, CopilotRequest, CopilotRequestContext, CopilotRequestHandler, CopilotResponse,
    CopilotWebSocketHandler, CopilotWebSocketMessage, CopilotWebSocketResponse,
};
pub use api::{
    AuthStatus, Calls, Client, ClientOptions, Pong, ServerInfo, SessionMetadata, Status, Transport,
    DEFAULT_HANDLER_THREADS, DEFAULT_HANDLER_TIMEOUT, DEFAULT_REQUEST_TIMEOUT, DEFAULT_SHUTDOWN_GRACE,
    PROTOCOL_VERSION,
};
pub use api::{
    CanvasProviderIdentity, CustomAgentConfig, DefaultAgentConfig, ExtensionInfo, InfiniteSessionConfig,
    LargeToolOutputConfig, McpServerConfig, ProviderConfig, ProviderType, ReasoningEffort, SectionAction,
    SectionOverride, SessionConfig, SystemMessage,
};
pub use api::{MessageOptions, Session, SessionCalls, TelemetryConfig, TraceContext, TraceContextProvider};
pub use api::{SessionCapabilities, SessionUi, UiCapabilities, UiInputOptions};
pub use api::{ToolSet, BUILTIN_TOOLS_ISOLATED};
pub use copilot_core as core;
pub use copilot_core::ClientMode;
pub use delivery::{EventStream, SessionStats, Subscription, MAX_KEPT_BYTES, MAX_KEPT_EVENTS};
pub use driver::{BacklogStats, RecoveryEvent, BACKLOG_STALL_MS, MAX_BACKLOG_BYTES};
pub use error::{Error, Result};
pub use events::{EventKind, LifecycleEvent, LifecycleKind, LifecycleMetadata, SessionEvent};
pub use transport::cli::{default_install_dir, install_cli, native_binary, resolve_cli, CLI_PACKAGE, CLI_VERSION};
pub use transport::CloseCause;
