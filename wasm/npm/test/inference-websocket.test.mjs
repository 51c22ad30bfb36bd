// WebSocket model requests through the inference request handler, against
// an in-process peer playing the CLI's side as the real CLI 1.0.102 does
// (tests/tests/inference_websocket_real_cli.rs): `httpRequestStart` with
// `transport: "websocket"`, the messages after the client's 101 head, one
// `httpRequestChunk` each, then the CLI's end. What the client sends back
// is read from what the peer received, in order; the same as
// tests/tests/inference_websocket.rs checks of the Rust host.

import assert from "node:assert/strict";
import { createServer } from "node:net";
import { PassThrough } from "node:stream";
import { test } from "node:test";

import { CopilotClient, CopilotRequestHandler, CopilotWebSocketHandler } from "copilot-wasm";

import { Peer, eventually } from "./helpers.mjs";

const pkg = import.meta.resolve("copilot-wasm/package.json");
const { default: POLICY } = await import(new URL("dist/policy.js", pkg));

/** A model behind a WebSocket: answers each message with `reply to ` and its text; fails on "fail". */
class Model extends CopilotWebSocketHandler {
  constructor(ctx, log) {
    super(ctx);
    this.log = log;
  }

  async sendRequestMessage(data) {
    this.log.push(typeof data === "string" ? data : [...data]);
    if (data === "fail") throw new Error("the model backend is down");
    await this.sendResponseMessage(`reply to ${typeof data === "string" ? data : "bytes"}`);
  }

  async close(status) {
    this.log.push("closed");
    await super.close(status);
  }
}

class Serving extends CopilotRequestHandler {
  log = [];

  openWebSocket(ctx) {
    this.log.push(`opened ${ctx.url} ${ctx.transport}`);
    return new Model(ctx, this.log);
  }
}

async function connected(requestHandler) {
  const toClient = new PassThrough();
  const fromClient = new PassThrough();
  const peer = new Peer((bytes) => toClient.write(bytes), {
    answer: (m) => {
      if (m.method === "llmInference.setProvider") return { success: true };
      if (m.method.startsWith("llmInference.httpResponse")) return { accepted: true };
      return undefined;
    },
  });
  fromClient.on("data", (b) => peer.receive(b));
  const client = await CopilotClient.fromStreams(toClient, fromClient, { requestHandler });
  let n = 0;
  /** The CLI's request; the client acknowledges it. */
  const cliSends = async (method, params) => {
    const id = `cli-${n++}`;
    peer.send({ jsonrpc: "2.0", id, method, params });
    const answer = await peer.waitFor((m) => m.id === id && m.method === undefined);
    assert.deepEqual(answer.result, {}, JSON.stringify(answer));
  };
  /** What the client sent for request `id`, in order. */
  const sent = (id) =>
    peer.received
      .filter((m) => m.method?.startsWith("llmInference.httpResponse") && m.params.requestId === id)
      .map((m) => m.params);
  const open = (id) =>
    cliSends("llmInference.httpRequestStart", {
      requestId: id,
      method: "GET",
      url: "ws://127.0.0.1:9/responses",
      transport: "websocket",
      sessionId: "s1",
      headers: { authorization: ["Bearer sekrit"] },
    });
  const message = (id, data, more = {}) => cliSends("llmInference.httpRequestChunk", { requestId: id, data, ...more });
  return { client, peer, sent, open, message };
}

test("a WebSocket carries messages both ways, in order, and is closed once", async () => {
  const handler = new Serving();
  const { client, sent, open, message } = await connected(handler);
  try {
    await open("ws-1");
    // As the real CLI: no message before the 101 head.
    await eventually(() => sent("ws-1").some((p) => p.status === 101), "the 101 head");
    await message("ws-1", "one");
    await message("ws-1", "two");
    await message("ws-1", "AP8=", { binary: true });
    await message("ws-1", "three");
    await message("ws-1", "", { end: true });
    await eventually(() => handler.log.includes("closed"), "the close");
    assert.deepEqual(handler.log, [
      "opened ws://127.0.0.1:9/responses websocket",
      "one",
      "two",
      [0, 255],
      "three",
      "closed",
    ]);
    // Closed after the CLI was sent the end: everything the client sent is here.
    const shape = sent("ws-1").map((p) => (p.status ? `head ${p.status}` : p.end ? "end" : p.data));
    assert.deepEqual(shape, ["head 101", "reply to one", "reply to two", "reply to bytes", "reply to three", "end"]);
    assert.ok(sent("ws-1").every((p) => p.error === undefined));
  } finally {
    client.forceStop();
  }
});

