// The events of a recovery's gap, against an in-process peer serving TCP
// (`CopilotClient.connect`), where the order of what the CLI sends is the
// test's to choose: the connection drops after two events; on the next
// one, while the client reads the session's log back, the live stream
// brings an event the log also has and one it has not (ephemeral). Every
// event is delivered once, in the log's order, the held live ones after
// the log's.

import assert from "node:assert/strict";
import { createServer } from "node:net";
import { test } from "node:test";

import { CopilotClient } from "copilot-wasm";

import { Peer, eventually } from "./helpers.mjs";

const SESSION = "s-gap";
const event = (id, ephemeral = false) => ({
  type: ephemeral ? "assistant.message_delta" : "session.info",
  id,
  timestamp: "t",
  parentId: null,
  ...(ephemeral ? { ephemeral: true } : {}),
  data: {},
});
const notify = (e) => ({ jsonrpc: "2.0", method: "session.event", params: { sessionId: SESSION, event: e } });

test("the events of the gap are read back from the log and delivered once, in order, before the live ones held", async () => {
  // The log as the CLI keeps it (durable events only).
  const log = ["e1", "e2", "e3", "e4"].map((id) => event(id));
  const peers = [];
  const reads = [];
  const server = createServer((socket) => {
    let peer;
    const answer = (m) => {
      if (m.method === "session.create" || m.method === "session.resume") return { sessionId: SESSION };
      if (m.method === "session.eventLog.read") {
        reads.push(m.params);
        // While the log is read, the live stream brings e4 (in the log
        // too) and a delta (not in it).
        peer.send(notify(event("e4")));
        peer.send(notify(event("d5", true)));
        return { events: log, cursor: "c0", hasMore: false };
      }
      if (m.method.endsWith("pendingRequests") || m.method.endsWith("listPendingRequests")) return { items: [] };
      return {};
    };
    peer = new Peer((bytes) => socket.write(bytes), { answer });
    peer.socket = socket;
    socket.on("data", (b) => peer.receive(b));
    socket.on("error", () => {});
    peers.push(peer);
  });
  await new Promise((r) => server.listen(0, "127.0.0.1", r));
  let client;
  try {
    client = await CopilotClient.connect({ port: server.address().port });
    const steps = [];
    client.onRecovery((s) => steps.push(s));
    const session = await client.createSession({ sessionId: SESSION, onPermission: () => "approve-once" });
    const seen = [];
    session.on((e) => seen.push(e.id));
    peers[0].send(notify(event("e1")));
    peers[0].send(notify(event("e2")));
    await eventually(() => seen.length === 2, "the first two events", 5000);
    // The connection drops; e3 reaches only the log.
    peers[0].socket.destroy();
    await eventually(() => steps.some((s) => s.type === "recovered"), "the recovery", 30_000);
    await eventually(() => seen.length >= 5, "every event", 5000);
    assert.deepEqual(seen, ["e1", "e2", "e3", "e4", "d5"], "each once, in order");
    assert.deepEqual(
      reads.map((r) => [r.sessionId, r.direction, r.includeEphemeral]),
      [[SESSION, "backward", false]],
    );
    const resumed = steps.find((s) => s.type === "sessionResumed");
    assert.deepEqual([resumed?.gapEvents, resumed?.gap], [2, "whole"], "e3 and e4 from the log: the gap whole");
    // Nothing more comes: e4 is not delivered again.
    await client.ping();
    assert.equal(seen.length, 5);
  } finally {
    client?.forceStop();
    await new Promise((r) => server.close(r));
    for (const p of peers) p.socket.destroy();
  }
});

/**
 * A server whose session's log read answers `page(params, n)` (n from 0),
 * dropping the first connection when told; the client connected to it,
 * its recovery steps and the events its session saw.
 */
async function dropAndRecover({ before, page, join = false }) {
  const peers = [];
  const reads = [];
  const server = createServer((socket) => {
    const answer = (m) => {
      if (m.method === "session.create" || m.method === "session.resume") return { sessionId: SESSION };
      if (m.method === "session.eventLog.read") {
        reads.push(m.params);
        return page(m.params, reads.length - 1);
      }
      if (m.method.endsWith("pendingRequests") || m.method.endsWith("listPendingRequests")) return { items: [] };
      return {};
    };
    const peer = new Peer((bytes) => socket.write(bytes), { answer });
    peer.socket = socket;
    socket.on("data", (b) => peer.receive(b));
    socket.on("error", () => {});
    peers.push(peer);
  });
  await new Promise((r) => server.listen(0, "127.0.0.1", r));
  const client = await CopilotClient.connect({ port: server.address().port });
  const steps = [];
  client.onRecovery((s) => steps.push(s));
  const config = { onPermission: () => "approve-once" };
  const session = join
    ? await client.resumeSession(SESSION, config)
    : await client.createSession({ sessionId: SESSION, ...config });
  const seen = [];
  session.on((e) => seen.push(e.id));
  for (const e of before) peers[0].send(notify(e));
  await eventually(() => seen.length === before.length, "the events before the drop", 5000);
  peers[0].socket.destroy();
  await eventually(() => steps.some((s) => s.type === "recovered"), "the recovery", 30_000);
  const end = async () => {
    client.forceStop();
    await new Promise((r) => server.close(r));
    for (const p of peers) p.socket.destroy();
  };
  return { steps, seen, reads, end };
}

test("a gap whose last delivered event is not within the pages read is reported cut, and nothing of the log is delivered", async () => {
  // Every page has more further back, none holds e1.
  const { steps, seen, reads, end } = await dropAndRecover({
    before: [event("e1")],
    page: (_, n) => ({ events: [event(`old-${n}`)], cursor: `c${n}`, hasMore: true }),
  });
  try {
    assert.equal(reads.length, 10, "EVENT_LOG_MAX_PAGES pages read");
    const resumed = steps.find((s) => s.type === "sessionResumed");
    assert.deepEqual([resumed?.gapEvents, resumed?.gap], [0, "cut"]);
    assert.deepEqual(seen, ["e1"], "nothing of the log delivered");
  } finally {
    await end();
  }
});

test("a joined session with no durable event delivered before the loss: its gap is reported unmarked, and the log (history it never saw) is not read", async () => {
  const { steps, seen, reads, end } = await dropAndRecover({
    before: [event("d1", true)],
    page: () => assert.fail("the log is not read"),
    join: true,
  });
  try {
    assert.equal(reads.length, 0);
    const resumed = steps.find((s) => s.type === "sessionResumed");
    assert.deepEqual([resumed?.gapEvents, resumed?.gap], [0, "unmarked"]);
    assert.deepEqual(seen, ["d1"]);
  } finally {
    await end();
  }
});

test("a session created here with no durable event delivered before the loss has its whole log read back and delivered", async () => {
  // The log's start is reached on the second page.
  const pages = [
    { events: [event("e2"), event("e3")], cursor: "c0", hasMore: true },
    { events: [event("e1")], cursor: "c1", hasMore: false },
  ];
  const { steps, seen, reads, end } = await dropAndRecover({
    before: [event("d1", true)],
    page: (_, n) => pages[n],
  });
  try {
    assert.equal(reads.length, 2, "read back to the log's start");
    const resumed = steps.find((s) => s.type === "sessionResumed");
    assert.deepEqual([resumed?.gapEvents, resumed?.gap], [3, "whole"]);
    await eventually(() => seen.length === 4, "the log's events", 5000);
    assert.deepEqual(seen, ["d1", "e1", "e2", "e3"]);
  } finally {
    await end();
  }
});
