//! The reader: bytes in, the engine's routes out, until the stream ends;
//! then every waiter is told and every stream ends.

use std::io::{self, Read};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

use copilot_core::{
    FrameDecoder, GrowingBuffer, HandlerKind, Listed, Output, Route, RpcError, SessionHandle, LIST_ID_PREFIX,
};

use super::connection::{lock, Connection, Job, Replier, ReplyTx, State, Target, Waiter};
use super::state::StateEngine;

type HostEngine = StateEngine<Target>;
use crate::error::Error;
use crate::pool::panic_text;
use crate::transport::CloseCause;

/// The largest frame accepted (the core's limit). The read buffer grows to
/// it only if such a frame arrives.
pub(crate) const MAX_FRAME: usize = copilot_core::limits::MAX_FRAME_BYTES;
/// Bytes asked of the transport per read.
const READ_CHUNK: usize = 64 << 10;

/// What one read routed that waits for the engine's lock to be released.
#[derive(Default)]
struct Routed {
    /// Sessions given events, to flush.
    touched: Vec<Target>,
    /// Answers to calls, told after the flush: each call returns once the
    /// events read before its answer are delivered (`fence.rs`), and an
    /// open's caller finds what came with its answer (a capabilities
    /// change) in place.
    answered: Vec<(ReplyTx, crate::error::Result<Vec<u8>>)>,
    /// `session.lifecycle` params, for the receivers (not under the lock).
    lifecycle: Vec<Vec<u8>>,
}

/// The event type or method of an answer table row.
fn trigger_name(row: &copilot_core::AnswerRow) -> &'static str {
    match row.trigger {
        copilot_core::Trigger::Event(t) | copilot_core::Trigger::Request(t) => t,
    }
}

impl Connection {
    /// The read loop: bytes in, routes out, until the stream ends.
    /// `transport` says which transport `reader` is (see
    /// `Connection::transport`): the end of one a recovery replaced says nothing.
    pub(super) fn pump(self: Arc<Self>, mut reader: Box<dyn Read + Send>, transport: u64) {
        // Whatever fails in here (the caller's stream, a bug of ours), every
        // waiter is told and every stream ends.
        let cause = match catch_unwind(AssertUnwindSafe(|| self.read_loop(&mut *reader))) {
            Ok(cause) => cause,
            Err(panic) => {
                let what = panic_text(&*panic);
                log::error!("{}: the reader panicked: {what}", self.label);
                CloseCause::ReaderFailed(format!("panicked: {what}"))
            }
        };
        drop(reader);
        if self.read_state(State::transport) != transport {
            log::debug!("{}: the reader of a replaced transport stops: {cause}", self.label);
            return;
        }
        let cause = if self.is_stopping() {
            CloseCause::Stopped
        } else {
            match lock(&self.probe).take() {
                Some(probe) => catch_unwind(AssertUnwindSafe(|| probe(cause.clone()))).unwrap_or(cause),
                None => cause,
            }
        };
        log::debug!("{}: reader stops: {cause}", self.label);
        if cause == CloseCause::Stopped {
            self.shut_down(cause);
        } else if self.read_state(State::is_recovering) {
            // A transport of the recovery failed: its supervisor sees its
            // calls fail, and tries again or gives up.
            self.lose_transport(&cause);
        } else {
            match lock(&self.restart).clone() {
                Some(restart) => {
                    if let Err(cause) = self.recover(cause, restart) {
                        self.shut_down(cause);
                    }
                }
                None => self.shut_down(cause),
            }
        }
    }

    fn read_loop(self: &Arc<Self>, reader: &mut dyn Read) -> CloseCause {
        let mut decoder = FrameDecoder::with_buffer(GrowingBuffer::new(READ_CHUNK)).with_limit(MAX_FRAME);
        let mut read = Routed::default();
        let cause = loop {
            let spare = decoder.spare();
            let want = spare.len().min(READ_CHUNK);
            match reader.read(&mut spare[..want]) {
                Ok(0) => break CloseCause::PeerClosed,
                Ok(n) => decoder.commit(n),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => break CloseCause::ReadFailed(e.to_string()),
            }
            // The lock is held while this read's frames are routed; what
            // is done under it never waits for a consumer or runs user code.
            self.with_state(|state, now| {
                let engine = state.engine_mut();
                while let Some(mut out) = engine.poll(&mut decoder, now) {
                    if let Some(listed) = out.listed.take() {
                        self.take_on_listed(engine, now, &listed);
                        continue;
                    }
                    match out.route {
                        Route::Response { waiter: Waiter::Open { handle, target, reply }, result, .. } => {
                            let outcome = self.complete_open(engine, now, handle, &target, result, &mut read);
                            read.answered.push((reply, outcome));
                        }
                        _ => self.deliver(out, &mut read),
                    }
                }
            });
            for params in read.lifecycle.drain(..) {
                self.deliver_lifecycle(&params);
            }
            // The sessions that got events deliver them (one batch each),
            // then the answers of this read go to their calls, each of
            // which returns once the events before it are delivered.
            for target in read.touched.drain(..) {
                target.flush();
            }
            if !read.answered.is_empty() {
                let mark = self.fence.mark();
                for (reply, outcome) in read.answered.drain(..) {
                    reply.send_after(outcome, mark);
                }
            }
            // A consumer slower than the CLI holds the CLI back, rather
            // than this process's memory growing.
            self.backlog.wait_for_room(&self.label, || self.reads_on());
        };
        if let Err(e) = decoder.finish() {
            log::warn!("{}: {e}", self.label);
        }
        cause
    }

