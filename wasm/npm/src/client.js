// The client of copilot-wasm, shared by the browser and Node entry points:
// one connection to a Copilot CLI. It holds no protocol policy: the driver
// feeds every incoming byte to the engine, which routes it and decides what
// must be answered and how. Here: the factories and the handshake, the
// client-wide calls, opening sessions (reserved in the engine first),
// delivering routes to sessions and listeners, and stopping (its steps in
// stop.js); a lost connection is recovered by recovery.js.
//
// Nothing here imports Node modules; the Node entry point (node.js) adds
// spawning the CLI and TCP on top.

import {
  DEFAULT_REQUEST_TIMEOUT_MS,
  DEFAULT_SHUTDOWN_GRACE_MS,
  DEFAULT_STARTUP_MS,
  POLICY,
} from "./constants.js";
import { callListener, ConfigError, CopilotError, DisconnectedError, RpcError, errorText } from "./errors.js";
import { checkConfig, checkConnectOptions, factoryOptions, handlerKindsOf, sessionParams, sortedMembers } from "./config.js";
import { CLIENT_HANDLER_OPTIONS } from "./config.js";
import { checkHooks, checkRequestHandlers } from "./hooks.js";
import { checkTools, configForMode, patchOptions } from "./modes.js";
import { loadWasm } from "./wasm.js";
import { streamTransport } from "./transport.js";
import { Driver } from "./driver.js";
import { answerWait } from "./answering.js";
import { checkRequestHandler, InferenceProvider, takeInference } from "./inference.js";
import { Recovery, reopenedBy } from "./recovery.js";
import { runStop } from "./stop.js";
import { Session } from "./session.js";
import { traceContext } from "./telemetry.js";
import { rpcCalls, SERVER_METHODS } from "./generated/rpc.js";

/**
 * A connection to one Copilot CLI. Make one with `CopilotClient.start`,
 * `CopilotClient.connect` (Node) or `CopilotClient.fromStreams`.
 */
