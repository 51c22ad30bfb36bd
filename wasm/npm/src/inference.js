// The inference request handler (experimental; the official SDKs'
// `CopilotRequestHandler`): with `requestHandler` set on the client, the
// client registers as the CLI's inference provider and the CLI's model HTTP
// requests come to the handler (`llmInference.httpRequestStart`, then
// `httpRequestChunk`s, each acknowledged at once), which answers with a
// streamed response (`httpResponseStart`, `httpResponseChunk`s) or an error.
// The rule is the core's (`POLICY.inference`, see wasm/src/policy.rs): the
// acknowledgement, the failure answers (a head if none was sent, then an
// error chunk), the bounds on requests in flight and on unread body chunks,
// the connection headers a forwarded request drops. Headers are never
// logged (they carry the CLI's token). A WebSocket request goes to the
// handler's `openWebSocket` (inference-websocket.js).

import { POLICY } from "./constants.js";
import { errorText } from "./errors.js";
import { discharge } from "./answering.js";
import { serveWebSocket } from "./inference-websocket.js";

const RULE = POLICY.inference;
const encoder = new TextEncoder();
const strictText = new TextDecoder("utf-8", { fatal: true });

/**
 * Serves the CLI's model requests. Subclass it and override `sendRequest`
 * (to change, log or answer a request); one that overrides nothing sends
 * each request on with `fetch`. A throw gives the CLI an error for the
 * request (after a 502 head if none was sent), which the CLI retries and
 * then reports as the turn's `session.error`.
 */
export class CopilotRequestHandler {
  /**
   * Sends `request` (a fetch `Request`) and resolves with the `Response`
   * to stream back. `ctx`: `{ requestId, sessionId, agentId, parentAgentId,
   * interactionType, transport, url, headers, signal }` (`signal` aborts
   * when the CLI cancels the request).
   */
  sendRequest(request, ctx) {
    return fetch(request, { signal: ctx.signal });
  }

  /**
   * Opens a WebSocket model request (`ctx.transport` is "websocket"):
   * resolves with a `CopilotWebSocketHandler` made with `ctx`, or with
   * nothing (this default): no WebSocket support, and the request is
   * refused (a head of the core's `unsupported` status, not 101) so that
   * the CLI sends it over HTTP, to `sendRequest`.
   */
  openWebSocket(ctx) {
    return undefined;
  }
}

/** Checks a client's `requestHandler` option; throws `error(message)`. */
export function checkRequestHandler(handler, error) {
  if (handler !== undefined && typeof handler?.sendRequest !== "function") {
    throw error("requestHandler must be a CopilotRequestHandler (an object with sendRequest(request, ctx))");
  }
}

/**
 * A wait of the inference kind (client-global: the core never routes it by
 * its sessionId): served by `provider`, or refused when there is none.
 */
export function takeInference(provider, item, data, driver, logger) {
  if (provider) return provider.take(item, data);
  discharge(driver, logger, item.obligation, () => ({ refuse: "noHandler" }));
}

/** One request in flight: its head, its body as it arrives, its response's state. */
class Exchange {
  id;
  head;
  running = false;
  started = false;
  finished = false;
  cancelled = false;
  abort = new AbortController();
  #items = [];
  #wake = null;
  #unread = 0;
  #overflowed = false;

