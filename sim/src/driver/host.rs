//! The simulated threaded shell around copilot-host's `DriverState<u32>`:
//! what `host-std/src/driver/{reader,calls,fence,connection}.rs` and the
//! session's delivery do with what the state returns, as one value with
//! no thread. Bytes go through `handle_read`; a read's events are queued
//! per session, then each session given events is flushed (streams get
//! them then, callbacks through a batch for the event pool holding a fence
//! ticket), then the read's answers are told with the state's fence mark.
//! A caller's call returns once its reply is there and `poll_fence(mark)`
//! says the batches up to its mark were delivered, or at its deadline (as
//! `Call::poll` does). The event pool delivers its batches later, at steps
//! the scheduler picks (each session's in order), then gives the ticket
//! back. Handlers decline or refuse the waits they are handed, after a
//! delay.
//!
//! Every event routed to a subscriber, every delivery and every call's
//! return is recorded for the checker ([`super::check`]); what must hold at
//! the moment a call returns is checked then, and a breach kept in
//! [`DriverHost::failures`].

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use copilot_core::{Cause, EngineConfig, FrameDecoder, GrowingBuffer, ObligationId, RequestId, SessionHandle};
use copilot_host::simulation::{Completion, DriverState, Marked, Outcome, Read, ReplyTx, Routed, Waiter};
use serde_json::Value;

use super::check::{BEFORE_RETURN, LOST_TAIL};
pub use super::counts::DriverCounts;
use crate::rng::Rng;
use crate::wire::{frame, FrameReader};

/// How long a call waits for its answer, and for the events before it (ms).
pub const CALL_DEADLINE_MS: u64 = 5_000;
/// How long a handler takes at most (ms).
const HANDLER_MS: u64 = 300;

/// Where a session of the host stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Its create is in flight.
    Opening,
    /// Its create returned.
    Open,
    /// Its destroy is in flight.
    Closing,
    /// Released from the state.
    Released,
}

/// A session of the simulated client.
#[derive(Debug)]
pub struct Sess {
    /// The state's handle.
    pub handle: SessionHandle,
    /// Its id (the client chooses it).
    pub id: String,
    /// Where it stands.
    pub phase: Phase,
    /// Events routed to it and not yet flushed (their numbers).
    queue: Vec<u64>,
    /// Subscribe a callback the moment its create returns.
    churn: bool,
}

/// A subscriber of a session: a stream (given events at the flush) or a
/// callback (given them by the event pool).
#[derive(Debug)]
pub struct Sub {
    /// Its session.
    pub key: u32,
    /// A callback (else a stream).
    pub callback: bool,
    /// Events routed to its session while it was registered, in routing order.
    pub owed: Vec<u64>,
    /// Events it was given, in order.
    pub got: Vec<u64>,
    /// Not dropped yet.
    pub live: bool,
}

/// A batch handed to the event pool, and the fence ticket it holds.
#[derive(Debug)]
struct Batch {
    key: u32,
    events: Vec<u64>,
    /// The subscribers registered when it was flushed: ids below this.
    upto: u64,
    ticket: u64,
    /// When the pool delivers it at the latest (a pool thread runs soon).
    due: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CallKind {
    Create(u32),
    Destroy(u32),
    Send(u32),
}

/// A call in flight, as `Call` polls it.
struct Call {
    kind: CallKind,
    id: RequestId,
    slot: Arc<Completion<Marked>>,
    deadline: u64,
    /// The reply and its fence mark, once told.
    answered: Option<(bool, u64)>,
    /// Where its answer was on the wire (frames read so far, counted by
    /// the simulator's own reader), if it came from the wire.
    answer_pos: Option<u64>,
}

/// The simulated host around the real driver state.
pub struct DriverHost {
    rng: Rng,
    state: DriverState<u32>,
    decoder: FrameDecoder<GrowingBuffer>,
    read: Read<u32>,
    /// The simulator's own reader of the same bytes: where each frame is.
    wire: FrameReader,
    frames: u64,
    /// Event number: (wire position, session id on the wire).
    pub event_pos: HashMap<u64, (u64, String)>,
    answer_pos: HashMap<u64, u64>,
    /// Sessions by key.
    pub sessions: BTreeMap<u32, Sess>,
    next_key: u32,
    calls: Vec<Call>,
    /// Subscribers by id.
    pub subs: BTreeMap<u64, Sub>,
    next_sub: u64,
    pool: Vec<Batch>,
    pool_ms: u64,
    jobs: Vec<(u64, ObligationId)>,
    out: Vec<u8>,
    /// What broke at the moment it broke (a call returned too early):
    /// the invariant and what was seen.
    pub failures: Vec<(&'static str, String)>,
    /// Lines for the trace.
    pub notes: Vec<String>,
    /// Counters.
    pub counts: DriverCounts,
}

impl DriverHost {
    /// A host whose event pool delivers a batch at most `pool_ms` after it
    /// was handed over.
    pub fn new(rng: Rng, pool_ms: u64) -> Self {
        let config = EngineConfig::new().request_timeout(None).handler_timeout(Some(2_000)).stall_interval(None);
        DriverHost {
            rng,
            state: DriverState::new("sim", config),
            decoder: FrameDecoder::with_buffer(GrowingBuffer::new(4096)),
            read: Read::default(),
            wire: FrameReader::default(),
            frames: 0,
            event_pos: HashMap::new(),
            answer_pos: HashMap::new(),
            sessions: BTreeMap::new(),
            next_key: 0,
            calls: Vec::new(),
            subs: BTreeMap::new(),
            next_sub: 0,
            pool: Vec::new(),
            pool_ms,
            jobs: Vec::new(),
            out: Vec::new(),
            failures: Vec::new(),
            notes: Vec::new(),
            counts: DriverCounts::default(),
        }
    }

