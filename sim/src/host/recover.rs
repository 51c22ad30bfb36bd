//! The recovery of a lost connection, step by step as
//! [`copilot_core::Recovery`] decides: wait, connect again (the world
//! starts the CLI again), resume each open session with
//! `continuePendingWork` while holding its live events, read its log back,
//! deliver the gap and then what was held (each event once, by id), and
//! let the engine's held frames go once every session is back.

use copilot_core::{
    event_id_of, gap_delivery_order, Gap, GapEvent, Recovery, RecoveryReport, RecoveryStep, Value, EVENT_LOG_PAGE,
    EVENT_LOG_READ, RECOVERY_RESUME_FLAG,
};

use super::{Fate, GapKind, Host, RecState, Waiter};

type Report = RecoveryReport<Vec<Option<u64>>>;

/// A log read back: `(event number, id hash)` of each event, oldest first.
type LogRead = [(Option<u64>, Option<u64>)];

/// A recovery in progress.
#[derive(Debug)]
pub(super) struct Recovering {
    recovery: Recovery,
    /// The recovery waits until then.
    pub(super) until: Option<u64>,
    /// The recovery asks for a new connection.
    wants_connect: bool,
    /// The session being resumed.
    key: Option<u32>,
    /// Its log read so far, oldest first: `(event number, id hash)`.
    log: Vec<(Option<u64>, Option<u64>)>,
    cursor: Option<String>,
}

impl Recovering {
    pub(super) fn new(now: u64) -> Self {
        Recovering {
            recovery: Recovery::new(now),
            until: None,
            wants_connect: false,
            key: None,
            log: Vec::new(),
            cursor: None,
        }
    }
}

impl Host {
    /// Whether the recovery asks for a new connection; asking clears it.
    pub fn take_connect_request(&mut self) -> bool {
        self.recovering.as_mut().is_some_and(|r| std::mem::take(&mut r.wants_connect))
    }

    /// The world could not connect: the attempt fails.
    pub fn connect_failed(&mut self, now: u64) {
        let mut failed = Vec::new();
        self.seen.losses.push(now);
        self.engine.connection_lost(|id, w| failed.push((id, w)));
        self.notes.push(format!("no connection could be made ({} requests failed)", failed.len()));
        for (id, _) in failed {
            self.requests.remove(&id.0);
        }
        self.recovery_next(now, Report::Failed);
    }

    /// A step of the attempt failed on the connection: the world cuts it,
    /// and the attempt is reported failed when it has.
    /// The session being resumed keeps what it held: the next attempt
    /// delivers it after the gap the core has read back again from where
    /// it started (as copilot-host does).
    pub(super) fn attempt_failed(&mut self, now: u64) {
        self.abandon_resume(now);
        self.disconnect = true;
    }

    /// The resume under way, if any, is abandoned: noted; its session keeps
    /// holding its live events.
    pub(super) fn abandon_resume(&mut self, now: u64) {
        if let Some(key) = self.recovering.as_mut().and_then(|r| r.key.take()) {
            if let Some(rec) = self.sessions.get_mut(&key) {
                rec.abandoned.push(now);
            }
        }
    }

    /// Delivers what the session being resumed held, merged with the
    /// log's gap if `log` gives it (`(events read, first to deliver)`) in
    /// wire order, each event once ([`gap_delivery_order`]). Without the
    /// log, the resume was abandoned (its attempt failed, or the CLI
    /// refused it): noted, and the held events go as they are.
    pub(super) fn release_held(&mut self, now: u64, log: Option<(&LogRead, Option<usize>)>) {
        let Some(key) = self.recovering.as_mut().and_then(|r| r.key.take()) else { return };
        let Some(rec) = self.sessions.get_mut(&key) else { return };
        if log.is_none() {
            rec.abandoned.push(now);
        }
        let held = rec.held.take().unwrap_or_default();
        // The gap (the log from `from` on) and the held events, merged in
        // wire order, each once: the core's rule, as copilot-host does it.
        let gap: &LogRead = match log {
            Some((events, Some(from))) => events.get(from..).unwrap_or_default(),
            _ => &[],
        };
        let gap_ids: Vec<Option<u64>> = gap.iter().map(|(_, h)| *h).collect();
        let held_ids: Vec<Option<u64>> = held.iter().map(|(_, h)| *h).collect();
        let mut out = Vec::new();
        let mut from_gap = 0;
        for source in gap_delivery_order(&gap_ids, &held_ids) {
            match source {
                GapEvent::Log(i) => {
                    out.push(gap[i].0);
                    from_gap += 1;
                }
                GapEvent::Held(i) => out.push(Some(held[i].0)),
            }
        }
        let numbers =
            |o: &[Option<u64>]| o.iter().map(|n| n.map_or("?".into(), |n| format!("#{n}"))).collect::<Vec<_>>();
        let held_numbers: Vec<String> = held.iter().map(|(n, _)| format!("#{n}")).collect();
        self.notes.push(format!(
            "key {key}: delivers {:?} ({from_gap} of the log), of the held {held_numbers:?}",
            numbers(&out)
        ));
        let start = self.sessions[&key].delivered.len();
        let batch = (start, start + out.iter().flatten().count());
        self.sessions.get_mut(&key).expect("present").batches.push(batch);
        for n in out {
            let Some(n) = n else {
                self.failures.push(format!("an event of key {key}'s log without its number"));
                continue;
            };
            self.sessions.get_mut(&key).expect("present").delivered.push(n);
            // An event the engine could not deliver when it came (parking
            // full, no session open under its id) that the log brings back
            // is delivered once, not twice.
            if let Some(before @ Fate::Delivered(_)) = self.seen.fates.insert(n, Fate::Delivered(key)) {
                self.failures.push(format!("event #{n} delivered twice across the recovery (before: {before:?})"));
            }
        }
    }

