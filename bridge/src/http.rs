//! The HTTP/1.1 the bridge speaks: one request head per connection, parsed
//! by `httparse` and bounded, and short responses that close the connection.

use std::io::{self, Read, Write};
use std::net::TcpStream;

/// The largest request head read, in bytes.
const MAX_HEAD: usize = 16 << 10;
/// The most header lines a request head may have.
const MAX_HEADERS: usize = 64;

/// A request head.
pub(crate) struct Head {
    pub(crate) method: String,
    /// The request target as sent (path, query and all).
    pub(crate) target: String,
    headers: Vec<(String, String)>,
}

impl Head {
    /// The first value of the header `name` (any case).
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }

    /// Whether the comma-separated header `name` lists `token` (any case).
    pub(crate) fn has_token(&self, name: &str, token: &str) -> bool {
        self.header(name).is_some_and(|v| v.split(',').any(|t| t.trim().eq_ignore_ascii_case(token)))
    }

    /// The target without its query or fragment.
    pub(crate) fn path_only(&self) -> &str {
        self.target.split(['?', '#']).next().unwrap_or(&self.target)
    }
}

/// Reads a request head; returns it with any bytes read past it, or `None`
/// for a head that is oversize, malformed or not UTF-8.
pub(crate) fn read_head(stream: &mut impl Read) -> io::Result<Option<(Head, Vec<u8>)>> {
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 2048];
    loop {
        let n = stream.read(&mut chunk)?;
        if n == 0 {
            return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "closed before a request"));
        }
        buf.extend_from_slice(&chunk[..n]);
        match parse_head(&buf) {
            Parsed::Head(head, length) => return Ok(Some((head, buf.split_off(length)))),
            Parsed::Refused => return Ok(None),
            Parsed::Partial if buf.len() > MAX_HEAD => return Ok(None),
            Parsed::Partial => {}
        }
    }
}

/// What the bytes read so far hold.
enum Parsed {
    /// A whole head of this many bytes.
    Head(Head, usize),
    /// Not a head yet.
    Partial,
    /// Not an acceptable head.
    Refused,
}

fn parse_head(buf: &[u8]) -> Parsed {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut request = httparse::Request::new(&mut headers);
    let length = match request.parse(buf) {
        Ok(httparse::Status::Complete(n)) if n <= MAX_HEAD => n,
        Ok(httparse::Status::Partial) => return Parsed::Partial,
        Ok(httparse::Status::Complete(_)) | Err(_) => return Parsed::Refused,
    };
    let (Some(method), Some(target)) = (request.method, request.path) else { return Parsed::Refused };
    let mut kept = Vec::with_capacity(request.headers.len());
    for h in request.headers.iter() {
        let Ok(value) = std::str::from_utf8(h.value) else { return Parsed::Refused };
        kept.push((h.name.to_owned(), value.trim().to_owned()));
    }
    Parsed::Head(Head { method: method.to_owned(), target: target.to_owned(), headers: kept }, length)
}

/// Writes a whole response (with the bridge's safety headers) and flushes.
pub(crate) fn respond(stream: &mut TcpStream, status: u16, content_type: &str, body: &[u8]) -> io::Result<()> {
    let reason = match status {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        413 => "Content Too Large",
        426 => "Upgrade Required",
        431 => "Request Header Fields Too Large",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        _ => "Error",
    };
    let mut head = format!(
        "HTTP/1.1 {status} {reason}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\
         Cache-Control: no-store\r\nX-Content-Type-Options: nosniff\r\nReferrer-Policy: no-referrer\r\n",
        body.len()
    );
    if content_type.starts_with("text/html") {
        head.push_str(
            "Content-Security-Policy: default-src 'self'; script-src 'self' 'wasm-unsafe-eval'; \
             connect-src 'self'; style-src 'self'; img-src 'self' data:; frame-ancestors 'none'\r\n",
        );
    }
    if status == 426 {
        head.push_str("Upgrade: websocket\r\n");
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes())?;
    stream.write_all(body)?;
    stream.flush()
}

