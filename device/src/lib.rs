//! A client for the GitHub Copilot CLI's agent protocol on a
//! microcontroller: copilot-core's [`Engine`](copilot_core::Engine) driven
//! over a blocking [`embedded_io`] transport (a UART, a TCP socket of an
//! embedded stack), without an allocator.
//!
//! It does: the handshake (`connect` with the connection token, protocol
//! version 3), `session.create` with the device's tools, `session.send`,
//! and the turn after it: every frame goes through the engine, the tool
//! calls and permission requests go to the application's [`Handlers`] and
//! their answers back through the engine, the assistant's text goes to
//! [`Handlers::event`], and the turn ends at `session.idle`. A stream that
//! ends or fails is an error, and so is a link that stops answering
//! (a `ping` sent after a quiet spell that gets no answer in time): a UART
//! has no end of stream, so silence is how a lost peer shows.
//!
//! It does not: read a clock (the caller's [`Clock`] gives milliseconds),
//! allocate, spawn, or decide anything about the protocol. The answers'
//! shapes, the refusals of waits nobody answers, what a session announces
//! when it opens, and the deadlines are the engine's, as in every host.
//! One session per [`Device`]; the capacities are const parameters.
//!
//! ```
//! use copilot_device::{Decision, Device, DeviceConfig, Event, Handlers, PermissionRequest, SessionOptions, Tool, ToolCall};
//! # struct Link;
//! # impl embedded_io::ErrorType for Link { type Error = core::convert::Infallible; }
//! # impl embedded_io::Read for Link { fn read(&mut self, _: &mut [u8]) -> Result<usize, Self::Error> { Ok(0) } }
//! # impl embedded_io::ReadReady for Link { fn read_ready(&mut self) -> Result<bool, Self::Error> { Ok(true) } }
//! # impl embedded_io::Write for Link {
//! #     fn write(&mut self, b: &[u8]) -> Result<usize, Self::Error> { Ok(b.len()) }
//! #     fn flush(&mut self) -> Result<(), Self::Error> { Ok(()) }
//! # }
//! struct Sensor;
//!
//! impl Handlers for Sensor {
//!     fn tool(&mut self, call: &ToolCall<'_>) -> Result<&str, &str> {
//!         match call.name {
//!             "read_sensor" => Ok("21.5 C"),
//!             _ => Err("no such tool"),
//!         }
//!     }
//!     fn permission(&mut self, _: &PermissionRequest<'_>) -> Decision {
//!         Decision::ApproveOnce
//!     }
//!     fn event(&mut self, event: &Event<'_>) {
//!         if let Event::Delta(text) = event {
//!             let _ = text; // print it
//!         }
//!     }
//! }
//!
//! let mut ticks = 0u64;
//! let clock = move || { ticks += 1; ticks };
//! // 4 KiB frames (larger ones are skipped), 1 KiB for the request bodies.
//! let mut device: Device<Link, _, 4096, 1024> = Device::new(Link, clock, DeviceConfig::new());
//! let tools = [Tool { name: "read_sensor", description: "Reads the sensor.", parameters: r#"{"type":"object","properties":{}}"# }];
//! let options = SessionOptions { session_id: "device-1", model: None, streaming: true, tools: &tools };
//! // Over a real link: connect, open, then one turn.
//! if device.connect(Some("token")).is_ok() && device.create_session(&options).is_ok() {
//!     let _ = device.send_and_wait("Read the sensor.", &mut Sensor);
//! }
//! ```
#![no_std]
#![forbid(unsafe_code)]

mod device;
mod wire;

use core::fmt;

pub use copilot_core::{EngineStats, JsonStr, Value};
pub use device::Device;

/// The protocol version this client speaks.
pub const PROTOCOL_VERSION: u64 = copilot_core::limits::PROTOCOL_VERSION;

/// Milliseconds of any monotonic clock (a tick counter, a hardware timer).
pub trait Clock {
    /// Milliseconds now.
    fn now_ms(&mut self) -> u64;
}

impl<F: FnMut() -> u64> Clock for F {
    fn now_ms(&mut self) -> u64 {
        self()
    }
}

/// A tool the device offers the model.
#[derive(Debug, Clone, Copy)]
pub struct Tool<'a> {
    /// Its name, as the model calls it.
    pub name: &'a str,
    /// What it does, for the model.
    pub description: &'a str,
    /// The JSON schema of its arguments (JSON text).
    pub parameters: &'a str,
}

/// What `session.create` asks for.
#[derive(Debug, Clone, Copy)]
pub struct SessionOptions<'a> {
    /// The session's id, chosen by the device (unique per session).
    pub session_id: &'a str,
    /// The model, or the CLI's default.
    pub model: Option<&'a str>,
    /// Whether the reply streams as `assistant.message_delta` events.
    pub streaming: bool,
    /// The device's tools.
    pub tools: &'a [Tool<'a>],
}

/// A call of one of the device's tools.
#[derive(Debug, Clone, Copy)]
pub struct ToolCall<'a> {
    /// The tool's name (empty if it does not fit 64 bytes).
    pub name: &'a str,
    /// The arguments, as the model gave them.
    pub arguments: Option<Value<'a>>,
    /// The whole `external_tool.requested` data.
    pub data: Value<'a>,
}

/// A permission the agent asks for (a tool call, a command).
#[derive(Debug, Clone, Copy)]
pub struct PermissionRequest<'a> {
    /// `permissionRequest.kind`, such as `custom-tool` or `shell`.
    pub kind: Option<JsonStr<'a>>,
    /// `permissionRequest.toolName`, for a tool.
    pub tool_name: Option<JsonStr<'a>>,
    /// The whole `permission.requested` data.
    pub data: Value<'a>,
}

