// WebSocket model requests of the real Copilot CLI 1.0.102 through the
// inference request handler, as tests/tests/inference_websocket_real_cli.rs
// checks the Rust host. The CLI opens a WebSocket for the Responses API
// when the model's catalogue entry lists `ws:/responses`: the handler
// answers `GET /models` with such a catalogue, and plays the model behind
// the WebSocket itself (the Responses API's events for each
// `response.create` message). A handler without WebSocket support gets
// the refusal, and the CLI sends the same request over HTTP.

import assert from "node:assert/strict";
import { test } from "node:test";

import { CopilotRequestHandler, CopilotWebSocketHandler } from "copilot-wasm";

import { MODEL, eventually, startRealCli } from "./helpers.mjs";

const TEXT = "a reply that came back over the WebSocket";

const catalogue = {
  object: "list",
  data: [
    {
      id: MODEL,
      name: MODEL,
      object: "model",
      vendor: "Scripted",
      version: "1",
      preview: false,
      model_picker_enabled: true,
      is_chat_default: true,
      is_chat_fallback: true,
      policy: { state: "enabled", terms: "" },
      supported_endpoints: ["/responses", "ws:/responses"],
      capabilities: {
        family: "scripted",
        type: "chat",
        object: "model_capabilities",
        tokenizer: "o200k_base",
        limits: { max_context_window_tokens: 128000, max_prompt_tokens: 128000, max_output_tokens: 16000 },
        supports: { streaming: true, tool_calls: true, parallel_tool_calls: true, vision: false },
      },
    },
  ],
};

/** The Responses API's events of a turn that answers TEXT. */
function turnEvents(n) {
  const id = `resp_${n}`;
  const msg = `msg_${n}`;
  const done = { id: msg, type: "message", role: "assistant", status: "completed", content: [{ type: "output_text", text: TEXT, annotations: [] }] };
  return [
    { type: "response.created", response: { id, object: "response", status: "in_progress", output: [] } },
    { type: "response.output_item.added", output_index: 0, item: { id: msg, type: "message", role: "assistant", status: "in_progress", content: [] } },
    { type: "response.output_text.delta", item_id: msg, output_index: 0, content_index: 0, delta: TEXT },
    { type: "response.output_item.done", output_index: 0, item: done },
    {
      type: "response.completed",
      response: { id, object: "response", status: "completed", output: [done], usage: { input_tokens: 5, output_tokens: 8, total_tokens: 13 } },
    },
  ];
}

class Model extends CopilotWebSocketHandler {
  turns = 0;

  constructor(ctx, log) {
    super(ctx);
    this.log = log;
  }

  async sendRequestMessage(data) {
    this.log.push(`message ${JSON.parse(data).type}`);
    this.turns++;
    for (const event of turnEvents(this.turns)) await this.sendResponseMessage(JSON.stringify(event));
  }

  async close(status) {
    this.log.push("closed");
    await super.close(status);
  }
}

/** Serves the catalogue over HTTP, and (`webSocket`) the model over the WebSocket. */
class Serving extends CopilotRequestHandler {
  log = [];

  constructor(webSocket) {
    super();
    this.webSocket = webSocket;
  }

  async sendRequest(request, ctx) {
    this.log.push(`http ${request.method} ${new URL(request.url).pathname}`);
    if (!ctx.url.endsWith("/models")) throw new Error(`no such endpoint here: ${ctx.url}`);
    return new Response(JSON.stringify(catalogue), { headers: { "content-type": "application/json" } });
  }

  openWebSocket(ctx) {
    if (!this.webSocket) return super.openWebSocket(ctx);
    this.log.push(`websocket ${new URL(ctx.url).pathname} ${ctx.transport}`);
    return new Model(ctx, this.log);
  }
}

test("the CLI's WebSocket is carried by the handler across turns and closed once", { timeout: 180_000 }, async () => {
  const handler = new Serving(true);
  const { client, workDir, stop } = await startRealCli("copilot-wasm-inference-ws", () => ({ requestHandler: handler }));
  try {
    const session = await client.createSession({ model: MODEL, workingDirectory: workDir("inference-ws") });
    for (let i = 0; i < 2; i++) {
      const reply = await session.sendAndWait("Say something.", { timeoutMs: 90_000 });
      assert.equal(reply?.content, TEXT);
    }
    await session.destroy();
    // The CLI closes its WebSocket when the session ends.
    await eventually(() => handler.log.includes("closed"), "the close", 30_000);
    const log = handler.log.filter((l) => !l.startsWith("http GET"));
    assert.deepEqual(log, ["websocket /responses websocket", "message response.create", "message response.create", "closed"]);
  } finally {
    await stop();
  }
});

test("without WebSocket support the refusal makes the CLI send the request over HTTP", { timeout: 180_000 }, async () => {
  const handler = new Serving(false);
  const { client, workDir, stop } = await startRealCli("copilot-wasm-inference-ws-refused", () => ({ requestHandler: handler }));
  try {
    const session = await client.createSession({ model: MODEL, workingDirectory: workDir("inference-ws-refused") });
    await assert.rejects(session.sendAndWait("Say something.", { timeoutMs: 90_000 }), /no such endpoint here/);
    assert.ok(handler.log.includes("http POST /responses"), handler.log.join("\n"));
  } finally {
    await stop();
  }
});
