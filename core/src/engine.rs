//! The protocol engine: the router plus every decision that keeps the
//! project's promise that each wait of the agent is answered exactly once.
//!
//! It is sans-IO in the style of quinn-proto. The host feeds frames
//! ([`Engine::poll`]), passes on its handlers' answers ([`Engine::answer`],
//! [`Engine::refuse`]), tells the time ([`Engine::handle_timeout`], with
//! `now` in milliseconds of any clock it likes) and asks when to call again
//! ([`Engine::poll_timeout`]). Everything the engine sends (an answer, a
//! refusal, an error response) is queued in its transmit store by the call
//! that decided it, frames whole and in order; the host pulls them after
//! each call ([`Engine::transmit`], [`Engine::poll_transmit`]), as
//! quinn-proto's `poll_transmit`, and writes them to its transport.
//!
//! Every awaited event and every server request with a row in
//! [`ANSWERS`](crate::ANSWERS) becomes an obligation when it is routed to a
//! session: the [`Output`] carries its [`Obligation`] (id and handler kind).
//! Exactly one of these then answers it: [`Engine::answer`] with the
//! handler's answer, [`Engine::refuse`], an expired handler deadline in
//! [`Engine::handle_timeout`], or the release of its session. Whatever
//! cannot become an obligation (session gone, unreadable data, parking or
//! table full, unknown method) is refused at once.
//!
//! Answers travel as requests whose ids the engine recognizes
//! (`"answer-<n>"`), so they take no slot in the pending-request table and
//! their acknowledgements are counted, not reported as unmatched.
//!
//! ```
//! use copilot_core::{Engine, EngineConfig, FrameDecoder, HandlerKind, Value};
//!
//! // No parking storage; 1 KiB for what it sends.
//! let mut engine: Engine<u8, (), [u8; 0], [u8; 1024], 4, 4, 4> = Engine::new([], [0; 1024], EngineConfig::new());
//! let mut decoder: FrameDecoder<[u8; 1024]> = FrameDecoder::new();
//!
//! let session = engine.reserve("s-1", 7).unwrap();
//! engine.complete_open(session, Ok(Value::parse(b"{}").unwrap())).unwrap();
//!
//! let body = br#"{"jsonrpc":"2.0","method":"session.event","params":{"sessionId":"s-1","event":{"type":"permission.requested","data":{"requestId":"r1","permissionRequest":{}}}}}"#;
//! decoder.feed(format!("Content-Length: {}\r\n\r\n", body.len()).as_bytes());
//! decoder.feed(body);
//! let now = 0; // milliseconds, from the host's clock
//! let output = engine.poll(&mut decoder, now).unwrap();
//! let obligation = output.obligation.unwrap();
//! assert_eq!(obligation.handler, HandlerKind::Permission);
//! // ... the host calls the user's permission handler, then:
//! engine.answer(obligation.id, br#"{"kind":"approve-once"}"#).unwrap();
//! assert!(engine.answer(obligation.id, b"{}").is_err(), "answered once");
//! // The host pulls what the engine decided to send, and writes it.
//! let mut wire = [0; 1024];
//! let n = engine.poll_transmit(&mut wire).unwrap();
//! let sent = core::str::from_utf8(&wire[..n]).unwrap();
//! assert!(sent.ends_with(r#""requestId":"r1","result":{"kind":"approve-once"}}}"#));
//! ```

use core::fmt;

use heapless::Vec;

mod gap;
mod reconcile;

pub use gap::{
    event_id_hash, event_id_of, gap_delivery_order, undelivered_from, GapEvent, EVENT_LOG_MAX_PAGES, EVENT_LOG_PAGE,
    EVENT_LOG_READ,
};
pub use reconcile::{
    Listed, ListedShape, ListedWait, PendingList, LIST_ID_PREFIX, PENDING_LISTS, PROMPT_KIND_RENAMES, TURN_START_EVENT,
};

use crate::answers::{row_for_event, row_for_request, AnswerRow, AnswerVia, HandlerKind, Refusal, ANSWERS};
use crate::capabilities::{Capabilities, CAPABILITIES_CHANGED_EVENT};
use crate::cause::Cause;
use crate::envelope::{EventInfo, Id, RpcError, METHOD_NOT_FOUND, PARSE_ERROR};
use crate::frame::{FrameBuffer, FrameDecoder};
use crate::json::{JsonStr, Kind, Value};
use crate::obligations::{ObligationId, Obligations, Open, NEVER};
use crate::pending::{PendingFull, RequestId};
use crate::router::{Route, Router, Stats};
use crate::session::{Lookup, ReserveError, ReserveErrorKind, SessionHandle, SessionState, StaleHandle};
use crate::text::itoa;
use crate::transmit::{NoRoom, Transmit};

/// The prefix of the ids of the answers the engine sends.
pub const ANSWER_ID_PREFIX: &str = "answer-";

/// The host's choices of time limits and bounds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct EngineConfig {
    /// How long a handler may take (ms) before the engine refuses in its
    /// place; `None`: no limit.
    pub handler_timeout: Option<u64>,
    /// How long a request may wait for its response (ms) before
    /// [`Engine::handle_timeout`] hands its waiter back; `None`: no limit.
    pub request_timeout: Option<u64>,
    /// The most frames parked at once (besides the byte bound of the
    /// parking storage).
    pub park_frames: usize,
    /// How long a running turn (from `assistant.turn_start` to
    /// `session.idle`) may go without an event of its session (ms) before
    /// the engine asks the CLI what is pending ([`Engine::reconcile`]),
    /// and again while it stays silent, each wait twice the previous one,
    /// up to [`MAX_STALL_INTERVAL_MS`](crate::limits::MAX_STALL_INTERVAL_MS)
    /// (or this interval, if longer); `None`: never.
    pub stall_interval: Option<u64>,
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            handler_timeout: Some(crate::limits::DEFAULT_HANDLER_TIMEOUT_MS),
            request_timeout: Some(crate::limits::DEFAULT_REQUEST_TIMEOUT_MS),
            park_frames: crate::limits::MAX_PARKED_FRAMES,
            stall_interval: Some(crate::limits::DEFAULT_STALL_INTERVAL_MS),
        }
    }
}

impl EngineConfig {
    /// The defaults of [`limits`](crate::limits): handlers 5 minutes,
    /// requests 60 s, 10,000 parked frames, a silent turn reconciled
    /// after 30 s.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets [`handler_timeout`](Self::handler_timeout).
    pub fn handler_timeout(mut self, ms: Option<u64>) -> Self {
        self.handler_timeout = ms;
        self
    }

    /// Sets [`request_timeout`](Self::request_timeout).
    pub fn request_timeout(mut self, ms: Option<u64>) -> Self {
        self.request_timeout = ms;
        self
    }

    /// Sets [`park_frames`](Self::park_frames).
    pub fn park_frames(mut self, frames: usize) -> Self {
        self.park_frames = frames;
        self
    }

    /// Sets [`stall_interval`](Self::stall_interval).
    pub fn stall_interval(mut self, ms: Option<u64>) -> Self {
        self.stall_interval = ms;
        self
    }
}

/// An obligation the host must have answered: call the user's handler of
/// this kind, then [`Engine::answer`] or [`Engine::refuse`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Obligation {
    /// Give it back to answer.
    pub id: ObligationId,
    /// Which handler answers.
    pub handler: HandlerKind,
    /// When the engine will refuse in the handler's place (ms), if ever.
    pub deadline: Option<u64>,
}

/// One routed frame and what the engine did about it.
#[derive(Debug)]
#[must_use = "an output is a message to deliver, answer or report"]
pub struct Output<'a, T, W> {
    /// Where the frame goes, as [`Router::route`] decides. Deliver events,
    /// lifecycle notices, responses and notifications as before. A
    /// [`Route::Park`] was kept by the engine: nothing to do.
    pub route: Route<'a, T, W>,
    /// Set for a wait the host must have answered (a `Route::Event` or
    /// `Route::Request`).
    pub obligation: Option<Obligation>,
    /// Set when the engine has already answered the wait itself (its
    /// refusal was queued by this call: pull it with the rest). Still
    /// deliver an event: every event is delivered.
    pub refused: Option<Cause>,
    /// Set when the frame is the CLI's reply to an answer the engine sent
    /// (`true`: accepted). The route is then a `Route::UnmatchedResponse`
    /// that needs nothing from the host.
    pub answer_ack: Option<bool>,
    /// Set when the frame is the CLI's reply to a list of pending waits the
    /// engine asked for (see [`Engine::reconcile`]): hand it to
    /// [`Engine::open_listed`], which takes on the waits it names. The
    /// route is then a `Route::UnmatchedResponse` that needs nothing else.
    pub listed: Option<Listed<'a, T>>,
}

