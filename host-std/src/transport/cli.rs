//! Finding, installing and starting the Copilot CLI, and stopping it.

use std::collections::VecDeque;
use std::ffi::OsString;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::{mpsc, Arc, Condvar, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use copilot_core::LAUNCH_OWN_PROCESS_GROUP;
use copilot_core::{launch_items, read_announced_port, CliCandidate, LaunchItem, LaunchSecret, LaunchTransport};

use super::close::{CauseProbe, CloseCause};
use crate::error::{Error, Result};

/// The CLI version this client is built and tested against.
pub const CLI_VERSION: &str = "1.0.102";

/// The npm package of the CLI.
pub const CLI_PACKAGE: &str = "@github/copilot";

/// The name of the environment variable a spawned CLI reads its auth token
/// from (`--auth-token-env`), so the token never appears in argv (the
/// core's [`AUTH_TOKEN_ENV`](copilot_core::AUTH_TOKEN_ENV)).
pub const AUTH_TOKEN_ENV: &str = copilot_core::AUTH_TOKEN_ENV;

/// The arguments and secret variables of a start, in the core's order
/// ([`launch_items`]), with the secrets' values filled in.
pub(crate) struct StartItems {
    /// The arguments; the user's own go after them.
    pub(crate) args: Vec<OsString>,
    /// The secret variables; they go after the user's environment, so none
    /// is overridden.
    pub(crate) secrets: Vec<(OsString, OsString)>,
    /// For TCP, the connection token the server is started with (the
    /// user's, or a random UUID v4); the handshake sends it.
    pub(crate) connection_token: Option<String>,
}

/// What a start of `transport` with `log_level` passes the CLI, as the
/// core's [`launch_items`] lists it. An empty `auth_token` is none.
pub(crate) fn start_items(
    transport: LaunchTransport,
    log_level: &str,
    auth_token: Option<&str>,
    connection_token: Option<&str>,
) -> StartItems {
    let auth_token = auth_token.filter(|t| !t.is_empty());
    let connection_token = matches!(transport, LaunchTransport::Tcp { .. })
        .then(|| connection_token.map_or_else(|| uuid::Uuid::new_v4().to_string(), str::to_owned));
    let launch = copilot_core::Launch { transport, log_level, auth_token: auth_token.is_some() };
    let mut items = StartItems { args: Vec::new(), secrets: Vec::new(), connection_token };
    launch_items(&launch, &mut |item| match item {
        LaunchItem::Arg(arg) => items.args.push(arg.into()),
        LaunchItem::Secret { name, secret } => {
            let value = match secret {
                LaunchSecret::AuthToken => auth_token,
                LaunchSecret::ConnectionToken => items.connection_token.as_deref(),
            };
            items.secrets.push((name.into(), value.unwrap_or_default().into()));
        }
    });
    items
}

/// Stderr lines kept for error messages.
const STDERR_LINES: usize = 40;

/// The npm package that carries the native binary for this platform.
fn native_package() -> Option<&'static str> {
    match (std::env::consts::OS, std::env::consts::ARCH) {
        ("linux", "x86_64") => Some("copilot-linux-x64"),
        ("linux", "aarch64") => Some("copilot-linux-arm64"),
        ("macos", "x86_64") => Some("copilot-darwin-x64"),
        ("macos", "aarch64") => Some("copilot-darwin-arm64"),
        ("windows", "x86_64") => Some("copilot-win32-x64"),
        _ => None,
    }
}

/// The native binary next to an npm install of the CLI, if there is one.
///
/// `node_modules/.bin/copilot` is a Node loader that starts the native
/// binary as its child; killing the loader leaves the binary running, so we
/// start the binary itself when we can find it.
pub fn native_binary(cli: &Path) -> Option<PathBuf> {
    let resolved = std::fs::canonicalize(cli).ok()?;
    let package = native_package()?;
    let exe = if cfg!(windows) { "copilot.exe" } else { "copilot" };
    resolved.ancestors().filter(|a| a.file_name().is_some_and(|n| n == "node_modules")).find_map(|modules| {
        let candidate = modules.join("@github").join(package).join(exe);
        candidate.is_file().then_some(candidate)
    })
}