/// Refuses with `status`, logs why (never the token: the log names the
/// method and the path without its query), and ends the exchange.
pub(crate) fn refuse(
    stream: &mut TcpStream,
    peer: &str,
    head: Option<&Head>,
    status: u16,
    why: &str,
) -> io::Result<()> {
    match head {
        Some(h) => log::warn!("refused {peer} {} {}: {status} {why}", h.method, h.path_only()),
        None => log::warn!("refused {peer}: {status} {why}"),
    }
    respond(stream, status, "text/plain; charset=utf-8", format!("{why}\n").as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Reads from `bytes` as a peer that sends them in `chunk`-byte pieces.
    fn read_from(bytes: &[u8], chunk: usize) -> io::Result<Option<(Head, Vec<u8>)>> {
        struct Pieces<'a>(&'a [u8], usize);
        impl Read for Pieces<'_> {
            fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
                let n = self.0.len().min(self.1).min(buf.len());
                buf[..n].copy_from_slice(&self.0[..n]);
                self.0 = &self.0[n..];
                Ok(n)
            }
        }
        read_head(&mut Pieces(bytes, chunk))
    }

    #[test]
    fn a_head_is_read_whole_and_the_bytes_past_it_kept() {
        let request = b"GET /ws?x=1 HTTP/1.1\r\nHost: 127.0.0.1:9\r\nUpgrade: WebSocket\r\nConnection: keep-alive, Upgrade\r\n\r\n\x81\x05hello";
        for chunk in [1, 7, request.len()] {
            let (head, rest) = read_from(request, chunk).unwrap().expect("a head");
            assert_eq!(head.method, "GET");
            assert_eq!(head.path_only(), "/ws");
            assert_eq!(head.header("HOST"), Some("127.0.0.1:9"));
            assert!(head.has_token("upgrade", "websocket"));
            assert!(head.has_token("connection", "upgrade"));
            // Whatever followed the head in the same read is the socket's.
            assert!(b"\x81\x05hello".starts_with(&rest), "chunk {chunk}: {rest:?}");
        }
    }

    #[test]
    fn oversize_heads_are_refused() {
        let mut request = b"GET / HTTP/1.1\r\nX-Big: ".to_vec();
        request.extend(std::iter::repeat_n(b'a', MAX_HEAD));
        request.extend_from_slice(b"\r\n\r\n");
        assert!(read_from(&request, 2048).unwrap().is_none());
        // Too many header lines, each small.
        let mut many = b"GET / HTTP/1.1\r\n".to_vec();
        for n in 0..=MAX_HEADERS {
            many.extend_from_slice(format!("X-{n}: 1\r\n").as_bytes());
        }
        many.extend_from_slice(b"\r\n");
        assert!(read_from(&many, 2048).unwrap().is_none());
    }

    #[test]
    fn malformed_heads_are_refused() {
        for bad in [
            &b"GET / HTTP/2.0\r\n\r\n"[..],
            b"GET /\r\n\r\n",
            b"GET / HTTP/1.1\r\nNo colon here\r\n\r\n",
            b"GET / HTTP/1.1\r\nBad Name: x\r\n\r\n",
            b"GET / HTTP/1.1\r\nX: \xff\xfe\r\n\r\n",
            b"\x00\x01\x02\x03\r\n\r\n",
        ] {
            assert!(read_from(bad, 4096).unwrap().is_none(), "{:?}", String::from_utf8_lossy(bad));
        }
    }

    #[test]
    fn a_peer_that_closes_mid_head_is_an_error() {
        let err = read_from(b"GET / HTTP/1.1\r\nHost: x", 4096).err().expect("an error");
        assert_eq!(err.kind(), io::ErrorKind::UnexpectedEof);
    }
}
