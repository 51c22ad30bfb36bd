// The real CLI 1.0.102 on the scripted model, killed with a client tool
// call pending; a new CLI on the same state and a new JS client resume the
// session by id: the CLI sends no event for the call again, the engine
// asks what is pending, the handler the new client registered answers the
// call once, and the turn completes.

import assert from "node:assert/strict";
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";

import { CopilotClient } from "copilot-wasm";

import { MODEL, callInJournal, collectUntil, eventually, isolatedEnv, realCli, startScriptedModel, tempDir } from "./helpers.mjs";

const WEATHER = {
  name: "get_weather",
  description: "Get the current weather for a city.",
  parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
};

test("a new client resuming by id answers the tool call pending from before, and the turn completes", {
  timeout: 180_000,
}, async () => {
  const model = await startScriptedModel();
  const { dir, cleanup } = tempDir("copilot-wasm-reconcile");
  // The first does not recover: a new client does (recovery: recovery.test.mjs).
  const start = (autoRestart) =>
    CopilotClient.start({
      autoRestart,
      cliPath: realCli(),
      env: { ...isolatedEnv(dir, model.url), ...model.env },
      cwd: dir,
      authToken: "fake-token",
      args: ["--no-auto-login"],
    });
  const workingDirectory = join(dir, "work");
  mkdirSync(workingDirectory, { recursive: true });
  let second;
  try {
    // The first client's handler is called, then its CLI dies unanswered.
    const first = await start(false);
    const firstCalls = [];
    const session = await first.createSession({
      model: MODEL,
      workingDirectory,
      onPermission: () => "approve-once",
      tools: [{ ...WEATHER, handler: (args, call) => (firstCalls.push(call.toolCallId), new Promise(() => {})) }],
    });
    const id = session.id;
    await model.script(id, [
      { toolCalls: [{ name: "get_weather", arguments: { city: "Paris" } }] },
      { text: "It is sunny in Paris." },
    ]);
    await session.send("Weather in Paris?");
    await eventually(() => firstCalls.length === 1, "the first client's handler", 60_000);
    // Killed once the call is in the session's journal.
    await callInJournal(dir, id, firstCalls[0], 60_000);
    process.kill(-first.pid, "SIGKILL");
    await eventually(() => first.closed, "the first client to see its CLI gone", 60_000);
    await first.stop().catch(() => {});

    // A new CLI on the same state; a new client resumes the session by id.
    second = await start();
    const calls = [];
    const resumed = await second.resumeSession(id, {
      model: MODEL,
      workingDirectory,
      continuePendingWork: true,
      onPermission: () => "approve-once",
      tools: [{ ...WEATHER, handler: (args, call) => (calls.push({ args, toolCallId: call.toolCallId }), "Sunny, 22 C") }],
    });
    const events = resumed.events();
    const seen = await collectUntil(events, (e) => e.type === "session.idle", 60_000);
    const reply = seen.filter((e) => e.type === "assistant.message").map((e) => e.data.content);
    assert.deepEqual(reply, ["It is sunny in Paris."]);
    assert.deepEqual(calls, [{ args: { city: "Paris" }, toolCallId: firstCalls[0] }], "answered once, the call from before");
    assert.ok(!seen.some((e) => e.type === "external_tool.requested"), "the CLI did not send the call again");
    const requests = (await model.requests()).filter((r) => r.sessionId === id);
    assert.deepEqual(requests.at(-1).toolResults, ["Sunny, 22 C"]);
    const stats = second.stats();
    assert.deepEqual([stats.listsSent, stats.listed, stats.opened], [2, 1, 1]);
    assert.deepEqual(await second.call("session.tools.listPendingRequests", { sessionId: id }), { items: [] });
  } finally {
    await second?.stop().catch(() => {});
    await model.stop();
    cleanup();
  }
});
