//! The second host model: copilot-host's connection logic itself, its
//! `DriverState<u32>` (reached through the `simulation` feature), driven
//! as its threaded shell drives it ([`host`]), against the same simulated
//! CLI, on the virtual clock, with no threads. The scheduler's steps:
//! bytes cross in pieces cut anywhere, time passes, the CLI acts (deltas,
//! durable events, waits, the end of a turn), the client creates,
//! destroys and prompts sessions, adds and drops subscribers (streams and
//! callbacks), and the event pool delivers a batch of a session it picks.
//! Every create may be of the churn pattern: a callback subscribed the
//! moment the create returns while the CLI streams deltas, and dropped the
//! moment the destroy returns.
//!
//! The invariant ([`check`]): every event routed to a session while a
//! subscriber was registered reaches that subscriber exactly once, in wire
//! order, and before any call whose answer followed it on the wire
//! returns; none reaches another session.
//!
//! Not modelled here: a dropped connection and its recovery (the CLI never
//! dies in this mode), the events kept for a first subscriber, a
//! `send_and_wait`'s waiter, a call made from inside a callback (which
//! does not wait for its own delivery), the backlog's bound on a slow
//! consumer, handlers that answer (they decline or refuse).

pub mod check;
mod counts;
pub mod host;

use crate::cli::Cli;
use crate::profile::Profile;
use crate::rng::Rng;
use crate::wire::Pipe;
use crate::world::DRAIN_MS;
use host::DriverHost;

/// One kind of step of the driver mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DriverAction {
    /// Bytes from the CLI reach the reader.
    ToHost,
    /// Bytes from the client reach the CLI.
    ToCli,
    /// Time passes.
    Advance,
    /// The CLI does something in a session.
    CliActs,
    /// The client creates a session.
    Create,
    /// The client destroys a session.
    Destroy,
    /// The client sends a prompt.
    Send,
    /// A subscriber is added.
    Subscribe,
    /// A subscriber is dropped.
    Unsubscribe,
    /// The event pool delivers a batch.
    Pool,
}

impl DriverAction {
    /// Every action, in the order of the weights.
    pub const ALL: [DriverAction; 10] = [
        DriverAction::ToHost,
        DriverAction::ToCli,
        DriverAction::Advance,
        DriverAction::CliActs,
        DriverAction::Create,
        DriverAction::Destroy,
        DriverAction::Send,
        DriverAction::Subscribe,
        DriverAction::Unsubscribe,
        DriverAction::Pool,
    ];
}

/// One run's world in the driver mode.
pub struct DriverWorld {
    rng: Rng,
    weights: [u64; 10],
    latency_ms: u64,
    /// The virtual clock (ms).
    pub now: u64,
    /// The simulated CLI.
    pub cli: Cli,
    /// The simulated shell around the real driver state.
    pub host: DriverHost,
    to_cli: Pipe,
    to_host: Pipe,
}

impl DriverWorld {
    /// The world of seed `seed`, connected (the driver mode sends no
    /// handshake: the state needs none).
    pub fn new(seed: u64) -> Self {
        let mut rng = Rng::new(seed);
        let mut profile = Profile::draw(&mut rng);
        profile.cli.loss_percent = 0;
        let cli = Cli::new(rng.split(), profile.cli);
        let pool_ms = rng.range(1, 400);
        let host = DriverHost::new(rng.split(), pool_ms);
        let weights = [
            rng.range(20, 60), // bytes to the host
            rng.range(20, 60), // bytes to the CLI
            rng.range(10, 40), // time passes
            rng.range(20, 60), // the CLI acts
            rng.range(3, 12),  // a create
            rng.range(2, 10),  // a destroy
            rng.range(0, 6),   // a prompt
            rng.range(2, 12),  // a subscriber added
            rng.range(0, 6),   // a subscriber dropped
            rng.range(5, 40),  // the pool delivers
        ];
        let latency_ms = rng.range(0, 40);
        let mut world = DriverWorld {
            rng: rng.split(),
            weights,
            latency_ms,
            now: 0,
            cli,
            host,
            to_cli: Pipe::default(),
            to_host: Pipe::default(),
        };
        world.cli.connect();
        world.settle();
        world
    }

    fn next_due(&self) -> Option<u64> {
        [
            self.host.next_timer_after(self.now),
            self.cli.next_timer_after(self.now),
            self.to_cli.next_arrival(self.now),
            self.to_host.next_arrival(self.now),
        ]
        .into_iter()
        .flatten()
        .min()
    }

    fn possible(&self, action: DriverAction) -> bool {
        match action {
            DriverAction::ToHost => self.to_host.ready(self.now) > 0,
            DriverAction::ToCli => self.to_cli.ready(self.now) > 0,
            DriverAction::Pool => self.host.pool_busy(),
            _ => true,
        }
    }

