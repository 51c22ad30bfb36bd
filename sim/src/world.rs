//! The world of one run: the simulated CLI, the host with the real engine,
//! the two directions of the connection between them, and the virtual
//! clock. Each [`step`](World::step) is one choice of the seeded scheduler
//! (bytes cross in a piece of any size, time passes to at most the next
//! timer, the CLI or the host acts, the connection drops), then everything
//! due at that time is done ([`settle`](World::settle)). Time never jumps
//! past a timer, so every deadline is acted on at its own time.

use crate::cli::Cli;
use crate::host::Host;
use crate::profile::{Profile, WorldProfile};
use crate::rng::Rng;
use crate::wire::Pipe;

/// One kind of step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Bytes from the CLI reach the engine.
    ToHost,
    /// Bytes from the engine reach the CLI.
    ToCli,
    /// Time passes.
    Advance,
    /// The CLI does something in a session.
    CliActs,
    /// The host opens a session.
    Create,
    /// The host joins another client's session.
    Join,
    /// The host destroys a session.
    Destroy,
    /// The host sends a prompt.
    Send,
    /// The connection drops (the CLI's process dies with it).
    Drop,
}

impl Action {
    /// Every action, in the order of [`WorldProfile::weights`].
    pub const ALL: [Action; 9] = [
        Action::ToHost,
        Action::ToCli,
        Action::Advance,
        Action::CliActs,
        Action::Create,
        Action::Join,
        Action::Destroy,
        Action::Send,
        Action::Drop,
    ];
}

/// Virtual time a drain lets pass at least, so that every deadline, every
/// delay and a whole recovery are behind it (ms).
pub const DRAIN_MS: u64 = 60_000;

/// One run's world.
pub struct World {
    rng: Rng,
    profile: WorldProfile,
    /// The virtual clock (ms).
    pub now: u64,
    /// The simulated CLI.
    pub cli: Cli,
    /// The host around the real engine.
    pub host: Host,
    to_cli: Pipe,
    to_host: Pipe,
    /// Connection drops so far.
    pub drops: u64,
    /// When the connection dropped, in order.
    pub drop_times: Vec<u64>,
}

impl World {
    /// The world of seed `seed`, connected and its handshake sent; with
    /// `cli_reorders`, the CLI does quick messages out of order; `fault`
    /// plants a bug in the host.
    pub fn new(seed: u64, cli_reorders: bool, fault: Option<crate::host::Fault>) -> Self {
        let mut rng = Rng::new(seed);
        let mut profile = Profile::draw(&mut rng);
        profile.cli.reorders = cli_reorders;
        profile.host.fault = fault;
        let cli = Cli::new(rng.split(), profile.cli);
        let host = Host::new(rng.split(), profile.host);
        let mut world = World {
            rng: rng.split(),
            profile: profile.world,
            now: 0,
            cli,
            host,
            to_cli: Pipe::default(),
            to_host: Pipe::default(),
            drops: 0,
            drop_times: Vec::new(),
        };
        let conn = world.cli.connect();
        world.host.connected_to(0, conn);
        world.settle();
        world
    }

    fn latency(&mut self) -> u64 {
        let max = self.profile.latency_ms;
        if self.rng.chance(self.profile.spike_percent) {
            self.rng.range(max, 10 * max + 10)
        } else {
            self.rng.range(0, max)
        }
    }

