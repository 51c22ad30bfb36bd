//! The invariants that hold once time has passed every deadline: every
//! wait this client was told of was answered by someone (or the CLI no
//! longer waits on it), every event that reached the engine came out of
//! it, every durable event of a gap was read back, nothing is left open.

use std::collections::HashMap;

use crate::cli::{Client, Phase, WaitState};
use crate::host::{Fate, GapKind, RecState};
use crate::world::World;

use super::{fail, names, tag, Checker, Counts, Known, Violation};

impl Checker {
    /// The invariants that hold once every deadline has passed; what the
    /// run counted.
    pub fn finish(&mut self, w: &World) -> Result<Counts, Violation> {
        self.step(w)?;
        let mut counts = Counts::default();
        self.waits(w, &mut counts)?;
        self.events(w, &mut counts)?;
        let host = &w.host;
        let s = host.engine().stats(w.now);
        if !host.is_dead() {
            // The recovery resumed every session still open here: none is
            // left behind in a CLI that does not know this client has it.
            let attached: HashMap<&str, (Phase, bool)> =
                w.cli.sessions().map(|(id, phase, attached)| (id, (phase, attached))).collect();
            for (key, rec) in host.sessions.iter().filter(|(_, r)| r.state == RecState::Open) {
                let id = rec.cli_id.as_deref().unwrap_or("");
                if attached.get(id) != Some(&(Phase::Active, true)) {
                    let detail = format!("key {key} has {id} open; the CLI has it {:?}", attached.get(id));
                    return fail(names::QUIET, detail);
                }
            }
            if s.open_obligations + s.left_open > 0 {
                let detail = format!("{} obligations and {} left waits open", s.open_obligations, s.left_open);
                return fail(names::QUIET, detail);
            }
            if let Some((id, (waiter, _))) = host.requests.iter().next() {
                return fail(names::QUIET, format!("request {id} ({waiter:?}) still in flight"));
            }
        }
        counts.known = self.known;
        Ok(counts)
    }

    /// Every wait this client was told of, and the CLI still holds, was
    /// answered by someone.
    fn waits(&mut self, w: &World, counts: &mut Counts) -> Result<(), Violation> {
        let (host, ledger) = (&w.host, w.cli.ledger());
        let phases: HashMap<&str, Phase> = w.cli.sessions().map(|(id, phase, _)| (id, phase)).collect();
        let open_here =
            |id: &str| host.sessions.values().any(|r| r.state != RecState::Released && r.cli_id.as_deref() == Some(id));
        for (i, wait) in ledger.waits.iter().enumerate().filter(|(_, w)| w.told_this) {
            counts.waits += 1;
            let phase = phases.get(wait.session.as_str()).copied().unwrap_or(Phase::Ended);
            match &wait.state {
                WaitState::Resolved { by: Client::This, .. } => counts.by_this += 1,
                WaitState::Resolved { .. } => counts.by_other += 1,
                WaitState::Cancelled { .. } => counts.cancelled += 1,
                WaitState::Pending if phase != Phase::Active => counts.cancelled += 1,
                // The session is no longer this client's (its open failed
                // or timed out, it was released): its other clients answer,
                // or none can. (The CLI may still count this client in,
                // when it took a resume the client had given up on.)
                WaitState::Pending if !open_here(&wait.session) => counts.orphaned += 1,
                WaitState::Pending if host.is_dead() => counts.closed += 1,
                WaitState::Pending if host.seen.left.contains(&tag(&wait.key)) => {
                    if !self.allow(Known::LeftUnanswered) {
                        let detail = format!(
                            "wait {i} ({}, {}) was left by this client; nobody answered it",
                            crate::cli::row_name(wait.row),
                            wait.key
                        );
                        return fail(names::LEFT, detail);
                    }
                }
                WaitState::Pending
                    if wait.answers.iter().any(|a| a.3 == crate::cli::Outcome::NotLoaded)
                        && wait.listed > 0
                        && self.allow(Known::RefusedAnswerRemembered) => {}
                WaitState::Pending => {
                    let detail = format!(
                        "wait {i} ({}, {} of {}, raised at {} ms, reached this client: {}, listed {} times, the other handles it: {}) is still pending",
                        crate::cli::row_name(wait.row),
                        wait.key,
                        wait.session,
                        wait.raised_at,
                        wait.reached_this,
                        wait.listed,
                        wait.other_handles
                    );
                    return fail(names::EXACTLY_ONCE, detail);
                }
            }
        }
        Ok(())
    }

    /// Every event that reached the engine came out of it; every durable
    /// event of a gap was read back.
    fn events(&mut self, w: &World, counts: &mut Counts) -> Result<(), Violation> {
        let (host, ledger) = (&w.host, w.cli.ledger());
        for (n, e) in ledger.events.iter().enumerate() {
            let n = n as u64;
            counts.events += u64::from(e.sent_on.is_some());
            let fate = host.seen.fates.get(&n);
            if e.arrived == Some(true) {
                if fate.is_none() {
                    let parked = host.seen.parked.get(&n).map_or(String::new(), |t| format!(", parked at {t} ms"));
                    let detail = format!(
                        "event #{n} ({} of {}, at {} ms{parked}) reached the engine and never came out",
                        e.event_type, e.session, e.at
                    );
                    return fail(names::COMPLETE, detail);
                }
                continue;
            }
            if e.sent_on.is_some() && !e.durable {
                counts.lost_ephemeral += u64::from(e.arrived == Some(false));
                continue;
            }
            if !e.durable {
                continue;
            }
            // A durable event this client did not get live: due from the
            // log if its session was open here across a loss, and resumed
            // after the event.
            let rec = host.sessions.values().find(|r| {
                r.cli_id.as_deref() == Some(e.session.as_str())
                    && r.opened_at <= e.at
                    && r.released_at.is_none_or(|t| e.at < t)
            });
            let Some(rec) = rec else { continue };
            // Emitted before the CLI had this client on the session at all
            // (its join in flight): history it never had, not a gap.
            if !ledger.attached.iter().any(|(s, first)| *s == e.session && *first <= n) {
                continue;
            }
            // Sent and cut off by a drop: due from the first delivery of a
            // gap after that drop. Not sent (emitted while the session was
            // not attached here, after a drop): due from the first after it.
            let cut_at = if e.sent_on.is_some() {
                w.drop_times.iter().copied().find(|d| *d >= e.at)
            } else {
                let last_gap = rec.gaps.iter().rev().find(|(t, _, _)| *t <= e.at).map_or(rec.opened_at, |g| g.0);
                w.drop_times.iter().any(|d| *d > last_gap && *d <= e.at).then_some(e.at)
            };
            let Some(cut_at) = cut_at else { continue };
            let Some(&(at, from, gap)) = rec.gaps.iter().find(|(t, _, _)| *t > cut_at) else { continue };
            if matches!(fate, Some(Fate::Delivered(_))) {
                counts.gap_delivered += 1;
                continue;
            }
            if gap == GapKind::Unmarked && self.allow(Known::UnmarkedGap) {
                continue;
            }
            if gap == GapKind::Cut && self.allow(Known::CutGap) {
                continue;
            }
            if rec.abandoned.iter().any(|t| *t >= e.at && *t < at) && self.allow(Known::FailedAttemptGap) {
                continue;
            }
            let detail = format!(
                "durable event #{n} ({} of {}, at {} ms, sent: {:?}) missed; the recovery at {at} ms delivered from {from:?} ({gap:?} gap), abandoned resumes at {:?}",
                e.event_type, e.session, e.at, e.sent_on, rec.abandoned
            );
            return fail(names::GAP, detail);
        }
        Ok(())
    }
}
