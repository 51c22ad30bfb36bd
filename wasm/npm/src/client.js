// The JS client of copilot-wasm, shared by the browser and Node entry
// points. It holds no protocol policy: every incoming byte goes to the
// engine (`CoreEngine.feed`), which routes it and decides what must be
// answered and how; this file delivers events, settles calls, runs the
// user's handlers and passes their answers (or failures) back to the
// engine, writes what the engine sends, and keeps one timer for the
// engine's deadlines.
//
// Nothing here imports Node modules; the Node entry point (node.js) adds
// spawning the CLI and TCP on top.

import initWasm, { CoreEngine } from "../dist/copilot_wasm.js";
import {
  ConfigError,
  CopilotError,
  TOOL_FAILED_TEXT,
  checkConfig,
  sectionTransforms,
  handlerKindsOf,
  sessionParams,
} from "./config.js";

export {
  ConfigError,
  CopilotError,
  CREATE_ONLY_OPTIONS,
  HANDLER_OPTIONS,
  GENERIC_HANDLER_KINDS,
  RESERVED_OPTIONS,
  RESUME_ONLY_OPTIONS,
  SESSION_OPTIONS,
  TOOL_FAILED_TEXT,
} from "./config.js";
import { checkHooks, checkRequestHandlers, decideHook, decideRequest, isGenericKind } from "./hooks.js";

// How `CoreEngine.settle` settles a wait (wasm/src/lib.rs names the same).
const SETTLE_ANSWER = 0;
const SETTLE_REFUSE = 1;
const SETTLE_DECLINE = 2;
const SETTLE_FAIL = 3;
import { rpcCalls, SERVER_METHODS, SESSION_METHODS } from "./generated/rpc.js";

/** The protocol version this client speaks. */
export const PROTOCOL_VERSION = 3;

const METHOD_NOT_FOUND = -32601;
/** How long `destroy()` and `stop()` (in total) wait for a CLI that does not answer. */
export const DEFAULT_SHUTDOWN_GRACE_MS = 3000;
/** How long any call to the CLI may take unless told otherwise. */
export const DEFAULT_REQUEST_TIMEOUT_MS = 60_000;
/**
 * How long a handler (permission, tool, user input, ...) may take unless
 * told otherwise; past it the engine answers with the refusal.
 */
export const DEFAULT_HANDLER_TIMEOUT_MS = 5 * 60_000;
/** How long a handshake may take unless told otherwise. */
const DEFAULT_STARTUP_MS = 60_000;
/**
 * Events kept for a session's first subscriber while it has none, at most:
 * a whole turn fits many times over, so subscribing right after
 * `createSession` resolves loses nothing, and a session used only through
 * `sendAndWait` keeps memory flat. Events past it are not kept for a late
 * first subscriber; `session.stats().notKept` counts them.
 */
export const MAX_KEPT_EVENTS = 1024;

// ---------------------------------------------------------------------------
// Errors

/** The CLI answered a call with a JSON-RPC error. */
export class RpcError extends CopilotError {
  constructor(method, code, message, data) {
    super(`${method}: ${message} (code ${code})`);
    this.method = method;
    this.code = code;
    this.rpcMessage = message;
    this.data = data;
  }
}

/** The connection ended; every call waiting on it rejects with this. */
export class DisconnectedError extends CopilotError {}

/** A call, a start or a turn took longer than allowed. */
export class TimeoutError extends CopilotError {}

/** A turn ended in `session.error`. */
export class SessionError extends CopilotError {
  constructor(errorType, message, data) {
    super(`${errorType ?? "error"}: ${message ?? "session error"}`);
    this.errorType = errorType;
    this.data = data;
  }
}

/** The CLI speaks another protocol version. */
export class ProtocolVersionError extends CopilotError {
  constructor(server) {
    super(`the CLI speaks protocol version ${server ?? "(unknown)"}; this client needs ${PROTOCOL_VERSION}`);
    this.server = server;
    this.supported = PROTOCOL_VERSION;
  }
}


// ---------------------------------------------------------------------------
// WebAssembly loading

let wasmLoader = () => initWasm();
let wasmReady;

/**
 * Loads the WebAssembly core. Browsers fetch `dist/copilot_wasm_bg.wasm`
 * next to the glue by default; pass bytes, a `Response`, a URL or a compiled
 * `WebAssembly.Module` to load it another way. Called by every factory;
 * calling it first is optional.
 */
export async function loadWasm(input) {
  if (input !== undefined) {
    wasmReady = initWasm({ module_or_path: input });
  }
  wasmReady ??= Promise.resolve().then(() => wasmLoader());
  try {
    await wasmReady;
  } catch (e) {
    wasmReady = undefined;
    throw new CopilotError(`cannot load the copilot-wasm WebAssembly: ${e?.message ?? e}`, { cause: e });
  }
}

/** For the Node entry point: how to load the module there. */
export function setWasmLoader(loader) {
  wasmLoader = loader;
}

// ---------------------------------------------------------------------------
// Transports: WHATWG streams or Node streams, told apart by their methods.

function toBytes(chunk) {
  if (chunk instanceof Uint8Array) return chunk;
  if (chunk instanceof ArrayBuffer) return new Uint8Array(chunk);
  if (ArrayBuffer.isView(chunk)) return new Uint8Array(chunk.buffer, chunk.byteOffset, chunk.byteLength);
  if (typeof chunk === "string") return new TextEncoder().encode(chunk);
  throw new TypeError(`cannot read a ${typeof chunk} chunk as bytes`);
}

/**
 * `{ start(onData, onEnd), write(bytes), closeWriter(), stopReading() }`
 * over a readable and a writable of either kind. `owned`: the client made
 * them (a socket), so stopping destroys them.
 */
