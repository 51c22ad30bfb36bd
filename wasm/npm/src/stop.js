// A client's stop, as the core says it (`POLICY.stop`): the steps in
// order within one grace. The client hands over what the steps act on:
// `{ process(), sessions(), driver, logger, release(tag, reason),
// request(method, params, options), shutDown(reason) }`.

import { POLICY } from "./constants.js";

/**
 * The core's stop (`POLICY.stop`): its steps in order, each waiting at
 * most for what is left of the one grace; `spawnedOnly` steps only for a
 * CLI this client started, and only an `errorFails` step's error fails
 * the stop.
 */
export async function runStop(graceMs, client) {
  const deadline = Date.now() + graceMs;
  const left = () => Math.max(0, deadline - Date.now());
  let firstError;
  for (const step of POLICY.stop) {
    if (step.spawnedOnly && !client.process()) continue;
    let error;
    switch (step.step) {
      case "destroySessions": {
        const destroys = [];
        for (const session of client.sessions()) {
          if (session.active && !client.driver.closed) destroys.push(session.destroy({ timeoutMs: left() }));
          else client.release(session._tag, "client stopped");
        }
        for (const result of await Promise.allSettled(destroys)) {
          if (result.status === "rejected") error ??= result.reason;
        }
        break;
      }
      case "shutdownRuntime":
        if (!client.driver.closed) {
          try {
            await client.request(step.method, {}, { timeoutMs: left() });
          } catch (e) {
            error = e;
          }
        }
        break;
      case "closeWriter":
        client.driver.closeWriter();
        break;
      case "awaitExitOrKill":
        if (!(await client.process().waitForExit(left()))) {
          client.logger.warn?.(`the Copilot CLI did not exit within ${graceMs} ms; killing its process group`);
          client.process().kill();
        }
        break;
      case "release":
        client.driver.stopReading();
        client.shutDown("the client was stopped");
        break;
      default:
        client.logger.warn?.(`stop: step ${step.step} is not known to this client; skipped`);
    }
    if (error && step.errorFails) firstError ??= error;
  }
  if (firstError) throw firstError;
}
