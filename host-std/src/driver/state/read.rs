//! The read side of the state: each frame decoded is routed by the engine
//! and what it decided is written down for the shell, in frame order:
//! events for their sessions, waits of the agent for their handlers (a
//! client-wide inference request's in an ordered lane), `session.lifecycle`
//! params, answers for their calls (to tell after the sessions are
//! flushed), an open completed in the engine and the frames parked for it
//! routed again right after it.
//!
//! Nothing here calls a session or a caller: the shell does, once the lock
//! is released. So the read's bytes that the shell needs are copied into
//! one buffer of the [`Read`], reused from read to read.

use std::ops::Range;

use copilot_core::{
    FrameBuffer, FrameDecoder, HandlerKind, Listed, Output, Route, RpcError, SessionHandle, CAPABILITIES_CHANGED_EVENT,
    LIST_ID_PREFIX,
};

use super::driver_state::DriverState;
use super::wait::{InOrder, Wait};
use crate::driver::waiter::{Reply, ReplyTx, Waiter};
use crate::error::Error;

/// One thing a read routed, for the shell to hand on in this order.
/// Ranges are of [`Read::bytes`].
#[derive(Debug)]
pub enum Routed<T> {
    /// An event for `target`'s queue. Its type, when written without
    /// escapes, is `event_type`; `capabilities`: it changes the session's
    /// capabilities (apply it first); `canvas`: it opens or closes a
    /// canvas instance (apply it first).
    Event { target: T, event: Range<usize>, event_type: Option<Range<usize>>, capabilities: bool, canvas: bool },
    /// A wait of the agent for `target`'s handlers.
    Wait { target: T, wait: Wait },
    /// A client-wide request's wait, for the client's handlers (run at
    /// once: a client-wide inference request's go to the ordered lane
    /// instead, see [`Read::start_in_order`]).
    ClientWide(Wait),
    /// `target`'s create or resume was answered `body` and completed in the
    /// engine: its capabilities and canvases are the answer's, and, if it
    /// has no id yet, its name is `name`. The frames parked for it follow.
    Opened { target: T, body: Range<usize>, name: Option<String> },
    /// A `session.lifecycle` notification's params.
    Lifecycle(Range<usize>),
}

/// What one read decided, for the shell, in the order to act on it:
/// `routed`, then flush each session of `flush` (one batch each), then
/// tell each call of `answered` (it returns once the events read before
/// its answer were delivered).
pub struct Read<T> {
    /// In frame order.
    pub routed: Vec<Routed<T>>,
    /// What `routed`'s ranges point into.
    pub bytes: Vec<u8>,
    /// The sessions given events, each once, in the order first given one.
    pub flush: Vec<(SessionHandle, T)>,
    /// Answers to calls, in frame order.
    pub answered: Vec<(ReplyTx, Reply)>,
    /// The ordered lane of client-wide waits has work and no task takes
    /// it: start one, which takes its waits in turn
    /// ([`DriverState::next_in_order`]) until there are none.
    pub start_in_order: bool,
}

impl<T> Default for Read<T> {
    fn default() -> Self {
        Read { routed: Vec::new(), bytes: Vec::new(), flush: Vec::new(), answered: Vec::new(), start_in_order: false }
    }
}

impl<T> Read<T> {
    fn clear(&mut self) {
        self.routed.clear();
        self.bytes.clear();
        self.flush.clear();
        self.answered.clear();
        self.start_in_order = false;
    }

    /// Copies `bytes` in: its range.
    fn keep(&mut self, bytes: &[u8]) -> Range<usize> {
        let start = self.bytes.len();
        self.bytes.extend_from_slice(bytes);
        start..self.bytes.len()
    }
}

/// The event type or method of an answer table row.
fn trigger_name(row: &copilot_core::AnswerRow) -> &'static str {
    match row.trigger {
        copilot_core::Trigger::Event(t) | copilot_core::Trigger::Request(t) => t,
    }
}

