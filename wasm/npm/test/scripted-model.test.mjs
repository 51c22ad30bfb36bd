// Full turns through the real Copilot CLI 1.0.102 and the scripted model
// server (the cargo-built `scripted_model`, scripted over its control
// endpoint): a client tool run by a JS handler after a permission prompt
// answered by onPermission; a refused prompt and a failing tool (the model
// reads only the CLI's words that it failed), streamed.

import assert from "node:assert/strict";
import { after, before, test } from "node:test";

import { MODEL, collectUntil, startRealCli } from "./helpers.mjs";

const WEATHER = {
  name: "get_weather",
  description: "Get the current weather for a city.",
  parameters: {
    type: "object",
    properties: { city: { type: "string", description: "City name" } },
    required: ["city"],
  },
};

/** What the CLI tells the model when a client tool's answer is an `error` (CLI 1.0.102). */
const cliFailureText = (tool, args) =>
  `Failed to execute \`${tool}\` tool with arguments: ${JSON.stringify(args)} due to error: Error: Tool execution failed`;

let model, client, workDir, stop;

before(async () => {
  ({ model, client, workDir, stop } = await startRealCli("copilot-wasm-scripted"));
});

after(() => stop?.());

test("a client tool, approved by onPermission, run by the JS handler; the final message arrives", {
  timeout: 120_000,
}, async () => {
  const permissions = [];
  const calls = [];
  const session = await client.createSession({
    model: MODEL,
    workingDirectory: workDir("tool"),
    onPermission: (request) => {
      permissions.push(request);
      return { kind: "approve-once" };
    },
    tools: [
      {
        ...WEATHER,
        handler: async (args, invocation) => {
          calls.push({ args, invocation });
          return `Sunny, 22 C in ${args.city}`;
        },
      },
    ],
  });
  await model.script(session.id, [
    { toolCalls: [{ name: "get_weather", arguments: { city: "Paris" } }] },
    { text: "It is sunny in Paris, 22 C." },
  ]);
  const events = session.events();
  const started = performance.now();
  const reply = await session.sendAndWait("What is the weather in Paris?", { timeoutMs: 60_000 });
  console.log(`client tool turn: ${Math.round(performance.now() - started)} ms`);

  assert.equal(reply?.content, "It is sunny in Paris, 22 C.");
  assert.equal(calls.length, 1);
  assert.deepEqual(calls[0].args, { city: "Paris" }, "the handler got the parsed arguments");
  assert.equal(calls[0].invocation.toolName, "get_weather");
  assert.equal(calls[0].invocation.sessionId, session.id);
  assert.equal(permissions.length, 1);
  assert.equal(permissions[0].kind, "custom-tool");
  assert.equal(permissions[0].permissionRequest.toolName, "get_weather");

  const requests = (await model.requests()).filter((r) => r.sessionId === session.id);
  assert.equal(requests.length, 2, "two model calls");
  assert.match(requests[0].lastUserText, /What is the weather in Paris\?$/);
  assert.deepEqual(requests[1].toolResults, ["Sunny, 22 C in Paris"], "the model received the tool result");

  const seen = (await collectUntil(events, (e) => e.type === "session.idle")).map((e) => e.type);
  for (const t of ["permission.requested", "permission.completed", "external_tool.requested", "external_tool.completed"]) {
    assert.ok(seen.includes(t), `${t} among ${seen}`);
  }
  await session.destroy();
});

test("streamed: a refused prompt keeps the tool from running; a failing tool is reported to the model as failed", {
  timeout: 120_000,
}, async () => {
  const calls = [];
  let prompts = 0;
  const session = await client.createSession({
    model: MODEL,
    streaming: true,
    workingDirectory: workDir("streamed"),
    onPermission: (request) => {
      prompts++;
      if (prompts === 1) throw new Error("nobody is there"); // -> user-not-available
      return "approve-once";
    },
    tools: [
      {
        ...WEATHER,
        handler: (args) => {
          calls.push(args);
          throw new Error(`the station in ${args.city} is offline`);
        },
      },
    ],
  });
  await model.script(session.id, [
    { toolCalls: [{ name: "get_weather", arguments: { city: "Oslo" } }] },
    { toolCalls: [{ name: "get_weather", arguments: { city: "Lima" } }] },
    { text: "I could not get the weather; both attempts failed." },
  ]);
  const deltas = [];
  const unsubscribe = session.on("assistant.message_delta", (e) => deltas.push(e.data.deltaContent));
  const reply = await session.sendAndWait("Weather in Oslo, then Lima?", { timeoutMs: 60_000 });
  unsubscribe();

  assert.equal(reply?.content, "I could not get the weather; both attempts failed.");
  assert.equal(deltas.join(""), reply.content, "streamed in deltas");
  assert.ok(deltas.length > 1);
  assert.equal(prompts, 2);
  assert.deepEqual(calls, [{ city: "Lima" }], "the refused call never ran");

  const requests = (await model.requests()).filter((r) => r.sessionId === session.id);
  assert.equal(requests.length, 3);
  assert.ok(requests.every((r) => r.streamed));
  assert.match(requests[1].toolResults[0], /Permission denied/);
  // A tool that throws failed: its error goes as the call's `error`; the
  // model reads only the CLI's words that the tool failed.
  assert.equal(requests[2].toolResults[1], cliFailureText("get_weather", { city: "Lima" }));
  assert.ok(!JSON.stringify(requests[2]).includes("offline"), "the error stays out of the model's view");
  await session.destroy();
});
