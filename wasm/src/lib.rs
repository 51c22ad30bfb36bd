//! The WebAssembly binding of `copilot-core`: the protocol engine (frame
//! decoder, router, session, pending-request and obligation tables, answer
//! table, deadlines) for JavaScript.
//!
//! JavaScript feeds the bytes it reads (`feed(Uint8Array, now)`) and gets
//! back, in one `Uint8Array` per call, every message decoded, where the
//! engine sent it and what it decided (an obligation to answer, a refusal
//! it already sent). A plain event (nothing to answer: nearly all the
//! stream) comes as its text as it arrived and its session's tag, so
//! JavaScript parses each event once and nothing is built for it here;
//! any other item as a JSON object. There is no routing or answering
//! policy in JavaScript: the engine decides; the JS client delivers, calls
//! the user's handlers and passes their answers on.
//!
//! Sessions are named by a `tag` (a number JavaScript chooses) and reserved
//! before the create or resume request is sent. Frames for sessions the
//! server has yet to name are parked here, and released in order when
//! [`CoreEngine::complete_open`] names the session.
//!
//! Built for size (the module is downloaded by every page that uses it):
//! on WebAssembly the crate is `no_std`, so neither the standard library's
//! panic machinery nor its allocator is linked in; text is written by hand
//! rather than through `core::fmt`.

#![cfg_attr(target_arch = "wasm32", no_std)]

extern crate alloc;

use alloc::borrow::ToOwned;
use alloc::boxed::Box;
use alloc::string::String;
use alloc::vec;
use alloc::vec::Vec;

use copilot_core::{
    event_id_hash, limits, Cause, Engine, EngineConfig, EventInfo, FrameDecoder, GrowingBuffer, Id, JsonStr,
    ListedWait, ObligationId, Outgoing, Output, Payload, Recovery, RecoveryReport, RecoveryStep, Route, RpcError,
    SessionHandle, Value,
};
use wasm_bindgen::prelude::*;

mod messages;
mod park;
#[cfg(test)]
mod policy;
#[cfg(test)]
mod policy_modes;

use park::ParkStorage;

/// The allocator: talc, smaller than the standard library's dlmalloc.
/// The module is single-threaded (no `atomics` target feature).
#[cfg(target_arch = "wasm32")]
#[global_allocator]
static ALLOCATOR: talc::wasm::WasmDynamicTalc = talc::wasm::new_wasm_dynamic_allocator();

/// A panic cannot be reported usefully from here (JavaScript sees a
/// `RuntimeError` either way), and formatting its message would link in
/// `core::fmt`: trap at once.
#[cfg(all(target_arch = "wasm32", not(test)))]
#[panic_handler]
fn panic(_: &core::panic::PanicInfo<'_>) -> ! {
    core::arch::wasm32::unreachable()
}

/// The frame buffer's first size; it grows only when a larger frame arrives
/// (WebAssembly memory, once grown, is never given back).
const INITIAL_BUFFER: usize = 64 << 10;

/// The engine with the core's capacities ([`copilot_core::limits`]), as
/// the Rust host has. Requests have no waiter here (JavaScript keeps its
/// own by id). Its transmit store grows: it always has room.
type WasmEngine = Engine<
    u32,
    (),
    ParkStorage,
    GrowingBuffer,
    { limits::MAX_SESSIONS },
    { limits::MAX_PENDING_REQUESTS },
    { limits::MAX_OBLIGATIONS },
>;

/// One connection's protocol engine: routing plus every decision about the
/// waits of the agent (which handler answers, the refusals, deadlines).
///
/// What the engine decides to send (a refusal, an answer, an error
/// response) it keeps until it is pulled, with the requests encoded here,
/// in order: after each call, send [`take_outgoing`](Self::take_outgoing)
/// to the CLI. Time is `now`, in
/// milliseconds of any clock (`performance.now()`, `Date.now()`).
///
/// Routed items (typed in the npm package's `index.d.ts`) carry, on a wait
/// the JS client must answer, `"obligation"` (an opaque string to give back
/// to [`settle`](Self::settle)), `"handler"` (the handler kind, such as
/// `"permission"`) and `"deadline"`; on a wait the engine already refused,
/// `"refused"` (the cause, such as `"sessionGone"`); on the CLI's reply to
/// an answer, `"answerAck"`. A wait the CLI listed as pending (asked by
/// the engine after a resume) that
/// the engine took on is routed as an `"event"` with `"listed": true`: its
/// `event` is the event the engine writes for it (no `id`; not one of the
/// session's events: answer it, do not deliver it).
#[wasm_bindgen]
pub struct CoreEngine {
    decoder: FrameDecoder<GrowingBuffer>,
    engine: Box<WasmEngine>,
    /// The session handle of each tag. At most as many as the engine has
    /// session slots: a list is smaller code than a hash map, and it is
    /// searched only when a session is opened or closed.
    handles: Vec<(u32, SessionHandle)>,
    /// The requests encoded here and the engine's frames pulled before
    /// each, in order.
    outbox: Vec<u8>,
    /// Set while a lost connection is recovered ([`recover`](Self::recover)):
    /// the engine's frames stay in the engine.
    held: bool,
    /// Why the last call that can fail failed, until [`failure`](Self::failure)
    /// takes it: the JS client throws it. A failure kept here rather than
    /// thrown through `JsError` leaves wasm-bindgen's table of JS values
    /// out of the module (about 1 KB).
    failure: String,
    /// The recovery of a lost connection under way ([`recover`](Self::recover)).
    recovery: Option<Recovery>,
    /// Events handed to subscribers that have not taken them, and the
    /// reader's pause over them ([`backlog`](Self::backlog)).
    backlog: copilot_core::Backlog,
}

#[wasm_bindgen]
impl CoreEngine {
    /// An engine accepting frames of at most `max_frame` bytes, refusing in
    /// a handler's place after `handler_timeout_ms` (0: never), and parking
    /// at most `park_bytes` during a server-assigned create. Each left out
    /// is the core's default (`copilot_core::limits`, as `dist/policy.js`'s
    /// `limits`: 64 MiB, 5 minutes, 8 MiB). A request has the deadline its
    /// caller gives it (`encode_request`), else the core's default (60 s).
    #[wasm_bindgen(constructor)]
    pub fn new(max_frame: Option<u32>, handler_timeout_ms: Option<f64>, park_bytes: Option<u32>) -> CoreEngine {
        let size = max_frame.map_or(limits::MAX_FRAME_BYTES, |m| m as usize).max(copilot_core::MIN_FRAME_BUFFER);
        let limit = |ms: Option<f64>, default: u64| match ms {
            None => Some(default),
            Some(ms) if ms <= 0.0 => None,
            Some(ms) => Some(ms as u64),
        };
        let config = EngineConfig::new().handler_timeout(limit(handler_timeout_ms, limits::DEFAULT_HANDLER_TIMEOUT_MS));
        let limit = park_bytes.map_or(limits::MAX_PARKED_BYTES, |b| b as usize);
        let park = ParkStorage { bytes: Vec::with_capacity(limit), limit };
        CoreEngine {
            decoder: FrameDecoder::with_buffer(GrowingBuffer::new(INITIAL_BUFFER.min(size))).with_limit(size),
            engine: Box::new(Engine::new(park, GrowingBuffer::new(0), config)),
            handles: Vec::new(),
            outbox: Vec::new(),
            held: false,
            failure: String::new(),
            recovery: None,
            backlog: copilot_core::Backlog::new(),
        }
    }

    /// Feeds received bytes; returns what was routed, in order, as bytes
    /// (see [`Routed`]): each item's text end to end, then two numbers a
    /// item (`u32`, little-endian): the session tag of a plain event (its
    /// text is the event, JSON) or [`ITEM_JSON`] (its text is a routed
    /// item's JSON object), and where its text ends; then how many items.
    /// One `Uint8Array` a call, no text built for the events, which are
    /// nearly all the stream.
    pub fn feed(&mut self, bytes: &[u8], now: f64) -> Vec<u8> {
        let now = ms(now);
        let mut routed = Routed::default();
        let mut rest = bytes;
        loop {
            let n = self.decoder.feed(rest);
            rest = &rest[n..];
            while let Some(o) = self.engine.poll(&mut self.decoder, now) {
                match &o.listed {
                    // A list of pending waits: each the engine takes on is
                    // routed as its event's wait, marked `listed`.
                    Some(listed) => {
                        self.engine.open_listed(listed, now, |wait| {
                            write_listed(&mut routed.text, &wait);
                            routed.end(ITEM_JSON);
                        });
                    }
                    None => routed.output(&o),
                }
            }
            if rest.is_empty() {
                return routed.finish();
            }
        }
    }

