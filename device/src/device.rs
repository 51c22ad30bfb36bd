//! The device host: one loop that moves bytes between a blocking
//! `embedded_io` transport and the engine, and calls the application's
//! handlers for what the engine hands over. It makes no protocol decision.

use copilot_core::{
    frame_header, Cause, Engine, EngineConfig, EngineStats, FrameDecoder, HandlerKind, Output, RequestId, Route,
    RpcError, SessionHandle, Value, MAX_FRAME_HEADER_LEN, MAX_SESSION_ID_LEN,
};
use embedded_io::{Read, ReadReady, Write};

use crate::wire::{put_str, SliceWriter};
use crate::{
    Call, Clock, Decision, DeviceConfig, Error, Event, Handlers, PermissionRequest, SessionOptions, ToolCall,
    PROTOCOL_VERSION,
};

/// One session, four requests in flight, four open waits of the agent;
/// nothing parked (the device names its session, so no frame waits for a
/// server-assigned id); `TRANSMIT` bytes for what the engine sends, which
/// the device writes out after every call.
type DeviceEngine<const TRANSMIT: usize> = Engine<(), Call, [u8; 0], [u8; TRANSMIT], 1, 4, 4>;

/// The room a tool's answer takes besides its result: the frame's header,
/// the answering RPC and the wait's ids (at most 96 and 80 bytes).
const ANSWER_ROOM: usize = 400;

/// Bytes asked of the transport per read: a UART gives one at a time, a
/// TCP stack more.
const READ_CHUNK: usize = 64;
/// The longest tool name a handler is shown.
const MAX_TOOL_NAME: usize = 64;

/// What a wait of the loop ended on.
enum Reached {
    /// The awaited request was answered; for `connect`, its protocol version.
    Answer(Option<u64>),
    /// `session.idle`.
    Idle,
}

/// What a turn saw so far.
#[derive(Default)]
struct Turn {
    idle: bool,
    error: bool,
}

/// A client of one Copilot CLI over `IO`, with one session.
///
/// `FRAME` is the largest frame kept (bytes; larger ones, such as the
/// CLI's 40 KB `system.message` event, are skipped and counted), `SCRATCH`
/// the room for the session options and a tool's result (on the stack,
/// while they are written), `TRANSMIT` the engine's transmit store: the
/// largest frame it sends, such as a tool's answer (its result plus about
/// 400 bytes; a result that does not fit is answered as a failure). A
/// refusal repeats the ids of the wait it refuses: one of a wait whose
/// ids do not fit `TRANSMIT` is not sent, and counted in
/// [`EngineStats::unsent`](copilot_core::EngineStats::unsent) (the CLI's
/// ids are far shorter).
pub struct Device<IO, C, const FRAME: usize, const SCRATCH: usize, const TRANSMIT: usize = 1536> {
    io: IO,
    clock: C,
    config: DeviceConfig,
    engine: DeviceEngine<TRANSMIT>,
    decoder: FrameDecoder<[u8; FRAME]>,
    chunk: [u8; READ_CHUNK],
    /// The part of `chunk` not yet fed to the decoder.
    unfed: (usize, usize),
    session: Option<SessionHandle>,
    /// The session whose create is in flight.
    opening: Option<SessionHandle>,
    session_id: ([u8; MAX_SESSION_ID_LEN], usize),
    /// When the last byte arrived (ms).
    last_rx: u64,
    ping: Option<RequestId>,
    turn: Turn,
}

