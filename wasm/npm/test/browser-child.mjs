// Runs the browser entry point ("copilot-wasm/browser") in a fresh Node
// process, as a page would: the WebAssembly loaded from bytes with
// loadWasm(), the client over WHATWG streams. For streams.test.mjs; not a
// test file (without an argument it does nothing).

import { readFileSync } from "node:fs";

import { CopilotClient, loadWasm } from "copilot-wasm/browser";

import { Peer } from "./helpers.mjs";

if (process.argv[2] === "run") {
  await CopilotClient.start().then(
    () => {
      throw new Error("start must refuse outside Node's entry point");
    },
    (e) => {
      if (!/needs Node/.test(e.message)) throw e;
    },
  );
  await loadWasm(readFileSync(new URL(import.meta.resolve("copilot-wasm/copilot_wasm_bg.wasm"))));
  const toClient = new TransformStream();
  const fromClient = new TransformStream();
  const writer = toClient.writable.getWriter();
  const peer = new Peer((bytes) => writer.write(bytes), {
    answer: (m) => (m.method === "session.create" ? { sessionId: m.params.sessionId } : undefined),
  });
  (async () => {
    for await (const chunk of fromClient.readable) peer.receive(chunk);
  })();
  const client = await CopilotClient.fromStreams(toClient.readable, fromClient.writable);
  const session = await client.createSession({ model: "m" });
  const status = await client.ping();
  if (status.protocolVersion !== 3 || !session.id) throw new Error("unexpected answers");
  client.forceStop();
  console.log("browser entry ok");
}
