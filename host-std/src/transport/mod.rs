//! Transports: the CLI spawned over stdio or TCP (`cli`), a running server
//! reached over TCP, or any pair of byte streams; and why a connection
//! ended. Nothing here knows the protocol beyond its bytes.

use std::io::{Read, Write};
use std::net::TcpStream;

use crate::error::Result;

pub(crate) mod cli;
mod close;

pub(crate) use close::CauseProbe;
pub use close::CloseCause;

/// The two halves of a TCP stream, as the driver reads and writes them.
pub(crate) fn tcp_halves(stream: &TcpStream) -> Result<(Box<dyn Read + Send>, Box<dyn Write + Send>)> {
    // Answers are small and awaited by the agent: do not let Nagle hold them.
    stream.set_nodelay(true)?;
    Ok((Box::new(stream.try_clone()?), Box::new(stream.try_clone()?)))
}
