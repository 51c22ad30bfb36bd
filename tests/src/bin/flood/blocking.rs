//! The styles of the blocking client (`copilot_host::Client`): `on`,
//! `events` and `wait`.

use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use copilot_host::{Client, Session, SessionConfig, SessionEvent};

use crate::check::{DeliveryCheck, Tally};
use crate::measure::Measurement;
use crate::options::{Style, TransportName};
use crate::timed::{timed, Consumers};
use crate::{fake_cli_options, EVENT_GAP_TIMEOUT};

/// One run of `style` (`on`, `events` or `wait`) over `transport`.
/// `prompt` is the flood's (`flood:N` or `flood-mix:N`).
pub fn flood(style: Style, transport: TransportName, events: usize, prompt: &str) -> Result<Measurement, String> {
    let name = format!("{} {}", style.as_str(), transport.as_str());
    let client =
        Client::start(fake_cli_options(transport)?).map_err(|e| format!("{name}: cannot start the client: {e}"))?;
    let session = client
        .create_session(SessionConfig { streaming: true, ..SessionConfig::with_model("fake-model") })
        .map_err(|e| format!("{name}: cannot create a session: {e}"))?;
    let consumers = Consumers::new(1);
    let routed = || client.stats().frames;
    let (tally, timing) = match style {
        Style::On => {
            let handler = Handler::new(events);
            let _subscription = session.on(handler.callback(0, &consumers));
            let (idle, timing) = timed(&routed, &consumers, || {
                send(&session, prompt)?;
                Ok::<_, String>(handler.wait_idle(&name, &consumers))
            });
            idle?;
            (handler.tally(), timing)
        }
        Style::Events => {
            // Subscribe before sending: the first subscriber also gets what
            // came before it, but a stream that exists already is the
            // honest measure.
            let stream = session.events();
            let mut check = DeliveryCheck::new(events);
            let (drained, timing) = timed(&routed, &consumers, || {
                send(&session, prompt)?;
                drain(
                    &name,
                    || stream.next_timeout(EVENT_GAP_TIMEOUT).map_err(|e| e.to_string()),
                    &mut check,
                    &consumers,
                    0,
                );
                Ok::<_, String>(())
            });
            drained?;
            (check.tally(), timing)
        }
        Style::Wait => {
            // One `on` subscriber checks delivery; send_and_wait returns
            // once it has run on every event of the turn.
            let handler = Handler::new(events);
            let _subscription = session.on(handler.callback(0, &consumers));
            let turn_timeout = EVENT_GAP_TIMEOUT + Duration::from_millis(events as u64);
            let (turn, timing) = timed(&routed, &consumers, || session.send_and_wait(prompt, turn_timeout));
            turn.map_err(|e| format!("{name}: send_and_wait: {e}"))?;
            (handler.tally(), timing)
        }
        Style::Async | Style::Mixed => unreachable!("{name} runs on the async client"),
    };
    let stats = client.stats();
    if let Err(e) = session.destroy() {
        eprintln!("flood: {name}: session.destroy: {e}");
    }
    if let Err(e) = client.stop() {
        eprintln!("flood: {name}: stopping the client: {e}");
    }
    let mut m = Measurement::new(style.as_str(), transport.as_str(), events, &timing, tally);
    (m.frames, m.bytes, m.malformed, m.unknown_session) =
        (stats.frames, stats.bytes, stats.malformed, stats.unknown_session);
    Ok(m)
}

fn send(session: &Session, prompt: &str) -> Result<(), String> {
    session.send(prompt).map(drop).map_err(|e| format!("session.send: {e}"))
}

/// Takes events from `next` into `check` until `session.idle`, the end of
/// the stream or a stall, counting each as consumer `consumer`.
pub fn drain(
    name: &str,
    mut next: impl FnMut() -> Result<Option<Arc<SessionEvent>>, String>,
    check: &mut DeliveryCheck,
    consumers: &Consumers,
    consumer: usize,
) {
    let mut taken = 0;
    loop {
        match next() {
            Ok(Some(event)) => {
                taken += 1;
                consumers.taken(consumer, taken);
                if check.see(&event) {
                    return;
                }
            }
            Ok(None) => return eprintln!("flood: {name}: the event stream ended before session.idle"),
            Err(e) => return eprintln!("flood: {name}: {e} (after {} deltas)", check.received),
        }
    }
}

/// A checking `on` callback, and the wait for its `session.idle`.
pub struct Handler {
    check: Arc<Mutex<(DeliveryCheck, u64)>>,
    idle_tx: mpsc::Sender<()>,
    idle_rx: mpsc::Receiver<()>,
}

impl Handler {
    /// A handler for a flood of `events`.
    pub fn new(events: usize) -> Handler {
        let (idle_tx, idle_rx) = mpsc::channel();
        Handler { check: Arc::new(Mutex::new((DeliveryCheck::new(events), 0))), idle_tx, idle_rx }
    }

    /// The callback to subscribe, counting as consumer `consumer` of
    /// `consumers`.
    pub fn callback(&self, consumer: usize, consumers: &Consumers) -> impl Fn(&SessionEvent) + Send + Sync + 'static {
        let check = Arc::clone(&self.check);
        let idle_tx = self.idle_tx.clone();
        let consumers = consumers.clone();
        move |event: &SessionEvent| {
            // Uncontended: only the dispatcher thread takes it during the flood.
            let mut guard = check.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            let (check, taken) = &mut *guard;
            *taken += 1;
            consumers.taken(consumer, *taken);
            if check.see(event) {
                let _ = idle_tx.send(());
            }
        }
    }

    /// Waits until the callback has seen `session.idle`; false if events
    /// stop coming for [`EVENT_GAP_TIMEOUT`] first.
    pub fn wait_idle(&self, name: &str, consumers: &Consumers) -> bool {
        let mut last = consumers.slowest();
        loop {
            match self.idle_rx.recv_timeout(EVENT_GAP_TIMEOUT) {
                Ok(()) => return true,
                Err(RecvTimeoutError::Timeout) if consumers.slowest() != last => last = consumers.slowest(),
                Err(_) => {
                    eprintln!("flood: {name}: no session.idle, and no event for {EVENT_GAP_TIMEOUT:?}");
                    return false;
                }
            }
        }
    }

    /// What the callback's check found.
    pub fn tally(&self) -> Tally {
        self.check.lock().unwrap_or_else(std::sync::PoisonError::into_inner).0.tally()
    }
}
