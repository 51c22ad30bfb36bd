//! The simulated Copilot CLI (1.0.102, as `shared/protocol/` describes it
//! from the wire): it speaks bytes (frames in from the client, frames out
//! to it), never the engine's types, so the same CLI can later drive any
//! client that speaks the protocol.
//!
//! It answers the session RPCs (`session.create`, `resume`, `destroy`,
//! `send`), the pending lists and the event log; it emits `session.event`s
//! (durable ones with an `id` kept in the session's log, ephemeral ones
//! marked so) and `session.lifecycle` notices (`session.created` before
//! the create's answer); it raises waits of every row of the answer table
//! and takes the first answer of each (`{success:true}`), refusing later
//! ones (`{success:false}`), and reports each answered broadcast wait with
//! its `*.completed` event before the answering RPC's reply. A session
//! can be shared with another client ([`session::Other`]), which answers
//! the broadcast waits it has a handler for after a delay. The process can
//! die ([`Cli::kill`]) and start again ([`Cli::connect`]): sessions are
//! then persisted (durable events, the pending tool calls and permission
//! prompts) and resumed on demand.
//!
//! What the CLI did is recorded in its [`Ledger`] for the checker.

mod ledger;
mod requests;
mod session;
mod waits;

pub use ledger::{Client, EventRecord, Ledger, Outcome, WaitKey, WaitRecord, WaitState};
pub use session::Phase;

use copilot_core::{Trigger, ANSWERS};
use serde_json::Value;

use crate::rng::Rng;
use crate::wire::{frame, FrameReader};
use session::{Other, Session};

/// A frame mark for a server request's frame: the wait's index with the
/// top bit set (event frames are marked by their event number).
pub const REQUEST_MARK: u64 = 1 << 63;

/// The requests the CLI may take long to answer (it loads, writes or
/// waits): their answers may come after those of later requests.
const SLOW_METHODS: &[&str] =
    &["session.create", "session.resume", "session.destroy", "session.send", copilot_core::EVENT_LOG_READ];

/// How this run's CLI behaves (drawn per seed: each run stresses
/// different things).
#[derive(Debug, Clone)]
pub struct CliProfile {
    /// Most ms it takes to process a message.
    pub fast_ms: u64,
    /// Chance (%) that a session request is slow, taking `slow_ms`.
    pub slow_percent: u64,
    /// How long a slow request takes (ms, a range).
    pub slow_ms: (u64, u64),
    /// Chance (%) that a create is rejected.
    pub reject_percent: u64,
    /// Chance (%) that events (and maybe a wait) precede a create's answer.
    pub early_percent: u64,
    /// Chance (%) that a wait's data lacks a member its handler reads.
    pub unreadable_percent: u64,
    /// Chance (%) that the other client shares a session this client creates.
    pub share_percent: u64,
    /// How long the other client takes to answer (ms, a range).
    pub other_ms: (u64, u64),
    /// Chance (%) that a session's state is lost when the process dies.
    pub loss_percent: u64,
    /// Sessions of the other client this client may join.
    pub foreign: usize,
    /// Most events a page of the log read back holds (fewer than asked,
    /// as the real CLI's windows can).
    pub page_cap: usize,
    /// Quick messages may be done out of the order they came in (the real
    /// CLI does them in order; off unless a run asks for it).
    pub reorders: bool,
}

/// A message processed later, or an act of the other client.
#[derive(Debug)]
enum Timer {
    /// A message from this client, processed after a delay.
    Process(Value),
    /// The other client answers this wait.
    OtherAnswers(usize),
    /// The other client attaches again to this session after a restart.
    OtherReattaches(usize),
}

/// The simulated CLI.
#[derive(Debug)]
pub struct Cli {
    rng: Rng,
    profile: CliProfile,
    ledger: Ledger,
    sessions: Vec<Session>,
    /// This client's connection, when the process runs and is connected.
    conn: Option<u32>,
    conns: u32,
    reader: FrameReader,
    out: Vec<u8>,
    marks: Vec<(usize, u64)>,
    timers: Vec<(u64, u64, Timer)>,
    timer_seq: u64,
    next_request_id: u64,
    quiet: bool,
    /// When the last message taken in order is done.
    in_order: u64,
}

