//! The invariants, checked after every step of a run ([`Checker::step`])
//! and once more at its end, when time has passed every deadline
//! ([`Checker::finish`]). Each reads what the CLI recorded (its
//! [`Ledger`](crate::cli::Ledger)), what the host saw, and the engine's
//! public state; none reaches into the engine. The known issues of
//! today's engine ([`Known`]) are allowed and counted unless made strict
//! ([`Expect`]).

mod end;
mod expect;

use std::collections::{HashMap, HashSet};
use std::fmt;

pub use expect::{Expect, Known};

use crate::cli::WaitKey;
use crate::host::{OBLIGATIONS, PARK_BYTES, PENDING, SESSIONS};
use crate::world::World;

/// An invariant that does not hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// Which invariant.
    pub invariant: &'static str,
    /// What was seen.
    pub detail: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.invariant, self.detail)
    }
}

fn fail<T>(invariant: &'static str, detail: String) -> Result<T, Violation> {
    Err(Violation { invariant, detail })
}

/// The invariant names.
pub mod names {
    /// The host's handlers and delivery found the engine off its contract.
    pub const CONTRACT: &str = "the engine keeps its documented contract";
    /// The CLI received what the protocol does not allow.
    pub const WIRE: &str = "what the engine sends is valid protocol";
    /// A wait answered twice by this client.
    pub const AT_MOST_ONCE: &str = "each wait is answered at most once by this client";
    /// An answer reached another wait than the handler's.
    pub const RIGHT_WAIT: &str = "an answer reaches the wait its handler answered";
    /// A wait nobody answered.
    pub const EXACTLY_ONCE: &str = "each wait is answered exactly once across the session's clients";
    /// A wait left to another client that nobody answered (strict mode).
    pub const LEFT: &str = "a wait left to another client is answered by someone";
    /// A request past its deadline, or a deadline the engine does not report.
    pub const LIVENESS: &str = "every request and obligation ends by its deadline";
    /// A table past its capacity.
    pub const BOUNDS: &str = "the engine's tables stay within their capacities";
    /// An event delivered to another session, twice, or out of order.
    pub const ROUTING: &str = "events reach their own session once, in wire order";
    /// An event lost.
    pub const COMPLETE: &str = "every event that reached the engine reaches the host";
    /// A durable event of a gap not read back.
    pub const GAP: &str = "durable events missed during a lost connection are read back";
    /// Something left open after every deadline passed.
    pub const QUIET: &str = "nothing is left open once every deadline has passed";
}

/// What a run counted: the waits and events, and the cases the checker
/// allows.
#[derive(Debug, Clone, Copy, Default)]
pub struct Counts {
    /// Waits told to this client.
    pub waits: u64,
    /// Of those, answered first by this client.
    pub by_this: u64,
    /// Of those, answered first by the other client.
    pub by_other: u64,
    /// Of those, cancelled by the CLI (session ended, process died).
    pub cancelled: u64,
    /// Of those, pending when the client gave up its connection.
    pub closed: u64,
    /// Of those, pending in a session this client no longer has (its
    /// open failed, or it was released): for its other clients.
    pub orphaned: u64,
    /// Events the CLI sent to this client.
    pub events: u64,
    /// Ephemeral events cut off by a drop.
    pub lost_ephemeral: u64,
    /// Durable events of a gap read back and delivered.
    pub gap_delivered: u64,
    /// Each known issue seen and let pass, by [`Known::ALL`]'s order.
    pub known: [u64; Known::ALL.len()],
}

impl Counts {
    /// Adds `other`'s counts to these.
    pub fn add(&mut self, other: &Counts) {
        self.waits += other.waits;
        self.by_this += other.by_this;
        self.by_other += other.by_other;
        self.cancelled += other.cancelled;
        self.closed += other.closed;
        self.orphaned += other.orphaned;
        self.events += other.events;
        self.lost_ephemeral += other.lost_ephemeral;
        self.gap_delivered += other.gap_delivered;
        for (a, b) in self.known.iter_mut().zip(other.known) {
            *a += b;
        }
    }
}

impl fmt::Display for Counts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "waits {} (answered by this client {}, by the other {}, cancelled {}, closed {}, orphaned {}); events {} (ephemeral cut off {}, read back from a gap {}); known issues let pass:",
            self.waits,
            self.by_this,
            self.by_other,
            self.cancelled,
            self.closed,
            self.orphaned,
            self.events,
            self.lost_ephemeral,
            self.gap_delivered
        )?;
        for k in Known::ALL {
            write!(f, " {} {}", k.name(), self.known[k.index()])?;
        }
        Ok(())
    }
}

