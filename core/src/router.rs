//! The router: the only code in the project that decides where an incoming
//! message goes. Every transport of `copilot-host` (stdio, TCP, in-memory)
//! and the WebAssembly binding call it; none of them routes by itself.

use crate::envelope::{DecodeError, Envelope, EventInfo, Id, Message, RpcError};
use crate::frame::{FrameDecoder, FrameError};
use crate::json::{JsonStr, Value};
use crate::lock::Lock;
use crate::pending::{PendingTable, RequestId};
use crate::session::{Lookup, SessionHandle, SessionTable};

/// Where one incoming frame goes. Every variant is something the host must
/// act on or report: none means "drop silently".
#[derive(Debug)]
#[must_use = "a route is a message to deliver, answer or report"]
pub enum Route<'a, T, W> {
    /// A `session.event` for a session in the table: deliver it to `target`.
    /// If `event.awaits_answer()`, the agent waits for the answer RPC.
    Event {
        /// The session's handle.
        session: SessionHandle,
        /// The session's target.
        target: T,
        /// `params.sessionId`.
        session_id: JsonStr<'a>,
        /// The event's routing fields and raw JSON.
        event: EventInfo<'a>,
    },
    /// A `session.lifecycle` notification: deliver it to the client-wide
    /// lifecycle listeners (it may name sessions of other clients).
    Lifecycle {
        /// `params.type`, such as `session.created`.
        kind: JsonStr<'a>,
        /// `params.sessionId`.
        session_id: JsonStr<'a>,
        /// The whole `params` object.
        params: Value<'a>,
    },
    /// The response to a request this client sent: hand it to `waiter`.
    Response {
        /// The request it answers.
        request: RequestId,
        /// The waiter stored when the request was sent.
        waiter: W,
        /// `result`, or `error`.
        result: Result<Value<'a>, RpcError<'a>>,
    },
    /// A request from the server. It names a session in the table (via
    /// `params.sessionId`), or none at all. Dispatch by `method`; answer
    /// unknown methods with -32601.
    Request {
        /// The id the answer must echo.
        id: Id<'a>,
        /// The method name.
        method: JsonStr<'a>,
        /// The parameters.
        params: Option<Value<'a>>,
        /// The session named by `params.sessionId`, if any.
        session: Option<(SessionHandle, T)>,
    },
    /// Any other notification, with the session it names if that is known.
    Notification {
        /// The method name.
        method: JsonStr<'a>,
        /// The parameters.
        params: Option<Value<'a>>,
        /// The session named by `params.sessionId`, if it is in the table.
        session: Option<(SessionHandle, T)>,
    },
    /// An event or request for an unknown session while a create whose id
    /// the server assigns is in flight. Keep a copy of `body` and route it
    /// again with [`Router::route_parked`] once the create is answered.
    Park {
        /// The session it names.
        session_id: JsonStr<'a>,
        /// The frame body to keep.
        body: &'a [u8],
    },
    /// An event or request for a session that is not in the table. Counted.
    /// If `reply_to` is set it was a server request: answer it with an error
    /// (see [`UNKNOWN_SESSION`]), never leave it unanswered.
    UnknownSession {
        /// The session it names.
        session_id: JsonStr<'a>,
        /// For a `session.event`: its fields, for the report.
        event: Option<EventInfo<'a>>,
        /// For a server request: the id to answer.
        reply_to: Option<Id<'a>>,
        /// For a server request: its method.
        method: JsonStr<'a>,
    },
    /// A response whose id matches no request in flight. Counted.
    UnmatchedResponse {
        /// The id it carried.
        id: Id<'a>,
        /// Its result or error.
        result: Result<Value<'a>, RpcError<'a>>,
    },
    /// A body that is not a valid message. Counted. If `reply_to` is set,
    /// answer it with `error.code()`.
    Malformed(DecodeError<'a>),
    /// The byte stream was broken; the decoder has already recovered.
    /// Counted (as oversize or malformed).
    FrameError(FrameError),
}

/// The error code this project answers a request for an unknown session with.
pub const UNKNOWN_SESSION: i64 = crate::envelope::INVALID_PARAMS;