export class CopilotClient {
  /** The engine, the stream, the calls awaiting answers, the timer. */
  #driver;
  #logger;
  /** Tag -> Session, for every session reserved in the core. */
  #sessions = new Map();
  #nextTag = 1;
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
  /** The inference request handler's provider (inference.js), if one is set. */
  #inference;
  #traceContext;
  #rpc;
  /** How sessions default what the application leaves unset (modes.js). */
  #mode;
  #recovery;
  /** Session -> `{ config, kinds }` it was opened with, to resume it after a recovery. */
  #reopens = new WeakMap();

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
      requestHandler,
      onGetTraceContext,
      mode,
      reconnect,
      token,
      connectionToken,
      startupTimeoutMs = DEFAULT_STARTUP_MS,
    } = {},
  ) {
    this.#driver = new Driver(transport, {
      maxFrameBytes,
      handlerTimeoutMs,
      logger: logger ?? {},
      onRoute: (item) => this.#route(item),
      onEvent: (tag, event, bytes) => this.#sessions.get(tag)?._push(event, bytes),
      onCoreFailed: (reason) => this.#shutDown(reason),
    });
    this.#logger = logger ?? {};
    this.#process = process;
    this.#address = address;
    this.#requestTimeoutMs = requestTimeoutMs ?? DEFAULT_REQUEST_TIMEOUT_MS;
    this.#shutdownGraceMs = shutdownGraceMs ?? DEFAULT_SHUTDOWN_GRACE_MS;
    this.#requestHandlers = { ...requestHandlers };
    const timeoutMs = this.#requestTimeoutMs;
    this.#inference = requestHandler && new InferenceProvider(requestHandler, { driver: this.#driver, logger: this.#logger, timeoutMs });
    this.#traceContext = onGetTraceContext;
    this.#mode = mode ?? POLICY.modes.names[0];
    const driver = this.#driver;
    const onEnd = (reason) => this.#onTransportEnd(reason);
    this.#recovery = new Recovery({
      driver,
      logger: this.#logger,
      timeoutMs: this.#requestTimeoutMs,
      reconnect,
      stopping: () => this.#stopping !== undefined || driver.closed,
      replaced: ({ process, address }) => {
        // The CLI that exited may have left what it started: its group goes.
        if (process !== undefined && this.#process !== process) this.#process?.kill();
        if (process !== undefined) this.#process = process;
        if (address !== undefined) this.#address = address;
      },
      onEnd,
      handshake: () => this.#handshake(token ?? connectionToken, startupTimeoutMs),
      sessions: () =>
        [...this.#sessions.values()].flatMap((s) => (this.#reopens.has(s) ? [{ session: s, ...this.#reopens.get(s) }] : [])),
      end: (tag, reason) => this._releaseSession(tag, reason),
      shutDown: (reason) => this.#shutDown(reason),
    });
    driver.start(onEnd);
  }

  /**
   * The stream ended: a CLI this client started is asked why (its exit);
   * unless the client is stopping, a recovery makes the connection again
   * (Node's `autoRestart`: the CLI started again, or the server connected
   * to again; a dropped WebSocket opened again, `autoReconnect`), else the
   * connection ends.
   */
  #onTransportEnd(reason) {
    if (this.#driver.closed) return;
    // An attempt's connection went too: the recovery sees its calls fail.
    if (this.#recovery.running) return this.#driver.lose(reason);
    if (this.#stopping) return this.#shutDown("the client was stopped");
    const lost = (cause) =>
      this.#recovery.enabled && !this.#stopping ? this.#recovery.run(cause) : this.#shutDown(cause);
    const process = this.#process;
    if (!process) return lost(reason);
    process.describeExit().then(
      (exit) => lost(exit ?? reason),
      () => lost(reason),
    );
  }

  /** The client's mode: "copilot-cli" or "empty". */
  get mode() {
    return this.#mode;
  }

  /**
   * Calls `listener` with each step of the recoveries to come (Node's
   * `autoRestart`, a WebSocket's `autoReconnect`): `{type: "connectionLost", cause}`, `{type:
   * "restarting", attempt, afterMs}`, `{type: "attemptFailed", attempt,
   * error}`, `{type: "sessionResumed", sessionId}`, `{type: "recovered",
   * sessions, tookMs}`, `{type: "gaveUp", cause}`. Returns a function that
   * removes it.
   */
  onRecovery(listener) {
    return this.#recovery.on(listener);
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
    checkConnectOptions(options, POLICY.launch);
    const common = factoryOptions(options, POLICY.modes);
    await loadWasm();
    const transport = streamTransport(readable, writable, { label: options.label ?? "stream" });
    return this._handshaken(transport, { ...common, token: options.token ?? options.connectionToken });
  }

  /**
   * Connects through a WebSocket to a copilot-bridge (`ws://HOST:PORT/ws`),
   * presenting `token` as the subprotocol `copilot.token.<TOKEN>`. Same
   * client as `fromStreams`; stop() closes the socket (and the bridge ends
   * its CLI). A socket that drops while the client did not end it is opened
   * again and the sessions resumed (`autoReconnect`, default true; the
   * steps go to `onRecovery`). See websocket.js.
   */
  static async connectWebSocket(url, options = {}) {
    checkConnectOptions(options, POLICY.launch);
    const common = factoryOptions(options, POLICY.modes);
    await loadWasm();
    const { webSocketTransport } = await import("./websocket.js");
    const open = () => webSocketTransport(url, options, POLICY.bridgeTokenProtocolPrefix);
    const transport = await open();
    // A dropped socket is opened again, with the same token (recovery.js).
    const reconnect = options.autoReconnect === false ? undefined : reopenedBy("websocket", open);
    return this._handshaken(transport, { ...common, token: options.connectionToken, reconnect });
  }

  /** @internal Builds a client on `transport` and runs the handshake. */
  static async _handshaken(transport, options = {}) {
    await loadWasm();
    checkRequestHandlers(options.requestHandlers, (message) => new ConfigError(message));
    checkRequestHandler(options.requestHandler, (message) => new ConfigError(message));
    const client = new this(transport, options);
    try {
      await client.#handshake(options.token ?? options.connectionToken, options.startupTimeoutMs ?? DEFAULT_STARTUP_MS);
    } catch (e) {
      client.forceStop();
      throw e;
    }
    return client;
  }

  /** @internal The caller's trace context, for an open or a send (telemetry.js). */
  _traceContext = () => traceContext(this.#traceContext, this.#logger);

  /** Node only: see the Node entry point. */
  static async start() {
    throw new CopilotError("CopilotClient.start needs Node.js; in a browser use CopilotClient.fromStreams");
  }

  /** Node only: see the Node entry point. */
  static async connect() {
    throw new CopilotError("CopilotClient.connect needs Node.js; in a browser use CopilotClient.fromStreams");
  }

  /** The core's handshake (`Driver.handshake`). */
  async #handshake(token, timeoutMs) {
    this.#serverInfo = await this.#driver.handshake(token, timeoutMs);
    // Again after a recovery: the new CLI knows no provider.
    await this.#inference?.register();
  }

  /** What the handshake learned: `{ protocolVersion, version }`. */
  get serverInfo() {
    return { ...this.#serverInfo };
  }

  /** For a TCP connection: `{ host, port }` of the CLI. */
  get address() {
    return this.#address ? { ...this.#address } : undefined;
  }

  /** The process id of a CLI this client started (the one running now, after a recovery). */
  get pid() {
    return this.#process?.pid;
  }

  /** Whether the connection has ended. */
  get closed() {
    return this.#driver.closed;
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
    // Which session and why, as the official SDKs say it.
    if (r?.success === false) {
      throw new RpcError("session.delete", 0, `failed to delete session ${sessionId}: ${r.error ?? "the CLI gave no reason"}`);
    }
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
      ...this.#driver.stats(),
      sessions: this.#sessions.size,
    };
  }

  /** The events read and not yet taken by async iterators, and the pauses over them (`Driver.backlog`). */
  backlog() {
    return this.#driver.backlogStats();
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
    checkTools(config, this.#mode, POLICY.options, POLICY.modes);
    if (this.#driver.closed) throw this.#driver.disconnected();
    const serverAssigned = Boolean(config.serverAssignedId) && resumeId == null;
    const id = serverAssigned ? null : (resumeId ?? config.sessionId ?? crypto.randomUUID());
    const kinds = handlerKindsOf(config);
    // The engine adds which waits the session answers, and the defaults.
    let params;
    try {
      const moded = configForMode(config, this.#mode, POLICY.modes, POLICY.config);
      const options = JSON.stringify(sessionParams(moded, id, resumeId != null, POLICY.options, POLICY.config));
      // Members in the order the Rust host sends them: the same bytes.
      const opened = JSON.parse(this.#driver.openParams(options, kinds.join(",")));
      params = sortedMembers({ ...opened, ...(await this._traceContext()) });
    } catch (e) {
      throw new ConfigError(`cannot open session ${id ?? "(server-assigned)"}: ${errorText(e)}`);
    }
    const tag = this.#allocateTag();
    const session = new Session(this, tag, id, config);
    let previous;
    try {
      previous = this.#driver.reserve(id, tag, resumeId != null);
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
        opened = this.#driver.completeOpen(tag, ok, ok ? JSON.stringify(item.result ?? null) : String(item.message));
      } catch (e) {
        throw new DisconnectedError(`session ${id ?? "(server-assigned)"} was released: ${errorText(e)}`);
      }
      if (opened.opened && serverAssigned) session._setId(item.result.sessionId);
      if (opened.opened) session._answered(item.result);
      if (!opened.opened) {
        this.#sessions.delete(tag);
        session._end(`${method} failed: ${opened.error}`);
      }
      this.#driver.routeItems(opened.routes);
      if (!opened.opened && ok) throw new CopilotError(`${method}: ${opened.error}`);
    };
    let result;
    try {
      result = await this._request(method, params, { onResponse });
    } catch (e) {
      this._releaseSession(tag, `${method} failed`);
      throw e;
    }
    // The core's requests after an open, each answered before the session
    // is handed over: the CLI asks some waits (mcp.oauth_required) only of
    // a client that registered interest in them.
    for (const followUp of POLICY.followUps) {
      if (!kinds.includes(followUp.handler)) continue;
      try {
        await this._request(followUp.method, { sessionId: session.id, eventType: followUp.eventType });
      } catch (e) {
        this._releaseSession(tag, `${followUp.method} failed`);
        throw e;
      }
    }
    // The options the CLI takes only once the session is open (modes.js).
    await patchOptions(session, config, this.#mode, POLICY.modes, (method, params) => this._request(method, params));
    session._opened(result);
    // A recovery resumes it with the mode's config, and patches it again.
    this.#reopens.set(session, {
      config: configForMode(config, this.#mode, POLICY.modes, POLICY.config),
      kinds,
      patch: () => patchOptions(session, config, this.#mode, POLICY.modes, (method, params) => this._request(method, params)),
    });
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
    await runStop(graceMs, {
      process: () => this.#process,
      sessions: () => [...this.#sessions.values()],
      driver: this.#driver,
      logger: this.#logger,
      release: (tag, reason) => this._releaseSession(tag, reason),
      request: (method, params, options) => this._request(method, params, options),
      shutDown: (reason) => this.#shutDown(reason),
    });
  }

  /** Stops at once: kills a CLI this client started and closes the connection. */
  forceStop() {
    this.#stopping ??= Promise.resolve();
    this.#process?.kill();
    this.#driver.closeWriter();
    this.#driver.stopReading();
    this.#shutDown("the client was stopped");
  }

  /**
   * Resolves when the connection has ended, with the reason: the CLI's exit
   * (status or signal, and the end of its stderr), the stream's end or
   * failure, or this client stopping it.
   */
  closedPromise() {
    if (this.#driver.closed) return Promise.resolve(this.#driver.closeReason);
    return new Promise((resolve) => this.#closedWaiters.push(resolve));
  }

  // -------------------------------------------------------------------------
  // Internal API, used by sessions.

  /** @internal Sends a request; resolves with its result. */
  _request(method, params, { timeoutMs = this.#requestTimeoutMs, onResponse } = {}) {
    return this.#driver.request(method, params, timeoutMs, onResponse);
  }

  /** @internal Marks a session closing (its destroy is in flight). */
  _closeSession(tag) {
    try {
      this.#driver.closeSession(tag);
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
    if (this.#driver.closed) return;
    // Its open waits are refused by the engine; frames parked for no
    // session any more come back.
    this.#driver.releaseSession(tag);
  }

  /** @internal */
  get _logger() {
    return this.#logger;
  }

  /** @internal Bytes of events an iterator holds (`added`) or gave out (`taken`): `Driver.backlog`. */
  _backlog = (added, taken) => this.#driver.backlog(added, taken);

  // -------------------------------------------------------------------------
  // Routes the driver hands over: to sessions, listeners and handlers.

  /** Does what one route says. Never waits on user code. */
  #route(item) {
    switch (item.route) {
      case "event": {
        const session = this.#sessions.get(item.session);
        // A listed wait is answered, not delivered: the CLI sent no event.
        if (!item.listed) session?._push(item.event, item.bytes);
        if (item.obligation !== undefined) this.#answer(item, session, item.event?.data);
        return;
      }
      case "request":
        if (item.obligation !== undefined) {
          const session = item.session === null ? undefined : this.#sessions.get(item.session);
          this.#answer(item, session, item.params);
        }
        return;
      case "lifecycle":
        for (const f of this.#listeners.lifecycle) callListener(this.#logger, f, item.params, "lifecycle");
        return;
      case "notification": {
        const sessionId = item.session === null ? undefined : this.#sessions.get(item.session)?.id;
        const n = { method: item.method, params: item.params, sessionId };
        for (const f of this.#listeners.notification) callListener(this.#logger, f, n, "notification");
        return;
      }
    }
  }

  /** A wait the engine recorded: answered off the reading path (answering.js). */
  #answer(item, session, data) {
    const inference = item.handler === CLIENT_HANDLER_OPTIONS.requestHandler;
    if (inference) return takeInference(this.#inference, item, data, this.#driver, this.#logger);
    answerWait(item, session, data, {
      driver: this.#driver,
      logger: this.#logger,
      requestHandlers: this.#requestHandlers,
    });
  }

  /** Ends the connection: every waiting call rejects, every session ends. */
  #shutDown(reason) {
    this.#recovery.stop();
    if (!this.#driver.shutDown(reason)) return;
    const closeReason = this.#driver.closeReason;
    const sessions = [...this.#sessions.values()];
    this.#sessions.clear();
    for (const s of sessions) s._end(closeReason);
    this.#inference?.connectionEnded();
    for (const f of this.#listeners.disconnect) callListener(this.#logger, f, closeReason, "disconnect");
    for (const resolve of this.#closedWaiters.splice(0)) resolve(closeReason);
  }
}
