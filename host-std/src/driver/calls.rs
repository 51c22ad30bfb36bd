//! The request path: a request inserted in the engine with its deadline,
//! encoded by the core and queued for the writer; its answer reaches the
//! caller's [`Waiter`].

use std::sync::mpsc;
use std::time::{Duration, Instant};

use copilot_core::{EncodeError, Outgoing, Payload, RequestId};
use serde::Serialize;

use super::connection::{Connection, Reply, ReplyTx, Waiter, MAX_PENDING};
use super::outbox::PushError;
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
    /// Hands one whole frame to the writer thread (written with one write),
    /// waiting until `deadline` at most if too many bytes already wait.
    pub(crate) fn send_frame(&self, frame: Vec<u8>, deadline: Instant, what: &str) -> Result<()> {
        if self.is_closed() {
            return Err(self.disconnected());
        }
        self.outbox.push(frame, deadline).map_err(|e| match e {
            PushError::Full => Error::Timeout {
                what: format!("room to send {what} (the CLI reads nothing)"),
                after: deadline.saturating_duration_since(Instant::now()),
            },
            PushError::Closed(why) => Error::Disconnected(why),
        })
    }

    /// Shuts the writing side once what is queued is written (closes stdin
    /// of a stdio CLI, or the socket's write half), which makes a stdio CLI
    /// exit. Never waits.
    pub(crate) fn close_writer(&self) {
        self.outbox.close();
    }

    /// Sends a request and blocks until its response, the deadline (the
    /// connection's default unless `timeout` is given), or a disconnect.
    pub(crate) fn request<P: Serialize + ?Sized>(
        &self,
        method: &str,
        params: &P,
        timeout: Option<Duration>,
    ) -> Result<Vec<u8>> {
        let timeout = timeout.unwrap_or(self.deadlines.request);
        self.request_until(method, params, Instant::now() + timeout)
    }

    /// [`request`](Self::request) with an absolute deadline.
    pub(crate) fn request_until<P: Serialize + ?Sized>(
        &self,
        method: &str,
        params: &P,
        deadline: Instant,
    ) -> Result<Vec<u8>> {
        let (tx, rx) = mpsc::sync_channel(1);
        self.request_with(method, params, Waiter::Reply(ReplyTx::Sync(tx)), rx, deadline)
    }

    /// Sends a request whose waiter the caller built (see [`Waiter::Open`]).
    pub(crate) fn request_with<P: Serialize + ?Sized>(
        &self,
        method: &str,
        params: &P,
        waiter: Waiter,
        rx: mpsc::Receiver<Reply>,
        deadline: Instant,
    ) -> Result<Vec<u8>> {
        self.start_request(method, params, waiter, rx, deadline)?.wait(self)
    }

    /// Sends a request without waiting for its answer: several can then be
    /// awaited against one deadline. The deadline is the engine's: the
    /// timer thread fails the request when it passes.
    pub(crate) fn start_request<P: Serialize + ?Sized>(
        &self,
        method: &str,
        params: &P,
        waiter: Waiter,
        rx: mpsc::Receiver<Reply>,
        deadline: Instant,
    ) -> Result<InFlight> {
        let started = Instant::now();
        self.send_request(method, params, waiter, deadline, deadline)?;
        Ok(InFlight { rx, method: method.to_owned(), started })
    }

    /// Inserts `waiter` with the engine's `deadline` and encodes the
    /// request, for the async API to queue with
    /// [`poll_send_frame`](Self::poll_send_frame): it never waits. If the
    /// frame is never queued, the caller forgets the request.
    #[cfg(feature = "async")]
    pub(crate) fn prepare_request_async<P: Serialize + ?Sized>(
        &self,
        method: &str,
        params: &P,
        waiter: Waiter,
        deadline: Instant,
    ) -> Result<(RequestId, Vec<u8>)> {
        self.prepare_request(method, params, waiter, deadline)
    }

    /// Queues `frame` (taken from the option) for the writer thread, or,
    /// if too many bytes already wait, leaves it there and wakes `cx` when
    /// room is made: an async caller awaits room instead of blocking.
    #[cfg(feature = "async")]
    pub(crate) fn poll_send_frame(
        &self,
        frame: &mut Option<Vec<u8>>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<()>> {
        if self.is_closed() {
            return std::task::Poll::Ready(Err(self.disconnected()));
        }
        self.outbox.poll_push(frame, cx).map(|pushed| {
            pushed.map_err(|e| match e {
                PushError::Closed(why) => Error::Disconnected(why),
                PushError::Full => Error::Protocol("the outbox refused a frame it had room for".into()),
            })
        })
    }

    /// Inserts `waiter` with the engine's `deadline` and queues the frame,
    /// waiting for room in the outbox until `room_by`.
    fn send_request<P: Serialize + ?Sized>(
        &self,
        method: &str,
        params: &P,
        waiter: Waiter,
        deadline: Instant,
        room_by: Instant,
    ) -> Result<RequestId> {
        let started = Instant::now();
        let (id, frame) = self.prepare_request(method, params, waiter, deadline)?;
        if let Err(e) = self.send_frame(frame, room_by, &format!("`{method}`")) {
            self.forget(id);
            return Err(match e {
                Error::Timeout { what, .. } => Error::Timeout { what, after: started.elapsed() },
                e => e,
            });
        }
        Ok(id)
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
                self.give_up(waiter);
                return Err(Error::Protocol(format!("cannot serialize params: {e}")));
            }
        };
        let at = self.at(deadline);
        let inserted = self.with_engine(|e, _| e.router().pending().insert_with_deadline(waiter, Some(at)));
        let id = match inserted {
            Ok(id) => id,
            Err(full) => {
                self.give_up(full.0);
                return Err(Error::Capacity(format!("more than {MAX_PENDING} requests in flight")));
            }
        };
        // The reader sets `closed` before it fails every pending request, so
        // either that drain sees this request or this check sees `closed`.
        if self.is_closed() {
            self.forget(id);
            return Err(self.disconnected());
        }
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

    /// A waiter whose request was never sent: an open gives its slot back.
    fn give_up(&self, waiter: Waiter) {
        if let Waiter::Open { handle, .. } = waiter {
            self.release(handle);
        }
    }

    /// Drops a request's waiter (failed send, or an async call dropped
    /// before its answer: a late answer is then counted as unmatched). An
    /// open also gives its reserved slot back.
    pub(crate) fn forget(&self, id: RequestId) {
        let waiter = self.with_engine(|e, _| e.router().pending().take(id.0));
        if let Some(w) = waiter {
            self.give_up(w);
        }
    }
}

/// A request sent and not yet answered.
pub(crate) struct InFlight {
    rx: mpsc::Receiver<Reply>,
    method: String,
    started: Instant,
}

impl InFlight {
    /// Waits for the answer. The engine's deadline (kept by the timer
    /// thread) ends the wait with `Timeout`; a late answer is then counted
    /// as unmatched.
    pub(crate) fn wait(self, conn: &Connection) -> Result<Vec<u8>> {
        match self.rx.recv() {
            Ok(Err(Error::Timeout { .. })) => {
                Err(Error::Timeout { what: format!("`{}`", self.method), after: self.started.elapsed() })
            }
            Ok(reply) => reply,
            Err(mpsc::RecvError) => Err(conn.disconnected()),
        }
    }
}
