// The inference request handler against the real Copilot CLI 1.0.102 on
// the scripted model, as tests/tests/inference.rs checks the Rust crate:
// with `requestHandler` set, the client registers as the CLI's inference
// provider and every model request of the CLI (the model catalogue, each
// turn's completion) comes to the handler, which here sends it on to the
// scripted model with the default `sendRequest` (fetch) and streams the
// answer back in small pieces: the turn completes with the scripted text,
// which arrives whole only if the pieces arrive in order. A handler that
// throws gives the CLI an error for the request, and the turn ends with a
// session.error that quotes it (no hang).

import assert from "node:assert/strict";
import { test } from "node:test";

import { CopilotRequestHandler } from "copilot-wasm";
import { MODEL, collectUntil, startRealCli } from "./helpers.mjs";

/** Cuts a body into pieces of `size` bytes, one per read. */
function inPieces(body, size, counter) {
  const reader = body.getReader();
  let left = new Uint8Array(0);
  return new ReadableStream({
    async pull(controller) {
      while (left.length === 0) {
        const { value, done } = await reader.read();
        if (done) return controller.close();
        left = value;
      }
      controller.enqueue(left.subarray(0, size));
      left = left.subarray(size);
      counter.pieces++;
    },
  });
}

class Forwarder extends CopilotRequestHandler {
  seen = [];
  counter = { pieces: 0 };
  failCompletions = false;

  async sendRequest(request, ctx) {
    this.seen.push([request.method, new URL(request.url).pathname, ctx.sessionId]);
    if (this.failCompletions && ctx.url.endsWith("/chat/completions")) {
      throw new Error("the inference backend is down");
    }
    const response = await super.sendRequest(request, ctx);
    const body = inPieces(response.body, 7, this.counter);
    return new Response(body, { status: response.status, statusText: response.statusText, headers: response.headers });
  }
}

test("model requests go through the handler and a streamed response completes the turn", { timeout: 120_000 }, async () => {
  const handler = new Forwarder();
  const { model, client, workDir, stop } = await startRealCli("copilot-wasm-inference", () => ({ requestHandler: handler }));
  try {
    const session = await client.createSession({ model: MODEL, workingDirectory: workDir("inference") });
    const text = "a reply that came back through the request handler, seven bytes at a time";
    await model.script(session.id, [{ text }]);
    const reply = await session.sendAndWait("Say something.", { timeoutMs: 90_000 });
    assert.equal(reply?.content, text);
    const completions = handler.seen.filter(([m, path]) => m === "POST" && path.endsWith("/chat/completions"));
    assert.deepEqual(completions, [["POST", "/chat/completions", session.id]], JSON.stringify(handler.seen));
    assert.equal((await model.requests()).filter((r) => r.sessionId === session.id).length, 1, "forwarded to the model");
    assert.ok(handler.counter.pieces > 10, `streamed in pieces (${handler.counter.pieces})`);
  } finally {
    await stop();
  }
});

test("a handler that throws ends the turn with its error", { timeout: 120_000 }, async () => {
  const handler = new Forwarder();
  const { model, client, workDir, stop } = await startRealCli("copilot-wasm-inference-fail", () => ({
    requestHandler: handler,
  }));
  try {
    const session = await client.createSession({ model: MODEL, workingDirectory: workDir("inference-fail") });
    await model.script(session.id, [{ text: "never read" }]);
    handler.failCompletions = true;
    await assert.rejects(session.sendAndWait("Say something.", { timeoutMs: 90_000 }), /the inference backend is down/);
    assert.equal((await model.requests()).filter((r) => r.sessionId === session.id).length, 0, "nothing reached the model");
  } finally {
    await stop();
  }
});

function resolvers() {
  let resolve;
  const promise = new Promise((r) => (resolve = r));
  return { promise, resolve };
}

/** Answers a completion with a first SSE piece, then stalls until the CLI cancels it. */
class Staller extends CopilotRequestHandler {
  started = resolvers();
  cancelled = resolvers();

  async sendRequest(request, ctx) {
    if (!ctx.url.endsWith("/chat/completions")) return super.sendRequest(request, ctx);
    const first = 'data: {"choices":[{"index":0,"delta":{"role":"assistant","content":"par"}}]}\n\n';
    const started = this.started;
    const cancelled = this.cancelled;
    const body = new ReadableStream({
      start(controller) {
        controller.enqueue(new TextEncoder().encode(first));
        started.resolve();
        ctx.signal.addEventListener("abort", () => {
          cancelled.resolve(ctx.signal.aborted);
          controller.error(new Error("cancelled"));
        });
      },
    });
    return new Response(body, { status: 200, headers: { "content-type": "text/event-stream" } });
  }
}

test("an aborted turn cancels the request in flight", { timeout: 120_000 }, async () => {
  const handler = new Staller();
  const { client, workDir, stop } = await startRealCli("copilot-wasm-inference-cancel", () => ({ requestHandler: handler }));
  try {
    const session = await client.createSession({ model: MODEL, workingDirectory: workDir("cancel"), streaming: true });
    const events = session.events();
    await session.send("Say something long.");
    await handler.started.promise;
    await session.abort();
    assert.equal(await handler.cancelled.promise, true, "the CLI's cancel aborts ctx.signal");
    // The turn ends: the session goes idle.
    await collectUntil(events, (e) => e.type === "session.idle", 60_000);
  } finally {
    await stop();
  }
});

test("a requestHandler without sendRequest is refused before the CLI starts", async () => {
  const { CopilotClient } = await import("copilot-wasm");
  await assert.rejects(
    CopilotClient.fromStreams(new ReadableStream(), new WritableStream(), { requestHandler: {} }),
    /requestHandler must be a CopilotRequestHandler/,
  );
});
