// The JS client follows the core's policy (dist/policy.js, which the core's
// tests hold to the core), against an in-process peer: the requests after
// an open (registerInterest for an MCP OAuth handler), the bounds of the
// events kept for a late first subscriber (by count and by bytes), which
// handler kinds a generic request handler answers, the session options and
// their wire names, the hook types and a hook's default input, the
// elicitation accept default, the shape of every typed handler's answer,
// the stop's steps, where the CLI is looked for, and a session's
// capabilities in frame order with a UI call refused without sending.

import assert from "node:assert/strict";
import { PassThrough } from "node:stream";
import { test } from "node:test";

import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { delimiter, join } from "node:path";

import {
  CREATE_ONLY_OPTIONS,
  CopilotClient,
  GENERIC_HANDLER_KINDS,
  RESUME_ONLY_OPTIONS,
  RpcError,
  SESSION_OPTIONS,
  CapabilityError,
  genericRequestNames,
  loadWasm,
  resolveCli,
} from "copilot-wasm";

/** The package as installed: its policy and glue are read by path (not exported). */
const pkg = new URL(".", import.meta.resolve("copilot-wasm/package.json"));
const { default: policy } = await import(new URL("dist/policy.js", pkg));

import { Peer, eventually, frame, isolatedEnv, realCli, refusingProxy, tempDir } from "./helpers.mjs";

/** A client over Node streams to a peer; `answer(m)` answers the rest. */
async function connected(answer) {
  const toClient = new PassThrough();
  const fromClient = new PassThrough();
  const peer = new Peer((bytes) => toClient.write(bytes), { answer });
  fromClient.on("data", (b) => peer.receive(b));
  const client = await CopilotClient.fromStreams(toClient, fromClient);
  return { client, peer };
}

/** Answers like the CLI, but for registerInterest: the test answers it. */
const opens = (m) => {
  if (m.method === "session.create" || m.method === "session.resume") {
    return { sessionId: m.params.sessionId ?? `assigned-${m.id}` };
  }
  if (m.method === "session.eventLog.registerInterest") return undefined;
  return m.method.startsWith("session.") ? { success: true } : undefined;
};

const event = (sessionId, id, data) => ({
  jsonrpc: "2.0",
  method: "session.event",
  params: { sessionId, event: { type: "session.info", data, id, timestamp: "t", parentId: null } },
});

test("with an MCP OAuth handler, interest in mcp.oauth_required is registered before the session is handed over", async () => {
  const { client, peer } = await connected(opens);
  assert.deepEqual(policy.followUps, [
    { handler: "mcpOAuth", method: "session.eventLog.registerInterest", eventType: "mcp.oauth_required" },
  ]);
  const interest = (m) => m.method === "session.eventLog.registerInterest";

  // Without the handler: nothing after the create.
  const bare = await client.createSession({});
  await client.ping();
  assert.equal(peer.received.filter(interest).length, 0);

  // With it: the create, then the interest, answered before createSession resolves.
  let handed = false;
  const opening = client.createSession({ onMcpOAuth: () => null }).then((s) => {
    handed = true;
    return s;
  });
  const asked = await peer.waitFor(interest);
  const create = peer.received.findLast((m) => m.method === "session.create");
  assert.ok(peer.received.indexOf(create) < peer.received.indexOf(asked), "after the create");
  assert.deepEqual(asked.params, { sessionId: create.params.sessionId, eventType: "mcp.oauth_required" });
  await client.ping();
  assert.equal(handed, false, "not handed over before the interest is answered");
  peer.send({ jsonrpc: "2.0", id: asked.id, result: { handle: "h1" } });
  const session = await opening;
  assert.equal(session.id, create.params.sessionId);
  assert.equal(session.active, true);

  // A resume with the handler registers too; one that fails fails the open.
  const resuming = client.resumeSession(bare.id, { onMcpOAuth: () => null });
  const again = await peer.waitFor((m) => interest(m) && m.params.sessionId === bare.id);
  peer.send({ jsonrpc: "2.0", id: again.id, error: { code: -32000, message: "no interest" } });
  await assert.rejects(resuming, (e) => e instanceof RpcError && e.method === "session.eventLog.registerInterest");
  assert.equal(client.stats().sessions, 1, "the failed open's session is released");
  await client.stop();
});

