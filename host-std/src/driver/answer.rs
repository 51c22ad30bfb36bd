//! The way back for a wait of the agent: a handler's answer, or the reason
//! there is none, handed to the engine, which decides what is sent.

use std::sync::Arc;
use std::time::Duration;

use copilot_core::ObligationId;
use copilot_core::{AnswerError, Cause, Shaped};

use super::connection::{Connection, Replier};
use super::state::Outcome;

impl Replier {
    /// Passes on the handler's answer (JSON text, which the engine reads;
    /// `null` leaves the answer's key out).
    pub(crate) fn answer(&self, payload: &[u8]) {
        report(self.settle(Outcome::Answer(payload)))
    }

    /// Passes on an answer the core shaped, with `siblings` (an object's
    /// members) beside it: sent as it is, not read again.
    pub(crate) fn answer_shaped(&self, payload: &Shaped, siblings: Option<&Shaped>) {
        report(self.settle(Outcome::Shaped(payload, siblings)))
    }

    /// Nothing goes: the handler left the wait to another client of the
    /// session (a wait only this client can answer gets its refusal).
    pub(crate) fn decline(&self) {
        match self.settle(Outcome::Decline) {
            Ok(()) | Err(AnswerError::Stale) => {}
            Err(e) => log::warn!("{e}"),
        }
    }

    /// The handler failed with the text `detail`: the engine's failure
    /// answer goes (a tool's `{requestId, error}`, else the refusal).
    pub(crate) fn fail(&self, detail: &str) {
        self.fail_coded("", detail);
    }

    /// [`fail`](Self::fail) with the machine code the handler named (a
    /// canvas handler's error; empty: the core's).
    pub(crate) fn fail_coded(&self, code: &str, detail: &str) {
        let _ = self.settle(Outcome::Fail { code, detail });
    }

    /// The engine's refusal goes in place of an answer.
    pub(crate) fn refuse(&self, cause: Cause) {
        let _ = self.settle(Outcome::Refuse(cause));
    }

    fn settle(&self, outcome: Outcome<'_>) -> Result<(), AnswerError> {
        self.conn.with_state(|s, _| s.settle(self.id, outcome))
    }

    /// Runs `f` (the user's handler) with this wait as the one the thread
    /// answers, which an async handler reads ([`Answering::current`]) to
    /// drop its future once the engine has refused the wait.
    pub(crate) fn scope<R>(&self, f: impl FnOnce() -> R) -> R {
        struct Reset(Option<Answering>);
        impl Drop for Reset {
            fn drop(&mut self) {
                ANSWERING.with(|a| *a.borrow_mut() = self.0.take());
            }
        }
        let wait = Answering { conn: Arc::downgrade(&self.conn), id: self.id };
        let _reset = Reset(ANSWERING.with(|a| a.borrow_mut().replace(wait)));
        f()
    }
}

thread_local! {
    /// The wait of the agent the handler running on this thread answers.
    static ANSWERING: std::cell::RefCell<Option<Answering>> = const { std::cell::RefCell::new(None) };
}

/// The wait of the agent a handler pool thread is answering.
pub(crate) struct Answering {
    conn: std::sync::Weak<Connection>,
    id: ObligationId,
}

impl Answering {
    /// The wait the handler running on this thread answers, if any.
    pub(crate) fn current() -> Option<Answering> {
        ANSWERING.with(|a| a.borrow().as_ref().map(|w| Answering { conn: w.conn.clone(), id: w.id }))
    }

    /// How long the engine gives a handler; its deadline for this wait is
    /// at most this long from now.
    pub(crate) fn timeout(&self) -> Option<Duration> {
        self.conn.upgrade().map(|c| c.deadlines.handler)
    }

    /// Whether the engine still waits for this handler's answer (it has
    /// not refused the wait: its deadline, or its session or connection
    /// ended).
    pub(crate) fn is_open(&self) -> bool {
        self.conn.upgrade().is_some_and(|c| c.read_state(|s| s.is_open(self.id)))
    }
}

/// Logs why an answer was not sent as given (the engine sent the refusal
/// instead, or the wait was answered already).
fn report(sent: Result<(), AnswerError>) {
    match sent {
        Ok(()) => {}
        Err(AnswerError::Stale) => log::debug!("an answer came after its wait was answered; not sent"),
        Err(e) => log::warn!("{e}"),
    }
}