    /// One step of the scheduler; a line for the trace.
    pub fn step(&mut self) -> String {
        let weights: Vec<u64> =
            DriverAction::ALL.iter().zip(self.weights).map(|(a, w)| if self.possible(*a) { w } else { 0 }).collect();
        let action = DriverAction::ALL[self.rng.weighted(&weights).unwrap_or(2)];
        let mut line = self.act(action).unwrap_or_else(|| format!("{action:?}: nothing to do"));
        self.settle();
        for note in self.host.notes.drain(..) {
            line.push_str(" | ");
            line.push_str(&note);
        }
        line
    }

    fn act(&mut self, action: DriverAction) -> Option<String> {
        let now = self.now;
        match action {
            DriverAction::ToHost => {
                let ready = self.to_host.ready(now);
                let n = self.piece(ready, false);
                let (bytes, marks) = self.to_host.take(now, n);
                self.cli.frames_done(&marks, true);
                self.host.receive(now, &bytes);
                Some(format!("{n} of {ready} bytes reach the reader ({} frames end)", marks.len()))
            }
            DriverAction::ToCli => {
                let ready = self.to_cli.ready(now);
                let n = self.piece(ready, false);
                let (bytes, _) = self.to_cli.take(now, n);
                self.cli.receive(now, &bytes);
                Some(format!("{n} of {ready} bytes reach the CLI"))
            }
            DriverAction::Advance => {
                let ready = self.to_host.ready(now) + self.to_cli.ready(now) > 0;
                let most = if ready { 20 } else { 300 };
                let to = match self.next_due() {
                    Some(due) if !ready && self.rng.chance(50) => due,
                    Some(due) => due.min(now + self.rng.range(1, most)),
                    None => now + self.rng.range(1, most),
                };
                self.now = to;
                Some(format!("time passes to {to} ms"))
            }
            DriverAction::CliActs => self.cli.act(now),
            DriverAction::Create => self.host.create(now),
            DriverAction::Destroy => self.host.destroy(now),
            DriverAction::Send => self.host.send(now),
            DriverAction::Subscribe => self.host.subscribe(),
            DriverAction::Unsubscribe => self.host.unsubscribe(),
            DriverAction::Pool => self.host.pool_delivers(),
        }
    }

    fn piece(&mut self, ready: usize, all: bool) -> usize {
        if all {
            return ready;
        }
        match self.rng.weighted(&[40, 30, 30]).unwrap_or(0) {
            0 => ready,
            1 => self.rng.range(1, ready.min(16) as u64) as usize,
            _ => self.rng.range(1, ready as u64) as usize,
        }
    }

    fn latency(&mut self) -> u64 {
        self.rng.range(0, self.latency_ms)
    }

    /// Does everything due at `now` on both ends, and carries their writes
    /// into the pipes.
    pub fn settle(&mut self) {
        for _ in 0..1_000 {
            let now = self.now;
            self.cli.on_time(now);
            self.host.on_time(now);
            let mut busy = false;
            let out = self.host.take_output();
            if !out.is_empty() {
                let latency = self.latency();
                self.to_cli.write(now, latency, out, &[]);
                busy = true;
            }
            let (bytes, marks) = self.cli.take_output();
            if !bytes.is_empty() {
                let latency = self.latency();
                self.to_host.write(now, latency, bytes, &marks);
                busy = true;
            }
            let due = self.cli.next_timer().is_some_and(|t| t <= now);
            if !busy && !due {
                return;
            }
        }
    }

    /// The end of a run: the CLI stops acting, every byte crosses, the
    /// pool delivers everything and time passes every deadline.
    pub fn drain<E>(
        &mut self,
        mut trace: impl FnMut(u64, &str),
        mut check: impl FnMut(&DriverWorld) -> Result<(), E>,
    ) -> Result<(), E> {
        self.cli.quiet();
        let end = self.now + DRAIN_MS;
        loop {
            let line = if self.to_host.ready(self.now) > 0 {
                let ready = self.to_host.ready(self.now);
                let (bytes, marks) = self.to_host.take(self.now, ready);
                self.cli.frames_done(&marks, true);
                self.host.receive(self.now, &bytes);
                format!("drain: {ready} bytes reach the reader")
            } else if self.to_cli.ready(self.now) > 0 {
                let ready = self.to_cli.ready(self.now);
                let (bytes, _) = self.to_cli.take(self.now, ready);
                self.cli.receive(self.now, &bytes);
                format!("drain: {ready} bytes reach the CLI")
            } else if self.host.pool_busy() {
                self.host.pool_delivers().unwrap_or_default()
            } else {
                match self.next_due() {
                    Some(due) if due <= end => {
                        self.now = due;
                        format!("drain: time passes to {} ms", self.now)
                    }
                    _ => return Ok(()),
                }
            };
            self.settle();
            let mut line = line;
            for note in self.host.notes.drain(..) {
                line.push_str(" | ");
                line.push_str(&note);
            }
            trace(self.now, &line);
            check(self)?;
        }
    }
}