    /// Takes the recovery on with `report`, doing each step it gives
    /// until one needs the world (a time, a connection, an answer).
    pub(super) fn recovery_next(&mut self, now: u64, mut report: Report) {
        loop {
            let Some(r) = self.recovering.as_mut() else { return };
            r.until = None;
            let step = r.recovery.step(&mut self.engine, now, report);
            self.notes.push(format!("recovery: {step:?}"));
            report = match step {
                RecoveryStep::Wait { until } if until <= now => Report::Next,
                RecoveryStep::Wait { until } => {
                    r.until = Some(until);
                    return;
                }
                RecoveryStep::Connect { .. } => {
                    r.wants_connect = true;
                    return;
                }
                RecoveryStep::Resume { handle } => {
                    let found = self.sessions.iter().find(|(_, s)| s.handle == handle && s.state == RecState::Open);
                    let Some((&key, rec)) = found else {
                        self.failures.push(format!("the recovery resumes {handle:?}, which the host has not open"));
                        report = Report::Skipped;
                        continue;
                    };
                    let id = rec.cli_id.clone().unwrap_or_default();
                    let r = self.recovering.as_mut().expect("recovering");
                    (r.key, r.cursor) = (Some(key), None);
                    r.log.clear();
                    // Held from an attempt that failed, if one did.
                    self.sessions.get_mut(&key).expect("found").held.get_or_insert_with(Vec::new);
                    let flags = self.open_flags();
                    let params = format!(r#"{{"sessionId":"{id}","{RECOVERY_RESUME_FLAG}":true,{flags}}}"#);
                    if self.call(now, Waiter::Resume { key }, "session.resume", &params) {
                        return;
                    }
                    self.attempt_failed(now);
                    return;
                }
                RecoveryStep::ReadLog { page, .. } => {
                    let Some(key) = r.key else { return };
                    let cursor = match (&r.cursor, page) {
                        (Some(c), p) if p > 0 => format!(r#","cursor":"{c}""#),
                        _ => String::new(),
                    };
                    let id = self.sessions[&key].cli_id.clone().unwrap_or_default();
                    let params = format!(
                        r#"{{"sessionId":"{id}","direction":"backward","max":{EVENT_LOG_PAGE},"includeEphemeral":false{cursor}}}"#
                    );
                    if !self.call(now, Waiter::ReadLog { key }, EVENT_LOG_READ, &params) {
                        self.attempt_failed(now);
                    }
                    return;
                }
                RecoveryStep::Deliver { from, gap, .. } => {
                    let log = std::mem::take(&mut r.log);
                    let gap = match gap {
                        Gap::Whole => GapKind::Whole,
                        Gap::Unmarked => GapKind::Unmarked,
                        _ => GapKind::Cut,
                    };
                    if let Some(key) = r.key {
                        self.sessions.get_mut(&key).expect("resumed").gaps.push((now, from, gap));
                    }
                    self.release_held(now, Some((&log, from)));
                    Report::Next
                }
                RecoveryStep::End { handle } => {
                    self.release_held(now, None);
                    let key = self.sessions.iter().find(|(_, s)| s.handle == handle).map(|(k, _)| *k);
                    if let Some(key) = key {
                        self.release(now, key);
                    }
                    Report::Next
                }
                RecoveryStep::Recovered { .. } => {
                    self.recovering = None;
                    self.seen.recovered += 1;
                    return;
                }
                RecoveryStep::GaveUp { .. } => {
                    self.recovering = None;
                    self.seen.gave_up += 1;
                    self.give_up(now);
                    return;
                }
            };
        }
    }

    /// Every attempt failed: the client is closed.
    fn give_up(&mut self, now: u64) {
        self.dead = true;
        let mut failed = Vec::new();
        self.engine.disconnect(|id, w| failed.push((id, w)));
        for (id, _) in failed {
            self.requests.remove(&id.0);
        }
        let keys: Vec<u32> = self.sessions.keys().copied().collect();
        for key in keys {
            self.release(now, key);
        }
    }

    /// The answer to a resume of the recovery.
    pub(super) fn resumed(&mut self, now: u64, _key: u32, result: Result<Vec<u8>, String>) {
        let report = match result {
            Ok(_) => Report::Resumed,
            Err(_) => Report::Refused,
        };
        self.recovery_next(now, report);
    }

    /// A page of the log read back: its events go before those read so far.
    pub(super) fn log_read(&mut self, now: u64, _key: u32, result: Result<Vec<u8>, String>) {
        let Ok(body) = result else {
            self.attempt_failed(now);
            return;
        };
        let Some(r) = self.recovering.as_mut() else { return };
        let value = Value::parse(&body).expect("the engine passed on a JSON result");
        let mut page = Vec::new();
        if let Some(events) = value.get("events") {
            for e in events.elements() {
                let n = e.get("data").and_then(|d| d.get("n")).and_then(|n| n.as_number()).and_then(|n| n.as_u64());
                page.push((n, event_id_of(e.as_bytes())));
            }
        }
        let more = value.get("hasMore").and_then(|m| m.as_bool()).unwrap_or(false) && !page.is_empty();
        r.cursor = value.get("cursor").and_then(|c| c.as_str()).map(|c| c.raw().to_owned());
        page.append(&mut r.log);
        r.log = page;
        let ids = r.log.iter().map(|(_, h)| *h).collect();
        self.recovery_next(now, Report::LogRead { ids, more });
    }
}