/// Checks the invariants of one run.
#[derive(Debug, Default)]
pub struct Checker {
    expect: Expect,
    /// Per session record: how many of its deliveries were checked, and
    /// the highest event number delivered so far.
    checked: HashMap<u32, (usize, Option<u64>)>,
    /// Waits answered twice, let pass as a known issue.
    doubled: HashSet<usize>,
    /// Per wait, how many of its answers were checked for their tag.
    tags_checked: HashMap<usize, usize>,
    /// Stray responses checked.
    strays: usize,
    known: [u64; Known::ALL.len()],
}

impl Checker {
    /// A checker expecting `expect`.
    pub fn new(expect: Expect) -> Self {
        Checker { expect, ..Checker::default() }
    }

    /// Lets a known issue pass (counted), unless it is strict.
    fn allow(&mut self, issue: Known) -> bool {
        if self.expect.is_strict(issue) {
            return false;
        }
        self.known[issue.index()] += 1;
        true
    }

    /// Whether this client's engine had a server request with JSON-RPC id
    /// `id` on a connection before `conn` (its response may go out late).
    fn answered_earlier(&self, w: &World, conn: u32, id: u64) -> bool {
        let seen = &w.host.seen;
        (1..conn).any(|c| {
            let tag = format!("req:{c}/{id}");
            seen.handed.contains(&tag) || seen.refused_at_once.contains(&tag)
        })
    }

    /// The invariants that hold after every step.
    pub fn step(&mut self, w: &World) -> Result<(), Violation> {
        let (host, ledger) = (&w.host, w.cli.ledger());
        if let Some(f) = host.failures.first() {
            return fail(names::CONTRACT, f.clone());
        }
        if let Some((at, v)) = ledger.violations.first() {
            return fail(names::WIRE, format!("at {at} ms: {v}"));
        }
        for &(at, conn, id) in &ledger.stray_responses[self.strays..] {
            if !(self.answered_earlier(w, conn, id) && self.allow(Known::StaleResponse)) {
                let detail = format!("at {at} ms: a response to request {id}, never sent on connection {conn}");
                return fail(names::WIRE, detail);
            }
        }
        self.strays = ledger.stray_responses.len();
        for (i, wait) in ledger.waits.iter().enumerate() {
            let tag = tag(&wait.key);
            if wait.answers_from_this > 1 && !self.doubled.contains(&i) {
                let twice = wait.listed > 0;
                let relisted = twice && host.seen.refused_at_once.contains(&tag);
                let first = wait.answers.first().map_or(0, |a| a.0);
                let forgotten = twice && host.seen.losses.iter().any(|t| *t > wait.raised_at && *t < first);
                let stale = match &wait.key {
                    WaitKey::Request { conn, id } => self.answered_earlier(w, *conn, *id),
                    WaitKey::Event { .. } => false,
                };
                let beyond = twice && host.seen.beyond_memory.contains(&tag);
                let known = (beyond && self.allow(Known::BeyondMemory))
                    || (relisted && self.allow(Known::RefusedThenListed))
                    || (forgotten && self.allow(Known::ForgottenQueuedAnswer))
                    || (stale && self.allow(Known::StaleResponse));
                if !known {
                    let detail = format!(
                        "wait {i} ({}, {} of {}, raised at {} ms, listed {} times, refused at once: {}) got {} answers from this client: {:?}",
                        crate::cli::row_name(wait.row),
                        wait.key,
                        wait.session,
                        wait.raised_at,
                        wait.listed,
                        host.seen.refused_at_once.contains(&tag),
                        wait.answers_from_this,
                        wait.answers
                    );
                    return fail(names::AT_MOST_ONCE, detail);
                }
                self.doubled.insert(i);
            }
            for (_, _, answer, _) in wait.answers.iter().skip(self.tags_checked.get(&i).copied().unwrap_or(0)) {
                if let Some(tagged) = answer_tag(answer) {
                    let stale = match &wait.key {
                        WaitKey::Request { conn, id } => {
                            tagged.ends_with(&format!("/{id}")) && self.answered_earlier(w, *conn, *id)
                        }
                        WaitKey::Event { .. } => false,
                    };
                    if tagged != tag && !(stale && self.allow(Known::StaleResponse)) {
                        let detail = format!("wait {i} ({tag}) got the answer given for {tagged}");
                        return fail(names::RIGHT_WAIT, detail);
                    }
                }
            }
            self.tags_checked.insert(i, wait.answers.len());
        }
        self.bounds(w)?;
        self.liveness(w)?;
        self.deliveries(w)
    }

