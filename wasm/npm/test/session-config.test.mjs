// The typed session config on the wire, and the answers whose shape it
// decides (permission context and no-result, tool failures, section
// transforms, provider tokens), against an in-process peer; and the
// handler kinds the package offers against the ones it answers.

import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { PassThrough } from "node:stream";
import { test } from "node:test";

import {
  CopilotClient,
  HANDLER_OPTIONS,
  GENERIC_HANDLER_KINDS,
  Session,
  approveAll,
  genericRequestNames,
  loadWasm,
  withDecisionContext,
} from "copilot-wasm";

import { Peer, eventually } from "./helpers.mjs";

/** A client over Node streams to a peer that answers like the CLI. */
async function connected(options = {}) {
  const toClient = new PassThrough();
  const fromClient = new PassThrough();
  const peer = new Peer((bytes) => toClient.write(bytes), {
    answer: (m) => {
      if (m.method === "session.create" || m.method === "session.resume") return { sessionId: m.params.sessionId };
      return m.method.startsWith("session.") ? { success: true } : undefined;
    },
  });
  fromClient.on("data", (b) => peer.receive(b));
  const client = await CopilotClient.fromStreams(toClient, fromClient, options);
  return { client, peer };
}

const event = (sessionId, type, data) => ({
  jsonrpc: "2.0",
  method: "session.event",
  params: { sessionId, event: { type, data, id: `${type}-${Math.random()}`, timestamp: "t", parentId: null } },
});

const answerTo = (peer, method, requestId) =>
  peer.waitFor((m) => m.method === method && m.params?.requestId === requestId);

test("every option goes on the wire under the official name, with the official defaults", async () => {
  const { client, peer } = await connected();
  const bare = await client.createSession({});
  const p = (await peer.waitFor((m) => m.method === "session.create")).params;
  assert.deepEqual(p, {
    sessionId: bare.id,
    requestPermission: false,
    requestUserInput: false,
    requestElicitation: false,
    requestExitPlanMode: false,
    requestAutoModeSwitch: false,
    envValueMode: "direct",
    toolFilterPrecedence: "excluded",
    streaming: false,
    includeSubAgentStreamingEvents: true,
  });

  const s = await client.createSession({
    model: "m",
    configDirectory: "/cfg",
    enableExperimentalMode: true,
    systemMessage: {
      mode: "customize",
      sections: { tone: { action: "replace", content: "Be terse." }, identity: { action: (t) => t } },
    },
    excludedTools: ["bash"],
    provider: { type: "anthropic", baseUrl: "https://llm.example", bearerTokenProvider: async () => "t" },
    mcpServers: { local: { command: "node", args: ["s.js"], workingDirectory: "/w" }, remote: { type: "http", url: "u" } },
    customAgents: [{ name: "reviewer", prompt: "Review.", mcpServers: { x: { command: "y" } } }],
    enableMcpApps: true,
    tools: [{ name: "view", overridesBuiltInTool: true, handler: () => "x" }],
  });
  const q = (await peer.waitFor((m) => m.method === "session.create" && m.params.sessionId === s.id)).params;
  assert.equal(q.configDir, "/cfg");
  assert.equal(q.isExperimentalMode, true);
  assert.deepEqual(q.systemMessage, {
    mode: "customize",
    sections: { tone: { action: "replace", content: "Be terse." }, identity: { action: "transform" } },
  });
  assert.deepEqual(q.excludedTools, ["bash"]);
  assert.deepEqual(q.provider, { type: "anthropic", baseUrl: "https://llm.example", hasBearerTokenProvider: true });
  assert.deepEqual(q.mcpServers, {
    local: { type: "local", command: "node", args: ["s.js"], cwd: "/w" },
    remote: { type: "http", url: "u" },
  });
  assert.deepEqual(q.customAgents[0].mcpServers, { x: { type: "local", command: "y", args: [] } });
  assert.equal(q.requestMcpApps, true);
  assert.equal(q.enableMcpApps, undefined);
  assert.deepEqual(q.tools, [{ name: "view", description: "", parameters: { type: "object" }, overridesBuiltInTool: true }]);

  await client.resumeSession(bare.id, { suppressResumeEvent: true, continuePendingWork: true });
  const r = (await peer.waitFor((m) => m.method === "session.resume")).params;
  assert.deepEqual([r.disableResume, r.continuePendingWork, r.suppressResumeEvent], [true, true, undefined]);
  await client.stop();
});

