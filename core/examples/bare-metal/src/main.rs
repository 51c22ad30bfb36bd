//! A bare-metal image that uses copilot-core the way a Cortex-M firmware
//! would, so that its flash and RAM cost can be measured (`scripts/size-report`).
//!
//! It reserves a session, encodes a `session.create` request, then feeds the
//! bytes of an event frame and the request's response through a
//! `FrameDecoder` and the `Router`, as a UART or USB reader would. Results go
//! into atomics, so the optimiser must keep the decoder, the JSON parser and
//! the router: an image that routed nothing would measure nothing.
//!
//! No `unsafe` block: the router is a `static` (its `new` is `const`), the
//! decoder lives on the stack, and the input goes through
//! [`core::hint::black_box`] so it cannot be constant-folded.
#![no_std]
#![no_main]

use core::hint::black_box;
use core::sync::atomic::{AtomicU32, Ordering::Relaxed};

use copilot_core::{FrameDecoder, Outgoing, Payload, Route, Router, Value};

/// Body of a `session.event` for session `s-1` (a macro so that `concat!`
/// can frame it and a `const` assertion can check its `Content-Length`).
macro_rules! event_body {
    () => {
        r#"{"jsonrpc":"2.0","method":"session.event","params":{"sessionId":"s-1","event":{"type":"assistant.message","id":"e1","data":{"content":"hello from the agent"}}}}"#
    };
}

/// Body of the response to request 1, the `session.create` sent below.
macro_rules! response_body {
    () => {
        r#"{"jsonrpc":"2.0","id":1,"result":{"sessionId":"s-1"}}"#
    };
}

/// The bytes as they would arrive from the CLI: two `Content-Length` frames.
static INPUT: &[u8] =
    concat!("Content-Length: 160\r\n\r\n", event_body!(), "Content-Length: 53\r\n\r\n", response_body!()).as_bytes();

// A wrong length would turn the example into a framing-error demo.
const _: () = assert!(event_body!().len() == 160 && response_body!().len() == 53);

/// Up to 16 sessions delivering to a `u8` tag (say, an index into the
/// application's queues) and 16 requests in flight with `u8` waiters.
/// A `static`, as firmware shares it between the reader and the app.
static ROUTER: Router<u8, u8, 16, 16> = Router::new();

/// The tag events for session `s-1` are delivered to.
const SESSION_TAG: u8 = 3;
/// The waiter of the `session.create` request.
const CREATE_WAITER: u8 = 7;

// Observable results, for a debugger: events delivered, the last event's
// target, responses matched, anything else routed, bytes of the encoded
// request. `#[used]` keeps them, and so the stores into them, although
// nothing in the image reads them back.
/// Events delivered.
#[used]
static EVENTS: AtomicU32 = AtomicU32::new(0);
/// The target of the last event.
#[used]
static LAST_TARGET: AtomicU32 = AtomicU32::new(0);
/// Responses matched to the create request.
#[used]
static RESPONSES: AtomicU32 = AtomicU32::new(0);
/// Anything else routed (none with this input).
#[used]
static OTHER: AtomicU32 = AtomicU32::new(0);
/// Length of the encoded `session.create` frame.
#[used]
static SENT_BYTES: AtomicU32 = AtomicU32::new(0);

/// The reset vector, placed after the initial stack pointer by `link.x`.
#[link_section = ".vector_table.reset"]
#[used]
static RESET_VECTOR: extern "C" fn() -> ! = _start;

/// The entry point (see `link.x`).
#[no_mangle]
pub extern "C" fn _start() -> ! {
    // Reserve before sending the create, so an early event finds its session.
    let session = ROUTER.sessions().reserve("s-1", SESSION_TAG).ok();
    send_create();

    // The largest frame this image accepts; a longer one is skipped and
    // reported as `FrameError::TooLarge`, and the stream carries on.
    let mut decoder: FrameDecoder<[u8; 4096]> = FrameDecoder::new();
    // Feed in UART-sized pieces; a frame may span several of them.
    for piece in black_box(INPUT).chunks(64) {
        let mut rest = piece;
        while !rest.is_empty() {
            rest = &rest[decoder.feed(rest)..];
            while let Some(route) = ROUTER.poll(&mut decoder) {
                handle(route);
            }
        }
    }
    if let Some(handle) = session {
        // The create was answered: the session is now active.
        let _ = ROUTER.sessions().activate(handle);
    }
    loop {
        core::hint::spin_loop();
    }
}

/// Encodes the `session.create` request (id from the pending table) into a
/// buffer, where a real firmware would hand it to its UART.
fn send_create() {
    let Ok(id) = ROUTER.pending().insert(CREATE_WAITER) else { return };
    let Ok(params) = Value::parse(black_box(br#"{"sessionId":"s-1","streaming":true}"#)) else { return };
    let request = Outgoing::Request { id, method: "session.create", params: Some(&params as &dyn Payload) };
    let mut out = [0u8; 256];
    if let Ok(n) = request.encode(&mut out) {
        SENT_BYTES.store(n as u32, Relaxed);
        black_box(&out[..n]);
    }
}

/// Acts on one route: here, only counts it.
fn handle(route: Route<'_, u8, u8>) {
    match route {
        Route::Event { target, event, .. } => {
            EVENTS.fetch_add(1, Relaxed);
            LAST_TARGET.store(u32::from(target), Relaxed);
            black_box(event);
        }
        Route::Response { waiter, result, .. } => {
            RESPONSES.fetch_add(u32::from(waiter == CREATE_WAITER && result.is_ok()), Relaxed);
        }
        other => {
            OTHER.fetch_add(1, Relaxed);
            black_box(&other);
        }
    }
}

/// Without a debugger or a UART there is nowhere to report a panic.
#[panic_handler]
fn panic(_: &core::panic::PanicInfo) -> ! {
    loop {
        core::hint::spin_loop();
    }
}
