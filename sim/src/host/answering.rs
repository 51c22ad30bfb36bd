//! The host's handlers: each obligation the engine hands out gets a plan
//! (no handler, an answer, a failure, a decline, too slow, invalid JSON)
//! and a time, and is settled then through the engine, whose reply is
//! checked against what its documentation promises.

use copilot_core::{AnswerError, AnswerVia, Cause, HandlerKind, Obligation, ObligationId, ANSWERS};

use super::{Host, RecState};

/// What a handler does with an obligation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Plan {
    /// The host has no handler of its kind: [`copilot_core::Engine::refuse`]
    /// with [`Cause::NoHandler`].
    NoHandler,
    /// The handler answers.
    Answer,
    /// The handler fails ([`copilot_core::Engine::fail`]).
    Fail,
    /// The handler declines ([`copilot_core::Engine::decline`]).
    Decline,
    /// The handler answers after its deadline.
    Slow,
    /// The handler answers with text that is not JSON.
    Invalid,
}

/// An obligation handed to the host's handlers.
#[derive(Debug, Clone)]
pub struct Ob {
    /// The engine's id.
    pub id: ObligationId,
    /// Which handler.
    pub handler: HandlerKind,
    /// Its row of the answer table.
    pub row: usize,
    /// The wait it answers: `rid:<requestId>` or `req:<connection>/<id>`.
    pub tag: String,
    /// Its session's record, if it has one.
    pub session: Option<u32>,
    /// The engine's deadline.
    pub deadline: Option<u64>,
    /// When the handler settles it.
    pub due: u64,
    /// What the handler does.
    pub plan: Plan,
    /// Whether it is a wait of an event (it outlives a connection).
    pub event_row: bool,
    /// The connection was lost since (a server request's wait is then forgotten).
    pub forgotten: bool,
    /// The handler has settled it.
    pub settled: bool,
}