    /// The connection is gone: forgets every request in flight (JavaScript
    /// fails their callers from its own list) and every open wait (no
    /// answer can reach the CLI any more). Returns the batch that reports
    /// a frame cut short, if the stream ended inside one.
    pub fn disconnect(&mut self) -> String {
        self.engine.disconnect(|_, ()| {});
        let mut out = Batch::new();
        if let Err(e) = self.decoder.finish() {
            out.output(&Output::plain(Route::FrameError(e)));
        }
        out.finish()
    }

    /// Recovery of a lost connection, as the core sequences it
    /// (`copilot_core::Recovery`): `report` says what happened, and the
    /// next step comes back as numbers, `[step, a, b, c]`.
    ///
    /// Report [`RECOVER_LOST`] when the connection is lost and another
    /// will follow (a restarted CLI, a server connected to again), and
    /// again when an attempt's connection is lost or its step failed: the
    /// engine forgets what the next connection cannot settle
    /// (`Engine::connection_lost`: the requests in flight, whose callers
    /// JavaScript fails from its own list, the waits of server requests,
    /// the answers the CLI did not acknowledge) and the frames meant for
    /// the old one; the waits of events stay open. From then on the
    /// engine's frames (answers given meanwhile) are held while the
    /// requests encoded here go out. Returns `[forgotten]`, how many
    /// waits were forgotten; then report [`RECOVER_NEXT`] (the first
    /// time) or [`RECOVER_FAILED`] (an attempt failed) for the next step.
    ///
    /// The steps (`RecoveryStep`), by their first number: `0` wait until
    /// `a` (ms), then report `NEXT`; `1` attempt `a` after `b` ms: connect
    /// and run the handshake, report `CONNECTED` or `FAILED`; `2` resume
    /// the session of tag `a` (hold its live events), report `RESUMED`,
    /// `REFUSED`, `SKIPPED` or `FAILED`; `3` read page `b` of the log of
    /// tag `a`, report `LOG` or `LOG_MORE` with `log`, the ids of the
    /// events read so far (oldest first), one a line, each as its JSON
    /// string has it (an empty line for an event without one), or
    /// `FAILED`; `4` deliver the log's events of tag `a` from index `b`
    /// (none if `-1`; `c` says how much of the gap that is, as the core's
    /// `Gap` numbers it: 0 whole, 1 cut, 2 unmarked), then the live ones
    /// held but those the log brought,
    /// report `NEXT`; `5` end the session of tag `a` (the CLI refused its
    /// resume), report `NEXT`; `6` recovered: `a` sessions resumed in `b`
    /// ms, the frames held go out; `7` gave up after `a` attempts.
    ///
    /// One method for all: each export costs the module its own glue
    /// (about 220 bytes gzipped); numbers, not an object, come back:
    /// smaller code.
    pub fn recover(&mut self, report: u32, log: &str, now: f64) -> Vec<f64> {
        let now = ms(now);
        let report = match report {
            RECOVER_LOST => {
                self.held = true;
                self.recovery.get_or_insert_with(|| Recovery::new(now));
                // A frame cut short belongs to the old stream.
                let _ = self.decoder.finish();
                self.outbox.clear();
                return vec![self.engine.connection_lost(|_, ()| {}) as f64];
            }
            RECOVER_CONNECTED => RecoveryReport::Connected,
            RECOVER_FAILED => RecoveryReport::Failed,
            RECOVER_RESUMED => RecoveryReport::Resumed,
            RECOVER_REFUSED => RecoveryReport::Refused,
            RECOVER_SKIPPED => RecoveryReport::Skipped,
            RECOVER_LOG | RECOVER_LOG_MORE => {
                RecoveryReport::LogRead { ids: Ids(Some(log.as_bytes())), more: report == RECOVER_LOG_MORE }
            }
            _ => RecoveryReport::Next,
        };
        let Some(recovery) = &mut self.recovery else { return Vec::new() };
        let step = recovery.step(&mut self.engine, now, report);
        let tag = |h: SessionHandle| self.handles.iter().find(|(_, x)| *x == h).map_or(-1.0, |(t, _)| *t as f64);
        let (n, out) = match step {
            RecoveryStep::Wait { until } => (2, [0.0, until as f64, 0.0, 0.0]),
            RecoveryStep::Connect { attempt, after_ms } => (3, [1.0, attempt as f64, after_ms as f64, 0.0]),
            RecoveryStep::Resume { handle } => (2, [2.0, tag(handle), 0.0, 0.0]),
            RecoveryStep::ReadLog { handle, page } => (3, [3.0, tag(handle), page as f64, 0.0]),
            RecoveryStep::Deliver { handle, from, gap } => {
                (4, [4.0, tag(handle), from.map_or(-1.0, |f| f as f64), f64::from(gap as u8)])
            }
            RecoveryStep::End { handle } => (2, [5.0, tag(handle), 0.0, 0.0]),
            RecoveryStep::Recovered { sessions, took_ms } => (3, [6.0, sessions as f64, took_ms as f64, 0.0]),
            RecoveryStep::GaveUp { attempts } => (2, [7.0, attempts as f64, 0.0, 0.0]),
        };
        if recovery.is_over() {
            self.recovery = None;
            self.held = false;
        }
        out[..n].to_vec()
    }

    /// The bytes the engine decided to send since the last call: write
    /// them to the CLI as they are (whole frames).
    pub fn take_outgoing(&mut self) -> Vec<u8> {
        self.pull();
        core::mem::take(&mut self.outbox)
    }

    /// Settles a wait with its handler's outcome, as `how` says:
    /// - `0` ([`SETTLE_ANSWER`]): the answer `text` (JSON; `null` leaves the
    ///   answer's member out), with `siblings` (a JSON object's text, such
    ///   as `{"decisionContext":..}`, or empty for none) beside it in the
    ///   answering RPC;
    /// - `1` ([`SETTLE_REFUSE`]): the wait's default refusal for the cause
    ///   `text` names (`"noHandler"`, `"handlerFailed"` or `"unreadable"`);
    /// - `2` ([`SETTLE_DECLINE`]): left to another client of the session:
    ///   nothing is sent (see `Engine::decline`);
    /// - `3` ([`SETTLE_FAIL`]): the handler failed with the text `text`: the
    ///   wait's failure answer goes (a tool's generic failure with the text
    ///   as its `error`; a canvas request's coded error, with `siblings` as
    ///   its code, empty for the core's; else the refusal; see
    ///   `Engine::fail_coded`).
    ///
    /// Fails (see [`failure`](Self::failure)) if the wait was already
    /// answered (nothing is sent then), if the answer is not JSON, or the
    /// wait cannot be declined (the refusal is sent instead then), or the
    /// cause is unknown. One method for all: each export costs the module
    /// its own glue.
    pub fn settle(&mut self, obligation: &str, how: u8, text: &str, siblings: &str) {
        let settled = match how {
            SETTLE_ANSWER => self.try_answer(obligation, text, siblings),
            SETTLE_REFUSE => self.try_refuse(obligation, text),
            SETTLE_DECLINE => self.try_decline(obligation),
            SETTLE_FAIL => obligation_id(obligation)
                .and_then(|id| self.engine.fail_coded(id, siblings, text).map_err(|e| e.message().to_owned())),
            _ => Err(messages::UNKNOWN_SETTLE_MODE.to_owned()),
        };
        self.fail(settled);
    }

    /// Why the last call that can fail (`settle`, `encode_request`,
    /// `reserve`, `complete_open`, `release_session` closing, `openParams`) failed,
    /// once; empty if it did not. A call that failed returned nothing of
    /// use (`0`, `undefined`, `""`): the JS client throws this text (with
    /// the core's message texts put back) after each such call.
    pub fn failure(&mut self) -> String {
        core::mem::take(&mut self.failure)
    }

    /// Acts on the deadlines due at `now`: refusals are queued; the
    /// ids of the requests that ran out of time are returned (fail their
    /// callers with a timeout).
    pub fn handle_timeout(&mut self, now: f64) -> Vec<f64> {
        let mut expired = Vec::new();
        self.engine.handle_timeout(ms(now), |id, _| expired.push(id.0 as f64));
        expired
    }

