//! Recovery after the connection to the CLI is lost while the client did
//! not end it (the CLI it started exited, a server's connection dropped),
//! decided once for every host: when to try again and how often, which
//! sessions to resume and in what order, when to read a session's log and
//! how far back, what to deliver from it, and when to give up.
//!
//! [`Recovery`] is the sequence, without I/O and with time passed in, in
//! the style of the handshake ([`read_handshake_answer`](crate::read_handshake_answer)):
//! the host calls [`Engine::connection_lost`](crate::Engine::connection_lost),
//! holds the engine's frames, starts a [`Recovery`], then does each
//! [`RecoveryStep`] that [`Recovery::step`] gives and reports how it went
//! with the next call ([`RecoveryReport`]), until [`RecoveryStep::Recovered`]
//! (the frames held go out) or [`RecoveryStep::GaveUp`] (the connection
//! ends with the cause). An attempt that fails is reported after the host
//! called `connection_lost` again (its calls died with it).
//!
//! The steps, in order:
//! 1. [`Wait`](RecoveryStep::Wait) each of [`RECOVERY_BACKOFF_MS`] in turn
//!    before an attempt; past the last, [`GaveUp`](RecoveryStep::GaveUp).
//! 2. [`Connect`](RecoveryStep::Connect): a new connection (the CLI started
//!    again, the server connected to again) and its handshake.
//! 3. For each session the engine holds open, in slot order:
//!    [`Resume`](RecoveryStep::Resume) it with the options it was opened
//!    with and [`RECOVERY_RESUME_FLAG`], holding its live events; the
//!    engine then asks the CLI what is pending
//!    ([`Engine::reconcile`](crate::Engine::reconcile)). A resume the CLI
//!    refuses (its state is gone) [`End`](RecoveryStep::End)s that session
//!    with [`RESUME_REFUSED`] and the CLI's words; the others carry on.
//! 4. When a durable event had been delivered to it, or it was created
//!    here (then all of its log is this client's, read from its start), read its log back
//!    ([`ReadLog`](RecoveryStep::ReadLog), [`EVENT_LOG_READ`](crate::EVENT_LOG_READ)) a page at a
//!    time, at most [`EVENT_LOG_MAX_PAGES`](crate::EVENT_LOG_MAX_PAGES),
//!    until it reaches the last event delivered; then
//!    [`Deliver`](RecoveryStep::Deliver) what follows it and the live
//!    events held, merged in wire order, each event once
//!    ([`gap_delivery_order`](crate::gap_delivery_order)).

use crate::engine::{undelivered_from, Engine, EVENT_LOG_MAX_PAGES};
use crate::frame::FrameBuffer;
use crate::session::SessionHandle;

/// How long to wait before each attempt to start the CLI again (or to
/// reconnect), in milliseconds: one attempt per entry, then recovery gives
/// up. The first is short (a CLI that was killed usually starts at once);
/// the later ones leave room for a machine under load.
pub static RECOVERY_BACKOFF_MS: &[u64] = &[250, 1_000, 4_000];

/// The member set `true` in the params of the resume that follows a
/// recovery: the CLI carries on with the turn it was running and keeps
/// its waits pending (without it, their tool calls are ended as
/// interrupted at the next prompt; see `session.resume` in the schema).
pub const RECOVERY_RESUME_FLAG: &str = "continuePendingWork";

/// How much of a session's gap a recovery delivered ([`RecoveryStep::Deliver`]):
/// the events the connection lost that the session's log holds (its
/// durable events; ephemeral ones, such as deltas, a restarted CLI has not
/// kept and are never read back).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Gap {
    /// Whole: the log was read back to the last event delivered before the
    /// loss, and every durable event after it was delivered (perhaps none).
    Whole,
    /// Cut: the last event delivered was not within the
    /// [`EVENT_LOG_MAX_PAGES`] pages of [`EVENT_LOG_PAGE`](crate::EVENT_LOG_PAGE)
    /// events read back, so where the gap starts is unknown: nothing of the
    /// log was delivered (none twice), and durable events of the gap may be
    /// missing. (For a session created here with nothing delivered before
    /// the loss: the log's start was not within them.)
    Cut,
    /// Unmarked: no durable event had been delivered to the session before
    /// the loss, and it was resumed or joined here (its log holds history
    /// this client never saw), so nothing marks where its gap starts; the
    /// log was not read, and durable events of the gap may be missing. (A
    /// session created here has its whole log read back instead: `Whole`.)
    Unmarked,
}

