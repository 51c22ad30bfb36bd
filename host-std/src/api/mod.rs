//! The api: what a user holds. The blocking [`Client`] and [`Session`],
//! the async ones ([`asynch`](crate::asynch), a module of the crate root
//! so that its path stays `copilot_host::asynch`), the session options ([`SessionConfig`]) and
//! the client's ([`ClientOptions`]). It puts the layers below together: a
//! transport, a driver over it, delivery and answering for each session.

mod client;
pub(crate) mod client_options;
pub(crate) mod config;
mod config_mode;
mod config_names;
mod config_parts;
mod config_wire;
pub(crate) mod ops;
#[cfg(test)]
mod order_tests;
pub(crate) mod replies;
mod respawn;
pub(crate) mod session;
mod stop;
pub(crate) mod telemetry;
mod tool_set;
pub(crate) mod ui;

pub use client::{Calls, Client};
pub use client_options::{
    ClientOptions, Transport, DEFAULT_HANDLER_THREADS, DEFAULT_HANDLER_TIMEOUT, DEFAULT_REQUEST_TIMEOUT,
    DEFAULT_SHUTDOWN_GRACE, PROTOCOL_VERSION,
};
pub use config::SessionConfig;
pub use config_parts::{
    CanvasProviderIdentity, CustomAgentConfig, DefaultAgentConfig, ExtensionInfo, InfiniteSessionConfig,
    LargeToolOutputConfig, McpServerConfig, ProviderConfig, ProviderType, ReasoningEffort, SectionAction,
    SectionOverride, SystemMessage,
};
pub use replies::{AuthStatus, Pong, ServerInfo, SessionMetadata, Status};
pub use session::{MessageOptions, Session, SessionCalls};
pub use telemetry::{TelemetryConfig, TraceContext, TraceContextProvider};
pub use tool_set::{ToolSet, BUILTIN_TOOLS_ISOLATED};
pub use ui::{SessionCapabilities, SessionUi, UiCapabilities, UiInputOptions};
