//! The firmware of `device/examples/firmware` (copilot-device on a
//! Cortex-M4) under `qemu-system-arm -M mps2-an386`, against the real
//! Copilot CLI 1.0.102 serving TCP on the scripted model, offline: QEMU's
//! `-serial tcp:` puts the board's UART on the CLI's socket, and the
//! firmware's semihosting output is QEMU's stdout.
//!
//! A whole turn (the tool's permission approved, `read_sensor` answered on
//! the device, the reply streamed back), and the CLI going away mid-turn
//! (the firmware notices the silent link, reports it and exits). Each run
//! ends when the firmware exits; a kill after minutes is only a safety net.
//! These tests never skip: without QEMU, the thumbv7em target or the CLI
//! they fail and say what to install.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use copilot_host::Transport;
use copilot_testkit::scripted_model::{Reply, ScriptedModel};
use copilot_tests::real_cli::{scripted_options, TempDir};
use serde_json::json;

const TARGET: &str = "thumbv7em-none-eabihf";
/// What the firmware's `read_sensor` returns.
const READING: &str = "temperature 21.5 C, humidity 40 %";
const REPLY: &str = "The sensor reads 21.5 C at 40 % humidity.";
const TOKEN: &str = "device-connection-token";
/// Only against a firmware that stopped making progress: the runs below
/// end on their own in seconds.
const SAFETY_KILL: Duration = Duration::from_secs(300);

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("tests/ has a parent").to_owned()
}

/// Builds the firmware image (once per test binary; cargo makes a second
/// build a no-op) and returns its path.
fn firmware() -> PathBuf {
    let manifest = root().join("device/examples/firmware/Cargo.toml");
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let status = Command::new(cargo)
        .args(["build", "--quiet", "--locked", "--release", "--target", TARGET, "--manifest-path"])
        .arg(&manifest)
        // The firmware is its own workspace, with its own target folder.
        .env_remove("CARGO_TARGET_DIR")
        .env_remove("RUSTFLAGS")
        .status()
        .expect("run cargo");
    assert!(status.success(), "building the firmware failed (rustup target add {TARGET})");
    root().join("device/examples/firmware/target").join(TARGET).join("release/copilot-device-firmware")
}

/// The real CLI serving TCP with a connection token, isolated in `dir`,
/// on the scripted `model`; killed on drop.
struct TcpCli {
    child: Arc<Mutex<Child>>,
    port: u16,
}

impl TcpCli {
    fn start(model: &ScriptedModel, dir: &Path) -> TcpCli {
        let options = scripted_options(Transport::Tcp { port: 0 }, dir, model);
        let program = options.cli_path.clone().expect("the CLI's path");
        let mut command = Command::new(program);
        command
            .args(["--headless", "--no-auto-update", "--port", "0", "--auth-token-env", "DEVICE_TEST_GH_TOKEN"])
            .args(["--secret-env-vars=DEVICE_TEST_GH_TOKEN,COPILOT_CONNECTION_TOKEN"])
            .args(&options.extra_args)
            .envs(options.env.iter().map(|(k, v)| (k, v)))
            .env("DEVICE_TEST_GH_TOKEN", options.auth_token.as_deref().expect("a token for the model"))
            .env("COPILOT_CONNECTION_TOKEN", TOKEN)
            .current_dir(dir)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        let mut child = command.spawn().expect("start the CLI");
        let mut stdout = child.stdout.take().expect("piped stdout");
        // "CLI server listening on port N", then nothing we need.
        let mut seen = Vec::new();
        let port = loop {
            let mut byte = [0];
            if stdout.read(&mut byte).expect("read the CLI's stdout") == 0 {
                panic!("the CLI exited before listening: {}", String::from_utf8_lossy(&seen));
            }
            seen.push(byte[0]);
            let text = String::from_utf8_lossy(&seen);
            if let Some(line) = text.lines().find(|l| l.contains("listening on port") && text.ends_with('\n')) {
                break line.rsplit(' ').next().and_then(|p| p.trim().parse().ok()).expect("a port number");
            }
        };
        thread::spawn(move || std::io::copy(&mut stdout, &mut std::io::sink()));
        TcpCli { child: Arc::new(Mutex::new(child)), port }
    }
}

