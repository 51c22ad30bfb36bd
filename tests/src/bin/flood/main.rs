//! Flood benchmark of the blocking client (`copilot_host::Client`): how many
//! events a second one session delivers end to end, and how much memory the
//! client needs while doing it.
//!
//! `cargo run --release -p copilot-tests --bin flood -- [--events N] [--transport stdio|tcp|both] [--api blocking|async|both]`
//!
//! (defaults: 100,000 events, both transports, both APIs). `--api async`
//! reads the same flood through `copilot_host::asynch`: the session's
//! events as a `Stream`, polled by a minimal thread-parking executor of
//! this file (so the figure is the library's, not a runtime's). For each transport a fresh
//! child process of this binary (`flood client --transport T --events N`)
//! starts a `Client` whose "CLI" is this binary again (`... serve --stdio`
//! or `... serve --port 0`, the fake server of `copilot_tests::fake_server`).
//! The child creates a session, subscribes to its events, sends `flood:N`
//! (the fake answers with N `assistant.message_delta` events, ids "0" to
//! "N-1", then `session.idle`) and reads the stream until `session.idle`.
//! (`flood client ...` can be run by hand to measure in one process; the
//! `serve` mode is for the client to spawn.)
//!
//! Measured per transport, in the client process only:
//! - seconds and events/s from just before `session.send` to the arrival
//!   of `session.idle` on the stream (the whole pipeline: the fake's writes,
//!   the transport, the reader thread, the session's dispatcher thread and
//!   the consumer);
//! - peak RSS (`VmHWM` of `/proc/self/status`), also before the send, so
//!   the growth due to the flood shows; one child per transport so that
//!   each figure is its own;
//! - CPU seconds (user + system, all threads) of the client;
//! - the largest backlog seen: frames the client's reader thread had
//!   routed minus events the consumer had taken, sampled every few
//!   milliseconds. Events wait in unbounded queues, so this backlog is what
//!   the peak RSS above the baseline is made of;
//! - the router's counters (`Client::stats`).
//!
//! Every delta must arrive exactly once, in order, with its own content;
//! the process exits non-zero otherwise (or if `session.idle` never comes).

use std::process::{Command, ExitCode, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use copilot_host::events::EventKind;
use copilot_host::{Client, ClientOptions, EventStream, Session, SessionConfig, SessionEvent, Transport};
use copilot_tests::fake_server::{run_stdio, run_tcp_announcing};
use serde_json::{json, Value};

/// The argument that makes this binary the fake CLI. It is passed last (the
/// client puts its own flags first), so it is looked for anywhere in argv.
const SERVE: &str = "serve";
/// The first argument of a child that measures one transport.
const CLIENT: &str = "client";
/// The prefix of the one stdout line a child reports its figures on.
const RESULT_PREFIX: &str = "flood-result ";
const DEFAULT_EVENTS: usize = 100_000;
/// Longest wait for the next event before the run is declared stuck.
const EVENT_GAP_TIMEOUT: Duration = Duration::from_secs(30);
/// How often the backlog is sampled.
const SAMPLE_EVERY: Duration = Duration::from_millis(5);
/// Linux reports utime and stime in clock ticks of 1/100 s (USER_HZ) on
/// every architecture it runs on.
const TICKS_PER_SECOND: f64 = 100.0;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == SERVE) {
        return serve(&args);
    }
    let result = match args.first().map(String::as_str) {
        Some(CLIENT) => Options::parse(&args[1..]).and_then(|o| measure_in_this_process(&o)),
        _ => Options::parse(&args).and_then(|o| measure_in_children(&o)),
    };
    match result {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(message) => {
            eprintln!("flood: {message}");
            ExitCode::from(2)
        }
    }
}

