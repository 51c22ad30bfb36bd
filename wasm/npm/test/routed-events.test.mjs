// The events the core routes reach the session as the CLI wrote them: each
// read's plain events come back from the engine as their text and their
// session's tag (not inside a JSON batch), and are parsed once in JS. Here,
// against an in-process peer: events cut at every byte boundary between
// two reads arrive whole, once and in order, each equal to `JSON.parse` of
// its text (escapes, non-ASCII text, a surrogate pair); plain events,
// responses and a wait to answer in one read keep the stream's order.

import assert from "node:assert/strict";
import { PassThrough } from "node:stream";
import { test } from "node:test";

import { CopilotClient, approveAll } from "copilot-wasm";

import { Peer, eventually, frame } from "./helpers.mjs";

/** A client over Node streams to a peer that answers every call; the peer's writes go to `toClient`. */
async function connected() {
  const toClient = new PassThrough();
  const fromClient = new PassThrough();
  const peer = new Peer((bytes) => toClient.write(bytes), {
    answer: (m) => (m.method === "session.create" ? { sessionId: m.params.sessionId } : { success: true }),
  });
  fromClient.on("data", (b) => peer.receive(b));
  const client = await CopilotClient.fromStreams(toClient, fromClient);
  return { client, peer, toClient };
}

/** The text of a `session.event` notification around `event` (JSON text, written as is). */
const notification = (sessionId, event) =>
  `{"jsonrpc":"2.0","method":"session.event","params":{"sessionId":${JSON.stringify(sessionId)},"event":${event}}}`;

/** Lets the client read what was written so far, as a read of its own. */
const nextRead = () => new Promise((resolve) => setImmediate(resolve));

test("events cut at every byte boundary arrive whole, once, in order, equal to JSON.parse of their text", async () => {
  const { client, toClient } = await connected();
  const session = await client.createSession({});
  const seen = [];
  session.on((e) => seen.push(e));
  // Escapes of every kind, text in several scripts written as UTF-8 (two,
  // three and four bytes a character) and as a surrogate pair escaped.
  const events = (k) => [
    `{"type":"assistant.message_delta","id":"${k}-a","data":{"deltaContent":"quote \\" backslash \\\\ line\\nfeed \\t \\u0000 \\/ é ü"}}`,
    `{"type":"assistant.message","id":"${k}-b","parentId":null,"ephemeral":false,"data":{"content":"日本語 😀 \\ud83d\\ude00 Ωmega","n":[1.5e3,-0,true,null,{}]}}`,
    `{"id":"${k}-c","type":"session.info","data":{}}`,
  ];
  const expected = [];
  const boundaries = new TextEncoder().encode(events(0).map((e) => notification(session.id, e)).join("")).length;
  for (let k = 0; k <= boundaries; k++) {
    const texts = events(String(k).padStart(4, "0"));
    const bytes = Buffer.concat(texts.map((e) => frame(notification(session.id, e))));
    // The same cut in every frame's bytes of this round: the first read
    // ends k bytes into the stream.
    toClient.write(bytes.subarray(0, k));
    await nextRead();
    toClient.write(bytes.subarray(k));
    await nextRead();
    expected.push(...texts.map((e) => JSON.parse(e)));
  }
  await eventually(() => seen.length >= expected.length, `${expected.length} events delivered`);
  assert.equal(seen.length, expected.length, "each event once");
  for (let i = 0; i < expected.length; i++) assert.deepEqual(seen[i], expected[i], `event ${i}`);
  // As plain as JSON.parse's own objects: the same JSON back.
  assert.equal(JSON.stringify(seen[1]), JSON.stringify(expected[1]));
  await client.stop();
});

test("plain events, a response and a wait to answer in one read keep the stream's order", async () => {
  const { client, peer, toClient } = await connected();
  const session = await client.createSession({ onPermission: approveAll });
  const seen = [];
  session.on((e) => seen.push(e.id));
  const event = (id, type = "session.info", data = {}) => notification(session.id, JSON.stringify({ id, type, data }));
  toClient.write(
    Buffer.concat([
      frame(event("1")),
      frame(event("2", "permission.requested", { requestId: "r1", permissionRequest: { kind: "shell" } })),
      frame(event("3")),
      // A response nobody waits for, between events.
      frame(`{"jsonrpc":"2.0","id":999,"result":{}}`),
      frame(event("4")),
    ]),
  );
  await eventually(() => seen.length === 4, "four events delivered");
  assert.deepEqual(seen, ["1", "2", "3", "4"], "the wait's event is delivered in its place");
  const answer = await peer.waitFor((m) => m.params?.requestId === "r1");
  assert.equal(typeof answer.method, "string", "the wait is answered");
  await client.stop();
});
