//! The request path, the only one: a request inserted in the engine with
//! its deadline, encoded by the core and queued for the writer; its answer
//! completes the caller's [`Call`], woken by the reader, the timer or the
//! end of the connection. The async API awaits a call; the blocking API
//! waits on the same future ([`crate::wait::block_on`]).

use std::future::{poll_fn, Future};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

use copilot_core::{EncodeError, Outgoing, Payload, RequestId};
use serde::Serialize;

use super::completion::Completion;
use super::connection::{lock, Connection, Marked, Reply, ReplyTx, Waiter, WakerSlot, MAX_PENDING};
use super::outbox::PushError;
use super::state::CallRefused;
use crate::error::{Error, Result};

/// Already-serialized JSON from serde_json, handed to the core's encoder.
struct Json<'a>(&'a [u8]);

impl Payload for Json<'_> {
    fn write_json(&self, out: &mut [u8]) -> Result<usize, EncodeError> {
        out.get_mut(..self.0.len()).ok_or(EncodeError::BufferTooSmall)?.copy_from_slice(self.0);
        Ok(self.0.len())
    }
}

/// Encodes a whole frame with the core's encoder (the one codec of the project).
fn encode(message: &Outgoing<'_>, size_hint: usize) -> Result<Vec<u8>> {
    message.to_vec(size_hint + 256).map_err(|e| Error::Protocol(format!("cannot encode a message: {e}")))
}

impl Connection {
    /// Shuts the writing side once what is queued is written (closes stdin
    /// of a stdio CLI, or the socket's write half), which makes a stdio CLI
    /// exit. Never waits.
    pub(crate) fn close_writer(&self) {
        self.outbox().close();
    }

    /// A request answered by its result's raw JSON, or its error; the
    /// engine fails it at `deadline` (the timer thread keeps it).
    pub(crate) fn request<P: Serialize + ?Sized>(
        self: &Arc<Self>,
        method: &str,
        params: &P,
        deadline: Instant,
    ) -> Result<Call> {
        self.request_with(method, params, Waiter::Reply, deadline)
    }

    /// [`request`](Self::request) with a waiter built around the call's
    /// slot (see [`Waiter::Open`]). The request is in the engine when this
    /// returns; its frame is queued when the call is first polled.
    pub(crate) fn request_with<P: Serialize + ?Sized>(
        self: &Arc<Self>,
        method: &str,
        params: &P,
        waiter: impl FnOnce(ReplyTx) -> Waiter,
        deadline: Instant,
    ) -> Result<Call> {
        let slot = Arc::new(Completion::default());
        let started = Instant::now();
        let (id, frame) = self.prepare_request(method, params, waiter(ReplyTx(Arc::clone(&slot))), deadline)?;
        Ok(Call {
            conn: Arc::clone(self),
            slot,
            id: Some(id),
            frame: Some(frame),
            method: method.to_owned(),
            started,
            deadline,
            answered: None,
        })
    }

    /// Queues `frame` (taken from the option) for the writer thread, or,
    /// if too many bytes already wait, leaves it there and wakes `cx` when
    /// room is made: a caller awaits room instead of blocking a thread.
    fn poll_send_frame(&self, frame: &mut Option<Vec<u8>>, cx: &mut Context<'_>) -> Poll<Result<()>> {
        let outbox = {
            let locked = lock(&self.locked);
            (!locked.state.is_closed()).then(|| Arc::clone(&locked.outbox))
        };
        let Some(outbox) = outbox else { return Poll::Ready(Err(self.disconnected())) };
        outbox.poll_push(frame, cx).map(|pushed| pushed.map_err(|PushError::Closed(why)| Error::Disconnected(why)))
    }

    /// Inserts `waiter` with the engine's `deadline` and encodes the request.
    fn prepare_request<P: Serialize + ?Sized>(
        &self,
        method: &str,
        params: &P,
        waiter: Waiter,
        deadline: Instant,
    ) -> Result<(RequestId, Vec<u8>)> {
        let params = match serde_json::to_vec(params) {
            Ok(p) => p,
            Err(e) => {
                // Never started: an open gives its slot back.
                if let Waiter::Open { handle, .. } = waiter {
                    self.release(handle);
                }
                return Err(Error::Protocol(format!("cannot serialize params: {e}")));
            }
        };
        let at = self.at(deadline);
        let id = match self.with_state(|s, now| s.start_call(waiter, at, now)) {
            Ok(id) => id,
            Err(CallRefused::Full) => {
                return Err(Error::Capacity(format!("more than {MAX_PENDING} requests in flight")));
            }
            Err(CallRefused::Closed) => return Err(self.disconnected()),
        };
        // Its answer must be read, over a full backlog too.
        self.backlog.nudge();
        let frame = match encode(
            &Outgoing::Request { id, method, params: Some(&Json(&params)) },
            params.len() + method.len(),
        ) {
            Ok(f) => f,
            Err(e) => {
                self.forget(id);
                return Err(e);
            }
        };
        log::trace!("{}: -> {method} #{id}", self.label);
        Ok((id, frame))
    }

