// The typed calls (`client.rpc`, `session.rpc`, `listModels`) through the
// real Copilot CLI 1.0.102 and the scripted model: the model list; a model
// switch and a custom agent selected through the session's calls, seen in
// the next model request; a file attachment that reaches the model (tagged
// in the user message). And the generated types: every event type and
// lifecycle type of the real transcripts, and of these tests, is a member
// of the package's typed unions.

import assert from "node:assert/strict";
import { readdirSync, readFileSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { after, before, test } from "node:test";

import { MODEL, ROOT, startRealCli } from "./helpers.mjs";

const OTHER_MODEL = "claude-haiku-4.5";

let model, client, workDir, stop;
/** Every event type and lifecycle type these tests saw. */
const seenEvents = new Set();
const seenLifecycle = new Set();

before(async () => {
  ({ model, client, workDir, stop } = await startRealCli("copilot-wasm-typed-rpc"));
  client.on("lifecycle", (event) => seenLifecycle.add(event.type));
});

after(() => stop?.());

async function open(name, options = {}) {
  const session = await client.createSession({ model: MODEL, workingDirectory: workDir(name), ...options });
  session.on((event) => seenEvents.add(event.type));
  return session;
}

async function requestsOf(session) {
  return (await model.requests()).filter((r) => r.sessionId === session.id);
}

/** The package's own d.ts files, as installed. */
function packageTypes(file) {
  const pkg = createRequire(import.meta.url).resolve("copilot-wasm/package.json");
  return readFileSync(join(dirname(pkg), "types", file), "utf8");
}

/** The keys of interface `name`, or the string literals of type `name`, in a d.ts. */
function members(text, name) {
  const found = new RegExp(`export (interface|type) ${name}\\b`).exec(text);
  assert.ok(found, `${name} is declared`);
  const interfaceKind = found[1] === "interface";
  const body = text.slice(found.index, text.indexOf(interfaceKind ? "\n}" : ";", found.index));
  const pattern = interfaceKind ? /^ {2}"([^"]+)":/gm : /"([^"]+)"/g;
  return new Set([...body.matchAll(pattern)].map((m) => m[1]));
}

test("listModels is the scripted model's list, with capabilities; client.rpc.models.list agrees", async () => {
  const models = await client.listModels();
  // The scripted model's two, and the CLI's own virtual `auto`.
  assert.deepEqual(
    models.map((m) => m.id),
    ["auto", OTHER_MODEL, MODEL],
  );
  const byId = (id) => models.find((m) => m.id === id).capabilities;
  assert.equal(byId(MODEL).limits.max_context_window_tokens, 128000);
  assert.equal(byId(OTHER_MODEL).limits.max_context_window_tokens, 64000);
  assert.equal(byId(MODEL).supports.vision, false);
  const typed = await client.rpc.models.list();
  assert.deepEqual(typed.models, models);
});

test("a model switch through session.rpc.model.switchTo names the new model in the next request", {
  timeout: 180_000,
}, async () => {
  const session = await open("switch");
  await model.script(session.id, [{ text: "first" }, { text: "second" }]);
  await session.sendAndWait("one", { timeoutMs: 90_000 });
  assert.deepEqual(
    (await requestsOf(session)).map((r) => r.model),
    [MODEL],
  );

  assert.equal((await session.rpc.model.getCurrent()).modelId, MODEL);
  const switched = await session.rpc.model.switchTo({ modelId: OTHER_MODEL });
  assert.equal(switched.modelId, OTHER_MODEL);

  await session.sendAndWait("two", { timeoutMs: 90_000 });
  assert.deepEqual(
    (await requestsOf(session)).map((r) => r.model),
    [MODEL, OTHER_MODEL],
  );
  for (const e of await session.getMessages()) seenEvents.add(e.type);
  await session.destroy();
});

test("a custom agent selected through session.rpc.agent.select gives the model its prompt", {
  timeout: 180_000,
}, async () => {
  const session = await open("agent", {
    customAgents: [
      {
        name: "reviewer",
        displayName: "Reviewer",
        description: "Reviews changes.",
        prompt: "You are the reviewer agent; sign with REVIEWER-7731.",
      },
    ],
  });
  await model.script(session.id, [{ text: "as myself" }, { text: "as the reviewer" }]);
  const listed = await session.rpc.agent.list();
  assert.ok(
    listed.agents.some((a) => a.name === "reviewer"),
    JSON.stringify(listed),
  );

  assert.equal((await session.rpc.agent.getCurrent()).agent, null, "no custom agent yet");
  await session.sendAndWait("before", { timeoutMs: 90_000 });
  assert.equal((await session.rpc.agent.select({ name: "reviewer" })).agent.name, "reviewer");
  assert.equal((await session.rpc.agent.getCurrent()).agent.name, "reviewer");
  await session.sendAndWait("after", { timeoutMs: 90_000 });

  const requests = await requestsOf(session);
  assert.equal(requests.length, 2);
  const mentions = (r) => JSON.stringify(r.messages).includes("REVIEWER-7731");
  assert.ok(!mentions(requests[0]), "the agent's prompt is not there before it is selected");
  assert.ok(mentions(requests[1]), "the agent's prompt reaches the model once selected");
  await session.destroy();
});

test("a file attachment reaches the model", { timeout: 120_000 }, async () => {
  const session = await open("attachment");
  const file = join(workDir("attachment"), "notes.txt");
  writeFileSync(file, "The launch code is PLUM-4471.\n");
  await model.script(session.id, [{ text: "read it" }]);
  const userMessages = [];
  session.on("user.message", (e) => userMessages.push(e.data));
  await session.sendAndWait(
    {
      prompt: "What is in the attached file?",
      attachments: [{ type: "file", path: file, displayName: "notes.txt" }],
    },
    { timeoutMs: 90_000 },
  );
  // The CLI tags the file for the model (its `view` tool reads it).
  const sent = (await requestsOf(session)).at(-1).lastUserText;
  assert.ok(sent.includes("<tagged_files>") && sent.includes(`* ${file}`), `the file reaches the model: ${sent}`);
  assert.equal(userMessages[0]?.attachments?.length, 1);
  await session.destroy();
  // A `session.deleted` lifecycle notification for the union test.
  await client.deleteSession(session.id);
});

test("every event and lifecycle type of the real transcripts and of these tests is in the typed unions", () => {
  const eventTypes = members(packageTypes("generated/events.d.ts"), "SessionEventDataMap");
  const lifecycleTypes = members(packageTypes("index.d.ts"), "LifecycleEventType");
  assert.equal(eventTypes.size, 172, "163 event types of the CLI 1.0.102 schema and 9 `model.*` seen on the wire");
  assert.equal(lifecycleTypes.size, 5);

  const folder = join(ROOT, "tests", "fixtures", "transcripts");
  const files = readdirSync(folder).filter((f) => f.endsWith(".jsonl"));
  assert.equal(files.length, 6);
  const transcriptEvents = new Set();
  const transcriptLifecycle = new Set();
  for (const file of files) {
    for (const line of readFileSync(join(folder, file), "utf8").split("\n").filter(Boolean)) {
      const { message } = JSON.parse(line);
      if (message.method === "session.event") transcriptEvents.add(message.params.event.type);
      if (message.method === "session.lifecycle") transcriptLifecycle.add(message.params.type);
      for (const e of message.result?.events ?? []) transcriptEvents.add(e.type);
    }
  }
  assert.ok(transcriptEvents.size > 10 && seenEvents.size > 10, `${transcriptEvents.size} / ${seenEvents.size}`);
  assert.ok(seenLifecycle.has("session.created") && seenLifecycle.has("session.deleted"), [...seenLifecycle].join());
  for (const type of [...transcriptEvents, ...seenEvents]) assert.ok(eventTypes.has(type), `event type ${type}`);
  for (const type of [...transcriptLifecycle, ...seenLifecycle]) {
    assert.ok(lifecycleTypes.has(type), `lifecycle type ${type}`);
  }
});
