//! One run of a seed, its failure report, and the shrinking of a failure
//! to the shortest prefix of steps that still fails the same invariant.

use std::fmt;
use std::panic::{catch_unwind, AssertUnwindSafe};

use copilot_core::EngineStats;

use crate::check::{Checker, Counts, Expect, Violation};
use crate::world::World;

/// How to run.
#[derive(Debug, Clone, Copy, Default)]
pub struct Options {
    /// What the checker lets pass.
    pub expect: Expect,
    /// Keep a line per step (slower; for a replay).
    pub trace: bool,
    /// The CLI does quick messages out of the order they came in (the
    /// real one does not): off by default.
    pub cli_reorders: bool,
    /// A bug planted in the simulated host, for the simulator's own
    /// tests (the checker must catch it): none by default.
    pub fault: Option<crate::host::Fault>,
    /// The driver mode: copilot-host's driver state, driven as its
    /// threaded shell drives it, instead of the engine alone
    /// ([`crate::driver`]).
    pub driver: bool,
}

/// What a run that held every invariant did.
#[derive(Debug, Clone)]
pub struct Summary {
    /// Its seed.
    pub seed: u64,
    /// Scheduler steps, then the drain's.
    pub steps: u64,
    /// Steps of the drain at the end.
    pub drain_steps: u64,
    /// Virtual time at the end (ms).
    pub virtual_ms: u64,
    /// Connection drops.
    pub drops: u64,
    /// Recoveries that got the connection back, and that gave up.
    pub recovered: u64,
    /// Recoveries that gave up.
    pub gave_up: u64,
    /// Requests of the host that timed out.
    pub timeouts: u64,
    /// What the checker counted.
    pub counts: Counts,
    /// The engine's counters at the end.
    pub engine: EngineStats,
    /// The trace, if asked for.
    pub trace: Vec<String>,
    /// What the driver mode counted (in that mode).
    pub driver: Option<crate::driver::host::DriverCounts>,
}

/// A run that broke an invariant (or panicked).
#[derive(Debug, Clone)]
pub struct Failure {
    /// Its seed.
    pub seed: u64,
    /// The scheduler steps it was run with.
    pub steps: u64,
    /// The step at which the invariant broke (the drain's steps follow the
    /// scheduler's).
    pub step: u64,
    /// What broke.
    pub violation: Violation,
    /// The trace (only when run with [`Options::trace`], or shrunk).
    pub trace: Vec<String>,
    /// Set once shrunk: the steps of the original run.
    pub original_steps: Option<u64>,
    /// What it was run with.
    pub options: Options,
}

impl Failure {
    /// The command that replays it.
    pub fn replay_command(&self) -> String {
        let reorders = if self.options.cli_reorders { " --cli-reorders" } else { "" };
        let driver = if self.options.driver { " --driver" } else { "" };
        format!(
            "cargo run --release -p copilot-sim -- --seed {} --steps {} --trace{}{reorders}{driver}",
            self.seed,
            self.steps,
            self.options.expect.flags()
        )
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "seed {} failed at step {} (of {} scheduler steps)", self.seed, self.step, self.steps)?;
        if let Some(original) = self.original_steps {
            writeln!(f, "  (shrunk from {original} steps: the shortest prefix that still fails this invariant)")?;
        }
        writeln!(f, "  invariant: {}", self.violation.invariant)?;
        writeln!(f, "  seen: {}", self.violation.detail)?;
        if !self.trace.is_empty() {
            const SHOWN: usize = 120;
            let skip = self.trace.len().saturating_sub(SHOWN);
            writeln!(f, "  trace ({} steps{}):", self.trace.len(), if skip > 0 { ", the last shown" } else { "" })?;
            for line in &self.trace[skip..] {
                writeln!(f, "    {line}")?;
            }
        }
        write!(f, "  replay: {}", self.replay_command())
    }
}

/// Runs `seed` for `steps` scheduler steps, then drains, with today's
/// expectations; a failure comes shrunk, with its trace.
pub fn run(seed: u64, steps: u64) -> Result<Summary, Failure> {
    let options = Options::default();
    run_with(seed, steps, &options).map_err(|f| shrink(f, &options))
}

