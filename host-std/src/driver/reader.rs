//! The reader: bytes in, handed to the state, which routes them; then,
//! the lock released, what it routed is handed on. Until the stream ends;
//! then every waiter is told and every stream ends.

use std::io::{self, Read};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

use copilot_core::{FrameDecoder, GrowingBuffer};

use super::connection::{lock, Connection, Job, Replier, State, Target};
use super::state::{Read as ReadOf, Routed, Wait};
use crate::error::Error;
use crate::pool::panic_text;
use crate::transport::CloseCause;

/// What one read routed, as this connection's state writes it down.
type StateRead = ReadOf<Target>;

/// The largest frame accepted (the core's limit). The read buffer grows to
/// it only if such a frame arrives.
pub(crate) const MAX_FRAME: usize = copilot_core::limits::MAX_FRAME_BYTES;
/// Bytes asked of the transport per read.
const READ_CHUNK: usize = 64 << 10;

impl Connection {
    /// The read loop: bytes in, routes out, until the stream ends.
    /// `transport` says which transport `reader` is (see
    /// `Connection::transport`): the end of one a recovery replaced says nothing.
    pub(super) fn pump(self: Arc<Self>, mut reader: Box<dyn Read + Send>, transport: u64) {
        // Whatever fails in here (the caller's stream, a bug of ours), every
        // waiter is told and every stream ends.
        let cause = match catch_unwind(AssertUnwindSafe(|| self.read_loop(&mut *reader))) {
            Ok(cause) => cause,
            Err(panic) => {
                let what = panic_text(&*panic);
                log::error!("{}: the reader panicked: {what}", self.label);
                CloseCause::ReaderFailed(format!("panicked: {what}"))
            }
        };
        drop(reader);
        if self.read_state(State::transport) != transport {
            log::debug!("{}: the reader of a replaced transport stops: {cause}", self.label);
            return;
        }
        let cause = if self.is_stopping() {
            CloseCause::Stopped
        } else {
            match lock(&self.probe).take() {
                Some(probe) => catch_unwind(AssertUnwindSafe(|| probe(cause.clone()))).unwrap_or(cause),
                None => cause,
            }
        };
        log::debug!("{}: reader stops: {cause}", self.label);
        if cause == CloseCause::Stopped {
            self.shut_down(cause);
        } else if self.read_state(State::is_recovering) {
            // A transport of the recovery failed: its supervisor sees its
            // calls fail, and tries again or gives up.
            self.lose_transport(&cause);
        } else {
            match lock(&self.restart).clone() {
                Some(restart) => {
                    if let Err(cause) = self.recover(cause, restart) {
                        self.shut_down(cause);
                    }
                }
                None => self.shut_down(cause),
            }
        }
    }

    fn read_loop(self: &Arc<Self>, reader: &mut dyn Read) -> CloseCause {
        let mut decoder = FrameDecoder::with_buffer(GrowingBuffer::new(READ_CHUNK)).with_limit(MAX_FRAME);
        let mut read = StateRead::default();
        let cause = loop {
            let spare = decoder.spare();
            let want = spare.len().min(READ_CHUNK);
            match reader.read(&mut spare[..want]) {
                Ok(0) => break CloseCause::PeerClosed,
                Ok(n) => decoder.commit(n),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => break CloseCause::ReadFailed(e.to_string()),
            }
            self.with_state(|state, now| state.handle_read(&mut decoder, now, &mut read));
            self.act_on_read(&mut read);
            // A consumer slower than the CLI holds the CLI back, rather
            // than this process's memory growing.
            self.backlog.wait_for_room(&self.label, || self.read_state(State::reads_on));
        };
        if let Err(e) = decoder.finish() {
            log::warn!("{}: {e}", self.label);
        }
        cause
    }

