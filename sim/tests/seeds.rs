//! A fixed budget of seeds, every invariant checked after every step of
//! each (the known issues of today's engine let pass and counted, see
//! `copilot_sim::Known`). A failure prints its seed, step, invariant,
//! shrunk trace and the command that replays it.
//!
//! `SIM_SEEDS=<n>` changes the budget (`scripts/sim` runs any range, as
//! long as one wants).

use std::time::Instant;

use copilot_sim::{run, Counts};

/// Seeds per run of the test: about 20 s in a debug build on the 2-core
/// machine this was measured on (two test threads, one per half).
const SEEDS: u64 = 5_000;
/// Scheduler steps per seed (the drain's steps come on top).
const STEPS: u64 = 300;

fn budget() -> u64 {
    std::env::var("SIM_SEEDS").ok().and_then(|s| s.parse().ok()).unwrap_or(SEEDS)
}

fn run_seeds(seeds: std::ops::Range<u64>) {
    let started = Instant::now();
    let mut totals = Counts::default();
    let n = seeds.end - seeds.start;
    for seed in seeds {
        match run(seed, STEPS) {
            Ok(summary) => totals.add(&summary.counts),
            Err(failure) => panic!("\n{failure}"),
        }
    }
    let secs = started.elapsed().as_secs_f64();
    println!("{n} seeds in {secs:.1} s, {:.0} seeds/s; {totals}", n as f64 / secs);
}

#[test]
fn first_half_of_the_seeds_hold_every_invariant() {
    run_seeds(0..budget() / 2);
}

#[test]
fn second_half_of_the_seeds_hold_every_invariant() {
    let n = budget();
    run_seeds(n / 2..n);
}
