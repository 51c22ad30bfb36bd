//! Async calls: a request whose answer completes a slot, woken by the
//! reader, the timer or the end of the connection.

use std::future::{poll_fn, Future};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Instant;

use copilot_core::RequestId;
use serde::Serialize;

use crate::driver::{Completion, Connection, Reply, ReplyTx, Waiter, WakerSlot};
use crate::error::{Error, Result};

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// One request in flight. Dropping it before its answer forgets the
/// request in the engine (and a frame still waiting for room is not sent).
pub(crate) struct Call {
    conn: Arc<Connection>,
    slot: Arc<Completion<Reply>>,
    id: Option<RequestId>,
    /// The request's frame, until the outbox has room for it.
    frame: Option<Vec<u8>>,
    method: String,
    started: Instant,
}

impl Call {
    /// Inserts the request in the engine with `deadline`; its frame is
    /// queued when the call is first polled. `waiter` is built around the
    /// call's slot.
    pub(super) fn start<P: Serialize + ?Sized>(
        conn: &Arc<Connection>,
        method: &str,
        params: &P,
        waiter: impl FnOnce(ReplyTx) -> Waiter,
        deadline: Instant,
    ) -> Result<Call> {
        let slot = Arc::new(Completion::default());
        let started = Instant::now();
        let (id, frame) =
            conn.prepare_request_async(method, params, waiter(ReplyTx::Async(Arc::clone(&slot))), deadline)?;
        Ok(Call { conn: Arc::clone(conn), slot, id: Some(id), frame: Some(frame), method: method.to_owned(), started })
    }

    fn timeout(&self, what: String) -> Error {
        Error::Timeout { what, after: self.started.elapsed() }
    }
}

impl Future for Call {
    type Output = Result<Vec<u8>>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
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
        let reply = match this.slot.poll_take(cx) {
            Poll::Pending => return Poll::Pending,
            Poll::Ready(reply) => reply,
        };
        this.id = None;
        this.frame = None;
        Poll::Ready(match reply {
            Some(Err(Error::Timeout { .. })) if !queued => {
                Err(this.timeout(format!("room to send `{}` (the CLI reads nothing)", this.method)))
            }
            Some(Err(Error::Timeout { .. })) => Err(this.timeout(format!("`{}`", this.method))),
            Some(reply) => reply,
            None => Err(Error::Disconnected("the call was already answered".into())),
        })
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

pub(crate) fn request<P: Serialize + ?Sized>(
    conn: &Arc<Connection>,
    method: &str,
    params: &P,
    deadline: Instant,
) -> Result<Call> {
    Call::start(conn, method, params, Waiter::Reply, deadline)
}

/// Runs a blocking step (a process start, a handshake, a stop) on a one-off
/// thread whose end completes the future.
pub(super) async fn on_thread<T: Send + 'static>(
    name: &str,
    f: impl FnOnce() -> Result<T> + Send + 'static,
) -> Result<T> {
    let slot: Arc<Completion<Result<T>>> = Arc::new(Completion::default());
    let done = Arc::clone(&slot);
    std::thread::Builder::new().name(name.to_owned()).spawn(move || done.complete(f())).map_err(Error::Io)?;
    poll_fn(|cx| slot.poll_take(cx))
        .await
        .unwrap_or_else(|| Err(Error::Disconnected("the start thread ended without an answer".into())))
}

/// Waits until `deadline`; the connection's timer thread wakes the wait,
/// so no executor timer is needed. `ready` is checked first at every poll.
pub(super) async fn until<T>(
    conn: &Connection,
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
            conn.wake_at(deadline, Arc::clone(&slot));
        }
        Poll::Pending
    })
    .await
}
