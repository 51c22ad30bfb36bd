// Session hooks and generic request handlers of the JS client.
//
// Hooks: the CLI calls `hooks.invoke {sessionId, hookType, input}` for a
// session created or resumed with `hooks: true` (sent only when a hook is
// set) and waits for `{output?}`. A hook that returns nothing gives no
// output; one that throws is a failed handler, and the engine's refusal
// (no output) goes.
//
// Generic handlers answer the waits that have no typed handler (the session
// filesystem, sampling, queued commands, ...) by name: the server
// request's method or the awaited event's type, as the engine's answer table
// lists them. The handler gets the params (or the event's `data`) and
// returns what goes back; a throw is a failed handler.

import { POLICY } from "./constants.js";

/**
 * Every hook type the CLI calls (the core's list), by the config name of
 * its hook: `on` and the type, capitalized (`preToolUse`: `onPreToolUse`).
 */
export const HOOKS = Object.freeze(
  Object.fromEntries(POLICY.hooks.types.map((type) => [`on${type[0].toUpperCase()}${type.slice(1)}`, type])),
);

const HOOK_BY_TYPE = new Map(Object.entries(HOOKS).map(([name, type]) => [type, name]));

let genericRows;
let genericNames;
let genericKinds;

/** The rows of the engine's answer table that a generic handler answers (the core's `genericRows`). */
function genericAnswerRows() {
  genericRows ??= POLICY.genericRows;
  return genericRows;
}

/** The names a generic handler can be set for (from the engine's answer table). */
export function genericRequestNames() {
  genericNames ??= genericAnswerRows().map((r) => r.name);
  return genericNames;
}

/** Whether the engine's handler kind `kind` is answered by name (the core says which). */
export function isGenericKind(kind) {
  genericKinds ??= new Set(POLICY.genericKinds);
  return genericKinds.has(kind);
}

/** Throws `makeError(message)` unless `hooks` is a valid hooks object. */
export function checkHooks(hooks, makeError) {
  if (hooks === undefined) return;
  if (hooks === null || typeof hooks !== "object") throw makeError("hooks must be an object of hook functions");
  for (const [name, fn] of Object.entries(hooks)) {
    if (!(name in HOOKS)) throw makeError(`unknown hook ${name}; expected one of ${Object.keys(HOOKS).join(", ")}`);
    if (fn !== undefined && typeof fn !== "function") throw makeError(`the hook ${name} must be a function`);
  }
}

/** Throws `makeError(message)` unless every name of `handlers` can be answered by name. */
export function checkRequestHandlers(handlers, makeError) {
  if (handlers === undefined) return;
  if (handlers === null || typeof handlers !== "object") {
    throw makeError("requestHandlers must be an object of functions by method or event type");
  }
  const names = new Set(genericRequestNames());
  for (const [name, fn] of Object.entries(handlers)) {
    if (!names.has(name)) {
      throw makeError(
        `no request handler can be set for ${name}: not a request or awaited event without a typed handler`,
      );
    }
    if (typeof fn !== "function") throw makeError(`the request handler of ${name} must be a function`);
  }
}

/**
 * Runs the hook a `hooks.invoke` names: `{ answer }` (the response's
 * result) or `{ refuse: cause }`.
 */
export async function decideHook(hooks, params, sessionId) {
  // The engine refused a call without a string `hookType` (the core's `reads`).
  const fn = hooks?.[HOOK_BY_TYPE.get(params.hookType)];
  if (typeof fn !== "function") return { refuse: "noHandler" };
  const invocation = {
    sessionId: typeof params.sessionId === "string" ? params.sessionId : sessionId,
    hookType: params.hookType,
  };
  // The engine answers `{output}`, or `{}` for no output. No input: the core's default.
  const output = await fn(hookInput(params.input ?? structuredClone(POLICY.hooks.defaultInput)), invocation);
  return { answer: output ?? null };
}

/**
 * A hook's input as the hook gets it, named as the official SDKs name it:
 * the core's renamed members under their names, its time as a `Date`.
 */
function hookInput(raw) {
  if (raw === null || typeof raw !== "object" || Array.isArray(raw)) return raw;
  const input = { ...raw };
  for (const [wire, name] of POLICY.hooks.inputRenames) {
    if (Object.hasOwn(input, wire)) {
      input[name] = input[wire];
      delete input[wire];
    }
  }
  const time = POLICY.hooks.inputTime;
  if (typeof input[time] === "number") input[time] = new Date(input[time]);
  return input;
}

/**
 * Runs the generic handler of `name`: `{ answer }` or `{ refuse: cause }`.
 * `data` is the request's params or the event's `data`.
 */
export async function decideRequest(handlers, name, data, sessionId) {
  const fn = typeof name === "string" ? handlers?.[name] : undefined;
  if (typeof fn !== "function" || !Object.hasOwn(handlers, name)) return { refuse: "noHandler" };
  const result = await fn(data ?? null, { name, sessionId });
  return { answer: result === undefined ? null : result };
}
