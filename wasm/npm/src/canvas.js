// Canvases (experimental): panels a session declares (`canvases` in its
// config) and serves. Each canvas is declared on the session's create or
// resume without its handlers, and answers the CLI's `canvas.open`,
// `canvas.close` and `canvas.action.invoke` for its id, as the official
// Node SDK's `createCanvas` does. What goes back is the core's rule
// (`POLICY.canvas`, see wasm/src/policy.rs): the handler's result (the
// rule's `nothing` when it gives none, and for a close), a CanvasError's
// code and message (any other throw: the core's code) as the error.

import { POLICY } from "./constants.js";
import { checkCanvas } from "./config.js";
import { errorText } from "./errors.js";

/**
 * A canvas handler's failure: a machine-readable `code` and a message,
 * sent to the CLI as the error's `data` (`{code, message}`) and message.
 */
export class CanvasError extends Error {
  constructor(code, message) {
    super(message);
    this.name = "CanvasError";
    this.code = code;
  }

  /** The error of an action without a handler (`canvas_action_no_handler`). */
  static noHandler() {
    return new CanvasError(...POLICY.canvas.actionNoHandler);
  }
}

/**
 * A canvas: `{id, displayName, description, inputSchema?, actions?: [{name,
 * description?, inputSchema?, handler?}], open, onClose?}` (an action
 * without a handler answers `CanvasError.noHandler()`). Checked here; the
 * session config takes it as it is too.
 */
export function createCanvas(options) {
  checkCanvas(options);
  return options;
}


const failed = (e) => ({ fail: errorText(e), code: e instanceof CanvasError ? e.code : "" });

/**
 * The outcome of the canvas request `method` (params `data`, whose
 * `canvasId` the engine checked) for the canvases by id: `{ answer }`, or
 * `{ fail, code }` (the code empty for the core's).
 */
export async function decideCanvas(canvases, method, data, sessionId) {
  const rule = POLICY.canvas;
  const [call, nothing] = rule.requests[method];
  const canvas = canvases.get(data.canvasId);
  if (!canvas) return { fail: `${rule.unknownPrefix}"${data.canvasId}"`, code: "" };
  const ctx = { ...data, sessionId };
  try {
    if (call === "open") return { answer: (await canvas.open(ctx)) ?? nothing };
    if (call === "close") {
      await canvas.onClose?.(ctx);
      return { answer: nothing };
    }
    const handler = canvas.actions?.find((a) => a.name === data[rule.actionMember])?.handler;
    if (!handler) throw CanvasError.noHandler();
    return { answer: (await handler(ctx)) ?? nothing };
  } catch (e) {
    return failed(e);
  }
}

/**
 * A session's open canvas instances, as the CLI last said (the core's
 * rule, `POLICY.canvas`): the open's answer lists them, an `opened` event
 * replaces or adds one (by `instanceId`), a `closed` event removes one;
 * an instance or event without the members the rule names is skipped.
 */
export class OpenCanvases {
  #list = [];

  /** The open's answer (`session.create`/`resume` result) lists them. */
  opened(result) {
    const listed = result?.[POLICY.canvas.openAnswer];
    this.#list = Array.isArray(listed) ? listed.filter(isInstance) : [];
  }

  /** Applies an event if it is an open or a close. */
  event(event) {
    const { opened, closed, openMembers } = POLICY.canvas;
    if (event?.type === opened && isInstance(event.data)) {
      const at = this.#list.findIndex((i) => i[openMembers[0]] === event.data[openMembers[0]]);
      if (at >= 0) this.#list[at] = event.data;
      else this.#list.push(event.data);
    } else if (event?.type === closed && isNamed(event.data, openMembers[0])) {
      this.#list = this.#list.filter((i) => i[openMembers[0]] !== event.data[openMembers[0]]);
    }
  }

  /** A copy of the instances, oldest first. */
  get value() {
    return structuredClone(this.#list);
  }
}

const isNamed = (v, name) => typeof v?.[name] === "string" && v[name].length > 0;
const isInstance = (v) => POLICY.canvas.openMembers.every((m) => isNamed(v, m));