    /// Hands on what a read routed, the lock released: in frame order,
    /// events to their sessions' queues (never blocking), waits to the
    /// handler pool, lifecycle params to their receivers; then the sessions
    /// that got events deliver them (one batch each); then the answers of
    /// this read go to their calls, each of which returns once the events
    /// before it are delivered, and an open's caller finds what came with
    /// its answer (a capabilities change) in place.
    fn act_on_read(self: &Arc<Self>, read: &mut StateRead) {
        let StateRead { routed, bytes, flush, answered, start_in_order } = read;
        for item in routed.drain(..) {
            match item {
                Routed::Event { target, event, event_type, capabilities, canvas } => {
                    let event = &bytes[event];
                    if capabilities {
                        target.change_capabilities(&mut |c| {
                            c.apply_event(event);
                        });
                    }
                    if canvas {
                        with_canvas_change(event, |change| target.change_open_canvases(change, false));
                    }
                    let event_type = event_type.and_then(|t| std::str::from_utf8(&bytes[t]).ok());
                    target.push_event(event, event_type);
                }
                Routed::Wait { target, wait } => target.obligation(self.job(wait)),
                Routed::ClientWide(wait) => {
                    let (job, client_wide) = (self.job(wait), Arc::clone(&self.client_wide));
                    self.workers.submit(move || client_wide(job));
                }
                Routed::Opened { target, body, name } => {
                    let body = &bytes[body];
                    target.change_capabilities(&mut |c| *c = copilot_core::Capabilities::from_open_answer(body));
                    let mut first = true;
                    for change in copilot_core::open_answer_canvases(body) {
                        target.change_open_canvases(change, std::mem::take(&mut first));
                    }
                    if let (None, Some(name)) = (target.id(), &name) {
                        target.named(name);
                    }
                }
                Routed::Lifecycle(params) => self.deliver_lifecycle(&bytes[params]),
            }
        }
        if std::mem::take(start_in_order) {
            self.run_in_order();
        }
        for (_, target) in flush.drain(..) {
            target.flush();
        }
        if !answered.is_empty() {
            let mark = self.fence_mark();
            for (reply, outcome) in answered.drain(..) {
                reply.send_after(outcome, mark);
            }
        }
    }

    /// A wait of the agent as the handler layer takes it, with its way back.
    fn job(self: &Arc<Self>, wait: Wait) -> Job {
        let reply = Replier { conn: Arc::clone(self), id: wait.id };
        Job { kind: wait.kind, name: wait.name, data: wait.data, reply }
    }

    /// Runs the ordered lane's waits on the handler pool, one at a time in
    /// the order the CLI sent them (a pool runs its tasks side by side,
    /// which would let a later chunk of a request overtake an earlier one),
    /// until the state has none left.
    fn run_in_order(self: &Arc<Self>) {
        let conn = Arc::clone(self);
        self.workers.submit(move || {
            while let Some(wait) = conn.with_state(|s, _| s.next_in_order()) {
                let job = conn.job(wait);
                if let Err(panic) = catch_unwind(AssertUnwindSafe(|| (conn.client_wide)(job))) {
                    log::error!("{}: a client-wide handler panicked: {}", conn.label, panic_text(&*panic));
                }
            }
        });
    }

    /// Hands a `session.lifecycle`'s params to every receiver (which
    /// reads them; the driver knows no typed event).
    fn deliver_lifecycle(&self, params: &[u8]) {
        lock(&self.lifecycle).retain_mut(|sink| sink(params));
    }

    /// Ends the connection: every waiting call fails with `Disconnected`
    /// and the cause, every session's event stream ends.
    pub(super) fn shut_down(&self, cause: CloseCause) {
        let reason = cause.to_string();
        let (ended, outbox) = {
            let mut locked = lock(&self.locked);
            (locked.state.shut_down(cause), Arc::clone(&locked.outbox))
        };
        // Nothing more is written (the callers waiting for room are woken).
        outbox.fail(&reason);
        // The timer ends, and a paused reader looks again.
        self.timer_wake.notify_all();
        self.backlog.nudge();
        if ended.forgotten > 0 {
            log::warn!("{}: {} waits of the agent were open when the connection ended", self.label, ended.forgotten);
        }
        for w in ended.failed {
            w.fail(Error::Disconnected(reason.clone()));
        }
        for target in ended.sessions {
            target.close(&reason);
        }
        lock(&self.lifecycle).clear();
        ended.woken.into_iter().for_each(std::task::Waker::wake);
    }
}

/// Runs `f` on the canvas change of `event` (a `canvas.opened` or
/// `canvas.closed`, as the state found), read again from its bytes.
fn with_canvas_change(event: &[u8], f: impl FnOnce(copilot_core::CanvasChange<'_>)) {
    let Ok(event) = copilot_core::Value::parse(event) else { return };
    let Some(event_type) = event.get("type").and_then(|t| t.as_str()) else { return };
    if let Some(change) = copilot_core::read_canvas_change(event_type, event.get("data")) {
        f(change);
    }
}