    /// When [`handle_timeout`](Self::handle_timeout) next has work, if ever.
    pub fn poll_timeout(&self) -> Option<f64> {
        self.engine.poll_timeout().map(|t| t as f64)
    }

    /// Allocates a request id, writes the request to the outbox and
    /// returns the id (the response will carry it); `params` is JSON text
    /// or empty for none. Its deadline is `now + timeout_ms` (none if
    /// `timeout_ms` is infinite), or the engine's request timeout when
    /// `timeout_ms` is not given. Fails (returning 0) if `params` is not
    /// JSON or too many requests are in flight.
    pub fn encode_request(&mut self, method: &str, params: &str, now: f64, timeout_ms: Option<f64>) -> f64 {
        let encoded = self.try_encode_request(method, params, now, timeout_ms);
        self.fail(encoded)
    }

    fn try_encode_request(
        &mut self,
        method: &str,
        params: &str,
        now: f64,
        timeout_ms: Option<f64>,
    ) -> Result<f64, String> {
        let params = parse_params(params)?;
        let inserted = match timeout_ms {
            None => self.engine.insert_request((), ms(now)),
            Some(t) if !t.is_finite() => self.engine.router().pending().insert_with_deadline((), None),
            Some(t) => self.engine.router().pending().insert_with_deadline((), Some(ms(now).saturating_add(ms(t)))),
        };
        let id = inserted.map_err(|_| messages::TOO_MANY_REQUESTS.to_owned())?;
        match encode(&Outgoing::Request { id, method, params: params.as_ref().map(|p| p as &dyn Payload) }) {
            Ok(mut frame) => {
                // The engine's frames decided before it go first.
                self.pull();
                self.outbox.append(&mut frame);
                Ok(id.0 as f64)
            }
            Err(e) => {
                self.engine.router().pending().take(id.0);
                Err(e)
            }
        }
    }

    /// Reserves a session slot under `tag` before its create or resume is
    /// sent: for session `id`, or, with no `id`, for a create whose id the
    /// server assigns. On a `resume` of an id open on this client, the new
    /// tag takes it over: the old tag is returned (end its streams: the
    /// session was resumed elsewhere). Fails (returning `undefined`) when
    /// the engine refuses the slot.
    pub fn reserve(&mut self, id: Option<String>, tag: u32, resume: bool) -> Option<u32> {
        let reserved = self.try_reserve(id, tag, resume);
        self.fail(reserved)
    }

    fn try_reserve(&mut self, id: Option<String>, tag: u32, resume: bool) -> Result<Option<u32>, String> {
        let reserved = match id {
            None => self.engine.reserve_unassigned(tag).map(|handle| (handle, None)),
            Some(id) if resume => self.engine.reserve_resume(&id, tag),
            Some(id) => self.engine.reserve(&id, tag).map(|handle| (handle, None)),
        };
        let (handle, old) = reserved.map_err(|e| e.kind.message().to_owned())?;
        if let Some((_, old_tag)) = old {
            self.take_handle(old_tag);
        }
        self.set_handle(tag, handle);
        Ok(old.map(|(_, t)| t))
    }

    /// Completes the create or resume of `tag` with its response: `result`
    /// is the response's `result` JSON text, or, if `ok` is false, the
    /// error's message. Returns `{"opened":bool,"error"?:string,"routes":[...]}`:
    /// on failure (including an unreadable answer) the slot is released;
    /// `routes` are the parked frames now routed. Fails (returning `""`)
    /// if no session is reserved under `tag`.
    pub fn complete_open(&mut self, tag: u32, ok: bool, result: &str, now: f64) -> String {
        let opened = self.try_complete_open(tag, ok, result, now);
        self.fail(opened)
    }

    /// The end of the session reserved under `tag`: with `closing`, marks
    /// it closing (its destroy is in flight; fails if no session is
    /// reserved under `tag`) and returns `""`; else releases it (dropped or
    /// destroyed): its open waits are refused (queued), and the JSON array
    /// of parked frames that this made routable is returned. One method
    /// for both: each export costs the module its own glue.
    pub fn release_session(&mut self, tag: u32, now: f64, closing: bool) -> String {
        if closing {
            let closed = self.try_close_session(tag);
            self.fail(closed);
            return String::new();
        }
        if let Some(handle) = self.take_handle(tag) {
            self.engine.release(handle);
        }
        self.drain_parked(now)
    }

    /// The params of `session.create` / `session.resume`: `options` (a
    /// JSON object, the user's options under their wire names) and what
    /// the engine announces for the members they leave out (see
    /// `copilot_core::write_open_params`); `handlers` names the handler
    /// kinds set, comma-separated. Fails (returning `""`) if `options` is
    /// not a JSON object.
    #[wasm_bindgen(js_name = openParams)]
    pub fn open_params(&mut self, options: &str, handlers: &str) -> String {
        let mut out = Vec::with_capacity(options.len() + 320);
        let written =
            copilot_core::write_open_params(options.as_bytes(), |kind| names(handlers, kind), &mut |b: &[u8]| {
                out.extend_from_slice(b)
            })
            .map(|()| into_string(out))
            .map_err(|e| e.message().to_owned());
        self.fail(written)
    }

    /// The engine's counters at `now`, as numbers: those of [`STATS`] in
    /// its order, the age of the oldest open obligation (`NaN`: none), then
    /// the refusals by cause, in the order of `Cause::ALL`. The names are
    /// in `policy.json` (`stats`), not in the module.
    pub fn stats(&self, now: f64) -> Vec<f64> {
        let s = self.engine.stats(ms(now));
        let r = s.router;
        let b = self.backlog.stats();
        let mut out = vec![
            r.frames as f64,
            r.bytes as f64,
            r.malformed as f64,
            r.oversize as f64,
            r.unknown_session as f64,
            r.parked as f64,
            r.unmatched_responses as f64,
            s.open_obligations as f64,
            s.opened as f64,
            s.answered as f64,
            s.declined as f64,
            s.left_open as f64,
            s.left_answered as f64,
            s.left_unanswered as f64,
            s.unanswerable as f64,
            s.parked_frames as f64,
            s.parked_bytes as f64,
            s.park_dropped as f64,
            s.answers_sent as f64,
            s.acks_accepted as f64,
            s.acks_refused as f64,
            s.lists_sent as f64,
            s.lists_failed as f64,
            s.listed as f64,
            s.duplicate_waits as f64,
            s.stalls as f64,
            b.bytes as f64,
            b.peak_bytes as f64,
            b.pauses as f64,
            b.overruns as f64,
            s.oldest_obligation_age.map_or(f64::NAN, |a| a as f64),
        ];
        out.extend(s.refused.iter().map(|n| *n as f64));
        out
    }

    /// The connection's backlog, as the core rules it
    /// (`copilot_core::Backlog`): `added` bytes of events more are held for
    /// subscribers that have not taken them, `taken` fewer. Then whether
    /// to read: -1 read; -2 read on over the bound, as nothing was taken
    /// for `BACKLOG_STALL_MS` (say so); else pause reading until that time
    /// on `now`'s clock, or until bytes are taken or a request is made
    /// before (call again then). Reading goes on while a request of this
    /// engine waits for its answer or a lost connection is recovered. Its
    /// figures are among [`stats`](Self::stats)'s (`backlogBytes`, ...).
    pub fn backlog(&mut self, added: u32, taken: u32, now: f64) -> f64 {
        self.backlog.charge(added as usize);
        self.backlog.release(taken as usize);
        let read_on = self.held || !self.engine.router().pending().is_empty();
        match self.backlog.poll_read(read_on, ms(now)) {
            copilot_core::ReadGate::Read => -1.0,
            copilot_core::ReadGate::Overrun { .. } => -2.0,
            copilot_core::ReadGate::Wait { until_ms } => until_ms as f64,
        }
    }
}

/// The [`event_id_hash`](copilot_core::event_id_hash) of each line of a
/// text (an event id as its JSON string has it), none for an empty one.
/// An iterator of its own rather than adapters: smaller code.
struct Ids<'a>(Option<&'a [u8]>);

