// OpenTelemetry through the real Copilot CLI 1.0.102 and the scripted
// model: with telemetry configured (the file exporter) and a trace context
// provider, the CLI's spans join the caller's trace, and a tool handler
// gets the context of the CLI's span for its call, in the same trace.

import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";

import { MODEL, startRealCli } from "./helpers.mjs";

const TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736";

test("the CLI's spans and a tool's call join the caller's trace", { timeout: 120_000 }, async () => {
  let spans;
  const { model, client, workDir, stop } = await startRealCli("copilot-wasm-telemetry", (dir) => {
    spans = join(dir, "spans.jsonl");
    return {
      telemetry: { filePath: spans, exporterType: "file" },
      onGetTraceContext: async () => ({ traceparent: `00-${TRACE_ID}-00f067aa0ba902b7-01`, tracestate: "app=1" }),
    };
  });
  try {
    const seen = [];
    const session = await client.createSession({
      model: MODEL,
      workingDirectory: workDir("traced"),
      tools: [
        {
          name: "get_weather",
          description: "Get the weather.",
          parameters: { type: "object" },
          skipPermission: true,
          handler: (args, invocation) => {
            seen.push({ traceparent: invocation.traceparent, tracestate: invocation.tracestate });
            return "Sunny";
          },
        },
      ],
    });
    await model.script(session.id, [
      { toolCalls: [{ name: "get_weather", arguments: { city: "Paris" } }] },
      { text: "Sunny." },
    ]);
    assert.equal((await session.sendAndWait("Weather?", { timeoutMs: 60_000 }))?.content, "Sunny.");
    await session.destroy();
    await client.stop();
    assert.equal(seen.length, 1);
    assert.equal(seen[0].traceparent?.split("-")[1], TRACE_ID, "the tool's span is in the caller's trace");
    const lines = readFileSync(spans, "utf8").split("\n").filter((l) => l.includes(TRACE_ID));
    assert.ok(lines.length > 0, "the CLI's spans are in the caller's trace");
  } finally {
    await stop();
  }
});