impl<'a, T, W> Output<'a, T, W> {
    /// A route with nothing decided about it.
    pub fn plain(route: Route<'a, T, W>) -> Self {
        Output { route, obligation: None, refused: None, answer_ack: None, listed: None }
    }

    fn refused(route: Route<'a, T, W>, cause: Cause) -> Self {
        Output { route, obligation: None, refused: Some(cause), answer_ack: None, listed: None }
    }

    fn obliged(route: Route<'a, T, W>, obligation: Obligation) -> Self {
        Output { route, obligation: Some(obligation), refused: None, answer_ack: None, listed: None }
    }
}

/// The most bytes of JSON text a failed handler's text takes in the
/// `error` of its failure answer ([`Engine::fail`]); the rest is cut.
/// The CLI logs it; the model does not read it.
pub const MAX_FAILURE_DETAIL: usize = 512;

/// Why [`Engine::answer`] or [`Engine::refuse`] sent nothing, or sent the
/// refusal instead.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum AnswerError {
    /// The obligation was already answered (by the handler, by a refusal,
    /// at its deadline or when its session was released): nothing was sent.
    Stale,
    /// The payload is not valid JSON: the row's refusal was sent instead.
    InvalidPayload,
    /// The wait is a request to this client, which only this client can
    /// answer, so it cannot be declined: the row's refusal was sent instead.
    NotDeclinable,
    /// The transmit store has no room for the frame now: nothing was sent
    /// and the wait is still open. Take what is queued
    /// ([`Engine::transmit`]), then call again.
    Full,
    /// The answer is larger than the transmit store can ever hold: the
    /// row's refusal was sent instead.
    TooLarge,
}

impl AnswerError {
    /// The message that [`Display`](fmt::Display) shows, for builds that
    /// leave `core::fmt` out.
    pub const fn message(&self) -> &'static str {
        match self {
            AnswerError::Stale => crate::messages::ANSWER_STALE,
            AnswerError::InvalidPayload => crate::messages::ANSWER_INVALID_PAYLOAD,
            AnswerError::NotDeclinable => crate::messages::ANSWER_NOT_DECLINABLE,
            AnswerError::Full => crate::messages::ANSWER_FULL,
            AnswerError::TooLarge => crate::messages::ANSWER_TOO_LARGE,
        }
    }
}

impl fmt::Display for AnswerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.message())
    }
}

impl core::error::Error for AnswerError {}

/// Why a session could not be opened. Its slot has been released either way.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum OpenError {
    /// The create or resume request failed.
    Rejected,
    /// The answer could not be read (not an object, or no usable
    /// `sessionId` where the server assigns it).
    Unreadable,
    /// The server named a session already open here, or the handle was stale.
    Conflict(ReserveErrorKind),
}

impl OpenError {
    /// The message that [`Display`](fmt::Display) shows, for builds that
    /// leave `core::fmt` out.
    pub const fn message(&self) -> &'static str {
        match self {
            OpenError::Rejected => crate::messages::OPEN_REJECTED,
            OpenError::Unreadable => crate::messages::OPEN_UNREADABLE,
            OpenError::Conflict(k) => k.message(),
        }
    }
}

impl fmt::Display for OpenError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.message())
    }
}

impl core::error::Error for OpenError {}

/// The engine's counters, with the router's.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct EngineStats {
    /// The router's counters.
    pub router: Stats,
    /// Obligations open now: waits the host has yet to settle.
    pub open_obligations: usize,
    /// Waits left to another client that the engine keeps now, until the
    /// CLI reports them answered or their deadline passes.
    pub left_open: usize,
    /// Age (ms) of the oldest open obligation.
    pub oldest_obligation_age: Option<u64>,
    /// Obligations opened.
    pub opened: u64,
    /// Obligations answered by a handler.
    pub answered: u64,
    /// Waits left to another client of the session: declined by a handler
    /// ([`Engine::decline`]), or refused for want of a handler where the
    /// row leaves them ([`Unhandled::Leave`](crate::Unhandled)). Nothing
    /// was sent for them.
    pub declined: u64,
    /// Of those, waits the CLI reported answered (by another client).
    pub left_answered: u64,
    /// Of those, waits forgotten without the CLI's report when their
    /// session was released here: nothing sent (another client may still
    /// answer them). Those no client answered by their deadline were
    /// refused then, counted with [`Cause::Deadline`].
    pub left_unanswered: u64,
    /// Waits answered with the engine's refusal, by [`Cause`] (indexed as
    /// [`Cause::ALL`]).
    pub refused: [u64; 9],
    /// Awaited events without a usable `requestId`: nothing can answer them.
    pub unanswerable: u64,
    /// Frames parked now, and their bytes.
    pub parked_frames: usize,
    /// Bytes of the parked frames (with a 4-byte length each).
    pub parked_bytes: usize,
    /// Plain events lost to a full parking storage (waits are refused instead).
    pub park_dropped: u64,
    /// Answers and refusals sent as RPCs.
    pub answers_sent: u64,
    /// Of those, acknowledged as accepted by the CLI.
    pub acks_accepted: u64,
    /// Of those, acknowledged with `success:false` or an error.
    pub acks_refused: u64,
    /// Refusals of routed frames (waits that could not become obligations)
    /// that found no room in a fixed transmit store: a host that breaks
    /// the store's sizing contract (see [the transmit
    /// store](Engine#the-transmit-store)) sees them here. Always 0 for a
    /// store that grows.
    pub unsent: u64,
    /// Requests for a list of pending waits sent ([`Engine::reconcile`]).
    pub lists_sent: u64,
    /// Of their replies, those that listed nothing usable: an error, no
    /// `items` array, or a session released meanwhile.
    pub lists_failed: u64,
    /// Waits taken on from a list (the CLI knew them; this client had not
    /// taken them on).
    pub listed: u64,
    /// Running turns found silent for the stall interval, and reconciled
    /// ([`EngineConfig::stall_interval`]).
    pub stalls: u64,
    /// Waits named again that this client had already taken on: an event
    /// or a listed item of a wait open here or among those answered last
    /// (not taken on twice).
    pub duplicate_waits: u64,
}

impl EngineStats {
    /// Refusals of one cause.
    pub fn refused(&self, cause: Cause) -> u64 {
        self.refused[cause.index()]
    }
}

/// Frames parked during a server-assigned create, in caller-supplied storage
/// (`[u8; N]`, or a `Vec<u8>`/`Box<[u8]>` under an allocator): each frame is
/// a 4-byte length and its body.
struct Park<P> {
    buf: P,
    /// End of the stored frames.
    len: usize,
    frames: usize,
    /// While re-routing: the next frame to look at.
    read: usize,
    /// While re-routing: the end of the frames kept (parked again).
    keep: usize,
    rerouting: bool,
    again: bool,
}

impl<P: FrameBuffer> Park<P> {
    fn push(&mut self, body: &[u8], max_frames: usize) -> bool {
        let end = self.len + 4 + body.len();
        // A storage that grows (within its own bound) is grown only as
        // frames are parked, so the bound costs no memory until a burst.
        if self.frames >= max_frames || body.len() > u32::MAX as usize || !self.buf.grow(end) {
            return false;
        }
        let buf = self.buf.bytes_mut();
        buf[self.len..self.len + 4].copy_from_slice(&(body.len() as u32).to_le_bytes());
        buf[self.len + 4..end].copy_from_slice(body);
        self.len = end;
        self.frames += 1;
        true
    }

    /// Starts (or restarts, once the current pass ends) a pass over the parked frames.
    fn reroute(&mut self) {
        if self.frames == 0 && !self.rerouting {
            return;
        }
        if self.rerouting {
            self.again = true;
        } else {
            (self.rerouting, self.read, self.keep) = (true, 0, 0);
        }
    }

    /// The span of the next frame to look at.
    fn next(&mut self) -> Option<(usize, usize)> {
        loop {
            if !self.rerouting {
                return None;
            }
            if self.read < self.len {
                let b = self.buf.bytes();
                let n = u32::from_le_bytes([b[self.read], b[self.read + 1], b[self.read + 2], b[self.read + 3]]);
                return Some((self.read + 4, self.read + 4 + n as usize));
            }
            self.len = self.keep;
            if self.again {
                (self.again, self.read, self.keep) = (false, 0, 0);
            } else {
                self.rerouting = false;
            }
        }
    }

    /// Keeps the frame at `read` parked.
    fn keep(&mut self, end: usize) {
        let start = self.read;
        self.buf.bytes_mut().copy_within(start..end, self.keep);
        self.keep += end - start;
        self.read = end;
    }