impl Iterator for Ids<'_> {
    type Item = Option<u64>;

    fn next(&mut self) -> Option<Option<u64>> {
        let rest = self.0?;
        let (id, next) = match rest.iter().position(|b| *b == b'\n') {
            Some(end) => (&rest[..end], Some(&rest[end + 1..])),
            None => (rest, None),
        };
        self.0 = next;
        Some((!id.is_empty()).then(|| event_id_hash(id)))
    }
}

/// [`CoreEngine::recover`]'s reports (`policy.json`'s `recovery.reports`,
/// in this order): the connection is lost (or an attempt's connection);
/// the step is done; the connection is made; the step failed; the session
/// is resumed; its resume refused; skipped; the log read, all of it or
/// with more further back.
const RECOVER_LOST: u32 = 0;
#[cfg(test)]
const RECOVER_NEXT: u32 = 1;
const RECOVER_CONNECTED: u32 = 2;
const RECOVER_FAILED: u32 = 3;
const RECOVER_RESUMED: u32 = 4;
const RECOVER_REFUSED: u32 = 5;
const RECOVER_SKIPPED: u32 = 6;
const RECOVER_LOG: u32 = 7;
const RECOVER_LOG_MORE: u32 = 8;

/// [`CoreEngine::settle`]: pass on the handler's answer.
const SETTLE_ANSWER: u8 = 0;
/// [`CoreEngine::settle`]: send the wait's refusal for a cause.
const SETTLE_REFUSE: u8 = 1;
/// [`CoreEngine::settle`]: leave the wait to another client (nothing sent).
const SETTLE_DECLINE: u8 = 2;
/// [`CoreEngine::settle`]: the handler failed; send the wait's failure answer.
const SETTLE_FAIL: u8 = 3;

/// The names of the counters [`CoreEngine::stats`] reports, in its order
/// (`policy.json`'s `stats.counters`, held to this by its test).
#[cfg(test)]
const STATS: [&str; 31] = [
    "frames",
    "bytes",
    "malformed",
    "oversize",
    "unknownSession",
    "parked",
    "unmatchedResponses",
    "openObligations",
    "opened",
    "answered",
    "declined",
    "leftOpen",
    "leftAnswered",
    "leftUnanswered",
    "unanswerable",
    "parkedFrames",
    "parkedBytes",
    "parkDropped",
    "answersSent",
    "acksAccepted",
    "acksRefused",
    "listsSent",
    "listsFailed",
    "listed",
    "duplicateWaits",
    "stalls",
    "backlogBytes",
    "backlogPeakBytes",
    "backlogPauses",
    "backlogOverruns",
    "oldestObligationAge",
];

impl CoreEngine {
    fn try_answer(&mut self, obligation: &str, payload: &str, siblings: &str) -> Result<(), String> {
        let id = obligation_id(obligation)?;
        self.engine.answer_with(id, payload.as_bytes(), siblings.as_bytes()).map_err(|e| e.message().to_owned())
    }

    fn try_decline(&mut self, obligation: &str) -> Result<(), String> {
        let id = obligation_id(obligation)?;
        self.engine.decline(id).map_err(|e| e.message().to_owned())
    }

    fn try_refuse(&mut self, obligation: &str, cause: &str) -> Result<(), String> {
        let id = obligation_id(obligation)?;
        let Some(cause) = Cause::ALL.into_iter().find(|c| c.name() == cause) else {
            let mut message = messages::UNKNOWN_CAUSE.to_owned();
            message.push_str(cause);
            return Err(message);
        };
        self.engine.refuse(id, cause).map_err(|e| e.message().to_owned())
    }

    fn try_close_session(&mut self, tag: u32) -> Result<(), String> {
        let handle = self.handle(tag)?;
        self.engine.close(handle).map_err(|e| e.message().to_owned())
    }

    fn try_complete_open(&mut self, tag: u32, ok: bool, result: &str, now: f64) -> Result<String, String> {
        let handle = self.handle(tag)?;
        let opened = if ok {
            match Value::parse(result.as_bytes()) {
                Ok(v) => self.engine.complete_open(handle, Ok(v)),
                Err(_) => {
                    self.engine.release(handle);
                    Err(copilot_core::OpenError::Unreadable)
                }
            }
        } else {
            let quoted = json_string(result);
            match Value::parse(quoted.as_bytes()).ok().and_then(|v| v.as_str()) {
                Some(message) => {
                    let error = RpcError { code: copilot_core::INTERNAL_ERROR, message, data: None };
                    self.engine.complete_open(handle, Err(error))
                }
                None => {
                    self.engine.release(handle);
                    Err(copilot_core::OpenError::Rejected)
                }
            }
        };
        if opened.is_err() {
            self.take_handle(tag);
        }
        let routes = self.drain_parked(now);
        let mut text = Vec::new();
        let mut w = Fields::new(&mut text);
        w.raw("opened", if opened.is_ok() { b"true" } else { b"false" });
        if let Err(e) = opened {
            w.text("error", e.message());
        }
        w.raw("routes", routes.as_bytes());
        w.end();
        Ok(into_string(text))
    }

    /// What a call returns: its value, or, if it failed, nothing of use
    /// (the default), its failure kept for [`failure`](Self::failure).
    fn fail<T: Default>(&mut self, result: Result<T, String>) -> T {
        result.unwrap_or_else(|e| {
            self.failure = e;
            T::default()
        })
    }

    fn handle(&self, tag: u32) -> Result<SessionHandle, String> {
        match self.handles.iter().find(|(t, _)| *t == tag) {
            Some((_, handle)) => Ok(*handle),
            None => {
                let mut message = messages::NO_SESSION_RESERVED.as_bytes().to_vec();
                push_number(&mut message, tag.into());
                Err(into_string(message))
            }
        }
    }

    fn set_handle(&mut self, tag: u32, handle: SessionHandle) {
        match self.handles.iter_mut().find(|(t, _)| *t == tag) {
            Some(entry) => entry.1 = handle,
            None => self.handles.push((tag, handle)),
        }
    }

    fn take_handle(&mut self, tag: u32) -> Option<SessionHandle> {
        let at = self.handles.iter().position(|(t, _)| *t == tag)?;
        Some(self.handles.swap_remove(at).1)
    }

    fn drain_parked(&mut self, now: f64) -> String {
        let mut batch = Batch::new();
        while let Some(o) = self.engine.poll_parked(ms(now)) {
            batch.output(&o);
        }
        batch.finish()
    }

    /// Pulls the frames the engine decided to send into the outbox.
    fn pull(&mut self) {
        if self.held {
            return;
        }
        self.outbox.extend_from_slice(self.engine.transmit());
        self.engine.transmitted(usize::MAX);
    }
}

/// Whether the comma-separated handler kinds `handlers` name `kind`.
fn names(handlers: &str, kind: copilot_core::HandlerKind) -> bool {
    handlers.as_bytes().split(|b| *b == b',').any(|h| h == kind.name().as_bytes())
}

/// A message's `params` as JSON text, `null` for none.
fn params<'a>(params: &Option<Value<'a>>) -> &'a [u8] {
    params.map_or(b"null", |p| p.as_bytes())
}

/// Milliseconds from JavaScript (a float, maybe fractional or negative).
fn ms(now: f64) -> u64 {
    if now.is_finite() && now > 0.0 {
        now as u64
    } else {
        0
    }
}

/// The obligation id from its decimal text (as [`Fields::output`] wrote it).
fn obligation_id(text: &str) -> Result<ObligationId, String> {
    text.parse::<u64>().map(ObligationId::from_bits).map_err(|_| messages::NOT_AN_OBLIGATION_ID.to_owned())
}

fn parse_params(params: &str) -> Result<Option<Value<'_>>, String> {
    // JavaScript passes "" for none (and `JSON.stringify` text otherwise).
    if params.is_empty() {
        return Ok(None);
    }
    let v = Value::parse(params.as_bytes()).map_err(|e| {
        let mut message = messages::PARAMS_NOT_JSON.to_owned();
        e.write_message(&mut |part| message.push_str(part));
        message
    })?;
    Ok(Some(v))
}

/// `s` as a JSON string literal.
fn json_string(s: &str) -> String {
    let mut out = Vec::with_capacity(s.len() + 2);
    push_json_string(&mut out, s);
    into_string(out)
}

/// Text written by this module: UTF-8 by construction (whole strings and
/// validated JSON, escapes and digits in ASCII).
fn into_string(bytes: Vec<u8>) -> String {
    String::from_utf8(bytes).unwrap_or_default()
}

