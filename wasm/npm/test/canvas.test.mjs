// Canvases against the real Copilot CLI 1.0.102 on the scripted model, as
// tests/tests/canvas.rs checks the Rust crate: with requestCanvasRenderer
// the agent's open_canvas and invoke_canvas_action reach this client as
// canvas.open and canvas.action.invoke, a client's session.canvas.close
// as canvas.close; each is answered once by the canvas's handlers, and the
// agent reads the answer: the open's result, the action's result, the
// error of an action without a handler, a throw's text, a CanvasError's.

import assert from "node:assert/strict";
import { test } from "node:test";

import { CanvasError, approveAll, createCanvas } from "copilot-wasm";
import { MODEL, startRealCli } from "./helpers.mjs";

const open = (canvasId, instanceId, input) => ({
  toolCalls: [{ name: "open_canvas", arguments: { canvasId, instanceId, input } }],
});
const invoke = (instanceId, actionName, input) => ({
  toolCalls: [{ name: "invoke_canvas_action", arguments: { instanceId, actionName, input } }],
});

test("the real CLI's canvas requests are answered once by the canvas handlers", { timeout: 120_000 }, async () => {
  const { model, client, workDir, stop } = await startRealCli("copilot-wasm-canvas");
  try {
    const calls = [];
    const record = (what, ctx) => calls.push([what, ctx.canvasId, ctx.instanceId, ctx.input]);
    const counter = createCanvas({
      id: "counter",
      displayName: "Counter",
      description: "Counts things.",
      inputSchema: { type: "object", properties: { start: { type: "number" } } },
      open: (ctx) => {
        record("open", ctx);
        return { url: `https://example.test/${ctx.canvasId}/${ctx.instanceId}`, title: "Count" };
      },
      onClose: (ctx) => record("close", ctx),
      actions: [
        {
          name: "increment",
          description: "Add to the count",
          handler: async (ctx) => {
            record("increment", ctx);
            return { count: 5 };
          },
        },
        {
          name: "explode",
          handler: (ctx) => {
            record("explode", ctx);
            throw new Error("the counter exploded");
          },
        },
        { name: "missing" },
      ],
    });
    const broken = createCanvas({
      id: "broken",
      displayName: "Broken",
      description: "Never opens.",
      open: () => {
        throw new CanvasError("broken_canvas", "this canvas is broken");
      },
    });
    const config = () => ({
      model: MODEL,
      workingDirectory: workDir("canvas"),
      // The CLI asks before each canvas tool runs.
      onPermission: approveAll,
      requestCanvasRenderer: true,
      canvasProvider: { id: "app:test:1", name: "Test app" },
      canvases: [counter, broken],
    });
    const session = await client.createSession(config());
    assert.equal(session.capabilities.ui?.canvases, true);

    // The declarations arrived, under the provider id given.
    const { canvases: listed } = await session.call("session.canvas.list");
    assert.deepEqual(
      listed.map((c) => [c.extensionId, c.canvasId]),
      [
        ["app:test:1", "counter"],
        ["app:test:1", "broken"],
      ],
    );
    assert.deepEqual(listed[0].actions[0], { name: "increment", description: "Add to the count" });

    await model.script(session.id, [
      open("counter", "c1", { start: 3 }),
      invoke("c1", "increment", { by: 2 }),
      invoke("c1", "missing", {}),
      invoke("c1", "explode", {}),
      open("broken", "b1", {}),
      { text: "done" },
    ]);
    assert.equal((await session.sendAndWait("Count with a canvas.", { timeoutMs: 90_000 }))?.content, "done");

    const requests = (await model.requests()).filter((r) => r.sessionId === session.id);
    const results = requests.at(-1).toolResults;
    assert.equal(results.length, 5, JSON.stringify(results));
    const opened = JSON.parse(results[0]);
    assert.equal(opened.url, "https://example.test/counter/c1");
    assert.equal(opened.title, "Count");
    assert.deepEqual(JSON.parse(results[1]), { result: { count: 5 } });
    assert.ok(results[2].endsWith("No handler implemented for this canvas action"), results[2]);
    assert.ok(results[3].endsWith("the counter exploded"), results[3]);
    assert.ok(results[4].endsWith("this canvas is broken"), results[4]);

    // The instances open, kept from the CLI's events: c1 (b1 never opened).
    const openNow = session.openCanvases;
    assert.deepEqual(
      openNow.map((i) => [i.instanceId, i.url]),
      [["c1", "https://example.test/counter/c1"]],
    );
    // A resume's answer lists them: the session resumed (on this client:
    // the new handle takes it over) starts with c1 open (the CLI opens it
    // again with its provider, the same provider id).
    const resumed = await client.resumeSession(session.id, config());
    assert.deepEqual(resumed.openCanvases, openNow);

    // The panel closed by the client: the CLI tells its canvas, and says so.
    const closedEvent = new Promise((resolve) => {
      const off = resumed.on("session.canvas.closed", () => {
        off();
        resolve(resumed.openCanvases);
      });
    });
    assert.equal(await resumed.call("session.canvas.close", { instanceId: "c1" }), null);
    assert.deepEqual((await resumed.call("session.canvas.listOpen")).openCanvases, []);
    assert.deepEqual(await closedEvent, [], "closed before the event was delivered");

    const c1 = (what, input) => [what, "counter", "c1", input];
    assert.deepEqual(calls, [
      c1("open", { start: 3 }),
      c1("increment", { by: 2 }),
      c1("explode", {}),
      // The resume under the same provider id restores the instance.
      c1("open", { start: 3 }),
      c1("close", undefined),
    ]);
    await resumed.destroy();
  } finally {
    await stop();
  }
});

// As tests/tests/canvas.rs: requestExtensions gives the session the
// `extensions` capability and the agent the extension tools; extensionInfo
// and extensionSdkPath (a folder that does not exist) are taken.
test("the extension options reach the real CLI", { timeout: 120_000 }, async () => {
  const { model, client, dir, workDir, stop } = await startRealCli("copilot-wasm-extensions");
  try {
    const configs = [
      // The one without first: the CLI offers the extension tools to every
      // later session of a connection that asked for them once.
      [{ workingDirectory: workDir("without") }, false],
      [
        {
          workingDirectory: workDir("with"),
          requestExtensions: true,
          extensionInfo: { source: "github-app", name: "test" },
          extensionSdkPath: `${dir}/no-such-sdk`,
        },
        true,
      ],
    ];
    for (const [config, on] of configs) {
      const session = await client.createSession({ model: MODEL, ...config });
      assert.equal(session.capabilities.extensions, on);
      assert.equal(session.capabilities.ui?.canvases, false, "no canvas renderer asked for");
      await model.script(session.id, [{ text: "ok" }]);
      await session.sendAndWait("Hello", { timeoutMs: 60_000 });
      const requests = (await model.requests()).filter((r) => r.sessionId === session.id);
      const tools = requests.at(-1).toolNames;
      assert.equal(tools.includes("extensions_manage"), on, JSON.stringify(tools));
      assert.ok(!tools.includes("open_canvas"));
      await session.destroy();
    }
  } finally {
    await stop();
  }
});
