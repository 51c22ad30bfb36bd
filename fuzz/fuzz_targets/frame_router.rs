//! copilot-core's read path: `FrameDecoder` + `Router::poll` (envelope
//! decoding, session and pending tables) over arbitrary bytes with canary
//! frames between them, read in pieces of any size.
//!
//! Checks, besides "no panic": the router's counters agree with the routes
//! handed out; canaries arrive in order, at most once; and a canary whose
//! junk cannot form a header, reached with the decoder in step, is decoded
//! and routed to its session, with at most one error for the junk.
#![no_main]

use std::hash::{BuildHasher, Hasher};
use std::sync::OnceLock;

use copilot_core::{FrameDecoder, FrameError, GrowingBuffer, Route, Router};
use copilot_fuzz::{canary_frame, canary_seq, cannot_form_header, Input, Reads, CANARY_SESSION};
use libfuzzer_sys::fuzz_target;

const CANARY: u8 = 1;

fn nonce() -> u64 {
    static NONCE: OnceLock<u64> = OnceLock::new();
    *NONCE.get_or_init(|| std::collections::hash_map::RandomState::new().build_hasher().finish())
}

fuzz_target!(|data: &[u8]| {
    let input = Input::parse(data);
    match input.config >> 3 & 0x3 {
        0 => run(FrameDecoder::with_buffer(vec![0u8; 256]), &input),
        1 => run(FrameDecoder::with_buffer(vec![0u8; 1024]), &input),
        2 => run(FrameDecoder::with_buffer(GrowingBuffer::new(64)).with_limit(4096), &input),
        _ => run(FrameDecoder::with_buffer(GrowingBuffer::new(1024)).with_limit(1 << 20), &input),
    }
});

#[derive(Default)]
struct Window {
    canaries: Vec<usize>,
    /// Routes other than frame errors (each is one decoded frame).
    frames: u64,
    errors: u64,
    malformed: u64,
    oversize: u64,
}

fn run<B: copilot_core::FrameBuffer>(mut decoder: FrameDecoder<B>, input: &Input<'_>) {
    let router: Router<u8, u32, 4, 4> = Router::new();
    router.sessions().reserve(CANARY_SESSION, CANARY).unwrap();
    router.sessions().reserve("s", 2).unwrap();
    if input.config & 0x20 != 0 {
        // Frames for unknown sessions are parked while this is reserved.
        router.sessions().reserve_unassigned(3).unwrap();
    }
    for w in 0..3 {
        router.pending().insert(w).unwrap();
    }
    let nonce = nonce();
    let mut reads = Reads::new(input.config);
    let mut delivered: Vec<usize> = Vec::new();
    let (mut frames, mut malformed, mut oversize) = (0u64, 0u64, 0u64);
    for (seq, junk) in input.junk.iter().enumerate() {
        let in_step = decoder.is_idle();
        let mut bytes = junk.to_vec();
        bytes.extend_from_slice(&canary_frame(seq, nonce));
        let mut window = Window::default();
        let mut rest = &bytes[..];
        while !rest.is_empty() {
            let mut piece = &rest[..reads.next_len().min(rest.len())];
            rest = &rest[piece.len()..];
            while !piece.is_empty() {
                let n = decoder.feed(piece);
                piece = &piece[n..];
                while let Some(route) = router.poll(&mut decoder) {
                    take(route, nonce, &mut window, input.config & 0x40 != 0);
                }
            }
        }
        if in_step && cannot_form_header(junk) {
            assert_eq!(window.canaries, [seq], "canary {seq} after junk {junk:?}");
            assert_eq!(window.frames, 1, "junk that cannot form a header decoded a frame: {junk:?}");
            assert!(window.errors <= 1, "one error per run of junk, got {}: {junk:?}", window.errors);
            assert!(decoder.is_idle(), "in step after the canary");
        }
        delivered.extend(&window.canaries);
        frames += window.frames;
        malformed += window.malformed;
        oversize += window.oversize;
    }
    assert!(delivered.windows(2).all(|w| w[0] < w[1]), "canaries in order, once each: {delivered:?}");
    let _ = decoder.finish();
    let stats = router.stats();
    assert_eq!(stats.frames, frames);
    assert_eq!(stats.oversize, oversize);
    assert_eq!(stats.malformed, malformed);
}

fn take(route: Route<'_, u8, u32>, nonce: u64, window: &mut Window, debug: bool) {
    if debug {
        // Reading every part of a route must not panic either.
        let _ = format!("{route:?}");
    }
    match route {
        Route::FrameError(e) => {
            window.errors += 1;
            match e {
                FrameError::TooLarge { .. } => window.oversize += 1,
                _ => window.malformed += 1,
            }
            let _ = e.to_string();
        }
        Route::Malformed(e) => {
            window.frames += 1;
            window.malformed += 1;
            let _ = (e.to_string(), e.code());
        }
        Route::Event { target, event, .. } => {
            window.frames += 1;
            if let Some(seq) = event.id.and_then(|id| canary_seq(&id.to_string(), nonce)) {
                assert_eq!(target, CANARY, "a canary routed to another session");
                window.canaries.push(seq);
            }
        }
        Route::Response { .. }
        | Route::UnmatchedResponse { .. }
        | Route::Request { .. }
        | Route::Notification { .. }
        | Route::Lifecycle { .. }
        | Route::UnknownSession { .. }
        | Route::Park { .. } => window.frames += 1,
    }
}