  /** Queues a body item (`{chunk}`, `{end}`, `{cancel}`); false past the core's bound. */
  push(item) {
    // Past the bound the request fails: its overflow is queued once.
    if (item.overflow) {
      if (this.#overflowed) return true;
      this.#overflowed = true;
    }
    if (item.chunk && this.#unread >= RULE.maxBufferedChunks) return false;
    if (item.chunk) this.#unread++;
    this.#items.push(item);
    this.#wake?.();
    this.#wake = null;
    return true;
  }

  /** The next body item, when it comes. */
  async next() {
    while (this.#items.length === 0) await new Promise((r) => (this.#wake = r));
    const item = this.#items.shift();
    if (item.chunk) this.#unread--;
    return item;
  }

  /** The whole body; rejects on a cancel. */
  async body() {
    const parts = [];
    for (;;) {
      const item = await this.next();
      if (item.cancel !== undefined) throw new Error(`${RULE.cancelled[1]}: ${item.cancel}`);
      if (item.overflow) throw new Error(RULE.overflow[1]);
      if (item.end) break;
      parts.push(item.chunk);
    }
    const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
    let at = 0;
    for (const p of parts) out.set(p, at), (at += p.length);
    return out;
  }
}

function base64(bytes) {
  let s = "";
  for (let i = 0; i < bytes.length; i += 0x8000) s += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  return btoa(s);
}

function unbase64(text) {
  return Uint8Array.from(atob(text), (c) => c.charCodeAt(0));
}

/** The CLI's inference requests for one client with a `requestHandler`. */
export class InferenceProvider {
  #handler;
  #driver;
  #logger;
  #timeoutMs;
  /** requestId -> Exchange, from its start until it ended. */
  #exchanges = new Map();

  constructor(handler, { driver, logger, timeoutMs }) {
    this.#handler = handler;
    this.#driver = driver;
    this.#logger = logger;
    this.#timeoutMs = timeoutMs;
  }

  /**
   * Registers this client as the CLI's inference provider (after each
   * handshake); the requests of a connection before it are gone.
   */
  async register() {
    this.connectionEnded();
    const r = await this.#driver.request(RULE.setProvider, {}, this.#timeoutMs);
    if (r?.success !== true) throw new Error(`${RULE.setProvider} was not accepted: ${JSON.stringify(r)}`);
  }

  /** Ends every request in flight as the CLI's cancel would: the connection that carried it is gone. */
  connectionEnded() {
    for (const e of this.#exchanges.values()) {
      e.cancelled = true;
      e.abort.abort();
      e.push({ cancel: "the connection ended" });
    }
  }

  #exchange(id) {
    let e = this.#exchanges.get(id);
    if (!e) this.#exchanges.set(id, (e = new Exchange()));
    e.id = id;
    return e;
  }

  /** One of the CLI's inference requests (`item`, params `data`): acknowledged, then served. */
  take(item, data) {
    discharge(this.#driver, this.#logger, item.obligation, () => ({ answer: JSON.parse(RULE.ack) }));
    const id = data?.requestId;
    if (typeof id !== "string" || !id) return;
    if (item.method === RULE.requestStart) {
      const running = [...this.#exchanges.values()].filter((e) => e.running).length;
      const e = this.#exchange(id);
      e.head = data;
      if (running >= RULE.maxInFlight) {
        this.#exchanges.delete(id);
        void this.#fail(id, e, RULE.busy);
        return;
      }
      e.running = true;
      void this.#serve(id, e);
    } else {
      // Routed in order, a chunk follows its start: one of a request that
      // ended or was refused is dropped, not kept for a start to come.
      const e = this.#exchanges.get(id);
      if (!e) return;
      if (data.cancel) {
        e.cancelled = true;
        e.abort.abort();
        e.push({ cancel: data.cancelReason ?? "" });
        return;
      }
      if (data.data) {
        const chunk = data.binary ? unbase64(data.data) : encoder.encode(data.data);
        if (!e.push({ chunk, binary: !!data.binary })) e.push({ overflow: true });
      }
      if (data.end) e.push({ end: true });
    }
  }

  async #serve(id, e) {
    const head = e.head;
    const ctx = {
      requestId: id,
      sessionId: head.sessionId,
      agentId: head.agentId,
      parentAgentId: head.parentAgentId,
      interactionType: head.interactionType,
      transport: head.transport ?? "http",
      url: head.url,
      headers: head.headers ?? {},
      signal: e.abort.signal,
    };
    if (ctx.transport === RULE.websocket.transport) {
      const fail = (failure, detail) => this.#fail(id, e, failure, detail);
      const send = (method, params) => this.#send(method, params);
      await serveWebSocket(this.#handler, ctx, e, send, fail, this.#logger);
      this.#exchanges.delete(id);
      return;
    }
    try {
      const headers = new Headers();
      for (const [name, values] of Object.entries(ctx.headers)) {
        if (RULE.hopHeaders.includes(name.toLowerCase())) continue;
        for (const v of values ?? []) headers.append(name, v);
      }
      const method = String(head.method ?? "GET").toUpperCase();
      const body = await e.body();
      const hasBody = method !== "GET" && method !== "HEAD" && body.length > 0;
      const request = new Request(ctx.url, { method, headers, body: hasBody ? body : undefined });
      const response = await this.#handler.sendRequest(request, ctx);
      await this.#stream(id, e, response);
    } catch (err) {
      if (e.cancelled) await this.#fail(id, e, RULE.cancelled);
      else await this.#fail(id, e, RULE.failed, errorText(err));
    } finally {
      this.#exchanges.delete(id);
    }
  }

  #send(method, params) {
    return this.#driver.request(method, params, this.#timeoutMs);
  }

  async #stream(id, e, response) {
    const headers = {};
    response.headers.forEach((v, k) => (headers[k] ??= []).push(v));
    e.started = true;
    const head = { requestId: id, status: response.status, headers };
    if (response.statusText) head.statusText = response.statusText;
    await this.#send(RULE.responseStart, head);
    if (response.body) {
      // Each piece is sent (and accepted) before the next: in order.
      for await (const piece of response.body) {
        if (e.cancelled) throw new Error(RULE.cancelled[1]);
        if (piece.length === 0) continue;
        let text;
        try {
          text = strictText.decode(piece);
        } catch {
          text = undefined;
        }
        const chunk = text === undefined ? { data: base64(piece), binary: true } : { data: text };
        await this.#send(RULE.responseChunk, { requestId: id, ...chunk });
      }
    }
    e.finished = true;
    await this.#send(RULE.responseChunk, { requestId: id, data: "", end: true });
  }

  /** The core's failure answer `[status, message, code]`: a head if none was sent, then the error. */
  async #fail(id, e, [status, message, code], detail) {
    if (e.finished) return;
    e.finished = true;
    this.#logger.warn?.(`the model request ${id} failed: ${detail ?? message}`);
    try {
      if (!e.started) await this.#send(RULE.responseStart, { requestId: id, status, headers: {} });
      const error = { message: detail ?? message };
      if (code) error.code = code;
      await this.#send(RULE.responseChunk, { requestId: id, data: "", end: true, error });
    } catch (err) {
      this.#logger.debug?.(`the failure of model request ${id} was not delivered: ${errorText(err)}`);
    }
  }
}