/// The names of [`Gap`]'s values, in its order, as the hosts report them
/// (`"whole"`, `"cut"`, `"unmarked"`).
pub static GAP_NAMES: [&str; 3] = ["whole", "cut", "unmarked"];

impl Gap {
    /// Its name in [`GAP_NAMES`].
    pub fn name(self) -> &'static str {
        GAP_NAMES[self as usize]
    }
}

/// What a session whose resume the CLI refused ends with, followed by the
/// CLI's error message ([`RecoveryStep::End`]).
pub const RESUME_REFUSED: &str = "session.resume failed after the connection was recovered: ";

/// The cause a recovery that gave up ends the connection with: the first
/// text, the number of attempts, the second, then the last failure
/// ([`RecoveryStep::GaveUp`]).
pub const RECOVERY_GAVE_UP: [&str; 2] = ["the connection was lost and ", " attempts to recover it failed; the last: "];

/// What the host does next ([`Recovery::step`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecoveryStep {
    /// Wait until `until` (the host's clock, in ms), or less if the client
    /// stops meanwhile (then the recovery ends), then report
    /// [`RecoveryReport::Next`].
    Wait {
        /// When to go on.
        until: u64,
    },
    /// Attempt `attempt` (from 1), after a wait of `after_ms`: make a new
    /// connection and run the handshake on it (and what follows every
    /// handshake, such as registering as the inference provider); report
    /// [`RecoveryReport::Connected`] or [`RecoveryReport::Failed`].
    Connect {
        /// Which attempt.
        attempt: usize,
        /// The wait before it.
        after_ms: u64,
    },
    /// Resume this session under its own id with the options it was opened
    /// with and [`RECOVERY_RESUME_FLAG`], then send what follows its open;
    /// hold its live events from now on until its
    /// [`Deliver`](Self::Deliver). Report [`RecoveryReport::Resumed`],
    /// [`RecoveryReport::Refused`] (an error answer to the resume),
    /// [`RecoveryReport::Skipped`] (the host does not know how to open it
    /// again: it stays as it is), or [`RecoveryReport::Failed`].
    Resume {
        /// The session.
        handle: SessionHandle,
    },
    /// Read page `page` (from 0) of the session's log backward
    /// ([`EVENT_LOG_READ`](crate::EVENT_LOG_READ): `{sessionId, direction:
    /// "backward", max: EVENT_LOG_PAGE, includeEphemeral: false}`, and from
    /// page 1 on the `cursor` the page before answered), keeping the events
    /// read so far, oldest first; report [`RecoveryReport::LogRead`] with
    /// their ids, or [`RecoveryReport::Failed`].
    ReadLog {
        /// The session.
        handle: SessionHandle,
        /// Which page.
        page: usize,
    },
    /// Deliver the events read from the log from index `from` on, in order
    /// (none when `from` is `None`: nothing was read, or the last event
    /// delivered was not within the pages read and the gap is unknown, so
    /// nothing is delivered twice) and the live events held, in the order
    /// [`gap_delivery_order`](crate::gap_delivery_order) gives (wire
    /// order, an event both brought once); deliver as before from then on.
    /// The session is resumed; tell the user how much of its gap was
    /// delivered (`gap`). Report [`RecoveryReport::Next`].
    Deliver {
        /// The session.
        handle: SessionHandle,
        /// The first event of the log to deliver.
        from: Option<usize>,
        /// How much of the gap this delivers; anything but
        /// [`Gap::Whole`] is worth a warning.
        gap: Gap,
    },
    /// The CLI refused to resume the session (its state is gone): it ends
    /// with [`RESUME_REFUSED`] and the CLI's error message, and its slot is
    /// released. Report [`RecoveryReport::Next`].
    End {
        /// The session.
        handle: SessionHandle,
    },
    /// The connection is back: the engine's frames held since the loss go
    /// out. The recovery is over.
    Recovered {
        /// Sessions resumed.
        sessions: usize,
        /// From the loss to now, in ms.
        took_ms: u64,
    },
    /// Every attempt failed: the connection ends, and every call and
    /// stream with it, with [`RECOVERY_GAVE_UP`] around `attempts` and the
    /// last failure. The recovery is over.
    GaveUp {
        /// Attempts made.
        attempts: usize,
    },
}