    /// Each session's deliveries: its own events, each once, in wire order.
    fn deliveries(&mut self, w: &World) -> Result<(), Violation> {
        let (host, ledger) = (&w.host, w.cli.ledger());
        for (key, rec) in &host.sessions {
            let (from, mut high) = self.checked.get(key).copied().unwrap_or((0, None));
            for i in from..rec.delivered.len() {
                let n = rec.delivered[i];
                let event = &ledger.events[n as usize];
                if rec.cli_id.as_deref() != Some(event.session.as_str()) {
                    let detail = format!("event #{n} of {} delivered to key {key} ({:?})", event.session, rec.cli_id);
                    return fail(names::ROUTING, detail);
                }
                // Within a recovery's delivery, an event out of order is a
                // known issue while it still comes after every event
                // delivered before that delivery.
                let batch = rec.batches.iter().find(|(a, b)| *a <= i && i < *b);
                let before_batch = batch.and_then(|&(a, _)| rec.delivered[..a].iter().copied().max());
                if high.is_some_and(|h| h >= n) {
                    let in_batch = batch.is_some() && before_batch.is_none_or(|b| b < n);
                    if !(in_batch && self.allow(Known::RecoveryOrder)) {
                        let detail = format!(
                            "session {}: event #{n} ({}) delivered after #{}; delivered {:?}{}",
                            event.session,
                            event.event_type,
                            high.unwrap_or(0),
                            &rec.delivered[i.saturating_sub(5)..=i],
                            if batch.is_some() { " (in a recovery's delivery)" } else { "" }
                        );
                        return fail(names::ROUTING, detail);
                    }
                }
                high = Some(high.map_or(n, |h| h.max(n)));
            }
            self.checked.insert(*key, (rec.delivered.len(), high));
        }
        Ok(())
    }

    fn bounds(&self, w: &World) -> Result<(), Violation> {
        let engine = w.host.engine();
        let s = engine.stats(w.now);
        let park_frames = engine.config().park_frames;
        let checks = [
            ("open and left obligations", s.open_obligations + s.left_open, OBLIGATIONS),
            ("parked frames", s.parked_frames, park_frames),
            ("parked bytes", s.parked_bytes, PARK_BYTES),
            ("requests in flight", engine.router().pending().len(), PENDING),
            ("sessions", engine.router().sessions().len(), SESSIONS),
        ];
        for (what, n, bound) in checks {
            if n > bound {
                return fail(names::BOUNDS, format!("{n} {what}, more than {bound}"));
            }
        }
        Ok(())
    }

    fn liveness(&self, w: &World) -> Result<(), Violation> {
        let (now, host) = (w.now, &w.host);
        let engine = host.engine();
        let next = engine.poll_timeout().unwrap_or(u64::MAX);
        if next <= now {
            let detail = format!(
                "at {now} ms, the engine still has work due at {next} ms (handle_timeout was not called, or left it)"
            );
            return fail(names::LIVENESS, detail);
        }
        for (id, (waiter, deadline)) in &host.requests {
            let Some(deadline) = *deadline else { continue };
            if deadline <= now {
                let detail = format!("request {id} ({waiter:?}) still waits at {now} ms, its deadline {deadline}");
                return fail(names::LIVENESS, detail);
            }
            if next > deadline {
                return fail(
                    names::LIVENESS,
                    format!("poll_timeout is {next}, after request {id}'s deadline {deadline}"),
                );
            }
        }
        for ob in host.obligations.iter().filter(|o| !o.settled && engine.is_open(o.id)) {
            let Some(deadline) = ob.deadline else { continue };
            if deadline <= now {
                let detail = format!("obligation {} ({}) open at {now} ms, its deadline {deadline}", ob.id, ob.tag);
                return fail(names::LIVENESS, detail);
            }
            if next > deadline {
                let detail = format!("poll_timeout is {next}, after obligation {}'s deadline {deadline}", ob.id);
                return fail(names::LIVENESS, detail);
            }
        }
        Ok(())
    }
}

/// A wait's tag, as the host's answers carry it.
pub fn tag(key: &WaitKey) -> String {
    match key {
        WaitKey::Event { request_id } => format!("rid:{request_id}"),
        WaitKey::Request { conn, id } => format!("req:{conn}/{id}"),
    }
}

/// The tag an answer carries (`"simAnswer":"<tag>"`), if any.
fn answer_tag(answer: &str) -> Option<&str> {
    let start = answer.find(r#""simAnswer":""#)? + r#""simAnswer":""#.len();
    let end = answer[start..].find('"')?;
    Some(&answer[start..start + end])
}