test("a permission decision carries its context; no-result sends nothing and is counted as declined", async () => {
  const { client, peer } = await connected();
  const context = { outcome: "auto_approved", source: "host_policy", surface: "sdk" };
  const s = await client.createSession({
    onPermission: (r) => (r.toolCallId === "leave" ? "no-result" : withDecisionContext(approveAll(), context)),
  });
  const method = "session.permissions.handlePendingPermissionRequest";
  peer.send(event(s.id, "permission.requested", { requestId: "p-leave", permissionRequest: { kind: "shell", toolCallId: "leave" } }));
  await eventually(() => client.stats().declined === 1, "the decline is counted");
  peer.send(event(s.id, "permission.requested", { requestId: "p-ok", permissionRequest: { kind: "shell", toolCallId: "ok" } }));
  const a = await answerTo(peer, method, "p-ok");
  assert.deepEqual(a.params.result, { kind: "approve-once" });
  assert.deepEqual(a.params.decisionContext, context);
  assert.equal(peer.received.filter((m) => m.params?.requestId === "p-leave").length, 0, "nothing for the declined one");
  const stats = client.stats();
  assert.deepEqual([stats.declined, stats.answered, stats.openObligations], [1, 1, 0]);
  await client.stop();
});

test("command.queued without a handler: nothing is sent (left to the app or another client), counted", async () => {
  const { client, peer } = await connected();
  const s = await client.createSession({ onPermission: approveAll });
  peer.send(event(s.id, "command.queued", { requestId: "q1", command: "/compact" }));
  // A wait with a handler after it: answered once the queued command was decided.
  peer.send(event(s.id, "permission.requested", { requestId: "p1", permissionRequest: { kind: "shell" } }));
  await answerTo(peer, "session.permissions.handlePendingPermissionRequest", "p1");
  await eventually(() => client.stats().declined === 1, "the queued command left");
  assert.equal(peer.received.filter((m) => m.params?.requestId === "q1").length, 0, "nothing for the queued command");
  const stats = client.stats();
  const refused = Object.values(stats.refused).reduce((a, b) => a + b, 0);
  assert.deepEqual([stats.declined, stats.leftOpen, stats.openObligations, refused], [1, 1, 0, 0]);
  await client.stop();
});

test("a tool that throws sends its error in place of a result; a failure result is read as given", async () => {
  const errors = [];
  const { client, peer } = await connected({ logger: { error: (m) => errors.push(m) } });
  const s = await client.createSession({
    tools: [
      { name: "failing", handler: () => { throw new Error("db password wrong: hunter2"); } },
      { name: "typed", handler: () => ({ textResultForLlm: "No such city; try another.", resultType: "failure" }) },
    ],
  });
  const method = "session.tools.handlePendingToolCall";
  for (const [id, name] of [["t1", "failing"], ["t2", "typed"]]) {
    peer.send(event(s.id, "external_tool.requested", { requestId: id, sessionId: s.id, toolCallId: id, toolName: name }));
  }
  // As the official SDK sends it: `{requestId, error}`, no result (the CLI
  // tells the model only that the tool failed).
  const failed = (await answerTo(peer, method, "t1")).params;
  assert.equal(failed.error, "db password wrong: hunter2");
  assert.equal(failed.result, undefined);
  assert.ok(errors.some((e) => e.includes("hunter2")), "the error is logged");
  assert.deepEqual((await answerTo(peer, method, "t2")).params.result, {
    textResultForLlm: "No such city; try another.",
    resultType: "failure",
  });
  await client.stop();
});

test("section transforms and provider tokens answer the CLI's requests", async () => {
  const { client, peer } = await connected();
  const s = await client.createSession({
    systemMessage: {
      mode: "customize",
      sections: {
        identity: { action: async (t) => `${t} (transformed)` },
        tone: {
          action: () => {
            throw new Error("a transform that fails");
          },
        },
      },
    },
    provider: { baseUrl: "http://x", bearerTokenProvider: async ({ providerName }) => `token-for-${providerName}` },
  });
  const bare = await client.createSession({});
  const response = (id) => peer.waitFor((m) => m.id === id && (m.result || m.error));
  const sections = { identity: { content: "I am X." }, tone: { content: "Calm." }, safety: { content: "S." } };
  peer.send({ jsonrpc: "2.0", id: 901, method: "systemMessage.transform", params: { sessionId: s.id, sections } });
  assert.deepEqual((await response(901)).result, {
    sections: { identity: { content: "I am X. (transformed)" }, tone: { content: "Calm." }, safety: { content: "S." } },
  });
  peer.send({ jsonrpc: "2.0", id: 902, method: "systemMessage.transform", params: { sessionId: bare.id, sections } });
  assert.ok((await response(902)).error, "no transforms: refused (the CLI keeps the text)");
  peer.send({ jsonrpc: "2.0", id: 903, method: "providerToken.getToken", params: { sessionId: s.id, providerName: "default" } });
  assert.deepEqual((await response(903)).result, { token: "token-for-default" });
  peer.send({ jsonrpc: "2.0", id: 904, method: "providerToken.getToken", params: { sessionId: bare.id, providerName: "default" } });
  assert.ok((await response(904)).error, "no callback: refused");
  await client.stop();
});

