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
//! The async API ([`asynch`], feature `async`, on by default) is a layer
//! over the same pump and engine: the same client, session and handler
//! names with `async fn` calls and events as a `futures_core::Stream`, for
//! any executor.
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

#[cfg(feature = "async")]
pub mod asynch;
mod cli;
mod client;
mod config;
mod connection;
mod error;
pub mod events;
mod generated;
mod handlers;
mod hooks;
mod inbox;
mod pool;
mod requests;
pub mod rpc;
mod session;

/// Starting a CLI process of one's own, as [`Client::start`] does, for a
/// program that moves the CLI's bytes itself rather than through a
/// [`Client`] (the `copilot-bridge` crate pipes them to a browser).
pub mod launch {
    pub use crate::cli::{CliProcess, Launch, AUTH_TOKEN_ENV};
}

pub use cli::{default_install_dir, install_cli, native_binary, resolve_cli, CLI_PACKAGE, CLI_VERSION};
pub use client::{
    AuthStatus, Calls, Client, ClientOptions, Pong, ServerInfo, SessionMetadata, Status, Transport,
    DEFAULT_HANDLER_THREADS, DEFAULT_HANDLER_TIMEOUT, DEFAULT_REQUEST_TIMEOUT, DEFAULT_SHUTDOWN_GRACE,
    PROTOCOL_VERSION,
};
pub use config::{
    CustomAgentConfig, DefaultAgentConfig, InfiniteSessionConfig, McpServerConfig, ProviderConfig, ProviderType,
    ReasoningEffort, SectionAction, SectionOverride, SessionConfig, SystemMessage,
};
pub use connection::CloseCause;
pub use copilot_core as core;
pub use error::{Error, Result};
pub use events::{EventKind, LifecycleEvent, LifecycleKind, LifecycleMetadata, SessionEvent};
pub use handlers::{
    approve_all, deny_all, Command, ElicitationHandler, ElicitationResponse, ExitPlanModeHandler, ExitPlanModeRequest,
    ExitPlanModeResponse, McpOAuthHandler, OAuthToken, PermissionDecision, PermissionDecisionContext,
    PermissionHandler, PermissionRequest, ProviderTokenHandler, ProviderTokenRequest, SectionTransform,
    SessionHandlers, Tool, ToolInvocation, ToolResult, UserInputHandler, UserInputRequest, UserInputResponse,
    OFFERED_HANDLER_KINDS, TOOL_FAILED_TEXT,
};
pub use hooks::{
    AgentStopInput, AgentStopOutput, ErrorOccurredInput, ErrorOccurredOutput, HookInvocation, HookPermissionDecision,
    HookType, PostToolUseFailureInput, PostToolUseFailureOutput, PostToolUseInput, PostToolUseOutput,
    PreMcpToolCallInput, PreMcpToolCallOutput, PreToolUseInput, PreToolUseOutput, SessionEndInput, SessionEndOutput,
    SessionHooks, SessionStartInput, SessionStartOutput, UserPromptSubmittedInput, UserPromptSubmittedOutput,
    UserPromptTransformedInput, UserPromptTransformedOutput,
};
pub use requests::{generic_request_names, IncomingRequest, RequestHandler, RequestHandlers};
pub use session::{
    EventStream, MessageOptions, Session, SessionCalls, SessionStats, Subscription, MAX_KEPT_BYTES, MAX_KEPT_EVENTS,
};