/// Appends `s` as a JSON string literal (quotes, backslashes and control
/// characters escaped).
fn push_json_string(out: &mut Vec<u8>, s: &str) {
    out.push(b'"');
    push_escaped(out, s.as_bytes());
    out.push(b'"');
}

/// Appends `s` with quotes, backslashes and control characters escaped;
/// every other byte (UTF-8 sequences included) as it is.
fn push_escaped(out: &mut Vec<u8>, s: &[u8]) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    for &b in s {
        match b {
            b'"' | b'\\' => out.extend_from_slice(&[b'\\', b]),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.extend_from_slice(b"\\t"),
            0..=0x1f => {
                out.extend_from_slice(&[b'\\', b'u', b'0', b'0', HEX[usize::from(b >> 4)], HEX[usize::from(b & 15)]])
            }
            _ => out.push(b),
        }
    }
}

/// Appends `n` in decimal.
fn push_number(out: &mut Vec<u8>, n: u64) {
    out.extend_from_slice(copilot_core::itoa(n, &mut [0; 20]));
}

fn encode(message: &Outgoing<'_>) -> Result<Vec<u8>, String> {
    message.to_vec(512).map_err(|e| e.message().to_owned())
}

/// Writes a batch of routed messages as one JSON array (the parked
/// frames a session's open or release makes routable, a cut frame).
struct Batch {
    out: Vec<u8>,
}

impl Batch {
    fn new() -> Self {
        Batch { out: b"[".to_vec() }
    }

    fn finish(mut self) -> String {
        self.out.push(b']');
        into_string(self.out)
    }

    fn output(&mut self, o: &Output<'_, u32, ()>) {
        if self.out.len() > 1 {
            self.out.push(b',');
        }
        write_output(&mut self.out, o);
    }
}

/// [`CoreEngine::feed`]'s mark of an item that is a routed item's JSON
/// object rather than a plain event (session tags are below it).
const ITEM_JSON: u32 = u32::MAX;

/// What [`CoreEngine::feed`] routed: the items' texts end to end, and
/// for each its kind (a session tag or [`ITEM_JSON`]) and where its text
/// ends.
#[derive(Default)]
struct Routed {
    text: Vec<u8>,
    index: Vec<u32>,
}

impl Routed {
    /// An engine output: a plain event (no obligation, refusal or
    /// acknowledgement attached) as its text alone, anything else as a
    /// JSON object of [`write_output`].
    fn output(&mut self, o: &Output<'_, u32, ()>) {
        match &o.route {
            Route::Event { target, event, .. }
                if o.obligation.is_none() && o.refused.is_none() && o.answer_ack.is_none() =>
            {
                self.text.extend_from_slice(event.event.as_bytes());
                self.end(*target);
            }
            _ => {
                write_output(&mut self.text, o);
                self.end(ITEM_JSON);
            }
        }
    }

    /// Ends an item of `kind` where the text is now.
    fn end(&mut self, kind: u32) {
        self.index.extend([kind, self.text.len() as u32]);
    }

    /// The text, padded to four bytes, the index and the count after it.
    fn finish(mut self) -> Vec<u8> {
        let count = self.index.len() as u32 / 2;
        self.text.resize(self.text.len().next_multiple_of(4), b' ');
        self.index.push(count);
        for n in self.index {
            self.text.extend_from_slice(&n.to_le_bytes());
        }
        self.text
    }
}

/// An engine output as a JSON object: its route, with the obligation,
/// refusal or acknowledgement the engine attached.
fn write_output(out: &mut Vec<u8>, o: &Output<'_, u32, ()>) {
    let mut w = Fields::new(out);
    w.route(&o.route);
    if let Some(ob) = &o.obligation {
        w.key("obligation");
        w.out.push(b'"');
        push_number(w.out, ob.id.to_bits());
        w.out.push(b'"');
        w.text("handler", ob.handler.name());
        w.number_opt("deadline", ob.deadline);
    }
    if let Some(cause) = o.refused {
        w.text("refused", cause.name());
    }
    if let Some(accepted) = o.answer_ack {
        w.raw("answerAck", if accepted { b"true" } else { b"false" });
    }
    w.end();
}

/// A wait the engine took on from a list, as a JSON object: routed as its
/// event's wait, `"listed": true`.
fn write_listed(out: &mut Vec<u8>, wait: &ListedWait<'_, u32>) {
    let mut w = Fields::new(out);
    w.text("route", "event");
    w.raw("listed", b"true");
    w.number("session", wait.target.into());
    w.key("sessionId");
    w.out.push(b'"');
    w.out.extend_from_slice(wait.session_id());
    w.out.push(b'"');
    w.text("type", wait.event_type);
    w.key("event");
    let start = w.out.len();
    wait.write_event(&mut |b: &[u8]| w.out.extend_from_slice(b));
    let bytes = w.out.len() - start;
    w.number("bytes", bytes as u64);
    w.key("obligation");
    w.out.push(b'"');
    push_number(w.out, wait.obligation.id.to_bits());
    w.out.push(b'"');
    w.text("handler", wait.obligation.handler.name());
    w.number_opt("deadline", wait.obligation.deadline);
    w.end();
}

/// Where the core writes a message in parts (`write_message`).
type TextSink<'a> = dyn FnMut(&str) + 'a;

/// The members of one JSON object, written as they come.
struct Fields<'o> {
    out: &'o mut Vec<u8>,
    empty: bool,
}

impl<'o> Fields<'o> {
    fn new(out: &'o mut Vec<u8>) -> Self {
        out.push(b'{');
        Fields { out, empty: true }
    }

    fn end(self) {
        self.out.push(b'}');
    }

    fn key(&mut self, key: &str) {
        if !self.empty {
            self.out.push(b',');
        }
        self.empty = false;
        self.out.push(b'"');
        self.out.extend_from_slice(key.as_bytes());
        self.out.extend_from_slice(b"\":");
    }

    fn number(&mut self, key: &str, n: u64) {
        self.key(key);
        push_number(self.out, n);
    }

    fn number_opt(&mut self, key: &str, n: Option<u64>) {
        match n {
            Some(n) => self.number(key, n),
            None => self.raw(key, b"null"),
        }
    }

    /// Error codes: negative integers.
    fn code(&mut self, key: &str, n: i64) {
        self.key(key);
        if n < 0 {
            self.out.push(b'-');
        }
        push_number(self.out, n.unsigned_abs());
    }

    /// Validated JSON, embedded as it is.
    fn raw(&mut self, key: &str, json: &[u8]) {
        self.key(key);
        self.out.extend_from_slice(json);
    }

    /// A string as it arrived on the wire (its escapes are valid JSON).
    fn json_str(&mut self, key: &str, s: &JsonStr<'_>) {
        self.key(key);
        self.out.push(b'"');
        self.out.extend_from_slice(s.raw().as_bytes());
        self.out.push(b'"');
    }