impl Drop for TcpCli {
    fn drop(&mut self) {
        let mut child = self.child.lock().unwrap_or_else(|p| p.into_inner());
        let _ = child.kill();
        let _ = child.wait();
    }
}

/// Writes the connection token to a file only its owner reads, in `dir`,
/// and returns the firmware's argument naming it: the secret itself never
/// goes on QEMU's command line.
fn token_file(dir: &Path) -> String {
    use std::os::unix::fs::OpenOptionsExt;
    let path = dir.join("connection-token");
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&path)
        .expect("create the token file");
    std::io::Write::write_all(&mut file, TOKEN.as_bytes()).expect("write the token file");
    format!("token-file={}", path.display())
}

/// What a firmware run printed, and how it ended.
struct Run {
    status: ExitStatus,
    output: String,
}

/// Runs the firmware with its UART connected to `port`, until it exits.
fn run_firmware(image: &Path, port: u16, args: &[String]) -> Run {
    let mut semihosting = String::from("enable=on,target=native,arg=firmware");
    for arg in args {
        semihosting.push_str(",arg=");
        semihosting.push_str(arg);
    }
    let mut qemu = Command::new("qemu-system-arm")
        .args(["-M", "mps2-an386", "-display", "none", "-monitor", "none", "-serial"])
        .arg(format!("tcp:127.0.0.1:{port}"))
        .args(["-semihosting-config", &semihosting, "-kernel"])
        .arg(image)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("qemu-system-arm is missing: apt-get install qemu-system-arm");
    let mut stdout = qemu.stdout.take().expect("piped stdout");
    let reader = thread::spawn(move || {
        let mut text = String::new();
        let _ = stdout.read_to_string(&mut text);
        text
    });
    let started = Instant::now();
    let status = loop {
        if let Some(status) = qemu.try_wait().expect("wait for QEMU") {
            break status;
        }
        if started.elapsed() > SAFETY_KILL {
            let _ = qemu.kill();
            let output = reader.join().unwrap_or_default();
            panic!("the firmware did not exit in {SAFETY_KILL:?}; it printed:\n{output}");
        }
        thread::sleep(Duration::from_millis(20));
    };
    let output = reader.join().expect("QEMU's output");
    eprintln!("firmware ({status}):\n{output}");
    Run { status, output }
}

#[test]
fn the_firmware_runs_a_turn_with_its_tool_against_the_real_cli() {
    let image = firmware();
    let model = ScriptedModel::start().expect("start the model server");
    let dir = TempDir::new("copilot-device");
    let cli = TcpCli::start(&model, dir.path());
    let session = "6e0d5b5c-0d3a-4f7e-9a51-00000000d001";
    model.script(session, vec![Reply::tool_call("read_sensor", json!({})), Reply::text(REPLY)]);

    // Generous limits: a loaded machine must not pass for a lost link.
    let args = [token_file(dir.path()), format!("session={session}"), "keepalive=10000".into(), "timeout=30000".into()];
    let run = run_firmware(&image, cli.port, &args);
    assert!(run.status.success(), "the firmware failed:\n{}", run.output);
    let out = &run.output;
    assert!(out.contains("[permission] read_sensor -> approved"), "{out}");
    assert!(out.contains("[tool] read_sensor"), "{out}");
    // The deltas, printed as they came, make the whole reply.
    assert!(out.contains(&format!("{REPLY}\n[message] {REPLY}")), "{out}");
    let took = out.lines().find_map(|l| l.strip_prefix("[done] turn completed in ")).expect("the turn's time");
    eprintln!("the turn under QEMU (connect to idle): {took}");

    let requests = model.requests_for(session);
    assert_eq!(requests.len(), 2, "the tool call, then the reply: {requests:#?}");
    assert!(requests[0].tool_names().contains(&"read_sensor".to_owned()), "{:?}", requests[0].tool_names());
    assert!(requests[0].streamed, "the device asked for a stream");
    assert_eq!(requests[1].tool_results(), [READING], "the device's reading reached the model");
    assert_eq!(model.connect_attempts(), 0, "{:?}", model.other_requests());
}

