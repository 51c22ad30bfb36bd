// Pending waits after a resume, through the engine: the client asks the
// CLI what is pending (the engine sends the two list requests), each wait
// listed but never sent is answered once by the handler of its kind, and a
// wait sent both as an event and in a list is answered once. Against an
// in-process peer over Node streams.

import assert from "node:assert/strict";
import { PassThrough } from "node:stream";
import { test } from "node:test";

import { CopilotClient } from "copilot-wasm";

import { Peer, eventually } from "./helpers.mjs";

const SESSION = "s-pending";
const TOOLS = "session.tools.listPendingRequests";
const PROMPTS = "session.permissions.pendingRequests";

const toolItem = (requestId) => ({
  requestId,
  toolCallId: `call-${requestId}`,
  toolName: "get_weather",
  arguments: { city: "Paris" },
});
const promptItem = (requestId) => ({
  requestId,
  request: { kind: "commands", fullCommandText: "echo hi > proof.txt", toolCallId: "t1" },
});
const event = (type, data) => ({
  jsonrpc: "2.0",
  method: "session.event",
  params: { sessionId: SESSION, event: { type, id: `e-${data.requestId}`, timestamp: "t", parentId: null, data } },
});
const toolEvent = (requestId) => event("external_tool.requested", { sessionId: SESSION, ...toolItem(requestId) });

/**
 * A client connected to a peer that answers the resume and the two lists
 * with `tools` and `prompts`; `beforeToolList` events go just before the
 * tool list's reply; `late[requestId]` goes just before an answer to it is
 * acknowledged.
 */
async function resumed({ tools = [], prompts = [], beforeToolList = [], late = {} }, config) {
  const toClient = new PassThrough();
  const fromClient = new PassThrough();
  let peer;
  const answer = (m) => {
    if (m.method === "session.resume") return { sessionId: SESSION };
    if (m.method === TOOLS) {
      for (const e of beforeToolList) peer.send(e);
      return { items: tools };
    }
    if (m.method === PROMPTS) return { items: prompts };
    if (m.method.includes(".handlePending")) {
      const first = peer.received.filter((r) => r.params?.requestId === m.params.requestId).length === 1;
      if (late[m.params.requestId]) peer.send(late[m.params.requestId]);
      return { success: first };
    }
    return {};
  };
  peer = new Peer((bytes) => toClient.write(bytes), { answer });
  fromClient.on("data", (b) => peer.receive(b));
  const client = await CopilotClient.fromStreams(toClient, fromClient);
  const session = await client.resumeSession(SESSION, config);
  return { client, peer, session };
}

function counting() {
  const seen = { tools: [], prompts: [] };
  const config = {
    tools: [
      {
        name: "get_weather",
        description: "The weather",
        parameters: { type: "object" },
        handler: (args, call) => (seen.tools.push({ args, toolCallId: call.toolCallId }), "sunny"),
      },
    ],
    onPermission: (request) => (seen.prompts.push(request.kind), "approve-once"),
  };
  return { seen, config };
}

const answers = (peer, requestId) =>
  peer.received.filter((m) => m.method?.includes(".handlePending") && m.params.requestId === requestId);

test("waits the CLI lists but never sends are answered once each by their handlers", async () => {
  const { seen, config } = counting();
  const { client, peer } = await resumed({ tools: [toolItem("r-tool")], prompts: [promptItem("r-prompt")] }, config);
  await eventually(() => answers(peer, "r-tool").length && answers(peer, "r-prompt").length, "both answers");
  assert.equal(peer.received.filter((m) => m.method === TOOLS).length, 1);
  assert.deepEqual(peer.received.find((m) => m.method === PROMPTS).params, { sessionId: SESSION });
  const tool = answers(peer, "r-tool")[0];
  assert.equal(tool.method, "session.tools.handlePendingToolCall");
  assert.deepEqual(tool.params.result, { textResultForLlm: "sunny", resultType: "success" });
  const prompt = answers(peer, "r-prompt")[0];
  assert.equal(prompt.method, "session.permissions.handlePendingPermissionRequest");
  assert.deepEqual(prompt.params.result, { kind: "approve-once" });
  // A round trip after the answers: every frame before it was routed.
  await client.ping();
  const stats = client.stats();
  assert.deepEqual([stats.opened, stats.listed, stats.openObligations, stats.answersSent], [2, 2, 0, 2]);
  assert.deepEqual(seen.tools, [{ args: { city: "Paris" }, toolCallId: "call-r-tool" }]);
  assert.deepEqual(seen.prompts, ["shell"], "the handler sees the permission kind of the listed prompt");
  await client.stop();
});

test("a wait sent both as an event and in a list is answered once", async () => {
  const { seen, config } = counting();
  const { client, peer, session } = await resumed(
    {
      beforeToolList: [toolEvent("r-first")],
      tools: [toolItem("r-first"), toolItem("r-listed")],
      prompts: [promptItem("p-listed")],
      late: {
        "r-listed": toolEvent("r-listed"),
        "p-listed": event("permission.requested", {
          requestId: "p-listed",
          permissionRequest: { ...promptItem("p-listed").request, kind: "shell" },
          promptRequest: promptItem("p-listed").request,
        }),
      },
    },
    config,
  );
  const delivered = [];
  session.on((e) => delivered.push(e.id));
  await eventually(
    () => ["r-first", "r-listed", "p-listed"].every((r) => answers(peer, r).length > 0),
    "the three answers",
  );
  await client.ping();
  const stats = client.stats();
  assert.deepEqual([stats.opened, stats.duplicateWaits, stats.openObligations], [3, 3, 0]);
  assert.deepEqual(
    ["r-first", "r-listed", "p-listed"].map((r) => answers(peer, r).length),
    [1, 1, 1],
  );
  assert.equal(seen.tools.length, 2);
  assert.equal(seen.prompts.length, 1);
  // The CLI's events are delivered, each once; the listed waits are not events.
  await eventually(() => delivered.length >= 3, "the three events");
  assert.deepEqual(delivered.sort(), ["e-p-listed", "e-r-first", "e-r-listed"]);
  await client.stop();
});
