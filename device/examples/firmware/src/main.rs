//! A Copilot client on a Cortex-M4: QEMU's `mps2-an386`, its UART0 the
//! link to a Copilot CLI serving TCP (`qemu-system-arm -serial
//! tcp:127.0.0.1:PORT` makes the UART a client of `copilot --port PORT`).
//!
//! It reads its parameters from the semihosting command line
//! (`-semihosting-config enable=on,target=native,arg=...`), each a
//! `key=value` word: `token-file` (a host file holding the CLI's connection
//! token: a secret never goes on QEMU's command line, where every local
//! user can read it), `session` (the session id), and optionally
//! `keepalive` and `timeout` (ms). Then it
//! connects, creates a session with the tool `read_sensor`, sends a prompt,
//! approves the tool's permission request, answers the tool call with a
//! fixed reading, and prints the streamed reply over semihosting. It exits
//! through semihosting: success after `session.idle`, failure (with the
//! reason printed) on any error, such as a link that stopped answering.
//!
//! Time is SysTick's: an interrupt every millisecond of the 25 MHz clock.
#![no_std]
#![no_main]

mod uart;

use core::sync::atomic::{AtomicU32, Ordering::Relaxed};

use copilot_device::{
    Clock, Decision, Device, DeviceConfig, Event, Handlers, PermissionRequest, SessionOptions, Tool, ToolCall,
};
use cortex_m::peripheral::syst::SystClkSource;
use cortex_m_rt::{entry, exception};
use cortex_m_semihosting::{debug, hprint, hprintln};

use crate::uart::{Uart, UART0};

/// Frames larger than this are skipped (the CLI's system prompt and model
/// snapshots, 9-45 KB, are of no use here).
const FRAME: usize = 4096;
/// Room for the session options and a tool result.
const SCRATCH: usize = 1024;
/// The core clock of the MPS2 images.
const CORE_HZ: u32 = 25_000_000;

const PROMPT: &str = "What does the sensor read?";
/// The reading `read_sensor` returns.
const READING: &str = "temperature 21.5 C, humidity 40 %";

const TOOLS: [Tool<'static>; 1] = [Tool {
    name: "read_sensor",
    description: "Reads the board's temperature and humidity sensor.",
    parameters: r#"{"type":"object","properties":{}}"#,
}];

/// Milliseconds since boot, counted by the SysTick interrupt.
static MILLIS: AtomicU32 = AtomicU32::new(0);

#[exception]
fn SysTick() {
    MILLIS.fetch_add(1, Relaxed);
}

/// SysTick's milliseconds, widened to 64 bits (the counter wraps after 49 days).
struct SysTickClock {
    last: u32,
    high: u64,
}

impl Clock for SysTickClock {
    fn now_ms(&mut self) -> u64 {
        let now = MILLIS.load(Relaxed);
        if now < self.last {
            self.high += 1 << 32;
        }
        self.last = now;
        self.high | u64::from(now)
    }
}

/// The device's side of the turn: the sensor, the user, the display.
struct Board {
    tool_calls: u32,
}

impl Handlers for Board {
    fn tool(&mut self, call: &ToolCall<'_>) -> Result<&str, &str> {
        hprintln!("[tool] {}", call.name);
        self.tool_calls += 1;
        match call.name {
            "read_sensor" => Ok(READING),
            _ => Err("this device has no such tool"),
        }
    }

    fn permission(&mut self, request: &PermissionRequest<'_>) -> Decision {
        let is_ours = request.tool_name.is_some_and(|t| t == "read_sensor");
        hprintln!(
            "[permission] {} -> {}",
            request.tool_name.map_or("?", |t| t.raw()),
            if is_ours { "approved" } else { "refused" }
        );
        if is_ours {
            Decision::ApproveOnce
        } else {
            Decision::UserNotAvailable
        }
    }

    fn event(&mut self, event: &Event<'_>) {
        match event {
            Event::Delta(text) => hprint!("{}", text),
            // The message that only carries tool calls has no text.
            Event::Message(text) if !text.raw().is_empty() => hprintln!("\n[message] {}", text),
            Event::SessionError(message) => hprintln!("[session.error] {:?}", message),
            _ => {}
        }
    }
}

/// The parameters from the semihosting command line.
struct Args<'a> {
    token_file: Option<&'a str>,
    session: &'a str,
    keepalive: u64,
    timeout: u64,
}

fn parse_args(line: &str) -> Args<'_> {
    let mut args = Args { token_file: None, session: "device-session", keepalive: 5_000, timeout: 5_000 };
    for word in line.split_ascii_whitespace() {
        match word.split_once('=') {
            Some(("token-file", v)) => args.token_file = Some(v),
            Some(("session", v)) => args.session = v,
            Some(("keepalive", v)) => args.keepalive = v.parse().unwrap_or(args.keepalive),
            Some(("timeout", v)) => args.timeout = v.parse().unwrap_or(args.timeout),
            _ => {}
        }
    }
    args
}

