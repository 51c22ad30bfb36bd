//! What a run stresses, drawn from its seed ("swarm testing"): each run
//! gets its own mix of delays, cuts, handler outcomes, CLI behaviour and
//! actions, so that across seeds rare combinations come up, not only the
//! average one.

use std::collections::HashSet;

use copilot_core::{EngineConfig, ANSWERS};

use crate::cli::CliProfile;
use crate::host::HostProfile;
use crate::rng::Rng;

/// The engine's handler deadline in every run (ms).
pub const HANDLER_TIMEOUT_MS: u64 = 2_000;
/// The engine's request deadline in every run (ms).
pub const REQUEST_TIMEOUT_MS: u64 = 3_000;
/// The engine's stall interval in every run (ms).
pub const STALL_INTERVAL_MS: u64 = 4_000;

/// The world's own choices: latency and what the scheduler favours.
#[derive(Debug, Clone)]
pub struct WorldProfile {
    /// Most ms a write takes to arrive, and the chance (%) of a spike of
    /// up to ten times that.
    pub latency_ms: u64,
    /// Chance (%) of a latency spike.
    pub spike_percent: u64,
    /// Weights of the actions (see [`crate::world::Action::ALL`]).
    pub weights: [u64; 9],
    /// Chance (%) that a new connection cannot be made.
    pub connect_fail_percent: u64,
}

/// Everything a run's seed decides up front.
#[derive(Debug, Clone)]
pub struct Profile {
    /// The world's.
    pub world: WorldProfile,
    /// The CLI's.
    pub cli: CliProfile,
    /// The host's.
    pub host: HostProfile,
}

impl Profile {
    /// The profile of a run, drawn from `rng`.
    pub fn draw(rng: &mut Rng) -> Self {
        let mut handlers = HashSet::new();
        let keep = rng.range(40, 100);
        for row in ANSWERS {
            if rng.chance(keep) {
                handlers.insert(row.handler);
            }
        }
        let world = WorldProfile {
            latency_ms: rng.range(0, 40),
            spike_percent: rng.range(0, 10),
            weights: [
                rng.range(20, 60),                                // bytes to the host
                rng.range(20, 60),                                // bytes to the CLI
                rng.range(10, 40),                                // time passes
                rng.range(10, 40),                                // the CLI acts
                rng.range(2, 10),                                 // a create
                rng.range(0, 4),                                  // a join
                rng.range(0, 5),                                  // a destroy
                rng.range(1, 8),                                  // a prompt
                if rng.chance(60) { rng.range(0, 2) } else { 0 }, // a drop
            ],
            connect_fail_percent: if rng.chance(30) { rng.range(5, 40) } else { 0 },
        };
        let cli = CliProfile {
            fast_ms: rng.range(0, 50),
            slow_percent: if rng.chance(50) { rng.range(1, 15) } else { 0 },
            slow_ms: (REQUEST_TIMEOUT_MS / 2, REQUEST_TIMEOUT_MS * 2),
            reject_percent: rng.range(0, 10),
            early_percent: rng.range(0, 60),
            unreadable_percent: if rng.chance(30) { rng.range(1, 10) } else { 0 },
            share_percent: rng.range(0, 80),
            other_ms: (0, rng.range(100, 2 * HANDLER_TIMEOUT_MS)),
            loss_percent: if rng.chance(30) { rng.range(5, 40) } else { 0 },
            foreign: rng.range(0, 2) as usize,
            reorders: false,
            page_cap: if rng.chance(30) { rng.range(1, 8) as usize } else { 1_000 },
        };
        let config = EngineConfig::new()
            .handler_timeout(Some(HANDLER_TIMEOUT_MS))
            .request_timeout(Some(REQUEST_TIMEOUT_MS))
            .stall_interval(Some(STALL_INTERVAL_MS))
            .park_frames(rng.range(2, 24) as usize);
        let host = HostProfile {
            handlers,
            plans: [rng.range(40, 80), rng.range(0, 10), rng.range(0, 10), rng.range(0, 8), rng.range(0, 5)],
            handler_ms: rng.range(0, HANDLER_TIMEOUT_MS),
            server_assigned_percent: rng.range(0, 60),
            config,
            fault: None,
        };
        Profile { world, cli, host }
    }
}
