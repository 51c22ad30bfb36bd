//! The WebSocket half of the inference request handler: a model request
//! whose head says `transport: "websocket"` (the CLI 1.0.102 opens one for
//! the Responses API of a model whose catalogue entry lists
//! `ws:/responses`, and keeps it across turns). The handler opens it
//! ([`CopilotRequestHandler::open_websocket`](super::CopilotRequestHandler::open_websocket))
//! and gets each message of the CLI in order; it sends the model's
//! messages back through a [`CopilotWebSocketResponse`] from any thread.
//! What ends it, and with what, is the core's (`copilot_core::websocket_end`):
//! a handler without WebSocket support is refused with a head that is not
//! 101 (the CLI then sends the request over HTTP); the end is sent once,
//! whichever side ends first. Runs on the request's own thread; the
//! messages wait on the request's bounded channel, as an HTTP body does.

use std::fmt;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::Ordering;
use std::sync::mpsc::SyncSender;
use std::sync::{Arc, Mutex, MutexGuard};

use copilot_core::{websocket_end, WebSocketEnd, INFERENCE_WEBSOCKET_OPENED};

use super::exchange::{BodyItem, CopilotHeaders, CopilotRequest, CopilotResponse, Redacted, Shared};
use crate::pool::panic_text;
use crate::wait::block_on;

/// The head of a WebSocket model request (the official SDKs'
/// `CopilotRequestContext`).
#[derive(Clone)]
#[non_exhaustive]
pub struct CopilotRequestContext {
    /// The CLI's id of the request.
    pub request_id: String,
    /// The session that opened it, if any.
    pub session_id: Option<String>,
    /// The agent trajectory that opened it, if any.
    pub agent_id: Option<String>,
    /// Its parent trajectory, if any.
    pub parent_agent_id: Option<String>,
    /// The CLI's class of interaction (`conversation-agent`, ...), if any.
    pub interaction_type: Option<String>,
    /// `websocket`.
    pub transport: String,
    /// The URL the CLI would connect to (`ws://` or `wss://`).
    pub url: String,
    /// The handshake's headers (those of
    /// [`copilot_core::INFERENCE_SECRET_HEADERS`] are shown redacted by
    /// `Debug`).
    pub headers: CopilotHeaders,
    shared: Arc<Shared>,
}

impl CopilotRequestContext {
    /// Whether the CLI cancelled the request (it closed the WebSocket).
    pub fn is_cancelled(&self) -> bool {
        self.shared.cancelled.load(Ordering::Acquire)
    }
}

impl fmt::Debug for CopilotRequestContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CopilotRequestContext")
            .field("request_id", &self.request_id)
            .field("session_id", &self.session_id)
            .field("url", &self.url)
            .field("headers", &Redacted(&self.headers))
            .field("transport", &self.transport)
            .finish_non_exhaustive()
    }
}

/// One WebSocket message, either way.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CopilotWebSocketMessage {
    /// The payload.
    pub data: Vec<u8>,
    /// A binary frame (`true`) or a text frame.
    pub binary: bool,
}

impl CopilotWebSocketMessage {
    /// A text message.
    pub fn from_text(text: impl Into<String>) -> Self {
        CopilotWebSocketMessage { data: text.into().into_bytes(), binary: false }
    }

    /// The payload as text, if it is UTF-8.
    pub fn text(&self) -> Option<&str> {
        std::str::from_utf8(&self.data).ok()
    }
}

/// One open WebSocket, as the handler serves it (the official SDKs'
/// `CopilotWebSocketHandler`): it takes the CLI's messages in order, on
/// the request's thread.
pub trait CopilotWebSocketHandler: Send {
    /// One message from the CLI (to the model). An `Err` (or a panic)
    /// ends the WebSocket with that error.
    fn send_request_message(&mut self, message: CopilotWebSocketMessage) -> Result<(), String>;

    /// The WebSocket ended (either side closed it, the CLI cancelled it,
    /// the handler failed or the connection ended): release what serves
    /// it. Called once, last, after the CLI was sent the end.
    fn close(&mut self) {}
}

/// The CLI's side of an open WebSocket (the official SDKs'
/// `CopilotWebSocketResponse`): the handler sends the model's messages
/// through it, from any thread, and may close it. Each call is answered
/// by the CLI before the next goes (messages arrive in order). Cloning
/// gives another handle to the same WebSocket.
#[derive(Clone)]
pub struct CopilotWebSocketResponse {
    response: Arc<Mutex<CopilotResponse>>,
    /// Wakes the request's thread when the handler closed it.
    wake: SyncSender<BodyItem>,
}

impl fmt::Debug for CopilotWebSocketResponse {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("CopilotWebSocketResponse").field(&*self.lock()).finish()
    }
}

impl CopilotWebSocketResponse {
    fn lock(&self) -> MutexGuard<'_, CopilotResponse> {
        self.response.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The head that opens the WebSocket, if it has not gone: the CLI
    /// sends no message before it.
    fn open(response: &mut CopilotResponse) -> Result<(), String> {
        if response.started() {
            return Ok(());
        }
        block_on(response.start_async(INFERENCE_WEBSOCKET_OPENED, &CopilotHeaders::new()))
    }

    /// Sends one message to the CLI (from the model).
    pub fn send_message(&self, message: CopilotWebSocketMessage) -> Result<(), String> {
        let mut response = self.lock();
        Self::open(&mut response)?;
        block_on(response.chunk(&message.data, message.binary))
    }