    /// The frame at `read` leaves the parking.
    fn consume(&mut self, end: usize) {
        self.read = end;
        self.frames -= 1;
    }
}

/// The part of the engine that decides; apart from the parking storage so
/// a parked frame can be routed while borrowed from it.
struct Core<T, W, X, const SESSIONS: usize, const PENDING: usize, const OBLIGATIONS: usize> {
    router: Router<T, W, SESSIONS, PENDING>,
    obligations: Obligations<OBLIGATIONS>,
    /// What was decided to send, until the host pulls it.
    tx: Transmit<X>,
    config: EngineConfig,
    stats: EngineStats,
    next_answer: u64,
    /// Per session slot: ask the CLI what is pending once its open
    /// completes (a resume, or [`Engine::reconcile`] during the open).
    reconcile_on_open: crate::slots::Fixed<bool, SESSIONS>,
    /// Per session slot: the session was resumed here (joined, or taken
    /// over), not created: its log holds history this client never saw.
    resumed: crate::slots::Fixed<bool, SESSIONS>,
    /// Per session slot: when its running turn is silent long enough to be
    /// reconciled (0: no turn running), and the generation of the session
    /// it was for.
    /// The third member is the wait before the next ask (ms).
    stall_due: crate::slots::Fixed<(u64, u32, u32), SESSIONS>,
    /// No stall is due before this (it may be earlier than any: a check
    /// then finds the next one).
    next_stall: u64,
    /// Per session slot: the hash of the id of the last durable event
    /// routed to it, and the generation of the session it was for.
    last_durable: crate::slots::Fixed<(u64, u32), SESSIONS>,
    /// Per session slot: its capabilities as the CLI last said them (the
    /// open's answer, then each `capabilities.changed`), and the generation
    /// of the session they are for: whether another client can answer a
    /// wait this one leaves ([`Capabilities::others_may_answer`]).
    caps: crate::slots::Fixed<(Capabilities, u32), SESSIONS>,
}

/// The protocol engine. `T` is what a session's frames are delivered to,
/// `W` what a request's response is delivered to (as for [`Router`]), `P`
/// the parking storage, `X` the transmit store; the capacities are const
/// parameters.
///
/// The engine is one value with `&mut self` methods: a threaded host keeps
/// it behind a mutex and calls user code outside it.
///
/// # The transmit store
///
/// What the engine decides to send is queued in `X`, whole frames in the
/// engine's order, until the host takes it ([`transmit`](Self::transmit)
/// then [`transmitted`](Self::transmitted), or
/// [`poll_transmit`](Self::poll_transmit)): after every call that feeds the
/// engine, before the next frame is written by anyone else, so the wire's
/// order is the engine's. A store that grows
/// ([`GrowingBuffer`](crate::GrowingBuffer)) always has room. A fixed one
/// (`[u8; N]`) may be full; the engine then keeps a wait open rather than
/// lose its answer:
/// - an answer ([`answer`](Self::answer), [`fail`](Self::fail), ...) that
///   does not fit now sends nothing and leaves the wait open
///   ([`AnswerError::Full`]): take what is queued and answer again; an
///   answer that could never fit sends the refusal instead
///   ([`AnswerError::TooLarge`]);
/// - a refusal of an open wait ([`refuse`](Self::refuse),
///   [`release`](Self::release), a deadline) that does not fit now: the
///   wait stays in the table, due at once ([`poll_timeout`](Self::poll_timeout)
///   says now), and [`handle_timeout`](Self::handle_timeout) refuses it
///   once there is room, in table order;
/// - a routed frame ([`poll`](Self::poll)) that cannot become an obligation
///   is refused at once; the refusal repeats the frame's ids, so it is no
///   longer than the frame plus the row's text. A host that takes the
///   queue after every call and sizes a fixed store for its largest frame
///   always has room; a refusal that still finds none is counted in
///   [`EngineStats::unsent`].
pub struct Engine<T, W, P, X, const SESSIONS: usize, const PENDING: usize, const OBLIGATIONS: usize> {
    core: Core<T, W, X, SESSIONS, PENDING, OBLIGATIONS>,
    park: Park<P>,
}

/// `detail` as a JSON string of at most [`MAX_FAILURE_DETAIL`] bytes, cut
/// to whole characters when it is longer; an empty `detail` is a generic
/// text (an empty `error` would read as no error).
fn failure_text<'b>(detail: &str, buf: &'b mut [u8; MAX_FAILURE_DETAIL]) -> &'b [u8] {
    let detail = if detail.is_empty() { crate::answers::FAILED_WITHOUT_TEXT } else { detail };
    let mut cut = detail.len();
    loop {
        let part = loop {
            match detail.get(..cut) {
                Some(part) => break part,
                None => cut -= 1,
            }
        };
        let mut at = 0;
        if crate::json::write_escaped(buf, &mut at, part).is_some() {
            return &buf[..at];
        }
        // Too long: what fits however it escapes (six bytes a byte, two quotes).
        cut = (MAX_FAILURE_DETAIL - 2) / 6;
    }
}

/// An id as JSON text, in three parts.
fn id_parts<'a>(id: &Id<'a>) -> [&'a [u8]; 3] {
    match id {
        Id::Null => [b"null", b"", b""],
        Id::Number(n) => [n.raw().as_bytes(), b"", b""],
        Id::String(s) => [b"\"", s.as_bytes(), b"\""],
    }
}

fn copy<const N: usize>(parts: &[&[u8]]) -> Option<Vec<u8, N>> {
    let mut v = Vec::new();
    for p in parts {
        v.extend_from_slice(p).ok()?;
    }
    Some(v)
}

