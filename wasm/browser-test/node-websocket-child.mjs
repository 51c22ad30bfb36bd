// Run by bridge.test.mjs with --experimental-websocket (Node 20; Node 22
// has the global WebSocket anyway): connects to the bridge given as
// argv[2] with the token argv[3], runs one turn whose reply is argv[4],
// scripted through the bridge (--offline) or, given argv[5], the scripted
// model's own control endpoint; prints what it saw as one line of JSON.
// Given "await-peer" as argv[6], it stays connected after its turn until the
// lifecycle of another session has reached it (so a test of a shared CLI
// server does not depend on two clients' timing).

import { CopilotClient } from "../npm/src/node.js";

const [url, token, text, scriptedModel, awaitPeer] = process.argv.slice(2);
const client = await CopilotClient.connectWebSocket(`${url.replace("http:", "ws:")}ws`, { token });
const lifecycle = [];
let session;
let peerSeen;
const peer = new Promise((resolve) => (peerSeen = resolve));
client.on("lifecycle", (p) => {
  lifecycle.push(p.sessionId);
  if (session && p.sessionId !== session.id) peerSeen();
});
session = await client.createSession({ model: "claude-sonnet-4.5", streaming: true });
const events = [];
session.on((e) => events.push(e.type));
const scripted = await fetch(scriptedModel ? `${scriptedModel}/_scripted/script` : `${url}offline/script`, {
  method: "POST",
  headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
  body: JSON.stringify({ sessionId: session.id, replies: [{ text }] }),
});
if (!scripted.ok) throw new Error(`script refused: ${scripted.status}`);
const reply = await session.sendAndWait("Say hello", { timeoutMs: 120_000 });
if (awaitPeer === "await-peer") {
  if (lifecycle.some((id) => id !== session.id)) peerSeen();
  // A safety net only: the test's claim is the order, not a time.
  const gaveUp = setTimeout(() => {
    console.error(`no other session's lifecycle reached this client: ${JSON.stringify(lifecycle)}`);
    process.exit(1);
  }, 120_000);
  await peer;
  clearTimeout(gaveUp);
}
const stats = client.stats();
await session.destroy();
await client.stop();
console.log(
  JSON.stringify({ version: client.serverInfo.version, sessionId: session.id, reply: reply?.content, events, lifecycle, stats }),
);
