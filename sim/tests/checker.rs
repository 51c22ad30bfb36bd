//! The simulator's own tests: a run is the same every time for its seed,
//! a failure replays and shrinks, and each bug planted in the host is
//! caught by the invariant that should catch it (the checker is not
//! vacuous).

use copilot_sim::host::Fault;
use copilot_sim::{run_with, shrink, Options};

#[test]
fn a_seed_replays_exactly() {
    let options = Options { trace: true, ..Options::default() };
    for seed in [1, 2, 3] {
        let a = run_with(seed, 200, &options).expect("holds");
        let b = run_with(seed, 200, &options).expect("holds");
        assert_eq!(a.trace, b.trace, "seed {seed}");
        assert_eq!(a.engine, b.engine, "seed {seed}");
        assert!(a.trace.len() as u64 >= 200);
    }
}

/// The first of seeds 0..100 that fails with `fault` planted, shrunk.
fn caught(fault: Fault) -> copilot_sim::Failure {
    let options = Options { fault: Some(fault), ..Options::default() };
    let failure = (0..100).find_map(|seed| run_with(seed, 300, &options).err()).expect("some seed fails");
    shrink(failure, &options)
}

#[test]
fn a_lost_event_is_caught() {
    let f = caught(Fault::LoseEvent);
    assert_eq!(f.violation.invariant, copilot_sim::check::names::COMPLETE, "{f}");
}

#[test]
fn events_out_of_order_are_caught() {
    let f = caught(Fault::SwapEvents);
    assert_eq!(f.violation.invariant, copilot_sim::check::names::ROUTING, "{f}");
}

#[test]
fn a_host_that_never_passes_the_time_is_caught() {
    let f = caught(Fault::NoTimeouts);
    assert_eq!(f.violation.invariant, copilot_sim::check::names::LIVENESS, "{f}");
}

#[test]
fn an_answer_sent_twice_is_caught_and_its_failure_shrinks_and_replays() {
    let f = caught(Fault::AnswerTwice);
    assert_eq!(f.violation.invariant, copilot_sim::check::names::AT_MOST_ONCE, "{f}");
    assert!(!f.trace.is_empty(), "a shrunk failure comes with its trace");
    assert!(f.original_steps.is_none_or(|s| s > f.steps), "shrunk to fewer steps");
    // The printed command replays the same failure.
    let options = Options { fault: Some(Fault::AnswerTwice), ..Options::default() };
    let again = run_with(f.seed, f.steps, &options).expect_err("replays");
    assert_eq!(again.violation, f.violation);
    assert!(f.to_string().contains(&format!("--seed {} --steps {}", f.seed, f.steps)));
}
