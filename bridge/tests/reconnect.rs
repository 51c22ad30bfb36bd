//! A page whose socket drops reconnects with the same token and resumes its
//! sessions by id on the CLI the bridge starts for the new socket. Offline,
//! that CLI must see the state folder of the one killed with the dropped
//! socket: every CLI of a bridge runs on the bridge's one folder, kept while
//! the bridge runs, and no CLI outlives its socket.
//!
//! A socket that goes silent is pinged, and dropped with its CLI when it
//! does not answer, so that no CLI of a peer gone without a word runs on
//! (beside the one a reconnected page gets for the same sessions).
//!
//! The CLI here is a stand-in script that tells its pid, its state folder
//! and its working folder, then waits (with its output open) to be killed (the real CLI
//! resuming through the bridge is wasm/browser-test/reconnect.test.mjs).

#![cfg(unix)]

use std::ffi::OsString;
use std::io::{self, Read};
use std::net::TcpStream;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use copilot_bridge::{Bridge, BridgeConfig, ModelStandIn};
use tungstenite::{Message, WebSocket};

mod common;

/// No model: the stand-in CLI asks none.
struct NoModel;

impl ModelStandIn for NoModel {
    fn cli_env(&self) -> Vec<(OsString, OsString)> {
        Vec::new()
    }

    fn script(&self, _body: &[u8]) -> io::Result<(u16, Vec<u8>)> {
        Ok((404, Vec::new()))
    }
}

/// Writes the stand-in CLI into `dir`.
fn stand_in_cli(dir: &Path) -> PathBuf {
    let path = dir.join("cli.sh");
    std::fs::write(&path, "#!/bin/sh\nprintf '%s %s %s\\n' \"$$\" \"$COPILOT_HOME\" \"$(pwd)\"\nexec sleep 100000\n")
        .unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

/// Opens a socket with the token, sends a message (which starts the CLI),
/// and returns the socket with the CLI's line: `(pid, state folder, cwd)`.
fn open(bridge: &Bridge) -> (WebSocket<TcpStream>, (u32, String, String)) {
    let (ws, text) = common::open_and_read_line(bridge);
    let mut parts = text.splitn(3, ' ');
    let pid = parts.next().unwrap().parse().unwrap();
    let (home, cwd) = (parts.next().unwrap().to_owned(), parts.next().unwrap().to_owned());
    (ws, (pid, home, cwd))
}

fn gone(pid: u32) {
    while Path::new(&format!("/proc/{pid}")).exists() {
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn a_reconnected_socket_gets_a_new_cli_on_the_same_state_folder() {
    let dir = std::env::temp_dir().join(format!("copilot-bridge-reconnect-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let bridge = Bridge::start(BridgeConfig {
        cli_path: Some(stand_in_cli(&dir)),
        offline: Some(Arc::new(NoModel)),
        ..BridgeConfig::default()
    })
    .unwrap();

    let (first, (pid1, home1, cwd1)) = open(&bridge);
    // Dropped, not closed: the TCP connection ends without a close frame.
    let stream = first.into_inner();
    stream.shutdown(std::net::Shutdown::Both).unwrap();
    drop(stream);
    // No CLI outlives its socket.
    gone(pid1);
    assert!(Path::new(&home1).is_dir(), "the state folder is kept: {home1}");

    let (second, (pid2, home2, cwd2)) = open(&bridge);
    assert_ne!(pid1, pid2, "a CLI of the new socket's own");
    assert_eq!(home2, home1, "the new CLI sees the sessions of the one before");
    assert_eq!(cwd2, cwd1, "and works in the same folder");
    assert!(home1.contains(&format!("copilot-bridge-{}-{}", std::process::id(), bridge.local_addr().port())));

    // Another bridge of the process has a folder of its own.
    let other = Bridge::start(BridgeConfig {
        cli_path: Some(stand_in_cli(&dir)),
        offline: Some(Arc::new(NoModel)),
        ..BridgeConfig::default()
    })
    .unwrap();
    let (third, (pid3, home3, _)) = open(&other);
    assert_ne!(home3, home1);

    drop((second, third));
    gone(pid2);
    gone(pid3);
    // The bridges run until the process ends: their folders go now.
    for home in [home1, home3] {
        let _ = std::fs::remove_dir_all(Path::new(&home).parent().unwrap());
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A bridge that pings a socket silent for `keepalive` and drops it
/// `pong_timeout` later, and its stand-in CLI's folder.
fn keepalive_bridge(name: &str, keepalive: Duration, pong_timeout: Duration) -> (Bridge, PathBuf) {
    let dir = std::env::temp_dir().join(format!("copilot-bridge-{name}-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let bridge = Bridge::start(BridgeConfig {
        cli_path: Some(stand_in_cli(&dir)),
        offline: Some(Arc::new(NoModel)),
        keepalive,
        pong_timeout,
        ..BridgeConfig::default()
    })
    .unwrap();
    (bridge, dir)
}

#[test]
fn a_socket_that_answers_pings_keeps_its_cli() {
    // Pinged after 50 ms of silence, with an hour to answer: a test thread
    // held off the CPU by a loaded machine still answers in time, and
    // three pings come at once.
    let (bridge, dir) = keepalive_bridge("answers", Duration::from_millis(50), Duration::from_secs(3600));
    let (mut ws, (pid, home, _)) = open(&bridge);
    // Reading answers each ping (tungstenite queues the pong and sends it
    // with the next read).
    let mut pings = 0;
    while pings < 3 {
        if let Message::Ping(_) = ws.read().unwrap() {
            pings += 1;
        }
    }
    assert!(Path::new(&format!("/proc/{pid}")).exists(), "the CLI of a socket that answers runs on");
    drop(ws);
    gone(pid);
    let _ = std::fs::remove_dir_all(Path::new(&home).parent().unwrap());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_socket_that_goes_silent_is_dropped_with_its_cli() {
    let (bridge, dir) = keepalive_bridge("silent", Duration::from_millis(50), Duration::from_millis(50));
    let (ws, (pid, home, _)) = open(&bridge);
    // From here on, nothing is answered: the raw bytes are read, and the
    // first ping (an unmasked ping frame, empty: 0x89 0x00) must be
    // followed by the end of the connection, not by another ping.
    let mut stream = ws.into_inner();
    let mut bytes = Vec::new();
    let mut buf = [0u8; 256];
    loop {
        let n = stream.read(&mut buf).unwrap_or(0);
        if n == 0 {
            break;
        }
        bytes.extend_from_slice(&buf[..n]);
        let pings = bytes.windows(2).filter(|w| w == &[0x89, 0x00]).count();
        assert!(pings < 2, "a second ping to a socket that never answered the first: {bytes:02x?}");
    }
    assert!(bytes.starts_with(&[0x89, 0x00]), "pinged before it was dropped: {bytes:02x?}");
    gone(pid);
    let _ = std::fs::remove_dir_all(Path::new(&home).parent().unwrap());
    let _ = std::fs::remove_dir_all(&dir);
}
