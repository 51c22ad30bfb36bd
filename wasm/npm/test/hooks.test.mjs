// Session hooks through the real Copilot CLI 1.0.102 and the scripted
// model, from the packed package: a pre-tool-use hook denies the shell (it
// does not run; the model reads the denial), a post-tool-use hook sees and
// replaces a tool's result, a user-prompt-submitted hook changes the prompt
// the model gets, every hook's input is named as the official SDKs name it
// (`workingDirectory`, a `Date`), session start and end hooks fire once
// each, and a sub-agent's start and stop hooks run.

import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { after, before, test } from "node:test";

import { ConfigError, approveAll } from "copilot-wasm";

import { MODEL, startRealCli } from "./helpers.mjs";

let model, client, workDir, stop;

before(async () => {
  ({ model, client, workDir, stop } = await startRealCli("copilot-wasm-hooks"));
});

after(() => stop?.());

const requestsOf = async (session) => (await model.requests()).filter((r) => r.sessionId === session.id);

test("a pre-tool-use hook denies the shell: nothing runs and the model reads the denial", { timeout: 120_000 }, async () => {
  const seen = [];
  const work = workDir("deny");
  const session = await client.createSession({
    model: MODEL,
    workingDirectory: work,
    onPermission: approveAll,
    hooks: {
      onPreToolUse: async (input, invocation) => {
        seen.push({ toolName: input.toolName, command: input.toolArgs?.command, invocation });
        if (input.toolName === "bash") {
          return { permissionDecision: "deny", permissionDecisionReason: "shell is off in this test" };
        }
      },
    },
  });
  await model.script(session.id, [
    { toolCalls: [{ name: "bash", arguments: { command: "echo proof > proof.txt", description: "Write a proof" } }] },
    { text: "The shell was denied." },
  ]);
  const reply = await session.sendAndWait("Write the proof.", { timeoutMs: 60_000 });
  assert.equal(reply?.content, "The shell was denied.");
  assert.ok(!existsSync(join(work, "proof.txt")), "a denied command must not run");
  assert.equal(seen.length, 1);
  assert.equal(seen[0].toolName, "bash");
  assert.equal(seen[0].command, "echo proof > proof.txt");
  assert.deepEqual(seen[0].invocation, { sessionId: session.id, hookType: "preToolUse" });
  const requests = await requestsOf(session);
  assert.equal(requests[1].toolResults.length, 1);
  assert.match(requests[1].toolResults[0], /shell is off in this test/);
  await session.destroy();
});

test("a post-tool-use hook sees the tool's result and replaces it", { timeout: 120_000 }, async () => {
  const seen = [];
  const session = await client.createSession({
    model: MODEL,
    workingDirectory: workDir("post"),
    tools: [
      {
        name: "get_weather",
        description: "Get the weather.",
        parameters: { type: "object" },
        skipPermission: true,
        handler: () => "Sunny, 22 C",
      },
    ],
    hooks: {
      onPostToolUse: (input) => {
        seen.push(input);
        return { modifiedResult: { textResultForLlm: "Rainy (checked by the hook)", resultType: "success" } };
      },
    },
  });
  await model.script(session.id, [
    { toolCalls: [{ name: "get_weather", arguments: { city: "Paris" } }] },
    { text: "It rains, says the hook." },
  ]);
  const reply = await session.sendAndWait("Weather?", { timeoutMs: 60_000 });
  assert.equal(reply?.content, "It rains, says the hook.");
  assert.equal(seen.length, 1);
  assert.equal(seen[0].toolName, "get_weather");
  assert.equal(seen[0].toolResult.textResultForLlm, "Sunny, 22 C", "the hook sees the tool's result");
  assert.deepEqual((await requestsOf(session))[1].toolResults, ["Rainy (checked by the hook)"]);
  await session.destroy();
});

test("every hook the CLI fires gets its input named as the official SDKs name it", { timeout: 120_000 }, async () => {
  const calls = [];
  const record = (type) => (input) => {
    calls.push({ type, input });
  };
  const types = ["sessionStart", "userPromptSubmitted", "preToolUse", "postToolUse", "agentStop", "sessionEnd"];
  const hooks = Object.fromEntries(types.map((t) => [`on${t[0].toUpperCase()}${t.slice(1)}`, record(t)]));
  const first = Math.floor(Date.now());
  const session = await client.createSession({
    model: MODEL,
    workingDirectory: workDir("typed"),
    tools: [
      {
        name: "get_weather",
        description: "Get the weather.",
        parameters: { type: "object" },
        skipPermission: true,
        handler: () => "Sunny, 22 C",
      },
    ],
    hooks,
  });
  await model.script(session.id, [
    { toolCalls: [{ name: "get_weather", arguments: { city: "Paris" } }] },
    { text: "Sunny." },
  ]);
  assert.equal((await session.sendAndWait("Weather?", { timeoutMs: 60_000 }))?.content, "Sunny.");
  await session.destroy();
  const last = Date.now();
  assert.deepEqual([...new Set(calls.map((c) => c.type))].sort(), [...types].sort(), "every hook fired");
  for (const { type, input } of calls) {
    assert.match(input.workingDirectory, /typed$/, type);
    assert.ok(input.timestamp instanceof Date, type);
    const at = input.timestamp.getTime();
    assert.ok(at >= first && at <= last, `${type}: ${input.timestamp.toISOString()}`);
    for (const wire of ["cwd", "stop_hook_active"]) assert.ok(!(wire in input), `${type} has ${wire}`);
  }
  const pre = calls.find((c) => c.type === "preToolUse").input;
  assert.equal(pre.toolName, "get_weather");
  assert.deepEqual(pre.toolArgs, { city: "Paris" });
  const post = calls.find((c) => c.type === "postToolUse").input;
  assert.equal(post.toolResult.textResultForLlm, "Sunny, 22 C");
  assert.equal(calls.find((c) => c.type === "userPromptSubmitted").input.prompt, "Weather?");
  const stop = calls.find((c) => c.type === "agentStop").input;
  assert.equal(typeof stop.stopHookActive, "boolean", JSON.stringify(stop));
});

