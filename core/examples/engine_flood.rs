//! Prints how many frames per second the router and the engine decide, on
//! the same stream: 200,000 `session.event` frames for one session, one in
//! a hundred a permission prompt (answered at once through the engine).
//!
//! `cargo run --release -p copilot-core --example engine_flood`
use std::time::Instant;

use copilot_core::{Engine, EngineConfig, FrameDecoder, Route, Router};

const FRAMES: usize = 200_000;

fn input() -> Vec<u8> {
    let mut out = Vec::new();
    for n in 0..FRAMES {
        let body = if n % 100 == 0 {
            format!(
                r#"{{"jsonrpc":"2.0","method":"session.event","params":{{"sessionId":"s-1","event":{{"type":"permission.requested","id":"e{n}","data":{{"requestId":"r{n}","permissionRequest":{{"kind":"shell"}}}}}}}}}}"#
            )
        } else {
            format!(
                r#"{{"jsonrpc":"2.0","method":"session.event","params":{{"sessionId":"s-1","event":{{"type":"assistant.message_delta","id":"e{n}","ephemeral":true,"data":{{"messageId":"m","deltaContent":"some words of a reply"}}}}}}}}"#
            )
        };
        out.extend_from_slice(format!("Content-Length: {}\r\n\r\n", body.len()).as_bytes());
        out.extend_from_slice(body.as_bytes());
    }
    out
}

fn main() {
    let input = input();
    // Two rounds: the first warms caches and page tables for both.
    for round in 1..=2 {
        println!("round {round}");
        run(&input);
    }
}

fn run(input: &[u8]) {
    let router: Box<Router<u32, (), 256, 1024>> = Box::new(Router::new());
    router.sessions().reserve("s-1", 1).unwrap();
    let mut decoder: Box<FrameDecoder<[u8; 65536]>> = Box::new(FrameDecoder::new());
    let start = Instant::now();
    let mut events = 0;
    for chunk in input.chunks(64 << 10) {
        let mut rest = chunk;
        while !rest.is_empty() {
            rest = &rest[decoder.feed(rest)..];
            while let Some(route) = router.poll(&mut decoder) {
                events += usize::from(matches!(route, Route::Event { .. }));
            }
        }
    }
    let router_rate = events as f64 / start.elapsed().as_secs_f64();
    println!("router: {events} events, {router_rate:.0} frames/s");

    let mut engine: Box<Engine<u32, (), Vec<u8>, Vec<u8>, 256, 1024, 1024>> =
        Box::new(Engine::new(vec![0; 1 << 20], vec![0; 1 << 20], EngineConfig::new()));
    let h = engine.reserve("s-1", 1).unwrap();
    let mut sent = Vec::with_capacity(1 << 20);
    engine.complete_open(h, Ok(copilot_core::Value::parse(b"{}").unwrap())).unwrap();
    let mut decoder: Box<FrameDecoder<[u8; 65536]>> = Box::new(FrameDecoder::new());
    let start = Instant::now();
    let (mut events, mut answered) = (0, 0);
    for chunk in input.chunks(64 << 10) {
        let mut rest = chunk;
        while !rest.is_empty() {
            rest = &rest[decoder.feed(rest)..];
            while let Some(o) = engine.poll(&mut decoder, 0) {
                events += usize::from(matches!(o.route, Route::Event { .. }));
                if let Some(ob) = o.obligation {
                    engine.answer(ob.id, br#"{"kind":"approve-once"}"#).unwrap();
                    answered += 1;
                }
            }
            // What the engine decided goes to the wire (here, a buffer).
            sent.extend_from_slice(engine.transmit());
            engine.transmitted(usize::MAX);
        }
    }
    let engine_rate = events as f64 / start.elapsed().as_secs_f64();
    println!("engine: {events} events, {answered} answered, {engine_rate:.0} frames/s");
    println!("engine/router: {:.2}", engine_rate / router_rate);
}
