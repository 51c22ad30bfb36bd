// One flood measurement in a fresh process, for fake-cli.test.mjs:
// `node flood-child.mjs <stdio|tcp> <events>` with COPILOT_FAKE_CLI set.
// Prints one JSON line: received (in order), seconds, events/s, peak RSS.
// Not a test file: without arguments it does nothing.

import { CopilotClient } from "copilot-wasm";

const [transport, count] = process.argv.slice(2);
if (transport) {
  const N = Number(count ?? 100_000);
  const client = await CopilotClient.start({ cliPath: process.env.COPILOT_FAKE_CLI, transport });
  const session = await client.createSession({ model: "m" });
  const events = session.events();
  for (;;) {
    const { value } = await events.next();
    if (value.type === "session.start") break;
  }
  const rssBefore = process.resourceUsage().maxRSS;
  const started = performance.now();
  await session.send(`flood:${N}`);
  let received = 0;
  for await (const e of events) {
    if (e.type === "session.idle") break;
    // Each delta exactly once and in order: event i has id and content "i".
    if (e.type !== "assistant.message_delta" || e.id !== String(received) || e.data.deltaContent !== String(received)) {
      console.error(`event ${received} arrived as ${e.type} ${e.id} (${e.data?.deltaContent})`);
      process.exit(1);
    }
    received++;
  }
  const seconds = (performance.now() - started) / 1000;
  const maxRss = process.resourceUsage().maxRSS;
  const stats = client.stats();
  await client.stop();
  console.log(
    JSON.stringify({
      transport,
      received,
      seconds,
      eventsPerSecond: received / seconds,
      maxRssMb: maxRss / 1024,
      rssBeforeMb: rssBefore / 1024,
      ...stats,
    }),
  );
}