/// How the step before went ([`Recovery::step`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecoveryReport<I> {
    /// Done (after [`RecoveryStep::Wait`], [`RecoveryStep::Deliver`] and
    /// [`RecoveryStep::End`]), or nothing to report (the first call).
    Next,
    /// The new connection is up and its handshake done.
    Connected,
    /// The step failed: the attempt fails (call
    /// [`Engine::connection_lost`](crate::Engine::connection_lost) first:
    /// what it sent may be lost).
    Failed,
    /// The CLI resumed the session.
    Resumed,
    /// The CLI answered the resume with an error.
    Refused,
    /// The session is not opened again; it stays as it is.
    Skipped,
    /// The log read so far: `ids`, the [`event_id_hash`](crate::event_id_hash)
    /// of each event's id oldest first (`None` for an event without one),
    /// and whether the CLI has more further back (`hasMore`, and the last
    /// page was not empty).
    LogRead {
        /// The ids read so far.
        ids: I,
        /// Whether there is more to read.
        more: bool,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Before attempt `attempt + 1`, until `until`.
    Pause { until: u64 },
    /// Attempt `attempt` connects.
    Connecting,
    /// The session is being resumed; `mark` is where its gap starts
    /// (0 in `Reading`: at the log's start).
    Resuming { handle: SessionHandle, mark: Option<u64> },
    /// Its log is being read; page `page` was asked.
    Reading { handle: SessionHandle, mark: u64, page: usize },
    /// Its step (`Deliver` or `End`) is being done; the next session follows.
    Next { after: usize },
    /// Over.
    Over,
}

/// One recovery of a lost connection ([the module](self)).
#[derive(Debug, Clone)]
pub struct Recovery {
    lost_at: u64,
    /// Attempts started.
    attempt: usize,
    /// Sessions resumed by the running attempt.
    resumed: usize,
    phase: Phase,
}

impl Recovery {
    /// A recovery of a connection lost at `now` (the host's clock, in ms).
    pub fn new(now: u64) -> Self {
        Recovery { lost_at: now, attempt: 0, resumed: 0, phase: Phase::Pause { until: now + RECOVERY_BACKOFF_MS[0] } }
    }

    /// Attempts started so far.
    pub fn attempts(&self) -> usize {
        self.attempt
    }

    /// Whether it is over ([`RecoveryStep::Recovered`] or
    /// [`RecoveryStep::GaveUp`] was given).
    pub fn is_over(&self) -> bool {
        self.phase == Phase::Over
    }