    /// When something is next due after now: a timer of either end, or
    /// bytes arriving. (What is due now, [`settle`](Self::settle) has
    /// done: a timer still due after it is an end that does not act on
    /// its time, which the checker reports; time goes on regardless.)
    pub fn next_due(&self) -> Option<u64> {
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

    /// Whether `action` can do something now.
    fn possible(&self, action: Action) -> bool {
        match action {
            Action::ToHost => self.to_host.ready(self.now) > 0,
            Action::ToCli => self.to_cli.ready(self.now) > 0,
            Action::Advance | Action::CliActs => true,
            Action::Create | Action::Join | Action::Destroy | Action::Send => self.host.ready(),
            Action::Drop => self.cli.connection().is_some(),
        }
    }

    /// One step of the scheduler; a line for the trace (`None`: nothing
    /// happened).
    pub fn step(&mut self) -> Option<String> {
        let recovering = self.host.is_recovering();
        let weights: Vec<u64> = Action::ALL
            .iter()
            .zip(self.profile.weights)
            .map(|(a, w)| match (self.possible(*a), a) {
                (false, _) => 0,
                // A drop during a recovery fails its attempt: rarer, so
                // that fewer runs end with the client given up.
                (true, Action::Drop) if recovering => w * 25,
                (true, _) => w * 100,
            })
            .collect();
        let action = Action::ALL[self.rng.weighted(&weights).unwrap_or(2)];
        let mut line = self.act(action).unwrap_or_else(|| format!("{action:?}: nothing to do"));
        self.settle();
        for note in self.host.notes.drain(..) {
            line.push_str(" | ");
            line.push_str(&note);
        }
        Some(line)
    }

    fn act(&mut self, action: Action) -> Option<String> {
        let now = self.now;
        match action {
            Action::ToHost => Some(self.carry_to_host(false)),
            Action::ToCli => Some(self.carry_to_cli(false)),
            Action::Advance => {
                // Bytes that arrived are read soon: a reader is not slower
                // than tens of ms (a timeout comes from a slow peer).
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
            Action::CliActs => self.cli.act(now),
            Action::Create => self.host.create(now),
            Action::Join => {
                let foreign: Vec<String> = self
                    .cli
                    .sessions()
                    .filter(|(id, phase, attached)| {
                        id.starts_with("f-") && *phase == crate::cli::Phase::Active && !attached
                    })
                    .map(|(id, _, _)| id.to_owned())
                    .collect();
                if foreign.is_empty() {
                    return None;
                }
                let id = foreign[self.rng.index(foreign.len())].clone();
                self.host.join(now, &id)
            }
            Action::Destroy => self.host.destroy(now),
            Action::Send => self.host.send(now),
            Action::Drop => {
                self.cut();
                Some("the connection drops; the CLI's process dies".into())
            }
        }
    }

    /// Bytes arrived from the CLI go to the engine: all of them, or a
    /// piece (cut anywhere, joining frames).
    fn carry_to_host(&mut self, all: bool) -> String {
        let ready = self.to_host.ready(self.now);
        let n = self.piece(ready, all);
        let (bytes, marks) = self.to_host.take(self.now, n);
        self.cli.frames_done(&marks, true);
        self.host.receive(self.now, &bytes);
        format!("{n} of {ready} bytes reach the engine ({} frames end)", marks.len())
    }

    fn carry_to_cli(&mut self, all: bool) -> String {
        let ready = self.to_cli.ready(self.now);
        let n = self.piece(ready, all);
        let (bytes, _) = self.to_cli.take(self.now, n);
        self.cli.receive(self.now, &bytes);
        format!("{n} of {ready} bytes reach the CLI")
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

    /// The connection drops: what is in flight is lost, the CLI's process
    /// dies, the host recovers.
    fn cut(&mut self) {
        self.drops += 1;
        self.drop_times.push(self.now);
        let lost = self.to_host.cut();
        self.cli.frames_done(&lost, false);
        self.to_cli.cut();
        self.cli.kill(self.now);
        self.host.connection_lost(self.now);
    }

    /// Does everything due at `now`: both ends' timers, their writes, the
    /// host's requests to cut or make a connection.
    pub fn settle(&mut self) {
        for _ in 0..1_000 {
            let now = self.now;
            self.cli.on_time(now);
            self.host.on_time(now);
            let mut busy = false;
            let out = self.host.take_output();
            if !out.is_empty() && self.cli.connection().is_some() {
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
            if self.host.take_disconnect() {
                self.cut();
                busy = true;
            }
            if self.host.take_connect_request() {
                if self.rng.chance(self.profile.connect_fail_percent) {
                    self.host.connect_failed(now);
                } else {
                    let conn = self.cli.connect();
                    self.host.connected_to(now, conn);
                }
                busy = true;
            }
            let due = [self.host.next_own_timer(), self.cli.next_timer()].into_iter().flatten().any(|t| t <= now);
            if !busy && !due {
                return;
            }
        }
    }

    /// The end of a run: the CLI stops acting, every byte crosses, time
    /// passes past every deadline and delay and until any recovery is
    /// over. Calls `check` after each of its steps; a line per step for
    /// the trace goes to `trace`.
    pub fn drain<E>(
        &mut self,
        mut trace: impl FnMut(u64, &str),
        mut check: impl FnMut(&World) -> Result<(), E>,
    ) -> Result<(), E> {
        self.cli.quiet();
        let end = self.now + DRAIN_MS;
        let hard_end = end + DRAIN_MS;
        loop {
            let line = if self.to_host.ready(self.now) > 0 {
                self.carry_to_host(true)
            } else if self.to_cli.ready(self.now) > 0 {
                self.carry_to_cli(true)
            } else {
                let busy = self.host.is_recovering() || !self.to_cli.is_empty() || !self.to_host.is_empty();
                match self.next_due() {
                    Some(due) if due <= hard_end && (due <= end || busy) => {
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