impl Cli {
    /// A CLI that has not started yet, with `profile`'s behaviour and the
    /// other client's sessions already running.
    pub fn new(mut rng: Rng, profile: CliProfile) -> Self {
        let mut cli = Cli {
            rng: rng.split(),
            profile,
            ledger: Ledger::default(),
            sessions: Vec::new(),
            conn: None,
            conns: 0,
            reader: FrameReader::default(),
            out: Vec::new(),
            marks: Vec::new(),
            timers: Vec::new(),
            timer_seq: 0,
            next_request_id: 1,
            quiet: false,
            in_order: 0,
        };
        for k in 0..cli.profile.foreign {
            let s = cli.add_session(format!("f-{k}"));
            cli.share(s, true);
            cli.sessions[s].turn = true;
            // Waits pending from before this client joins: it learns of the
            // listed kinds only through the lists.
            for _ in 0..rng.range(1, 3) {
                let row = cli.random_event_row();
                cli.raise(0, s, row);
            }
        }
        cli
    }

    /// What the CLI recorded.
    pub fn ledger(&self) -> &Ledger {
        &self.ledger
    }

    /// The sessions, for the world's choices (ids, phases, attachment).
    pub fn sessions(&self) -> impl Iterator<Item = (&str, Phase, bool)> {
        self.sessions.iter().map(|s| (s.id.as_str(), s.phase, s.this_attached))
    }

    /// This client's connection, if up.
    pub fn connection(&self) -> Option<u32> {
        self.conn
    }

    /// From now on the CLI does nothing on its own (the run drains).
    pub fn quiet(&mut self) {
        self.quiet = true;
    }

    /// The process starts (again) and this client connects: connection
    /// number returned. Sessions stay as the last process left them.
    pub fn connect(&mut self) -> u32 {
        self.conns += 1;
        self.conn = Some(self.conns);
        self.reader = FrameReader::default();
        self.next_request_id = 1;
        self.conns
    }

    /// The process dies with its connection: the messages it had not
    /// processed, its server requests and the waits no list names die
    /// with it; sessions are persisted (some lose their state); the other
    /// client attaches again later.
    pub fn kill(&mut self, now: u64) {
        self.conn = None;
        self.reader = FrameReader::default();
        self.out.clear();
        self.marks.clear();
        self.timers.retain(|(_, _, t)| !matches!(t, Timer::Process(_)));
        for s in 0..self.sessions.len() {
            let lost = self.sessions[s].phase == Phase::Active && self.rng.chance(self.profile.loss_percent);
            self.sessions[s].unload();
            if lost {
                self.end(s, "the session's state was lost with the process");
            }
        }
        for w in &mut self.ledger.waits {
            let keeps = matches!(w.key, WaitKey::Event { .. }) && waits::survives_restart(w.row);
            if w.state == WaitState::Pending && !keeps {
                w.state = WaitState::Cancelled { why: "the process that held it died" };
            }
        }
        for s in 0..self.sessions.len() {
            if self.sessions[s].other.is_some() && self.sessions[s].phase == Phase::Dormant {
                let due = now + self.rng.range(self.profile.other_ms.0, self.profile.other_ms.1);
                self.schedule(due, Timer::OtherReattaches(s));
            }
        }
    }

    /// Bytes from this client.
    pub fn receive(&mut self, now: u64, bytes: &[u8]) {
        if self.conn.is_none() {
            return;
        }
        self.reader.feed(bytes);
        while let Some(body) = self.reader.next_body() {
            let parsed = body.map_err(|e| format!("unreadable framing: {e}")).and_then(|b| {
                serde_json::from_slice::<Value>(&b).map_err(|e| format!("a body that is not JSON ({e})"))
            });
            match parsed {
                Ok(msg) => {
                    // Messages are taken in order; a session RPC may then
                    // take long (its answer overtaken by later ones), the
                    // rest are done in order.
                    let method = msg.get("method").and_then(Value::as_str).unwrap_or("");
                    let may_be_slow = SLOW_METHODS.contains(&method);
                    let due = if may_be_slow && self.rng.chance(self.profile.slow_percent) {
                        now + self.rng.range(self.profile.slow_ms.0, self.profile.slow_ms.1)
                    } else if self.profile.reorders {
                        now + self.rng.range(0, self.profile.fast_ms)
                    } else {
                        self.in_order = self.in_order.max(now + self.rng.range(0, self.profile.fast_ms));
                        self.in_order
                    };
                    self.schedule(due, Timer::Process(msg));
                }
                Err(e) => self.ledger.violation(now, e),
            }
        }
    }

    /// What the CLI wrote to this client since the last call, and the
    /// marks of its frames (`(end offset, mark)`).
    pub fn take_output(&mut self) -> (Vec<u8>, Vec<(usize, u64)>) {
        (std::mem::take(&mut self.out), std::mem::take(&mut self.marks))
    }