/// Finds the CLI: the explicit path, `COPILOT_CLI_PATH`, `copilot` on
/// `PATH`, then `./node_modules/.bin/copilot`. Prefers the native binary of
/// an npm install.
pub fn resolve_cli(explicit: Option<&Path>) -> Result<PathBuf> {
    let mut searched = Vec::new();
    // The core's search order.
    let mut candidates: Vec<PathBuf> = Vec::new();
    for place in copilot_core::CLI_SEARCH {
        match *place {
            CliCandidate::Explicit => candidates.extend(explicit.map(Path::to_owned)),
            CliCandidate::Variable(name) => {
                candidates.extend(std::env::var_os(name).filter(|p| !p.is_empty()).map(PathBuf::from))
            }
            CliCandidate::PathFolders(file) => {
                if let Some(path) = std::env::var_os("PATH") {
                    candidates.extend(std::env::split_paths(&path).map(|d| d.join(file)));
                }
            }
            CliCandidate::Relative(path) => candidates.push(PathBuf::from(path)),
        }
    }
    for c in candidates {
        if c.is_file() {
            return Ok(native_binary(&c).unwrap_or(c));
        }
        searched.push(c.display().to_string());
        // An explicit path that does not exist is an error of its own, not
        // a reason to run some other CLI.
        if explicit.is_some_and(|e| e == c) {
            return Err(Error::CliNotFound { searched });
        }
    }
    Err(Error::CliNotFound {
        searched: vec!["explicit path".into(), "COPILOT_CLI_PATH".into(), "PATH".into(), "./node_modules/.bin".into()],
    })
}

/// The folder [`install_cli`] uses by default: the user's cache folder.
pub fn default_install_dir() -> PathBuf {
    let base = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .unwrap_or_else(std::env::temp_dir);
    base.join("copilot-rs").join("cli").join(CLI_VERSION)
}

/// Installs `@github/copilot@CLI_VERSION` with npm into `dir` (unless it is
/// there already) and returns the path of its binary.
pub fn install_cli(dir: &Path) -> Result<PathBuf> {
    let loader = dir.join("node_modules").join(".bin").join("copilot");
    if !loader.is_file() {
        std::fs::create_dir_all(dir).map_err(|e| Error::Install(format!("cannot create {}: {e}", dir.display())))?;
        let out = Command::new(if cfg!(windows) { "npm.cmd" } else { "npm" })
            .arg("install")
            .arg("--prefix")
            .arg(dir)
            .args(["--no-audit", "--no-fund", "--loglevel=error"])
            .arg(format!("{CLI_PACKAGE}@{CLI_VERSION}"))
            .stdin(Stdio::null())
            .output()
            .map_err(|e| Error::Install(format!("cannot run npm: {e}")))?;
        if !out.status.success() {
            return Err(Error::Install(format!(
                "npm install exited with {}: {}",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            )));
        }
    }
    if !loader.is_file() {
        return Err(Error::Install(format!("npm finished but {} is missing", loader.display())));
    }
    Ok(native_binary(&loader).unwrap_or(loader))
}

/// How to start a CLI ([`CliProcess::spawn`]). Not `Debug`: `env` may
/// hold secrets.
pub struct Launch<'a> {
    /// The CLI's binary ([`crate::resolve_cli`] finds it).
    pub program: &'a Path,
    /// Its arguments, all of them (`--stdio`, `--headless`, ...).
    pub args: Vec<OsString>,
    /// Variables added to the environment it inherits; secrets go here,
    /// never in `args`.
    pub env: &'a [(OsString, OsString)],
    /// Its working folder; `None`: ours.
    pub cwd: Option<&'a Path>,
}

/// The last lines of a CLI's stderr, and whether the pipe has ended.
#[derive(Default)]
struct StderrTail {
    lines: Mutex<(VecDeque<String>, bool)>,
    ended: Condvar,
}

impl StderrTail {
    /// The text once the pipe has ended (the CLI and its children exited),
    /// or whatever is there at `deadline`.
    fn text_when_ended(&self, deadline: Instant) -> String {
        let mut lines = self.lines.lock().unwrap_or_else(|p| p.into_inner());
        while !lines.1 {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            lines = self.ended.wait_timeout(lines, left).unwrap_or_else(|p| p.into_inner()).0;
        }
        lines.0.iter().map(|l| format!("{l}\n")).collect()
    }
}