/// The fake CLI. The client's own flags (`--headless`, `--no-auto-update`,
/// `--log-level X`, `--auth-token-env X`, `--port 0`) are accepted and
/// ignored; only the choice of transport matters.
fn serve(args: &[String]) -> ExitCode {
    let served = if args.iter().any(|a| a == "--stdio") {
        run_stdio(Default::default())
    } else if args.iter().any(|a| a == "--port") {
        run_tcp_announcing(Default::default())
    } else {
        eprintln!("flood serve: neither --stdio nor --port was given (argv: {args:?})");
        return ExitCode::from(2);
    };
    match served {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("flood serve: {e}");
            ExitCode::FAILURE
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum TransportName {
    Stdio,
    Tcp,
}

impl TransportName {
    fn as_str(self) -> &'static str {
        match self {
            TransportName::Stdio => "stdio",
            TransportName::Tcp => "tcp",
        }
    }

    fn transport(self) -> Transport {
        match self {
            TransportName::Stdio => Transport::Stdio,
            TransportName::Tcp => Transport::Tcp { port: 0 },
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Api {
    Blocking,
    Async,
}

impl Api {
    fn as_str(self) -> &'static str {
        match self {
            Api::Blocking => "blocking",
            Api::Async => "async",
        }
    }
}

struct Options {
    events: usize,
    transports: Vec<TransportName>,
    apis: Vec<Api>,
}

impl Options {
    fn parse(args: &[String]) -> Result<Options, String> {
        let mut options = Options {
            events: DEFAULT_EVENTS,
            transports: vec![TransportName::Stdio, TransportName::Tcp],
            apis: vec![Api::Blocking, Api::Async],
        };
        let mut args = args.iter();
        while let Some(arg) = args.next() {
            let mut value = || args.next().ok_or_else(|| format!("{arg} needs a value"));
            match arg.as_str() {
                "--events" => {
                    let text = value()?;
                    options.events = text.parse().map_err(|e| format!("--events {text:?}: {e}"))?;
                }
                "--transport" => {
                    options.transports = match value()?.as_str() {
                        "stdio" => vec![TransportName::Stdio],
                        "tcp" => vec![TransportName::Tcp],
                        "both" => vec![TransportName::Stdio, TransportName::Tcp],
                        other => return Err(format!("--transport {other:?}: expected stdio, tcp or both")),
                    }
                }
                "--api" => {
                    options.apis = match value()?.as_str() {
                        "blocking" => vec![Api::Blocking],
                        "async" => vec![Api::Async],
                        "both" => vec![Api::Blocking, Api::Async],
                        other => return Err(format!("--api {other:?}: expected blocking, async or both")),
                    }
                }
                "-h" | "--help" => {
                    return Err(
                        "usage: flood [--events N] [--transport stdio|tcp|both] [--api blocking|async|both]".into()
                    );
                }
                other => return Err(format!("unknown argument {other:?} (try --help)")),
            }
        }
        Ok(options)
    }
}

/// What one transport's run found; a child sends it to the parent as JSON.
struct Measurement {
    transport: String,
    events: usize,
    seconds: f64,
    cpu_seconds: f64,
    rss_before_kb: u64,
    peak_rss_kb: u64,
    /// The most events seen routed by the reader and not yet consumed.
    max_backlog: u64,
    /// Deltas that never arrived.
    lost: usize,
    /// Deltas that arrived after a later one.
    out_of_order: usize,
    /// Deltas that arrived more than once.
    duplicates: usize,
    /// Deltas whose id is not a number below N, or whose content differs
    /// from their id.
    corrupt: usize,
    /// Whether `session.idle` arrived.
    idle: bool,
    frames: u64,
    bytes: u64,
    malformed: u64,
    unknown_session: u64,
}

impl Measurement {
    fn passed(&self) -> bool {
        self.idle && self.lost == 0 && self.out_of_order == 0 && self.duplicates == 0 && self.corrupt == 0
    }

    fn events_per_second(&self) -> f64 {
        self.events as f64 / self.seconds
    }

    fn to_json(&self) -> Value {
        json!({
            "transport": self.transport,
            "events": self.events,
            "seconds": self.seconds,
            "cpu_seconds": self.cpu_seconds,
            "rss_before_kb": self.rss_before_kb,
            "peak_rss_kb": self.peak_rss_kb,
            "max_backlog": self.max_backlog,
            "lost": self.lost,
            "out_of_order": self.out_of_order,
            "duplicates": self.duplicates,
            "corrupt": self.corrupt,
            "idle": self.idle,
            "frames": self.frames,
            "bytes": self.bytes,
            "malformed": self.malformed,
            "unknown_session": self.unknown_session,
        })
    }

    fn from_json(v: &Value) -> Result<Measurement, String> {
        let u64_of = |key: &str| v[key].as_u64().ok_or_else(|| format!("result without {key}: {v}"));
        let f64_of = |key: &str| v[key].as_f64().ok_or_else(|| format!("result without {key}: {v}"));
        Ok(Measurement {
            transport: v["transport"].as_str().unwrap_or("?").to_owned(),
            events: u64_of("events")? as usize,
            seconds: f64_of("seconds")?,
            cpu_seconds: f64_of("cpu_seconds")?,
            rss_before_kb: u64_of("rss_before_kb")?,
            peak_rss_kb: u64_of("peak_rss_kb")?,
            max_backlog: u64_of("max_backlog")?,
            lost: u64_of("lost")? as usize,
            out_of_order: u64_of("out_of_order")? as usize,
            duplicates: u64_of("duplicates")? as usize,
            corrupt: u64_of("corrupt")? as usize,
            idle: v["idle"].as_bool().ok_or_else(|| format!("result without idle: {v}"))?,
            frames: u64_of("frames")?,
            bytes: u64_of("bytes")?,
            malformed: u64_of("malformed")?,
            unknown_session: u64_of("unknown_session")?,
        })
    }

    /// The detail line under the table.
    fn describe(&self) -> String {
        format!(
            "{}: client cpu {:.2} s ({:.0}% of wall), VmHWM {:.1} MB before the send -> {:.1} MB, \
             largest backlog {} events ({:.0} B of peak growth per backlogged event); \
             stats: {} frames, {:.1} MB of bodies ({:.0} B/frame), {} malformed, {} for unknown sessions; \
             {} out of order, {} duplicated, {} corrupt, idle {}",
            self.transport,
            self.cpu_seconds,
            100.0 * self.cpu_seconds / self.seconds,
            mb(self.rss_before_kb),
            mb(self.peak_rss_kb),
            self.max_backlog,
            (self.peak_rss_kb.saturating_sub(self.rss_before_kb) * 1024) as f64 / self.max_backlog.max(1) as f64,
            self.frames,
            self.bytes as f64 / 1e6,
            self.bytes as f64 / self.frames.max(1) as f64,
            self.malformed,
            self.unknown_session,
            self.out_of_order,
            self.duplicates,
            self.corrupt,
            if self.idle { "received" } else { "NEVER received" },
        )
    }
}

fn mb(kb: u64) -> f64 {
    kb as f64 / 1024.0
}

/// The top level: one child process per transport, then the table.
fn measure_in_children(options: &Options) -> Result<bool, String> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot find this executable: {e}"))?;
    let mut measurements = Vec::new();
    let mut all_passed = true;
    let runs = options.transports.iter().flat_map(|&t| options.apis.iter().map(move |&a| (t, a)));
    for (transport, api) in runs {
        let output = Command::new(&exe)
            .args([
                CLIENT,
                "--transport",
                transport.as_str(),
                "--api",
                api.as_str(),
                "--events",
                &options.events.to_string(),
            ])
            .stdin(Stdio::null())
            .stderr(Stdio::inherit())
            .output()
            .map_err(|e| format!("cannot run {} {CLIENT}: {e}", exe.display()))?;
        let stdout = String::from_utf8_lossy(&output.stdout);
        let result = stdout.lines().find_map(|line| line.strip_prefix(RESULT_PREFIX));
        let Some(result) = result else {
            eprintln!(
                "flood: the {} child reported no result ({}); stdout: {stdout}",
                transport.as_str(),
                output.status
            );
            all_passed = false;
            continue;
        };
        let value: Value = serde_json::from_str(result)
            .map_err(|e| format!("unreadable result of the {} child: {e}", transport.as_str()))?;
        let measurement = Measurement::from_json(&value)?;
        all_passed &= measurement.passed() && output.status.success();
        measurements.push(measurement);
    }

    println!(
        "{:<15} {:>10} {:>9} {:>12} {:>13} {:>6}",
        "transport", "events", "seconds", "events/s", "peak RSS MB", "lost"
    );
    for m in &measurements {
        println!(
            "{:<15} {:>10} {:>9.3} {:>12.0} {:>13.1} {:>6}",
            m.transport,
            m.events,
            m.seconds,
            m.events_per_second(),
            mb(m.peak_rss_kb),
            m.lost
        );
    }
    println!();
    for m in &measurements {
        println!("{}", m.describe());
    }
    println!("(peak RSS: VmHWM of each client child process alone; the fake server runs in its own process)");
    if !all_passed {
        eprintln!("flood: FAILED: an event was lost, repeated, reordered or corrupted, or a run did not finish");
    }
    Ok(all_passed)
}

/// A child: measures each transport asked for in this process (normally
/// one) and reports each on a `flood-result` line. With several transports
/// the later peaks include the earlier runs' (VmHWM never goes down).
fn measure_in_this_process(options: &Options) -> Result<bool, String> {
    let mut all_passed = true;
    let runs = options.transports.iter().flat_map(|&t| options.apis.iter().map(move |&a| (t, a)));
    for (i, (transport, api)) in runs.enumerate() {
        let m = match api {
            Api::Blocking => flood(transport, options.events)?,
            Api::Async => flood_async(transport, options.events)?,
        };
        if i > 0 {
            eprintln!("(peak RSS of {} includes the earlier runs in this process)", m.transport);
        }
        all_passed &= m.passed();
        println!("{RESULT_PREFIX}{}", m.to_json());
    }
    Ok(all_passed)
}

/// One run over `transport`: start, create, subscribe, send, drain.
fn flood(transport: TransportName, events: usize) -> Result<Measurement, String> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot find this executable: {e}"))?;
    let client = Client::start(ClientOptions {
        cli_path: Some(exe),
        transport: transport.transport(),
        extra_args: vec![SERVE.into()],
        ..ClientOptions::default()
    })
    .map_err(|e| format!("{}: cannot start the client: {e}", transport.as_str()))?;
    let session = client
        .create_session(SessionConfig { streaming: true, ..SessionConfig::with_model("fake-model") })
        .map_err(|e| format!("{}: cannot create a session: {e}", transport.as_str()))?;
    // Subscribe before sending: the first subscriber also gets what came
    // before it, but a stream that exists already is the honest measure.
    let stream = session.events();
    // Allocated before the baseline so that it does not count as growth.
    let mut check = DeliveryCheck::new(events);
    let rss_before_kb = peak_rss_kb();
    let cpu_before = cpu_seconds();

    let frames_before_send = client.stats().frames;
    let consumed = AtomicU64::new(0);
    let finished = AtomicBool::new(false);

    let start = Instant::now();
    let (idle, max_backlog) = thread::scope(|scope| {
        let sampler = scope.spawn(|| {
            let mut max_backlog = 0;
            while !finished.load(Ordering::Relaxed) {
                // Includes the answer to session.send: off by one at most.
                let routed = client.stats().frames - frames_before_send;
                max_backlog = max_backlog.max(routed.saturating_sub(consumed.load(Ordering::Relaxed)));
                thread::park_timeout(SAMPLE_EVERY);
            }
            max_backlog
        });
        let idle = send_and_drain(transport, events, &session, &stream, &mut check, &consumed);
        finished.store(true, Ordering::Relaxed);
        sampler.thread().unpark();
        let max_backlog = sampler.join().expect("the backlog sampler panicked");
        idle.map(|idle| (idle, max_backlog))
    })?;
    let seconds = start.elapsed().as_secs_f64();
    let cpu_seconds = cpu_seconds() - cpu_before;
    let peak_rss_kb = peak_rss_kb();
    let stats = client.stats();

    drop(stream);
    if let Err(e) = session.destroy() {
        eprintln!("flood: {}: session.destroy: {e}", transport.as_str());
    }
    if let Err(e) = client.stop() {
        eprintln!("flood: {}: stopping the client: {e}", transport.as_str());
    }
    let m = Measurement {
        transport: transport.as_str().into(),
        events,
        seconds,
        cpu_seconds,
        rss_before_kb,
        peak_rss_kb,
        max_backlog,
        lost: check.lost(),
        out_of_order: check.out_of_order,
        duplicates: check.duplicates,
        corrupt: check.corrupt,
        idle,
        frames: stats.frames,
        bytes: stats.bytes,
        malformed: stats.malformed,
        unknown_session: stats.unknown_session,
    };
    eprintln!(
        "{}: {} events in {:.3} s = {:.0} events/s, peak RSS {:.1} MB",
        m.transport,
        m.events,
        m.seconds,
        m.events_per_second(),
        mb(m.peak_rss_kb)
    );
    Ok(m)
}

/// One run over `transport` through the async API: the same steps, the
/// events read from the `Stream` by [`block_on`].
fn flood_async(transport: TransportName, events: usize) -> Result<Measurement, String> {
    use copilot_host::asynch;
    let exe = std::env::current_exe().map_err(|e| format!("cannot find this executable: {e}"))?;
    let name = format!("{} async", transport.as_str());
    let options = ClientOptions {
        cli_path: Some(exe),
        transport: transport.transport(),
        extra_args: vec![SERVE.into()],
        ..ClientOptions::default()
    };
    let client =
        block_on(asynch::Client::start(options)).map_err(|e| format!("{name}: cannot start the client: {e}"))?;
    let session =
        block_on(client.create_session(SessionConfig { streaming: true, ..SessionConfig::with_model("fake-model") }))
            .map_err(|e| format!("{name}: cannot create a session: {e}"))?;
    let mut stream = session.events();
    let mut check = DeliveryCheck::new(events);
    let rss_before_kb = peak_rss_kb();
    let cpu_before = cpu_seconds();
    let frames_before_send = client.blocking().stats().frames;
    let consumed = AtomicU64::new(0);
    let finished = AtomicBool::new(false);

    let start = Instant::now();
    let (idle, max_backlog) = thread::scope(|scope| {
        let sampler = scope.spawn(|| {
            let mut max_backlog = 0;
            while !finished.load(Ordering::Relaxed) {
                let routed = client.blocking().stats().frames - frames_before_send;
                max_backlog = max_backlog.max(routed.saturating_sub(consumed.load(Ordering::Relaxed)));
                thread::park_timeout(SAMPLE_EVERY);
            }
            max_backlog
        });
        let idle: Result<bool, String> = block_on(async {
            session.send(format!("flood:{events}")).await.map_err(|e| format!("{name}: session.send: {e}"))?;
            let mut taken = 0;
            while let Some(event) = stream.next().await {
                taken += 1;
                consumed.store(taken, Ordering::Relaxed);
                if check.see(&event) {
                    return Ok(true);
                }
            }
            eprintln!("flood: {name}: the event stream ended before session.idle");
            Ok(false)
        });
        finished.store(true, Ordering::Relaxed);
        sampler.thread().unpark();
        let max_backlog = sampler.join().expect("the backlog sampler panicked");
        idle.map(|idle: bool| (idle, max_backlog))
    })?;
    let seconds = start.elapsed().as_secs_f64();
    let cpu_seconds = cpu_seconds() - cpu_before;
    let peak_rss_kb = peak_rss_kb();
    let stats = client.blocking().stats();
    drop(stream);
    if let Err(e) = block_on(session.destroy()) {
        eprintln!("flood: {name}: session.destroy: {e}");
    }
    if let Err(e) = block_on(client.stop()) {
        eprintln!("flood: {name}: stopping the client: {e}");
    }
    let m = Measurement {
        transport: name,
        events,
        seconds,
        cpu_seconds,
        rss_before_kb,
        peak_rss_kb,
        max_backlog,
        lost: check.lost(),
        out_of_order: check.out_of_order,
        duplicates: check.duplicates,
        corrupt: check.corrupt,
        idle,
        frames: stats.frames,
        bytes: stats.bytes,
        malformed: stats.malformed,
        unknown_session: stats.unknown_session,
    };
    eprintln!(
        "{}: {} events in {:.3} s = {:.0} events/s, peak RSS {:.1} MB",
        m.transport,
        m.events,
        m.seconds,
        m.events_per_second(),
        mb(m.peak_rss_kb)
    );
    Ok(m)
}

/// A minimal executor: polls `future` on this thread, parking between wakes.
fn block_on<F: std::future::Future>(future: F) -> F::Output {
    struct Unpark(thread::Thread);
    impl std::task::Wake for Unpark {
        fn wake(self: Arc<Self>) {
            self.0.unpark();
        }
    }
    let waker = std::task::Waker::from(Arc::new(Unpark(thread::current())));
    let mut cx = std::task::Context::from_waker(&waker);
    let mut future = std::pin::pin!(future);
    loop {
        if let std::task::Poll::Ready(out) = future.as_mut().poll(&mut cx) {
            return out;
        }
        thread::park();
    }
}

/// Sends `flood:N` and reads the stream until `session.idle` (true), its
/// end or a stall (false), counting every event taken in `consumed`.
fn send_and_drain(
    transport: TransportName,
    events: usize,
    session: &Session,
    stream: &EventStream,
    check: &mut DeliveryCheck,
    consumed: &AtomicU64,
) -> Result<bool, String> {
    session.send(format!("flood:{events}")).map_err(|e| format!("{}: session.send: {e}", transport.as_str()))?;
    let mut taken = 0;
    loop {
        match stream.next_timeout(EVENT_GAP_TIMEOUT) {
            Ok(Some(event)) => {
                // Only this thread writes it: a plain store, no locked add.
                taken += 1;
                consumed.store(taken, Ordering::Relaxed);
                if check.see(&event) {
                    return Ok(true);
                }
            }
            Ok(None) => {
                eprintln!("flood: {}: the event stream ended before session.idle", transport.as_str());
                return Ok(false);
            }
            Err(e) => {
                eprintln!("flood: {}: {e} (after {} deltas)", transport.as_str(), check.received);
                return Ok(false);
            }
        }
    }
}

/// Checks that delta `i` (id and content `"i"`) arrives once, in order.
struct DeliveryCheck {
    seen: Vec<bool>,
    /// The id the next delta should have.
    next: usize,
    received: usize,
    out_of_order: usize,
    duplicates: usize,
    corrupt: usize,
}

impl DeliveryCheck {
    fn new(events: usize) -> DeliveryCheck {
        DeliveryCheck { seen: vec![false; events], next: 0, received: 0, out_of_order: 0, duplicates: 0, corrupt: 0 }
    }

    /// Records one event; true when it is `session.idle`.
    fn see(&mut self, event: &Arc<SessionEvent>) -> bool {
        let delta = match &event.kind {
            EventKind::SessionIdle(_) => return true,
            EventKind::AssistantMessageDelta(delta) => delta,
            // session.start and the like.
            _ => return false,
        };
        self.received += 1;
        let index = match event.id.parse::<usize>() {
            Ok(i) if i < self.seen.len() && delta.delta_content == event.id => i,
            _ => {
                self.corrupt += 1;
                return false;
            }
        };
        if std::mem::replace(&mut self.seen[index], true) {
            self.duplicates += 1;
        } else if index < self.next {
            // A later delta came first. (A gap alone is counted as lost.)
            self.out_of_order += 1;
        }
        self.next = self.next.max(index + 1);
        false
    }

    fn lost(&self) -> usize {
        self.seen.iter().filter(|&&seen| !seen).count()
    }
}

/// `VmHWM` (peak resident set) of this process in kB; 0 where there is no
/// `/proc`.
fn peak_rss_kb() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmHWM:"))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

/// User plus system CPU time of this process (all its threads) in seconds;
/// 0 where there is no `/proc`.
fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // The command name, in parentheses, may hold spaces: count the fields
    // after its closing parenthesis. utime and stime are fields 14 and 15.
    let Some((_, after_name)) = stat.rsplit_once(')') else { return 0.0 };
    let fields: Vec<&str> = after_name.split_whitespace().collect();
    let ticks = |i: usize| fields.get(i).and_then(|f| f.parse::<u64>().ok()).unwrap_or(0);
    // Field 3 (state) is fields[0], so field n is fields[n - 3].
    (ticks(14 - 3) + ticks(15 - 3)) as f64 / TICKS_PER_SECOND
}