    /// What the host writes now.
    pub fn take_output(&mut self) -> Vec<u8> {
        self.transmit();
        std::mem::take(&mut self.out)
    }

    fn transmit(&mut self) {
        if let Some(bytes) = self.state.poll_transmit() {
            self.out.extend(bytes);
        }
        drop(self.state.poll_released());
    }

    /// Whether the event pool has batches to deliver.
    pub fn pool_busy(&self) -> bool {
        !self.pool.is_empty()
    }

    /// The next time after `now` at which the host has something to do.
    pub fn next_timer_after(&self, now: u64) -> Option<u64> {
        let calls = self.calls.iter().map(|c| c.deadline);
        let jobs = self.jobs.iter().map(|(at, _)| *at);
        let pool = self.pool.iter().map(|b| b.due);
        calls.chain(jobs).chain(pool).chain(self.state.poll_timeout()).filter(|t| *t > now).min()
    }

    /// Does what is due at `now`: the state's deadlines (as the timer
    /// thread), handlers that finish, batches the pool must have
    /// delivered by now, and the callers that can return.
    pub fn on_time(&mut self, now: u64) {
        if self.state.poll_timeout().is_some_and(|t| t <= now) {
            let expired = self.state.handle_timeout(now);
            for w in expired.failed {
                w.fail(copilot_host::Error::Timeout { what: String::new(), after: std::time::Duration::ZERO });
            }
            for slot in expired.woken {
                if let Some(w) = slot.lock().ok().and_then(|mut w| w.take()) {
                    w.wake();
                }
            }
        }
        let due: Vec<ObligationId> = self.jobs.iter().filter(|(at, _)| *at <= now).map(|(_, id)| *id).collect();
        self.jobs.retain(|(at, _)| *at > now);
        for id in due {
            if self.state.is_open(id) {
                let outcome = if self.rng.chance(50) { Outcome::Decline } else { Outcome::Refuse(Cause::NoHandler) };
                let _ = self.state.settle(id, outcome);
            }
        }
        while let Some(i) = self.pool.iter().position(|b| b.due <= now) {
            let key = self.pool[i].key;
            self.deliver(key);
        }
        self.poll_calls(now);
        self.transmit();
    }

    // The reader.

    /// Bytes from the CLI: one read.
    pub fn receive(&mut self, now: u64, mut bytes: &[u8]) {
        self.wire.feed(bytes);
        while let Some(Ok(body)) = self.wire.next_body() {
            self.frames += 1;
            let Ok(v) = serde_json::from_slice::<Value>(&body) else { continue };
            if v.get("method").and_then(Value::as_str) == Some("session.event") {
                let sid = v.pointer("/params/sessionId").and_then(Value::as_str).unwrap_or("").to_owned();
                if let Some(n) = v.pointer("/params/event/data/n").and_then(Value::as_u64) {
                    self.event_pos.insert(n, (self.frames, sid));
                }
            } else if v.get("method").is_none() {
                if let Some(id) = v.get("id").and_then(Value::as_u64) {
                    self.answer_pos.insert(id, self.frames);
                }
            }
        }
        while !bytes.is_empty() {
            let spare = self.decoder.spare();
            let n = spare.len().min(bytes.len());
            spare[..n].copy_from_slice(&bytes[..n]);
            self.decoder.commit(n);
            bytes = &bytes[n..];
            self.state.handle_read(&mut self.decoder, now, &mut self.read);
            self.act_on_read(now);
        }
        self.poll_calls(now);
        self.transmit();
    }

