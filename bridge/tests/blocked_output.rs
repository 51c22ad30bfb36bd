//! A page that stops reading (a frozen tab, a network gone with data in
//! flight) must not keep its CLI: the bridge's writes to its socket block,
//! and neither the keepalive nor a close may wait behind them. A write that
//! makes no progress for the keepalive bound ends the connection too.
//!
//! The CLI here is a stand-in script that tells its pid, then writes
//! without end (and reads its input, so the page's messages are taken);
//! the page never reads its socket again after that line, so the output
//! fills every buffer on the way and the bridge's next write blocks.
//! Each test waits for the outcome itself (the CLI gone, the socket
//! closed), within a generous bound that only a bridge that never ends the
//! connection reaches.

#![cfg(unix)]

use std::io::{self, Read};
use std::net::TcpStream;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use copilot_bridge::{Bridge, BridgeConfig};
use tungstenite::{Message, WebSocket};

mod common;

/// How long a test waits for the event it expects before it fails: far
/// beyond the keepalive bound of every test (a bridge whose keepalive
/// waits behind a blocked write never ends these connections at all).
const BOUND: Duration = Duration::from_secs(60);

/// A bridge whose CLI is the flooding stand-in, with this keepalive.
fn flooding_bridge(name: &str, keepalive: Duration) -> (Bridge, PathBuf) {
    let dir = std::env::temp_dir().join(format!("copilot-bridge-{name}-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let cli = dir.join("cli.sh");
    // `yes` in the background (its output is the CLI's), `cat` in front
    // (the script's pid, reading the page's messages); both are in the
    // group the bridge kills.
    std::fs::write(&cli, "#!/bin/sh\necho $$\nyes &\nexec cat >/dev/null\n").unwrap();
    std::fs::set_permissions(&cli, std::fs::Permissions::from_mode(0o755)).unwrap();
    let bridge = Bridge::start(BridgeConfig {
        cli_path: Some(cli),
        keepalive,
        pong_timeout: keepalive,
        ..BridgeConfig::default()
    })
    .unwrap();
    (bridge, dir)
}

/// Opens a socket with the token, sends a message (which starts the CLI),
/// and reads up to the CLI's first line: its pid. Nothing more is read.
fn open(bridge: &Bridge) -> (WebSocket<TcpStream>, u32) {
    let (ws, line) = common::open_and_read_line(bridge);
    (ws, line.parse().unwrap())
}

/// Waits for the process to be gone (the bridge reaps the CLI it kills).
fn assert_ends(pid: u32, what: &str) {
    let start = Instant::now();
    while Path::new(&format!("/proc/{pid}")).exists() {
        assert!(start.elapsed() < BOUND, "{what}: its CLI (pid {pid}) still runs");
        thread::sleep(Duration::from_millis(10));
    }
}

/// Reads what the bridge sent before it ended the connection, to the end
/// of the stream.
fn assert_closed(mut stream: TcpStream) {
    stream.set_read_timeout(Some(BOUND)).unwrap();
    let mut buf = vec![0u8; 64 << 10];
    loop {
        match stream.read(&mut buf) {
            Ok(0) => return,
            Ok(_) => {}
            Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => {
                panic!("the socket is still open")
            }
            // A reset ends it too.
            Err(_) => return,
        }
    }
}

/// Waits until the bytes waiting unread on `stream` stop growing (the
/// sender's window is shut).
fn wait_until_unread_output_stops_growing(stream: &TcpStream) {
    let mut buf = vec![0u8; 64 << 20];
    let mut before = 0;
    loop {
        let now = stream.peek(&mut buf).unwrap();
        if now == before && now > 0 {
            return;
        }
        before = now;
        thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_page_that_stops_reading_loses_its_cli() {
    let (bridge, dir) = flooding_bridge("unread", Duration::from_millis(100));
    let (ws, pid) = open(&bridge);
    // Silent from here on, and never reading: the keepalive's ping cannot
    // reach the page, and its missing answer must still end the connection.
    assert_ends(pid, "a page that stopped reading");
    assert_closed(ws.into_inner());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_page_that_sends_but_stops_reading_loses_its_cli() {
    // The page is never silent, so its keepalive never fires: only the
    // deadline of the blocked write can end the connection.
    let (bridge, dir) = flooding_bridge("unread-sending", Duration::from_millis(500));
    let (mut ws, pid) = open(&bridge);
    let stream = ws.get_ref().try_clone().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let sender = {
        let stop = Arc::clone(&stop);
        thread::spawn(move || {
            while !stop.load(Ordering::SeqCst) {
                if ws.send(Message::Binary(b"still here".to_vec().into())).is_err() {
                    break;
                }
                thread::sleep(Duration::from_millis(5));
            }
        })
    };
    assert_ends(pid, "a page that sends but stopped reading");
    stop.store(true, Ordering::SeqCst);
    assert_closed(stream);
    sender.join().unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_page_that_closes_without_reading_loses_its_cli() {
    // No keepalive within the test's bound: only the close can end it.
    let (bridge, dir) = flooding_bridge("unread-closing", Duration::from_secs(3600));
    let (mut ws, pid) = open(&bridge);
    // The close is sent once the output waiting unread at the page has
    // stopped growing, so the bridge's write most likely blocks by then
    // (this side cannot see it; a pause too short makes the test weaker,
    // never wrong: a bridge that ends the CLI on a close passes either way).
    wait_until_unread_output_stops_growing(ws.get_ref());
    ws.close(None).unwrap();
    assert_ends(pid, "a page that closed its socket without reading");
    // Reading what is left lets the blocked write and the close frame out.
    assert_closed(ws.into_inner());
    let _ = std::fs::remove_dir_all(&dir);
}
