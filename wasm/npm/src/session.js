// A session of the client: sending prompts (`send`, `sendAndWait`), the
// session's calls, and delivering its events, in order and never dropped,
// to every subscriber (`on`, async iteration); the first subscriber also
// receives those that arrived before it, up to `MAX_KEPT_EVENTS` and
// `MAX_KEPT_BYTES` (the core's bounds). What answers its waits is
// answering.js; its connection is the client's.

import { MAX_KEPT_BYTES, MAX_KEPT_EVENTS, POLICY } from "./constants.js";
import { ConfigError, DisconnectedError, SessionError, TimeoutError, errorText } from "./errors.js";
import { SessionHandlers } from "./answering.js";
import { rpcCalls, SESSION_METHODS } from "./generated/rpc.js";
import { Capabilities, sessionUi } from "./ui.js";
import { OpenCanvases } from "./canvas.js";

const noop = () => {};

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

/** Bytes an iterator takes before it tells the backlog (and when it has taken all it held). */
const TELL_TAKEN = 64 << 10;

/**
 * An async iterator's end of a subscription: never drops. The bytes of the
 * events it holds are counted in the connection's backlog (`account(added,
 * taken)`) until they are taken, so a consumer slower than the CLI pauses
 * the client's reading rather than growing memory. It tells in batches:
 * what a delivery pushed at its end (`_tell`), what was taken every
 * `TELL_TAKEN` bytes and when nothing is left.
 */
class EventIterator {
  #buffer = new Fifo();
  #sizes = new Fifo();
  /** Bytes the backlog counts for this iterator, and those not told yet. */
  #counted = 0;
  #added = 0;
  #taken = 0;
  #waiting = null;
  #done = false;
  #unsubscribe;
  #account;