export function streamTransport(readable, writable, { label = "stream", destroy } = {}) {
  let onEnd = () => {};
  let ended = false;
  const end = (reason) => {
    if (!ended) {
      ended = true;
      onEnd(reason);
    }
  };
  let write, closeWriter, startReading, stopReading;

  if (typeof writable?.getWriter === "function") {
    const writer = writable.getWriter();
    const failed = (e) => end(`write failed: ${e?.message ?? e ?? "the stream was closed"}`);
    write = (bytes) => {
      try {
        writer.write(bytes).catch(failed);
      } catch (e) {
        failed(e);
      }
    };
    closeWriter = () => {
      try {
        writer.close().catch(noop);
      } catch {
        // Closed or errored already.
      }
    };
  } else if (typeof writable?.write === "function") {
    // Errors (EPIPE after the peer left) arrive as events: without a
    // listener they would crash the process.
    writable.on?.("error", (e) => end(`write failed: ${e?.message ?? e}`));
    write = (bytes) => {
      if (writable.destroyed || writable.writableEnded) end("write failed: the stream was closed");
      else writable.write(bytes);
    };
    closeWriter = () => {
      if (!writable.destroyed && !writable.writableEnded) writable.end();
    };
  } else {
    throw new TypeError("fromStreams: the writable is neither a WritableStream nor a Node stream.Writable");
  }

  if (typeof readable?.getReader === "function") {
    const reader = readable.getReader();
    startReading = (onData) => {
      (async () => {
        for (;;) {
          const { value, done } = await reader.read();
          if (done) return end("the stream ended");
          onData(toBytes(value));
        }
      })().catch((e) => end(ended ? "" : `read failed: ${e?.message ?? e}`));
    };
    stopReading = () => {
      try {
        reader.cancel().catch(noop);
      } catch {
        // Released or errored already.
      }
    };
  } else if (typeof readable?.on === "function") {
    let dataListener;
    startReading = (onData) => {
      dataListener = (chunk) => onData(toBytes(chunk));
      readable.on("data", dataListener);
      readable.once("end", () => end("the CLI closed the connection"));
      readable.once("close", () => end("the connection closed"));
      readable.once("error", (e) => end(`read failed: ${e?.message ?? e}`));
    };
    stopReading = () => {
      if (dataListener) readable.off("data", dataListener);
      if (typeof readable.destroy === "function" && !readable.destroyed) readable.destroy();
    };
  } else {
    throw new TypeError("fromStreams: the readable is neither a ReadableStream nor a Node stream.Readable");
  }

  return {
    label,
    start(onData, onEndCallback) {
      onEnd = onEndCallback;
      startReading(onData);
    },
    write,
    closeWriter,
    stopReading() {
      stopReading();
      destroy?.();
    },
  };
}

// ---------------------------------------------------------------------------
// Helpers

const noop = () => {};

/** The engine's clock, in milliseconds. */
const now = () => performance.now();

const isObject = (v) => v !== null && typeof v === "object" && !Array.isArray(v);

function errorText(e) {
  return e instanceof Error ? e.message : String(e);
}

/** `{kind}` from what a permission handler returned; null if unusable. */
function permissionDecision(value) {
  if (typeof value === "string" && value) return { kind: value };
  if (value && typeof value === "object" && typeof value.kind === "string") return value;
  return null;
}

/**
 * A permission decision with context on how and where it was made (sent
 * beside it as `decisionContext`; telemetry, it changes nothing).
 */
export function withDecisionContext(decision, decisionContext) {
  const inner = decision?.kind === "attributed" ? decision.result : decision;
  return { kind: "attributed", result: inner, decisionContext };
}

/** The `result` of handlePendingToolCall from what a tool returned. */
function toolResult(value) {
  if (value === undefined || value === null) return { textResultForLlm: "", resultType: "success" };
  if (typeof value === "string") return { textResultForLlm: value, resultType: "success" };
  if (typeof value === "object" && typeof value.textResultForLlm === "string") {
    return { resultType: "success", ...value };
  }
  return { textResultForLlm: JSON.stringify(value), resultType: "success" };
}

// ---------------------------------------------------------------------------
// The client

/**
 * A connection to one Copilot CLI. Make one with `CopilotClient.start`,
 * `CopilotClient.connect` (Node) or `CopilotClient.fromStreams`.
 */
export class CopilotClient {
  #core;
  #transport;
  #logger;
  /** Request id -> `{ method, timeoutMs, resolve, reject, onResponse }`. */
  #pending = new Map();
  /** The one timer, armed at the engine's `poll_timeout()`, and when it fires. */
  #timer;
  #timerAt;
  /** Tag -> Session, for every session reserved in the core. */
  #sessions = new Map();
  #nextTag = 1;
  #closed = false;
  #closeReason = null;
  #closedWaiters = [];
  #listeners = { lifecycle: new Set(), notification: new Set(), disconnect: new Set() };
  #process;
  #stopping;
  #serverInfo = { protocolVersion: 0, version: undefined };
  #address;
  #requestTimeoutMs;
  #shutdownGraceMs;
  /** Generic handlers of client-wide requests (those naming no session), by method. */
  #requestHandlers;
  #rpc;

  /** @internal Use the static factories. */
  constructor(
    transport,
    {
      logger,
      process,
      address,
      maxFrameBytes,
      requestTimeoutMs,
      shutdownGraceMs,
      handlerTimeoutMs,
      requestHandlers,
    } = {},
  ) {
    const handlerMs = handlerTimeoutMs ?? DEFAULT_HANDLER_TIMEOUT_MS;
    // The engine's handler deadline: 0 (or an infinite one) means none.
    this.#core = new CoreEngine(maxFrameBytes, Number.isFinite(handlerMs) ? Math.max(1, handlerMs) : 0, 0, undefined);
    this.#transport = transport;
    this.#logger = logger ?? {};
    this.#process = process;
    this.#address = address;
    this.#requestTimeoutMs = requestTimeoutMs ?? DEFAULT_REQUEST_TIMEOUT_MS;
    this.#shutdownGraceMs = shutdownGraceMs ?? DEFAULT_SHUTDOWN_GRACE_MS;
    this.#requestHandlers = { ...requestHandlers };
    transport.start(
      (bytes) => this.#onData(bytes),
      (reason) => this.#onTransportEnd(reason),
    );
  }

  /** The stream ended: a CLI this client started is asked why (its exit). */
  #onTransportEnd(reason) {
    if (this.#closed) return;
    const process = this.#process;
    if (!process || this.#stopping) {
      this.#shutDown(this.#stopping ? "the client was stopped" : reason);
      return;
    }
    process.describeExit().then(
      (exit) => this.#shutDown(exit ?? reason),
      () => this.#shutDown(reason),
    );
  }

  /** The default timeout of every call, in milliseconds. */
  get requestTimeoutMs() {
    return this.#requestTimeoutMs;
  }

  /** How long `destroy()` and `stop()` wait for the CLI, in milliseconds. */
  get shutdownGraceMs() {
    return this.#shutdownGraceMs;
  }

  /**
   * Runs the client over any duplex byte stream: a WHATWG
   * `ReadableStream`/`WritableStream` pair of `Uint8Array`s (a WebSocket
   * wrapped in streams, an in-page pipe) or Node streams. Resolves once
   * the handshake has succeeded. The client takes the streams over: stop()
   * closes the writable and cancels the readable.
   */
  static async fromStreams(readable, writable, options = {}) {
    await loadWasm();
    const transport = streamTransport(readable, writable, { label: options.label ?? "stream" });
    const { logger, token, connectionToken, startupTimeoutMs, maxFrameBytes, requestTimeoutMs, shutdownGraceMs } = options;
    return this._handshaken(transport, {
      logger,
      token: token ?? connectionToken,
      startupTimeoutMs,
      maxFrameBytes,
      requestTimeoutMs,
      shutdownGraceMs,
      handlerTimeoutMs: options.handlerTimeoutMs,
      requestHandlers: options.requestHandlers,
    });
  }