test("events kept for a late first subscriber stop at the core's byte bound, and none after one left out", async () => {
  const { client, peer } = await connected(opens);
  const { maxKeptBytes, maxKeptEvents } = policy.limits;
  assert.ok(maxKeptEvents > 10 && maxKeptBytes >= 1 << 20, JSON.stringify(policy.limits));
  const session = await client.createSession({});
  // Three events of a quarter of the bound fit; a fourth of a third does
  // not; a small one after it is not kept either (kept events stay a prefix).
  const big = (n) => ({ text: "x".repeat(n) });
  peer.send(event(session.id, "a", big(maxKeptBytes / 4 - 100)));
  peer.send(event(session.id, "b", big(maxKeptBytes / 4 - 100)));
  peer.send(event(session.id, "c", big(maxKeptBytes / 4 - 100)));
  peer.send(event(session.id, "d", big(maxKeptBytes / 3)));
  peer.send(event(session.id, "e", {}));
  await eventually(() => session.stats().events === 5, "five events delivered");
  assert.deepEqual(session.stats(), { events: 5, notKept: 2 });
  const seen = [];
  session.on((e) => seen.push(e.id));
  peer.send(event(session.id, "f", {}));
  await eventually(() => seen.includes("f"), "the event after the subscription");
  assert.deepEqual(seen, ["a", "b", "c", "f"]);
  await client.stop();
});

test("the kinds a generic request handler answers are the core's", async () => {
  await loadWasm();
  const { default: policy } = await import(new URL("dist/policy.js", pkg));
  const generic = policy.genericRows;
  assert.ok(generic.length > 10 && generic.every((r) => policy.genericKinds.includes(r.handler)), `${generic.length}`);
  assert.deepEqual(genericRequestNames(), generic.map((r) => r.name));
  assert.deepEqual(new Set(GENERIC_HANDLER_KINDS), new Set(generic.map((r) => r.handler)));
});

test("the real CLI accepts the interest: a session with an MCP OAuth handler opens and runs", { timeout: 120_000 }, async () => {
  const { dir, cleanup } = tempDir("copilot-wasm-policy");
  const client = await CopilotClient.start({
    cliPath: realCli(),
    env: isolatedEnv(dir, await refusingProxy()),
    cwd: dir,
    args: ["--no-auto-login"],
  });
  try {
    const session = await client.createSession({ onMcpOAuth: () => null });
    assert.equal(session.active, true);
    // The session is usable after the follow-up: a call on it is answered.
    assert.ok(Array.isArray(await session.getMessages()));
    await session.destroy();
  } finally {
    await client.stop();
    cleanup();
  }
});

test("stop follows the core's steps: every open session destroyed, no runtime.shutdown to a CLI this client did not start", async () => {
  assert.deepEqual(
    policy.stop.map((s) => s.step),
    ["destroySessions", "shutdownRuntime", "closeWriter", "awaitExitOrKill", "release"],
  );
  const { client, peer } = await connected(opens);
  const a = await client.createSession({});
  const b = await client.createSession({});
  await client.stop();
  const destroyed = peer.received.filter((m) => m.method === "session.destroy").map((m) => m.params.sessionId);
  assert.deepEqual(destroyed.sort(), [a.id, b.id].sort());
  assert.equal(peer.received.filter((m) => m.method === "runtime.shutdown").length, 0);
  assert.equal(client.closed, true);
  assert.equal(a.active || b.active, false);
});

test("the session options are the core's, sent under the core's wire names", async () => {
  const { options } = policy;
  assert.deepEqual(SESSION_OPTIONS, options.both);
  assert.deepEqual(CREATE_ONLY_OPTIONS, options.createOnly);
  assert.deepEqual(RESUME_ONLY_OPTIONS, options.resumeOnly);
  const { client, peer } = await connected(opens);
  const sent = async (method, config) => {
    const session =
      method === "session.create" ? await client.createSession(config) : await client.resumeSession("r", config);
    assert.ok(session.id);
    return peer.received.findLast((m) => m.method === method).params;
  };
  for (const [key, wire] of Object.entries(options.wire)) {
    const method = options.resumeOnly.includes(key) ? "session.resume" : "session.create";
    const value = key === "configDirectory" ? "/cfg" : true;
    const params = await sent(method, { [key]: value });
    if (wire === null) assert.ok(!(key in params), `${key} is not sent`);
    else {
      assert.equal(params[wire], value, `${key} goes as ${wire}`);
      assert.ok(!(key in params) || key === wire, `${key} is not sent under its own name`);
    }
  }
  for (const key of options.onlyWhenTrue) {
    const method = options.resumeOnly.includes(key) ? "session.resume" : "session.create";
    const name = options.wire[key] ?? key;
    assert.ok(!(name in (await sent(method, { [key]: false }))), `${key}: false is left out`);
    assert.equal((await sent(method, { [key]: true }))[name], true, `${key}: true is sent`);
  }
  await client.stop();
});