    /// A message the core writes in parts, escaped.
    fn message(&mut self, key: &str, write: &mut dyn FnMut(&mut TextSink<'_>)) {
        self.key(key);
        self.out.push(b'"');
        write(&mut |part| push_escaped(self.out, part.as_bytes()));
        self.out.push(b'"');
    }

    /// Any text, escaped.
    fn text(&mut self, key: &str, s: &str) {
        self.key(key);
        push_json_string(self.out, s);
    }

    /// The JSON text of a request id, as a string (so `1e400` and `"a"`
    /// survive exactly).
    fn id_text(&mut self, key: &str, id: &Id<'_>) {
        match id {
            Id::Null => self.text(key, "null"),
            Id::Number(n) => self.text(key, n.raw()),
            Id::String(s) => {
                self.key(key);
                // The quotes of the id's text, escaped, around its raw text
                // escaped again.
                self.out.extend_from_slice(b"\"\\\"");
                push_escaped(self.out, s.raw().as_bytes());
                self.out.extend_from_slice(b"\\\"\"");
            }
        }
    }

    fn session(&mut self, session: Option<u32>) {
        self.number_opt("session", session.map(u64::from));
    }

    fn event(&mut self, e: &EventInfo<'_>) {
        self.json_str("type", &e.event_type);
        self.raw("event", e.event.as_bytes());
        // The size the core's kept-events bound counts.
        self.number("bytes", e.event.as_bytes().len() as u64);
    }

    /// The route's name and members.
    fn route(&mut self, route: &Route<'_, u32, ()>) {
        match route {
            Route::Event { target, session_id, event, .. } => {
                self.text("route", "event");
                self.number("session", (*target).into());
                self.json_str("sessionId", session_id);
                self.event(event);
            }
            Route::Lifecycle { kind, session_id, params } => {
                self.text("route", "lifecycle");
                self.json_str("type", kind);
                self.json_str("sessionId", session_id);
                self.raw("params", params.as_bytes());
            }
            Route::Response { request, result, .. } => {
                self.text("route", "response");
                // Request ids are whole numbers the engine counts up.
                self.number("id", request.0);
                match result {
                    Ok(v) => self.raw("result", v.as_bytes()),
                    Err(e) => {
                        self.code("code", e.code);
                        self.json_str("message", &e.message);
                        if let Some(d) = e.data {
                            self.raw("data", d.as_bytes());
                        }
                    }
                }
            }
            Route::Request { id, method, params: p, session } => {
                self.text("route", "request");
                self.id_text("idText", id);
                self.json_str("method", method);
                self.raw("params", params(p));
                self.session(session.map(|(_, t)| t));
            }
            Route::Notification { method, params: p, session } => {
                self.text("route", "notification");
                self.json_str("method", method);
                self.raw("params", params(p));
                self.session(session.map(|(_, t)| t));
            }
            Route::Park { session_id, .. } => {
                self.text("route", "parked");
                self.json_str("sessionId", session_id);
            }
            Route::UnknownSession { session_id, event, method, .. } => {
                self.text("route", "unknownSession");
                self.json_str("sessionId", session_id);
                self.json_str("method", method);
                if let Some(e) = event {
                    self.json_str("type", &e.event_type);
                }
            }
            Route::UnmatchedResponse { id, .. } => {
                self.text("route", "unmatchedResponse");
                self.id_text("idText", id);
            }
            Route::Malformed(e) => {
                self.text("route", "malformed");
                self.message("error", &mut |out| e.write_message(out));
            }
            Route::FrameError(e) => {
                self.text("route", "frameError");
                self.message("error", &mut |out| e.write_message(out));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(body: &str) -> Vec<u8> {
        format!("Content-Length: {}\r\n\r\n{body}", body.len()).into_bytes()
    }

    fn parse(batch: &str) -> serde_json::Value {
        serde_json::from_str(batch).unwrap_or_else(|e| panic!("{e}: {batch}"))
    }

    /// [`CoreEngine::feed`]'s output as the array of routed items the JS
    /// client reads from it: a plain event as `{route, session, event, bytes}`.
    fn routed(out: Vec<u8>) -> serde_json::Value {
        let word = |at: usize| u32::from_le_bytes(out[at..at + 4].try_into().unwrap());
        let count = word(out.len() - 4) as usize;
        let index = out.len() - 4 - 8 * count;
        let mut start = 0;
        let items = (0..count).map(|i| {
            let (kind, end) = (word(index + 8 * i), word(index + 8 * i + 4) as usize);
            let text = core::str::from_utf8(&out[start..end]).unwrap();
            start = end;
            match kind {
                ITEM_JSON => parse(text),
                tag => serde_json::json!({"route": "event", "session": tag, "event": parse(text), "bytes": text.len()}),
            }
        });
        items.collect()
    }

    /// [`CoreEngine::stats`] by name, as the JS client names them.
    fn named(numbers: Vec<f64>) -> serde_json::Value {
        assert_eq!(numbers.len(), STATS.len() + Cause::ALL.len());
        let mut out: serde_json::Map<_, _> =
            STATS.iter().map(|k| k.to_string()).zip(numbers.iter().map(|n| serde_json::json!(*n as u64))).collect();
        let causes = Cause::ALL
            .iter()
            .zip(&numbers[STATS.len()..])
            .map(|(c, n)| (c.name().to_owned(), serde_json::json!(*n as u64)));
        out.insert("refused".into(), causes.collect::<serde_json::Map<_, _>>().into());
        out.into()
    }

    #[test]
    fn open_params_announce_the_handlers_named_and_keep_the_options() {
        let params = parse(
            &CoreEngine::new(None, None, None).open_params(r#"{"model":"m","streaming":true}"#, "permission,hooks"),
        );
        assert_eq!(params["model"], "m");
        assert_eq!(params["streaming"], true);
        assert_eq!((params["requestPermission"].clone(), params["hooks"].clone()), (true.into(), true.into()));
        assert_eq!(params["requestUserInput"], false);
        assert_eq!(params["includeSubAgentStreamingEvents"], true);
    }

    #[test]
    fn event_items_carry_their_size() {
        let mut c = CoreEngine::new(None, None, None);
        c.reserve(Some("s".into()), 1, false);
        let event = r#"{"type":"session.info","data":{}}"#;
        let body =
            format!(r#"{{"jsonrpc":"2.0","method":"session.event","params":{{"sessionId":"s","event":{event}}}}}"#);
        let batch = routed(c.feed(&frame(&body), 0.0));
        assert_eq!(batch[0]["bytes"], event.len());
    }

    #[test]
    fn the_parking_storage_is_written_only_as_it_grows_within_its_bound() {
        use copilot_core::FrameBuffer;
        let mut park = ParkStorage { bytes: Vec::with_capacity(100), limit: 100 };
        assert_eq!(park.bytes().len(), 0, "nothing is written before a frame is parked");
        assert!(park.grow(60) && park.bytes().len() == 60);
        assert!(park.grow(10) && park.bytes().len() == 60, "never shrinks");
        assert!(park.grow(100) && !park.grow(101) && !park.can_grow(101));
        assert_eq!(park.bytes.capacity(), 100, "no reallocation");
    }

    #[test]
    fn parking_stops_at_its_byte_bound_and_holds_a_burst_of_the_frame_bound() {
        let event = |n: usize| {
            frame(&format!(
                r#"{{"jsonrpc":"2.0","method":"session.event","params":{{"sessionId":"new","event":{{"type":"session.info","id":"e{n}","data":{{}}}}}}}}"#
            ))
        };
        let body = event(0).len() - b"Content-Length: 118\r\n\r\n".len();
        // Room for two parked frames (each is its body and a 4-byte length).
        let mut c = CoreEngine::new(None, None, Some(2 * (body as u32 + 4)));
        c.reserve(None, 3, false);
        let input: Vec<u8> = (0..3).flat_map(event).collect();
        c.feed(&input, 0.0);
        let stats = named(c.stats(0.0));
        assert_eq!((stats["parkedFrames"].clone(), stats["parkDropped"].clone()), (2.into(), 1.into()));
        // The default bound is the core's: a burst of 10,000 events parks whole.
        let mut c = CoreEngine::new(None, None, None);
        c.reserve(None, 3, false);
        let input: Vec<u8> = (0..limits::MAX_PARKED_FRAMES).flat_map(event).collect();
        c.feed(&input, 0.0);
        let stats = named(c.stats(0.0));
        assert_eq!((stats["parkedFrames"].clone(), stats["parkDropped"].clone()), (10_000.into(), 0.into()));
    }

    #[test]
    fn events_and_responses_come_back_in_order_from_one_feed() {
        let mut c = CoreEngine::new(None, None, None);
        c.reserve(Some("s\"1".into()), 7, false);
        let req = c.encode_request("session.send", r#"{"sessionId":"s\"1","prompt":"hi"}"#, 0.0, None);
        assert_eq!(req, 1.0);
        let request =
            frame(r#"{"jsonrpc":"2.0","id":1,"method":"session.send","params":{"sessionId":"s\"1","prompt":"hi"}}"#);
        assert_eq!(c.take_outgoing(), request, "the request goes to the outbox");
        let mut input = frame(
            r#"{"jsonrpc":"2.0","method":"session.event","params":{"sessionId":"s\"1","event":{"type":"session.info","id":"e","data":{"x":"\ud83d\ude00"}}}}"#,
        );
        input.extend(frame(r#"{"jsonrpc":"2.0","id":1,"result":{"messageId":"m"}}"#));
        input.extend(frame(
            r#"{"jsonrpc":"2.0","id":1e400,"method":"userInput.request","params":{"sessionId":"nobody"}}"#,
        ));
        input.extend(b"garbage\r\n");
        let batch = routed(c.feed(&input, 0.0));
        assert_eq!(batch[0]["route"], "event");
        assert_eq!(batch[0]["session"], 7, "a plain event comes with its session's tag alone");
        assert_eq!(batch[0]["event"]["data"]["x"], "😀");
        assert_eq!(batch[1], serde_json::json!({"route": "response", "id": 1, "result": {"messageId": "m"}}));
        assert_eq!(batch[2]["route"], "unknownSession");
        assert_eq!(batch[2]["method"], "userInput.request");
        assert_eq!(batch[2]["refused"], "sessionGone");
        assert_eq!(batch[3]["route"], "frameError");
        assert_eq!(batch[3]["error"], copilot_core::FrameError::Garbage.to_string());
        let sent = String::from_utf8(c.take_outgoing()).unwrap();
        assert!(
            sent.ends_with(
                r#"{"jsonrpc":"2.0","id":1e400,"error":{"code":-32603,"message":"the user is not available"}}"#
            ),
            "{sent}"
        );
    }

    #[test]
    fn error_texts_are_the_cores_messages_with_their_numbers() {
        let mut c = CoreEngine::new(Some(128), None, None);
        let oversize = format!(r#"{{"jsonrpc":"2.0","method":"x","params":{{"pad":"{}"}}}}"#, "p".repeat(200));
        let cut = r#"{"jsonrpc":"2.0","id":"a\"b","method":"#;
        let mut input = frame(&oversize);
        input.extend(frame(cut));
        input.extend(frame(r#"{"jsonrpc":"2.0","id":"a\"b","method":"hooks.invoke","params":{}}"#));
        let batch = routed(c.feed(&input, 0.0));
        let too_large = copilot_core::FrameError::TooLarge { length: oversize.len(), capacity: 128 };
        assert_eq!(batch[0]["error"], too_large.to_string());
        assert_eq!(batch[1]["route"], "malformed");
        let parse_error = copilot_core::Envelope::decode(cut.as_bytes()).unwrap_err();
        assert_eq!(batch[1]["error"], parse_error.to_string());
        assert!(batch[1]["error"].as_str().unwrap().contains(" at byte "), "{}", batch[1]);
        assert_eq!(batch[2]["idText"], r#""a\"b""#, "the id's exact JSON text: {}", batch[2]);
    }

    #[test]
    fn strings_are_escaped_as_json() {
        for s in ["plain", "q\"b\\n\nr\rt\tz\u{1}\u{1f}", "😀 \u{7f}"] {
            assert_eq!(serde_json::from_str::<String>(&json_string(s)).unwrap(), s);
        }
        assert_eq!(json_string("a\u{1}"), r#""a\u0001""#);
    }

    #[test]
    fn requests_take_their_own_deadline_or_the_default() {
        let mut c = CoreEngine::new(None, None, None);
        let a = c.encode_request("ping", "{}", 10.0, Some(50.0));
        let b = c.encode_request("ping", "{}", 10.0, None);
        let _never = c.encode_request("ping", "{}", 10.0, Some(f64::INFINITY));
        assert_eq!(c.poll_timeout(), Some(60.0));
        assert_eq!(c.handle_timeout(59.0), Vec::<f64>::new());
        assert_eq!(c.handle_timeout(60.0), vec![a]);
        assert_eq!(c.poll_timeout(), Some(10.0 + copilot_core::limits::DEFAULT_REQUEST_TIMEOUT_MS as f64));
        assert_eq!(c.handle_timeout(100_000.0), vec![b]);
        assert_eq!(c.poll_timeout(), None, "the third has no deadline");
    }

    #[test]
    fn parked_frames_are_released_in_order_when_the_session_is_named() {
        let mut c = CoreEngine::new(None, None, None);
        c.reserve(None, 3, false);
        let mut input = Vec::new();
        for n in 0..3 {
            input.extend(frame(&format!(r#"{{"jsonrpc":"2.0","method":"session.event","params":{{"sessionId":"new","event":{{"type":"session.info","id":"e{n}","data":{{}}}}}}}}"#)));
        }
        let batch = routed(c.feed(&input, 0.0));
        assert!(batch.as_array().unwrap().iter().all(|r| r["route"] == "parked"), "parked, not delivered yet");
        let opened = parse(&c.try_complete_open(3, true, r#"{"sessionId":"new"}"#, 1.0).unwrap());
        let released = opened["routes"].as_array().unwrap();
        let ids: Vec<_> = released.iter().map(|r| r["event"]["id"].as_str().unwrap().to_owned()).collect();
        assert_eq!(ids, ["e0", "e1", "e2"]);
        assert!(released.iter().all(|r| r["session"] == 3));
        assert_eq!(named(c.stats(1.0))["parked"], 3);
    }

    fn engine_frame(body: &str) -> Vec<u8> {
        frame(body)
    }

    #[test]
    fn engine_items_carry_the_obligation_and_answers_go_to_the_outbox() {
        let mut e = CoreEngine::new(None, Some(1000.0), None);
        e.reserve(Some("s1".into()), 4, false);
        let opened = parse(&e.try_complete_open(4, true, "{}", 0.0).unwrap());
        assert_eq!(opened["opened"], true);
        let batch = routed(e.feed(
            &engine_frame(r#"{"jsonrpc":"2.0","method":"session.event","params":{"sessionId":"s1","event":{"type":"permission.requested","id":"e","data":{"requestId":"r1","permissionRequest":{}}}}}"#),
            10.0,
        ));
        assert_eq!(batch[0]["route"], "event");
        assert_eq!(batch[0]["handler"], "permission");
        assert_eq!(batch[0]["deadline"], 1010);
        let ob = batch[0]["obligation"].as_str().unwrap().to_owned();
        assert!(e.take_outgoing().is_empty());
        e.try_answer(&ob, r#"{"kind":"approved"}"#, "").unwrap();
        // A request encoded after the answer goes after it: the engine's
        // frames are pulled into the outbox before each request.
        assert_eq!(e.encode_request("ping", "", 10.0, None), 1.0);
        let body = r#"{"jsonrpc":"2.0","id":"answer-1","method":"session.permissions.handlePendingPermissionRequest","params":{"sessionId":"s1","requestId":"r1","result":{"kind":"approved"}}}"#;
        let mut answer_then_request = frame(body);
        answer_then_request.extend(frame(r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#));
        assert_eq!(e.take_outgoing(), answer_then_request);
        assert!(e.try_answer(&ob, "{}", "").is_err(), "answered once");
        assert!(e.take_outgoing().is_empty());
        let ack = routed(e.feed(&frame(r#"{"jsonrpc":"2.0","id":"answer-1","result":{"success":true}}"#), 11.0));
        assert_eq!(ack[0]["answerAck"], true);
        let stats = named(e.stats(20.0));
        assert_eq!((stats["answered"].as_u64(), stats["acksAccepted"].as_u64()), (Some(1), Some(1)));
        assert_eq!(stats["unmatchedResponses"], 0);
    }

    #[test]
    fn engine_refuses_at_deadlines_and_for_gone_sessions() {
        let mut e = CoreEngine::new(None, Some(100.0), None);
        e.reserve(Some("s1".into()), 1, false);
        let batch = routed(e.feed(
            &frame(
                r#"{"jsonrpc":"2.0","id":7,"method":"userInput.request","params":{"sessionId":"s1","question":"?"}}"#,
            ),
            0.0,
        ));
        assert_eq!(batch[0]["handler"], "userInput");
        let ob = batch[0]["obligation"].as_str().unwrap().to_owned();
        assert_eq!(e.poll_timeout(), Some(100.0));
        assert!(e.handle_timeout(99.0).is_empty());
        assert!(e.take_outgoing().is_empty());
        e.handle_timeout(100.0);
        let body = r#"{"jsonrpc":"2.0","id":7,"error":{"code":-32603,"message":"the user is not available"}}"#;
        assert_eq!(e.take_outgoing(), frame(body));
        assert!(e.try_refuse(&ob, "noHandler").is_err());

        let batch = routed(e.feed(
            &frame(r#"{"jsonrpc":"2.0","method":"session.event","params":{"sessionId":"gone","event":{"type":"elicitation.requested","data":{"requestId":"q"}}}}"#),
            200.0,
        ));
        assert_eq!(batch[0]["route"], "unknownSession");
        assert_eq!(batch[0]["refused"], "sessionGone");
        let sent = String::from_utf8(e.take_outgoing()).unwrap();
        assert!(
            sent.ends_with(r#""params":{"sessionId":"gone","requestId":"q","result":{"action":"cancel"}}}"#),
            "{sent}"
        );
    }

    #[test]
    fn engine_sessions_open_park_and_take_over() {
        let mut e = CoreEngine::new(None, None, None);
        e.reserve(None, 3, false);
        let parked = routed(e.feed(
            &frame(r#"{"jsonrpc":"2.0","method":"session.event","params":{"sessionId":"new","event":{"type":"command.queued","data":{"requestId":"c1","command":"/x"}}}}"#),
            0.0,
        ));
        assert_eq!(parked[0]["route"], "parked");
        let opened = parse(&e.try_complete_open(3, true, r#"{"sessionId":"new"}"#, 1.0).unwrap());
        assert_eq!(opened["opened"], true);
        assert_eq!(opened["routes"][0]["session"], 3);
        assert_eq!(opened["routes"][0]["handler"], "queuedCommand");
        // Resuming the open id under another tag takes it over.
        assert_eq!(e.reserve(Some("new".into()), 9, true), Some(3));
        // The resume's answer is unreadable: the slot is released, and the
        // wait it held is refused.
        let failed = parse(&e.try_complete_open(9, true, "not json", 2.0).unwrap());
        assert_eq!(failed["opened"], false);
        let sent = String::from_utf8(e.take_outgoing()).unwrap();
        assert!(sent.ends_with(r#""requestId":"c1","result":{"handled":false}}}"#), "{sent}");
        assert!(e.try_close_session(9).is_err(), "released");
    }

    #[test]
    fn a_recovery_steps_through_the_cores_sequence_by_tag_and_holds_the_engines_frames_until_it_is_over() {
        let event = |id: &str, ephemeral: bool| {
            frame(&format!(
                r#"{{"jsonrpc":"2.0","method":"session.event","params":{{"sessionId":"s","event":{{"type":"session.info","id":"{id}","ephemeral":{ephemeral},"data":{{}}}}}}}}"#
            ))
        };
        let mut e = CoreEngine::new(None, None, None);
        // t is joined (resumed here): its log holds history not seen here.
        e.reserve(Some("t".into()), 2, true);
        e.try_complete_open(2, true, r#"{"sessionId":"t"}"#, 0.0).unwrap();
        e.reserve(Some("s".into()), 1, false);
        e.try_complete_open(1, true, r#"{"sessionId":"s"}"#, 0.0).unwrap();
        e.feed(&[event("a", false), event("b", false), event("x", true)].concat(), 1.0);
        e.take_outgoing();
        assert_eq!(e.recover(RECOVER_NEXT, "", 0.0), Vec::<f64>::new(), "no recovery under way");
        assert_eq!(e.recover(RECOVER_LOST, "", 10.0), [0.0]);
        assert_eq!(e.recover(RECOVER_NEXT, "", 10.0), [0.0, 260.0]);
        assert_eq!(e.recover(RECOVER_NEXT, "", 260.0), [1.0, 1.0, 250.0]);
        // In slot order: t first. Joined, and no durable event was delivered
        // to it: its gap is unmarked (2).
        assert_eq!(e.recover(RECOVER_CONNECTED, "", 270.0), [2.0, 2.0]);
        assert_eq!(e.recover(RECOVER_RESUMED, "", 270.0), [4.0, 2.0, -1.0, 2.0], "unmarked");
        assert!(e.take_outgoing().is_empty(), "the lists asked are held");
        assert_eq!(e.recover(RECOVER_NEXT, "", 270.0), [2.0, 1.0]);
        // s's last durable event was "b": the log from "c" on.
        assert_eq!(e.recover(RECOVER_RESUMED, "", 280.0), [3.0, 1.0, 0.0]);
        assert_eq!(e.recover(RECOVER_LOG_MORE, "\nc\nd", 280.0), [3.0, 1.0, 1.0], "read further back");
        assert_eq!(e.recover(RECOVER_LOG, "a\nb\n\nc\nd", 290.0), [4.0, 1.0, 2.0, 0.0]);
        assert_eq!(e.recover(RECOVER_NEXT, "", 300.0), [6.0, 2.0, 290.0]);
        let sent = String::from_utf8(e.take_outgoing()).unwrap();
        assert_eq!(sent.matches("\"method\":").count(), 2 * copilot_core::PENDING_LISTS.len(), "{sent}");
        // The next loss starts afresh.
        assert_eq!(e.recover(RECOVER_LOST, "", 400.0), [0.0]);
        assert_eq!(e.recover(RECOVER_NEXT, "", 400.0), [0.0, 650.0]);
    }

    #[test]
    fn a_resume_asks_what_is_pending_and_listed_waits_come_as_listed_events() {
        let mut e = CoreEngine::new(None, None, None);
        e.reserve(Some("s-1".into()), 4, true);
        assert!(e.take_outgoing().is_empty());
        let opened = parse(&e.try_complete_open(4, true, "{}", 0.0).unwrap());
        assert_eq!(opened["opened"], true);
        let sent = String::from_utf8(e.take_outgoing()).unwrap();
        let ids: Vec<String> = sent
            .split("Content-Length")
            .filter_map(|f| f.find('{').map(|at| parse(&f[at..])))
            .map(|m| {
                assert_eq!(m["params"], serde_json::json!({"sessionId": "s-1"}));
                m["id"].as_str().unwrap().to_owned()
            })
            .collect();
        assert_eq!(ids.len(), copilot_core::PENDING_LISTS.len(), "{sent}");
        let reply = format!(
            r#"{{"jsonrpc":"2.0","id":"{}","result":{{"items":[{{"requestId":"r1","toolCallId":"c","toolName":"t","arguments":{{}}}}]}}}}"#,
            ids[0]
        );
        let batch = routed(e.feed(&frame(&reply), 1.0));
        assert_eq!(batch.as_array().unwrap().len(), 1, "{batch}");
        let item = &batch[0];
        assert_eq!((item["route"].clone(), item["listed"].clone()), ("event".into(), true.into()));
        assert_eq!((item["session"].clone(), item["sessionId"].clone()), (4.into(), "s-1".into()));
        assert_eq!(item["handler"], "tool");
        assert_eq!(item["event"]["data"]["requestId"], "r1");
        assert_eq!(item["event"]["data"]["sessionId"], "s-1");
        let obligation = item["obligation"].as_str().unwrap();
        e.settle(obligation, SETTLE_ANSWER, r#"{"textResultForLlm":"x"}"#, "");
        let sent = String::from_utf8(e.take_outgoing()).unwrap();
        assert!(
            sent.contains(
                r#""method":"session.tools.handlePendingToolCall","params":{"sessionId":"s-1","requestId":"r1""#
            ),
            "{sent}"
        );
        assert_eq!(named(e.stats(1.0))["listed"], 1);
    }

    #[test]
    fn a_failed_call_returns_nothing_of_use_and_leaves_its_failure_once() {
        let mut e = CoreEngine::new(None, None, None);
        assert_eq!(e.reserve(Some("s1".into()), 1, false), None);
        assert_eq!(e.failure(), "", "reserved");
        e.reserve(Some("s1".into()), 2, false);
        let taken = e.failure();
        assert!(!taken.is_empty(), "the id is taken");
        assert_eq!(e.failure(), "", "taken once");
        assert_eq!(e.encode_request("ping", "{", 0.0, None), 0.0);
        assert!(e.failure().starts_with("params are not JSON: "));
        assert!(e.take_outgoing().is_empty(), "nothing sent");
        assert_eq!(e.encode_request("ping", "{}", 0.0, None), 1.0);
        assert_eq!(e.failure(), "");
        assert_eq!(e.complete_open(5, true, "{}", 0.0), "");
        assert_eq!(e.failure(), "no session reserved under tag 5");
        e.release_session(6, 0.0, true);
        assert_eq!(e.failure(), "no session reserved under tag 6");
        e.settle("x", SETTLE_ANSWER, "{}", "");
        assert_eq!(e.failure(), "not an obligation id");
        e.settle("1", 9, "", "");
        assert_eq!(e.failure(), "unknown settle mode");
        assert_eq!(e.open_params("[]", ""), "");
        assert!(!e.failure().is_empty(), "options that are no object");
        assert_eq!(e.failure(), "");
    }
}