/// The answer to a permission request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Decision {
    /// Allow this once.
    ApproveOnce,
    /// Refuse; the turn ends.
    Reject,
    /// Nobody can decide here; the model is told so.
    UserNotAvailable,
}

impl Decision {
    /// The decision's JSON, as `handlePendingPermissionRequest` takes it.
    pub(crate) const fn json(self) -> &'static [u8] {
        match self {
            Decision::ApproveOnce => br#"{"kind":"approve-once"}"#,
            Decision::Reject => br#"{"kind":"reject"}"#,
            Decision::UserNotAvailable => br#"{"kind":"user-not-available"}"#,
        }
    }
}

/// An event of the session, as the application sees it.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub enum Event<'a> {
    /// A piece of the assistant's reply (`assistant.message_delta`).
    Delta(JsonStr<'a>),
    /// The assistant's whole message (`assistant.message`).
    Message(JsonStr<'a>),
    /// `session.error`: the turn failed; it still ends at `session.idle`.
    SessionError(Option<JsonStr<'a>>),
    /// Any other event: its type and data.
    Other {
        /// `event.type`.
        event_type: JsonStr<'a>,
        /// `event.data`.
        data: Option<Value<'a>>,
    },
}

/// The application's side: a tool, a permission decision, the events.
/// Called on the caller's thread, between reads; a handler that blocks
/// holds the link.
pub trait Handlers {
    /// Runs a tool: `Ok(text)` is the result the model reads; `Err(detail)`
    /// is a failure (the model is told only that the tool failed).
    fn tool(&mut self, call: &ToolCall<'_>) -> Result<&str, &str>;
    /// Decides a permission request.
    fn permission(&mut self, request: &PermissionRequest<'_>) -> Decision;
    /// Sees every event of the session, in order.
    fn event(&mut self, event: &Event<'_>) {
        let _ = event;
    }
}

/// Time limits of the device host (milliseconds).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct DeviceConfig {
    /// How long a request may wait for its answer (and a `ping` too).
    pub request_timeout: u64,
    /// After this long without a byte from the CLI, a `ping` asks whether it
    /// is still there; `None`: never (then a lost UART link hangs).
    pub keepalive: Option<u64>,
    /// How long a turn may take in all; `None`: no limit.
    pub turn_timeout: Option<u64>,
}

impl Default for DeviceConfig {
    fn default() -> Self {
        DeviceConfig { request_timeout: 30_000, keepalive: Some(10_000), turn_timeout: None }
    }
}

impl DeviceConfig {
    /// Requests 30 s, a keepalive after 10 s of silence, no turn limit.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets [`request_timeout`](Self::request_timeout).
    pub fn request_timeout(mut self, ms: u64) -> Self {
        self.request_timeout = ms;
        self
    }

    /// Sets [`keepalive`](Self::keepalive).
    pub fn keepalive(mut self, ms: Option<u64>) -> Self {
        self.keepalive = ms;
        self
    }

    /// Sets [`turn_timeout`](Self::turn_timeout).
    pub fn turn_timeout(mut self, ms: Option<u64>) -> Self {
        self.turn_timeout = ms;
        self
    }
}

/// A request the device sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Call {
    /// `connect`.
    Connect,
    /// `session.create`.
    Create,
    /// `session.send`.
    Send,
    /// `ping`, after a quiet spell.
    Ping,
}

impl Call {
    /// The method's name.
    pub const fn method(self) -> &'static str {
        match self {
            Call::Connect => "connect",
            Call::Create => "session.create",
            Call::Send => "session.send",
            Call::Ping => "ping",
        }
    }
}

/// Why a call of [`Device`] failed. `E` is the transport's error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Error<E> {
    /// Reading the transport failed.
    Read(E),
    /// Writing the transport failed.
    Write(E),
    /// The stream ended (the CLI closed the connection).
    Closed,
    /// The CLI stopped answering: a `ping` sent after a quiet spell got no
    /// answer in time.
    LinkLost,
    /// A request got no answer in time.
    Timeout(Call),
    /// The turn took longer than [`DeviceConfig::turn_timeout`].
    TurnTimeout,
    /// The CLI answered a request with an error.
    Rpc {
        /// The request.
        call: Call,
        /// The JSON-RPC error code.
        code: i64,
    },
    /// The CLI speaks another protocol version (or did not say).
    ProtocolVersion(Option<u64>),
    /// The session could not be opened.
    Open(copilot_core::OpenError),
    /// The turn ended with `session.error`.
    SessionError,
    /// There is no open session to send to, or one is open already.
    SessionState,
    /// A request body does not fit the scratch buffer, or the options are
    /// not JSON.
    TooLarge,
}

impl<E: fmt::Debug> fmt::Display for Error<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Read(e) => write!(f, "reading the link failed: {e:?}"),
            Error::Write(e) => write!(f, "writing the link failed: {e:?}"),
            Error::Closed => f.write_str("the CLI closed the connection"),
            Error::LinkLost => f.write_str("the CLI stopped answering (no answer to a ping): link lost"),
            Error::Timeout(call) => write!(f, "no answer to {} in time", call.method()),
            Error::TurnTimeout => f.write_str("the turn did not end in time"),
            Error::Rpc { call, code } => write!(f, "the CLI refused {} (error {code})", call.method()),
            Error::ProtocolVersion(v) => write!(f, "the CLI speaks protocol {v:?}, not {PROTOCOL_VERSION}"),
            Error::Open(e) => write!(f, "the session could not be opened: {e}"),
            Error::SessionError => f.write_str("the turn ended with session.error"),
            Error::SessionState => f.write_str("no session is open, or one is open already"),
            Error::TooLarge => f.write_str("a request does not fit the scratch buffer"),
        }
    }
}

impl<E: fmt::Debug> core::error::Error for Error<E> {}
