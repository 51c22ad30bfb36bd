// Runs a session of the web build of copilot-wasm against the in-page fake
// CLI over WHATWG streams, and leaves the outcome in `window.__result` for
// the test driving this page.

import { CopilotClient, approveAll } from "/pkg/src/index.js";
import { FakeCli } from "./fake-cli.js";

const log = (line) => (document.getElementById("log").textContent += `${line}\n`);

async function run() {
  const toClient = new TransformStream();
  const fromClient = new TransformStream();
  const toClientWriter = toClient.writable.getWriter();
  const cli = new FakeCli((bytes) => toClientWriter.write(bytes));
  (async () => {
    for await (const chunk of fromClient.readable) cli.receive(chunk);
  })();

  const client = await CopilotClient.fromStreams(toClient.readable, fromClient.writable);
  log(`connected: ${JSON.stringify(client.serverInfo)}`);
  const calls = [];
  const session = await client.createSession({
    model: "in-page",
    onPermission: approveAll,
    tools: [
      {
        name: "get_weather",
        description: "Weather of a city.",
        parameters: { type: "object", properties: { city: { type: "string" } } },
        handler: (args) => {
          calls.push(args);
          return `Sunny in ${args.city}`;
        },
      },
    ],
  });
  const types = [];
  session.on("*", (e) => types.push(e.type));
  const reply = await session.sendAndWait("What is the weather in Paris?", { timeoutMs: 10000 });
  log(`reply: ${reply?.content}`);
  const createParams = cli.received.find((m) => m.method === "session.create").params;
  await session.destroy();
  await client.stop();
  return {
    reply: reply?.content,
    types,
    calls,
    permission: cli.permissionDecision,
    requestPermission: createParams.requestPermission,
    toolsOffered: createParams.tools?.map((t) => t.name),
    userAgent: navigator.userAgent,
  };
}

run().then(
  (result) => (window.__result = { ok: true, ...result }),
  (error) => (window.__result = { ok: false, error: String(error?.stack ?? error) }),
);
