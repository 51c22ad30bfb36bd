//! The floors: the least any client must do with the fake CLI's flood,
//! measured on the same bytes over the same transports as the styles.
//! A plain client writes `session.create` and then `session.send` of
//! the flood's prompt as raw frames, and reads the answer, the N events and the
//! `session.idle` with the core's `FrameDecoder` (64 KiB to start, growing
//! as the host's reader does), then does nothing more (`framing`) or parses
//! each body into a `serde_json::Value` (`serde`).

use std::hint::black_box;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};

use copilot_host::core::limits::MAX_FRAME_BYTES;
use copilot_host::core::{frame_header, FrameDecoder, GrowingBuffer, MAX_FRAME_HEADER_LEN};

use crate::check::Tally;
use crate::measure::Measurement;
use crate::options::{Floor, TransportName};
use crate::timed::{timed, Consumers};
use crate::SERVE;

/// The host's first read buffer.
const READ_BUFFER: usize = 64 * 1024;
/// The session the plain client opens.
const SESSION_ID: &str = "flood-floor";
/// What the fake writes for `session.create`: the lifecycle notice, the
/// answer and `session.start`.
const CREATE_FRAMES: u64 = 3;

/// One run of `floor` over `transport`.
/// `prompt` is the flood's (`flood:N` or `flood-mix:N`).
pub fn flood(floor: Floor, transport: TransportName, events: usize, prompt: &str) -> Result<Measurement, String> {
    let name = format!("{} {}", floor.as_str(), transport.as_str());
    let (mut fake, mut plain) = start_fake(transport).map_err(|e| format!("{name}: cannot start the fake CLI: {e}"))?;
    let create = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"session.create","params":{{"sessionId":"{SESSION_ID}","model":"fake-model","streaming":true}}}}"#
    );
    plain.write(&create).map_err(|e| format!("{name}: session.create: {e}"))?;
    let opened = plain.read_frames(CREATE_FRAMES, |_, _| {}).map_err(|e| format!("{name}: reading the create: {e}"))?;
    if opened.frames < CREATE_FRAMES {
        return Err(format!("{name}: the fake CLI ended after {} frames of the create", opened.frames));
    }

    // The answer to the send, the deltas, the idle.
    let expected = events as u64 + 2;
    let mut last_is_idle = false;
    let mut see_last = |i: u64, body: &[u8]| {
        if i + 1 == expected {
            last_is_idle = body.windows(b"\"session.idle\"".len()).any(|w| w == b"\"session.idle\"");
        }
    };
    let send = format!(
        r#"{{"jsonrpc":"2.0","id":2,"method":"session.send","params":{{"sessionId":"{SESSION_ID}","prompt":"{prompt}"}}}}"#
    );
    let (read, timing) = timed(&|| 0, &Consumers::new(0), || {
        plain.write(&send)?;
        match floor {
            Floor::Framing => plain.read_frames(expected, |i, body| {
                black_box(body);
                see_last(i, body);
            }),
            Floor::Serde => plain.read_frames(expected, |i, body| {
                let value = serde_json::from_slice::<serde_json::Value>(body);
                black_box(value.is_ok());
                see_last(i, body);
            }),
        }
    });
    let read = read.map_err(|e| format!("{name}: reading the flood: {e}"))?;
    drop(plain);
    if let Err(e) = fake.wait() {
        eprintln!("flood: {name}: waiting for the fake CLI: {e}");
    }
    let missing = (expected - read.frames) as usize;
    let tally = Tally { lost: missing, idle: last_is_idle, ..Tally::NONE };
    let mut m = Measurement::new(floor.as_str(), transport.as_str(), events, &timing, tally);
    (m.frames, m.bytes, m.malformed) = (read.frames, read.bytes, read.malformed);
    Ok(m)
}

/// Starts this binary as the fake CLI, as the host starts the real one, and
/// connects a plain client to it.
fn start_fake(transport: TransportName) -> io::Result<(Child, PlainClient)> {
    let exe = std::env::current_exe()?;
    let mut command = Command::new(exe);
    command.arg(SERVE).stdout(Stdio::piped()).stderr(Stdio::inherit());
    match transport {
        TransportName::Stdio => {
            let mut child = command.arg("--stdio").stdin(Stdio::piped()).spawn()?;
            let stdin = child.stdin.take().expect("piped stdin");
            let stdout = child.stdout.take().expect("piped stdout");
            Ok((child, PlainClient::new(Box::new(stdout), Box::new(stdin))))
        }
        TransportName::Tcp => {
            let mut child = command.args(["--port", "0"]).stdin(Stdio::null()).spawn()?;
            let mut line = String::new();
            BufReader::new(child.stdout.take().expect("piped stdout")).read_line(&mut line)?;
            let port: u16 = line
                .trim()
                .rsplit(' ')
                .next()
                .and_then(|p| p.parse().ok())
                .ok_or_else(|| io::Error::other(format!("no port in the fake's announcement {line:?}")))?;
            let stream = TcpStream::connect(("127.0.0.1", port))?;
            stream.set_nodelay(true)?;
            Ok((child, PlainClient::new(Box::new(stream.try_clone()?), Box::new(stream))))
        }
    }
}

/// The plain client: raw frames out, the decoder in.
struct PlainClient {
    reader: Box<dyn Read>,
    writer: Box<dyn Write>,
    decoder: FrameDecoder<GrowingBuffer>,
}

/// What [`PlainClient::read_frames`] read.
struct FramesRead {
    frames: u64,
    bytes: u64,
    malformed: u64,
}

impl PlainClient {
    fn new(reader: Box<dyn Read>, writer: Box<dyn Write>) -> PlainClient {
        let decoder = FrameDecoder::with_buffer(GrowingBuffer::new(READ_BUFFER)).with_limit(MAX_FRAME_BYTES);
        PlainClient { reader, writer, decoder }
    }

    fn write(&mut self, body: &str) -> io::Result<()> {
        let mut header = [0u8; MAX_FRAME_HEADER_LEN];
        let n = frame_header(body.len(), &mut header);
        self.writer.write_all(&header[..n])?;
        self.writer.write_all(body.as_bytes())?;
        self.writer.flush()
    }

    /// Reads until `count` frames have come (fewer if the stream ends),
    /// handing each body and its index to `each`.
    fn read_frames(&mut self, count: u64, mut each: impl FnMut(u64, &[u8])) -> io::Result<FramesRead> {
        let mut read = FramesRead { frames: 0, bytes: 0, malformed: 0 };
        while read.frames < count {
            while let Some(frame) = self.decoder.poll() {
                match frame {
                    Ok(body) => {
                        each(read.frames, body);
                        read.frames += 1;
                        read.bytes += body.len() as u64;
                        if read.frames == count {
                            return Ok(read);
                        }
                    }
                    Err(_) => read.malformed += 1,
                }
            }
            let n = match self.reader.read(self.decoder.spare()) {
                Ok(0) => return Ok(read),
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            self.decoder.commit(n);
        }
        Ok(read)
    }
}
