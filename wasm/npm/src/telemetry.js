// OpenTelemetry, as the official SDKs offer it: the caller's W3C trace
// context goes on every open and send (`onGetTraceContext`), under the
// core's member names; the CLI's own export is set up at its launch
// (node.js, `telemetry`).

import { POLICY } from "./constants.js";
import { errorText } from "./errors.js";

/**
 * The members of the caller's trace context that an open or a send
 * carries: `{}` without a provider, or when it throws (logged).
 */
export async function traceContext(provider, logger) {
  if (!provider) return {};
  let context;
  try {
    context = await provider();
  } catch (e) {
    logger.warn?.(`onGetTraceContext failed: ${errorText(e)}`);
    return {};
  }
  const members = {};
  for (const name of POLICY.launch.traceContextMembers) {
    if (typeof context?.[name] === "string") members[name] = context[name];
  }
  return members;
}
