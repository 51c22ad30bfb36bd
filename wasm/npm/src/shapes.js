// Shaping what a handler gave into the answer the agent gets, by the core's
// table (`POLICY.answerShapes`, from `copilot_core::ANSWER_SHAPES`;
// wasm/src/policy.rs documents it and holds it to the core's
// `write_answer`, which the Rust host applies). The table's members go in
// its order, as the core writes them; the handler's other members, and the
// members of any object it gave, in code-point order of their names, as the
// Rust host reads them (a serde_json map).

import { POLICY } from "./constants.js";
import { sortedMembers } from "./config.js";

const isObject = (v) => v !== null && typeof v === "object" && !Array.isArray(v);

/** Whether a value is of a member's JSON type. */
const FITS = {
  string: (v) => typeof v === "string",
  boolean: (v) => typeof v === "boolean",
  integer: (v) => Number.isInteger(v),
  object: isObject,
};

/**
 * The outcome for what a handler of the shape `name` (a handler kind, or
 * `permissionDecisionContext`) gave: `{ answer }`, `{ refuse: cause }` when
 * it gave nothing and that means a refusal, or `{ fail: why }` when what it
 * gave is not an answer (a failed handler).
 */
export function shapeAnswer(name, given) {
  const shape = POLICY.answerShapes[name];
  if (given === undefined || given === null) {
    const { answer, refuse } = shape.nothing;
    return answer ? { answer: structuredClone(answer) } : { refuse };
  }
  if (shape.text && !(isObject(given) && typeof given[shape.text] === "string")) {
    // Not an answer object: its text (JSON text, members in name order, as the Rust host writes it).
    given = { [shape.text]: typeof given === "string" ? given : JSON.stringify(sortedMembers(given)) };
  }
  if (!isObject(given)) return { fail: `the ${name} handler's answer is not an object` };
  const answer = {};
  for (const m of shape.members) {
    if (m.when && given[m.when.member] !== m.when.is) continue;
    let value = "const" in m ? m.const : given[m.name];
    if (value === undefined || value === null) {
      if ("default" in m) value = structuredClone(m.default);
      else if (m.required) return { fail: `the ${name} handler's answer lacks ${m.name}` };
      else continue;
    } else if (!FITS[m.type](value) || (m.oneOf && !m.oneOf.includes(value))) {
      return { fail: `the ${name} handler's answer has a ${m.name} that is not a ${m.type} it takes` };
    }
    answer[m.name] = sortedMembers(value);
  }
  if (shape.open) {
    const named = new Set(shape.members.map((m) => m.name));
    for (const k of Object.keys(given).sort()) {
      if (!named.has(k) && given[k] !== undefined) answer[k] = sortedMembers(given[k]);
    }
  }
  return { answer };
}
