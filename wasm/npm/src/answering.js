// Answering what the agent waits on. The engine records each wait (an
// awaited event or a server-to-client request) as an obligation and says
// which handler kind answers it; this module calls the user's handler of
// that kind, shapes what it returned, and settles the obligation through
// the engine, exactly once: with the answer, a refusal for a cause, a
// decline (left to another client of the session), or a failure. What the
// refusal or failure sends is the engine's.

import { POLICY } from "./constants.js";
import { errorText } from "./errors.js";
import { sectionTransforms } from "./config.js";
import { decideHook, decideRequest, isGenericKind } from "./hooks.js";
import { shapeAnswer } from "./shapes.js";
import { decideCanvas } from "./canvas.js";

// How `CoreEngine.settle` settles a wait (wasm/src/lib.rs names the same).
const SETTLE_ANSWER = 0;
const SETTLE_REFUSE = 1;
const SETTLE_DECLINE = 2;
const SETTLE_FAIL = 3;

const DECLINE = Object.freeze({ decline: true });
const NO_HANDLER = Object.freeze({ refuse: "noHandler" });

const isObject = (v) => v !== null && typeof v === "object" && !Array.isArray(v);

/** A permission handler that approves every prompt once. */
export function approveAll() {
  return { kind: "approve-once" };
}

/**
 * A permission decision with context on how and where it was made (sent
 * beside it as `decisionContext`; telemetry, it changes nothing).
 */
export function withDecisionContext(decision, decisionContext) {
  const inner = decision?.kind === "attributed" ? decision.result : decision;
  return { kind: "attributed", result: inner, decisionContext };
}

/** `{kind}` from what a permission handler returned; null if unusable. */
function permissionDecision(value) {
  if (typeof value === "string" && value) return { kind: value };
  if (value && typeof value === "object" && typeof value.kind === "string") return value;
  return null;
}

/**
 * A wait the engine recorded (`item`, routed as an event or a request):
 * the handler that answers it runs off the reading path, in a microtask.
 * `session` is the session it names, if this client holds it; a request
 * naming no session is answered by the client's generic `requestHandlers`.
 * `driver` settles it (see `discharge`).
 */
export function answerWait(item, session, data, { driver, logger, requestHandlers }) {
  const ob = item.obligation;
  // The awaited event's type or the request's method.
  const name = item.route === "event" ? item.event?.type : item.method;
  if (!session) {
    // A request naming no session is the client's to answer.
    const clientWide = item.route === "request" && item.session === null && isGenericKind(item.handler);
    const decide = clientWide
      ? () => decideRequest(requestHandlers, name, data, undefined)
      : () => ({ refuse: "sessionGone" });
    queueMicrotask(() => discharge(driver, logger, ob, decide));
    return;
  }
  const sessionId = item.sessionId ?? data?.sessionId ?? session.id;
  queueMicrotask(() => discharge(driver, logger, ob, () => session._decide(item.handler, data, sessionId, name)));
}

/**
 * Runs a handler's decision for an obligation and passes it on:
 * `decide()` resolves to `{ answer, siblings? }`, `{ decline: true }` (left
 * to another client of the session) or `{ refuse: cause }`; a throw is a
 * failed handler. Exactly one settles the wait in the engine, which
 * ignores (and reports) any answer after a deadline or release.
 */
export async function discharge(driver, logger, obligation, decide) {
  let outcome;
  try {
    outcome = await decide();
  } catch (e) {
    outcome = { fail: errorText(e) };
  }
  if (outcome && "fail" in outcome) {
    // The error may hold what the model should not read: the engine's
    // failure answer tells the agent only that the handler failed (for a
    // tool, with the text in the result's `error`, which the model does
    // not read); the logs say how.
    logger.error?.(`a handler failed (${outcome.fail}); the agent is told only that it failed`);
  }
  if (driver.closed) return;
  try {
    if (outcome && "answer" in outcome) {
      const siblings = outcome.siblings === undefined ? "" : JSON.stringify(outcome.siblings);
      driver.settle(obligation, SETTLE_ANSWER, JSON.stringify(outcome.answer) ?? "null", siblings);
    } else if (outcome && "fail" in outcome) {
      // A canvas handler's error names its code (empty: the core's).
      driver.settle(obligation, SETTLE_FAIL, outcome.fail, outcome.code ?? "");
    } else if (outcome?.decline) {
      // Left to another client of the session: nothing is sent.
      driver.settle(obligation, SETTLE_DECLINE, "", "");
    } else {
      driver.settle(obligation, SETTLE_REFUSE, outcome?.refuse ?? "handlerFailed", "");
    }
  } catch (e) {
    // Answered already (its deadline passed, its session was released),
    // or the answer was not JSON (the refusal went instead).
    logger.warn?.(`an answer was not sent as given: ${errorText(e)}`);
  }
  driver.flush();
}