    /// The frames with these marks got through to this client whole
    /// (`true`) or were cut off by a drop (`false`).
    pub fn frames_done(&mut self, marks: &[u64], arrived: bool) {
        for &m in marks {
            if m & REQUEST_MARK != 0 {
                if let Some(w) = self.ledger.waits.get_mut((m & !REQUEST_MARK) as usize) {
                    w.reached_this = arrived;
                }
            } else if let Some(e) = self.ledger.events.get_mut(m as usize) {
                e.arrived = Some(arrived);
            }
        }
    }

    /// When the CLI next has something to do on its own, if ever.
    pub fn next_timer(&self) -> Option<u64> {
        self.timers.iter().map(|(at, _, _)| *at).min()
    }

    /// The next time after `now` at which the CLI has something to do.
    pub fn next_timer_after(&self, now: u64) -> Option<u64> {
        self.timers.iter().map(|(at, _, _)| *at).filter(|t| *t > now).min()
    }

    /// Does what is due at `now`, in order.
    pub fn on_time(&mut self, now: u64) {
        loop {
            let next = self.timers.iter().enumerate().filter(|(_, t)| t.0 <= now).min_by_key(|(_, t)| (t.0, t.1));
            let Some((i, _)) = next else { return };
            let (_, _, timer) = self.timers.swap_remove(i);
            match timer {
                Timer::Process(msg) => self.process(now, msg),
                Timer::OtherAnswers(w) => self.other_answers(now, w),
                Timer::OtherReattaches(s) => self.other_reattaches(now, s),
            }
        }
    }

    /// Something the CLI does on its own in one of its running sessions
    /// (an event, a wait, the end of a turn); a line for the trace.
    pub fn act(&mut self, now: u64) -> Option<String> {
        if self.quiet {
            return None;
        }
        let active: Vec<usize> =
            (0..self.sessions.len()).filter(|s| self.sessions[*s].phase == Phase::Active).collect();
        if active.is_empty() {
            return None;
        }
        // Mostly this client's sessions: the others matter only for the log.
        let mine: Vec<usize> = active.iter().copied().filter(|s| self.sessions[*s].this_attached).collect();
        let s = if !mine.is_empty() && self.rng.chance(85) {
            mine[self.rng.index(mine.len())]
        } else {
            active[self.rng.index(active.len())]
        };
        let id = self.sessions[s].id.clone();
        match self.rng.weighted(&[30, 12, 30, 10, 6, 4, 8]).unwrap_or(0) {
            0 => {
                let n = self.emit(now, s, "assistant.message_delta", false, "", None);
                Some(format!("cli: {id} ephemeral event #{n}"))
            }
            1 => {
                let n = self.emit(now, s, "assistant.message", true, "", None);
                Some(format!("cli: {id} durable event #{n}"))
            }
            2 => {
                let row = self.random_event_row();
                let w = self.raise(now, s, row);
                w.map(|w| format!("cli: {id} raises wait {w} ({})", row_name(row)))
            }
            3 => {
                let row = self.random_request_row();
                let w = self.raise(now, s, row);
                w.map(|w| format!("cli: {id} raises wait {w} ({})", row_name(row)))
            }
            4 => {
                let pending = self.ledger.waits.iter().any(|w| w.session == id && w.state == WaitState::Pending);
                if !self.sessions[s].turn || pending {
                    return None;
                }
                self.sessions[s].turn = false;
                self.emit(now, s, "assistant.turn_end", false, "", None);
                let n = self.emit(now, s, "session.idle", false, "", None);
                Some(format!("cli: {id} turn ends (#{n})"))
            }
            5 => {
                let members = self.hooked();
                let n = self.emit(now, s, "permission.requested", true, &members, None);
                Some(format!("cli: {id} permission resolved by a hook (#{n}, no wait)"))
            }
            _ => {
                self.lifecycle("session.updated", &id);
                Some(format!("cli: {id} lifecycle session.updated"))
            }
        }
    }

