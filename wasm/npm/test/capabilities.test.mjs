// A session's capabilities and its UI calls against the real Copilot CLI
// 1.0.102 on the scripted model: the capabilities as created; changed when
// a second client joins the session with an elicitation handler and when
// it leaves (the CLI's `capabilities.changed`, applied before the event is
// delivered); a UI call refused before it is sent while no client answers
// elicitations (the headless CLI would wait forever); and the UI calls
// answered by the session's elicitation handler.

import assert from "node:assert/strict";
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { after, before, test } from "node:test";

import { CapabilityError, CopilotClient } from "copilot-wasm";

import { MODEL, isolatedEnv, realCli, startScriptedModel, tempDir } from "./helpers.mjs";

const TOKEN = "caps-token";
let model, owner, dir, cleanup;

before(async () => {
  model = await startScriptedModel();
  ({ dir, cleanup } = tempDir("copilot-wasm-caps"));
  owner = await CopilotClient.start({
    cliPath: realCli(),
    transport: "tcp",
    connectionToken: TOKEN,
    env: { ...isolatedEnv(dir, model.url), ...model.env },
    cwd: dir,
    authToken: "fake-token",
    args: ["--no-auto-login"],
  });
});

after(async () => {
  await owner?.stop();
  await model?.stop();
  cleanup?.();
});

function workDir(name) {
  const p = join(dir, "work", name);
  mkdirSync(p, { recursive: true });
  return p;
}

/** What the CLI 1.0.102 reports with `ui.elicitation` as given. */
const withElicitation = (elicitation) => ({
  ui: { elicitation, mcpApps: false, canvases: false },
  extensions: false,
});

/** Resolves at the next `capabilities.changed` with its data and the capabilities seen as it is delivered. */
function nextChange(session) {
  return new Promise((resolve) => {
    const off = session.on("capabilities.changed", (e) => {
      off();
      resolve({ data: e.data, seen: session.capabilities });
    });
  });
}

/** Every UI call rejects before anything is sent, naming the call and the capability. */
async function everyUiCallIsRefused(session) {
  const calls = {
    confirm: () => session.ui.confirm("Deploy?"),
    select: () => session.ui.select("Which?", ["a", "b"]),
    input: () => session.ui.input("Name?"),
    elicitation: () => session.ui.elicitation({ message: "Form?", requestedSchema: { type: "object", properties: {} } }),
  };
  for (const [call, run] of Object.entries(calls)) {
    await assert.rejects(run(), (e) => {
      assert.ok(e instanceof CapabilityError, `${call}: ${e}`);
      assert.equal(e.call, call);
      assert.equal(e.capability, "ui.elicitation");
      assert.match(e.message, new RegExp(`^session\\.ui\\.${call}: the session lacks the elicitation capability`));
      return true;
    });
  }
}

test("capabilities follow the clients that answer elicitations", { timeout: 120_000 }, async () => {
  const first = await owner.createSession({ model: MODEL, workingDirectory: workDir("caps") });
  assert.deepEqual(first.capabilities, withElicitation(false), "as created");
  await everyUiCallIsRefused(first);

  // A second client joins with an elicitation handler.
  const joined = nextChange(first);
  const joiner = await CopilotClient.connect({ port: owner.address.port, token: TOKEN });
  const second = await joiner.resumeSession(first.id, {
    workingDirectory: workDir("caps"),
    onElicitation: () => "cancel",
  });
  assert.deepEqual(second.capabilities, withElicitation(true), "the resume's answer says it");
  const change = await joined;
  assert.deepEqual(change.data, { ui: { elicitation: true } });
  assert.deepEqual(change.seen, withElicitation(true), "changed before the event is delivered; the rest kept");

  // It leaves: the CLI says so when its connection closes. The session is
  // not destroyed first: after the joiner's `session.destroy`, CLI 1.0.102
  // did not always say so (it kept elicitation true, and a UI call then
  // waited forever).
  const left = nextChange(first);
  joiner.forceStop();
  const gone = await left;
  assert.deepEqual(gone.data, { ui: { elicitation: false } });
  assert.deepEqual(gone.seen, withElicitation(false));
  await everyUiCallIsRefused(first);
  await first.destroy();
});

test("the UI calls are answered by the session's elicitation handler", { timeout: 120_000 }, async () => {
  const asked = [];
  const session = await owner.createSession({
    model: MODEL,
    workingDirectory: workDir("ui"),
    onElicitation: (request) => {
      asked.push({ message: request.message, form: request.requestedSchema });
      if (request.message.toLowerCase().endsWith("no?")) return "decline";
      const field = Object.keys(request.requestedSchema.properties)[0];
      const content = {
        confirmed: { confirmed: true },
        selection: { selection: request.requestedSchema.properties.selection?.enum?.[1] },
        value: { value: "Ada" },
      }[field] ?? { color: "green" };
      return { action: "accept", content };
    },
  });
  assert.deepEqual(session.capabilities, withElicitation(true), "its own handler gives the session the capability");

  assert.equal(await session.ui.confirm("Deploy?"), true);
  assert.equal(await session.ui.select("Which?", ["red", "green"]), "green");
  assert.equal(await session.ui.input("Name?", { title: "Name", minLength: 1 }), "Ada");
  const form = { type: "object", properties: { color: { type: "string" } } };
  assert.deepEqual(await session.ui.elicitation({ message: "Color?", requestedSchema: form }), {
    action: "accept",
    content: { color: "green" },
  });
  assert.deepEqual(await session.ui.elicitation({ message: "Say no?", requestedSchema: form }), { action: "decline" });
  assert.equal(await session.ui.confirm("Still no?"), false, "a declined confirm is false");
  assert.equal(await session.ui.select("Pick or no?", ["x"]), null, "a declined select is null");

  const field = (name, schema) => ({ type: "object", properties: { [name]: schema }, required: [name] });
  assert.deepEqual(asked, [
    { message: "Deploy?", form: field("confirmed", { type: "boolean", default: true }) },
    { message: "Which?", form: field("selection", { type: "string", enum: ["red", "green"] }) },
    { message: "Name?", form: field("value", { type: "string", title: "Name", minLength: 1 }) },
    { message: "Color?", form },
    { message: "Say no?", form },
    { message: "Still no?", form: field("confirmed", { type: "boolean", default: true }) },
    { message: "Pick or no?", form: field("selection", { type: "string", enum: ["x"] }) },
  ]);
  await session.destroy();
});