test("a handler without WebSocket support refuses, so that the CLI uses HTTP", async () => {
  const { client, sent, open } = await connected(new CopilotRequestHandler());
  try {
    await open("ws-2");
    await eventually(() => sent("ws-2").some((p) => p.end), "the refusal");
    const [status, message, code] = POLICY.inference.websocket.ends.unsupported;
    assert.equal(status, 501);
    assert.deepEqual(sent("ws-2"), [
      { requestId: "ws-2", status, headers: {} },
      { requestId: "ws-2", data: "", end: true, error: { message, code } },
    ]);
  } finally {
    client.forceStop();
  }
});

test("a handler that throws ends the WebSocket with its error, once", async () => {
  const handler = new Serving();
  const { client, sent, open, message } = await connected(handler);
  try {
    await open("ws-3");
    await eventually(() => sent("ws-3").some((p) => p.status === 101), "the 101 head");
    await message("ws-3", "hello");
    await message("ws-3", "fail");
    await eventually(() => handler.log.includes("closed"), "the close");
    // Later messages of the ended WebSocket reach no handler.
    await message("ws-3", "late");
    await message("ws-3", "", { end: true });
    await client.ping();
    assert.deepEqual(handler.log.slice(1), ["hello", "fail", "closed"]);
    const all = sent("ws-3");
    assert.equal(all.length, 3, JSON.stringify(all));
    assert.deepEqual(all.slice(0, 2), [
      { requestId: "ws-3", status: 101, headers: {} },
      { requestId: "ws-3", data: "reply to hello" },
    ]);
    assert.deepEqual(all[2], { requestId: "ws-3", data: "", end: true, error: { message: "the model backend is down" } });
  } finally {
    client.forceStop();
  }
});

test("a WebSocket open when the client stops is ended, and its handler closed", async () => {
  const handler = new Serving();
  const { client, sent, open } = await connected(handler);
  await open("ws-4");
  await eventually(() => sent("ws-4").some((p) => p.status === 101), "the 101 head");
  client.forceStop();
  await eventually(() => handler.log.includes("closed"), "the close");
  assert.deepEqual(handler.log.slice(1), ["closed"]);
});

test("a WebSocket of a connection lost is ended and its handler closed when the client connects again", async () => {
  const handler = new Serving();
  const peers = [];
  const server = createServer((socket) => {
    const peer = new Peer((bytes) => socket.write(bytes), {
      answer: (m) => (m.method === "llmInference.setProvider" ? { success: true } : m.method.startsWith("llmInference") ? { accepted: true } : {}),
    });
    peer.socket = socket;
    socket.on("data", (b) => peer.receive(b));
    socket.on("error", () => {});
    peers.push(peer);
  });
  await new Promise((r) => server.listen(0, "127.0.0.1", r));
  let client;
  try {
    client = await CopilotClient.connect({ port: server.address().port, requestHandler: handler });
    const steps = [];
    client.onRecovery((s) => steps.push(s.type));
    const start = { requestId: "ws-5", method: "GET", url: "ws://127.0.0.1:9/responses", transport: "websocket", headers: {} };
    peers[0].send({ jsonrpc: "2.0", id: "cli-0", method: "llmInference.httpRequestStart", params: start });
    await peers[0].waitFor((m) => m.params?.requestId === "ws-5" && m.params.status === 101);
    peers[0].socket.destroy();
    await eventually(() => steps.includes("recovered"), "the recovery", 30_000);
    await eventually(() => handler.log.includes("closed"), "the close");
    assert.ok(peers[1].received.some((m) => m.method === "llmInference.setProvider"), "registered again");
    assert.deepEqual(handler.log.slice(1), ["closed"]);
  } finally {
    client?.forceStop();
    await new Promise((r) => server.close(r));
    for (const p of peers) p.socket.destroy();
  }
});