  /**
   * Connects through a WebSocket to a copilot-bridge (`ws://HOST:PORT/ws`),
   * presenting `token` as the subprotocol `copilot.token.<TOKEN>`. Same
   * client as `fromStreams`; stop() closes the socket (and the bridge ends
   * its CLI). See websocket.js.
   */
  static async connectWebSocket(url, options = {}) {
    await loadWasm();
    const { webSocketTransport } = await import("./websocket.js");
    const transport = await webSocketTransport(url, options);
    const { logger, connectionToken, startupTimeoutMs, maxFrameBytes, requestTimeoutMs, shutdownGraceMs } = options;
    return this._handshaken(transport, {
      logger,
      token: connectionToken,
      startupTimeoutMs,
      maxFrameBytes,
      requestTimeoutMs,
      shutdownGraceMs,
      handlerTimeoutMs: options.handlerTimeoutMs,
      requestHandlers: options.requestHandlers,
    });
  }

  /** @internal Builds a client on `transport` and runs the handshake. */
  static async _handshaken(transport, options = {}) {
    await loadWasm();
    checkRequestHandlers(options.requestHandlers, (message) => new ConfigError(message));
    const client = new this(transport, options);
    try {
      await client.#handshake(options.token ?? options.connectionToken, options.startupTimeoutMs ?? DEFAULT_STARTUP_MS);
    } catch (e) {
      client.forceStop();
      throw e;
    }
    return client;
  }

  /** Node only: see the Node entry point. */
  static async start() {
    throw new CopilotError("CopilotClient.start needs Node.js; in a browser use CopilotClient.fromStreams");
  }

  /** Node only: see the Node entry point. */
  static async connect() {
    throw new CopilotError("CopilotClient.connect needs Node.js; in a browser use CopilotClient.fromStreams");
  }

