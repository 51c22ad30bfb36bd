//! What the checker lets pass: the known issues of today's engine, each
//! allowed and counted by default, or a failure when made strict. A run
//! with every switch strict shows them all; the default lets the
//! simulator go on finding new ones.

/// A known issue: a way the engine breaks an invariant that is
/// documented, or found by this simulator and reported, and not fixed yet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Known {
    /// A wait left to another client ([`copilot_core::Unhandled::Leave`])
    /// that no client answered. The engine now refuses such a wait at its
    /// deadline; one whose session is released here is still forgotten.
    LeftUnanswered,
    /// A durable event the CLI persisted while the connection was lost,
    /// not read back because no durable event had been delivered to its
    /// session before the loss (the recovery's `Gap::Unmarked`). Fixed
    /// for the sessions created here: their whole log is read back
    /// (e92246c); a joined one stays unmarked (documented), but its
    /// `session.resume` event marks it.
    UnmarkedGap,
    /// A recovery's delivery (the gap read back, then the live events held
    /// but those the log brought) hands events over out of wire order: an
    /// ephemeral event that came live between two durable events after
    /// the resume is delivered after both. Fixed: the core's
    /// `gap_delivery_order` (d59d26d).
    RecoveryOrder,
    /// A durable event of a gap lost because a recovery attempt resumed
    /// the session and failed before delivering the gap: the live events
    /// routed meanwhile moved the engine's mark of the last durable event
    /// delivered past it, so the next attempt's read stops short of it.
    /// Fixed: a failed attempt puts the mark back where the gap started,
    /// and the hosts keep the session's events held for the next
    /// attempt's delivery.
    FailedAttemptGap,
    /// A wait the engine refused at once (obligation table full, data
    /// unreadable) is not remembered as answered: a pending list read
    /// before the CLI took the refusal names it again, and it is answered
    /// a second time (the CLI says `success:false`). Fixed: refusals at
    /// once are remembered, in a ring of their own (89e1b17, 533dcd6).
    RefusedThenListed,
    /// An answer still queued in the engine when the connection is lost
    /// is forgotten as unacknowledged ([`copilot_core::Engine::connection_lost`])
    /// although it goes out on the next connection: a pending list sent
    /// before it (queued during a recovery) names the wait again, and it
    /// is answered a second time (the CLI says `success:false`). Fixed:
    /// only the answers that went to the lost connection are forgotten
    /// (e7b2c80).
    ForgottenQueuedAnswer,
    /// The response to a server request, queued while a recovery held
    /// the engine's frames, survives the loss of that connection
    /// ([`copilot_core::Engine::connection_lost`] keeps queued frames) and
    /// goes out on the next one, where the CLI (a new process, its request
    /// ids from 1 again) never sent that request, or sent another request
    /// under the same id, which it then answers. Fixed for the queued
    /// responses (9f004ab); still open for a parked server request of the
    /// lost connection, routed again (and refused) after the loss.
    StaleResponse,
    /// Documented: the engine remembers the last `OBLIGATIONS` waits it
    /// discharged; a wait a pending list names after more discharges than
    /// that is taken on again and answered a second time (the CLI says
    /// `success:false`).
    BeyondMemory,
    /// An answer the CLI refused (`success:false`: the session was not
    /// loaded in a restarted CLI, its release having sent the refusal
    /// there) is remembered as given: when a list names the wait again
    /// once the session is open again here, the engine skips it and
    /// nobody answers. Fixed: an answer the CLI refused is forgotten on
    /// its acknowledgement (17559cf).
    RefusedAnswerRemembered,
    /// Documented (the recovery's `Gap::Cut`): the last event delivered
    /// before the loss is not within the pages of the log read back, so
    /// none of the gap is delivered.
    CutGap,
}

impl Known {
    /// Every known issue.
    pub const ALL: [Known; 10] = [
        Known::LeftUnanswered,
        Known::UnmarkedGap,
        Known::RecoveryOrder,
        Known::FailedAttemptGap,
        Known::RefusedThenListed,
        Known::ForgottenQueuedAnswer,
        Known::StaleResponse,
        Known::BeyondMemory,
        Known::RefusedAnswerRemembered,
        Known::CutGap,
    ];

    /// Its name on the command line (`--strict-<name>`) and in reports.
    pub const fn name(self) -> &'static str {
        match self {
            Known::LeftUnanswered => "left-unanswered",
            Known::UnmarkedGap => "unmarked-gap",
            Known::RecoveryOrder => "recovery-order",
            Known::FailedAttemptGap => "failed-attempt-gap",
            Known::RefusedThenListed => "refused-then-listed",
            Known::ForgottenQueuedAnswer => "forgotten-queued-answer",
            Known::StaleResponse => "stale-response",
            Known::BeyondMemory => "beyond-memory",
            Known::RefusedAnswerRemembered => "refused-answer-remembered",
            Known::CutGap => "cut-gap",
        }
    }

    /// Whether the engine has fixed it (its commit named in its doc): a
    /// run then fails on it by default.
    pub const fn is_fixed(self) -> bool {
        matches!(
            self,
            Known::RecoveryOrder
                | Known::FailedAttemptGap
                | Known::RefusedThenListed
                | Known::ForgottenQueuedAnswer
                | Known::RefusedAnswerRemembered
        )
    }

    /// The issue named `name`.
    pub fn from_name(name: &str) -> Option<Known> {
        Known::ALL.into_iter().find(|k| k.name() == name)
    }

    pub(crate) fn index(self) -> usize {
        self as usize
    }
}

/// Which known issues fail a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Expect {
    strict: [bool; Known::ALL.len()],
}

impl Default for Expect {
    /// The issues the engine has fixed fail a run (a regression shows);
    /// those that stand, and the documented limits, are let pass.
    fn default() -> Self {
        let mut strict = [false; Known::ALL.len()];
        for k in Known::ALL {
            strict[k.index()] = k.is_fixed();
        }
        Expect { strict }
    }
}

impl Expect {
    /// Every known issue fails a run.
    pub fn strict() -> Self {
        Expect { strict: [true; Known::ALL.len()] }
    }

    /// `issue` fails a run (`true`) or is allowed and counted.
    pub fn with(mut self, issue: Known, strict: bool) -> Self {
        self.strict[issue.index()] = strict;
        self
    }

    /// Whether `issue` fails a run.
    pub fn is_strict(&self, issue: Known) -> bool {
        self.strict[issue.index()]
    }

    /// The command-line flags that ask for these expectations (those that
    /// differ from the default).
    pub fn flags(&self) -> String {
        if *self == Expect::strict() {
            return " --strict".into();
        }
        let default = Expect::default();
        let differ = Known::ALL.into_iter().filter(|k| self.is_strict(*k) != default.is_strict(*k));
        differ.map(|k| format!(" --{}-{}", if self.is_strict(k) { "strict" } else { "allow" }, k.name())).collect()
    }
}