impl<T: Clone, W, X: FrameBuffer, const SESSIONS: usize, const PENDING: usize, const OBLIGATIONS: usize>
    Core<T, W, X, SESSIONS, PENDING, OBLIGATIONS>
{
    fn count(&mut self, cause: Cause) {
        self.stats.refused[cause.index()] += 1;
    }

    /// Sends the answering RPC of an event row, with `members` (object
    /// members as JSON text, without braces) added to the params.
    /// A frame the engine owes but could not queue (a fixed transmit store
    /// smaller than its host's contract): counted, see [`EngineStats::unsent`].
    fn routed(&mut self, sent: Result<(), NoRoom>) {
        if Transmit::<X>::full(sent) {
            self.stats.unsent += 1;
        }
    }

    fn send_result(&mut self, id: [&[u8]; 3], result: &[u8]) -> Result<(), NoRoom> {
        self.tx.emit(&[b"{\"jsonrpc\":\"2.0\",\"id\":", id[0], id[1], id[2], b",\"result\":", result, b"}"])
    }

    /// The response to a request answered by `row.via` =
    /// `Response { member }`: `result` is `payload` (`null` for none), or
    /// with a member `{"<member>":payload}` (`{}` for none).
    fn send_response(&mut self, id: [&[u8]; 3], member: Option<&str>, payload: Option<&[u8]>) -> Result<(), NoRoom> {
        match (member, payload) {
            (None, p) => self.send_result(id, p.unwrap_or(b"null")),
            (Some(_), None) => self.send_result(id, b"{}"),
            (Some(key), Some(p)) => self.tx.emit(&[
                b"{\"jsonrpc\":\"2.0\",\"id\":",
                id[0],
                id[1],
                id[2],
                b",\"result\":{\"",
                key.as_bytes(),
                b"\":",
                p,
                b"}}",
            ]),
        }
    }

    fn send_error(&mut self, id: [&[u8]; 3], code: i64, message: &str) -> Result<(), NoRoom> {
        self.send_error_parts(id, code, [b"\"", message.as_bytes(), b"\""], None)
    }

    /// Sends an error response whose `data` names a machine `code` (both
    /// texts JSON strings): `{code, message, data: {code, message}}`.
    fn send_coded_error(&mut self, id: [&[u8]; 3], code: i64, machine: &[u8], message: &[u8]) -> Result<(), NoRoom> {
        self.send_error_parts(id, code, [message, b"", b""], Some(machine))
    }

    /// An error response: `message` is the JSON string in parts; with a
    /// `machine` code (a JSON string), `data` is `{code, message}`.
    fn send_error_parts(
        &mut self,
        id: [&[u8]; 3],
        code: i64,
        message: [&[u8]; 3],
        machine: Option<&[u8]>,
    ) -> Result<(), NoRoom> {
        let mut digits = [0; 20];
        let n = itoa(code.unsigned_abs(), &mut digits);
        let sign: &[u8] = if code < 0 { b"-" } else { b"" };
        let (data, m): ([&[u8]; 3], [&[u8]; 3]) = match machine {
            Some(c) => ([b",\"data\":{\"code\":", c, b",\"message\":"], message),
            None => ([b"", b"", b""], [b"", b"", b""]),
        };
        let close: &[u8] = if machine.is_some() { b"}}}" } else { b"}}" };
        self.tx.emit(&[
            b"{\"jsonrpc\":\"2.0\",\"id\":",
            id[0],
            id[1],
            id[2],
            b",\"error\":{\"code\":",
            sign,
            n,
            b",\"message\":",
            message[0],
            message[1],
            message[2],
            data[0],
            data[1],
            data[2],
            m[0],
            m[1],
            m[2],
            close,
        ])
    }

    /// Sends `row`'s refusal for the wait `(session_id, request_id)`.
    fn send_refusal(&mut self, row: &AnswerRow, session_id: &[u8], request_id: [&[u8]; 3]) -> Result<(), NoRoom> {
        match (row.via, row.refusal) {
            (AnswerVia::Rpc { method, key }, refusal) => {
                let payload = match refusal {
                    Refusal::Payload(p) => Some(p.as_bytes()),
                    Refusal::Omit | Refusal::Error { .. } => None,
                };
                self.send_rpc_parts(method, key, session_id, request_id, payload, b"")
            }
            (AnswerVia::Response { member }, Refusal::Payload(p)) => {
                self.send_response(request_id, member, Some(p.as_bytes()))
            }
            (AnswerVia::Response { member }, Refusal::Omit) => self.send_response(request_id, member, None),
            (AnswerVia::Response { .. }, Refusal::Error { code, message }) => {
                self.send_error(request_id, code, message)
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn send_rpc_parts(
        &mut self,
        method: &str,
        key: &str,
        session_id: &[u8],
        request_id: [&[u8]; 3],
        payload: Option<&[u8]>,
        members: &[u8],
    ) -> Result<(), NoRoom> {
        let mut digits = [0; 20];
        let n = itoa(self.next_answer + 1, &mut digits);
        let (sep, key, colon, payload) = match payload {
            Some(p) => (&b",\""[..], key.as_bytes(), &b"\":"[..], p),
            None => (&b""[..], &b""[..], &b""[..], &b""[..]),
        };
        self.tx.emit(&[
            b"{\"jsonrpc\":\"2.0\",\"id\":\"",
            ANSWER_ID_PREFIX.as_bytes(),
            n,
            b"\",\"method\":\"",
            method.as_bytes(),
            b"\",\"params\":{\"sessionId\":\"",
            session_id,
            b"\",\"requestId\":",
            request_id[0],
            request_id[1],
            request_id[2],
            sep,
            key,
            colon,
            payload,
            if members.is_empty() { &b""[..] } else { &b","[..] },
            members,
            b"}}",
        ])?;
        self.next_answer += 1;
        self.stats.answers_sent += 1;
        Ok(())
    }

    /// Sends the refusal of `open` and counts it; nothing (an `Err`) when
    /// the transmit store has no room.
    /// A wait left to another client that none answered by its deadline
    /// gets the refusal then; one whose session was released here is
    /// forgotten (another client of the session may still answer it),
    /// counted.
    fn refuse_open(&mut self, open: &Open, cause: Cause) -> Result<(), NoRoom> {
        if open.left && cause != Cause::Deadline {
            self.stats.left_unanswered += 1;
            return Ok(());
        }
        let before = self.next_answer;
        self.send_refusal(&ANSWERS[usize::from(open.row)], &open.session_id, [&open.request_id, b"", b""])?;
        self.note_sent(open, before);
        self.count(cause);
        Ok(())
    }

    /// Notes the answering RPC `open`'s answer went in, if one was sent
    /// since the count was `before` (not for an answer in a response).
    fn note_sent(&mut self, open: &Open, before: u64) {
        if self.next_answer != before {
            self.obligations.sent_as(open, self.next_answer);
        }
    }

    /// Refuses at once the wait `(session_id, rid)` of event row
    /// `row_index` that could not become an obligation, and remembers it
    /// as discharged: a list read before the CLI took the refusal names it
    /// again, and it is not answered twice.
    fn refuse_at_once(&mut self, row_index: u16, session_id: &[u8], rid: [&[u8]; 3], cause: Cause) {
        let before = self.next_answer;
        let sent = self.send_refusal(&ANSWERS[usize::from(row_index)], session_id, rid);
        if sent.is_ok() {
            let answer = if self.next_answer == before { 0 } else { self.next_answer };
            self.obligations.discharged(row_index, session_id, rid, answer);
        }
        self.routed(sent);
        self.count(cause);
    }

    /// The row of an event that is an obligation (not one resolved by a hook).
    fn event_row(event: &EventInfo<'_>) -> Option<(u16, &'static AnswerRow)> {
        let row = row_for_event(event.event_type)?;
        let by_hook = event.data.and_then(|d| d.get("resolvedByHook")).and_then(|v| v.as_bool()) == Some(true);
        (!(by_hook && event.event_type == "permission.requested")).then_some(row)
    }

    fn open(
        &mut self,
        row: u16,
        session: Option<SessionHandle>,
        session_id: &[u8],
        request_id: [&[u8]; 3],
        now: u64,
    ) -> Result<Obligation, Cause> {
        let (Some(session_id), Some(request_id)) = (copy(&[session_id]), copy(&request_id)) else {
            return Err(Cause::Unreadable);
        };
        let deadline = self.config.handler_timeout.map_or(NEVER, |t| now.saturating_add(t));
        let open = Open { row, session, session_id, request_id, opened: now, deadline, left: false, reported: false };
        let id = self.obligations.open(open).ok_or(Cause::TableFull)?;
        self.stats.opened += 1;
        let handler = ANSWERS[usize::from(row)].handler;
        Ok(Obligation { id, handler, deadline: (deadline != NEVER).then_some(deadline) })
    }

    /// Decides what to do with a routed frame (a `Park` is handled by the caller).
    fn decide<'a>(&mut self, route: Route<'a, T, W>, now: u64) -> Output<'a, T, W> {
        match route {
            Route::Event { session, target, session_id, event } => {
                self.note_activity(session, event.event_type, now);
                self.note_delivered(session, &event);
                if event.event_type == CAPABILITIES_CHANGED_EVENT {
                    if let (Some((caps, generation)), Some(data)) = (self.caps.get_mut(session.index()), event.data) {
                        if *generation == session.generation() {
                            caps.merge(data);
                        }
                    }
                }
                let Some((row_index, row)) = Self::event_row(&event) else {
                    if !self.obligations.is_empty() {
                        self.note_report(session, &event);
                    }
                    return Output::plain(Route::Event { session, target, session_id, event });
                };
                let Some(request_id) = event.request_id else {
                    self.stats.unanswerable += 1;
                    return Output::plain(Route::Event { session, target, session_id, event });
                };
                let rid = [&b"\""[..], request_id.as_bytes(), b"\""];
                // Taken on already (from a list, or this very event again):
                // delivered, not answered twice.
                if self.obligations.knows(row_index, session_id.as_bytes(), rid) {
                    self.stats.duplicate_waits += 1;
                    return Output::plain(Route::Event { session, target, session_id, event });
                }
                let result = if event.data.is_some() && row.handler.can_read(event.data) {
                    self.open(row_index, Some(session), session_id.as_bytes(), rid, now)
                } else {
                    Err(Cause::Unreadable)
                };
                let route = Route::Event { session, target, session_id, event };
                match result {
                    Ok(ob) => Output::obliged(route, ob),
                    Err(cause) => {
                        self.refuse_at_once(row_index, session_id.as_bytes(), rid, cause);
                        Output::refused(route, cause)
                    }
                }
            }
            Route::Request { id, method, params, session } => {
                let Some((row_index, row)) = row_for_request(method) else {
                    let sent = self.send_error(id_parts(&id), METHOD_NOT_FOUND, "method not found");
                    self.routed(sent);
                    self.count(Cause::NotServed);
                    return Output::refused(Route::Request { id, method, params, session }, Cause::NotServed);
                };
                let readable = row.handler.can_read(params);
                let session_id = params.and_then(|p| p.get("sessionId")).and_then(|v| v.as_str());
                let sid = session_id.map_or(&b""[..], |s| s.as_bytes());
                let result = if readable {
                    self.open(row_index, session.as_ref().map(|(h, _)| *h), sid, id_parts(&id), now)
                } else {
                    Err(Cause::Unreadable)
                };
                let route = Route::Request { id, method, params, session };
                match result {
                    Ok(ob) => Output::obliged(route, ob),
                    Err(cause) => {
                        let sent = self.send_refusal(row, sid, id_parts(&id));
                        self.routed(sent);
                        self.count(cause);
                        Output::refused(route, cause)
                    }
                }
            }
            Route::UnknownSession { session_id, event, reply_to, method } => {
                let route = Route::UnknownSession { session_id, event, reply_to, method };
                self.refuse_unrouted(route, Cause::SessionGone)
            }
            Route::Malformed(e) => match e.reply_to {
                Some(id) => {
                    let message = if e.code() == PARSE_ERROR { "parse error" } else { "invalid request" };
                    let sent = self.send_error(id_parts(&id), e.code(), message);
                    self.routed(sent);
                    self.count(Cause::Malformed);
                    Output::refused(Route::Malformed(e), Cause::Malformed)
                }
                None => Output::plain(Route::Malformed(e)),
            },
            Route::UnmatchedResponse { id: Id::String(s), result } if s.raw().starts_with(ANSWER_ID_PREFIX) => {
                let accepted = match &result {
                    Ok(v) => v.get("success").and_then(|s| s.as_bool()) != Some(false),
                    Err(_) => false,
                };
                // Acknowledged either way: the CLI has the answer. One it
                // refused does not settle the wait.
                if let Some(n) = read_answer_id(s.raw().as_bytes()) {
                    self.obligations.confirm(n, accepted);
                }
                if accepted {
                    self.stats.acks_accepted += 1;
                } else {
                    self.stats.acks_refused += 1;
                }
                Output {
                    route: Route::UnmatchedResponse { id: Id::String(s), result },
                    obligation: None,
                    refused: None,
                    answer_ack: Some(accepted),
                    listed: None,
                }
            }
            Route::UnmatchedResponse { id: Id::String(s), result } if s.raw().starts_with(LIST_ID_PREFIX) => {
                let listed = self.listed(s.raw(), &result);
                Output { listed, ..Output::plain(Route::UnmatchedResponse { id: Id::String(s), result }) }
            }
            other => Output::plain(other),
        }
    }

    /// Refuses the wait in a frame that reaches no session (unknown, or
    /// parking full), if it is one. `route` is an `UnknownSession` or `Park`.
    fn refuse_unrouted<'a>(&mut self, route: Route<'a, T, W>, cause: Cause) -> Output<'a, T, W> {
        let (session_id, event, request) = match &route {
            Route::UnknownSession { session_id, event, reply_to, method } => {
                (*session_id, *event, reply_to.map(|id| (id, *method)))
            }
            Route::Park { body, session_id } => match crate::envelope::Envelope::decode(body) {
                Ok(env) => match env.message {
                    crate::envelope::Message::Request { id, method, .. } => (*session_id, None, Some((id, method))),
                    _ => (*session_id, env.event, None),
                },
                Err(_) => (*session_id, None, None),
            },
            _ => return Output::plain(route),
        };
        if let Some(event) = event {
            if let Some((row_index, _)) = Self::event_row(&event) {
                let Some(rid) = event.request_id else {
                    self.stats.unanswerable += 1;
                    return Output::plain(route);
                };
                self.refuse_at_once(row_index, session_id.as_bytes(), [b"\"", rid.as_bytes(), b"\""], cause);
                return Output::refused(route, cause);
            }
            return Output::plain(route);
        }
        if let Some((id, method)) = request {
            let sent = match row_for_request(method) {
                Some((_, row)) => self.send_refusal(row, session_id.as_bytes(), id_parts(&id)),
                None => self.send_error(id_parts(&id), METHOD_NOT_FOUND, "method not found"),
            };
            self.routed(sent);
            self.count(cause);
            return Output::refused(route, cause);
        }
        Output::plain(route)
    }

    /// Whether a client of `open`'s session other than this one may answer
    /// it, as far as the CLI has said (see
    /// [`Capabilities::others_may_answer`]).
    fn others_may_answer(&self, open: &Open) -> bool {
        let caps = open
            .session
            .and_then(|h| self.caps.get(h.index()).filter(|(_, g)| *g == h.generation()))
            .map_or(Capabilities::NONE, |(c, _)| *c);
        caps.others_may_answer(ANSWERS[usize::from(open.row)].handler)
    }

    /// Acts on `event` (of `session`) if it reports a wait answered (its
    /// row's [`Unhandled::Leave`] event, with the same `requestId`): a wait
    /// left to another client is forgotten; one the host has yet to settle
    /// is noted, so that leaving it forgets it at once (the report may come
    /// before the host has found it has no handler). Nothing is sent.
    fn note_report(&mut self, session: SessionHandle, event: &EventInfo<'_>) {
        let Some(row) = crate::answers::row_reported_by(event.event_type) else { return };
        let Some(rid) = event.data.and_then(|d| d.get("requestId")).and_then(|v| v.as_str()) else { return };
        if self.obligations.note_answered(session, row, rid.as_bytes()) {
            self.stats.left_answered += 1;
        }
    }

    /// Refuses the open obligations matching `f` for `cause`, each
    /// discharged once its refusal is queued. When the transmit store
    /// fills, the rest stay open and are made due (`deadline` 0), so that
    /// [`Engine::handle_timeout`] refuses them once the host has pulled.
    fn refuse_where(&mut self, cause: Cause, mut f: impl FnMut(&Open) -> bool) {
        while let Some((id, open)) = self.obligations.take_where(&mut f) {
            if Transmit::<X>::full(self.refuse_open(&open, cause)) {
                self.obligations.restore(id, open);
                self.obligations.make_due(f);
                return;
            }
        }
    }
}

