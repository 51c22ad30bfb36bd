//! The in-memory size of the core's fixed-capacity types.
//!
//! The core allocates nothing: a router, its tables and a frame decoder are
//! plain values whose size is their whole memory cost, so a firmware author
//! can place them in a `static` and know the RAM bill at compile time. These
//! tests print those sizes (run with `--nocapture`, as `scripts/size-report`
//! does) and bound them, so that a change which doubles a slot, or moves the
//! storage behind a pointer, fails here instead of in someone's linker map.
//!
//! The figures are for the host (64-bit `usize`); on a 32-bit MCU the
//! counters and lengths are narrower, so the same bounds hold there too.
//!
//! With the `alloc` feature the tables' slots are on the heap (written
//! there in place): the bounds below are then of the inline storage no
//! more, and one test checks instead that the tables left the value.
#![cfg(not(loom))] // loom's mutex is larger and not what ships.

use core::mem::size_of;

use copilot_core::Engine;
#[cfg(not(feature = "alloc"))]
use copilot_core::{FrameDecoder, PendingTable, Router, SessionTable, MAX_SESSION_ID_LEN};

/// The configuration `scripts/size-report` and the bare-metal example use.
#[cfg(not(feature = "alloc"))]
type SmallRouter = Router<u8, u8, 16, 16>;

// Also run under wasm32 (32-bit `usize`), where the bounds must hold too; the
// printed figures are dropped there (std has no stdout on wasm32-unknown-unknown).
#[cfg(not(feature = "alloc"))]
#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn print_and_bound_sizes() {
    let router = size_of::<SmallRouter>();
    let sessions = size_of::<SessionTable<u8, 16>>();
    let pending = size_of::<PendingTable<u8, 16>>();
    let decoder = size_of::<FrameDecoder<[u8; 65536]>>();
    println!("size_of::<Router<u8, u8, 16, 16>>()      = {router} bytes");
    println!("size_of::<SessionTable<u8, 16>>()        = {sessions} bytes");
    println!("size_of::<PendingTable<u8, 16>>()        = {pending} bytes");
    println!("size_of::<FrameDecoder<[u8; 65536]>>()      = {decoder} bytes");

    // The decoder is its buffer plus a few words of cursor state.
    assert!(decoder >= 65536, "the frame buffer must be inline, not behind a pointer");
    assert!(decoder < 65536 + 64, "FrameDecoder<[u8; 65536]> grew to {decoder} bytes");

    // Every session id is stored inline, so the table is at least N ids; the
    // upper bound leaves room for today's per-slot state (about 80 bytes)
    // but not for a doubled slot.
    assert!(sessions >= 16 * MAX_SESSION_ID_LEN, "session ids must be inline");
    assert!(sessions < 2 * 1024, "SessionTable<u8, 16> grew to {sessions} bytes");

    // A pending slot is an id, a deadline and a waiter: 16 of them stay
    // under 640 B.
    assert!(pending < 640, "PendingTable<u8, 16> grew to {pending} bytes");

    // The router is its two tables plus the counters, nothing hidden.
    assert!(router >= sessions + pending, "the router must own its tables inline");
    assert!(router < sessions + pending + 128, "Router<u8, u8, 16, 16> grew to {router} bytes");
}

/// The engine at the small configuration, and at the capacities proposed
/// for the std host (16,384 sessions, 1,024 requests, 4,096 open
/// obligations; targets are pointers, parking storage on the heap).
#[cfg(not(feature = "alloc"))]
#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn print_and_bound_engine_sizes() {
    let router = size_of::<SmallRouter>();
    let small = size_of::<Engine<u8, u8, [u8; 0], [u8; 0], 16, 16, 16>>();
    let host = size_of::<Engine<usize, usize, &mut [u8], &mut [u8], 16_384, 1_024, 4_096>>();
    println!("size_of::<Engine<u8, u8, [u8; 0], [u8; 0], 16, 16, 16>>() = {small} bytes");
    println!("size_of::<Engine<usize, usize, &mut [u8], &mut [u8], 16384, 1024, 4096>>() = {host} bytes");
    // An open obligation keeps its session id and request id inline
    // (96 + 80 bytes) plus about 40 bytes of state, and 16 for the memory
    // of its answer (hash, answer number) and 16 for that of a wait refused
    // at once (kept apart, so refusals do not push answers out); the
    // figure also carries the
    // per-session state (a turn's stall, the last durable event: 33 bytes
    // a session, as many sessions as obligations here).
    let per_obligation = (small - router) / 16;
    assert!(per_obligation >= 96 + 80, "obligation ids must be inline");
    assert!(per_obligation < 350, "an obligation slot grew to about {per_obligation} bytes");
    assert!(host < 4 << 20, "the std host's engine grew to {host} bytes");
}

/// With an allocator the std host's engine (megabytes of slots) is a few
/// hundred bytes of value: its tables are on the heap, so building it needs
/// no stack of their size.
#[cfg(feature = "alloc")]
#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn tables_are_on_the_heap_with_alloc() {
    let host = size_of::<Engine<usize, usize, &mut [u8], &mut [u8], 16_384, 1_024, 4_096>>();
    println!("size_of::<Engine<usize, usize, &mut [u8], &mut [u8], 16384, 1024, 4096>>() = {host} bytes (alloc)");
    assert!(host < 1024, "the engine holds {host} bytes inline");
    let engine: Engine<usize, usize, [u8; 0], [u8; 0], 16_384, 1_024, 4_096> = Engine::new([], [], Default::default());
    assert_eq!(engine.router().sessions().iter().count(), 0);
}