    /// Drops a request's waiter (a failed send, or a call dropped before
    /// its answer: a late answer is then counted as unmatched). An open
    /// also gives its reserved slot back.
    pub(crate) fn forget(&self, id: RequestId) {
        self.with_state(|s, now| s.forget(id, now));
    }

    /// Waits until `deadline` for `ready`; the connection's timer thread
    /// wakes the wait, so no executor timer is needed. `ready` is checked
    /// first at every poll; `None` when the deadline passed first.
    pub(crate) async fn until<T>(
        &self,
        deadline: Instant,
        mut ready: impl FnMut(&mut Context<'_>) -> Poll<T>,
    ) -> Option<T> {
        let slot: WakerSlot = Arc::default();
        let mut armed = false;
        poll_fn(|cx| {
            if let Poll::Ready(v) = ready(cx) {
                return Poll::Ready(Some(v));
            }
            if Instant::now() >= deadline {
                return Poll::Ready(None);
            }
            *lock(&slot) = Some(cx.waker().clone());
            if !armed {
                armed = true;
                self.wake_at(deadline, Arc::clone(&slot));
            }
            Poll::Pending
        })
        .await
    }
}

/// One request in flight. Dropping it before its answer forgets the
/// request in the engine (and a frame still waiting for room is not sent).
pub(crate) struct Call {
    conn: Arc<Connection>,
    slot: Arc<Completion<Marked>>,
    id: Option<RequestId>,
    /// The request's frame, until the outbox has room for it.
    frame: Option<Vec<u8>>,
    method: String,
    started: Instant,
    deadline: Instant,
    /// The reply, while the events read before it are being delivered
    /// (see `fence.rs`), and the timer's slot for the deadline of that wait.
    answered: Option<(Reply, u64, Option<WakerSlot>)>,
}

impl Call {
    fn timeout(&self, what: String) -> Error {
        Error::Timeout { what, after: self.started.elapsed() }
    }
}

impl Future for Call {
    type Output = Reply;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Reply> {
        let this = &mut *self;
        // Once queued, only the slot counts: an answer that came before the
        // connection ended is still the call's result.
        let queued = this.frame.is_none()
            || match this.conn.poll_send_frame(&mut this.frame, cx) {
                Poll::Ready(Ok(())) => true,
                Poll::Ready(Err(e)) => {
                    this.frame = None;
                    if let Some(id) = this.id.take() {
                        this.conn.forget(id);
                    }
                    return Poll::Ready(Err(e));
                }
                // Waiting for room: the engine's deadline still runs, and its
                // timer completes the slot if room does not come in time.
                Poll::Pending => false,
            };
        if this.answered.is_none() {
            let reply = match this.slot.poll_take(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(reply) => reply,
            };
            this.id = None;
            this.frame = None;
            let (reply, mark) = match reply {
                Some((Err(Error::Timeout { .. }), _)) if !queued => {
                    return Poll::Ready(Err(
                        this.timeout(format!("room to send `{}` (the CLI reads nothing)", this.method))
                    ));
                }
                Some((Err(Error::Timeout { .. }), _)) => {
                    return Poll::Ready(Err(this.timeout(format!("`{}`", this.method))))
                }
                Some(marked) => marked,
                None => return Poll::Ready(Err(Error::Disconnected("the call was already answered".into()))),
            };
            this.answered = Some((reply, mark, None));
        }
        // The events read before the answer reach their callbacks first;
        // by the call's deadline at the latest (a callback that never
        // returns does not hold the call past it).
        let (_, mark, timer) = this.answered.as_mut().expect("set above");
        if this.conn.poll_fence(*mark, cx).is_pending() {
            if Instant::now() < this.deadline {
                let slot = timer.get_or_insert_with(|| {
                    let slot = WakerSlot::default();
                    this.conn.wake_at(this.deadline, Arc::clone(&slot));
                    slot
                });
                *lock(slot) = Some(cx.waker().clone());
                return Poll::Pending;
            }
            log::warn!(
                "{}: `{}` returns before the events read ahead of its answer were delivered: \
                 an event callback did not return by the call's deadline",
                this.conn.label,
                this.method
            );
        }
        let (reply, _, _) = this.answered.take().expect("set above");
        Poll::Ready(reply)
    }
}

impl Drop for Call {
    fn drop(&mut self) {
        if let Some(id) = self.id.take() {
            if !self.slot.is_done() {
                self.conn.forget(id);
            }
        }
    }
}
