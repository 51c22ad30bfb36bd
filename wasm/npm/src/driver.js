// One connection's driver: the engine (framing, routing, deadlines: all
// decided in the core), the byte stream under it, the calls waiting for
// their answers, and the one timer at the engine's next deadline. Every
// byte read goes to the engine (`CoreEngine.feed`); what the engine decides
// to send is written; answers settle their calls; every other route goes to
// the driver's owner (the client). It knows no sessions and no user code.

import { CoreEngine } from "../dist/copilot_wasm.js";
import { BACKLOG_STALL_MS, DEFAULT_HANDLER_TIMEOUT_MS, POLICY, PROTOCOL_VERSION } from "./constants.js";
import { CopilotError, DisconnectedError, ProtocolVersionError, RpcError, TimeoutError, errorText } from "./errors.js";

/** `CoreEngine.recover`'s reports by name, and its steps' names by number. */
const { reports: RECOVER_REPORTS, steps: RECOVER_STEPS } = POLICY.recovery;

/** The engine's clock, in milliseconds. */
const now = () => performance.now();

/** `CoreEngine.backlog`'s answers that are not a time to pause until. */
const BACKLOG_READ = -1;
const BACKLOG_OVERRUN = -2;

/** `CoreEngine.feed`'s mark of an item that is a routed item's JSON, not a plain event. */
const ITEM_JSON = 0xffff_ffff;

/** UTF-8 to text, for the routed texts `CoreEngine.feed` gives back. */
const utf8 = new TextDecoder();

/** Drives one connection: see the top of this file. */
export class Driver {
  #core;
  #transport;
  #logger;
  /** Routes of events, requests, lifecycle and notifications: the owner's. */
  #onRoute;
  /** Plain events (nothing to answer): the owner's, as `(tag, event, bytes)`. */
  #onEvent;
  /** The engine failed: the owner ends the connection (`shutDown`). */
  #onCoreFailed;
  /** Request id -> `{ method, timeoutMs, resolve, reject, onResponse }`. */
  #pending = new Map();
  /** The one timer, armed at the engine's `poll_timeout()`, and when it fires. */
  #timer;
  #timerAt;
  #closed = false;
  #closeReason = null;
  /** While a lost connection is recovered and no new stream is in: why it was lost. */
  #lost = null;
  /** Reading is paused over a full backlog (`backlog`). */
  #readPaused = false;
  /** The timer that asks the engine again at the backlog's stall. */
  #stallTimer;

  /**
   * `handlerTimeoutMs`: the engine's handler deadline (an infinite one
   * means none). `onRoute(item)` gets every route that is not an answer to
   * a call of this driver, as the engine routes it, but the plain events
   * read from the stream (nothing to answer): those go to
   * `onEvent(tag, event, bytes)`, with the session's tag and the event's
   * size; `onCoreFailed(reason)` is called if the engine cannot go on (the
   * owner ends the connection).
   */
  constructor(transport, { maxFrameBytes, handlerTimeoutMs, logger, onRoute, onEvent, onCoreFailed }) {
    const handlerMs = handlerTimeoutMs ?? DEFAULT_HANDLER_TIMEOUT_MS;
    // The engine's handler deadline: 0 (or an infinite one) means none.
    // Every call is given its own deadline (`encode_request`).
    this.#core = new CoreEngine(maxFrameBytes, Number.isFinite(handlerMs) ? Math.max(1, handlerMs) : 0, undefined);
    this.#transport = transport;
    this.#logger = logger;
    this.#onRoute = onRoute;
    this.#onEvent = onEvent;
    this.#onCoreFailed = onCoreFailed;
  }

  /** Starts reading; `onEnd(reason)` is called once when the stream ends. */
  start(onEnd) {
    const transport = this.#transport;
    // What a stream replaced by a recovery says is the old connection's.
    const current = () => this.#transport === transport;
    transport.start(
      (bytes) => current() && this.#onData(bytes),
      (reason) => current() && onEnd(reason),
    );
  }