    /// As the reader's `act_on_read`: routed items in frame order, then
    /// the flush of each session given events, then the answers, told
    /// with the fence's mark.
    fn act_on_read(&mut self, now: u64) {
        let mut read = std::mem::take(&mut self.read);
        for item in read.routed.drain(..) {
            match item {
                Routed::Event { target, event, .. } => {
                    let n = serde_json::from_slice::<Value>(&read.bytes[event])
                        .ok()
                        .and_then(|v| v.pointer("/data/n").and_then(Value::as_u64));
                    let Some(n) = n else { continue };
                    for sub in self.subs.values_mut().filter(|s| s.live && s.key == target) {
                        sub.owed.push(n);
                    }
                    if let Some(s) = self.sessions.get_mut(&target) {
                        s.queue.push(n);
                    }
                }
                Routed::Wait { wait, .. } | Routed::ClientWide(wait) => self.job(now, wait.id),
                Routed::Opened { .. } | Routed::Lifecycle(_) => {}
            }
        }
        if std::mem::take(&mut read.start_in_order) {
            while let Some(wait) = self.state.next_in_order() {
                self.job(now, wait.id);
            }
        }
        for (_, target) in read.flush.drain(..) {
            self.flush(now, target);
        }
        if !read.answered.is_empty() {
            let mark = self.state.fence_mark();
            for (reply, outcome) in read.answered.drain(..) {
                if let Some(call) = self.calls.iter_mut().find(|c| Arc::ptr_eq(&c.slot, &reply.0)) {
                    call.answer_pos = self.answer_pos.get(&call.id.0).copied();
                }
                reply.send_after(outcome, mark);
            }
        }
        self.read = read;
    }

    fn job(&mut self, now: u64, id: ObligationId) {
        let at = now + self.rng.range(0, HANDLER_MS);
        self.jobs.push((at, id));
    }

    /// A session's flush: streams get its events now, callbacks through a
    /// batch for the pool holding a fence ticket.
    fn flush(&mut self, now: u64, key: u32) {
        let Some(s) = self.sessions.get_mut(&key) else { return };
        let events = std::mem::take(&mut s.queue);
        if events.is_empty() {
            return;
        }
        let mut pooled = false;
        for sub in self.subs.values_mut().filter(|s| s.live && s.key == key) {
            if sub.callback {
                pooled = true;
            } else {
                sub.got.extend(&events);
                self.counts.deliveries += events.len() as u64;
            }
        }
        if pooled {
            let ticket = self.state.fence_ticket();
            let due = now + self.rng.range(0, self.pool_ms);
            self.pool.push(Batch { key, events, upto: self.next_sub, ticket, due });
            self.counts.batches += 1;
        }
    }

    // The event pool.

    /// The pool delivers the oldest batch of a session it picks; a line.
    pub fn pool_delivers(&mut self) -> Option<String> {
        if self.pool.is_empty() {
            return None;
        }
        let key = self.pool[self.rng.index(self.pool.len())].key;
        let n = self.deliver(key);
        Some(format!("pool: delivers a batch of {n} events of session {key}"))
    }

    /// Delivers session `key`'s oldest batch to its callbacks registered
    /// when it was flushed and still live, then gives its ticket back.
    fn deliver(&mut self, key: u32) -> usize {
        let Some(i) = self.pool.iter().position(|b| b.key == key) else { return 0 };
        let batch = self.pool.remove(i);
        for (_, sub) in self.subs.range_mut(..batch.upto).filter(|(_, s)| s.live && s.callback && s.key == key) {
            sub.got.extend(&batch.events);
            self.counts.deliveries += batch.events.len() as u64;
        }
        self.state.fence_back(batch.ticket).into_iter().for_each(Waker::wake);
        batch.events.len()
    }

    // Callers.