impl<T: Clone> DriverState<T> {
    /// Routes every whole frame `decoder` holds (bytes were just read into
    /// it), and writes down in `read` what the shell is to do about them
    /// (`read` is cleared first: keep one per reader, and a read allocates
    /// nothing once its buffers have grown). Every frame the engine
    /// decided to send meanwhile is in [`poll_transmit`](Self::poll_transmit).
    pub fn handle_read<B: FrameBuffer>(&mut self, decoder: &mut FrameDecoder<B>, now: u64, read: &mut Read<T>) {
        read.clear();
        while let Some(mut out) = self.engine.poll(decoder, now) {
            if let Some(listed) = out.listed.take() {
                self.take_on_listed(now, &listed, read);
                continue;
            }
            match out.route {
                Route::Response { waiter: Waiter::Open { handle, target, reply }, result, .. } => {
                    let outcome = self.complete_open(now, handle, target, result, read);
                    read.answered.push((reply, outcome));
                }
                _ => self.route(out, read),
            }
        }
    }

    /// Completes a create or resume in the engine; frames parked for it
    /// are routed right after it, so they keep their order. Returns what
    /// to tell its caller.
    fn complete_open(
        &mut self,
        now: u64,
        handle: SessionHandle,
        target: T,
        result: Result<copilot_core::Value<'_>, RpcError<'_>>,
        read: &mut Read<T>,
    ) -> Reply {
        let outcome = match &result {
            Ok(v) => Ok(v.as_bytes().to_vec()),
            Err(e) => Err(rpc_error(e)),
        };
        let name = result.as_ref().ok().and_then(|v| v.get("sessionId")).and_then(|s| s.as_str());
        let mut buf = [0; copilot_core::MAX_SESSION_ID_LEN];
        let name = name.and_then(|s| s.decode_into(&mut buf)).map(str::to_owned);
        let opened = self.engine.complete_open(handle, result);
        let reply = match (opened, outcome) {
            (Ok(()), Ok(body)) => {
                let range = read.keep(&body);
                read.routed.push(Routed::Opened { target, body: range, name });
                Ok(body)
            }
            (opened, outcome) => {
                // The engine released the slot: the target is let go of.
                self.released.push(target);
                match (opened, outcome) {
                    (_, Err(e)) => Err(e),
                    (Err(e), _) => Err(Error::Protocol(format!("the session could not be opened: {e}"))),
                    (Ok(()), Ok(_)) => unreachable!("matched above"),
                }
            }
        };
        while let Some(out) = self.engine.poll_parked(now) {
            route(&self.label, &mut self.in_order, out, read);
        }
        reply
    }

    /// Hands each wait of a list reply that the engine takes on to its
    /// session's handlers, as its event's wait would be: the data is the
    /// event the engine writes for it (see [`copilot_core::ListedWait`]).
    /// Not an event of the session's: the CLI did not send it.
    fn take_on_listed(&mut self, now: u64, listed: &Listed<'_, T>, read: &mut Read<T>) {
        let taken = self.engine.open_listed(listed, now, |wait| {
            let mut data = Vec::new();
            wait.write_event(&mut |b: &[u8]| data.extend_from_slice(b));
            let ob = wait.obligation;
            let wait_data = Wait { id: ob.id, kind: ob.handler, name: wait.event_type, data };
            read.routed.push(Routed::Wait { target: wait.target, wait: wait_data });
        });
        if taken > 0 {
            log::info!("{}: {taken} waits pending in the CLI ({}) were taken on", self.label, listed.list.method);
        }
    }

    fn route(&mut self, out: Output<'_, T, Waiter<T>>, read: &mut Read<T>) {
        route(&self.label, &mut self.in_order, out, read);
    }
}