/// The command line QEMU was given (`arg=` words joined by spaces).
fn command_line(buf: &mut [u8]) -> &str {
    let block = [buf.as_mut_ptr() as usize, buf.len()];
    // SAFETY: SYS_GET_CMDLINE writes at most `buf.len()` bytes into `buf`
    // (NUL-terminated) and its length into the block, both alive here.
    let status = unsafe { cortex_m_semihosting::syscall(cortex_m_semihosting::nr::GET_CMDLINE, &block) };
    if status != 0 {
        return "";
    }
    let len = buf.iter().position(|&b| b == 0).unwrap_or(0);
    core::str::from_utf8(&buf[..len]).unwrap_or("")
}

/// The first line of the host file at `path` (semihosting SYS_OPEN,
/// SYS_READ, SYS_CLOSE), read into `buf`; `None` if it cannot be read.
fn read_host_file<'b>(path: &str, buf: &'b mut [u8]) -> Option<&'b str> {
    use cortex_m_semihosting::{nr, syscall};
    // SYS_OPEN takes a NUL-terminated name and its length.
    let mut name = [0u8; 128];
    name.get_mut(..path.len())?.copy_from_slice(path.as_bytes());
    *name.get_mut(path.len())? = 0;
    let open = [name.as_ptr() as usize, 0 /* "r" */, path.len()];
    // SAFETY: the block and the name it points to are alive for the call.
    let handle = unsafe { syscall(nr::OPEN, &open) };
    if handle == usize::MAX {
        return None;
    }
    let read = [handle, buf.as_mut_ptr() as usize, buf.len()];
    // SAFETY: SYS_READ writes at most `buf.len()` bytes into `buf`, alive
    // here; it returns how many bytes it did not read.
    let unread = unsafe { syscall(nr::READ, &read) };
    // SAFETY: the block holds the handle SYS_OPEN gave.
    unsafe { syscall(nr::CLOSE, &[handle]) };
    let len = buf.len().checked_sub(unread)?;
    let text = core::str::from_utf8(&buf[..len]).ok()?;
    text.lines().next().map(str::trim).filter(|t| !t.is_empty())
}

#[entry]
fn main() -> ! {
    let mut core = cortex_m::Peripherals::take().expect("taken once, at boot");
    core.SYST.set_clock_source(SystClkSource::Core);
    core.SYST.set_reload(CORE_HZ / 1000 - 1);
    core.SYST.clear_current();
    core.SYST.enable_counter();
    core.SYST.enable_interrupt();

    let mut line = [0u8; 256];
    let args = parse_args(command_line(&mut line));
    let mut secret = [0u8; 128];
    let token = match args.token_file {
        Some(path) => match read_host_file(path, &mut secret) {
            Some(token) => Some(token),
            None => {
                hprintln!("[error] cannot read the token file {}", path);
                debug::exit(debug::EXIT_FAILURE);
                None
            }
        },
        None => None,
    };
    let config = DeviceConfig::new().request_timeout(args.timeout).keepalive(Some(args.keepalive));
    let clock = SysTickClock { last: 0, high: 0 };
    let device = cortex_m::singleton!(: Device<Uart, SysTickClock, FRAME, SCRATCH> =
        Device::new(Uart::new(UART0), clock, config))
    .expect("made once");
    let mut board = Board { tool_calls: 0 };

    let started = MILLIS.load(Relaxed);
    let options = SessionOptions { session_id: args.session, model: None, streaming: true, tools: &TOOLS };
    let result = device
        .connect(token)
        .map(|()| hprintln!("[connected] at {} ms", MILLIS.load(Relaxed).wrapping_sub(started)))
        .and_then(|()| device.create_session(&options))
        .map(|()| hprintln!("[session] {} at {} ms", args.session, MILLIS.load(Relaxed).wrapping_sub(started)))
        .and_then(|()| device.send_and_wait(PROMPT, &mut board));
    let took = MILLIS.load(Relaxed).wrapping_sub(started);
    let stats = device.stats();
    hprintln!(
        "[stats] frames {} bytes {} skipped-oversize {} answers {} tool-calls {}",
        stats.router.frames,
        stats.router.bytes,
        stats.router.oversize,
        stats.answers_sent,
        board.tool_calls
    );
    match result {
        Ok(()) => {
            hprintln!("[done] turn completed in {} ms", took);
            debug::exit(debug::EXIT_SUCCESS);
        }
        Err(e) => {
            hprintln!("[error] {} (after {} ms)", e, took);
            debug::exit(debug::EXIT_FAILURE);
        }
    }
    loop {
        cortex_m::asm::wfi();
    }
}

/// A panic is reported and ends the run, so a test never waits on it.
#[panic_handler]
fn panic(info: &core::panic::PanicInfo) -> ! {
    hprintln!("[panic] {}", info);
    debug::exit(debug::EXIT_FAILURE);
    loop {
        cortex_m::asm::wfi();
    }
}