/// Copies bytes between the firmware's UART (`device`) and the CLI until
/// the CLI is about to ask the device's permission: then the CLI is killed,
/// and its end of stream passed on as the relay's, so the device's link
/// closes in the middle of the turn, before anything could end it.
fn relay_until_permission(listener: TcpListener, cli_port: u16, cli: Arc<Mutex<Child>>) {
    // QEMU connects at its start; one that never does (it failed to start)
    // must not leave this thread waiting.
    listener.set_nonblocking(true).expect("a non-blocking listener");
    let started = Instant::now();
    let device = loop {
        match listener.accept() {
            Ok((device, _)) => break device,
            Err(_) if started.elapsed() < SAFETY_KILL => thread::sleep(Duration::from_millis(10)),
            Err(e) => panic!("QEMU did not connect: {e}"),
        }
    };
    device.set_nonblocking(false).expect("a blocking socket");
    let upstream = TcpStream::connect(("127.0.0.1", cli_port)).expect("connect to the CLI");
    let (mut from_device, mut to_cli) = (device.try_clone().unwrap(), upstream.try_clone().unwrap());
    thread::spawn(move || {
        let _ = std::io::copy(&mut from_device, &mut to_cli);
        // The firmware is gone: end the other direction too.
        let _ = to_cli.shutdown(Shutdown::Both);
    });
    let (mut from_cli, mut to_device) = (upstream, device);
    let mut window = Vec::new();
    let mut buf = [0; 4096];
    let mut killed = false;
    loop {
        let n = from_cli.read(&mut buf).unwrap_or(0);
        if n == 0 {
            break;
        }
        // A window over the read boundary, so the marker is found even
        // when it is cut in two.
        let keep = window.len().saturating_sub(32);
        window.drain(..keep);
        window.extend_from_slice(&buf[..n]);
        if !killed && window.windows(20).any(|w| w == b"permission.requested") {
            let mut child = cli.lock().unwrap_or_else(|p| p.into_inner());
            let _ = child.kill();
            let _ = child.wait();
            killed = true;
        }
        if !killed {
            let _ = to_device.write_all(&buf[..n]);
        }
    }
    assert!(killed, "the turn reached no permission request");
    let _ = to_device.shutdown(Shutdown::Both);
}

#[test]
fn the_firmware_reports_a_cli_that_goes_away_mid_turn_and_exits() {
    let image = firmware();
    let model = ScriptedModel::start().expect("start the model server");
    let dir = TempDir::new("copilot-device-fault");
    let cli = TcpCli::start(&model, dir.path());
    let session = "6e0d5b5c-0d3a-4f7e-9a51-00000000d002";
    model.script(session, vec![Reply::tool_call("read_sensor", json!({})), Reply::text(REPLY)]);

    let listener = TcpListener::bind("127.0.0.1:0").expect("bind the relay");
    let relay_port = listener.local_addr().unwrap().port();
    let (cli_port, child) = (cli.port, Arc::clone(&cli.child));
    let relay = thread::spawn(move || relay_until_permission(listener, cli_port, child));

    // A short keepalive, so the lost link shows in seconds; a request
    // limit that a loaded machine's CLI still meets when opening.
    let args = [token_file(dir.path()), format!("session={session}"), "keepalive=1000".into(), "timeout=8000".into()];
    let run = run_firmware(&image, relay_port, &args);
    relay.join().expect("the relay saw the permission request and closed the link");
    assert!(!run.status.success(), "the firmware reported success:\n{}", run.output);
    let out = &run.output;
    assert!(out.contains(&format!("[session] {session} at ")), "the session was open: {out}");
    assert!(!out.contains("[tool]") && !out.contains("[done]"), "the turn could not go on: {out}");
    assert!(out.contains("[error] the CLI stopped answering (no answer to a ping): link lost"), "{out}");
    assert_eq!(model.requests_for(session).len(), 1, "the turn had started");
}
