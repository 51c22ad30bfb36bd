//! Recovery of a lost connection, as the layer above knows how to make
//! one: the CLI started again as it was first, over stdio or TCP
//! ([`Respawn`]), or a server connected to again ([`Reconnect`]), and its
//! handshake; the driver then resumes the sessions on it as the core's
//! recovery says (see `driver/recover.rs`).

use std::ffi::OsString;
use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::ops;
use crate::answering::Inference;
use crate::driver::{Connection, NewTransport, Restart};
use crate::error::{Error, Result};
use crate::transport::cli::{CliProcess, Launch};
use crate::transport::tcp_halves;
use crate::wait::block_on;

/// How the CLI was started, to start it again the same way.
pub(super) struct Respawn {
    pub(super) program: PathBuf,
    pub(super) args: Vec<OsString>,
    pub(super) env: Vec<(OsString, OsString)>,
    pub(super) cwd: Option<PathBuf>,
    pub(super) connection_token: Option<String>,
    pub(super) startup_timeout: Duration,
    /// Registers as the inference provider after the handshake (the
    /// requests of the connection lost end first).
    pub(super) inference: Option<Arc<Inference>>,
    /// The client's process slot: the new process replaces the old one.
    pub(super) process: Arc<Mutex<Option<CliProcess>>>,
    /// For a CLI serving TCP: the client's TCP stream, replaced by the
    /// new one; `None` over stdio.
    pub(super) socket: Option<Arc<Mutex<Option<TcpStream>>>>,
}

impl Restart<Connection> for Respawn {
    fn transport(&self, stopping: &dyn Fn() -> bool) -> Result<NewTransport> {
        let launch =
            Launch { program: &self.program, args: self.args.clone(), env: &self.env, cwd: self.cwd.as_deref() };
        let (mut process, stdin, stdout) = CliProcess::spawn(&launch)?;
        let probe = process.cause_probe();
        let (reader, writer): (Box<dyn Read + Send>, Box<dyn Write + Send>) = match &self.socket {
            None => (Box::new(stdout), Box::new(stdin)),
            Some(socket) => {
                let stream = match process.read_port(stdout, self.startup_timeout) {
                    Ok(port) => TcpStream::connect(("127.0.0.1", port)),
                    Err(e) => {
                        process.kill();
                        return Err(e);
                    }
                };
                let stream = match stream {
                    Ok(s) => s,
                    Err(e) => {
                        process.kill();
                        return Err(e.into());
                    }
                };
                process.keep_stdin(stdin);
                let halves = tcp_halves(&stream)?;
                if let Some(old) = socket.lock().unwrap_or_else(|p| p.into_inner()).replace(stream) {
                    let _ = old.shutdown(Shutdown::Both);
                }
                halves
            }
        };
        let mut slot = self.process.lock().unwrap_or_else(|p| p.into_inner());
        // A stop that began meanwhile took the old one: this one must not outlive it.
        if stopping() {
            process.kill();
            return Err(Error::Disconnected("the client is stopping".into()));
        }
        log::info!("started the Copilot CLI again (pid {})", process.id());
        if let Some(mut old) = slot.replace(process) {
            old.kill();
        }
        Ok(NewTransport { reader, writer, probe: Some(probe) })
    }

    fn reopen(&self, conn: &Arc<Connection>) -> Result<()> {
        block_on(ops::handshake(conn, self.connection_token.as_deref(), self.startup_timeout))?;
        if let Some(inference) = &self.inference {
            // The new CLI knows no provider, nor the old one's requests.
            inference.connection_ended();
            block_on(ops::set_inference_provider(conn, self.startup_timeout))?;
        }
        Ok(())
    }
}

/// How to reach the server again.
pub(super) struct Reconnect {
    pub(super) addr: SocketAddr,
    pub(super) token: Option<String>,
    pub(super) startup_timeout: Duration,
    /// Registers as the inference provider after the handshake (the
    /// requests of the connection lost end first).
    pub(super) inference: Option<Arc<Inference>>,
    /// The client's TCP stream: the new one replaces the old one.
    pub(super) socket: Arc<Mutex<Option<TcpStream>>>,
}

impl Restart<Connection> for Reconnect {
    fn transport(&self, stopping: &dyn Fn() -> bool) -> Result<NewTransport> {
        let stream = TcpStream::connect_timeout(&self.addr, self.startup_timeout)?;
        let (reader, writer) = tcp_halves(&stream)?;
        let mut slot = self.socket.lock().unwrap_or_else(|p| p.into_inner());
        if stopping() {
            let _ = stream.shutdown(Shutdown::Both);
            return Err(Error::Disconnected("the client is stopping".into()));
        }
        log::info!("connected to {} again", self.addr);
        if let Some(old) = slot.replace(stream) {
            let _ = old.shutdown(Shutdown::Both);
        }
        Ok(NewTransport { reader, writer, probe: None })
    }

    fn reopen(&self, conn: &Arc<Connection>) -> Result<()> {
        block_on(ops::handshake(conn, self.token.as_deref(), self.startup_timeout))?;
        if let Some(inference) = &self.inference {
            // The server's new connection has no provider, nor the old one's requests.
            inference.connection_ended();
            block_on(ops::set_inference_provider(conn, self.startup_timeout))?;
        }
        Ok(())
    }
}