    /// Closes the WebSocket (the model's side ended): the CLI gets its end.
    pub fn close(&self) -> Result<(), String> {
        self.end(WebSocketEnd::HandlerClosed, "")
    }

    /// Closes the WebSocket with an error of `message` (the CLI then sends
    /// the request over HTTP).
    pub fn error(&self, message: &str) -> Result<(), String> {
        self.end(WebSocketEnd::HandlerFailed, message)
    }

    /// Whether the WebSocket has ended.
    pub fn is_closed(&self) -> bool {
        self.lock().finished()
    }

    /// Ends it as the core says for `end` (once: later ends do nothing).
    fn end(&self, end: WebSocketEnd, detail: &str) -> Result<(), String> {
        let sent = {
            let mut response = self.lock();
            if response.finished() {
                return Ok(());
            }
            match websocket_end(end) {
                None => Self::open(&mut response).and_then(|()| block_on(response.end_async())),
                Some(failure) => block_on(response.fail(failure, detail)),
            }
        };
        // A full channel has items ahead, after which the thread sees the end.
        let _ = self.wake.try_send(BodyItem::Closed);
        sent
    }
}

/// What a handler's `open_websocket` gives: `None` for no WebSocket support.
pub(super) type Opened = Option<Result<Box<dyn CopilotWebSocketHandler>, String>>;

/// Serves WebSocket request `request` on its thread: opens it through
/// `open`, passes the CLI's messages on until either side ends it, and
/// ends it once. `wake` is a sender of the request's body channel.
pub(super) fn serve(
    request: CopilotRequest,
    response: CopilotResponse,
    wake: SyncSender<BodyItem>,
    open: impl FnOnce(&CopilotRequestContext, CopilotWebSocketResponse) -> Opened,
) {
    let CopilotRequest { request_id, session_id, agent_id, parent_agent_id, interaction_type, .. } = request;
    let context = CopilotRequestContext {
        request_id,
        session_id,
        agent_id,
        parent_agent_id,
        interaction_type,
        transport: request.transport,
        url: request.url,
        headers: request.headers,
        shared: Arc::clone(&request.shared),
    };
    let id = context.request_id.clone();
    let socket = CopilotWebSocketResponse { response: Arc::new(Mutex::new(response)), wake };
    let opened = catch_unwind(AssertUnwindSafe(|| open(&context, socket.clone())))
        .unwrap_or_else(|panic| Some(Err(format!("the handler panicked: {}", panic_text(&*panic)))));
    let (end, detail) = match opened {
        None => (WebSocketEnd::Unsupported, String::new()),
        Some(Err(detail)) => (WebSocketEnd::HandlerFailed, detail),
        Some(Ok(mut handler)) => {
            let (end, detail) = match send_opening(&socket) {
                Err(detail) => (WebSocketEnd::HandlerFailed, detail),
                Ok(()) => pump(&request.body, &request.shared, &socket, &mut *handler),
            };
            finish(&context, &socket, end, &detail);
            // Last, once the CLI has its end.
            if let Err(panic) = catch_unwind(AssertUnwindSafe(|| handler.close())) {
                log::warn!("the WebSocket handler of {id} panicked in close: {}", panic_text(&*panic));
            }
            return;
        }
    };
    finish(&context, &socket, end, &detail);
}

/// Ends the WebSocket as the core says for `end` (a failure of a request
/// the CLI cancelled is its cancellation).
fn finish(context: &CopilotRequestContext, socket: &CopilotWebSocketResponse, end: WebSocketEnd, detail: &str) {
    let id = &context.request_id;
    let end =
        if end == WebSocketEnd::HandlerFailed && context.is_cancelled() { WebSocketEnd::ClientCancelled } else { end };
    if end == WebSocketEnd::HandlerFailed {
        log::warn!("the WebSocket handler failed for {id}: {detail}");
    }
    if let Err(e) = socket.end(end, detail) {
        log::debug!("the end of WebSocket request {id} was not delivered: {e}");
    }
}

/// Sends the opening head, unless the handler already sent a message.
fn send_opening(socket: &CopilotWebSocketResponse) -> Result<(), String> {
    CopilotWebSocketResponse::open(&mut socket.lock())
}

/// Passes the CLI's messages to `handler` in order until an end: the
/// CLI's (end, cancel), the handler's (an error, a panic, its close) or
/// the bound's.
fn pump(
    body: &std::sync::mpsc::Receiver<BodyItem>,
    shared: &Shared,
    socket: &CopilotWebSocketResponse,
    handler: &mut dyn CopilotWebSocketHandler,
) -> (WebSocketEnd, String) {
    loop {
        if socket.is_closed() {
            return (WebSocketEnd::HandlerClosed, String::new());
        }
        let item = body.recv().unwrap_or(BodyItem::Cancel("the connection ended".into()));
        match item {
            BodyItem::Chunk(data, binary) => {
                shared.buffered.fetch_sub(1, Ordering::AcqRel);
                let message = CopilotWebSocketMessage { data, binary };
                let sent = catch_unwind(AssertUnwindSafe(|| handler.send_request_message(message)))
                    .unwrap_or_else(|panic| Err(format!("the handler panicked: {}", panic_text(&*panic))));
                if let Err(detail) = sent {
                    return (WebSocketEnd::HandlerFailed, detail);
                }
            }
            BodyItem::End => return (WebSocketEnd::ClientClosed, String::new()),
            BodyItem::Cancel(_) => return (WebSocketEnd::ClientCancelled, String::new()),
            BodyItem::Overflow => return (WebSocketEnd::Overflow, String::new()),
            BodyItem::Closed => {}
        }
    }
}