    fn start(
        &mut self,
        now: u64,
        kind: CallKind,
        method: &str,
        params: &str,
        waiter: impl FnOnce(ReplyTx) -> Waiter<u32>,
    ) -> bool {
        let slot = Arc::new(Completion::default());
        let deadline = now + CALL_DEADLINE_MS;
        let Ok(id) = self.state.start_call(waiter(ReplyTx(Arc::clone(&slot))), deadline, now) else { return false };
        self.transmit();
        let body = format!(r#"{{"jsonrpc":"2.0","id":{},"method":"{method}","params":{params}}}"#, id.0);
        self.out.extend(frame(&body));
        self.calls.push(Call { kind, id, slot, deadline, answered: None, answer_pos: None });
        true
    }

    /// Creates a session (sometimes one of the churn pattern: a callback
    /// subscribed the moment its create returns, dropped the moment its
    /// destroy returns); a line.
    pub fn create(&mut self, now: u64) -> Option<String> {
        let key = self.next_key;
        let id = format!("d-{key}");
        let (handle, _) = self.state.reserve(Some(&id), false, key).ok()?;
        let params = format!(r#"{{"sessionId":"{id}"}}"#);
        if !self.start(now, CallKind::Create(key), "session.create", &params, |reply| Waiter::Open {
            handle,
            target: key,
            reply,
        }) {
            return None;
        }
        self.next_key += 1;
        let churn = self.rng.chance(60);
        self.sessions.insert(key, Sess { handle, id: id.clone(), phase: Phase::Opening, queue: Vec::new(), churn });
        Some(format!("host: create {id}{}", if churn { " (churn)" } else { "" }))
    }

    fn pick(&mut self, phase: Phase) -> Option<u32> {
        let keys: Vec<u32> = self.sessions.iter().filter(|(_, s)| s.phase == phase).map(|(k, _)| *k).collect();
        (!keys.is_empty()).then(|| keys[self.rng.index(keys.len())])
    }

    /// Destroys an open session: its subscribers are dropped the moment
    /// the call returns; a line.
    pub fn destroy(&mut self, now: u64) -> Option<String> {
        let key = self.pick(Phase::Open)?;
        let (handle, id) = (self.sessions[&key].handle, self.sessions[&key].id.clone());
        self.state.close_session(handle);
        let params = format!(r#"{{"sessionId":"{id}"}}"#);
        if !self.start(now, CallKind::Destroy(key), "session.destroy", &params, Waiter::Reply) {
            self.end(now, key);
            return None;
        }
        self.sessions.get_mut(&key).expect("picked").phase = Phase::Closing;
        Some(format!("host: destroy {id}"))
    }

    /// A prompt to an open session; a line.
    pub fn send(&mut self, now: u64) -> Option<String> {
        let key = self.pick(Phase::Open)?;
        let id = self.sessions[&key].id.clone();
        let params = format!(r#"{{"sessionId":"{id}","prompt":"hi"}}"#);
        self.start(now, CallKind::Send(key), "session.send", &params, Waiter::Reply)
            .then(|| format!("host: send to {id}"))
    }

    /// A subscriber added to an open session; a line.
    pub fn subscribe(&mut self) -> Option<String> {
        let key = self.pick(Phase::Open).or_else(|| self.pick(Phase::Closing))?;
        let callback = self.rng.chance(75);
        let sub = self.add_sub(key, callback);
        Some(format!("host: subscriber {sub} ({}) of session {key}", if callback { "callback" } else { "stream" }))
    }

    fn add_sub(&mut self, key: u32, callback: bool) -> u64 {
        let id = self.next_sub;
        self.next_sub += 1;
        self.subs.insert(id, Sub { key, callback, owed: Vec::new(), got: Vec::new(), live: true });
        id
    }

    /// A live subscriber dropped; a line.
    pub fn unsubscribe(&mut self) -> Option<String> {
        let live: Vec<u64> = self.subs.iter().filter(|(_, s)| s.live).map(|(k, _)| *k).collect();
        if live.is_empty() {
            return None;
        }
        let id = live[self.rng.index(live.len())];
        self.subs.get_mut(&id).expect("live").live = false;
        Some(format!("host: subscriber {id} dropped"))
    }

    /// Polls every call as its caller's `Call` future would: its reply,
    /// then the fence up to its mark (or its deadline).
    fn poll_calls(&mut self, now: u64) {
        let mut cx = Context::from_waker(Waker::noop());
        let mut i = 0;
        while i < self.calls.len() {
            let call = &mut self.calls[i];
            if call.answered.is_none() {
                match call.slot.poll_take(&mut cx) {
                    Poll::Pending => {
                        i += 1;
                        continue;
                    }
                    Poll::Ready(Some((reply, mark))) => call.answered = Some((reply.is_ok(), mark)),
                    Poll::Ready(None) => call.answered = Some((false, 0)),
                }
            }
            let (ok, mark) = call.answered.expect("set above");
            let passed = self.state.poll_fence(mark, cx.waker());
            let call = &self.calls[i];
            if !passed && now < call.deadline {
                i += 1;
                continue;
            }
            let call = self.calls.remove(i);
            self.returned(now, call, ok, passed);
        }
    }

    /// A call returned: what must hold now is checked, then the caller
    /// goes on (a destroy's caller drops the session's subscribers at once).
    fn returned(&mut self, now: u64, call: Call, ok: bool, fenced: bool) {
        self.counts.returns += 1;
        if fenced {
            self.counts.fenced_returns += 1;
            if let Some(a) = call.answer_pos {
                self.check_before(a, &call);
            }
        } else {
            self.counts.deadline_returns += 1;
        }
        match call.kind {
            CallKind::Create(key) => {
                let Some(s) = self.sessions.get_mut(&key) else { return };
                if ok {
                    s.phase = Phase::Open;
                    if s.churn {
                        let sub = self.add_sub(key, true);
                        self.notes.push(format!("create of session {key} returns: callback {sub} subscribed"));
                    }
                } else {
                    // The state released its slot.
                    s.phase = Phase::Released;
                }
            }
            CallKind::Destroy(key) => {
                self.end(now, key);
                let mut dropped = 0;
                for sub in self.subs.values_mut().filter(|s| s.live && s.key == key) {
                    sub.live = false;
                    dropped += 1;
                }
                if dropped > 0 {
                    self.counts.churned += 1;
                }
                self.notes.push(format!("destroy of session {key} returns: {dropped} subscribers dropped"));
            }
            CallKind::Send(_) => {}
        }
    }

    /// Every event before wire position `answer` reached every live
    /// subscriber it was routed to. A destroy's own session is looked at
    /// first: its subscribers are dropped now, so what they miss is lost.
    fn check_before(&mut self, answer: u64, call: &Call) {
        let destroyed = match call.kind {
            CallKind::Destroy(key) => Some(key),
            _ => None,
        };
        let mut subs: Vec<(&u64, &Sub)> = self.subs.iter().filter(|(_, s)| s.live).collect();
        subs.sort_by_key(|(_, s)| Some(s.key) != destroyed);
        for (id, sub) in subs {
            let missed = sub.owed.iter().find_map(|n| {
                let pos = self.event_pos.get(n).map_or(u64::MAX, |p| p.0);
                (pos < answer && !sub.got.contains(n)).then_some((*n, pos))
            });
            let Some((n, pos)) = missed else { continue };
            let kind = if sub.callback { "callback" } else { "stream" };
            let failure = if destroyed == Some(sub.key) {
                let detail = format!(
                    "destroy of session {} (#{}, its answer the wire's frame {answer}) returned and its {kind} {id} \
                     is dropped now, but event #{n} (frame {pos}), read before the answer, had not reached it: lost",
                    sub.key, call.id
                );
                (LOST_TAIL, detail)
            } else {
                let detail = format!(
                    "call {:?} (#{}, its answer the wire's frame {answer}) returned, but event #{n} (frame {pos}) \
                     routed to session {} while {kind} {id} was registered had not reached it",
                    call.kind, call.id, sub.key
                );
                (BEFORE_RETURN, detail)
            };
            self.failures.push(failure);
            return;
        }
    }

    /// The session is released (after its destroy returned).
    fn end(&mut self, now: u64, key: u32) {
        let Some(s) = self.sessions.get_mut(&key) else { return };
        if s.phase != Phase::Released {
            s.phase = Phase::Released;
            let handle = s.handle;
            self.flush(now, key);
            self.state.release(handle, now);
        }
    }

    /// The engine's counters, inside the state.
    pub fn engine_stats(&self, now: u64) -> copilot_core::EngineStats {
        self.state.engine().stats(now)
    }

    /// Calls in flight.
    pub fn calls_in_flight(&self) -> usize {
        self.calls.len()
    }
}