/// A CLI process we started, in a process group of its own, and the tail of
/// its stderr (read by a thread of its own, logged at debug level).
/// Dropping it while the CLI runs kills the group.
pub struct CliProcess {
    child: Arc<Mutex<Child>>,
    stderr: Arc<StderrTail>,
    /// Held open while the CLI serves TCP: closing it is for stdio mode.
    stdin: Option<ChildStdin>,
}

/// How long the reader waits, once the stream ended, for the CLI's exit
/// status and last stderr lines, to report them as the cause.
const EXIT_PROBE: Duration = Duration::from_secs(2);

impl CliProcess {
    /// Starts the CLI in its own process group with piped stdio; returns it
    /// with the write end of its stdin and the read end of its stdout.
    pub fn spawn(launch: &Launch<'_>) -> Result<(CliProcess, ChildStdin, ChildStdout)> {
        let mut cmd = Command::new(launch.program);
        cmd.args(&launch.args)
            .envs(launch.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if let Some(dir) = launch.cwd {
            cmd.current_dir(dir);
        }
        #[cfg(unix)]
        if LAUNCH_OWN_PROCESS_GROUP {
            use std::os::unix::process::CommandExt;
            // Its own group, so stopping it also stops what it started.
            cmd.process_group(0);
        }
        let mut child = cmd.spawn().map_err(|source| Error::Spawn { program: launch.program.to_owned(), source })?;
        let stdin = child.stdin.take().ok_or_else(|| Error::Protocol("no stdin pipe".into()))?;
        let stdout = child.stdout.take().ok_or_else(|| Error::Protocol("no stdout pipe".into()))?;
        let stderr = Arc::new(StderrTail::default());
        if let Some(pipe) = child.stderr.take() {
            let tail = Arc::clone(&stderr);
            let _ = thread::Builder::new().name("copilot-stderr".into()).spawn(move || keep_tail(pipe, &tail));
        }
        Ok((CliProcess { child: Arc::new(Mutex::new(child)), stderr, stdin: None }, stdin, stdout))
    }

    /// For the reader: when the stream ends, reports an exited CLI (its
    /// status and stderr tail) as the cause rather than a bare end.
    pub(crate) fn cause_probe(&self) -> CauseProbe {
        let (child, stderr) = (Arc::clone(&self.child), Arc::clone(&self.stderr));
        Box::new(move |cause| {
            let deadline = Instant::now() + EXIT_PROBE;
            match wait_until(&child, deadline) {
                Some(status) => {
                    #[cfg(unix)]
                    let signal = std::os::unix::process::ExitStatusExt::signal(&status);
                    #[cfg(not(unix))]
                    let signal = None;
                    CloseCause::CliExited { code: status.code(), signal, stderr: stderr.text_when_ended(deadline) }
                }
                None => cause,
            }
        })
    }

    /// Keeps the CLI's stdin open (and unused) while it serves TCP.
    pub(crate) fn keep_stdin(&mut self, stdin: ChildStdin) {
        self.stdin = Some(stdin);
    }

    /// Waits up to `grace` for the process to exit.
    pub(crate) fn wait_for_exit(&mut self, grace: Duration) -> Option<std::process::ExitStatus> {
        wait_until(&self.child, Instant::now() + grace)
    }

    /// The error for a CLI that ended before it was ready.
    pub(crate) fn exited_error(&mut self) -> Error {
        let deadline = Instant::now() + EXIT_PROBE;
        let code = wait_until(&self.child, deadline).and_then(|s| s.code());
        Error::CliExited { code, stderr: self.stderr.text_when_ended(deadline) }
    }

    /// The process id.
    pub fn id(&self) -> u32 {
        self.child.lock().unwrap_or_else(|p| p.into_inner()).id()
    }

    /// Kills the process group (or the process), then reaps it.
    pub fn kill(&mut self) {
        self.stdin = None;
        let mut child = self.child.lock().unwrap_or_else(|p| p.into_inner());
        #[cfg(unix)]
        {
            if let Ok(pid) = i32::try_from(child.id()) {
                // SAFETY: kill(2) with a negative pid signals the group we
                // created at spawn (process_group(0) makes pgid == pid); it
                // touches no memory of ours.
                #[allow(unsafe_code)]
                unsafe {
                    libc::kill(-pid, libc::SIGKILL);
                }
            }
        }
        let _ = child.kill();
        let _ = child.wait();
    }

    /// Reads `CLI server listening on port N` from the CLI's stdout.
    pub(crate) fn read_port(&mut self, stdout: ChildStdout, timeout: Duration) -> Result<u16> {
        let (tx, rx) = mpsc::channel();
        let _ = thread::Builder::new().name("copilot-stdout".into()).spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                log::debug!("copilot stdout: {line}");
                if let Some(port) = read_announced_port(&line) {
                    let _ = tx.send(port);
                }
            }
        });
        match rx.recv_timeout(timeout) {
            Ok(port) => Ok(port),
            Err(mpsc::RecvTimeoutError::Disconnected) => Err(self.exited_error()),
            Err(mpsc::RecvTimeoutError::Timeout) => {
                Err(Error::Timeout { what: "the CLI to announce its port".into(), after: timeout })
            }
        }
    }
}