/**
 * One session's handlers, from its config: the engine says which handler
 * kind answers a wait; this calls the user's handler and shapes its answer.
 */
export class SessionHandlers {
  #config;
  #tools;
  #transforms;
  #commands;
  #canvases;

  constructor(config) {
    this.#config = config;
    this.#tools = new Map((config.tools ?? []).map((t) => [t.name, t]));
    this.#transforms = sectionTransforms(config);
    this.#commands = new Map((config.commands ?? []).map((c) => [c.name, c]));
    this.#canvases = new Map((config.canvases ?? []).map((c) => [c.id, c]));
  }

  /**
   * Resolves to `{ answer }` (the payload the engine sends) or
   * `{ refuse: cause }`; a throwing handler is reported by the caller as
   * `handlerFailed`.
   */
  async decide(kind, data, sessionId, name, logger) {
    // The engine refused the wait if a member its handler reads is missing
    // or of another kind (the core's `reads` of each kind): `data` has them.
    const c = this.#config;
    switch (kind) {
      case "permission": {
        if (!c.onPermission) return NO_HANDLER;
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
        const shaped = shapeAnswer("permission", decision);
        if (!("answer" in shaped) || !attributed || !isObject(given.decisionContext)) return shaped;
        const context = shapeAnswer("permissionDecisionContext", given.decisionContext);
        if (!("answer" in context)) return context;
        return { answer: shaped.answer, siblings: { decisionContext: context.answer } };
      }
      case "tool": {
        const tool = this.#tools.get(data.toolName);
        if (!tool) return NO_HANDLER;
        const invocation = {
          sessionId,
          toolCallId: data.toolCallId,
          toolName: data.toolName,
          arguments: data.arguments ?? null,
          workingDirectory: data.workingDirectory,
          traceparent: data.traceparent,
          tracestate: data.tracestate,
        };
        // A throw is a failed handler: the engine's tool failure goes.
        return shapeAnswer("tool", await tool.handler(invocation.arguments, invocation));
      }
      case "userInput": {
        if (!c.onUserInput) return NO_HANDLER;
        let answer = await c.onUserInput({
          sessionId,
          question: data.question,
          choices: Array.isArray(data.choices) ? data.choices : [],
          allowFreeform: data.allowFreeform,
        });
        // A string is an answer typed by the user.
        if (typeof answer === "string") answer = { answer, wasFreeform: true };
        return shapeAnswer("userInput", answer);
      }
      case "elicitation": {
        if (!c.onElicitation) return NO_HANDLER;
        let r = await c.onElicitation({ ...data, sessionId });
        if (typeof r === "string") r = { action: r };
        return shapeAnswer("elicitation", r);
      }
      case "mcpOAuth": {
        if (!c.onMcpOAuth) return NO_HANDLER;
        let t = await c.onMcpOAuth({ ...data, sessionId });
        if (typeof t === "string") t = { accessToken: t };
        return shapeAnswer("mcpOAuth", t);
      }
      case "exitPlanMode": {
        if (!c.onExitPlanMode) return NO_HANDLER;
        let r = await c.onExitPlanMode({
          sessionId,
          summary: typeof data.summary === "string" ? data.summary : "",
          planContent: typeof data.planContent === "string" ? data.planContent : "",
          actions: Array.isArray(data.actions) ? data.actions : [],
          recommendedAction: data.recommendedAction,
        });
        if (typeof r === "boolean") r = { approved: r };
        return shapeAnswer("exitPlanMode", r);
      }
      case "command": {
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
              logger.error?.(`the transform of section ${id} failed: ${errorText(e)}`);
            }
          }
          sections[id] = { content: text };
        }
        return shapeAnswer("systemMessageTransform", { sections });
      }
      case "providerToken": {
        const callback = c.provider?.bearerTokenProvider;
        if (!callback) return NO_HANDLER;
        // One callback: the session's single provider, by the core's name.
        if (data.providerName !== POLICY.config.providerTokenName) return NO_HANDLER;
        const token = await callback({ providerName: data.providerName, sessionId });
        return shapeAnswer("providerToken", typeof token === "string" ? { token } : token);
      }
      case "hooks":
        return decideHook(c.hooks, data, sessionId);
      case "canvas":
        if (this.#canvases.size === 0) return NO_HANDLER;
        return decideCanvas(this.#canvases, name, data, sessionId);
      default:
        if (isGenericKind(kind)) return decideRequest(c.requestHandlers, name, data, sessionId);
        return NO_HANDLER;
    }
  }
}