/// Runs `seed` for `steps` scheduler steps, then drains, checking every
/// invariant after each step. A panic (of the engine or of the
/// simulation) is a failure too.
pub fn run_with(seed: u64, steps: u64, options: &Options) -> Result<Summary, Failure> {
    let mut trace = Vec::new();
    let mut step = 0;
    let outcome = catch_unwind(AssertUnwindSafe(|| run_inner(seed, steps, options, &mut trace, &mut step)));
    let trace = if options.trace { trace } else { Vec::new() };
    match outcome {
        Ok(Ok(mut summary)) => {
            summary.trace = trace;
            Ok(summary)
        }
        Ok(Err(violation)) => {
            Err(Failure { seed, steps, step, violation, trace, original_steps: None, options: *options })
        }
        Err(panic) => {
            let text = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            let violation = Violation { invariant: "no panic", detail: text };
            Err(Failure { seed, steps, step, violation, trace, original_steps: None, options: *options })
        }
    }
}

fn run_inner(
    seed: u64,
    steps: u64,
    options: &Options,
    trace: &mut Vec<String>,
    step: &mut u64,
) -> Result<Summary, Violation> {
    if options.driver {
        return run_driver(seed, steps, options, trace, step);
    }
    let mut world = World::new(seed, options.cli_reorders, options.fault);
    let mut checker = Checker::new(options.expect);
    checker.step(&world)?;
    for i in 0..steps {
        *step = i;
        let line = world.step();
        if options.trace {
            trace.push(format!("#{i} t={} {}", world.now, line.as_deref().unwrap_or("(nothing)")));
        }
        checker.step(&world)?;
    }
    let mut drained = 0;
    world.drain(
        |now, line| {
            *step += 1;
            drained += 1;
            if options.trace {
                trace.push(format!("#{} t={now} {line}", *step));
            }
        },
        |w| checker.step(w),
    )?;
    *step += 1;
    let counts = checker.finish(&world)?;
    let seen = &world.host.seen;
    Ok(Summary {
        seed,
        steps: steps + drained,
        drain_steps: drained,
        virtual_ms: world.now,
        drops: world.drops,
        recovered: seen.recovered,
        gave_up: seen.gave_up,
        timeouts: seen.timeouts,
        counts,
        engine: world.host.engine().stats(world.now),
        trace: Vec::new(),
        driver: None,
    })
}

/// A run of the driver mode ([`crate::driver`]).
fn run_driver(
    seed: u64,
    steps: u64,
    options: &Options,
    trace: &mut Vec<String>,
    step: &mut u64,
) -> Result<Summary, Violation> {
    use crate::driver::{check, DriverWorld};
    let mut world = DriverWorld::new(seed);
    check::step(&world)?;
    for i in 0..steps {
        *step = i;
        let line = world.step();
        if options.trace {
            trace.push(format!("#{i} t={} {line}", world.now));
        }
        check::step(&world)?;
    }
    let mut drained = 0;
    world.drain(
        |now, line| {
            *step += 1;
            drained += 1;
            if options.trace {
                trace.push(format!("#{} t={now} {line}", *step));
            }
        },
        check::step,
    )?;
    *step += 1;
    check::finish(&world)?;
    Ok(Summary {
        seed,
        steps: steps + drained,
        drain_steps: drained,
        virtual_ms: world.now,
        drops: 0,
        recovered: 0,
        gave_up: 0,
        timeouts: 0,
        counts: Counts::default(),
        engine: world.host.engine_stats(world.now),
        trace: Vec::new(),
        driver: Some(world.host.counts),
    })
}

/// The shortest prefix of `failure`'s steps that still fails the same
/// invariant (a binary search, checked), with its trace.
pub fn shrink(failure: Failure, options: &Options) -> Failure {
    let fails = |steps: u64| match run_with(failure.seed, steps, options) {
        Err(f) if f.violation.invariant == failure.violation.invariant => Some(f),
        _ => None,
    };
    let (mut lo, mut hi) = (0, failure.steps.min(failure.step + 1));
    if fails(hi).is_none() {
        hi = failure.steps;
    }
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if fails(mid).is_some() {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    let traced = Options { trace: true, ..*options };
    match run_with(failure.seed, hi, &traced) {
        Err(mut f) if f.violation.invariant == failure.violation.invariant => {
            f.original_steps = Some(failure.steps).filter(|s| *s != hi);
            f
        }
        _ => {
            let mut f = run_with(failure.seed, failure.steps, &traced).err().unwrap_or(failure);
            f.original_steps = None;
            f
        }
    }
}