test("the hooks are the core's hook types; a call without input gets the core's default", async () => {
  const dts = readFileSync(new URL("types/index.d.ts", pkg), "utf8");
  const declared = dts.slice(dts.indexOf("export interface SessionHooks"), dts.indexOf("// Generic handlers"));
  const names = [...declared.matchAll(/^\s+(on\w+)\?:/gm)].map((m) => m[1]);
  const fromCore = policy.hooks.types.map((t) => `on${t[0].toUpperCase()}${t.slice(1)}`);
  assert.deepEqual([...names].sort(), [...fromCore].sort());
  const { client, peer } = await connected(opens);
  const inputs = [];
  const hooks = Object.fromEntries(names.map((n) => [n, (input) => void inputs.push(input)]));
  const session = await client.createSession({ hooks });
  peer.send({ jsonrpc: "2.0", id: "h1", method: "hooks.invoke", params: { sessionId: session.id, hookType: "notification" } });
  await eventually(() => peer.received.some((m) => m.id === "h1" && "result" in m), "the hook's answer");
  assert.deepEqual(inputs, [policy.hooks.defaultInput]);
  await client.stop();
});

test("an elicitation accepted without content is answered with the core's default content", async () => {
  const { client, peer } = await connected(opens);
  const session = await client.createSession({ onElicitation: () => "accept" });
  peer.send({
    jsonrpc: "2.0",
    method: "session.event",
    params: {
      sessionId: session.id,
      event: { type: "elicitation.requested", id: "e1", data: { requestId: "q1", message: "Sure?" } },
    },
  });
  const answer = await peer.waitFor((m) => m.params?.requestId === "q1");
  assert.deepEqual(answer.params.result, { action: "accept", content: policy.answers.elicitationAcceptContent });
  await client.stop();
});

test("a handler's answer is shaped by the core's table, as the core's write_answer shapes it", async () => {
  const { shapeAnswer } = await import(new URL("src/shapes.js", pkg));
  // The cases and results of the core's own tests (core/src/shapes.rs).
  const cases = [
    ["mcpOAuth", { accessToken: "t", tokenType: null, expiresIn: 60, kind: "x", other: 1 }, { answer: { accessToken: "t", expiresIn: 60, kind: "token" } }],
    ["mcpOAuth", null, { answer: { kind: "cancelled" } }],
    ["mcpOAuth", { expiresIn: 60 }, "fail"],
    ["mcpOAuth", { accessToken: "t", expiresIn: 1.5 }, "fail"],
    ["userInput", { answer: "a" }, { answer: { answer: "a", wasFreeform: false } }],
    ["userInput", null, { refuse: "noHandler" }],
    ["exitPlanMode", { approved: "yes" }, "fail"],
    ["providerToken", [], "fail"],
    ["tool", { sessionLog: "l", textResultForLlm: "x" }, { answer: { resultType: "success", sessionLog: "l", textResultForLlm: "x" } }],
    ["tool", undefined, { answer: { textResultForLlm: "", resultType: "success" } }],
    ["tool", "hi", { answer: { resultType: "success", textResultForLlm: "hi" } }],
    ["tool", { textResultForLlm: 1, a: 'q"\n' }, { answer: { resultType: "success", textResultForLlm: '{"a":"q\\"\\n","textResultForLlm":1}' } }],
    ["tool", [1], { answer: { resultType: "success", textResultForLlm: "[1]" } }],
    ["tool", { textResultForLlm: "x", resultType: 1 }, "fail"],
    ["permission", { kind: "reject", feedback: "no" }, { answer: { feedback: "no", kind: "reject" } }],
    ["permissionDecisionContext", { source: "s", outcome: "o", extra: 1 }, { answer: { outcome: "o", source: "s", surface: "sdk" } }],
    ["elicitation", { action: "accept" }, { answer: { action: "accept", content: {} } }],
    ["elicitation", { action: "decline", content: { a: 1 } }, { answer: { action: "decline" } }],
    ["elicitation", { action: "accept", content: [] }, "fail"],
    ["elicitation", { action: "maybe" }, "fail"],
  ];
  for (const [name, given, expected] of cases) {
    const shaped = shapeAnswer(name, given);
    if (expected === "fail") assert.ok("fail" in shaped, `${name} ${JSON.stringify(given)}: ${JSON.stringify(shaped)}`);
    else assert.deepEqual(shaped, expected, `${name} ${JSON.stringify(given)}`);
  }
  // The table's members go in its order, as the core writes them; the
  // handler's other members, and those of the objects it gave, in name order.
  const token = shapeAnswer("mcpOAuth", { tokenType: "Bearer", accessToken: "t" }).answer;
  assert.equal(JSON.stringify(token), '{"kind":"token","accessToken":"t","tokenType":"Bearer"}');
  const result = shapeAnswer("tool", { z: 1, textResultForLlm: "x", a: { d: 1, c: 2 } }).answer;
  assert.equal(JSON.stringify(result), '{"textResultForLlm":"x","resultType":"success","a":{"c":2,"d":1},"z":1}');
});