/// Counters kept by the router.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Stats {
    /// Frames decoded.
    pub frames: u64,
    /// Body bytes of those frames.
    pub bytes: u64,
    /// Broken frames and bodies that are not valid messages.
    pub malformed: u64,
    /// Frames larger than the decoder's buffer (skipped).
    pub oversize: u64,
    /// Events and requests for sessions not in the table.
    pub unknown_session: u64,
    /// Frames parked while a server-assigned create was in flight.
    pub parked: u64,
    /// Responses that matched no request in flight.
    pub unmatched_responses: u64,
}

/// The session table, the pending-request table, and the one routing
/// function, shared by the reader and every caller.
///
/// `T` is what a session's events are delivered to (cloned out of the table
/// under its lock; keep it cheap, like an `Arc` or an index). `W` is what a
/// request's response is delivered to.
pub struct Router<T, W, const SESSIONS: usize, const PENDING: usize> {
    sessions: SessionTable<T, SESSIONS>,
    pending: PendingTable<W, PENDING>,
    stats: Lock<Stats>,
}

impl<T: Clone, W, const SESSIONS: usize, const PENDING: usize> Default for Router<T, W, SESSIONS, PENDING> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T: Clone, W, const SESSIONS: usize, const PENDING: usize> Router<T, W, SESSIONS, PENDING> {
    /// A router with empty tables.
    #[cfg(not(any(loom, feature = "alloc")))]
    pub const fn new() -> Self {
        Router { sessions: SessionTable::new(), pending: PendingTable::new(), stats: Lock::new(Self::ZERO) }
    }

    /// A router with empty tables. With the `alloc` feature they are on the
    /// heap, their slots made as they are first used (so a router of any
    /// capacity needs no stack, and little memory until it fills).
    #[cfg(any(loom, feature = "alloc"))]
    pub fn new() -> Self {
        Router { sessions: SessionTable::new(), pending: PendingTable::new(), stats: Lock::new(Self::ZERO) }
    }

    const ZERO: Stats =
        Stats { frames: 0, bytes: 0, malformed: 0, oversize: 0, unknown_session: 0, parked: 0, unmatched_responses: 0 };

    /// The session table: reserve a session here before sending its create
    /// or resume request.
    pub fn sessions(&self) -> &SessionTable<T, SESSIONS> {
        &self.sessions
    }

    /// The pending-request table: insert a waiter to get the id of a request
    /// about to be sent.
    pub fn pending(&self) -> &PendingTable<W, PENDING> {
        &self.pending
    }

    /// A copy of the counters.
    pub fn stats(&self) -> Stats {
        self.stats.with(|s| *s)
    }

