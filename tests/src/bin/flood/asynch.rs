//! The styles of the async client (`copilot_host::asynch`): `async` (the
//! session's events as a `Stream`) and `mixed` (a callback, a blocking
//! stream and an async stream on one session at once). Futures are polled
//! by [`block_on`], a minimal thread-parking executor, so that the figures
//! are the library's, not a runtime's.

use std::sync::Arc;
use std::thread;

use copilot_host::{asynch, SessionConfig};

use crate::blocking::{drain, Handler};
use crate::check::DeliveryCheck;
use crate::measure::Measurement;
use crate::options::{Style, TransportName};
use crate::timed::{timed, Consumers};
use crate::{fake_cli_options, EVENT_GAP_TIMEOUT};

/// One run of `style` (`async` or `mixed`) over `transport`.
/// `prompt` is the flood's (`flood:N` or `flood-mix:N`).
pub fn flood(style: Style, transport: TransportName, events: usize, prompt: &str) -> Result<Measurement, String> {
    let name = format!("{} {}", style.as_str(), transport.as_str());
    let client = block_on(asynch::Client::start(fake_cli_options(transport)?))
        .map_err(|e| format!("{name}: cannot start the client: {e}"))?;
    let session =
        block_on(client.create_session(SessionConfig { streaming: true, ..SessionConfig::with_model("fake-model") }))
            .map_err(|e| format!("{name}: cannot create a session: {e}"))?;
    let routed = || client.blocking().stats().frames;
    let send = || -> Result<(), String> {
        block_on(session.send(prompt)).map(drop).map_err(|e| format!("{name}: session.send: {e}"))
    };
    let (tally, timing) = match style {
        Style::Async => {
            let consumers = Consumers::new(1);
            let mut stream = session.events();
            let mut check = DeliveryCheck::new(events);
            let (sent, timing) = timed(&routed, &consumers, || {
                send()?;
                block_on(drain_async(&name, &mut stream, &mut check, &consumers, 0));
                Ok::<_, String>(())
            });
            sent?;
            (check.tally(), timing)
        }
        Style::Mixed => {
            // Consumer 0 the callback, 1 the blocking stream, 2 the async one.
            let consumers = Consumers::new(3);
            let handler = Handler::new(events);
            let _subscription = session.on(handler.callback(0, &consumers));
            let blocking_stream = session.blocking().events();
            let mut async_stream = session.events();
            let (mut blocking_check, mut async_check) = (DeliveryCheck::new(events), DeliveryCheck::new(events));
            let (sent, timing) = timed(&routed, &consumers, || {
                thread::scope(|scope| {
                    let blocking_name = format!("{name} (blocking stream)");
                    let async_name = format!("{name} (async stream)");
                    let next_blocking = || blocking_stream.next_timeout(EVENT_GAP_TIMEOUT).map_err(|e| e.to_string());
                    let (consumers_1, consumers_2) = (&consumers, &consumers);
                    let (blocking_check, async_check) = (&mut blocking_check, &mut async_check);
                    let blocking =
                        scope.spawn(move || drain(&blocking_name, next_blocking, blocking_check, consumers_1, 1));
                    let stream = &mut async_stream;
                    let asynchronous =
                        scope.spawn(move || block_on(drain_async(&async_name, stream, async_check, consumers_2, 2)));
                    let sent = send();
                    let idle = sent.is_ok() && handler.wait_idle(&format!("{name} (callback)"), &consumers);
                    if !idle {
                        // The blocking stream gives up after a gap; the async
                        // one has no timer here and waits for the idle (as
                        // today's async run does): say so before it hangs.
                        eprintln!("flood: {name}: the callback saw no idle; the async stream may wait forever");
                    }
                    blocking.join().expect("the blocking consumer panicked");
                    asynchronous.join().expect("the async consumer panicked");
                    sent
                })
            });
            sent?;
            (handler.tally().add(blocking_check.tally()).add(async_check.tally()), timing)
        }
        _ => unreachable!("{name} runs on the blocking client"),
    };
    let stats = client.blocking().stats();
    if let Err(e) = block_on(session.destroy()) {
        eprintln!("flood: {name}: session.destroy: {e}");
    }
    if let Err(e) = block_on(client.stop()) {
        eprintln!("flood: {name}: stopping the client: {e}");
    }
    let mut m = Measurement::new(style.as_str(), transport.as_str(), events, &timing, tally);
    (m.frames, m.bytes, m.malformed, m.unknown_session) =
        (stats.frames, stats.bytes, stats.malformed, stats.unknown_session);
    Ok(m)
}

/// [`drain`] of an async stream: takes events into `check` until
/// `session.idle` or the end of the stream, counting each as consumer
/// `consumer`.
async fn drain_async(
    name: &str,
    stream: &mut asynch::EventStream,
    check: &mut DeliveryCheck,
    consumers: &Consumers,
    consumer: usize,
) {
    let mut taken = 0;
    while let Some(event) = stream.next().await {
        taken += 1;
        consumers.taken(consumer, taken);
        if check.see(&event) {
            return;
        }
    }
    eprintln!("flood: {name}: the event stream ended before session.idle");
}

/// A minimal executor: polls `future` on this thread, parking between wakes.
pub fn block_on<F: std::future::Future>(future: F) -> F::Output {
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
