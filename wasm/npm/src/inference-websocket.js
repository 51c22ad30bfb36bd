// The WebSocket half of the inference request handler: a model request
// whose head says `transport: "websocket"` (the CLI 1.0.102 opens one for
// the Responses API of a model whose catalogue entry lists `ws:/responses`,
// and keeps it across turns). The handler's `openWebSocket(ctx)` returns a
// `CopilotWebSocketHandler`, which gets each message of the CLI in order
// (`sendRequestMessage`) and sends the model's back
// (`sendResponseMessage`); returning nothing is no WebSocket support, and
// the request is refused so that the CLI sends it over HTTP. What ends it,
// and with what, is the core's (`POLICY.inference.websocket`, see
// wasm/src/policy.rs): the end goes once, whichever side ends first.

import { POLICY } from "./constants.js";
import { errorText } from "./errors.js";

const RULE = POLICY.inference;
const WS = RULE.websocket;
const strictText = new TextDecoder("utf-8", { fatal: true });

/** The context member that carries a WebSocket's bridge to its handler. */
const BRIDGE = Symbol("copilotWebSocketBridge");

/** How a WebSocket closes: normally, or with an error (its `description` or `error`'s message). */
export class CopilotWebSocketCloseStatus {
  static normalClosure = new CopilotWebSocketCloseStatus();

  constructor(description, errorCode, error) {
    this.description = description;
    this.errorCode = errorCode;
    this.error = error;
  }
}

/**
 * One open WebSocket, as a request handler serves it. Subclass it and
 * implement `sendRequestMessage(data)` (a message of the CLI: a string for
 * a text frame, a Uint8Array for a binary one); send the model's messages
 * with `sendResponseMessage(data)` and end it with `close(status)`.
 */
export class CopilotWebSocketHandler {
  #bridge;
  #closed = false;

  constructor(context) {
    this.context = context;
    this.#bridge = context?.[BRIDGE];
    if (!this.#bridge) throw new Error("a CopilotWebSocketHandler needs the context given to openWebSocket");
  }

  /** Sends one message to the CLI (from the model), after the ones before it. */
  sendResponseMessage(data) {
    return this.#bridge.message(data);
  }

  /** One message of the CLI, to the model. */
  sendRequestMessage(data) {
    throw new Error("sendRequestMessage is not implemented");
  }

  /** Ends the WebSocket (once; an error in `status` ends it with that error). Override to release an upstream, calling super. */
  async close(status = CopilotWebSocketCloseStatus.normalClosure) {
    if (this.#closed) return;
    this.#closed = true;
    if (status.error || status.description !== undefined) {
      await this.#bridge.end("handlerFailed", status.description ?? errorText(status.error), status.errorCode);
    } else {
      await this.#bridge.end("handlerClosed");
    }
  }
}

/**
 * The CLI's side of one WebSocket: the head once (status `WS.opened`),
 * then messages, then one end, each sent after the one before.
 */
class Bridge {
  #exchange;
  #send;
  #fail;
  #serial = Promise.resolve();
  ended = false;
  #onEnd;
  whenEnded = new Promise((r) => (this.#onEnd = r));

  constructor(exchange, send, fail) {
    this.#exchange = exchange;
    this.#send = send;
    this.#fail = fail;
  }

  #run(action) {
    const task = this.#serial.then(action);
    this.#serial = task.catch(() => {});
    return task;
  }

  #open() {
    if (this.#exchange.started) return;
    this.#exchange.started = true;
    return this.#send(RULE.responseStart, { requestId: this.#exchange.id, status: WS.opened, headers: {} });
  }

  open() {
    return this.#run(() => this.#open());
  }

  message(data) {
    return this.#run(async () => {
      if (this.ended) throw new Error("the WebSocket was closed");
      if (this.#exchange.cancelled) throw new Error(RULE.cancelled[1]);
      await this.#open();
      let chunk;
      if (typeof data === "string") chunk = { data };
      else {
        let s = "";
        for (let i = 0; i < data.length; i += 0x8000) s += String.fromCharCode(...data.subarray(i, i + 0x8000));
        chunk = { data: btoa(s), binary: true };
      }
      await this.#send(RULE.responseChunk, { requestId: this.#exchange.id, ...chunk });
    });
  }

  /** Ends it as the core's `ends[kind]` says (once: later ends do nothing). */
  end(kind, detail, code) {
    return this.#run(async () => {
      if (this.ended) return;
      this.ended = true;
      this.#onEnd(kind);
      const failure = WS.ends[kind];
      if (failure) return this.#fail(code ? [failure[0], failure[1], code] : failure, detail || undefined);
      await this.#open();
      this.#exchange.finished = true;
      await this.#send(RULE.responseChunk, { requestId: this.#exchange.id, data: "", end: true });
    });
  }
}

/**
 * Serves WebSocket request `exchange` (`{id, started, finished, cancelled,
 * next()}`) with `handler.openWebSocket(ctx)`; `send(method, params)` makes
 * a call to the CLI, `fail(failure, detail)` sends the core's failure answer.
 */
export async function serveWebSocket(handler, ctx, exchange, send, fail, logger) {
  const bridge = new Bridge(exchange, send, fail);
  let socket;
  try {
    socket = await handler.openWebSocket?.({ ...ctx, [BRIDGE]: bridge });
  } catch (err) {
    return finish(bridge, exchange, "handlerFailed", errorText(err), logger);
  }
  if (!socket) return finish(bridge, exchange, "unsupported", undefined, logger);
  let [kind, detail] = ["handlerClosed"];
  try {
    await bridge.open();
    // Each message of the CLI in order, until an end of either side.
    const closed = bridge.whenEnded.then(() => null);
    for (;;) {
      const item = await Promise.race([exchange.next(), closed]);
      if (item === null) break;
      if (item.end) [kind] = ["clientClosed"];
      else if (item.cancel !== undefined) [kind] = ["clientCancelled"];
      else if (item.overflow) [kind] = ["overflow"];
      else {
        let data = item.chunk;
        if (!item.binary) data = strictText.decode(data);
        await socket.sendRequestMessage(data);
        continue;
      }
      break;
    }
  } catch (err) {
    [kind, detail] = ["handlerFailed", errorText(err)];
  }
  await finish(bridge, exchange, kind, detail, logger);
  // Last, once the CLI has its end.
  try {
    await socket.close();
  } catch (err) {
    logger.debug?.(`the WebSocket handler of ${exchange.id} failed in close: ${errorText(err)}`);
  }
}

async function finish(bridge, exchange, kind, detail, logger) {
  if (kind === "handlerFailed" && exchange.cancelled) kind = "clientCancelled";
  if (kind === "handlerFailed") logger.warn?.(`the WebSocket handler failed for ${exchange.id}: ${detail}`);
  try {
    await bridge.end(kind, detail);
  } catch (err) {
    logger.debug?.(`the end of WebSocket request ${exchange.id} was not delivered: ${errorText(err)}`);
  }
}