impl<IO, C, const FRAME: usize, const SCRATCH: usize, const TRANSMIT: usize> Device<IO, C, FRAME, SCRATCH, TRANSMIT>
where
    IO: Read + ReadReady + Write,
    C: Clock,
{
    /// A device host over `io`, its time from `clock`.
    pub fn new(io: IO, mut clock: C, config: DeviceConfig) -> Self {
        // Handlers run inline, so no handler deadline: the engine's
        // request deadlines are the only timers. No stall checks: the
        // device does not take on the waits a pending list names.
        let engine_config = EngineConfig::new()
            .handler_timeout(None)
            .request_timeout(Some(config.request_timeout))
            .stall_interval(None);
        let now = clock.now_ms();
        Device {
            io,
            clock,
            config,
            engine: Engine::new([], [0; TRANSMIT], engine_config),
            decoder: FrameDecoder::new(),
            chunk: [0; READ_CHUNK],
            unfed: (0, 0),
            session: None,
            opening: None,
            session_id: ([0; MAX_SESSION_ID_LEN], 0),
            last_rx: now,
            ping: None,
            turn: Turn::default(),
        }
    }

    /// The handshake: `connect` with the connection token (if the CLI was
    /// started with one); fails unless the CLI speaks protocol version 3.
    pub fn connect(&mut self, token: Option<&str>) -> Result<(), Error<IO::Error>> {
        // The params are the core's, as every host sends them.
        let id = self.request(Call::Connect, &|mut out| copilot_core::write_connect_params(token, &mut out))?;
        match self.wait(Some(id), &mut NoHandlers)? {
            Reached::Answer(Some(PROTOCOL_VERSION)) => Ok(()),
            Reached::Answer(other) => Err(Error::ProtocolVersion(other)),
            Reached::Idle => Err(Error::SessionState),
        }
    }

    /// Opens the session: reserved in the engine, then `session.create`
    /// with `options` and what the engine announces (a permission handler:
    /// yes; nothing else).
    pub fn create_session(&mut self, options: &SessionOptions<'_>) -> Result<(), Error<IO::Error>> {
        if self.session.is_some() || options.session_id.len() > MAX_SESSION_ID_LEN {
            return Err(Error::SessionState);
        }
        let mut scratch = [0; SCRATCH];
        let options_len = {
            let mut w = SliceWriter::new(&mut scratch);
            write_options(&mut |b| w.push(b), options);
            w.finish().ok_or(Error::TooLarge)?.len()
        };
        let has = |kind: HandlerKind| kind == HandlerKind::Permission;
        copilot_core::write_open_params(&scratch[..options_len], has, &mut |_| {}).map_err(|_| Error::TooLarge)?;
        let handle = self.engine.reserve(options.session_id, ()).map_err(|_| Error::SessionState)?;
        let Device { io, engine, clock, .. } = self;
        let text = &scratch[..options_len];
        let sent = write_request(io, engine, clock.now_ms(), Call::Create, &|out| {
            // Checked above: the options are a JSON object.
            let _ = copilot_core::write_open_params(text, has, &mut |b| out(b));
        });
        let id = match sent {
            Ok(id) => id,
            Err(e) => {
                self.release(handle);
                return Err(e);
            }
        };
        self.opening = Some(handle);
        let result = self.wait(Some(id), &mut NoHandlers);
        if let Some(handle) = self.opening.take() {
            // No answer came (timeout, closed link): the slot is released.
            self.release(handle);
        }
        result?;
        self.session = Some(handle);
        let id = options.session_id.as_bytes();
        self.session_id.0[..id.len()].copy_from_slice(id);
        self.session_id.1 = id.len();
        Ok(())
    }

    /// Sends `prompt` and runs the turn to `session.idle`: the tool calls
    /// and permission requests go to `handlers`, and every event to
    /// [`Handlers::event`]. A turn that ends with `session.error` returns
    /// [`Error::SessionError`] (after `session.idle`).
    pub fn send_and_wait(&mut self, prompt: &str, handlers: &mut impl Handlers) -> Result<(), Error<IO::Error>> {
        if self.session.is_none() {
            return Err(Error::SessionState);
        }
        self.turn = Turn::default();
        let started = self.clock.now_ms();
        let (sid, n) = self.session_id;
        let session_id = core::str::from_utf8(&sid[..n]).unwrap_or("");
        let id = self.request(Call::Send, &|out| {
            out(b"{\"sessionId\":");
            put_str(out, session_id);
            out(b",\"prompt\":");
            put_str(out, prompt);
            out(b"}");
        })?;
        self.wait_turn(Some(id), handlers, started)?;
        if !self.turn.idle {
            self.wait_turn(None, handlers, started)?;
        }
        if self.turn.error {
            Err(Error::SessionError)
        } else {
            Ok(())
        }
    }

    /// The engine's counters (frames, skipped oversize frames, answers sent).
    pub fn stats(&mut self) -> EngineStats {
        self.engine.stats(self.clock.now_ms())
    }

    /// Releases the session's slot after a failed open. The link failed:
    /// what the engine would send for it (no wait is open: handlers run
    /// inline) is dropped, not written.
    fn release(&mut self, handle: SessionHandle) {
        self.engine.release(handle);
        self.engine.transmitted(usize::MAX);
    }

    /// Gives the transport and the clock back.
    pub fn into_parts(self) -> (IO, C) {
        (self.io, self.clock)
    }

    /// Waits under the turn's deadline.
    fn wait_turn(
        &mut self,
        awaited: Option<RequestId>,
        handlers: &mut impl Handlers,
        started: u64,
    ) -> Result<Reached, Error<IO::Error>> {
        let deadline = self.config.turn_timeout.map(|t| started.saturating_add(t));
        self.wait_until(awaited, handlers, deadline)
    }

    fn wait(&mut self, awaited: Option<RequestId>, handlers: &mut impl Handlers) -> Result<Reached, Error<IO::Error>> {
        self.wait_until(awaited, handlers, None)
    }

    /// The loop: decodes and acts on every frame, keeps the timers, reads;
    /// until the awaited request is answered (or, with none, the session
    /// goes idle), or the link fails.
    fn wait_until(
        &mut self,
        awaited: Option<RequestId>,
        handlers: &mut impl Handlers,
        deadline: Option<u64>,
    ) -> Result<Reached, Error<IO::Error>> {
        loop {
            // Frames already buffered first: they arrived before anything
            // read now.
            let (start, end) = self.unfed;
            let taken = self.decoder.feed(&self.chunk[start..end]);
            self.unfed.0 += taken;
            let now = self.clock.now_ms();
            if let Some(reached) = self.act_on_frames(awaited, handlers, now)? {
                return Ok(reached);
            }
            if awaited.is_none() && self.turn.idle {
                return Ok(Reached::Idle);
            }
            if self.unfed.0 < self.unfed.1 {
                continue;
            }
            self.keep_time(awaited, deadline)?;
            if !self.io.read_ready().map_err(Error::Read)? {
                continue;
            }
            let n = self.io.read(&mut self.chunk).map_err(Error::Read)?;
            if n == 0 {
                self.engine.disconnect(|_, _| {});
                return Err(Error::Closed);
            }
            self.unfed = (0, n);
            self.last_rx = self.clock.now_ms();
        }
    }

    /// Acts on every frame the decoder holds; returns what the wait reached.
    fn act_on_frames(
        &mut self,
        awaited: Option<RequestId>,
        handlers: &mut impl Handlers,
        now: u64,
    ) -> Result<Option<Reached>, Error<IO::Error>> {
        let Device { io, engine, decoder, ping, opening, turn, .. } = self;
        let mut failed = None;
        let mut reached = None;
        while let Some(output) = engine.poll(decoder, now) {
            // Taken after every call, so the next one has the whole store.
            send(io, engine, &mut failed);
            let route = act::<TRANSMIT, SCRATCH>(engine, handlers, turn, output);
            send(io, engine, &mut failed);
            let Some((request, call, result)) = route else { continue };
            match call {
                Call::Ping => *ping = None,
                _ if Some(request) != awaited => {}
                Call::Create => {
                    let handle = opening.take().ok_or(Error::SessionState)?;
                    let code = result.as_ref().err().map(|e| e.code);
                    let opened = engine.complete_open(handle, result.map(|(v, _)| v));
                    send(io, engine, &mut failed);
                    // No `poll_parked` drain: this engine has no parking
                    // storage and the device names its session, so no frame
                    // is ever parked.
                    reached = Some(match (opened, code) {
                        (Ok(()), _) => Ok(Reached::Answer(None)),
                        (Err(_), Some(code)) => Err(Error::Rpc { call, code }),
                        (Err(e), None) => Err(Error::Open(e)),
                    });
                    break;
                }
                _ => {
                    reached = Some(match result {
                        Ok((_, version)) => Ok(Reached::Answer(version)),
                        Err(e) => Err(Error::Rpc { call, code: e.code }),
                    });
                    break;
                }
            }
        }
        if let Some(e) = failed {
            return Err(Error::Write(e));
        }
        self.io.flush().map_err(Error::Write)?;
        reached.transpose()
    }

    /// Sends a keepalive `ping` after a quiet spell, and acts on the
    /// engine's deadlines and the turn's.
    fn keep_time(&mut self, awaited: Option<RequestId>, deadline: Option<u64>) -> Result<(), Error<IO::Error>> {
        let now = self.clock.now_ms();
        if deadline.is_some_and(|d| now >= d) {
            return Err(Error::TurnTimeout);
        }
        if let Some(quiet) = self.config.keepalive {
            if self.ping.is_none() && now.saturating_sub(self.last_rx) >= quiet {
                self.ping = Some(self.request(Call::Ping, &|out| out(b"{}"))?);
            }
        }
        if self.engine.poll_timeout().is_none_or(|t| t > now) {
            return Ok(());
        }
        let Device { io, engine, ping, .. } = self;
        let (mut failed, mut expired): (_, Option<Error<IO::Error>>) = (None, None);
        engine.handle_timeout(now, |id, call| {
            if Some(id) == *ping {
                expired = Some(Error::LinkLost);
            } else if Some(id) == awaited && expired.is_none() {
                expired = Some(Error::Timeout(call));
            }
        });
        send(io, engine, &mut failed);
        match (failed, expired) {
            (Some(e), _) => Err(Error::Write(e)),
            (None, Some(e)) => Err(e),
            (None, None) => Ok(()),
        }
    }

    /// Sends a request (see [`write_request`]).
    fn request(&mut self, call: Call, params: &Params<'_>) -> Result<RequestId, Error<IO::Error>> {
        let now = self.clock.now_ms();
        write_request(&mut self.io, &self.engine, now, call, params)
    }
}

