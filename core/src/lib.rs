//! The protocol core of a client for the GitHub Copilot CLI's agent protocol
//! (JSON-RPC 2.0 over `Content-Length` frames).
//!
//! It does: frame decoding ([`FrameDecoder`]), envelope decoding
//! ([`Envelope`]), encoding ([`Outgoing`]), the session table
//! ([`SessionTable`]), the pending-request table ([`PendingTable`]), the
//! routing of every incoming message ([`Router`]), and the protocol engine
//! ([`Engine`]) that grows out of the router: it owns the answer table
//! ([`ANSWERS`]), the open obligations, their deadlines and refusals, and
//! the sessions' lifecycle, so that every wait of the agent is answered
//! exactly once, and what a client announces when it opens a session
//! ([`write_open_params`]) and sends once it is open
//! ([`write_follow_ups`]), and when and how it asks the CLI which waits
//! are pending ([`Engine::reconcile`], [`PENDING_LISTS`]). The rest of the protocol's policy is here too,
//! as data plus one function each, so that no host writes its own: the
//! constants, defaults and capacities ([`limits`]), the handshake
//! ([`read_handshake_answer`]), the session options ([`OPEN_OPTIONS`]),
//! the `send_and_wait` rule ([`Turn`]), the hook call ([`read_hook_call`]),
//! the elicitation answer ([`write_elicitation_answer`]), a session's
//! capabilities and what its UI calls need ([`Capabilities`],
//! [`check_ui_call`]), the shape of
//! every typed handler's answer ([`ANSWER_SHAPES`], [`write_answer`]), the generic
//! handler kinds ([`HandlerKind::is_generic`]), the CLI's launch
//! ([`launch_items`]), the stop sequence ([`STOP_STEPS`]), the defaults of
//! MCP server and provider configs ([`mcp_server_type`],
//! [`PROVIDER_DEFAULT_TYPE`]) and the bridge's token subprotocol
//! ([`BRIDGE_TOKEN_PROTOCOL_PREFIX`]), and the client modes: what an
//! `empty`-mode client requires and defaults ([`ClientMode`],
//! [`EMPTY_MODE_DEFAULTS`], [`write_options_update`]).
//!
//! It does not: read or write any socket or pipe, spawn threads, read a clock
//! or allocate. It is `#![no_std]` without `alloc` and has no `unsafe`. (The
//! optional `alloc` feature adds [`GrowingBuffer`] for hosts that have an
//! allocator; nothing else uses it.) A host
//! feeds it bytes and acts on the [`Route`] it returns; `copilot-host` (std
//! threads, stdio and TCP) and `copilot-wasm` (WebAssembly) are such hosts.
//!
//! [`Router::route`] is the only routing code in the project. Every transport
//! of every host calls it, so routing cannot drift between transports, and
//! the session table can only be read under its lock because no function
//! hands out its storage.
//!
//! ```
//! use copilot_core::{FrameDecoder, Route, Router};
//!
//! // Sessions deliver to a `u8` tag here; a std host would use an `Arc`.
//! let router: Router<u8, (), 16, 32> = Router::new();
//! let mut decoder: FrameDecoder<[u8; 4096]> = FrameDecoder::new();
//!
//! // Reserve before sending `session.create`, so no early event is lost.
//! router.sessions().reserve("s-1", 7).unwrap();
//!
//! let body = br#"{"jsonrpc":"2.0","method":"session.event","params":{"sessionId":"s-1","event":{"type":"session.start","id":"e1","data":{}}}}"#;
//! let frame = [format!("Content-Length: {}\r\n\r\n", body.len()).as_bytes(), body].concat();
//! let (first, second) = frame.split_at(10); // bytes arrive in any pieces
//! for piece in [first, second] {
//!     let mut rest = piece;
//!     while !rest.is_empty() {
//!         rest = &rest[decoder.feed(rest)..];
//!         while let Some(route) = router.poll(&mut decoder) {
//!             match route {
//!                 Route::Event { target, event, .. } => {
//!                     assert_eq!(target, 7);
//!                     assert_eq!(event.event_type, "session.start");
//!                 }
//!                 other => panic!("unexpected {other:?}"),
//!             }
//!         }
//!     }
//! }
//! assert_eq!(router.stats().frames, 1);
//! ```
#![no_std]
#![forbid(unsafe_code)]

#[cfg(feature = "alloc")]
extern crate alloc;