impl Drop for CliProcess {
    fn drop(&mut self) {
        let running = matches!(self.child.lock().unwrap_or_else(|p| p.into_inner()).try_wait(), Ok(None));
        if running {
            self.kill();
        }
    }
}

/// Waits for `child` to exit until `deadline`.
fn wait_until(child: &Mutex<Child>, deadline: Instant) -> Option<std::process::ExitStatus> {
    loop {
        match child.lock().unwrap_or_else(|p| p.into_inner()).try_wait() {
            Ok(Some(status)) => return Some(status),
            Ok(None) if Instant::now() < deadline => {}
            _ => return None,
        }
        thread::sleep(Duration::from_millis(10));
    }
}

fn keep_tail(pipe: impl Read, tail: &StderrTail) {
    for line in BufReader::new(pipe).lines() {
        let Ok(line) = line else { break };
        log::debug!("copilot stderr: {line}");
        let mut t = tail.lines.lock().unwrap_or_else(|p| p.into_inner());
        if t.0.len() == STDERR_LINES {
            t.0.pop_front();
        }
        t.0.push_back(line);
    }
    tail.lines.lock().unwrap_or_else(|p| p.into_inner()).1 = true;
    tail.ended.notify_all();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn port_announcements_are_read() {
        assert_eq!(read_announced_port("CLI server listening on port 40437"), Some(40437));
        assert_eq!(read_announced_port("Listening on port 7\r"), Some(7));
        assert_eq!(read_announced_port("Warning: No COPILOT_CONNECTION_TOKEN was set"), None);
        assert_eq!(read_announced_port("listening on port x"), None);
    }

    #[test]
    fn a_start_passes_its_secrets_in_the_variables_the_core_names() {
        let items = start_items(LaunchTransport::Tcp { port: 0 }, "error", Some("gh"), Some("conn"));
        assert_eq!(
            items.secrets,
            [
                (OsString::from(AUTH_TOKEN_ENV), OsString::from("gh")),
                ("COPILOT_CONNECTION_TOKEN".into(), "conn".into())
            ]
        );
        assert_eq!(items.connection_token.as_deref(), Some("conn"));
        assert!(!items.args.iter().any(|a| a == "gh" || a == "conn"), "no secret in argv: {:?}", items.args);
        // An empty token is none; stdio has no connection token.
        let items = start_items(LaunchTransport::Stdio, "error", Some(""), None);
        assert!(items.secrets.is_empty() && items.connection_token.is_none());
        assert!(!items.args.iter().any(|a| a == "--auth-token-env"), "{:?}", items.args);
        let random = start_items(LaunchTransport::Tcp { port: 0 }, "error", None, None).connection_token;
        assert_eq!(random.map(|t| t.len()), Some(36), "a UUID when the user gave none");
    }

    #[test]
    fn an_explicit_missing_path_is_not_replaced_by_another_cli() {
        let err = resolve_cli(Some(Path::new("/nonexistent/copilot"))).unwrap_err();
        assert!(matches!(err, Error::CliNotFound { searched } if searched == ["/nonexistent/copilot"]));
    }
}