/// Writes what the engine decided to send to `io` (after the first write
/// error, nothing more: `failed` keeps it) and empties its store.
fn send<IO: Write, const TRANSMIT: usize>(
    io: &mut IO,
    engine: &mut DeviceEngine<TRANSMIT>,
    failed: &mut Option<IO::Error>,
) {
    let bytes = engine.transmit();
    if failed.is_none() && !bytes.is_empty() {
        *failed = io.write_all(bytes).err();
    }
    engine.transmitted(usize::MAX);
}

/// Sends a request whose params `params` writes (called twice: to count,
/// then to send); its deadline is the engine's, counted from `now`.
fn write_request<IO: Write, const TRANSMIT: usize>(
    io: &mut IO,
    engine: &DeviceEngine<TRANSMIT>,
    now: u64,
    call: Call,
    params: &Params<'_>,
) -> Result<RequestId, Error<IO::Error>> {
    // Four requests at most are in flight: a full table is a state error.
    let id = engine.insert_request(call, now).map_err(|_| Error::SessionState)?;
    let mut digits = [0; 20];
    let digits = copilot_core::itoa(id.0, &mut digits);
    let body = |out: &mut dyn FnMut(&[u8])| {
        out(b"{\"jsonrpc\":\"2.0\",\"id\":");
        out(digits);
        out(b",\"method\":\"");
        out(call.method().as_bytes());
        out(b"\",\"params\":");
        params(out);
        out(b"}");
    };
    let mut len = 0;
    body(&mut |b| len += b.len());
    let mut header = [0; MAX_FRAME_HEADER_LEN];
    let n = frame_header(len, &mut header);
    let mut failed = None;
    let mut out = |bytes: &[u8]| {
        if failed.is_none() {
            failed = io.write_all(bytes).err();
        }
    };
    out(&header[..n]);
    body(&mut out);
    match failed {
        Some(e) => Err(Error::Write(e)),
        None => io.flush().map(|()| id).map_err(Error::Write),
    }
}

