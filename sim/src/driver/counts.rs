//! What the driver mode counts over a run, to show what it reached.

/// What the driver mode counted.
#[derive(Debug, Default, Clone, Copy)]
pub struct DriverCounts {
    /// Events delivered to subscribers.
    pub deliveries: u64,
    /// Batches handed to the event pool.
    pub batches: u64,
    /// Calls that returned after waiting for the fence.
    pub fenced_returns: u64,
    /// Calls that returned at their deadline with the fence not passed
    /// (the documented exception: a callback that does not return).
    pub deadline_returns: u64,
    /// Destroys whose subscribers were dropped at their return.
    pub churned: u64,
    /// Calls that returned.
    pub returns: u64,
}

impl DriverCounts {
    /// Adds another run's counts.
    pub fn add(&mut self, other: &DriverCounts) {
        self.deliveries += other.deliveries;
        self.batches += other.batches;
        self.fenced_returns += other.fenced_returns;
        self.deadline_returns += other.deadline_returns;
        self.churned += other.churned;
        self.returns += other.returns;
    }
}

impl std::fmt::Display for DriverCounts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} events delivered, {} batches through the pool, {} calls returned ({} past the fence, {} at their deadline), {} destroys whose subscribers were dropped at their return",
            self.deliveries, self.batches, self.returns, self.fenced_returns, self.deadline_returns, self.churned
        )
    }
}
