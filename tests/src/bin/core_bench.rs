//! Throughput of the core's read path on real events, beside the cost of
//! merely parsing the same bodies into a `serde_json::Value`.
//!
//! `cargo run --release -p copilot-tests --bin core_bench [events]`
//!
//! The stream is the `session.event` frames of the recorded CLI transcripts,
//! repeated until it holds the requested number of events (100,000 by
//! default), all for one session reserved in the table. It is decoded in
//! 64 KiB reads, as a host's reader would get it.

use std::hint::black_box;
use std::time::Instant;

use copilot_core::{FrameDecoder, Route, Router};
use copilot_tests::{transcript, Direction, TRANSCRIPTS};

const SESSION: &str = "bench-session";

fn main() {
    let events: usize = std::env::args().nth(1).map_or(100_000, |a| a.parse().expect("event count"));

    // Real event bodies, re-addressed to one session.
    let mut bodies = Vec::new();
    for name in TRANSCRIPTS {
        for line in transcript(name) {
            if line.direction != Direction::In {
                continue;
            }
            let mut m: serde_json::Value = serde_json::from_str(&line.body).unwrap();
            if m["method"] != "session.event" {
                continue;
            }
            m["params"]["sessionId"] = SESSION.into();
            bodies.push(serde_json::to_string(&m).unwrap());
        }
    }
    let mut stream = Vec::new();
    let mut total_body = 0usize;
    for i in 0..events {
        let body = &bodies[i % bodies.len()];
        total_body += body.len();
        stream.extend_from_slice(format!("Content-Length: {}\r\n\r\n", body.len()).as_bytes());
        stream.extend_from_slice(body.as_bytes());
    }
    let mb = stream.len() as f64 / 1e6;
    println!(
        "{events} events, {} distinct bodies, {mb:.1} MB framed, mean body {} B",
        bodies.len(),
        total_body / events
    );

    // The core: frame, validate, decode the envelope, find the session.
    let mut best = f64::MAX;
    for _ in 0..5 {
        let router: Router<u32, (), 16, 16> = Router::new();
        router.sessions().reserve(SESSION, 1).unwrap();
        let mut decoder = FrameDecoder::with_buffer(vec![0u8; 64 * 1024]);
        let mut delivered = 0usize;
        let start = Instant::now();
        for chunk in stream.chunks(64 * 1024) {
            let mut rest = chunk;
            while !rest.is_empty() {
                rest = &rest[decoder.feed(rest)..];
                while let Some(route) = router.poll(&mut decoder) {
                    match route {
                        Route::Event { target, event, .. } => {
                            black_box((target, event.event_type.raw()));
                            delivered += 1;
                        }
                        other => panic!("unexpected route {other:?}"),
                    }
                }
            }
        }
        best = best.min(start.elapsed().as_secs_f64());
        assert_eq!(delivered, events, "every event delivered");
        assert_eq!(router.stats().frames as usize, events);
    }
    let core_rate = events as f64 / best;
    println!("copilot-core route:        {:>10.0} events/s  {:>7.1} MB/s", core_rate, mb / best);

    // The reference: only parsing each body into a serde_json::Value.
    let mut best = f64::MAX;
    for _ in 0..5 {
        let start = Instant::now();
        for i in 0..events {
            let v: serde_json::Value = serde_json::from_str(&bodies[i % bodies.len()]).unwrap();
            black_box(v);
        }
        best = best.min(start.elapsed().as_secs_f64());
    }
    let serde_rate = events as f64 / best;
    println!("serde_json::Value parse:   {:>10.0} events/s  {:>7.1} MB/s", serde_rate, mb / best);
    println!("ratio core / serde_json::Value: {:.2}x", core_rate / serde_rate);
}
