//! [`Client::stop`]: the core's stop steps ([`STOP_STEPS`]), in order,
//! within one grace period.

use std::future::{poll_fn, Future};
use std::pin::Pin;
use std::task::Poll;
use std::time::Instant;

use copilot_core::{StopStep, STOP_STEPS};
use serde_json::json;

use super::client::Client;
use crate::driver::Call;
use crate::error::{Error, Result};
use crate::wait::block_on;

impl Client {
    /// Stops cleanly, within [`ClientOptions::shutdown_grace`](crate::ClientOptions::shutdown_grace)
    /// in total however many sessions are open: destroys the sessions still
    /// open (all at once), asks a CLI we started to shut down and waits for
    /// it to exit; when the grace is over, kills its process group.
    /// Sessions and their streams are released at once, whatever the CLI
    /// does. Returns the first failure (such as a `Timeout` from a CLI that
    /// did not answer) after everything is released.
    pub fn stop(self) -> Result<()> {
        let grace = self.conn.deadlines.grace;
        let deadline = Instant::now() + grace;
        self.conn.mark_stopping();
        let mut process = self.process.lock().unwrap_or_else(|p| p.into_inner()).take();
        let mut first_error = None;
        for &step in STOP_STEPS {
            // Whether the connection is open is read at each step: the CLI
            // may end during the stop.
            let applies = step.applies(process.is_some(), !self.conn.is_closed());
            match step {
                // The sessions are released even when no destroy is sent.
                StopStep::DestroySessions => {
                    if let Err(e) = self.destroy_sessions(applies, deadline) {
                        first_error.get_or_insert(e);
                    }
                }
                StopStep::ShutdownRuntime if applies => {
                    let method = step.method().unwrap_or("runtime.shutdown");
                    match self.conn.request(method, &json!({}), deadline).and_then(block_on) {
                        Err(Error::Rpc { .. } | Error::Disconnected(_)) if !step.error_fails_stop() => {}
                        Ok(_) => {}
                        Err(e) => {
                            first_error.get_or_insert(e);
                        }
                    }
                }
                StopStep::CloseWriter if applies => self.conn.close_writer(),
                StopStep::AwaitExitOrKill if applies => {
                    if let Some(p) = process.as_mut() {
                        if p.wait_for_exit(deadline.saturating_duration_since(Instant::now())).is_none() {
                            log::warn!("the Copilot CLI did not exit within {grace:?}; killing its process group");
                            p.kill();
                        }
                    }
                }
                StopStep::Release if applies => self.release(process.is_some(), deadline),
                _ => {}
            }
        }
        // A stream of the caller's that stays open keeps its reader; the
        // calls and sessions of this client are released all the same.
        first_error.map_or(Ok(()), Err)
    }

    /// Marks every open session closing and, when `send` (the connection
    /// is open), sends each `session.destroy` at once and awaits the
    /// answers together; every session is released whatever the answer.
    /// The first failure is returned.
    fn destroy_sessions(&self, send: bool, deadline: Instant) -> Result<()> {
        let method = StopStep::DestroySessions.method().unwrap_or("session.destroy");
        let mut first_error = None;
        let mut destroys: Vec<Call> = Vec::new();
        for (handle, active, session) in self.conn.sessions() {
            if let (Some(_), true) = (session.id(), active) {
                self.conn.close_session(handle);
            }
            if let (Some(id), true, true) = (session.id(), active, send) {
                match self.conn.request(method, &json!({ "sessionId": id }), deadline) {
                    Ok(call) => destroys.push(call),
                    Err(e) => {
                        first_error.get_or_insert(e);
                    }
                }
            }
            self.conn.release(handle);
            session.close("client stopped");
        }
        for reply in block_on(all(destroys)) {
            if let Err(e) = reply {
                first_error.get_or_insert(e);
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    /// Releases the connection: a socket is shut down, and the reader is
    /// joined once its end is closed (for a CLI we started or a socket at
    /// once, for the caller's streams when they close, within `deadline`).
    fn release(&self, spawned: bool, deadline: Instant) {
        let tcp = self.shut_socket();
        if spawned || tcp {
            // Its end of the connection is closed: the reader ends now.
            self.join_reader();
        } else if self.conn.wait_closed(Some(deadline)).is_some() {
            self.join_reader();
        }
    }
}

/// Awaits `calls` together: each frame is queued at the first poll, so they
/// are all sent before any answer is awaited. Their results, in order.
async fn all(mut calls: Vec<Call>) -> Vec<Result<Vec<u8>>> {
    let mut done: Vec<Option<Result<Vec<u8>>>> = calls.iter().map(|_| None).collect();
    poll_fn(|cx| {
        for (call, slot) in calls.iter_mut().zip(done.iter_mut()) {
            if slot.is_none() {
                if let Poll::Ready(reply) = Pin::new(call).poll(cx) {
                    *slot = Some(reply);
                }
            }
        }
        if done.iter().all(Option::is_some) {
            Poll::Ready(done.iter_mut().filter_map(Option::take).collect())
        } else {
            Poll::Pending
        }
    })
    .await
}