test("the handler kinds offered are the kinds a handler is called for", async () => {
  // Every kind the engine reports, from the shipped types.
  const require = createRequire(import.meta.url);
  const types = join(dirname(require.resolve("copilot-wasm/package.json")), "types", "index.d.ts");
  const dts = readFileSync(types, "utf8");
  const union = dts.slice(dts.indexOf("export type HandlerKind ="));
  const kinds = [...union.slice(0, union.indexOf(";")).matchAll(/"(\w+)"/g)].map((m) => m[1]);
  assert.ok(kinds.length > 20, `${kinds.length} kinds`);
  const everything = {
    onPermission: approveAll,
    tools: [{ name: "t", handler: () => "ok" }],
    onUserInput: () => "a",
    onElicitation: () => "cancel",
    onMcpOAuth: () => null,
    onExitPlanMode: () => false,
    commands: [{ name: "c", handler: () => {} }],
    systemMessage: { mode: "customize", sections: { identity: { action: (t) => t } } },
    provider: { baseUrl: "http://x", bearerTokenProvider: () => "t" },
    hooks: { onPreToolUse: () => undefined },
    canvases: [{ id: "cv", displayName: "C", description: "", open: () => ({}) }],
  };
  // The generic kinds are answered by name: a handler for every name.
  await loadWasm();
  const names = genericRequestNames();
  everything.requestHandlers = Object.fromEntries(names.map((n) => [n, () => ({})]));
  const session = new Session({ _logger: {} }, 1, "s", everything);
  const offered = new Set([...Object.values(HANDLER_OPTIONS), ...GENERIC_HANDLER_KINDS]);
  // Data with every member the handlers read (the core refuses a wait
  // without them before any handler is asked: HandlerKind::reads).
  const data = {
    permissionRequest: {},
    toolName: "t",
    question: "q",
    message: "m",
    serverName: "s",
    serverUrl: "u",
    commandName: "c",
    sections: {},
    providerName: "default",
    hookType: "preToolUse",
    canvasId: "cv",
  };
  for (const kind of kinds) {
    // A kind with a handler asks it; the others are refused for want of one.
    const name = GENERIC_HANDLER_KINDS.includes(kind) ? names[0] : kind === "canvas" ? "canvas.open" : undefined;
    const r = await session._decide(kind, data, "s", name).catch(() => ({ threw: true }));
    assert.equal(r.refuse === "noHandler", !offered.has(kind), kind);
  }
});

test("options nested deeper than the engine reads are a ConfigError, and nothing is sent", async () => {
  const { client, peer } = await connected();
  let deep = 1;
  for (let i = 0; i < 200; i++) deep = [deep];
  await assert.rejects(client.createSession({ managedSettings: { x: deep } }), {
    name: "ConfigError",
    message: /128/,
  });
  // The client goes on; the refused create never reached the peer.
  const s = await client.createSession({});
  const creates = peer.received.filter((m) => m.method === "session.create");
  assert.deepEqual(creates.map((m) => m.params.sessionId), [s.id]);
  await client.stop();
});

test("the core's messages reach the user as their texts, though the module carries them as tokens", async () => {
  const warnings = [];
  const toClient = new PassThrough();
  const fromClient = new PassThrough();
  const peer = new Peer((bytes) => toClient.write(bytes), {
    answer: (m) => (m.method === "session.create" ? { sessionId: m.params.sessionId } : { success: true }),
  });
  fromClient.on("data", (b) => peer.receive(b));
  const client = await CopilotClient.fromStreams(toClient, fromClient, { logger: { warn: (m) => warnings.push(m) } });
  const first = await client.createSession({ sessionId: "twice" });
  // The engine's refusal of a second session with the same id.
  await assert.rejects(client.createSession({ sessionId: "twice" }), (e) => {
    assert.match(e.message, /a session with this id is already open/);
    assert.doesNotMatch(e.message, /\u0003/);
    return true;
  });
  // A frame whose body is not JSON: the engine's parse error, logged.
  toClient.write("Content-Length: 5\r\n\r\n{nope");
  await eventually(() => warnings.some((w) => w.includes("parse error: unexpected byte at byte 1")));
  assert.ok(warnings.every((w) => !w.includes("\u0003")), warnings.join("\n"));
  await first.destroy();
  await client.stop();
});

test("a client that connects refuses the options that start a CLI, before anything is sent", async () => {
  const written = [];
  const toClient = new PassThrough();
  const fromClient = new PassThrough();
  fromClient.on("data", (b) => written.push(b));
  for (const [name, value] of [
    ["authToken", "ghp_x"],
    ["cliPath", "/bin/copilot"],
    ["args", ["--x"]],
    ["telemetry", {}],
  ]) {
    await assert.rejects(CopilotClient.fromStreams(toClient, fromClient, { [name]: value }), (e) => {
      assert.equal(e.name, "ConfigError");
      assert.ok(e.message.endsWith(name), e.message);
      assert.ok(!e.message.includes("ghp_x"), e.message);
      return true;
    });
  }
  await assert.rejects(CopilotClient.connect({ port: 1, authToken: "ghp_x" }), { name: "ConfigError" });
  assert.equal(written.length, 0, "nothing was sent");
});
