// Memory of a session used only through sendAndWait, for faults.test.mjs:
// `node --expose-gc kept-memory-child.mjs <turns> <events>` with
// COPILOT_FAKE_CLI set. Each turn floods <events> deltas (the fake CLI's
// `flood:N`); nobody subscribes. Prints one line a turn (heap and RSS
// before and after, after a GC where exposed) and a last JSON line with
// the session's counters. Not a test file: without arguments it does
// nothing.

import { CopilotClient } from "copilot-wasm";

const [turnsArg, eventsArg] = process.argv.slice(2);
if (turnsArg) {
  const turns = Number(turnsArg);
  const events = Number(eventsArg ?? 100_000);
  const mb = (bytes) => (bytes / 1048576).toFixed(1);
  const memory = () => {
    globalThis.gc?.();
    const m = process.memoryUsage();
    return { heap: m.heapUsed, rss: m.rss };
  };
  const client = await CopilotClient.start({ cliPath: process.env.COPILOT_FAKE_CLI, transport: "stdio" });
  const session = await client.createSession({ model: "m", streaming: true });
  for (let turn = 1; turn <= turns; turn++) {
    const before = memory();
    await session.sendAndWait(`flood:${events}`, { timeoutMs: 600_000 });
    const after = memory();
    const stats = session.stats();
    console.log(
      `turn ${turn}: heap before ${mb(before.heap)} MB, after ${mb(after.heap)} MB; ` +
        `rss before ${mb(before.rss)} MB, after ${mb(after.rss)} MB; ${stats.events} events delivered, ${stats.notKept} not kept`,
    );
  }
  const stats = session.stats();
  await client.stop();
  console.log(JSON.stringify(stats));
}
