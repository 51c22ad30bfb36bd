//! Runs the simulator over seeds, or replays one.
//!
//! ```text
//! sim --seeds 0..100000 [--steps 300] [--strict | --strict-<issue>] [--cli-reorders] [--driver] [--keep-going]
//! sim --seed 42 [--steps 300] [--trace]
//! ```
//!
//! `--seeds A..` (no end) runs until stopped. A failure prints its seed,
//! step, invariant, shrunk trace and the command that replays it, and
//! ends the run with status 1 (unless `--keep-going`). The known issues
//! of today's engine are let pass and counted unless made strict
//! (`--strict` for all; the names are in `copilot_sim::Known`); those the
//! engine has fixed fail by default (`--allow-<issue>` lets one pass).
#![forbid(unsafe_code)]

use std::process::ExitCode;
use std::time::Instant;

use copilot_sim::{run_with, shrink, Counts, Expect, Known, Options};

const USAGE: &str = "usage: sim (--seeds A..B | --seeds A.. | --seed N) [--steps K] [--trace] [--strict | --strict-<issue> | --allow-<issue>] [--cli-reorders] [--driver] [--keep-going]
issues: left-unanswered unmarked-gap recovery-order failed-attempt-gap refused-then-listed forgotten-queued-answer stale-response beyond-memory refused-answer-remembered cut-gap";

struct Args {
    seeds: (u64, Option<u64>),
    single: bool,
    steps: u64,
    options: Options,
    keep_going: bool,
}

fn parse() -> Result<Args, String> {
    let mut args =
        Args { seeds: (0, Some(1_000)), single: false, steps: 300, options: Options::default(), keep_going: false };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        let mut value = || it.next().ok_or(format!("{arg} needs a value"));
        match arg.as_str() {
            "--seeds" => {
                let v = value()?;
                let (a, b) = v.split_once("..").ok_or(format!("--seeds {v}: expected A..B or A.."))?;
                let a = a.parse().map_err(|_| format!("--seeds {v}: bad start"))?;
                let b = if b.is_empty() { None } else { Some(b.parse().map_err(|_| format!("--seeds {v}: bad end"))?) };
                args.seeds = (a, b);
            }
            "--seed" => {
                let n: u64 = value()?.parse().map_err(|_| "--seed: not a number".to_owned())?;
                args.seeds = (n, Some(n + 1));
                args.single = true;
            }
            "--steps" => args.steps = value()?.parse().map_err(|_| "--steps: not a number".to_owned())?,
            "--trace" => args.options.trace = true,
            "--strict" => args.options.expect = Expect::strict(),
            "--keep-going" => args.keep_going = true,
            "--cli-reorders" => args.options.cli_reorders = true,
            "--driver" => args.options.driver = true,
            "-h" | "--help" => return Err(USAGE.to_owned()),
            other => {
                let strict = other.strip_prefix("--strict-").and_then(Known::from_name).map(|k| (k, true));
                let allow = other.strip_prefix("--allow-").and_then(Known::from_name).map(|k| (k, false));
                match strict.or(allow) {
                    Some((issue, strict)) => args.options.expect = args.options.expect.with(issue, strict),
                    None => return Err(format!("unknown argument {other}\n{USAGE}")),
                }
            }
        }
    }
    Ok(args)
}

fn main() -> ExitCode {
    let args = match parse() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    // The simulation reports panics as failures, with their seed.
    std::panic::set_hook(Box::new(|_| {}));
    let started = Instant::now();
    let (mut ran, mut failed) = (0u64, 0u64);
    let mut totals = Counts::default();
    let mut world = [0u64; 5];
    let mut driver = args.options.driver.then(copilot_sim::driver::host::DriverCounts::default);
    let mut last_report = Instant::now();
    let mut seed = args.seeds.0;
    while args.seeds.1.is_none_or(|end| seed < end) {
        match run_with(seed, args.steps, &args.options) {
            Ok(summary) => {
                if args.single {
                    for line in &summary.trace {
                        println!("{line}");
                    }
                    println!("seed {seed}: every invariant held; {summary:#?}");
                }
                totals.add(&summary.counts);
                if let (Some(d), Some(s)) = (&mut driver, &summary.driver) {
                    d.add(s);
                }
                let s = &summary;
                for (t, v) in world.iter_mut().zip([s.steps, s.drops, s.recovered, s.gave_up, s.timeouts]) {
                    *t += v;
                }
            }
            Err(failure) => {
                failed += 1;
                let mut failure =
                    if args.single && args.options.trace { failure } else { shrink(failure, &args.options) };
                if args.single {
                    // A replay shows every step; the report then only the end.
                    for line in std::mem::take(&mut failure.trace) {
                        println!("{line}");
                    }
                }
                println!("{failure}");
                if !args.keep_going {
                    report(ran + 1, failed, seed + 1, started, &totals, &world, driver.as_ref());
                    return ExitCode::FAILURE;
                }
            }
        }
        ran += 1;
        seed += 1;
        if last_report.elapsed().as_secs() >= 10 {
            last_report = Instant::now();
            report(ran, failed, seed, started, &totals, &world, driver.as_ref());
        }
    }
    report(ran, failed, seed, started, &totals, &world, driver.as_ref());
    if failed > 0 {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

fn report(
    ran: u64,
    failed: u64,
    next: u64,
    started: Instant,
    totals: &Counts,
    world: &[u64; 5],
    driver: Option<&copilot_sim::driver::host::DriverCounts>,
) {
    let secs = started.elapsed().as_secs_f64();
    let rate = ran as f64 / secs.max(1e-9);
    let [steps, drops, recovered, gave_up, timeouts] = world;
    if let Some(d) = driver {
        eprintln!(
            "{ran} seeds ({failed} failed, next {next}) in {secs:.1} s, {rate:.0} seeds/s; {steps} steps; driver: {d}"
        );
        return;
    }
    eprintln!(
        "{ran} seeds ({failed} failed, next {next}) in {secs:.1} s, {rate:.0} seeds/s; {steps} steps, {drops} drops, {recovered} recoveries, {gave_up} given up, {timeouts} requests timed out; {totals}"
    );
}
