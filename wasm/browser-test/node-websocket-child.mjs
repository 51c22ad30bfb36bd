// Run by bridge.test.mjs with --experimental-websocket (Node 20; Node 22
// has the global WebSocket anyway): connects to the bridge given as
// argv[2] with the token argv[3], runs one scripted turn, prints a summary.

import { CopilotClient } from "../npm/src/node.js";

const [url, token] = process.argv.slice(2);
const client = await CopilotClient.connectWebSocket(`${url.replace("http:", "ws:")}ws`, { token });
const session = await client.createSession({ model: "claude-sonnet-4.5", streaming: true });
const types = [];
session.on((e) => types.push(e.type));
const scripted = await fetch(`${url}offline/script`, {
  method: "POST",
  headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
  body: JSON.stringify({ sessionId: session.id, replies: [{ text: "Hello to Node through the bridge." }] }),
});
if (!scripted.ok) throw new Error(`script refused: ${scripted.status}`);
const reply = await session.sendAndWait("Say hello", { timeoutMs: 120_000 });
await session.destroy();
await client.stop();
console.log(JSON.stringify({ version: client.serverInfo.version, reply: reply?.content, types }));