#[cfg(test)]
mod tests {
    use super::*;

    fn delta(id: &str, content: &str) -> Arc<SessionEvent> {
        let json = format!(
            r#"{{"type":"assistant.message_delta","id":"{id}","timestamp":"","data":{{"messageId":"m","deltaContent":"{content}"}}}}"#
        );
        Arc::new(SessionEvent::from_json(json.as_bytes()).expect("a valid delta"))
    }

    fn check(ids: &[&str]) -> DeliveryCheck {
        let mut check = DeliveryCheck::new(4);
        for id in ids {
            assert!(!check.see(&delta(id, id)));
        }
        check
    }

    #[test]
    fn every_delta_once_in_order_passes() {
        let c = check(&["0", "1", "2", "3"]);
        assert_eq!((c.lost(), c.out_of_order, c.duplicates, c.corrupt), (0, 0, 0, 0));
    }

    #[test]
    fn a_swap_is_one_out_of_order() {
        let c = check(&["0", "2", "1", "3"]);
        assert_eq!((c.lost(), c.out_of_order, c.duplicates, c.corrupt), (0, 1, 0, 0));
    }

    #[test]
    fn gaps_repeats_and_bad_content_are_found() {
        let mut c = check(&["0", "0", "3", "9", "x"]);
        assert!(!c.see(&delta("1", "not 1")));
        assert_eq!((c.lost(), c.out_of_order, c.duplicates, c.corrupt), (2, 0, 1, 3));
    }

    #[test]
    fn idle_ends_the_run() {
        let idle = SessionEvent::from_json(br#"{"type":"session.idle","id":"e","data":{}}"#).expect("a valid event");
        assert!(DeliveryCheck::new(1).see(&Arc::new(idle)));
    }
}
