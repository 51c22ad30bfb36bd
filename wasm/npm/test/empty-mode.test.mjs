// The client's `mode: "empty"` and `largeOutput` against the real Copilot
// CLI 1.0.102 on the scripted model: the cases of the Rust crate's
// tests/tests/empty_mode.rs (tests/tests/same_bytes.rs holds what the two
// clients send to be the same bytes).

import assert from "node:assert/strict";
import { mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { PassThrough } from "node:stream";
import { test } from "node:test";

import { BuiltInTools, ConfigError, CopilotClient, ToolSet } from "copilot-wasm";

import { MODEL, Peer, startRealCli } from "./helpers.mjs";

/** The package as installed: its policy is read by path (not exported). */
const pkg = new URL(".", import.meta.resolve("copilot-wasm/package.json"));
const { default: policy } = await import(new URL("dist/policy.js", pkg));

/** A line of the working folder's AGENTS.md: in the prompt only when custom instructions load. */
const INSTRUCTIONS = "Always answer in the voice of MARKER-AGENTS-7.";

const weather = {
  name: "get_weather",
  description: "Get the weather.",
  parameters: { type: "object" },
  skipPermission: true,
  handler: () => "Sunny",
};

/** The real CLI in empty mode, its state folder `dir/home`. */
const startEmpty = (prefix) => startRealCli(prefix, (dir) => ({ mode: "empty", baseDirectory: join(dir, "home") }));

/** A working folder with an AGENTS.md. */
function withInstructions(workDir, name) {
  const dir = workDir(name);
  writeFileSync(join(dir, "AGENTS.md"), `# Instructions\n\n${INSTRUCTIONS}\n`);
  return dir;
}

async function requestsOf(model, session) {
  return (await model.requests()).filter((r) => r.sessionId === session.id);
}

test("empty mode refuses a client without a state folder and a session without tools; a bare * is refused", { timeout: 120_000 }, async () => {
  // Refused before any CLI is started: no such CLI exists.
  await assert.rejects(
    CopilotClient.start({ mode: "empty", cliPath: "/nonexistent/copilot" }),
    (e) => e instanceof ConfigError && e.message === policy.modes.emptyNeedsBaseDirectory,
  );
  await assert.rejects(CopilotClient.start({ mode: "nothing" }), ConfigError);
  const { client, workDir, stop } = await startEmpty("copilot-wasm-empty-refusals");
  try {
    assert.equal(client.mode, "empty");
    await assert.rejects(
      client.createSession({ model: MODEL, workingDirectory: workDir("no-tools") }),
      (e) => e instanceof ConfigError && e.message === policy.modes.emptyNeedsAvailableTools && /availableTools/.test(e.message),
    );
    // A bare "*" matches no tool (the CLI offers such a session none): refused in any mode.
    for (const [filters, option] of [
      [{ availableTools: ["*"], excludedTools: ["bash"] }, "availableTools"],
      [{ availableTools: ["custom:*"], excludedTools: ["*"] }, "excludedTools"],
    ]) {
      await assert.rejects(
        client.createSession({ model: MODEL, workingDirectory: workDir("bare"), ...filters }),
        (e) => e instanceof ConfigError && e.message === `${option}${policy.options.bareToolWildcardRefusal}`,
      );
    }
    assert.deepEqual(await client.listSessions(), [], "nothing was sent: the CLI has no session");
  } finally {
    await stop();
  }
});

test("an empty-mode session runs a turn with the defaults, and the user's values win", { timeout: 180_000 }, async () => {
  const { model, client, workDir, stop } = await startEmpty("copilot-wasm-empty-mode");
  try {
    const session = await client.createSession({
      model: MODEL,
      workingDirectory: withInstructions(workDir, "defaults"),
      availableTools: ["custom:*"],
      tools: [weather],
    });
    await model.script(session.id, [{ toolCalls: [{ name: "get_weather", arguments: {} }] }, { text: "Sunny." }]);
    assert.equal((await session.sendAndWait("Weather?", { timeoutMs: 90_000 }))?.content, "Sunny.");
    const requests = await requestsOf(model, session);
    assert.equal(requests.length, 2, "the tool call and the answer");
    const prompt = requests[0].systemPrompt;
    assert.doesNotMatch(prompt, /<environment_context>/, "the environment is removed");
    assert.doesNotMatch(prompt, /MARKER-AGENTS-7/, "custom instructions are skipped");
    assert.doesNotMatch(prompt, /Co-authored-by/, "no commit trailer");
    assert.deepEqual(requests[0].toolNames, ["get_weather"], "only the session's own tool");
    assert.deepEqual(requests[1].toolResults, ["Sunny"]);
    // What the CLI answers the patch (the client sent one like it after the open).
    const answer = await session.call("session.options.update", { coauthorEnabled: false });
    assert.equal(answer.success, true);
    await session.destroy();

    const users = await client.createSession({
      model: MODEL,
      workingDirectory: withInstructions(workDir, "users"),
      availableTools: ["custom:*"],
      tools: [weather],
      skipCustomInstructions: false,
      coauthorEnabled: true,
      systemMessage: { mode: "customize", sections: { environment_context: { action: "append", content: "ENV-NOTE-3" } } },
    });
    await model.script(users.id, [{ text: "Hello." }]);
    await users.sendAndWait("Hi", { timeoutMs: 90_000 });
    const usersPrompt = (await requestsOf(model, users))[0].systemPrompt;
    assert.match(usersPrompt, /<environment_context>[^]*ENV-NOTE-3/, "the app's environment section");
    assert.match(usersPrompt, /MARKER-AGENTS-7/, "custom instructions are loaded");
    assert.match(usersPrompt, /Co-authored-by/, "the commit trailer is on");
    await users.destroy();
  } finally {
    await stop();
  }
});

test("a tool result over maxSizeBytes is written to the output directory", { timeout: 120_000 }, async () => {
  const { model, client, dir, workDir, stop } = await startRealCli("copilot-wasm-large-output");
  try {
    const out = join(dir, "large");
    mkdirSync(out, { recursive: true });
    const big = "0123456789".repeat(500);
    const session = await client.createSession({
      model: MODEL,
      workingDirectory: workDir("large"),
      largeOutput: { enabled: true, maxSizeBytes: 1000, outputDirectory: out },
      tools: [{ name: "big_report", description: "A long report.", parameters: { type: "object" }, skipPermission: true, handler: () => big }],
    });
    await model.script(session.id, [{ toolCalls: [{ name: "big_report", arguments: {} }] }, { text: "Done." }]);
    await session.sendAndWait("Report?", { timeoutMs: 90_000 });
    const files = readdirSync(out).map((f) => join(out, f));
    assert.equal(files.length, 1, "the output went to a file in the output directory");
    assert.equal(readFileSync(files[0], "utf8"), big);
    const [result] = (await requestsOf(model, session))[1].toolResults;
    assert.ok(result.length < big.length && result.includes(files[0]), result);
    await session.destroy();
  } finally {
    await stop();
  }
});

// A client that connects to a CLI it did not start leaves its state folder
// to the CLI's owner, as the official SDK does: empty mode still applies to
// its sessions.
test("an empty-mode client of a running CLI needs no state folder", async () => {
  const toClient = new PassThrough();
  const fromClient = new PassThrough();
  const answer = (m) => (m.method === "session.create" ? { sessionId: m.params.sessionId } : m.method.startsWith("session.") ? { success: true } : undefined);
  const peer = new Peer((bytes) => toClient.write(bytes), { answer });
  fromClient.on("data", (b) => peer.receive(b));
  const client = await CopilotClient.fromStreams(toClient, fromClient, { mode: "empty" });
  try {
    assert.equal(client.mode, "empty");
    await assert.rejects(client.createSession({}), (e) => e instanceof ConfigError && e.message === policy.modes.emptyNeedsAvailableTools);
    const session = await client.createSession({ availableTools: [] });
    const methods = peer.received.map((m) => m.method);
    assert.deepEqual(methods, ["connect", "session.create", "session.options.update"], "the refused session sent nothing");
    assert.equal(peer.received[2].params.sessionId, session.id);
  } finally {
    client.forceStop();
  }
});

test("a ToolSet offers the model the isolated built-ins and the session's own tool; bad names are refused", { timeout: 180_000 }, async () => {
  assert.deepEqual(new ToolSet().addBuiltIn(["bash", "view"]).addMcp("*").addCustom("get_weather").toArray(), [
    "builtin:bash",
    "builtin:view",
    "mcp:*",
    "custom:get_weather",
  ]);
  for (const bad of ["", "a b", "mcp:x", "**", 7]) {
    assert.throws(
      () => new ToolSet().addCustom(bad),
      (e) => e instanceof ConfigError && e.message === `invalid custom tool name ${JSON.stringify(bad)}${policy.options.toolNameRefusal}`,
    );
  }
  const { model, client, workDir, stop } = await startEmpty("copilot-wasm-tool-set");
  try {
    // Not a list: the CLI would offer every tool (bash too); refused before anything is sent.
    await assert.rejects(
      client.createSession({ model: MODEL, workingDirectory: workDir("not-a-list"), availableTools: { custom: "*" } }),
      (e) => e instanceof ConfigError && e.message === "availableTools is a list of tool names or a ToolSet",
    );
    const offered = [];
    for (const excluded of [undefined, "task"]) {
      const session = await client.createSession({
        model: MODEL,
        workingDirectory: workDir(`tool-set-${offered.length}`),
        tools: [weather],
        availableTools: new ToolSet().addBuiltIn(BuiltInTools.Isolated).addCustom("get_weather"),
        ...(excluded ? { excludedTools: new ToolSet().addBuiltIn(excluded) } : {}),
      });
      await model.script(session.id, [{ text: "Hello." }]);
      await session.sendAndWait("Hi", { timeoutMs: 90_000 });
      const tools = (await requestsOf(model, session))[0].toolNames.toSorted();
      assert.ok(tools.includes("get_weather"), `the session's own tool: ${tools}`);
      assert.ok(tools.every((t) => t === "get_weather" || BuiltInTools.Isolated.includes(t)), `${tools}`);
      assert.ok(tools.length > 1, `some isolated built-in tools are offered: ${tools}`);
      await session.destroy();
      offered.push(tools);
    }
    assert.ok(offered[0].includes("task"), `${offered[0]}`);
    assert.deepEqual(offered[1], offered[0].filter((t) => t !== "task"), "builtin:task excluded");
  } finally {
    await stop();
  }
});
