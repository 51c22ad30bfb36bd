//! A page whose socket drops reconnects with the same token and resumes its
//! sessions by id on the CLI the bridge starts for the new socket. Offline,
//! that CLI must see the state folder of the one killed with the dropped
//! socket: every CLI of a bridge runs on the bridge's one folder, kept while
//! the bridge runs, and no CLI outlives its socket.
//!
//! The CLI here is a stand-in script that tells its pid, its state folder
//! and its working folder, then reads until its input ends (the real CLI
//! resuming through the bridge is wasm/browser-test/reconnect.test.mjs).

#![cfg(unix)]

use std::ffi::OsString;
use std::io;
use std::net::TcpStream;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use copilot_bridge::{Bridge, BridgeConfig, ModelStandIn};
use tungstenite::client::IntoClientRequest;
use tungstenite::{Message, WebSocket};

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
    std::fs::write(&path, "#!/bin/sh\nprintf '%s %s %s\\n' \"$$\" \"$COPILOT_HOME\" \"$(pwd)\"\nexec cat >/dev/null\n")
        .unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

/// Opens a socket with the token, sends a message (which starts the CLI),
/// and returns the socket with the CLI's line: `(pid, state folder, cwd)`.
fn open(bridge: &Bridge) -> (WebSocket<TcpStream>, (u32, String, String)) {
    let mut request = format!("ws://{}/ws", bridge.local_addr()).into_client_request().unwrap();
    request
        .headers_mut()
        .insert("sec-websocket-protocol", format!("copilot.token.{}", bridge.token()).parse().unwrap());
    let stream = TcpStream::connect(bridge.local_addr()).unwrap();
    let (mut ws, _) = tungstenite::client(request, stream).unwrap();
    ws.send(Message::Binary(b"hello".to_vec().into())).unwrap();
    let mut line = Vec::new();
    while !line.ends_with(b"\n") {
        match ws.read().unwrap() {
            Message::Binary(b) => line.extend_from_slice(&b),
            Message::Text(t) => line.extend_from_slice(t.as_bytes()),
            _ => {}
        }
    }
    let text = String::from_utf8(line).unwrap();
    let mut parts = text.trim_end().splitn(3, ' ');
    let pid = parts.next().unwrap().parse().unwrap();
    let (home, cwd) = (parts.next().unwrap().to_owned(), parts.next().unwrap().to_owned());
    (ws, (pid, home, cwd))
}

fn gone(pid: u32) {
    while Path::new(&format!("/proc/{pid}")).exists() {
        std::thread::sleep(std::time::Duration::from_millis(5));
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