  /**
   * The stream ended and another will follow (or an attempt to recover
   * failed): the engine forgets what the next cannot settle and holds its
   * frames (`CoreEngine.recover`), every call in flight fails with
   * `reason`, and so does every call until `attach` gives a new stream.
   */
  lose(reason) {
    if (this.#closed) return;
    const [forgotten] = this.#core.recover(RECOVER_REPORTS.indexOf("lost"), "", now());
    if (forgotten > 0) this.#logger.warn?.(`${forgotten} requests of the CLI died with the connection`);
    this.#lost = `${reason} (the connection is being recovered)`;
    const error = new DisconnectedError(this.#lost);
    const pending = [...this.#pending.values()];
    this.#pending.clear();
    for (const entry of pending) entry.reject(error);
  }

  /**
   * The recovery's next step, as the core sequences it (`CoreEngine.recover`),
   * given how the step before went (`report`: a name of
   * `POLICY.recovery.reports`; with `"log"` and `"logMore"`, `events`, the
   * log read so far, oldest first): `[step, a, b, c]`, `step` a name of
   * `POLICY.recovery.steps` and a session's tag in `a`. Once it is over
   * (`"recovered"`), the frames the engine held go out.
   */
  recoverStep(report, events = []) {
    const [step, ...args] = this.#core.recover(RECOVER_REPORTS.indexOf(report), idLines(events), now());
    const name = RECOVER_STEPS[step];
    if (name === "recovered") this.flush();
    return [name, ...args];
  }

  /** Reads and writes `transport` from now on (a recovery's); `onEnd` as `start`'s. */
  attach(transport, onEnd) {
    this.#transport = transport;
    this.#lost = null;
    // A new stream reads until the backlog is asked again.
    this.#readPaused = false;
    this.start(onEnd);
  }

  /**
   * Events handed to subscribers that have not taken them (the async
   * iterators count theirs): `added` bytes more, `taken` fewer. Then
   * reading pauses or goes on as the engine rules (`CoreEngine.backlog`):
   * over `MAX_BACKLOG_BYTES` it pauses until half has been taken, a request
   * is made (it reads on while one waits, and while a lost connection is
   * recovered), or nothing was taken for `BACKLOG_STALL_MS`. A transport
   * without `pause` (a WebSocket) reads on.
   */
  backlog(added = 0, taken = 0) {
    if (this.#closed) return;
    const gate = this.#core.backlog(added, taken, now());
    if (gate === BACKLOG_READ || gate === BACKLOG_OVERRUN) {
      if (gate === BACKLOG_OVERRUN) {
        this.#logger.warn?.(
          `${this.#transport.label}: ${this.backlogStats().bytes} bytes of events wait for subscribers and none was taken for ${BACKLOG_STALL_MS} ms (an iterator kept and not read?): reading on`,
        );
      }
      if (this.#readPaused) {
        this.#readPaused = false;
        this.#transport.resume?.();
      }
      return;
    }
    if (!this.#readPaused) {
      this.#readPaused = true;
      this.#transport.pause?.();
    }
    // One timer: firing before a later stall only asks again.
    this.#stallTimer ??= setTimeout(
      () => {
        this.#stallTimer = undefined;
        this.backlog();
      },
      Math.max(0, Math.ceil(gate - now())),
    );
  }

  /**
   * The core's handshake (`POLICY.handshake`): `connect`, or `ping` where
   * it is unknown. Resolves with `{ protocolVersion, version }`.
   */
  async handshake(token, timeoutMs) {
    const handshake = POLICY.handshake;
    const params = structuredClone(handshake.params);
    if (token != null) params[handshake.tokenParam] = token;
    let version, serverVersion;
    try {
      const r = await this.request(handshake.connect, params, timeoutMs);
      version = r?.protocolVersion;
      serverVersion = r?.version;
    } catch (e) {
      if (!(e instanceof RpcError && e.code === handshake.pingOn)) throw e;
      const pong = await this.request(handshake.ping, {}, timeoutMs);
      version = pong?.protocolVersion;
    }
    if (version !== PROTOCOL_VERSION) throw new ProtocolVersionError(version, PROTOCOL_VERSION);
    return { protocolVersion: version, version: serverVersion };
  }

  /** Whether the connection has ended. */
  get closed() {
    return this.#closed;
  }

  /** Why the connection ended (null while open). */
  get closeReason() {
    return this.#closeReason;
  }

  /** The error of a call made after the end. */
  disconnected() {
    return new DisconnectedError(this.#closeReason ?? "connection closed");
  }

  /** The engine's counters, with the calls open. */
  stats() {
    const { backlogBytes, backlogPeakBytes, backlogPauses, backlogOverruns, ...stats } = this.#numbers();
    if (Number.isNaN(stats.oldestObligationAge)) stats.oldestObligationAge = null;
    return { ...stats, pendingRequests: this.#pending.size };
  }

  /** The backlog's figures: `{ bytes, peakBytes, pauses, overruns }`. */
  backlogStats() {
    const n = this.#numbers();
    return { bytes: n.backlogBytes, peakBytes: n.backlogPeakBytes, pauses: n.backlogPauses, overruns: n.backlogOverruns };
  }

  /** The engine's numbers, named by the policy in its order. */
  #numbers() {
    const numbers = this.#core.stats(now());
    const { counters, causes } = POLICY.stats;
    const named = Object.fromEntries(counters.map((name, i) => [name, numbers[i]]));
    named.refused = Object.fromEntries(causes.map((cause, i) => [cause, numbers[counters.length + i]]));
    return named;
  }

  /**
   * Sends a request; resolves with its result. `onResponse(item)` runs as
   * the answer is routed, before any later frame; a throw rejects the call.
   */
  request(method, params, timeoutMs, onResponse) {
    if (this.#closed) return Promise.reject(this.disconnected());
    if (this.#lost !== null) return Promise.reject(new DisconnectedError(this.#lost));
    let id;
    try {
      // The deadline is the engine's: the timer below wakes it. The
      // request goes to the outbox, sent by flush.
      const deadline = Number.isFinite(timeoutMs) ? Math.max(0, timeoutMs) : Infinity;
      const text = params === undefined ? "" : JSON.stringify(params);
      id = this.#call((core) => core.encode_request(method, text, now(), deadline));
    } catch (e) {
      return Promise.reject(new CopilotError(`cannot send ${method}: ${errorText(e)}`, { cause: e }));
    }
    return new Promise((resolve, reject) => {
      this.#pending.set(id, { method, timeoutMs, resolve, reject, onResponse });
      this.flush();
      // Its answer must be read, over a full backlog too.
      if (this.#readPaused) this.backlog();
    });
  }

  /** Reserves a session's slot before its open is sent (`CoreEngine.reserve`). */
  reserve(id, tag, resuming) {
    return this.#call((core) => core.reserve(id, tag, resuming));
  }

  /**
   * The open's answer reached the engine: it opens the session (or
   * releases it) and gives back `{ opened, error?, routes }`.
   */
  completeOpen(tag, ok, payload) {
    const opened = JSON.parse(this.#call((core) => core.complete_open(tag, ok, payload, now())));
    if (opened.error !== undefined) opened.error = coreText(opened.error);
    return opened;
  }

  /** Marks a session closing (its destroy is in flight); throws if released. */
  closeSession(tag) {
    this.#call((core) => core.release_session(tag, now(), true));
  }

  /** Frees a session's slot: its open waits are refused, frames parked for nobody come back. */
  releaseSession(tag) {
    this.#routeBatch(this.#core.release_session(tag, now(), false));
    this.flush();
  }

  /** Settles an obligation (`CoreEngine.settle`); throws if it cannot. */
  settle(obligation, how, value, siblings) {
    this.#call((core) => core.settle(obligation, how, value, siblings));
  }

  /** The params of a session's open (`CoreEngine.openParams`); throws if `options` is no object. */
  openParams(options, kinds) {
    return this.#call((core) => core.openParams(options, kinds));
  }

  /**
   * Calls the engine: a call that can fail returns nothing of use if it
   * did, and leaves its failure (`CoreEngine.failure`), thrown here with
   * the core's message texts.
   */
  #call(call) {
    const out = call(this.#core);
    const failure = this.#core.failure();
    if (failure) throw new Error(coreText(failure));
    return out;
  }

  /** Closes the writing side of the stream. */
  closeWriter() {
    if (this.#lost === null) this.#transport.closeWriter();
  }

  /** Stops reading (and destroys what the client made). */
  stopReading() {
    this.#transport.stopReading();
  }

  /** Writes what the engine decided to send, then re-arms the timer. */
  flush() {
    if (this.#closed) return;
    // Between two streams, the engine keeps its frames.
    const out = this.#lost === null ? this.#core.take_outgoing() : [];
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
    this.flush();
  }

  /** Bytes read: the engine routes them, then its output is written. */
  #onData(bytes) {
    if (this.#closed) return;
    let routed;
    try {
      routed = this.#core.feed(bytes, now());
    } catch (e) {
      this.#onCoreFailed(`the core failed: ${errorText(e)}`);
      return;
    }
    this.#routeFed(routed);
    this.flush();
  }

  /**
   * Does what `CoreEngine.feed` routed, in order: its items' texts end to
   * end, then two little-endian `u32` an item (a plain event's session tag,
   * or `ITEM_JSON`; where its text ends), then their count. A plain event
   * is parsed and handed on, nothing else built for it; any other item is
   * a routed item's JSON, done as `routeItems` does.
   */
  #routeFed(routed) {
    const words = new DataView(routed.buffer, routed.byteOffset, routed.byteLength);
    const count = words.getUint32(routed.byteLength - 4, true);
    if (count === 0) return;
    const index = routed.byteLength - 4 - 8 * count;
    // The texts decoded at once: where they are all ASCII (as many
    // characters as bytes), each item's text is a slice of that string.
    const end = words.getUint32(index + 8 * count - 4, true);
    const whole = utf8.decode(routed.subarray(0, end));
    const ascii = whole.length === end;
    let start = 0;
    for (let at = index; at < index + 8 * count; at += 8) {
      const kind = words.getUint32(at, true);
      const end = words.getUint32(at + 4, true);
      let item;
      try {
        item = JSON.parse(ascii ? whole.slice(start, end) : utf8.decode(routed.subarray(start, end)));
        if (kind === ITEM_JSON) this.#act(item);
        else this.#onEvent(kind, item, end - start);
      } catch (e) {
        this.#logger.error?.(`routing a ${kind === ITEM_JSON ? item?.route : "event"} failed: ${errorText(e)}`);
      }
      start = end;
    }
  }

  #routeBatch(text) {
    if (text.length <= 2) return; // "[]"
    this.routeItems(JSON.parse(text));
  }

  /** Does what each route says, in order; a failing route is logged. */
  routeItems(items) {
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
      case "event":
      case "request":
      case "lifecycle":
      case "notification":
        this.#onRoute(item);
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
      default:
        // Refusals the engine sent itself, acknowledgements of answers,
        // parked frames, frame errors: nothing to do but tell.
        if (item.refused !== undefined) {
          this.#logger.warn?.(`${item.type ?? item.method ?? item.route} refused by the engine: ${item.refused}`);
        } else if (item.route === "malformed" || item.route === "frameError") {
          this.#logger.warn?.(`${item.route}: ${coreText(item.error)}`);
        } else if (item.route === "unmatchedResponse" && item.answerAck === undefined) {
          this.#logger.warn?.(`response to unknown request ${item.idText}`);
        } else if (item.answerAck === false) {
          this.#logger.warn?.(`the CLI did not accept an answer (${item.idText})`);
        }
    }
  }

  /**
   * Ends the connection on the driver's side: every call fails, every open
   * wait is forgotten, the timer stops. Returns false if it had ended
   * already. The owner ends its sessions after.
   */
  shutDown(reason) {
    if (this.#closed) return false;
    // Every request fails; every open wait is forgotten (no answer can
    // reach the CLI any more); a frame cut short is reported.
    try {
      this.#routeBatch(this.#core.disconnect());
    } catch {
      // Reporting a cut frame is all the batch holds.
    }
    this.#closed = true;
    this.#closeReason = reason || "connection closed";
    const error = this.disconnected();
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    this.#timer = this.#timerAt = undefined;
    if (this.#stallTimer !== undefined) clearTimeout(this.#stallTimer);
    this.#stallTimer = undefined;
    const pending = [...this.#pending.values()];
    this.#pending.clear();
    for (const entry of pending) entry.reject(error);
    return true;
  }
}

/**
 * The ids of `events`, one a line, each as its JSON string has it (without
 * the quotes; an empty line for an event without one), for `CoreEngine.recover`.
 */
function idLines(events) {
  return events.map((e) => (typeof e?.id === "string" ? JSON.stringify(e.id).slice(1, -1) : "")).join("\n");
}

/**
 * `text` with each of the module's message tokens (`\u0003<number>\u0004`:
 * the module leaves the core's message texts out) replaced by its text.
 */
export function coreText(text) {
  return text.replace(/\u0003(\d+)\u0004/g, (token, n) => POLICY.messages[n] ?? token);
}