    /// Takes the next frame from `decoder` and routes it; `None` when the
    /// decoder needs more bytes. This is the body of every host's read loop.
    pub fn poll<'d, B: crate::frame::FrameBuffer>(&self, decoder: &'d mut FrameDecoder<B>) -> Option<Route<'d, T, W>> {
        match decoder.poll()? {
            Ok(body) => {
                self.count_frame(body);
                Some(self.route(body))
            }
            Err(e) => {
                self.count_frame_error(&e);
                Some(Route::FrameError(e))
            }
        }
    }

    pub(crate) fn count_frame(&self, body: &[u8]) {
        self.stats.with(|s| {
            s.frames += 1;
            s.bytes += body.len() as u64;
        });
    }

    pub(crate) fn count_frame_error(&self, e: &FrameError) {
        self.stats.with(|s| match e {
            FrameError::TooLarge { .. } => s.oversize += 1,
            _ => s.malformed += 1,
        });
    }

    /// Routes one frame body.
    pub fn route<'a>(&self, body: &'a [u8]) -> Route<'a, T, W> {
        let route = self.classify(body);
        self.count(&route, true);
        route
    }

    /// Routes a frame body kept from an earlier [`Route::Park`]: after the
    /// pending create was answered it finds its session, or, once no create
    /// is in flight, becomes [`Route::UnknownSession`]. Not counted as
    /// parked a second time.
    pub fn route_parked<'a>(&self, body: &'a [u8]) -> Route<'a, T, W> {
        let route = self.classify(body);
        self.count(&route, false);
        route
    }

    pub(crate) fn count(&self, route: &Route<'_, T, W>, count_park: bool) {
        self.stats.with(|s| match route {
            Route::Malformed(_) => s.malformed += 1,
            Route::UnknownSession { .. } => s.unknown_session += 1,
            Route::UnmatchedResponse { .. } => s.unmatched_responses += 1,
            Route::Park { .. } if count_park => s.parked += 1,
            _ => {}
        });
    }

    pub(crate) fn classify<'a>(&self, body: &'a [u8]) -> Route<'a, T, W> {
        let envelope = match Envelope::decode(body) {
            Ok(e) => e,
            Err(e) => return Route::Malformed(e),
        };
        match envelope.message {
            Message::Response { id, result } => match id.as_u64().and_then(|n| self.pending.take(n)) {
                Some(waiter) => Route::Response { request: RequestId(id.as_u64().unwrap_or(0)), waiter, result },
                None => Route::UnmatchedResponse { id, result },
            },
            Message::Notification { method, params } => {
                if let (Some(event), Some(session_id)) = (envelope.event, envelope.session_id) {
                    return match self.sessions.lookup(session_id) {
                        Lookup::Found(session, target) => Route::Event { session, target, session_id, event },
                        Lookup::Pending => Route::Park { session_id, body },
                        Lookup::Unknown => {
                            Route::UnknownSession { session_id, event: Some(event), reply_to: None, method }
                        }
                    };
                }
                if let (Some(kind), Some(session_id), Some(params)) = (envelope.lifecycle, envelope.session_id, params)
                {
                    return Route::Lifecycle { kind, session_id, params };
                }
                let session = envelope.session_id.and_then(|id| match self.sessions.lookup(id) {
                    Lookup::Found(h, t) => Some((h, t)),
                    _ => None,
                });
                Route::Notification { method, params, session }
            }
            Message::Request { id, method, params } => {
                // A client-global request names a session only as payload.
                let global = method.as_plain().is_some_and(crate::inference::is_client_global);
                let Some(session_id) = envelope.session_id.filter(|_| !global) else {
                    return Route::Request { id, method, params, session: None };
                };
                match self.sessions.lookup(session_id) {
                    Lookup::Found(h, t) => Route::Request { id, method, params, session: Some((h, t)) },
                    Lookup::Pending => Route::Park { session_id, body },
                    Lookup::Unknown => Route::UnknownSession { session_id, event: None, reply_to: Some(id), method },
                }
            }
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::encode::Outgoing;

    type R = Router<u32, char, 4, 4>;

    fn event(session: &str, ty: &str) -> std::string::String {
        std::format!(
            r#"{{"jsonrpc":"2.0","method":"session.event","params":{{"sessionId":"{session}","event":{{"type":"{ty}","id":"e","data":{{"requestId":"r"}}}}}}}}"#
        )
    }

    extern crate std;

    #[cfg_attr(not(target_arch = "wasm32"), test)]
    #[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
    fn events_route_to_reserved_and_active_sessions() {
        let r = R::new();
        let h = r.sessions().reserve("s", 1).unwrap();
        let body = event("s", "session.start");
        let Route::Event { session, target, event, .. } = r.route(body.as_bytes()) else { panic!() };
        assert_eq!((session, target), (h, 1));
        assert_eq!(event.event_type, "session.start");
        r.sessions().activate(h).unwrap();
        assert!(matches!(r.route(body.as_bytes()), Route::Event { target: 1, .. }));
    }

    #[cfg_attr(not(target_arch = "wasm32"), test)]
    #[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
    fn unknown_session_events_are_counted_and_returned() {
        let r = R::new();
        let body = event("ghost", "permission.requested");
        let Route::UnknownSession { session_id, event: Some(ev), reply_to: None, .. } = r.route(body.as_bytes()) else {
            panic!()
        };
        assert_eq!(session_id, "ghost");
        assert_eq!(ev.request_id.unwrap(), "r");
        assert_eq!(r.stats().unknown_session, 1);
    }

    #[cfg_attr(not(target_arch = "wasm32"), test)]
    #[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
    fn server_requests_route_by_session_or_get_marked_for_an_error() {
        let r = R::new();
        r.sessions().reserve("s", 5).unwrap();
        let known =
            br#"{"jsonrpc":"2.0","id":"req-1","method":"userInput.request","params":{"sessionId":"s","question":"?"}}"#;
        let Route::Request { id, method, session: Some((_, 5)), .. } = r.route(known) else { panic!() };
        assert_eq!(method, "userInput.request");
        assert!(matches!(id, Id::String(s) if s == "req-1"));

        let unknown = br#"{"jsonrpc":"2.0","id":8,"method":"userInput.request","params":{"sessionId":"x"}}"#;
        let Route::UnknownSession { reply_to: Some(id), .. } = r.route(unknown) else { panic!() };
        assert_eq!(id.as_u64(), Some(8));

        let global = br#"{"jsonrpc":"2.0","id":9,"method":"llmInference.httpRequestChunk","params":{"requestId":"q"}}"#;
        assert!(matches!(r.route(global), Route::Request { session: None, .. }));
    }

    #[cfg_attr(not(target_arch = "wasm32"), test)]
    #[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
    fn responses_complete_their_request_once() {
        let r = R::new();
        let id = r.pending().insert('w').unwrap();
        let body = std::format!(r#"{{"jsonrpc":"2.0","id":{},"result":{{"ok":true}}}}"#, id.0);
        let Route::Response { request, waiter, result: Ok(v) } = r.route(body.as_bytes()) else { panic!() };
        assert_eq!((request, waiter), (id, 'w'));
        assert_eq!(v.get("ok").unwrap().as_bool(), Some(true));
        assert!(matches!(r.route(body.as_bytes()), Route::UnmatchedResponse { .. }));
        assert_eq!(r.stats().unmatched_responses, 1);
    }

    #[cfg_attr(not(target_arch = "wasm32"), test)]
    #[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
    fn park_while_a_server_assigned_create_is_in_flight() {
        let r = R::new();
        let h = r.sessions().reserve_unassigned(3).unwrap();
        let early = event("new-id", "permission.requested");
        let Route::Park { session_id, body } = r.route(early.as_bytes()) else { panic!() };
        assert_eq!(session_id, "new-id");
        let kept = body.to_vec();
        assert_eq!(r.stats().parked, 1);
        r.sessions().assign(h, "new-id").unwrap();
        assert!(matches!(r.route_parked(&kept), Route::Event { target: 3, .. }));
        assert_eq!(r.stats().parked, 1);

        // A frame parked for an id that never registers is reported.
        let h2 = r.sessions().reserve_unassigned(4).unwrap();
        let other = event("never", "session.idle");
        assert!(matches!(r.route(other.as_bytes()), Route::Park { .. }));
        r.sessions().release(h2);
        assert!(matches!(r.route_parked(other.as_bytes()), Route::UnknownSession { .. }));
        assert_eq!(r.stats().unknown_session, 1);
    }

    #[cfg_attr(not(target_arch = "wasm32"), test)]
    #[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
    fn lifecycle_and_other_notifications() {
        let r = R::new();
        let lc =
            br#"{"jsonrpc":"2.0","method":"session.lifecycle","params":{"type":"session.created","sessionId":"any"}}"#;
        let Route::Lifecycle { kind, session_id, .. } = r.route(lc) else { panic!() };
        assert_eq!(kind, "session.created");
        assert_eq!(session_id, "any");
        let other = br#"{"jsonrpc":"2.0","method":"host.event","params":{"scope":{"type":"session"}}}"#;
        assert!(matches!(r.route(other), Route::Notification { session: None, .. }));
    }

    #[cfg_attr(not(target_arch = "wasm32"), test)]
    #[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
    fn poll_counts_frames_bytes_and_errors() {
        let r = R::new();
        let mut d = FrameDecoder::<[u8; 256]>::new();
        let mut input = std::vec::Vec::new();
        let mut frame = [0u8; 200];
        let n = Outgoing::Notification { method: "x", params: None }.encode(&mut frame).unwrap();
        input.extend_from_slice(&frame[..n]);
        input.extend_from_slice(b"junk\r\n");
        input.extend_from_slice(b"Content-Length: 1000\r\n\r\n");
        input.extend(core::iter::repeat_n(b' ', 1000));
        input.extend_from_slice(b"Content-Length: 3\r\n\r\n{x}");
        let mut routes: std::vec::Vec<std::string::String> = std::vec::Vec::new();
        let mut rest = &input[..];
        while !rest.is_empty() {
            let k = d.feed(rest);
            rest = &rest[k..];
            while let Some(route) = r.poll(&mut d) {
                routes.push(std::format!("{route:?}").split(['(', ' ', '{']).next().unwrap().into());
            }
        }
        assert_eq!(routes, ["Notification", "FrameError", "FrameError", "Malformed"]);
        let s = r.stats();
        assert_eq!((s.frames, s.malformed, s.oversize), (2, 2, 1));
        assert_eq!(s.bytes, (n - 22 + 3) as u64);
    }
}