/// Writes down what one routed frame asks of the shell (a free function:
/// a parked frame's output borrows the engine).
fn route<T: Clone>(label: &str, in_order: &mut InOrder, out: Output<'_, T, Waiter<T>>, read: &mut Read<T>) {
    let Output { route, obligation, refused, answer_ack, .. } = out;
    match route {
        Route::Event { session, target, event, .. } => {
            let bytes = event.event.as_bytes();
            let range = read.keep(bytes);
            let event_type = event.event_type.as_plain().map(|t| read.keep(t.as_bytes()));
            let capabilities = event.event_type == CAPABILITIES_CHANGED_EVENT;
            let canvas = copilot_core::read_canvas_change(event.event_type, event.data).is_some();
            if !read.flush.iter().any(|(h, _)| *h == session) {
                read.flush.push((session, target.clone()));
            }
            let wait = obligation.map(|ob| {
                let name = copilot_core::row_for_event(event.event_type).map_or("", |(_, r)| trigger_name(r));
                Wait { id: ob.id, kind: ob.handler, name, data: bytes.to_vec() }
            });
            read.routed.push(Routed::Event { target: target.clone(), event: range, event_type, capabilities, canvas });
            if let Some(wait) = wait {
                read.routed.push(Routed::Wait { target, wait });
            }
        }
        Route::Request { method, params, session, .. } => {
            let Some(ob) = obligation else {
                log::debug!("{label}: server request {method}: {refused:?}");
                return;
            };
            let data = params.map_or_else(|| b"{}".to_vec(), |p| p.as_bytes().to_vec());
            let name = copilot_core::row_for_request(method).map_or("", |(_, r)| trigger_name(r));
            let wait = Wait { id: ob.id, kind: ob.handler, name, data };
            match session {
                Some((_, target)) => read.routed.push(Routed::Wait { target, wait }),
                // An inference request's chunks are its body (or its
                // WebSocket's messages): taken in order, one at a time.
                None if ob.handler == HandlerKind::LlmInference => {
                    if in_order.push(wait) {
                        read.start_in_order = true;
                    }
                }
                None => read.routed.push(Routed::ClientWide(wait)),
            }
        }
        Route::Lifecycle { params, .. } => {
            let range = read.keep(params.as_bytes());
            read.routed.push(Routed::Lifecycle(range));
        }
        Route::Response { waiter, result, request } => {
            log::trace!("{label}: <- response #{request}");
            let reply = match result {
                Ok(v) => Ok(v.as_bytes().to_vec()),
                Err(e) => Err(rpc_error(&e)),
            };
            match waiter {
                // An open is completed by `handle_read`; never parked.
                Waiter::Reply(tx) | Waiter::Open { reply: tx, .. } => read.answered.push((tx, reply)),
            }
        }
        Route::Notification { method, .. } => log::debug!("{label}: notification {method}"),
        Route::Park { session_id, .. } => {
            if let Some(cause) = refused {
                log::warn!("{label}: a wait for session {session_id} was refused: {}", cause.name());
            }
        }
        Route::UnknownSession { session_id, method, .. } => {
            log::warn!("{label}: {method} for unknown session {session_id} ({refused:?})")
        }
        Route::UnmatchedResponse { id, .. } if id.to_string().contains(LIST_ID_PREFIX) => {
            log::debug!("{label}: a list of pending waits gave nothing to take on ({id})")
        }
        Route::UnmatchedResponse { id, .. } => {
            if answer_ack.is_none() {
                log::warn!("{label}: response to unknown request {id}")
            }
        }
        Route::Malformed(e) => log::warn!("{label}: malformed message: {e}"),
        Route::FrameError(e) => log::warn!("{label}: {e}"),
    }
}

/// The CLI's error answer, as the caller gets it.
fn rpc_error(e: &RpcError<'_>) -> Error {
    Error::Rpc {
        code: e.code,
        message: e.message.to_string(),
        data: e.data.and_then(|d| serde_json::from_slice(d.as_bytes()).ok()),
    }
}