/// Writes a request's params to the sink it is given.
type Params<'p> = dyn Fn(&mut dyn FnMut(&[u8])) + 'p;

/// A response's result: the value and, for `connect`, its protocol
/// version; or the error's code.
type Answered<'a> = Result<(Value<'a>, Option<u64>), RpcError<'a>>;

/// Acts on one routed frame: runs the handler of a wait and passes its
/// answer to the engine, delivers events, notes the turn's end. Returns a
/// response to one of the device's requests.
fn act<'a, const TRANSMIT: usize, const SCRATCH: usize>(
    engine: &mut DeviceEngine<TRANSMIT>,
    handlers: &mut impl Handlers,
    turn: &mut Turn,
    output: Output<'a, (), Call>,
) -> Option<(RequestId, Call, Answered<'a>)> {
    match output.route {
        Route::Response { request, waiter, result } => {
            let result = match result {
                Ok(v) => {
                    let version = v.get("protocolVersion").and_then(|n| n.as_number()).and_then(|n| n.as_u64());
                    Ok((v, version))
                }
                Err(e) => Err(e),
            };
            Some((request, waiter, result))
        }
        Route::Event { event, .. } => {
            let data = event.data;
            let shown = match data {
                Some(d) if event.event_type == "assistant.message_delta" => {
                    d.get("deltaContent").and_then(|v| v.as_str()).map(Event::Delta)
                }
                Some(d) if event.event_type == "assistant.message" => {
                    d.get("content").and_then(|v| v.as_str()).map(Event::Message)
                }
                _ if event.event_type == "session.error" => {
                    turn.error = true;
                    Some(Event::SessionError(data.and_then(|d| d.get("message")).and_then(|v| v.as_str())))
                }
                _ => None,
            };
            handlers.event(&shown.unwrap_or(Event::Other { event_type: event.event_type, data }));
            if event.event_type == "session.idle" {
                turn.idle = true;
            }
            if let (Some(ob), Some(data)) = (output.obligation, data) {
                match ob.handler {
                    HandlerKind::Permission => {
                        let request = data.get("permissionRequest");
                        let field = |k| request.and_then(|r| r.get(k)).and_then(|v| v.as_str());
                        let asked = PermissionRequest { kind: field("kind"), tool_name: field("toolName"), data };
                        let decision = handlers.permission(&asked);
                        let _ = engine.answer(ob.id, decision.json());
                    }
                    HandlerKind::Tool => answer_tool::<TRANSMIT, SCRATCH>(engine, handlers, ob.id, data),
                    _ => {
                        let _ = engine.refuse(ob.id, Cause::NoHandler);
                    }
                }
            } else if let Some(ob) = output.obligation {
                let _ = engine.refuse(ob.id, Cause::Unreadable);
            }
            None
        }
        Route::Request { .. } => {
            // The device announces no handler answered by a response.
            if let Some(ob) = output.obligation {
                let _ = engine.refuse(ob.id, Cause::NoHandler);
            }
            None
        }
        // Lifecycle notices, frames skipped as too large, acknowledgements
        // of answers: counted by the engine, nothing to do here.
        _ => None,
    }
}