    /// Runs `job` on the handler pool after the client-wide jobs queued
    /// in order before it, one at a time: a pool runs its tasks side by
    /// side, which would let a later chunk of a request overtake an
    /// earlier one.
    fn in_order(self: &Arc<Self>, job: Job) {
        let mut lane = lock(&self.in_order);
        lane.queue.push_back(job);
        if std::mem::replace(&mut lane.running, true) {
            return;
        }
        drop(lane);
        let conn = Arc::clone(self);
        self.workers.submit(move || loop {
            let next = {
                let mut lane = lock(&conn.in_order);
                let next = lane.queue.pop_front();
                lane.running = next.is_some();
                next
            };
            let Some(job) = next else { return };
            if let Err(panic) = catch_unwind(AssertUnwindSafe(|| (conn.client_wide)(job))) {
                log::error!("{}: a client-wide handler panicked: {}", conn.label, panic_text(&*panic));
            }
        });
    }

    /// Whether the reader must read on over a full backlog: a request
    /// waits for its answer, or the connection ends.
    fn reads_on(&self) -> bool {
        self.read_state(State::reads_on)
    }

    /// Completes a create or resume in the engine; frames parked for it
    /// are delivered first, so they keep their order. Returns what to tell
    /// its caller.
    #[allow(clippy::too_many_arguments)]
    fn complete_open(
        self: &Arc<Self>,
        engine: &mut HostEngine,
        now: u64,
        handle: SessionHandle,
        target: &Target,
        result: std::result::Result<copilot_core::Value<'_>, RpcError<'_>>,
        read: &mut Routed,
    ) -> crate::error::Result<Vec<u8>> {
        let outcome = match &result {
            Ok(v) => Ok(v.as_bytes().to_vec()),
            Err(e) => Err(rpc_error(e)),
        };
        let name = result.as_ref().ok().and_then(|v| v.get("sessionId")).and_then(|s| s.as_str());
        let mut buf = [0; copilot_core::MAX_SESSION_ID_LEN];
        let name = name.and_then(|s| s.decode_into(&mut buf)).map(str::to_owned);
        let opened = engine.complete_open(handle, result);
        let reply_value = match (opened, outcome) {
            (Ok(()), Ok(body)) => {
                target.change_capabilities(&mut |c| *c = copilot_core::Capabilities::from_open_answer(&body));
                let mut first = true;
                for change in copilot_core::open_answer_canvases(&body) {
                    target.change_open_canvases(change, std::mem::take(&mut first));
                }
                if target.id().is_none() {
                    if let Some(name) = &name {
                        target.named(name);
                    }
                }
                Ok(body)
            }
            (_, Err(e)) => Err(e),
            (Err(e), Ok(_)) => Err(Error::Protocol(format!("the session could not be opened: {e}"))),
        };
        while let Some(out) = engine.poll_parked(now) {
            self.deliver(out, read);
        }
        reply_value
    }

    /// Hands each wait of a list reply that the engine takes on to its
    /// session's handlers, as its event's wait would be: the data is the
    /// event the engine writes for it (see [`copilot_core::ListedWait`]).
    /// Not delivered to the session's events: the CLI did not send it.
    fn take_on_listed(self: &Arc<Self>, engine: &mut HostEngine, now: u64, listed: &Listed<'_, Target>) {
        let taken = engine.open_listed(listed, now, |wait| {
            let mut data = Vec::new();
            wait.write_event(&mut |b: &[u8]| data.extend_from_slice(b));
            let reply = Replier { conn: Arc::clone(self), id: wait.obligation.id };
            wait.target.obligation(Job { kind: wait.obligation.handler, name: wait.event_type, data, reply });
        });
        if taken > 0 {
            log::info!("{}: {taken} waits pending in the CLI ({}) were taken on", self.label, listed.list.method);
        }
    }