test("a user-prompt-submitted hook changes the prompt the model gets", { timeout: 120_000 }, async () => {
  const prompts = [];
  const session = await client.createSession({
    model: MODEL,
    workingDirectory: workDir("prompt"),
    hooks: {
      onUserPromptSubmitted: (input) => {
        prompts.push(input.prompt);
        return { modifiedPrompt: "What is 3 + 3? (rewritten)" };
      },
    },
  });
  await model.script(session.id, [{ text: "6" }]);
  const reply = await session.sendAndWait("What is 2 + 2?", { timeoutMs: 60_000 });
  assert.equal(reply?.content, "6");
  assert.deepEqual(prompts, ["What is 2 + 2?"]);
  const sent = (await requestsOf(session))[0].lastUserText;
  assert.match(sent, /What is 3 \+ 3\? \(rewritten\)/);
  assert.doesNotMatch(sent, /2 \+ 2/);
  await session.destroy();
});

test("session start and end hooks fire once each, around the turns", { timeout: 120_000 }, async () => {
  const calls = [];
  const record = (type) => (input) => {
    calls.push({ type, input });
  };
  const session = await client.createSession({
    model: MODEL,
    workingDirectory: workDir("bracket"),
    hooks: {
      onSessionStart: record("sessionStart"),
      onSessionEnd: record("sessionEnd"),
      onUserPromptSubmitted: record("userPromptSubmitted"),
      onAgentStop: record("agentStop"),
    },
  });
  await model.script(session.id, [{ text: "one" }, { text: "two" }]);
  assert.equal((await session.sendAndWait("First.", { timeoutMs: 60_000 }))?.content, "one");
  assert.equal((await session.sendAndWait("Second.", { timeoutMs: 60_000 }))?.content, "two");
  await session.destroy();
  const types = calls.map((c) => c.type);
  assert.deepEqual(types, [
    "sessionStart",
    "userPromptSubmitted",
    "agentStop",
    "userPromptSubmitted",
    "agentStop",
    "sessionEnd",
  ]);
  assert.match(calls[0].input.workingDirectory, /bracket$/);
  assert.ok(calls[0].input.timestamp instanceof Date);
});

test("a sub-agent's start and stop hooks run on the session that set them", { timeout: 120_000 }, async () => {
  const calls = [];
  const session = await client.createSession({
    model: MODEL,
    workingDirectory: workDir("subagent"),
    onPermission: approveAll,
    hooks: {
      onSubagentStart: (input, invocation) => void calls.push(["start", input, invocation]),
      onSubagentStop: (input, invocation) => void calls.push(["stop", input, invocation]),
    },
  });
  // The sub-agent calls the model under its parent's session id: the
  // second reply is its.
  await model.script(session.id, [
    { toolCalls: [{ name: "task", arguments: { name: "probe", description: "Probe", prompt: "Say done.", agent_type: "explore" } }] },
    { text: "Sub-agent done." },
    { text: "All done." },
  ]);
  const reply = await session.sendAndWait("Delegate.", { timeoutMs: 60_000 });
  assert.equal(reply?.content, "All done.");
  await session.destroy();
  assert.deepEqual(
    calls.map(([what]) => what),
    ["start", "stop"],
  );
  assert.equal(calls[0][1].agentType, "explore");
  assert.equal(calls[1][1].response, "Sub-agent done.");
  assert.deepEqual(calls[0][2], { sessionId: session.id, hookType: "subagentStart" });
});

test("hooks and request handlers are checked when the session is opened", async () => {
  await assert.rejects(client.createSession({ model: MODEL, hooks: { onPreToolUze: () => {} } }), ConfigError);
  await assert.rejects(client.createSession({ model: MODEL, hooks: { onPreToolUse: "deny" } }), ConfigError);
  await assert.rejects(
    client.createSession({ model: MODEL, requestHandlers: { "permission.requested": () => ({}) } }),
    ConfigError,
  );
});