    fn hooked(&mut self) -> String {
        format!(r#""requestId":"h-{}","resolvedByHook":true,"permissionRequest":{{}}"#, self.ledger.events.len())
    }

    fn random_event_row(&mut self) -> usize {
        let rows: Vec<usize> =
            (0..ANSWERS.len()).filter(|r| matches!(ANSWERS[*r].trigger, Trigger::Event(_))).collect();
        // The two kinds seen most on the wire, and listed after a resume,
        // come as often as all the others.
        if self.rng.chance(50) {
            let listed: Vec<usize> = rows.iter().copied().filter(|r| waits::survives_restart(*r)).collect();
            return listed[self.rng.index(listed.len())];
        }
        rows[self.rng.index(rows.len())]
    }

    fn random_request_row(&mut self) -> usize {
        let rows: Vec<usize> =
            (0..ANSWERS.len()).filter(|r| matches!(ANSWERS[*r].trigger, Trigger::Request(_))).collect();
        rows[self.rng.index(rows.len())]
    }

    fn schedule(&mut self, due: u64, timer: Timer) {
        self.timer_seq += 1;
        self.timers.push((due, self.timer_seq, timer));
    }

    fn add_session(&mut self, id: String) -> usize {
        self.sessions.push(Session::new(id));
        self.sessions.len() - 1
    }

    fn find(&self, id: &str) -> Option<usize> {
        self.sessions.iter().position(|s| s.id == id)
    }

    /// The other client shares session `s` (attached now or not), with a
    /// handler for each broadcast row by chance.
    fn share(&mut self, s: usize, attached: bool) {
        let handles = (0..ANSWERS.len()).map(|r| ANSWERS[r].leaves_unhandled() && self.rng.chance(50)).collect();
        self.sessions[s].other = Some(Other { handles, attached });
    }

    /// Ends session `s`: its waits are cancelled, nobody is attached.
    fn end(&mut self, s: usize, why: &'static str) {
        let id = self.sessions[s].id.clone();
        self.sessions[s].phase = Phase::Ended;
        self.sessions[s].this_attached = false;
        self.sessions[s].other = None;
        for w in &mut self.ledger.waits {
            if w.session == id && w.state == WaitState::Pending {
                w.state = WaitState::Cancelled { why };
            }
        }
    }

    /// Writes a frame to this client, if connected, with its mark.
    fn write(&mut self, body: &str, mark: Option<u64>) -> bool {
        if self.conn.is_none() {
            return false;
        }
        self.out.extend(frame(body));
        if let Some(m) = mark {
            self.marks.push((self.out.len(), m));
        }
        true
    }

    fn lifecycle(&mut self, kind: &str, id: &str) {
        let body = format!(
            r#"{{"jsonrpc":"2.0","method":"session.lifecycle","params":{{"type":"{kind}","sessionId":"{id}","metadata":{{"startTime":"t","modifiedTime":"t"}}}}}}"#
        );
        self.write(&body, None);
    }

    /// Emits an event of session `s` (`members`: more members of its
    /// `data`, no braces): logged, and written to this client if it is
    /// attached. Returns its number.
    fn emit(&mut self, now: u64, s: usize, event_type: &str, durable: bool, members: &str, wait: Option<usize>) -> u64 {
        let n = self.ledger.events.len() as u64;
        let id = format!("ev-{n}");
        let eph = if durable { "" } else { r#","ephemeral":true"# };
        let sep = if members.is_empty() { "" } else { "," };
        let event = format!(
            r#"{{"type":"{event_type}","id":"{id}","timestamp":"t{now}","parentId":null{eph},"data":{{"n":{n}{sep}{members}}}}}"#
        );
        let session = &mut self.sessions[s];
        session.log.push((n, durable, event.clone()));
        let sid = session.id.clone();
        let sent_on = if session.this_attached {
            let body = format!(
                r#"{{"jsonrpc":"2.0","method":"session.event","params":{{"sessionId":"{sid}","event":{event}}}}}"#
            );
            self.write(&body, Some(n)).then_some(self.conn).flatten()
        } else {
            None
        };
        if let (Some(w), Some(_)) = (wait, sent_on) {
            self.ledger.waits[w].told_this = true;
        }
        self.ledger.events.push(EventRecord {
            session: sid,
            event_type: event_type.into(),
            id,
            durable,
            at: now,
            sent_on,
            arrived: None,
        });
        n
    }

    /// Raises a wait of `row` in session `s`; its index, or `None` when
    /// the row cannot be raised there now (a request needs this client).
    fn raise(&mut self, now: u64, s: usize, row: usize) -> Option<usize> {
        let unreadable = self.rng.chance(self.profile.unreadable_percent);
        let sid = self.sessions[s].id.clone();
        let w = self.ledger.waits.len();
        match ANSWERS[row].trigger {
            Trigger::Event(event_type) => {
                // A command goes to the client that registered it: this one.
                if !ANSWERS[row].leaves_unhandled() && !self.sessions[s].this_attached {
                    return None;
                }
                let request_id = format!("r-{w}");
                let other_handles = self.sessions[s].other_handles(row);
                self.ledger.waits.push(WaitRecord {
                    row,
                    session: sid,
                    key: WaitKey::Event { request_id: request_id.clone() },
                    raised_at: now,
                    told_this: false,
                    reached_this: false,
                    listed: 0,
                    other_handles,
                    state: WaitState::Pending,
                    answers_from_this: 0,
                    first_answer: None,
                    answers: Vec::new(),
                });
                let data = waits::event_data(row, &request_id, unreadable);
                self.emit(now, s, event_type, waits::is_durable(event_type), &data, Some(w));
                if other_handles {
                    let due = now + self.rng.range(self.profile.other_ms.0, self.profile.other_ms.1);
                    self.schedule(due, Timer::OtherAnswers(w));
                }
            }
            Trigger::Request(method) => {
                let conn = self.conn.filter(|_| self.sessions[s].this_attached)?;
                let id = self.next_request_id;
                self.next_request_id += 1;
                self.ledger.waits.push(WaitRecord {
                    row,
                    session: sid.clone(),
                    key: WaitKey::Request { conn, id },
                    raised_at: now,
                    told_this: true,
                    reached_this: false,
                    listed: 0,
                    other_handles: false,
                    state: WaitState::Pending,
                    answers_from_this: 0,
                    first_answer: None,
                    answers: Vec::new(),
                });
                let params = waits::request_params(row, &sid, unreadable);
                let body = format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"{method}","params":{params}}}"#);
                self.write(&body, Some(REQUEST_MARK | w as u64));
                if let Some(event_type) = waits::double_delivery(row) {
                    let members = format!(r#""requestId":"u-{w}","question":"?""#);
                    self.emit(now, s, event_type, false, &members, None);
                }
            }
        }
        Some(w)
    }

    /// The first answer of wait `w` came from `by`: the wait is resolved
    /// and reported with its `*.completed` event.
    fn resolve(&mut self, now: u64, w: usize, by: Client) {
        self.ledger.waits[w].state = WaitState::Resolved { by, at: now };
        let Some(event_type) = waits::completed_event(self.ledger.waits[w].row) else { return };
        let Some(s) = self.find(&self.ledger.waits[w].session) else { return };
        let members = match &self.ledger.waits[w].key {
            WaitKey::Event { request_id } => format!(r#""requestId":"{request_id}""#),
            WaitKey::Request { .. } => return,
        };
        self.emit(now, s, event_type, waits::is_durable(event_type), &members, None);
    }

    fn other_answers(&mut self, now: u64, w: usize) {
        let wait = &self.ledger.waits[w];
        let Some(s) = self.find(&wait.session) else { return };
        if wait.state == WaitState::Pending
            && self.sessions[s].phase == Phase::Active
            && self.sessions[s].other_handles(wait.row)
        {
            self.resolve(now, w, Client::Other);
        }
    }

    fn other_reattaches(&mut self, now: u64, s: usize) {
        let session = &mut self.sessions[s];
        if session.phase == Phase::Ended {
            return;
        }
        session.phase = Phase::Active;
        let Some(other) = &mut session.other else { return };
        other.attached = true;
        let id = session.id.clone();
        let waits: Vec<usize> = (0..self.ledger.waits.len())
            .filter(|w| {
                let wait = &self.ledger.waits[*w];
                wait.session == id && wait.state == WaitState::Pending && self.sessions[s].other_handles(wait.row)
            })
            .collect();
        for w in waits {
            let due = now + self.rng.range(self.profile.other_ms.0, self.profile.other_ms.1);
            self.schedule(due, Timer::OtherAnswers(w));
        }
        self.tell_capabilities(now, s);
    }

    /// Tells this client, if attached, that the session's
    /// `ui.elicitation` changed (`capabilities.changed`, ephemeral).
    fn tell_capabilities(&mut self, now: u64, s: usize) {
        let session = &self.sessions[s];
        let e = session.elicitation();
        if !session.this_attached || session.told_elicitation == Some(e) {
            return;
        }
        self.sessions[s].told_elicitation = Some(e);
        let members = format!(r#""ui":{{"elicitation":{e}}}"#);
        self.emit(now, s, copilot_core::CAPABILITIES_CHANGED_EVENT, false, &members, None);
    }
}

/// The trigger of a row, for the trace.
pub fn row_name(row: usize) -> &'static str {
    match ANSWERS[row].trigger {
        Trigger::Event(t) | Trigger::Request(t) => t,
    }
}