  async #handshake(token, timeoutMs) {
    const params = { supportedTaskKinds: [] };
    if (token != null) params.token = token;
    let version, serverVersion;
    try {
      const r = await this._request("connect", params, { timeoutMs });
      version = r?.protocolVersion;
      serverVersion = r?.version;
    } catch (e) {
      if (!(e instanceof RpcError && e.code === METHOD_NOT_FOUND)) throw e;
      const pong = await this._request("ping", {}, { timeoutMs });
      version = pong?.protocolVersion;
    }
    if (version !== PROTOCOL_VERSION) throw new ProtocolVersionError(version);
    this.#serverInfo = { protocolVersion: version, version: serverVersion };
  }

  /** What the handshake learned: `{ protocolVersion, version }`. */
  get serverInfo() {
    return { ...this.#serverInfo };
  }

  /** For a TCP connection: `{ host, port }` of the CLI. */
  get address() {
    return this.#address ? { ...this.#address } : undefined;
  }

  /** The process id of a CLI this client started. */
  get pid() {
    return this.#process?.pid;
  }

  /** Whether the connection has ended. */
  get closed() {
    return this.#closed;
  }

  /**
   * Subscribes to client-wide happenings: `"lifecycle"` (each
   * `session.lifecycle` notification's params), `"notification"` (other
   * notifications: `{ method, params, sessionId }`) and `"disconnect"` (the
   * reason). Returns a function that unsubscribes.
   */
  on(kind, handler) {
    const set = this.#listeners[kind];
    if (!set) throw new TypeError(`unknown client event ${kind}; expected lifecycle, notification or disconnect`);
    set.add(handler);
    return () => set.delete(handler);
  }

  /** `ping`: `{ message, timestamp, protocolVersion }`. */
  ping(message) {
    return this._request("ping", message === undefined ? {} : { message });
  }

  /** `status.get`: `{ version, protocolVersion }`. */
  status() {
    return this._request("status.get", {});
  }

  /** `auth.getStatus`: `{ isAuthenticated, authType?, login?, ... }`. */
  authStatus() {
    return this._request("auth.getStatus", {});
  }

  /** `session.list`: the sessions the CLI knows. */
  async listSessions(filter) {
    const r = await this._request("session.list", filter ? { filter } : {});
    return r?.sessions ?? [];
  }

  /** `session.getLastId`: the most recently updated session, if any. */
  async lastSessionId() {
    const r = await this._request("session.getLastId", {});
    return r?.sessionId;
  }

  /** `session.delete`: removes a session's persisted state. */
  async deleteSession(sessionId) {
    const r = await this._request("session.delete", { sessionId });
    if (r?.success === false) throw new RpcError("session.delete", 0, r.error ?? "session.delete failed");
  }

  /** Calls any method this client does not wrap; resolves with its result. */
  call(method, params = {}, options) {
    return this._request(method, params, options);
  }

  /** The CLI's server methods as calls: `client.rpc.models.list()`. */
  get rpc() {
    return (this.#rpc ??= rpcCalls(SERVER_METHODS, "", (method, params, options) =>
      this._request(method, params, options),
    ));
  }

  /** `models.list`: the models the CLI offers, with their capabilities. */
  async listModels(options) {
    const r = await this._request("models.list", {}, options);
    return r?.models ?? [];
  }

  /**
   * The engine's counters (frames, open obligations and the age of the
   * oldest, answers and refusals by cause, parking, acknowledgements), with
   * the calls and sessions open.
   */
  stats() {
    return {
      ...JSON.parse(this.#core.stats(now())),
      pendingRequests: this.#pending.size,
      sessions: this.#sessions.size,
    };
  }

  /**
   * Creates a session. Its id (a UUID this client chooses, unless
   * `sessionId` or `serverAssignedId` says otherwise) is reserved in the
   * core before `session.create` is sent, so events that race the answer
   * are delivered.
   */
  createSession(config = {}) {
    return this.#open("session.create", config, null);
  }

  /** Resumes a session by id, reserved before `session.resume` is sent. */
  resumeSession(sessionId, config = {}) {
    if (typeof sessionId !== "string" || !sessionId) {
      return Promise.reject(new ConfigError("resumeSession needs a session id"));
    }
    return this.#open("session.resume", config, sessionId);
  }

  async #open(method, config, resumeId) {
    checkConfig(config, resumeId != null);
    checkHooks(config.hooks, (message) => new ConfigError(message));
    checkRequestHandlers(config.requestHandlers, (message) => new ConfigError(message));
    if (this.#closed) throw this.#disconnected();
    const serverAssigned = Boolean(config.serverAssignedId) && resumeId == null;
    const id = serverAssigned ? null : (resumeId ?? config.sessionId ?? crypto.randomUUID());
    // The engine adds which waits the session answers, and the defaults.
    let params;
    try {
      const options = JSON.stringify(sessionParams(config, id, resumeId != null));
      params = JSON.parse(CoreEngine.openParams(options, handlerKindsOf(config).join(",")));
    } catch (e) {
      throw new ConfigError(`cannot open session ${id ?? "(server-assigned)"}: ${errorText(e)}`);
    }
    const tag = this.#allocateTag();
    const session = new Session(this, tag, id, config);
    let previous;
    try {
      previous = this.#core.reserve(id, tag, resumeId != null);
    } catch (e) {
      throw new ConfigError(`cannot open session ${id ?? "(server-assigned)"}: ${errorText(e)}`);
    }
    this.#sessions.set(tag, session);
    if (previous !== undefined) {
      // The id was open on this client: the new handle takes it over.
      const old = this.#sessions.get(previous);
      this.#sessions.delete(previous);
      old?._end(`session ${id} was resumed by another handle on this client`);
    }
    // Runs as the answer is routed, before any later frame: the engine
    // opens the session (or releases it, answering its waits) and releases
    // the frames parked for it, in their order.
    const onResponse = (item) => {
      const ok = "result" in item;
      let opened;
      try {
        opened = JSON.parse(
          this.#core.complete_open(tag, ok, ok ? JSON.stringify(item.result ?? null) : String(item.message), now()),
        );
      } catch (e) {
        throw new DisconnectedError(`session ${id ?? "(server-assigned)"} was released: ${errorText(e)}`);
      }
      if (opened.opened && serverAssigned) session._setId(item.result.sessionId);
      if (!opened.opened) {
        this.#sessions.delete(tag);
        session._end(`${method} failed: ${opened.error}`);
      }
      this.#routeItems(opened.routes);
      if (!opened.opened && ok) throw new CopilotError(`${method}: ${opened.error}`);
    };
    let result;
    try {
      result = await this._request(method, params, { onResponse });
    } catch (e) {
      this._releaseSession(tag, `${method} failed`);
      throw e;
    }
    session._opened(result);
    return session;
  }

  #allocateTag() {
    for (;;) {
      const tag = this.#nextTag;
      this.#nextTag = tag >= 0xffff_fffe ? 1 : tag + 1;
      if (!this.#sessions.has(tag)) return tag;
    }
  }

  /**
   * Stops cleanly, within `graceMs` (default: the client's
   * `shutdownGraceMs`) in total however many sessions are open: destroys
   * the sessions still open (all at once), asks a CLI this client started
   * to shut down, closes the connection and waits for the CLI to exit; when
   * the grace is over, kills its process group. Sessions are released at
   * once. Rejects with the first failure (such as a TimeoutError from a CLI
   * that did not answer) once everything is released.
   */
  stop({ graceMs = this.#shutdownGraceMs } = {}) {
    this.#stopping ??= this.#stop(graceMs);
    return this.#stopping;
  }

  async #stop(graceMs) {
    const deadline = Date.now() + graceMs;
    const left = () => Math.max(0, deadline - Date.now());
    let firstError;
    const destroys = [];
    for (const session of [...this.#sessions.values()]) {
      if (session.active && !this.#closed) destroys.push(session.destroy({ timeoutMs: left() }));
      else this._releaseSession(session._tag, "client stopped");
    }
    for (const result of await Promise.allSettled(destroys)) {
      if (result.status === "rejected") firstError ??= result.reason;
    }
    if (this.#process && !this.#closed) {
      try {
        await this._request("runtime.shutdown", {}, { timeoutMs: left() });
      } catch (e) {
        if (!(e instanceof RpcError || e instanceof DisconnectedError)) firstError ??= e;
      }
    }
    this.#transport.closeWriter();
    if (this.#process) {
      const exited = await this.#process.waitForExit(left());
      if (!exited) {
        this.#logger.warn?.(`the Copilot CLI did not exit within ${graceMs} ms; killing its process group`);
        this.#process.kill();
      }
    }
    this.#transport.stopReading();
    this.#shutDown("the client was stopped");
    if (firstError) throw firstError;
  }

  /** Stops at once: kills a CLI this client started and closes the connection. */
  forceStop() {
    this.#stopping ??= Promise.resolve();
    this.#process?.kill();
    this.#transport.closeWriter();
    this.#transport.stopReading();
    this.#shutDown("the client was stopped");
  }

  /**
   * Resolves when the connection has ended, with the reason: the CLI's exit
   * (status or signal, and the end of its stderr), the stream's end or
   * failure, or this client stopping it.
   */
  closedPromise() {
    if (this.#closed) return Promise.resolve(this.#closeReason);
    return new Promise((resolve) => this.#closedWaiters.push(resolve));
  }

  // -------------------------------------------------------------------------
  // Internal API, used by sessions.

  /** @internal Sends a request; resolves with its result. */
  _request(method, params, { timeoutMs = this.#requestTimeoutMs, onResponse } = {}) {
    if (this.#closed) return Promise.reject(this.#disconnected());
    let id;
    try {
      // The deadline is the engine's: the timer below wakes it. The
      // request goes to the outbox, sent by #flush.
      const deadline = Number.isFinite(timeoutMs) ? Math.max(0, timeoutMs) : Infinity;
      id = this.#core.encode_request(method, params === undefined ? "" : JSON.stringify(params), now(), deadline);
    } catch (e) {
      return Promise.reject(new CopilotError(`cannot send ${method}: ${errorText(e)}`, { cause: e }));
    }
    return new Promise((resolve, reject) => {
      this.#pending.set(id, { method, timeoutMs, resolve, reject, onResponse });
      this.#flush();
    });
  }

  /** @internal Marks a session closing (its destroy is in flight). */
  _closeSession(tag) {
    try {
      this.#core.close_session(tag);
    } catch {
      // Already released (or taken over by a resume).
    }
  }

  /** @internal Frees a session's slot and ends its delivery. */
  _releaseSession(tag, reason) {
    const session = this.#sessions.get(tag);
    if (!session) return;
    this.#sessions.delete(tag);
    session._end(reason);
    if (this.#closed) return;
    // Its open waits are refused by the engine; frames parked for no
    // session any more come back.
    this.#routeBatch(this.#core.release_session(tag, now()));
    this.#flush();
  }

  /**
   * @internal Runs a handler's decision for an obligation and passes it on:
   * `decide()` resolves to `{ answer, siblings? }`, `{ decline: true }` (left
   * to another client of the session) or `{ refuse: cause }`; a throw is a
   * failed handler. Exactly one settles the wait in the engine, which
   * ignores (and reports) any answer after a deadline or release.
   */
  async _discharge(obligation, decide) {
    let outcome;
    try {
      outcome = await decide();
    } catch (e) {
      // The error may hold what the model should not read: the engine's
      // failure answer tells the agent only that the handler failed (for a
      // tool, with the text in the result's `error`, which the model does
      // not read); the logs say how.
      this.#logger.error?.(`a handler failed (${errorText(e)}); the agent is told only that it failed`);
      outcome = { fail: errorText(e) };
    }
    if (this.#closed) return;
    try {
      if (outcome && "answer" in outcome) {
        const siblings = outcome.siblings === undefined ? "" : JSON.stringify(outcome.siblings);
        this.#core.settle(obligation, SETTLE_ANSWER, JSON.stringify(outcome.answer) ?? "null", siblings);
      } else if (outcome && "fail" in outcome) {
        this.#core.settle(obligation, SETTLE_FAIL, outcome.fail, "");
      } else if (outcome?.decline) {
        // Left to another client of the session: nothing is sent.
        this.#core.settle(obligation, SETTLE_DECLINE, "", "");
      } else {
        this.#core.settle(obligation, SETTLE_REFUSE, outcome?.refuse ?? "handlerFailed", "");
      }
    } catch (e) {
      // Answered already (its deadline passed, its session was released),
      // or the answer was not JSON (the refusal went instead).
      this.#logger.warn?.(`an answer was not sent as given: ${errorText(e)}`);
    }
    this.#flush();
  }

  /** @internal */
  get _logger() {
    return this.#logger;
  }

  // -------------------------------------------------------------------------
  // The reading side.

  /** Writes what the engine decided to send, then re-arms the timer. */
  #flush() {
    if (this.#closed) return;
    const out = this.#core.take_outgoing();
    if (out.length > 0) this.#transport.write(out);
    this.#arm();
  }

  /** Keeps the one timer armed at the engine's next deadline. */
  #arm() {
    const at = this.#core.poll_timeout();
    if (at === undefined) {
      if (this.#timer !== undefined) clearTimeout(this.#timer);
      this.#timer = this.#timerAt = undefined;
      return;
    }
    if (this.#timer !== undefined && this.#timerAt <= at) return;
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    this.#timerAt = at;
    this.#timer = setTimeout(() => this.#onTimer(), Math.max(0, Math.ceil(at - now())));
  }

  #onTimer() {
    this.#timer = this.#timerAt = undefined;
    if (this.#closed) return;
    for (const id of this.#core.handle_timeout(now())) {
      const entry = this.#pending.get(id);
      if (!entry) continue;
      this.#pending.delete(id);
      // A late answer is then reported as unmatched.
      entry.reject(new TimeoutError(`no answer to ${entry.method} within ${entry.timeoutMs} ms`));
    }
    this.#flush();
  }

  #onData(bytes) {
    if (this.#closed) return;
    let batch;
    try {
      batch = this.#core.feed(bytes, now());
    } catch (e) {
      this.#shutDown(`the core failed: ${errorText(e)}`);
      return;
    }
    this.#routeBatch(batch);
    this.#flush();
  }

  #routeBatch(text) {
    if (text.length <= 2) return; // "[]"
    this.#routeItems(JSON.parse(text));
  }

  #routeItems(items) {
    for (let i = 0; i < items.length; i++) {
      try {
        this.#act(items[i]);
      } catch (e) {
        this.#logger.error?.(`routing a ${items[i]?.route} failed: ${errorText(e)}`);
      }
    }
  }

  /** Does what one route says. Never waits on user code. */
  #act(item) {
    switch (item.route) {
      case "event": {
        const session = this.#sessions.get(item.session);
        session?._push(item.event);
        if (item.obligation !== undefined) this.#obligation(item, session, item.event?.data);
        return;
      }
      case "request":
        if (item.obligation !== undefined) {
          const session = item.session === null ? undefined : this.#sessions.get(item.session);
          this.#obligation(item, session, item.params);
        }
        return;
      case "lifecycle":
        for (const f of this.#listeners.lifecycle) this.#call(f, item.params, "lifecycle");
        return;
      case "response": {
        const entry = this.#pending.get(item.id);
        if (!entry) {
          this.#logger.warn?.(`response to request ${item.id}, which nobody awaits`);
          return;
        }
        this.#pending.delete(item.id);
        try {
          entry.onResponse?.(item);
          if ("result" in item) entry.resolve(item.result);
          else entry.reject(new RpcError(entry.method, item.code, item.message, item.data));
        } catch (e) {
          entry.reject(e);
        }
        return;
      }
      case "notification": {
        const sessionId = item.session === null ? undefined : this.#sessions.get(item.session)?.id;
        const n = { method: item.method, params: item.params, sessionId };
        for (const f of this.#listeners.notification) this.#call(f, n, "notification");
        return;
      }
      default:
        // Refusals the engine sent itself, acknowledgements of answers,
        // parked frames, frame errors: nothing to do but tell.
        if (item.refused !== undefined) {
          this.#logger.warn?.(`${item.type ?? item.method ?? item.route} refused by the engine: ${item.refused}`);
        } else if (item.route === "malformed" || item.route === "frameError") {
          this.#logger.warn?.(`${item.route}: ${item.error}`);
        } else if (item.route === "unmatchedResponse" && item.answerAck === undefined) {
          this.#logger.warn?.(`response to unknown request ${item.idText}`);
        } else if (item.answerAck === false) {
          this.#logger.warn?.(`the CLI did not accept an answer (${item.idText})`);
        }
    }
  }

  /** A wait the engine recorded: the session's handler of its kind answers, off the reading path. */
  #obligation(item, session, data) {
    const ob = item.obligation;
    // The awaited event's type or the request's method.
    const name = item.route === "event" ? item.event?.type : item.method;
    if (!session) {
      // A request naming no session is the client's to answer.
      const clientWide = item.route === "request" && item.session === null && isGenericKind(item.handler);
      const decide = clientWide
        ? () => decideRequest(this.#requestHandlers, name, data, undefined)
        : () => ({ refuse: "sessionGone" });
      queueMicrotask(() => this._discharge(ob, decide));
      return;
    }
    const sessionId = item.sessionId ?? data?.sessionId ?? session.id;
    queueMicrotask(() => this._discharge(ob, () => session._decide(item.handler, data, sessionId, name)));
  }

  #call(f, value, what) {
    try {
      const r = f(value);
      if (r && typeof r.then === "function") {
        r.then(noop, (e) => this.#logger.error?.(`a ${what} handler failed: ${errorText(e)}`));
      }
    } catch (e) {
      this.#logger.error?.(`a ${what} handler failed: ${errorText(e)}`);
    }
  }

  #disconnected() {
    return new DisconnectedError(this.#closeReason ?? "connection closed");
  }

  /** Ends the connection: every waiting call rejects, every session ends. */
  #shutDown(reason) {
    if (this.#closed) return;
    // Every request fails; every open wait is forgotten (no answer can
    // reach the CLI any more); a frame cut short is reported.
    try {
      this.#routeBatch(this.#core.disconnect());
    } catch {
      // Reporting a cut frame is all the batch holds.
    }
    this.#closed = true;
    this.#closeReason = reason || "connection closed";
    const error = this.#disconnected();
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    this.#timer = this.#timerAt = undefined;
    const pending = [...this.#pending.values()];
    this.#pending.clear();
    for (const entry of pending) entry.reject(error);
    const sessions = [...this.#sessions.values()];
    this.#sessions.clear();
    for (const s of sessions) s._end(this.#closeReason);
    for (const f of this.#listeners.disconnect) this.#call(f, this.#closeReason, "disconnect");
    for (const resolve of this.#closedWaiters.splice(0)) resolve(this.#closeReason);
  }
}

// ---------------------------------------------------------------------------
// Sessions

/** A queue that shifts in O(1). */
class Fifo {
  #items = [];
  #head = 0;
  get length() {
    return this.#items.length - this.#head;
  }
  push(x) {
    this.#items.push(x);
  }
  shift() {
    const x = this.#items[this.#head];
    this.#items[this.#head++] = undefined;
    if (this.#head > 1024 && this.#head * 2 > this.#items.length) {
      this.#items = this.#items.slice(this.#head);
      this.#head = 0;
    }
    return x;
  }
}

/** An async iterator's end of a subscription: never drops, unbounded. */
class EventIterator {
  #buffer = new Fifo();
  #waiting = null;
  #done = false;
  #unsubscribe;

  constructor(unsubscribe) {
    this.#unsubscribe = unsubscribe;
  }
  _push(event) {
    if (this.#waiting) {
      const resolve = this.#waiting;
      this.#waiting = null;
      resolve({ value: event, done: false });
    } else {
      this.#buffer.push(event);
    }
  }
  _end() {
    this.#done = true;
    if (this.#waiting && this.#buffer.length === 0) {
      const resolve = this.#waiting;
      this.#waiting = null;
      resolve({ value: undefined, done: true });
    }
  }
  next() {
    if (this.#buffer.length > 0) return Promise.resolve({ value: this.#buffer.shift(), done: false });
    if (this.#done) return Promise.resolve({ value: undefined, done: true });
    return new Promise((resolve) => {
      this.#waiting = resolve;
    });
  }
  return() {
    this.#unsubscribe();
    this.#done = true;
    this.#buffer = new Fifo();
    if (this.#waiting) {
      const resolve = this.#waiting;
      this.#waiting = null;
      resolve({ value: undefined, done: true });
    }
    return Promise.resolve({ value: undefined, done: true });
  }
  [Symbol.asyncIterator]() {
    return this;
  }
}

/**
 * An open session. Its events are delivered in order to every subscriber
 * (`on`, async iteration) in a microtask after they are read, never
 * dropped; the first subscriber also receives those that arrived before it.
 */
export class Session {
  #client;
  #tag;
  #id;
  #config;
  #tools;
  #transforms;
  #commands;
  #queue = [];
  #scheduled = false;
  #subscribers = [];
  #version = 0;
  #claimed = false;
  #kept = [];
  #delivered = 0;
  #notKept = 0;
  #ending = null;
  #ended = null;
  #active = false;
  #result;
  #rpc;

  /** @internal */
  constructor(client, tag, id, config) {
    this.#client = client;
    this.#tag = tag;
    this.#id = id;
    this.#config = config;
    this.#tools = new Map((config.tools ?? []).map((t) => [t.name, t]));
    this.#transforms = sectionTransforms(config);
    this.#commands = new Map((config.commands ?? []).map((c) => [c.name, c]));
  }

  /** The session id (for a server-assigned id: once the create answered). */
  get id() {
    return this.#id;
  }

  /** Where the CLI keeps this session's state, if it said. */
  get workspacePath() {
    return this.#result?.workspacePath;
  }

  /** The whole answer of `session.create` / `session.resume`. */
  get createResult() {
    return this.#result;
  }

  /** Whether the session is open (created and neither destroyed nor ended). */
  get active() {
    return this.#active && this.#ending === null;
  }

  /** @internal */
  get _tag() {
    return this.#tag;
  }

  /** @internal */
  _setId(id) {
    this.#id = id;
  }

  /** @internal */
  _opened(result) {
    this.#result = result;
    this.#active = this.#ending === null;
  }

  /**
   * Sends a prompt (a string, or `{ prompt, attachments?, mode? }`);
   * resolves with the message id. The turn's events follow.
   */
  async send(message, { timeoutMs } = {}) {
    if (this.#ending !== null) throw new DisconnectedError(`session ${this.#id} has ended: ${this.#ending}`);
    const params = typeof message === "string" ? { prompt: message } : { ...message };
    if (typeof params.prompt !== "string") throw new ConfigError("send needs a prompt string");
    params.sessionId = this.#id;
    const r = await this.#client._request("session.send", params, { timeoutMs });
    return r?.messageId;
  }

  /**
   * Sends a prompt and waits for `session.idle`. Resolves with the data of
   * the turn's last top-level `assistant.message` (undefined if none);
   * rejects with a SessionError if the turn had a `session.error`, a
   * TimeoutError after `timeoutMs` (default: the client's
   * `requestTimeoutMs`; it covers the whole call, the send included), or a
   * DisconnectedError if the session ends first.
   */
  sendAndWait(message, { timeoutMs = this.#client.requestTimeoutMs } = {}) {
    if (this.#ending !== null) {
      return Promise.reject(new DisconnectedError(`session ${this.#id} has ended: ${this.#ending}`));
    }
    return new Promise((resolve, reject) => {
      let last;
      let error;
      let timer;
      let settled = false;
      let unsubscribe = noop;
      const settle = (f, v) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        unsubscribe();
        f(v);
      };
      // Subscribed before sending, so nothing of the turn can be missed.
      unsubscribe = this.#subscribe({
        internal: true,
        type: "*",
        fn: (e) => {
          if (e.type === "assistant.message" && !e.data?.parentToolCallId) last = e.data;
          else if (e.type === "session.error") {
            error = new SessionError(e.data?.errorType, e.data?.message, e.data);
          } else if (e.type === "session.idle") {
            if (error) settle(reject, error);
            else settle(resolve, last);
          }
        },
        end: (reason) => settle(reject, new DisconnectedError(`the session ended before it was idle: ${reason}`)),
      });
      if (Number.isFinite(timeoutMs)) {
        timer = setTimeout(
          () => settle(reject, new TimeoutError(`the session was not idle within ${timeoutMs} ms`)),
          timeoutMs,
        );
      }
      this.send(message, { timeoutMs }).catch((e) => settle(reject, e));
    });
  }

  /** Aborts the running turn (harmless when idle). */
  async abort(reason, options) {
    const params = reason ? { sessionId: this.#id, reason } : { sessionId: this.#id };
    await this.#client._request("session.abort", params, options);
  }

  /** The session's persisted events (`session.getMessages`). */
  async getMessages(options) {
    const r = await this.#client._request("session.getMessages", { sessionId: this.#id }, options);
    return r?.events ?? [];
  }

  /**
   * Delivery counters: `events` delivered (or kept), `notKept` (events that
   * came while nobody had subscribed, past `MAX_KEPT_EVENTS`, and so are
   * not kept for a late first subscriber).
   */
  stats() {
    return { events: this.#delivered, notKept: this.#notKept };
  }

  /** Calls a session method this client does not wrap; `sessionId` is added. */
  call(method, params = {}, options) {
    return this.#client._request(method, { ...params, sessionId: this.#id }, options);
  }

  /** The CLI's session methods as calls, `sessionId` added: `session.rpc.model.switchTo({ modelId })`. */
  get rpc() {
    return (this.#rpc ??= rpcCalls(SESSION_METHODS, "session.", (method, params, options) =>
      this.call(method, params, options),
    ));
  }

  /**
   * Destroys the session in the CLI; its event delivery then ends (after
   * the events the CLI sends while destroying it, such as
   * `session.shutdown`). The CLI's answer is awaited for `timeoutMs` at
   * most (default: the client's `shutdownGraceMs`); the session is released
   * then, answered or not.
   */
  async destroy({ timeoutMs = this.#client.shutdownGraceMs } = {}) {
    if (this.#ending !== null) return;
    this.#client._closeSession(this.#tag);
    try {
      await this.#client._request("session.destroy", { sessionId: this.#id }, { timeoutMs });
    } finally {
      this.#client._releaseSession(this.#tag, "destroyed");
    }
  }

  /**
   * Calls `handler(event)` for every event of `type` ("*" or omitted: all).
   * Returns a function that unsubscribes.
   */
  on(type, handler) {
    if (typeof type === "function") [type, handler] = ["*", type];
    if (typeof handler !== "function") throw new TypeError("on(type, handler): the handler is not a function");
    return this.#subscribe({ type: type ?? "*", fn: handler });
  }

  /** An async iterator over the events; it ends when the session ends. */
  events() {
    let unsubscribe = noop;
    const iterator = new EventIterator(() => unsubscribe());
    unsubscribe = this.#subscribe({ type: "*", iterator });
    return iterator;
  }

  [Symbol.asyncIterator]() {
    return this.events();
  }

  #subscribe(sub) {
    sub.owed = [];
    if (!sub.internal && !this.#claimed) {
      this.#claimed = true;
      sub.owed = this.#kept;
      this.#kept = [];
    }
    if (this.#ended !== null) {
      // Nothing more will come: what was owed, then the end.
      for (const e of sub.owed) this.#deliverTo(sub, e);
      this.#endSubscriber(sub, this.#ended);
      return noop;
    }
    this.#subscribers.push(sub);
    this.#version++;
    if (sub.owed.length > 0) this.#schedule();
    return () => {
      sub.removed = true;
      const i = this.#subscribers.indexOf(sub);
      if (i >= 0) {
        this.#subscribers.splice(i, 1);
        this.#version++;
      }
    };
  }

  #schedule() {
    if (!this.#scheduled) {
      this.#scheduled = true;
      queueMicrotask(() => this.#drain());
    }
  }

  /** @internal Called as an event is routed: queue it, deliver soon. */
  _push(event) {
    this.#queue.push(event);
    this.#schedule();
  }

  /** @internal The session ended: deliver what is queued, then end streams. */
  _end(reason) {
    if (this.#ending !== null) return;
    this.#ending = reason;
    this.#active = false;
    this.#schedule();
  }

  #drain() {
    this.#scheduled = false;
    const queue = this.#queue;
    this.#queue = [];
    let version = -1;
    let subs;
    for (let q = 0; q <= queue.length; q++) {
      if (version !== this.#version) {
        // Subscribers changed (or this is the start): a newcomer gets what
        // it is owed before anything newer.
        version = this.#version;
        subs = this.#subscribers.slice();
        for (const sub of subs) {
          if (sub.owed.length > 0) {
            const owed = sub.owed;
            sub.owed = [];
            for (const e of owed) this.#deliverTo(sub, e);
          }
        }
      }
      if (q === queue.length) break;
      const e = queue[q];
      this.#delivered++;
      if (!this.#claimed) {
        if (this.#kept.length < MAX_KEPT_EVENTS) this.#kept.push(e);
        else {
          if (this.#notKept === 0) {
            this.#client._logger.warn?.(
              `session ${this.#id}: nobody has subscribed and ${MAX_KEPT_EVENTS} events are kept; later ones are not kept for a first subscriber (counted in stats())`,
            );
          }
          this.#notKept++;
        }
      }
      for (let i = 0; i < subs.length; i++) {
        if (!subs[i].removed) this.#deliverTo(subs[i], e);
      }
    }
    if (this.#ending !== null && this.#ended === null && this.#queue.length === 0) {
      this.#ended = this.#ending;
      const ending = this.#subscribers;
      this.#subscribers = [];
      this.#version++;
      for (const sub of ending) this.#endSubscriber(sub, this.#ended);
    }
  }

  #deliverTo(sub, e) {
    if (sub.type !== "*" && sub.type !== e.type) return;
    if (sub.iterator) {
      sub.iterator._push(e);
      return;
    }
    try {
      const r = sub.fn(e);
      if (r && typeof r.then === "function") {
        r.then(noop, (err) => this.#client._logger.error?.(`an event handler failed on ${e.type}: ${errorText(err)}`));
      }
    } catch (err) {
      this.#client._logger.error?.(`an event handler failed on ${e.type}: ${errorText(err)}`);
    }
  }

  #endSubscriber(sub, reason) {
    if (sub.iterator) sub.iterator._end();
    else sub.end?.(reason);
  }

  // -------------------------------------------------------------------------
  // Answers to what the agent waits on. The engine says which handler kind
  // answers; this only calls the user's handler and shapes its answer.

  /**
   * @internal Resolves to `{ answer }` (the payload the engine sends) or
   * `{ refuse: cause }`; a throwing handler is reported by the caller as
   * `handlerFailed`.
   */
  async _decide(kind, data, sessionId, name) {
    const c = this.#config;
    const readable = isObject(data);
    switch (kind) {
      case "permission": {
        if (!c.onPermission) return NO_HANDLER;
        if (!readable || !isObject(data.permissionRequest)) return UNREADABLE;
        const given = await c.onPermission({
          sessionId,
          requestId: data.requestId,
          kind: data.permissionRequest.kind,
          toolCallId: data.permissionRequest.toolCallId,
          permissionRequest: data.permissionRequest,
          data,
        });
        const attributed = given?.kind === "attributed";
        const decision = permissionDecision(attributed ? given.result : given);
        // No result: the prompt is left to another client of the session.
        if (decision?.kind === "no-result") return DECLINE;
        if (decision && attributed && isObject(given.decisionContext)) {
          return { answer: decision, siblings: { decisionContext: given.decisionContext } };
        }
        if (decision) return { answer: decision };
        this.#client._logger.error?.("the permission handler returned no decision; the agent gets the refusal");
        return FAILED;
      }
      case "tool": {
        if (!readable || typeof data.toolName !== "string") return UNREADABLE;
        const tool = this.#tools.get(data.toolName);
        if (!tool) return NO_HANDLER;
        const invocation = {
          sessionId,
          toolCallId: data.toolCallId,
          toolName: data.toolName,
          arguments: data.arguments ?? null,
          workingDirectory: data.workingDirectory,
        };
        // A throw is a failed handler: the engine's tool failure goes.
        return { answer: toolResult(await tool.handler(invocation.arguments, invocation)) };
      }
      case "userInput": {
        if (!c.onUserInput) return NO_HANDLER;
        if (!readable || typeof data.question !== "string") return UNREADABLE;
        let answer = await c.onUserInput({
          sessionId,
          question: data.question,
          choices: Array.isArray(data.choices) ? data.choices : [],
          allowFreeform: data.allowFreeform,
        });
        if (typeof answer === "string") answer = { answer, wasFreeform: true };
        if (!answer || typeof answer.answer !== "string") return NO_HANDLER;
        return { answer: { answer: answer.answer, wasFreeform: Boolean(answer.wasFreeform) } };
      }
      case "elicitation": {
        if (!c.onElicitation) return NO_HANDLER;
        if (!readable || typeof data.message !== "string") return UNREADABLE;
        let r = await c.onElicitation({ ...data, sessionId });
        if (typeof r === "string") r = { action: r };
        if (r?.action === "accept") return { answer: { action: "accept", content: r.content ?? {} } };
        if (r?.action === "decline" || r?.action === "cancel") return { answer: { action: r.action } };
        return FAILED;
      }
      case "mcpOAuth": {
        if (!c.onMcpOAuth) return NO_HANDLER;
        if (!readable || typeof data.serverName !== "string" || typeof data.serverUrl !== "string") return UNREADABLE;
        let t = await c.onMcpOAuth({ ...data, sessionId });
        if (t === null || t === undefined) return { answer: { kind: "cancelled" } };
        if (typeof t === "string") t = { accessToken: t };
        if (typeof t?.accessToken !== "string") return FAILED;
        const answer = { kind: "token", accessToken: t.accessToken };
        if (t.tokenType !== undefined) answer.tokenType = t.tokenType;
        if (t.expiresIn !== undefined) answer.expiresIn = t.expiresIn;
        return { answer };
      }
      case "exitPlanMode": {
        if (!c.onExitPlanMode) return NO_HANDLER;
        if (!readable) return UNREADABLE;
        let r = await c.onExitPlanMode({
          sessionId,
          summary: typeof data.summary === "string" ? data.summary : "",
          planContent: typeof data.planContent === "string" ? data.planContent : "",
          actions: Array.isArray(data.actions) ? data.actions : [],
          recommendedAction: data.recommendedAction,
        });
        if (typeof r === "boolean") r = { approved: r };
        if (typeof r?.approved !== "boolean") return FAILED;
        const answer = { approved: r.approved };
        if (r.selectedAction !== undefined) answer.selectedAction = r.selectedAction;
        if (r.feedback !== undefined) answer.feedback = r.feedback;
        return { answer };
      }
      case "command": {
        if (!readable || typeof data.commandName !== "string") return UNREADABLE;
        const command = this.#commands.get(data.commandName);
        if (!command) return NO_HANDLER;
        const r = await command.handler({
          sessionId,
          command: data.command,
          commandName: data.commandName,
          args: data.args,
        });
        // Nothing: done; a string: the error the user sees.
        return { answer: typeof r === "string" ? r : null };
      }
      case "systemMessageTransform": {
        if (this.#transforms.size === 0) return NO_HANDLER;
        if (!readable || !isObject(data.sections)) return UNREADABLE;
        const sections = {};
        for (const [id, section] of Object.entries(data.sections)) {
          const content = typeof section?.content === "string" ? section.content : "";
          const transform = this.#transforms.get(id);
          let text = content;
          if (transform) {
            try {
              const r = await transform(content);
              if (typeof r === "string") text = r;
            } catch (e) {
              // A transform that fails keeps the section's text.
              this.#client._logger.error?.(`the transform of section ${id} failed: ${errorText(e)}`);
            }
          }
          sections[id] = { content: text };
        }
        return { answer: { sections } };
      }
      case "providerToken": {
        const callback = c.provider?.bearerTokenProvider;
        if (!callback) return NO_HANDLER;
        if (!readable || typeof data.providerName !== "string") return UNREADABLE;
        // One callback: the session's single provider, named `default`.
        if (data.providerName !== "default") return NO_HANDLER;
        const token = await callback({ providerName: data.providerName, sessionId });
        if (typeof token !== "string") return FAILED;
        return { answer: { token } };
      }
      case "hooks":
        return decideHook(c.hooks, data, sessionId);
      default:
        if (isGenericKind(kind)) return decideRequest(c.requestHandlers, name, data, sessionId);
        return NO_HANDLER;
    }
  }
}

const DECLINE = Object.freeze({ decline: true });
const NO_HANDLER = Object.freeze({ refuse: "noHandler" });
const FAILED = Object.freeze({ refuse: "handlerFailed" });
const UNREADABLE = Object.freeze({ refuse: "unreadable" });

/** A permission handler that approves every prompt once. */
export function approveAll() {
  return { kind: "approve-once" };
}