    /// Delivers one routed frame. Runs under the engine's lock: it never
    /// blocks (events go to per-session queues, flushed once the lock is
    /// released and noted in `read`; handlers go to the pool; answers wait
    /// in `read` for the flush).
    fn deliver(self: &Arc<Self>, out: Output<'_, Target, Waiter>, read: &mut Routed) {
        let touched = &mut read.touched;
        let Output { route, obligation, refused, answer_ack, .. } = out;
        match route {
            Route::Event { target, event, .. } => {
                let bytes = event.event.as_bytes();
                if event.event_type == copilot_core::CAPABILITIES_CHANGED_EVENT {
                    target.change_capabilities(&mut |c| {
                        c.apply_event(bytes);
                    });
                }
                if let Some(change) = copilot_core::read_canvas_change(event.event_type, event.data) {
                    target.change_open_canvases(change, false);
                }
                target.push_event(bytes, event.event_type);
                if touched.last().is_none_or(|t| !Arc::ptr_eq(t, &target)) {
                    touched.push(Arc::clone(&target));
                }
                if let Some(ob) = obligation {
                    let reply = Replier { conn: Arc::clone(self), id: ob.id };
                    let name = copilot_core::row_for_event(event.event_type).map_or("", |(_, r)| trigger_name(r));
                    target.obligation(Job { kind: ob.handler, name, data: bytes.to_vec(), reply });
                }
            }
            Route::Request { method, params, session, .. } => match (obligation, session) {
                (Some(ob), Some((_, target))) => {
                    let data = params.map_or_else(|| b"{}".to_vec(), |p| p.as_bytes().to_vec());
                    let reply = Replier { conn: Arc::clone(self), id: ob.id };
                    let name = copilot_core::row_for_request(method).map_or("", |(_, r)| trigger_name(r));
                    target.obligation(Job { kind: ob.handler, name, data, reply });
                }
                (Some(ob), None) => {
                    // A client-wide request: the client's generic handlers answer.
                    let data = params.map_or_else(|| b"{}".to_vec(), |p| p.as_bytes().to_vec());
                    let reply = Replier { conn: Arc::clone(self), id: ob.id };
                    let name = copilot_core::row_for_request(method).map_or("", |(_, r)| trigger_name(r));
                    let job = Job { kind: ob.handler, name, data, reply };
                    // Not under the lock: the answer takes it.
                    if ob.handler == HandlerKind::LlmInference {
                        // An inference request's chunks are its body (or
                        // its WebSocket's messages): taken in order.
                        self.in_order(job);
                    } else {
                        let client_wide = Arc::clone(&self.client_wide);
                        self.workers.submit(move || client_wide(job));
                    }
                }
                (None, _) => log::debug!("{}: server request {method}: {refused:?}", self.label),
            },
            Route::Lifecycle { params, .. } => read.lifecycle.push(params.as_bytes().to_vec()),
            Route::Response { waiter, result, request } => {
                log::trace!("{}: <- response #{request}", self.label);
                let reply = match result {
                    Ok(v) => Ok(v.as_bytes().to_vec()),
                    Err(e) => Err(rpc_error(&e)),
                };
                match waiter {
                    // An open is handled by the read loop; never parked.
                    Waiter::Reply(tx) | Waiter::Open { reply: tx, .. } => read.answered.push((tx, reply)),
                }
            }
            Route::Notification { method, .. } => log::debug!("{}: notification {method}", self.label),
            Route::Park { session_id, .. } => {
                if let Some(cause) = refused {
                    log::warn!("{}: a wait for session {session_id} was refused: {}", self.label, cause.name());
                }
            }
            Route::UnknownSession { session_id, method, .. } => {
                log::warn!("{}: {method} for unknown session {session_id} ({refused:?})", self.label)
            }
            Route::UnmatchedResponse { id, .. } if id.to_string().contains(LIST_ID_PREFIX) => {
                log::debug!("{}: a list of pending waits gave nothing to take on ({id})", self.label)
            }
            Route::UnmatchedResponse { id, .. } => {
                if answer_ack.is_none() {
                    log::warn!("{}: response to unknown request {id}", self.label)
                }
            }
            Route::Malformed(e) => log::warn!("{}: malformed message: {e}", self.label),
            Route::FrameError(e) => log::warn!("{}: {e}", self.label),
        }
    }

    /// Hands a `session.lifecycle`'s params to every receiver (which
    /// reads them; the driver knows no typed event).
    fn deliver_lifecycle(&self, params: &[u8]) {
        let mut subs = self.lifecycle.lock().unwrap_or_else(|p| p.into_inner());
        subs.retain_mut(|sink| sink(params));
    }

    /// Ends the connection: every waiting call fails with `Disconnected`
    /// and the cause, every session's event stream ends.
    pub(super) fn shut_down(&self, cause: CloseCause) {
        let reason = cause.to_string();
        let ended = {
            let mut locked = lock(&self.locked);
            locked.outbox.fail(&reason);
            locked.state.shut_down(cause)
        };
        // The timer ends, and a paused reader looks again.
        self.timer_wake.notify_all();
        self.backlog.nudge();
        if ended.forgotten > 0 {
            log::warn!("{}: {} waits of the agent were open when the connection ended", self.label, ended.forgotten);
        }
        for w in ended.failed {
            w.fail(Error::Disconnected(reason.clone()));
        }
        for target in ended.sessions {
            target.close(&reason);
        }
        lock(&self.lifecycle).clear();
        ended.woken.into_iter().for_each(std::task::Waker::wake);
    }
}

fn rpc_error(e: &RpcError<'_>) -> Error {
    Error::Rpc {
        code: e.code,
        message: e.message.to_string(),
        data: e.data.and_then(|d| serde_json::from_slice(d.as_bytes()).ok()),
    }
}