    /// Takes `report` (how the step before went) and gives the next step.
    /// A report that does not fit the step before (a host's mistake) is
    /// taken as [`RecoveryReport::Failed`]. Once over, it stays over: the
    /// step it ended with comes again.
    pub fn step<
        T: Clone,
        W,
        P: FrameBuffer,
        X: FrameBuffer,
        const S: usize,
        const Q: usize,
        const O: usize,
        I: IntoIterator<Item = Option<u64>>,
    >(
        &mut self,
        engine: &mut Engine<T, W, P, X, S, Q, O>,
        now: u64,
        report: RecoveryReport<I>,
    ) -> RecoveryStep {
        use RecoveryReport as R;
        match (self.phase, report) {
            (Phase::Over, _) => self.over(now),
            (Phase::Pause { until }, R::Next) if now < until => RecoveryStep::Wait { until },
            (Phase::Pause { .. }, R::Next) => {
                self.attempt += 1;
                self.resumed = 0;
                self.phase = Phase::Connecting;
                RecoveryStep::Connect { attempt: self.attempt, after_ms: RECOVERY_BACKOFF_MS[self.attempt - 1] }
            }
            (Phase::Connecting, R::Connected) => self.next_session(engine, 0, now),
            (Phase::Resuming { handle, mark }, R::Resumed) => {
                self.resumed += 1;
                // Gone meanwhile: nothing to ask.
                let _ = engine.reconcile(handle);
                // A session created here with nothing delivered yet: all
                // of its log is this client's (read from its start, 0).
                match mark.or(engine.created_here(handle).then_some(0)) {
                    Some(mark) => {
                        self.phase = Phase::Reading { handle, mark, page: 0 };
                        RecoveryStep::ReadLog { handle, page: 0 }
                    }
                    None => self.deliver(handle, None, Gap::Unmarked),
                }
            }
            (Phase::Resuming { handle, .. }, R::Refused) => {
                self.phase = Phase::Next { after: handle.index() };
                RecoveryStep::End { handle }
            }
            (Phase::Resuming { handle, .. }, R::Skipped) => self.next_session(engine, handle.index() + 1, now),
            (Phase::Reading { handle, mark, page }, R::LogRead { ids, more }) => {
                let mut last = None;
                let from = undelivered_from(mark, ids.into_iter().inspect(|id| last = Some(*id)));
                match from {
                    Some(from) => {
                        // The gap goes out by the host, not through the
                        // engine: its last event is the session's last
                        // delivered unless a live one was routed since.
                        if let Some(Some(last)) = last {
                            engine.gap_delivered(handle, mark, last);
                        }
                        self.deliver(handle, Some(from), Gap::Whole)
                    }
                    None if more && page + 1 < EVENT_LOG_MAX_PAGES => {
                        self.phase = Phase::Reading { handle, mark, page: page + 1 };
                        RecoveryStep::ReadLog { handle, page: page + 1 }
                    }
                    // Nothing delivered before, and the log's start read:
                    // all of it goes. Short of its start, nothing of it
                    // goes (`Cut`): the live events held (a failed
                    // attempt's too) may be older than all that was read,
                    // and would come after it.
                    None if mark == 0 && !more => {
                        if let Some(Some(last)) = last {
                            engine.gap_delivered(handle, 0, last);
                        }
                        self.deliver(handle, Some(0), Gap::Whole)
                    }
                    None => self.deliver(handle, None, Gap::Cut),
                }
            }
            (Phase::Next { after }, R::Next) => self.next_session(engine, after + 1, now),
            // Failed, or a report that does not fit.
            _ => {
                // The events the session held since its resume were not
                // delivered after its gap (the hosts keep holding them):
                // the next attempt reads the log back to where the gap
                // started, not to what the live stream routed meanwhile.
                if let Phase::Resuming { handle, mark } = self.phase {
                    engine.set_last_durable(handle, mark.unwrap_or(0));
                }
                if let Phase::Reading { handle, mark, .. } = self.phase {
                    engine.set_last_durable(handle, mark);
                }
                self.failed(now)
            }
        }
    }

    fn deliver(&mut self, handle: SessionHandle, from: Option<usize>, gap: Gap) -> RecoveryStep {
        self.phase = Phase::Next { after: handle.index() };
        RecoveryStep::Deliver { handle, from, gap }
    }

    /// Resumes the first session open in a slot from `index` on, or ends.
    fn next_session<T: Clone, W, P: FrameBuffer, X: FrameBuffer, const S: usize, const Q: usize, const O: usize>(
        &mut self,
        engine: &mut Engine<T, W, P, X, S, Q, O>,
        index: usize,
        now: u64,
    ) -> RecoveryStep {
        match engine.router().sessions().active_from(index) {
            Some(handle) => {
                // Where its gap starts, before the resume's events move it.
                self.phase = Phase::Resuming { handle, mark: engine.last_durable_event(handle) };
                RecoveryStep::Resume { handle }
            }
            None => {
                self.phase = Phase::Over;
                self.over(now)
            }
        }
    }

    fn failed(&mut self, now: u64) -> RecoveryStep {
        match RECOVERY_BACKOFF_MS.get(self.attempt) {
            Some(delay) => {
                self.phase = Phase::Pause { until: now + delay };
                RecoveryStep::Wait { until: now + delay }
            }
            None => {
                self.phase = Phase::Over;
                self.resumed = usize::MAX;
                RecoveryStep::GaveUp { attempts: self.attempt }
            }
        }
    }

    fn over(&self, now: u64) -> RecoveryStep {
        if self.resumed == usize::MAX {
            RecoveryStep::GaveUp { attempts: self.attempt }
        } else {
            RecoveryStep::Recovered { sessions: self.resumed, took_ms: now.saturating_sub(self.lost_at) }
        }
    }
}
