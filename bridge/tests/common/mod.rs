//! What the bridge's tests share: a page's socket, opened with the token.

use std::net::TcpStream;

use copilot_bridge::{Bridge, TOKEN_PROTOCOL_PREFIX};
use tungstenite::client::IntoClientRequest;
use tungstenite::{Message, WebSocket};

/// Opens a socket with the token, sends a message (which starts the CLI),
/// and reads up to the end of the CLI's first line, which it returns
/// (without the line feed) with the socket. Nothing after that message is
/// read.
pub fn open_and_read_line(bridge: &Bridge) -> (WebSocket<TcpStream>, String) {
    let mut request = format!("ws://{}/ws", bridge.local_addr()).into_client_request().unwrap();
    request
        .headers_mut()
        .insert("sec-websocket-protocol", format!("{TOKEN_PROTOCOL_PREFIX}{}", bridge.token()).parse().unwrap());
    let stream = TcpStream::connect(bridge.local_addr()).unwrap();
    let (mut ws, _) = tungstenite::client(request, stream).unwrap();
    ws.send(Message::Binary(b"hello".to_vec().into())).unwrap();
    let mut output = Vec::new();
    while !output.contains(&b'\n') {
        match ws.read().unwrap() {
            Message::Binary(b) => output.extend_from_slice(&b),
            Message::Text(t) => output.extend_from_slice(t.as_bytes()),
            _ => {}
        }
    }
    let line = output.split(|&b| b == b'\n').next().unwrap();
    (ws, String::from_utf8(line.to_vec()).unwrap())
}