impl<
        T: Clone,
        W,
        P: FrameBuffer,
        X: FrameBuffer,
        const SESSIONS: usize,
        const PENDING: usize,
        const OBLIGATIONS: usize,
    > Engine<T, W, P, X, SESSIONS, PENDING, OBLIGATIONS>
{
    /// An engine with empty tables, parking frames in `park` (its length is
    /// the byte bound; `[0; 0]` parks nothing) and queuing what it sends in
    /// `transmit` (see [the engine's bounds](Engine#the-transmit-store)). A
    /// storage that grows ([`FrameBuffer::grow`]) is grown as frames are
    /// parked or queued, as far as it allows.
    pub fn new(park: P, transmit: X, config: EngineConfig) -> Self {
        Engine {
            core: Core {
                router: Router::new(),
                obligations: Obligations::new(),
                tx: Transmit::new(transmit),
                config,
                stats: EngineStats::default(),
                next_answer: 0,
                reconcile_on_open: {
                    #[cfg(not(feature = "alloc"))]
                    let flags = [false; SESSIONS];
                    #[cfg(feature = "alloc")]
                    let flags = alloc::vec![false; SESSIONS];
                    flags
                },
                resumed: {
                    #[cfg(not(feature = "alloc"))]
                    let flags = [false; SESSIONS];
                    #[cfg(feature = "alloc")]
                    let flags = alloc::vec![false; SESSIONS];
                    flags
                },
                stall_due: {
                    #[cfg(not(feature = "alloc"))]
                    let due = [(0, 0, 0); SESSIONS];
                    #[cfg(feature = "alloc")]
                    let due = alloc::vec![(0, 0, 0); SESSIONS];
                    due
                },
                next_stall: NEVER,
                last_durable: {
                    #[cfg(not(feature = "alloc"))]
                    let ids = [(0, 0); SESSIONS];
                    #[cfg(feature = "alloc")]
                    let ids = alloc::vec![(0, 0); SESSIONS];
                    ids
                },
                caps: {
                    const NONE: (Capabilities, u32) = (Capabilities::NONE, 0);
                    #[cfg(not(feature = "alloc"))]
                    let caps = [NONE; SESSIONS];
                    #[cfg(feature = "alloc")]
                    let caps = alloc::vec![NONE; SESSIONS];
                    caps
                },
            },
            park: Park { buf: park, len: 0, frames: 0, read: 0, keep: 0, rerouting: false, again: false },
        }
    }

    /// The router (its session and pending tables): for reading state and
    /// for requests sent without a deadline.
    pub fn router(&self) -> &Router<T, W, SESSIONS, PENDING> {
        &self.core.router
    }

    /// The configuration.
    pub fn config(&self) -> &EngineConfig {
        &self.core.config
    }

    /// Allocates the id of a request about to be sent, with the configured
    /// request deadline counted from `now`.
    pub fn insert_request(&self, waiter: W, now: u64) -> Result<RequestId, PendingFull<W>> {
        let deadline = self.core.config.request_timeout.map(|t| now.saturating_add(t));
        self.core.router.pending().insert_with_deadline(waiter, deadline)
    }

    /// Every frame decided and not yet taken, whole and in the engine's
    /// order: write them to the transport, then call
    /// [`transmitted`](Self::transmitted). Call after every call that feeds
    /// the engine (a frame, an answer, the time, a session change).
    pub fn transmit(&self) -> &[u8] {
        self.core.tx.queued()
    }

    /// The first `n` bytes of [`transmit`](Self::transmit) were taken
    /// (written, or handed to the writer); they leave the store.
    pub fn transmitted(&mut self, n: usize) {
        self.core.tx.taken(n);
    }

    /// Copies as many of the queued bytes as fit into `buf` and takes them
    /// (frames may be cut between two calls: write them in order); `None`
    /// when nothing is queued. Call until `None` after every call that
    /// feeds the engine.
    #[must_use = "the bytes copied must be written to the transport"]
    pub fn poll_transmit(&mut self, buf: &mut [u8]) -> Option<usize> {
        self.core.tx.pull(buf)
    }

    /// Takes the next frame from `decoder` and decides about it; `None` when
    /// the decoder needs more bytes. A frame the engine sends by itself
    /// (a refusal, an error response) is queued before this returns.
    ///
    /// After [`assign`](Self::assign), [`complete_open`](Self::complete_open)
    /// or [`release`](Self::release), drain [`poll_parked`](Self::poll_parked)
    /// before polling again, so that frames keep their order.
    pub fn poll<'d, B: FrameBuffer>(&mut self, decoder: &'d mut FrameDecoder<B>, now: u64) -> Option<Output<'d, T, W>> {
        let body = match decoder.poll()? {
            Ok(body) => body,
            Err(e) => {
                self.core.router.count_frame_error(&e);
                return Some(Output::plain(Route::FrameError(e)));
            }
        };
        self.core.router.count_frame(body);
        Some(self.route(body, now))
    }

    /// Decides about one frame body (what [`poll`](Self::poll) does per frame).
    pub fn route<'a>(&mut self, body: &'a [u8], now: u64) -> Output<'a, T, W> {
        let route = self.core.router.classify(body);
        let is_ack = matches!(&route, Route::UnmatchedResponse { id: Id::String(s), .. }
            if s.raw().starts_with(ANSWER_ID_PREFIX) || s.raw().starts_with(LIST_ID_PREFIX));
        if !is_ack {
            self.core.router.count(&route, true);
        }
        if let Route::Park { body, .. } = &route {
            if self.park.push(body, self.core.config.park_frames) {
                return Output::plain(route);
            }
            let out = self.core.refuse_unrouted(route, Cause::ParkOverflow);
            if out.refused.is_none() {
                self.core.stats.park_dropped += 1;
            }
            return out;
        }
        self.core.decide(route, now)
    }

    /// The next parked frame that a session change made routable (or that
    /// now belongs to no session, and was refused if it is a wait); `None`
    /// when none is left. Call until `None` after a change of the session
    /// table, before the next [`poll`](Self::poll).
    pub fn poll_parked(&mut self, now: u64) -> Option<Output<'_, T, W>> {
        let (start, end) = loop {
            let (start, end) = self.park.next()?;
            let parks = matches!(self.core.router.classify(&self.park.buf.bytes()[start..end]), Route::Park { .. });
            if parks {
                self.park.keep(end);
            } else {
                self.park.consume(end);
                break (start, end);
            }
        };
        let body = &self.park.buf.bytes()[start..end];
        let route = self.core.router.classify(body);
        self.core.router.count(&route, false);
        Some(self.core.decide(route, now))
    }

    /// Passes on the answer of the user's handler (`payload`, JSON text) and
    /// discharges the obligation: the answering RPC (`{sessionId, requestId,
    /// <key>: payload}`, the key left out when `payload` is `null`) or the
    /// response to the server's request is queued.
    pub fn answer(&mut self, id: ObligationId, payload: &[u8]) -> Result<(), AnswerError> {
        self.answer_with(id, payload, b"")
    }

    /// [`answer`](Self::answer), with more members of the answering RPC's
    /// params beside the answer: `siblings` is the text of a JSON object
    /// (such as `{"decisionContext":{..}}` beside a permission decision), or
    /// empty for none. A request's response has no room for them: siblings
    /// there, or siblings that are not an object, send the refusal instead
    /// ([`AnswerError::InvalidPayload`]).
    pub fn answer_with(&mut self, id: ObligationId, payload: &[u8], siblings: &[u8]) -> Result<(), AnswerError> {
        let open = self.core.obligations.take(id).ok_or(AnswerError::Stale)?;
        self.send_answer(id, open, payload, siblings)?;
        self.core.stats.answered += 1;
        Ok(())
    }

    /// [`answer_with`](Self::answer_with) for an answer the core shaped
    /// ([`shape_answer`](crate::shape_answer)): JSON objects by
    /// construction, so they are sent without being read again. `siblings`
    /// is the object of the members beside the answer, if any.
    #[cfg(feature = "alloc")]
    pub fn answer_shaped(
        &mut self,
        id: ObligationId,
        payload: &crate::Shaped,
        siblings: Option<&crate::Shaped>,
    ) -> Result<(), AnswerError> {
        let open = self.core.obligations.take(id).ok_or(AnswerError::Stale)?;
        let row = &ANSWERS[usize::from(open.row)];
        let members = match (siblings, row.via) {
            (None, _) => b"".as_slice(),
            (Some(s), AnswerVia::Rpc { .. }) => s.members(),
            (Some(_), AnswerVia::Response { .. }) => {
                self.refuse_instead(id, open, Cause::HandlerFailed)?;
                return Err(AnswerError::InvalidPayload);
            }
        };
        self.send_valid(id, open, payload.as_bytes(), false, members, None)?;
        self.core.stats.answered += 1;
        Ok(())
    }

    /// Sends the answer of `open` (taken as `id`), uncounted; if it is not
    /// valid, or can never fit the transmit store, the refusal goes
    /// instead (counted). With no room now, nothing is sent and the
    /// obligation is put back ([`AnswerError::Full`]).
    fn send_answer(
        &mut self,
        id: ObligationId,
        open: Open,
        payload: &[u8],
        siblings: &[u8],
    ) -> Result<(), AnswerError> {
        let row = &ANSWERS[usize::from(open.row)];
        // The members of the siblings' object, without its braces (JSON's
        // white space trimmed by the core's own scanner: no second trim).
        let members = match (crate::json::trim_ws(siblings), row.via) {
            (b"", _) => Some(&b""[..]),
            (siblings, AnswerVia::Rpc { .. }) => match Value::parse(siblings) {
                Ok(v) if v.kind() == Kind::Object => Some(crate::json::trim_ws(&siblings[1..siblings.len() - 1])),
                _ => None,
            },
            (_, AnswerVia::Response { .. }) => None,
        };
        let (Ok(value), Some(members)) = (Value::parse(payload), members) else {
            self.refuse_instead(id, open, Cause::HandlerFailed)?;
            return Err(AnswerError::InvalidPayload);
        };
        self.send_valid(id, open, payload, value.kind() == Kind::Null, members, None)
    }

    /// Sends `payload` (one JSON value; `null` as `is_null` says) as the
    /// answer of `open`, with `members` (an object's members, without its
    /// braces) beside it; see [`send_answer`](Self::send_answer). In an
    /// answering RPC it goes under `key`, else the row's.
    fn send_valid(
        &mut self,
        id: ObligationId,
        open: Open,
        payload: &[u8],
        is_null: bool,
        members: &[u8],
        key: Option<&'static str>,
    ) -> Result<(), AnswerError> {
        let row = &ANSWERS[usize::from(open.row)];
        let before = self.core.next_answer;
        let sent = match row.via {
            AnswerVia::Rpc { method, key: row_key } => {
                let key = key.unwrap_or(row_key);
                let payload = (!is_null).then_some(payload);
                self.core.send_rpc_parts(method, key, &open.session_id, [&open.request_id, b"", b""], payload, members)
            }
            AnswerVia::Response { member } => self.core.send_response(
                [&open.request_id, b"", b""],
                member,
                (member.is_none() || !is_null).then_some(payload),
            ),
        };
        if sent.is_ok() {
            self.core.note_sent(&open, before);
        }
        match sent {
            Ok(()) => Ok(()),
            // A store with frames queued may have room once they are taken.
            Err(NoRoom) if X::GROWS_WITHOUT_BOUND => Ok(()),
            Err(NoRoom) if !self.core.tx.queued().is_empty() => {
                self.core.obligations.restore(id, open);
                Err(AnswerError::Full)
            }
            Err(_) => {
                self.refuse_instead(id, open, Cause::HandlerFailed)?;
                Err(AnswerError::TooLarge)
            }
        }
    }

    /// Sends the refusal of `open` (taken as `id`) for `cause`, counted;
    /// with no room, puts it back: [`AnswerError::Full`].
    fn refuse_instead(&mut self, id: ObligationId, open: Open, cause: Cause) -> Result<(), AnswerError> {
        if Transmit::<X>::full(self.core.refuse_open(&open, cause)) {
            self.core.obligations.restore(id, open);
            return Err(AnswerError::Full);
        }
        Ok(())
    }

    /// Discharges the obligation for a handler that failed (threw,
    /// panicked, returned an error) with the text `detail`: a row with a
    /// [`failure`](crate::AnswerRow::failure) member (a tool's `error`)
    /// sends the answering RPC with `detail` there in place of the answer
    /// (cut to whole characters within [`MAX_FAILURE_DETAIL`] bytes of
    /// JSON), as the official SDKs do: the CLI tells the model that the
    /// tool failed, in its own words, and logs the text. Any other row gets
    /// its refusal. Counted as refused for [`Cause::HandlerFailed`].
    pub fn fail(&mut self, id: ObligationId, detail: &str) -> Result<(), AnswerError> {
        self.fail_coded(id, "", detail)
    }

    /// [`fail`](Self::fail), with the machine-readable `code` the handler
    /// named (a canvas handler's error code; empty: none). A row whose
    /// failure is a coded JSON-RPC error
    /// ([`failure_error`](crate::AnswerRow::failure_error)) answers
    /// `{code, message: detail, data: {code: <code or the row's>,
    /// message: detail}}`; other rows ignore `code`.
    pub fn fail_coded(&mut self, id: ObligationId, code: &str, detail: &str) -> Result<(), AnswerError> {
        let open = self.core.obligations.take(id).ok_or(AnswerError::Stale)?;
        let row = &ANSWERS[usize::from(open.row)];
        let mut buf = [0; MAX_FAILURE_DETAIL];
        if let Some((rpc_code, default)) = row.failure_error() {
            let mut code_buf = [0; MAX_FAILURE_DETAIL];
            let code = failure_text(if code.is_empty() { default } else { code }, &mut code_buf);
            let message = failure_text(detail, &mut buf);
            let sent = self.core.send_coded_error([&open.request_id, b"", b""], rpc_code, code, message);
            match sent {
                Ok(()) => {}
                Err(NoRoom) if X::GROWS_WITHOUT_BOUND => {}
                Err(NoRoom) if !self.core.tx.queued().is_empty() => {
                    self.core.obligations.restore(id, open);
                    return Err(AnswerError::Full);
                }
                Err(_) => {
                    self.refuse_instead(id, open, Cause::HandlerFailed)?;
                    return Err(AnswerError::TooLarge);
                }
            }
            self.core.count(Cause::HandlerFailed);
            return Ok(());
        }
        let Some(member) = row.failure() else {
            return self.refuse_instead(id, open, Cause::HandlerFailed);
        };
        self.send_valid(id, open, failure_text(detail, &mut buf), false, b"", Some(member))?;
        self.core.count(Cause::HandlerFailed);
        Ok(())
    }

    /// Leaves the wait to another client connected to the same session
    /// (the CLI asks every client; the first answer counts): the handler
    /// declined, or there is none and the row leaves such waits
    /// ([`Unhandled::Leave`](crate::Unhandled)), while another client can
    /// answer it ([`Capabilities::others_may_answer`]; else the refusal
    /// goes at once). Nothing is sent now; [`EngineStats::declined`] counts
    /// it. For the host the wait is settled (its id reaches nothing); the
    /// engine keeps it until the CLI reports it answered, or until its
    /// deadline, when the refusal goes (see
    /// [`Unhandled::Leave`](crate::Unhandled)). Only the waits the table
    /// leaves can be declined: any other (a request to this client) gets
    /// its refusal instead ([`AnswerError::NotDeclinable`]).
    pub fn decline(&mut self, id: ObligationId) -> Result<(), AnswerError> {
        let open = self.core.obligations.take(id).ok_or(AnswerError::Stale)?;
        if ANSWERS[usize::from(open.row)].leaves_unhandled() {
            if self.core.others_may_answer(&open) {
                self.leave(id, open);
                return Ok(());
            }
            // Nobody else can: the refusal goes now.
            return self.refuse_instead(id, open, Cause::NoHandler);
        }
        self.refuse_instead(id, open, Cause::HandlerFailed)?;
        Err(AnswerError::NotDeclinable)
    }

    /// Leaves `open` (taken as `id`) to another client: kept, unless the
    /// CLI has reported it answered already.
    fn leave(&mut self, id: ObligationId, mut open: Open) {
        self.core.stats.declined += 1;
        if open.reported {
            self.core.stats.left_answered += 1;
        } else {
            open.left = true;
            self.core.obligations.restore(id, open);
        }
    }

    /// Discharges the obligation with its row's refusal (no handler, the
    /// handler failed, the data did not fit the handler's types). For
    /// [`Cause::NoHandler`], a row that leaves such waits to another client
    /// of the session ([`Unhandled::Leave`](crate::Unhandled)) sends
    /// nothing: the wait is left, as by [`decline`](Self::decline). So
    /// every host follows the table by reporting that it has no handler.
    pub fn refuse(&mut self, id: ObligationId, cause: Cause) -> Result<(), AnswerError> {
        let open = self.core.obligations.take(id).ok_or(AnswerError::Stale)?;
        if cause == Cause::NoHandler
            && ANSWERS[usize::from(open.row)].leaves_unhandled()
            && self.core.others_may_answer(&open)
        {
            self.leave(id, open);
            return Ok(());
        }
        self.refuse_instead(id, open, cause)
    }

    /// Whether the obligation is still open.
    pub fn is_open(&self, id: ObligationId) -> bool {
        self.core.obligations.get(id).is_some()
    }

    /// Acts on every deadline at or before `now`: refuses the obligations
    /// whose handler ran out of time (queued), and hands the waiter of
    /// each request past its deadline to `expired` (wake its caller with a
    /// timeout; a late response is then reported as unmatched). Also
    /// refuses the waits a full transmit store held back (made due at
    /// once, see [the transmit store](Engine#the-transmit-store)).
    pub fn handle_timeout(&mut self, now: u64, expired: impl FnMut(RequestId, W)) {
        // A wait of a released session was held back by a full store: it
        // is refused as its session's, not for its handler's deadline.
        while let Some((id, open)) = self.core.obligations.take_where(|o| o.deadline <= now) {
            // Only a store that fills owes the refusals of released sessions.
            let gone =
                !X::GROWS_WITHOUT_BOUND && open.session.is_some_and(|h| self.core.router.sessions().state(h).is_none());
            let cause = if gone { Cause::SessionGone } else { Cause::Deadline };
            if Transmit::<X>::full(self.core.refuse_open(&open, cause)) {
                self.core.obligations.restore(id, open);
                break;
            }
        }
        self.core.router.pending().expire(now, expired);
        if self.core.next_stall <= now {
            self.reconcile_stalled(now);
        }
    }

    /// When [`handle_timeout`](Self::handle_timeout) next has work (ms), if ever.
    pub fn poll_timeout(&self) -> Option<u64> {
        // NEVER is u64::MAX: the earliest of the three, none if all are
        // NEVER (plain `min`s: an iterator over the three options is
        // 260 bytes more of the WebAssembly module, 136 gzipped).
        let a = self.core.obligations.next_deadline().unwrap_or(NEVER);
        let b = self.core.router.pending().next_deadline().unwrap_or(NEVER);
        let next = a.min(b).min(self.core.next_stall);
        (next != NEVER).then_some(next)
    }

    /// Reserves session `id` before its create request is sent.
    pub fn reserve(&mut self, id: &str, target: T) -> Result<SessionHandle, ReserveError<T>> {
        let handle = self.core.router.sessions().reserve(id, target)?;
        self.core.reconcile_on_open[handle.index()] = false;
        self.core.resumed[handle.index()] = false;
        Ok(handle)
    }

    /// Reserves session `id` before its resume request is sent. If the id is
    /// open on this client, the new handle takes it over: the old one is
    /// returned (end its streams), and its open obligations move to the new
    /// handle (the CLI session still waits on them). Once the resume
    /// succeeds ([`complete_open`](Self::complete_open)), the engine asks
    /// the CLI what is pending ([`reconcile`](Self::reconcile)): the CLI
    /// does not send the events of waits pending from before again.
    #[allow(clippy::type_complexity)]
    pub fn reserve_resume(
        &mut self,
        id: &str,
        target: T,
    ) -> Result<(SessionHandle, Option<(SessionHandle, T)>), ReserveError<T>> {
        let (handle, old) = self.core.router.sessions().reserve_takeover(id, target)?;
        if let Some((old_handle, _)) = &old {
            self.core.obligations.retarget(*old_handle, handle);
        }
        self.core.reconcile_on_open[handle.index()] = true;
        self.core.resumed[handle.index()] = true;
        Ok((handle, old))
    }

    /// Reserves a slot for a create whose id the server assigns; frames for
    /// unknown sessions are parked until it is named or released.
    pub fn reserve_unassigned(&mut self, target: T) -> Result<SessionHandle, ReserveError<T>> {
        let handle = self.core.router.sessions().reserve_unassigned(target)?;
        self.core.reconcile_on_open[handle.index()] = false;
        self.core.resumed[handle.index()] = false;
        Ok(handle)
    }

    /// Names a slot reserved unassigned; then drain [`poll_parked`](Self::poll_parked).
    pub fn assign(&mut self, handle: SessionHandle, id: &str) -> Result<(), ReserveErrorKind> {
        self.core.router.sessions().assign(handle, id)?;
        self.park.reroute();
        Ok(())
    }

    /// Completes the open (create or resume) of `handle` with its response:
    /// activates the session (naming it from `result.sessionId` if the
    /// server assigns the id), or, on an error or an unreadable answer,
    /// releases the slot (refusing its open obligations). A resume then
    /// asks the CLI what is pending ([`reconcile`](Self::reconcile)). Then
    /// drain [`poll_parked`](Self::poll_parked).
    pub fn complete_open(
        &mut self,
        handle: SessionHandle,
        result: Result<Value<'_>, RpcError<'_>>,
    ) -> Result<(), OpenError> {
        let mut caps = Capabilities::NONE;
        if let Some(c) = result.as_ref().ok().and_then(|v| v.get(crate::capabilities::OPEN_ANSWER_CAPABILITIES)) {
            caps.merge(c);
        }
        if let Some(slot) = self.core.caps.get_mut(handle.index()) {
            *slot = (caps, handle.generation());
        }
        let sessions = self.core.router.sessions();
        let outcome = match (sessions.state(handle), result) {
            (None, _) => Err(OpenError::Conflict(ReserveErrorKind::StaleHandle)),
            (Some(_), Err(_)) => Err(OpenError::Rejected),
            (Some(_), Ok(v)) if v.kind() != Kind::Object => Err(OpenError::Unreadable),
            (Some(SessionState::AwaitingId), Ok(v)) => {
                let mut buf = [0; crate::session::MAX_SESSION_ID_LEN];
                match v.get("sessionId").and_then(|s| s.as_str()).and_then(|s| decode(s, &mut buf)) {
                    Some(id) => sessions.assign(handle, id).map_err(OpenError::Conflict),
                    None => Err(OpenError::Unreadable),
                }
            }
            (Some(_), Ok(_)) => sessions.activate(handle).map_err(|StaleHandle| OpenError::Unreadable),
        };
        let reconcile = core::mem::take(&mut self.core.reconcile_on_open[handle.index()]);
        match outcome {
            Ok(()) => {
                self.park.reroute();
                if reconcile {
                    // Cannot fail: the session was just made active.
                    let _ = self.reconcile(handle);
                }
            }
            Err(_) => {
                self.release(handle);
            }
        }
        outcome
    }

    /// Marks a session closing (its destroy is in flight); its frames still route.
    pub fn close(&mut self, handle: SessionHandle) -> Result<(), StaleHandle> {
        self.core.router.sessions().close(handle)
    }

    /// Releases a session: frees its slot, refuses its open obligations
    /// (queued) and returns its target; `None` for a stale handle. If it
    /// ended the last server-assigned create, drain
    /// [`poll_parked`](Self::poll_parked): frames parked for no session are
    /// then refused or reported.
    pub fn release(&mut self, handle: SessionHandle) -> Option<T> {
        let target = self.core.router.sessions().release(handle)?;
        self.core.refuse_where(Cause::SessionGone, |o| o.session == Some(handle));
        if self.core.router.sessions().awaiting_ids() == 0 {
            self.park.reroute();
        }
        Some(target)
    }

    /// The connection is gone: hands every request's waiter to `failed`
    /// (wake its caller with a disconnect error) and forgets every open
    /// obligation and every frame queued, since nothing can reach the CLI
    /// any more. Returns how many obligations were forgotten. Sessions stay
    /// in the table for the host to release.
    pub fn disconnect(&mut self, mut failed: impl FnMut(RequestId, W)) -> usize {
        self.core.tx.taken(usize::MAX);
        for (id, waiter) in self.core.router.pending().drain() {
            failed(id, waiter);
        }
        // Not answered: a list read after a reconnect may name them again.
        self.core.obligations.forget_all()
    }

    /// The connection is lost and another will follow (a restarted CLI, a
    /// reconnected server): hands every request's waiter to `failed` (its
    /// caller's answer is gone with the connection), and forgets what the
    /// next connection cannot settle:
    /// the waits of server requests (their ids die with the connection)
    /// and the record of answers that went to it and the CLI did not
    /// acknowledge (they may be lost: the lists read after the reconnect
    /// name them again, and they are taken on again). An answer still
    /// queued stays given: it goes to the next connection. A frame the
    /// host took in part goes with the connection (its start went there).
    /// The waits of events stay open: the CLI lists
    /// them after the resume ([`PENDING_LISTS`]) under the same ids, and
    /// their answers go to the next connection. Sessions stay in the table,
    /// to be resumed; then call [`reconcile`](Self::reconcile) (a resume
    /// opened through [`reserve_resume`](Self::reserve_resume) does it by
    /// itself). The frames still queued (the host has not taken them:
    /// answers given while it held them) stay queued, for the next
    /// connection, but the responses to the server's requests (their ids
    /// die with the connection). Returns how many obligations were
    /// forgotten.
    pub fn connection_lost(&mut self, mut failed: impl FnMut(RequestId, W)) -> usize {
        for (id, waiter) in self.core.router.pending().drain() {
            failed(id, waiter);
        }
        // The answers queued are numbered from the first one on. A
        // response queued answers a request of the lost connection: the
        // next one never sent it, or sent another under the same id.
        let mut queued = self.core.next_answer + 1;
        self.core.tx.retain(|body| {
            let id = own_request_id(body);
            if let Some(n) = id.and_then(read_answer_id) {
                queued = queued.min(n);
            }
            id.is_some()
        });
        self.core.obligations.connection_lost(queued, |o| {
            matches!(ANSWERS[usize::from(o.row)].trigger, crate::answers::Trigger::Event(_))
        })
    }

    /// The counters, with the open obligations' age as of `now`.
    pub fn stats(&self, now: u64) -> EngineStats {
        let mut s = self.core.stats;
        s.router = self.core.router.stats();
        s.open_obligations = self.core.obligations.len();
        s.left_open = self.core.obligations.left();
        s.oldest_obligation_age = self.core.obligations.oldest().map(|t| now.saturating_sub(t));
        s.parked_frames = self.park.frames;
        s.parked_bytes = self.park.len;
        s
    }

    /// Looks a session id up as it arrived on the wire.
    pub fn lookup(&self, id: JsonStr<'_>) -> Lookup<T> {
        self.core.router.sessions().lookup(id)
    }
}