test("the CLI is looked for where the core's cliSearch says: the variable, then each PATH folder, then ./node_modules", () => {
  assert.deepEqual(
    policy.launch.cliSearch.map((c) => Object.keys(c)[0]),
    ["explicit", "variable", "pathFolders", "relative"],
  );
  const { dir, cleanup } = tempDir("copilot-wasm-cli-search");
  const [first, second, named] = ["first", "second", "named"].map((d) => join(dir, d));
  const saved = { PATH: process.env.PATH, COPILOT_CLI_PATH: process.env.COPILOT_CLI_PATH };
  try {
    for (const folder of [first, second]) {
      mkdirSync(folder);
      writeFileSync(join(folder, "copilot"), "#!/bin/sh\n", { mode: 0o755 });
    }
    writeFileSync(named, "#!/bin/sh\n", { mode: 0o755 });
    delete process.env.COPILOT_CLI_PATH;
    process.env.PATH = [join(dir, "empty"), first, second].join(delimiter);
    assert.equal(resolveCli(), join(first, "copilot"), "the first PATH folder that has it");
    process.env.COPILOT_CLI_PATH = named;
    assert.equal(resolveCli(), named, "the variable before PATH");
    assert.equal(resolveCli(join(second, "copilot")), join(second, "copilot"), "the explicit path first");
    assert.throws(() => resolveCli(join(dir, "missing")), /not found/, "an explicit path that is missing is an error");
  } finally {
    for (const [k, v] of Object.entries(saved)) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
    cleanup();
  }
});

test("the capabilities follow the frames' order: a change right behind the open's answer counts, and a UI call is refused without sending", async () => {
  const toClient = new PassThrough();
  const fromClient = new PassThrough();
  const peer = new Peer((bytes) => toClient.write(bytes), {
    answer: (m) => {
      if (m.method !== "session.create") return m.method.startsWith("session.") ? { success: true } : undefined;
      // The answer and a change in one write: the change is the later word.
      const sessionId = m.params.sessionId;
      const answer = frame({
        jsonrpc: "2.0",
        id: m.id,
        result: { sessionId, capabilities: { ui: { elicitation: false, canvases: true }, extensions: false } },
      });
      const change = frame({
        jsonrpc: "2.0",
        method: "session.event",
        params: {
          sessionId,
          event: { type: "capabilities.changed", data: { ui: { elicitation: true } }, id: "c1", timestamp: "t", parentId: null },
        },
      });
      const both = new Uint8Array(answer.length + change.length);
      both.set(answer);
      both.set(change, answer.length);
      toClient.write(both);
      return undefined;
    },
  });
  fromClient.on("data", (b) => peer.receive(b));
  const client = await CopilotClient.fromStreams(toClient, fromClient);
  const session = await client.createSession({});
  assert.deepEqual(session.capabilities, { ui: { elicitation: true, canvases: true }, extensions: false });

  const off = { type: "capabilities.changed", data: { ui: { elicitation: false } }, id: "c2", timestamp: "t", parentId: null };
  peer.send({ jsonrpc: "2.0", method: "session.event", params: { sessionId: session.id, event: off } });
  const seen = await new Promise((resolve) => session.on("capabilities.changed", (e) => e.id === "c2" && resolve(session.capabilities)));
  assert.equal(seen.ui.elicitation, false);
  const sent = peer.received.length;
  await assert.rejects(session.ui.confirm("Go?"), CapabilityError);
  await client.ping();
  assert.equal(peer.received.slice(sent).filter((m) => m.method === policy.capabilities.uiMethod).length, 0, "nothing sent");
  await client.stop();
});
