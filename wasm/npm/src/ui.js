// A session's capabilities and its UI calls (`session.ui`: confirm,
// select, input, elicitation), by the core's rule (`POLICY.capabilities`,
// see wasm/src/policy.rs): the capabilities are set from the open's answer
// and changed by each `capabilities.changed` as it is routed, before it is
// delivered; a UI call is refused before it is sent unless the capability
// it needs was said true (a headless CLI would wait forever), sends the
// form the policy describes and reads its answer by the policy's rule.

import { POLICY } from "./constants.js";
import { CapabilityError } from "./errors.js";

const RULE = POLICY.capabilities;

/** What the CLI said of a session's capabilities, as it last said. */
export class Capabilities {
  /** `{ui: {..}, extensions}`, with only what was said. */
  #said = {};

  /** The open's answer (`session.create`/`resume` result) says them. */
  opened(result) {
    this.#apply(result?.[RULE.openAnswerMember]);
  }

  /** Applies an event if it is a change; returns whether it was. */
  event(event) {
    if (event?.type !== RULE.changedEvent) return false;
    this.#apply(event.data);
    return true;
  }

  #apply(said) {
    if (said === null || typeof said !== "object") return;
    for (const [group, name] of RULE.known) {
      const value = group === null ? said[name] : said[group]?.[name];
      if (typeof value !== "boolean") continue;
      if (group === null) this.#said[name] = value;
      else (this.#said[group] ??= {})[name] = value;
    }
  }

  /** A copy of what was said. */
  get value() {
    return structuredClone(this.#said);
  }

  /** Whether the capability at `[group, name]` was said true. */
  has([group, name]) {
    return (group === null ? this.#said[name] : this.#said[group]?.[name]) === true;
  }
}

/**
 * The `session.ui` object of a session: `call(method, params, options)`
 * sends a session call, `capabilities` is the session's `Capabilities`.
 */
export function sessionUi(capabilities, call) {
  const check = (name) => {
    const spec = RULE.uiCalls[name];
    if (!capabilities.has(spec.needs)) {
      const capability = spec.needs.filter((p) => p !== null).join(".");
      throw new CapabilityError(name, capability, `session.ui.${name}: ${RULE.missing[spec.needs[1]]}`);
    }
    return spec;
  };
  const ask = (message, requestedSchema, options) => call(RULE.uiMethod, { message, requestedSchema }, options);
  // A call of one field: its form, then the field's accepted value (or null).
  const field = async (name, message, members, options) => {
    const spec = check(name);
    const form = {
      type: "object",
      properties: { [spec.field]: { ...spec.schema, ...members } },
      required: [spec.field],
    };
    const result = await ask(message, form, options);
    const value = result?.content?.[spec.field];
    if (result?.action !== "accept" || value === undefined || value === null) return null;
    if (spec.onlyTrue && value !== true) return null;
    return value;
  };
  return {
    /** Asks for a form of the caller's: resolves with `{action, content?}` as the user gave it. */
    async elicitation({ message, requestedSchema }, options) {
      check("elicitation");
      return ask(message, requestedSchema, options);
    },
    /** Asks yes or no: true only when the user accepted and said yes. */
    async confirm(message, options) {
      return (await field("confirm", message, {}, options)) === true;
    },
    /** Asks to pick one of `choices`: the choice, or null when declined or cancelled. */
    select(message, choices, options) {
      return field("select", message, { enum: [...choices] }, options);
    },
    /**
     * Asks for a line of text (`{title, description, minLength, maxLength,
     * format, default}` as the field's members): the text, or null.
     */
    input(message, inputOptions = {}, options) {
      const members = {};
      for (const key of ["title", "description", "minLength", "maxLength", "format", "default"]) {
        if (inputOptions[key] !== undefined && inputOptions[key] !== null) members[key] = inputOptions[key];
      }
      return field("input", message, members, options);
    },
  };
}