/// `n` from the id of an answering RPC (`answer-<n>`, the raw text of a
/// JSON string). By hand rather than `str::parse`: number parsing is
/// kilobytes in the WebAssembly module.
fn read_answer_id(raw: &[u8]) -> Option<u64> {
    let digits = raw.strip_prefix(ANSWER_ID_PREFIX.as_bytes()).filter(|d| !d.is_empty())?;
    digits.iter().try_fold(0u64, |n, &b| match b {
        b'0'..=b'9' => n.checked_mul(10)?.checked_add(u64::from(b - b'0')),
        _ => None,
    })
}

/// The id (the raw text of its string) of a frame the engine queued, if
/// it is a request of the engine's own (an answering RPC, a list), not a
/// response to a request of the server's.
fn own_request_id(body: &[u8]) -> Option<&[u8]> {
    let rest = body.strip_prefix(b"{\"jsonrpc\":\"2.0\",\"id\":\"")?;
    let end = rest.iter().position(|b| *b == b'"')?;
    rest[end..].starts_with(b"\",\"method\"").then_some(&rest[..end])
}

fn decode<'b>(s: JsonStr<'_>, buf: &'b mut [u8]) -> Option<&'b str> {
    s.decode_into(buf).filter(|s| !s.is_empty())
}

impl<T, W, P, X, const S: usize, const Q: usize, const O: usize> fmt::Debug for Engine<T, W, P, X, S, Q, O> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Engine")
            .field("open_obligations", &self.core.obligations.len())
            .field("parked_frames", &self.park.frames)
            .finish_non_exhaustive()
    }
}