/// Runs the tool handler and answers with its text, or its failure.
fn answer_tool<const TRANSMIT: usize, const SCRATCH: usize>(
    engine: &mut DeviceEngine<TRANSMIT>,
    handlers: &mut impl Handlers,
    id: copilot_core::ObligationId,
    data: Value<'_>,
) {
    let mut name_buf = [0; MAX_TOOL_NAME];
    let name = data.get("toolName").and_then(|v| v.as_str()).and_then(|s| s.decode_into(&mut name_buf)).unwrap_or("");
    let call = ToolCall { name, arguments: data.get("arguments"), data };
    match handlers.tool(&call) {
        Ok(text) => {
            let mut scratch = [0; SCRATCH];
            let mut w = SliceWriter::new(&mut scratch);
            w.push(b"{\"textResultForLlm\":");
            put_str(&mut |b| w.push(b), text);
            w.push(b",\"resultType\":\"success\"}");
            match w.finish() {
                Some(payload) if payload.len() + ANSWER_ROOM <= TRANSMIT => {
                    let _ = engine.answer(id, payload);
                }
                _ => {
                    let _ = engine.fail(id, "the tool's result does not fit the device's buffers");
                }
            }
        }
        Err(detail) => {
            let _ = engine.fail(id, detail);
        }
    }
}

/// The options object of `session.create`, before the engine's additions.
fn write_options(out: &mut dyn FnMut(&[u8]), options: &SessionOptions<'_>) {
    out(b"{\"sessionId\":");
    put_str(out, options.session_id);
    if let Some(model) = options.model {
        out(b",\"model\":");
        put_str(out, model);
    }
    out(if options.streaming { b",\"streaming\":true" } else { b",\"streaming\":false" });
    out(b",\"tools\":[");
    for (i, tool) in options.tools.iter().enumerate() {
        out(if i == 0 { b"{\"name\":" } else { b",{\"name\":" });
        put_str(out, tool.name);
        out(b",\"description\":");
        put_str(out, tool.description);
        out(b",\"parameters\":");
        out(tool.parameters.as_bytes());
        out(b"}");
    }
    out(b"]}");
}

/// The handlers while no turn runs: nothing the CLI asks then is the
/// device's to answer, so the engine's refusal goes.
struct NoHandlers;

impl Handlers for NoHandlers {
    fn tool(&mut self, _: &ToolCall<'_>) -> Result<&str, &str> {
        Err("no turn is running")
    }

    fn permission(&mut self, _: &PermissionRequest<'_>) -> Decision {
        Decision::UserNotAvailable
    }
}