  constructor(unsubscribe, account) {
    this.#unsubscribe = unsubscribe;
    this.#account = account;
  }
  /** `bytes`: the event's size, or 0 for one not counted (kept for a first subscriber). */
  _push(event, bytes) {
    if (this.#waiting) {
      const resolve = this.#waiting;
      this.#waiting = null;
      resolve({ value: event, done: false });
    } else {
      this.#buffer.push(event);
      this.#sizes.push(bytes);
      this.#added += bytes;
    }
  }
  /** Tells the backlog what was pushed and taken since the last time. */
  _tell() {
    if (this.#added === 0 && this.#taken === 0) return;
    const [added, taken] = [this.#added, this.#taken];
    this.#counted += added - taken;
    this.#added = this.#taken = 0;
    this.#account(added, taken);
  }
  #take() {
    this.#taken += this.#sizes.shift();
    const event = this.#buffer.shift();
    if (this.#taken >= TELL_TAKEN || this.#buffer.length === 0) this._tell();
    return event;
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
    if (this.#buffer.length > 0) return Promise.resolve({ value: this.#take(), done: false });
    if (this.#done) return Promise.resolve({ value: undefined, done: true });
    return new Promise((resolve) => {
      this.#waiting = resolve;
    });
  }
  return() {
    this.#unsubscribe();
    this.#done = true;
    this.#buffer = new Fifo();
    this.#sizes = new Fifo();
    const counted = this.#counted - this.#taken;
    this.#counted = this.#added = this.#taken = 0;
    if (counted > 0) this.#account(0, counted);
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
  /** The user's handlers of its waits. */
  #handlers;
  #queue = [];
  /** The size of each queued event (the engine's `bytes`), for the kept-bytes bound. */
  #queueBytes = [];
  #scheduled = false;
  #subscribers = [];
  #version = 0;
  #claimed = false;
  #kept = [];
  #keptBytes = 0;
  #delivered = 0;
  #notKept = 0;
  #ending = null;
  #ended = null;
  #active = false;
  #result;
  #rpc;
  #capabilities = new Capabilities();
  #openCanvases = new OpenCanvases();
  #ui;
  /** While a recovery reads the session's log: the live events, `[event, bytes]`, in order. */
  #held = null;

  /** @internal */
  constructor(client, tag, id, config) {
    this.#client = client;
    this.#tag = tag;
    this.#id = id;
    this.#handlers = new SessionHandlers(config);
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

  /**
   * What the CLI says this session can do, as it last said: `{ui:
   * {elicitation, mcpApps, canvases}, extensions}` (only what it said), set
   * by the open's answer and kept current by `capabilities.changed`
   * (changed before the event is delivered to any subscriber).
   */
  get capabilities() {
    return this.#capabilities.value;
  }

  /**
   * The canvas instances open in this session (experimental), as the CLI
   * last said, oldest first (`{instanceId, extensionId, canvasId, title?,
   * url?, input?, ...}`): set by a resume's answer, kept current by
   * `session.canvas.opened` / `closed` (changed before the event is
   * delivered), as the official SDKs keep them.
   */
  get openCanvases() {
    return this.#openCanvases.value;
  }

  /**
   * The session's UI calls (`confirm`, `select`, `input`, `elicitation`),
   * answered by a client of the session with an elicitation handler. Each
   * rejects with a CapabilityError before anything is sent while
   * `capabilities.ui?.elicitation` is not true.
   */
  get ui() {
    return (this.#ui ??= sessionUi(this.#capabilities, (method, params, options) =>
      this.call(method, params, options),
    ));
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

  /** @internal The open's answer, as it is routed: its capabilities. */
  _answered(result) {
    this.#capabilities.opened(result);
    this.#openCanvases.opened(result);
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
    Object.assign(params, await this.#client._traceContext());
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
      // The core's turn rule (`POLICY.turn`).
      const turn = POLICY.turn;
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
          if (e.type === turn.reply && (e.data?.[turn.replyUnless] ?? null) === null) last = e.data;
          else if (e.type === turn.error) {
            error = new SessionError(e.data?.errorType, e.data?.message, e.data);
          } else if (e.type === turn.end) {
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
   * came while nobody had subscribed, past `MAX_KEPT_EVENTS` or
   * `MAX_KEPT_BYTES`, and so are not kept for a late first subscriber).
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
    const iterator = new EventIterator(
      () => unsubscribe(),
      (added, taken) => this.#client._backlog(added, taken),
    );
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
      this.#keptBytes = 0;
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

  /** @internal Called as an event is routed: queue it, deliver soon. `bytes`: its size. */
  _push(event, bytes = 0) {
    if (this.#held) return void this.#held.push([event, bytes]);
    this.#capabilities.event(event);
    this.#openCanvases.event(event);
    this.#queue.push(event);
    this.#queueBytes.push(bytes);
    this.#schedule();
  }

  /** @internal A recovery reads the session's log: live events wait, in order, for `_releaseHeld`. */
  _hold() {
    this.#held ??= [];
  }

  /** @internal The live events held, in order. */
  get _held() {
    return this.#held?.map(([e]) => e) ?? [];
  }

  /**
   * @internal Delivers `gap` (the events of the log the connection lost,
   * as `[event, bytes]`, in order), then the live events held but those at
   * the indexes of `drop` (the log brought them), and delivers as before.
   */
  _releaseHeld(gap = [], drop = []) {
    const held = this.#held ?? [];
    this.#held = null;
    for (const [e, bytes] of gap) this._push(e, bytes);
    held.forEach(([e, bytes], i) => drop.includes(i) || this._push(e, bytes));
  }

  /** @internal The session ended: deliver what is queued, then end streams. */
  _end(reason) {
    if (this.#ending !== null) return;
    this._releaseHeld();
    this.#ending = reason;
    this.#active = false;
    this.#schedule();
  }

  #drain() {
    this.#scheduled = false;
    const queue = this.#queue;
    const sizes = this.#queueBytes;
    this.#queue = [];
    this.#queueBytes = [];
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
        // The core's rule: kept while none was left out, and both bounds hold.
        const size = sizes[q] ?? 0;
        if (this.#notKept === 0 && this.#kept.length < MAX_KEPT_EVENTS && this.#keptBytes + size <= MAX_KEPT_BYTES) {
          this.#kept.push(e);
          this.#keptBytes += size;
        } else {
          if (this.#notKept === 0) {
            this.#client._logger.warn?.(
              `session ${this.#id}: nobody has subscribed and ${this.#kept.length} events (${this.#keptBytes} bytes) are kept; later ones are not kept for a first subscriber (counted in stats())`,
            );
          }
          this.#notKept++;
        }
      }
      for (let i = 0; i < subs.length; i++) {
        if (!subs[i].removed) this.#deliverTo(subs[i], e, sizes[q] ?? 0);
      }
    }
    // The iterators tell the backlog what they now hold, once a delivery.
    for (const sub of subs) sub.iterator?._tell();
    if (this.#ending !== null && this.#ended === null && this.#queue.length === 0) {
      this.#ended = this.#ending;
      const ending = this.#subscribers;
      this.#subscribers = [];
      this.#version++;
      for (const sub of ending) this.#endSubscriber(sub, this.#ended);
    }
  }

  /** `bytes`: the event's size, counted in the backlog while an iterator holds it (0: not counted). */
  #deliverTo(sub, e, bytes = 0) {
    if (sub.type !== "*" && sub.type !== e.type) return;
    if (sub.iterator) {
      sub.iterator._push(e, bytes);
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

  /**
   * @internal Resolves to `{ answer }` (the payload the engine sends) or
   * `{ refuse: cause }` from the session's handler of `kind`
   * (answering.js); a throwing handler is reported by the caller as
   * `handlerFailed`.
   */
  _decide(kind, data, sessionId, name) {
    return this.#handlers.decide(kind, data, sessionId, name, this.#client._logger);
  }
}