mod answers;
mod backlog;
mod canvas;
mod capabilities;
mod cause;
mod elicitation;
mod encode;
mod engine;
mod envelope;
mod frame;
mod handshake;
mod header;
mod hooks;
mod inference;
pub mod json;
mod launch;
pub mod limits;
mod lock;
mod messages;
mod modes;
mod obligations;
mod open;
mod options;
mod pending;
mod recovery;
mod router;
mod scan;
mod session;
mod shapes;
mod slots;
mod stop;
mod text;
mod transmit;
mod turn;
mod wire_defaults;

pub use answers::{
    generic_request_names, row_for_event, row_for_request, AnswerRow, AnswerVia, HandlerKind, Refusal, Trigger,
    Unhandled, ANSWERS, GENERIC_HANDLER_KINDS, HANDLER_READS, NOT_OBLIGATIONS, TYPED_HANDLER_KINDS,
};
pub use backlog::{Backlog, BacklogStats, ReadGate};
pub use canvas::{
    canvas_request, open_answer_canvases, read_canvas_change, CanvasCall, CanvasChange, CanvasRequest,
    CANVAS_ACTION_MEMBER, CANVAS_ACTION_NO_HANDLER, CANVAS_CLOSED_EVENT, CANVAS_HANDLER_ERROR, CANVAS_OPENED_EVENT,
    CANVAS_REQUESTS, CANVAS_UNKNOWN_PREFIX, OPEN_ANSWER_CANVASES, OPEN_CANVAS_MEMBERS,
};
pub use capabilities::{
    check_ui_call, read_ui_answer, ui_call, write_ui_form, Capabilities, Capability, MissingCapability, NoFormField,
    UiCall, CAPABILITIES, CAPABILITIES_CHANGED_EVENT, MISSING_ELICITATION_TEXT, OPEN_ANSWER_CAPABILITIES, UI_CALLS,
    UI_ELICITATION_METHOD,
};
pub use cause::Cause;
pub use elicitation::{write_elicitation_answer, ContentNotAnObject, ElicitationAction, ELICITATION_ACCEPT_CONTENT};
pub use encode::{frame_header, EncodeError, Outgoing, Payload, Ser, WriteError, MAX_FRAME_HEADER_LEN};
pub use engine::{
    event_id_hash, event_id_of, gap_delivery_order, undelivered_from, AnswerError, Engine, EngineConfig, EngineStats,
    GapEvent, Listed, ListedShape, ListedWait, Obligation, OpenError, Output, PendingList, ANSWER_ID_PREFIX,
    EVENT_LOG_MAX_PAGES, EVENT_LOG_PAGE, EVENT_LOG_READ, LIST_ID_PREFIX, MAX_FAILURE_DETAIL, PENDING_LISTS,
    PROMPT_KIND_RENAMES, TURN_START_EVENT,
};
pub use envelope::{
    DecodeError, DecodeErrorKind, Envelope, EventInfo, Id, Message, RpcError, INTERNAL_ERROR, INVALID_PARAMS,
    INVALID_REQUEST, METHOD_NOT_FOUND, PARSE_ERROR, REQUEST_EVENT_TYPES,
};
#[cfg(feature = "alloc")]
pub use frame::GrowingBuffer;
pub use frame::{FrameBuffer, FrameDecoder, FrameError, MAX_HEADER_LEN, MIN_FRAME_BUFFER};
pub use handshake::{
    read_handshake_answer, write_connect_params, HandshakeError, HandshakeRequest, HandshakeStep, HANDSHAKE_CONNECT,
    HANDSHAKE_FALLBACK_CODE, HANDSHAKE_PING,
};
pub use hooks::{
    read_hook_call, HookCall, UnreadableHookCall, HOOK_DEFAULT_INPUT, HOOK_INPUT_RENAMES, HOOK_INPUT_TIME, HOOK_TYPES,
};
pub use inference::{
    admit_chunk, admit_request, is_client_global, is_secret_header, read_inference_frame, ChunkAdmission,
    InferenceFailure, InferenceFrame, INFERENCE_ACK, INFERENCE_BUSY, INFERENCE_CANCELLED, INFERENCE_FAILED,
    INFERENCE_HOP_HEADERS, INFERENCE_OVERFLOW, INFERENCE_REQUEST_CHUNK, INFERENCE_REQUEST_START,
    INFERENCE_RESPONSE_CHUNK, INFERENCE_RESPONSE_START, INFERENCE_SECRET_HEADERS, INFERENCE_SET_PROVIDER,
    INFERENCE_UNFINISHED, MAX_INFERENCE_BUFFERED_CHUNKS, MAX_INFERENCE_IN_FLIGHT,
};
pub use inference::{
    websocket_end, WebSocketEnd, INFERENCE_WEBSOCKET, INFERENCE_WEBSOCKET_OPENED, INFERENCE_WEBSOCKET_UNSUPPORTED,
};
pub use json::{JsonError, JsonErrorKind, JsonNumber, JsonStr, Value};
pub use launch::{
    launch_items, read_announced_port, CliCandidate, Launch, LaunchItem, LaunchSecret, LaunchTransport, AUTH_TOKEN_ENV,
    CLI_PATH_ENV, CLI_SEARCH, CONNECTION_TOKEN_ENV, DEFAULT_LOG_LEVEL, LAUNCH_OWN_PROCESS_GROUP, PORT_ANNOUNCEMENT,
    SPAWN_ONLY_OPTIONS, SPAWN_ONLY_REFUSAL, TELEMETRY_ENABLED_ENV, TELEMETRY_ENV, TRACE_CONTEXT_MEMBERS,
};
pub use messages::MESSAGES;
pub use modes::{
    empty_mode_system_message, mode_default, write_options_update, ClientMode, SystemMessageStep, BASE_DIRECTORY_ENV,
    BASE_DIRECTORY_OPTION, EMPTY_MODE_DEFAULTS, EMPTY_MODE_ENV, EMPTY_MODE_NEEDS_AVAILABLE_TOOLS,
    EMPTY_MODE_NEEDS_BASE_DIRECTORY, EMPTY_MODE_SECTION, EMPTY_MODE_TOOLS_OPTION, EMPTY_MODE_UPDATE_FIXED,
    OPTIONS_UPDATE, OPTIONS_UPDATE_METHOD, SYSTEM_MESSAGE_CUSTOMIZE, SYSTEM_MESSAGE_KEPT_MODES,
};
pub use obligations::{ObligationId, MAX_KEPT_REQUEST_ID, MAX_KEPT_SESSION_ID};
pub use open::{
    write_follow_ups, write_open_params, Announce, FollowUp, OptionsNotAnObject, SessionIdTooLong, OPEN_ANNOUNCEMENTS,
    OPEN_FOLLOW_UPS,
};
pub use options::{
    open_option, tool_filter_name_ok, OpenOption, OptionScope, BARE_TOOL_WILDCARD, BARE_TOOL_WILDCARD_REFUSAL,
    BUILTIN_TOOLS_ISOLATED, OPEN_OPTIONS, TOOL_FILTER_OPTIONS, TOOL_NAME_CHARS, TOOL_NAME_REFUSAL, TOOL_SOURCES,
    TOOL_SOURCE_WILDCARD,
};
pub use pending::{Drain as PendingDrain, PendingFull, PendingTable, RequestId};
pub use recovery::{
    Gap, Recovery, RecoveryReport, RecoveryStep, GAP_NAMES, RECOVERY_BACKOFF_MS, RECOVERY_GAVE_UP,
    RECOVERY_RESUME_FLAG, RESUME_REFUSED,
};
pub use router::{Route, Router, Stats, UNKNOWN_SESSION};
pub use session::{
    Drain as SessionDrain, Iter as SessionIter, Lookup, ReserveError, ReserveErrorKind, SessionHandle, SessionState,
    SessionTable, StaleHandle, MAX_SESSION_ID_LEN,
};
pub use shapes::{
    answer_shape, write_answer, write_answer_from, AnswerMember, AnswerShape, Given, GivenNothing, MemberType,
    Presence, ShapeError, ANSWER_SHAPES,
};
#[cfg(feature = "alloc")]
pub use shapes::{shape_answer, Shaped};
pub use stop::{StopStep, STOP_STEPS};
pub use text::itoa;
pub use turn::{turn_step, Turn, TurnStep, TURN_END_EVENT, TURN_ERROR_EVENT, TURN_REPLY_EVENT, TURN_REPLY_UNLESS};
pub use wire_defaults::{
    mcp_server_type, BRIDGE_TOKEN_PROTOCOL_PREFIX, LARGE_OUTPUT_RENAMES, MCP_DEFAULT_TYPE, MCP_LOCAL_TYPES,
    MCP_TYPE_BY_MEMBER, MCP_WORKING_DIRECTORY, PROVIDER_DEFAULT_TYPE, PROVIDER_TOKEN_CALLBACK_FLAG,
    PROVIDER_TOKEN_NAME, SECTION_TRANSFORM_ACTION, SYSTEM_MESSAGE_DEFAULT_MODE,
};