/// The answer a handler gives: valid JSON, tagged with the wait it is
/// for, so the CLI can tell an answer that reached the wrong wait.
fn payload(row: usize, tag: &str) -> String {
    match (ANSWERS[row].handler, ANSWERS[row].via) {
        (HandlerKind::Permission, _) => format!(r#"{{"kind":"approve-once","simAnswer":"{tag}"}}"#),
        (HandlerKind::Tool, AnswerVia::Rpc { .. }) => {
            format!(r#"{{"textResultForLlm":"ok","resultType":"success","simAnswer":"{tag}"}}"#)
        }
        _ => format!(r#"{{"simAnswer":"{tag}"}}"#),
    }
}

impl Host {
    /// The engine handed out `ob` (of `row`, for the wait `tag`): a plan
    /// and a time for it.
    pub(super) fn take_obligation(&mut self, now: u64, ob: Obligation, row: usize, session: Option<u32>, tag: String) {
        if ANSWERS[row].handler != ob.handler {
            self.failures.push(format!(
                "obligation {} of {tag}: handler {:?}, its row's is {:?}",
                ob.id, ob.handler, ANSWERS[row].handler
            ));
        }
        if self.beyond_memory(&tag) {
            self.seen.beyond_memory.insert(tag.clone());
        }
        let discharged = self.discharged();
        self.seen.discharged_at.entry(tag.clone()).or_insert(discharged);
        if self.obligations.iter().any(|o| !o.settled && o.tag == tag && self.engine.is_open(o.id)) {
            self.failures.push(format!("the engine handed out {tag} again while its first obligation is open"));
        }
        let plan = if self.profile.handlers.contains(&ob.handler) {
            let weights = self.profile.plans;
            match self.rng().weighted(&weights).unwrap_or(0) {
                0 => Plan::Answer,
                1 => Plan::Fail,
                2 => Plan::Decline,
                3 => Plan::Slow,
                _ => Plan::Invalid,
            }
        } else {
            Plan::NoHandler
        };
        let handler_ms = self.profile.handler_ms;
        let due = match (plan, ob.deadline) {
            (Plan::NoHandler, _) => now,
            (Plan::Slow, Some(deadline)) => deadline + self.rng().range(0, 500),
            _ => now + self.rng().range(0, handler_ms),
        };
        let event_row = matches!(ANSWERS[row].trigger, copilot_core::Trigger::Event(_));
        self.seen.handed.insert(tag.clone());
        self.notes.push(format!("obligation {} for {tag}: {plan:?} at {due} ms (deadline {:?})", ob.id, ob.deadline));
        self.obligations.push(Ob {
            id: ob.id,
            handler: ob.handler,
            row,
            tag,
            session,
            deadline: ob.deadline,
            due,
            plan,
            event_row,
            forgotten: false,
            settled: false,
        });
    }

    /// Settles the obligations whose handlers are done by `now`, earliest first.
    pub(super) fn run_jobs(&mut self, now: u64) {
        loop {
            let next = self
                .obligations
                .iter()
                .enumerate()
                .filter(|(_, o)| !o.settled && o.due <= now)
                .min_by_key(|(i, o)| (o.due, *i))
                .map(|(i, _)| i);
            let Some(i) = next else { break };
            self.settle(now, i);
        }
        self.obligations.retain(|o| !o.settled);
    }

    fn settle(&mut self, now: u64, i: usize) {
        let ob = self.obligations[i].clone();
        self.obligations[i].settled = true;
        let was_open = self.engine.is_open(ob.id);
        let declined = self.engine.stats(now).declined;
        let result = match ob.plan {
            Plan::NoHandler => self.engine.refuse(ob.id, Cause::NoHandler),
            Plan::Answer | Plan::Slow => self.engine.answer(ob.id, payload(ob.row, &ob.tag).as_bytes()),
            Plan::Fail => self.engine.fail(ob.id, "the handler failed: \"boom\""),
            Plan::Decline => self.engine.decline(ob.id),
            Plan::Invalid => self.engine.answer(ob.id, b"{\"not\": json"),
        };
        let leaves = ANSWERS[ob.row].leaves_unhandled();
        self.notes.push(format!("obligation {} for {}: {:?} gives {result:?}", ob.id, ob.tag, ob.plan));
        if !was_open {
            if result != Err(AnswerError::Stale) {
                self.failures
                    .push(format!("{:?} of closed obligation {} ({}) gave {result:?}", ob.plan, ob.id, ob.tag));
            }
            let past_deadline = ob.deadline.is_some_and(|d| d <= now);
            let released =
                ob.session.is_some_and(|k| self.sessions.get(&k).is_some_and(|s| s.state == RecState::Released));
            if !(past_deadline || released || ob.forgotten || self.dead) {
                self.failures.push(format!(
                    "obligation {} ({}) was closed before its deadline, its session still open and the connection up",
                    ob.id, ob.tag
                ));
            }
            return;
        }
        let expected = match ob.plan {
            Plan::NoHandler | Plan::Answer | Plan::Slow | Plan::Fail => Ok(()),
            Plan::Decline if leaves => Ok(()),
            Plan::Decline => Err(AnswerError::NotDeclinable),
            Plan::Invalid => Err(AnswerError::InvalidPayload),
        };
        if result != expected {
            self.failures.push(format!(
                "{:?} of open obligation {} ({}) gave {result:?}, not {expected:?}",
                ob.plan, ob.id, ob.tag
            ));
        }
        if result.is_ok() && ob.plan == Plan::Answer && self.profile.fault == Some(super::Fault::AnswerTwice) {
            let again = self.engine.transmit().to_vec();
            self.take_output();
            self.out.extend(again);
        }
        if self.engine.is_open(ob.id) {
            self.failures.push(format!("obligation {} ({}) is still open after {:?}", ob.id, ob.tag, ob.plan));
        }
        // Left (nothing sent) or refused at once (no other client can
        // answer it): the engine's count tells.
        if self.engine.stats(now).declined > declined {
            if !(matches!(ob.plan, Plan::NoHandler | Plan::Decline) && leaves) {
                self.failures.push(format!("{:?} of {} ({}) left the wait to another client", ob.plan, ob.id, ob.tag));
            }
            self.seen.left.insert(ob.tag);
        } else {
            self.seen.taken.insert(ob.tag);
        }
    }
}
