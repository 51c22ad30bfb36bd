// Two clients on one session of the real Copilot CLI 1.0.102, on the
// scripted model: one client starts the CLI (TCP) and creates the session,
// the other connects to the same CLI and resumes the session while the
// first stays on it. Each registers its own tool. The CLI sends every
// `external_tool.requested` to both; the client that has the tool answers
// it and the other leaves it (the core's answer table), so each call is
// answered once, by its owner, and the model reads each owner's result.
//
// The second client talks to the CLI through a recording relay, so the
// test reads what it sent: for a tool that throws, the
// `handlePendingToolCall` goes with `error` and no `result`, as the
// official SDK sends it, and the model reads the CLI's own words.

import assert from "node:assert/strict";
import { mkdirSync } from "node:fs";
import { createServer, connect } from "node:net";
import { join } from "node:path";
import { after, before, test } from "node:test";

import { CopilotClient } from "copilot-wasm";

import { MODEL, eventually, isolatedEnv, realCli, startScriptedModel, tempDir } from "./helpers.mjs";

const TOKEN = "multi-client-token";

/** What the CLI tells the model when a client tool's answer is an `error` (CLI 1.0.102). */
const cliFailureText = (tool) =>
  `Failed to execute \`${tool}\` tool with arguments: {} due to error: Error: Tool execution failed`;

/** A relay to `port` that keeps what its client sent: `{ port, messages(), close() }`. */
async function relay(port) {
  const sent = [];
  const sockets = [];
  const server = createServer((client) => {
    const cli = connect({ host: "127.0.0.1", port });
    sockets.push(client, cli);
    client.on("data", (b) => {
      sent.push(b);
      cli.write(b);
    });
    cli.on("data", (b) => client.write(b));
    client.on("close", () => cli.destroy());
    cli.on("close", () => client.destroy());
    client.on("error", () => {});
    cli.on("error", () => {});
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    port: server.address().port,
    /** The JSON-RPC messages the client sent so far. */
    messages() {
      let rest = Buffer.concat(sent);
      const out = [];
      for (;;) {
        const end = rest.indexOf("\r\n\r\n");
        if (end < 0) return out;
        const length = Number(/content-length:\s*(\d+)/i.exec(rest.subarray(0, end).toString())[1]);
        out.push(JSON.parse(rest.subarray(end + 4, end + 4 + length).toString()));
        rest = rest.subarray(end + 4 + length);
      }
    },
    close() {
      for (const s of sockets) s.destroy();
      server.close();
    },
  };
}

let model, first, second, wire, dir, cleanup;

before(async () => {
  model = await startScriptedModel();
  ({ dir, cleanup } = tempDir("copilot-wasm-multi-client"));
  first = await CopilotClient.start({
    cliPath: realCli(),
    transport: "tcp",
    connectionToken: TOKEN,
    env: { ...isolatedEnv(dir, model.url), ...model.env },
    cwd: dir,
    authToken: "fake-token",
    args: ["--no-auto-login"],
  });
  wire = await relay(first.address.port);
  second = await CopilotClient.connect({ port: wire.port, token: TOKEN });
});

after(async () => {
  await second?.stop();
  await first?.stop();
  wire?.close();
  await model?.stop();
  cleanup?.();
});

/** A session the first client creates with `firstTool` and the second resumes with `secondTool`. */
async function share(name, firstTool, secondTool) {
  const workingDirectory = join(dir, "work", name);
  mkdirSync(workingDirectory, { recursive: true });
  const created = await first.createSession({ model: MODEL, workingDirectory, tools: [firstTool] });
  const resumed = await second.resumeSession(created.id, { model: MODEL, workingDirectory, tools: [secondTool] });
  return [created, resumed];
}

/** A tool that counts its calls in `calls[name]` and answers `text`. */
function counted(name, text, calls) {
  calls[name] = 0;
  return {
    name,
    description: "A tool of one client.",
    parameters: { type: "object" },
    skipPermission: true,
    handler: () => {
      calls[name]++;
      return text;
    },
  };
}

/** The params of the tool answers the second client sent. */
const toolAnswers = () =>
  wire
    .messages()
    .filter((m) => m.method === "session.tools.handlePendingToolCall")
    .map((m) => m.params);

test("two clients on one session: each tool is answered once, by its owner; the other client leaves it", {
  timeout: 120_000,
}, async () => {
  const calls = {};
  const [created, resumed] = await share(
    "two-tools",
    counted("alpha", "alpha ran on the first client", calls),
    counted("beta", "beta ran on the second client", calls),
  );
  await model.script(created.id, [
    { toolCalls: [{ name: "alpha", arguments: {} }] },
    { toolCalls: [{ name: "beta", arguments: {} }] },
    { text: "Both tools ran." },
  ]);
  const answeredBefore = toolAnswers().length;
  const reply = await created.sendAndWait("Use both tools.", { timeoutMs: 90_000 });
  assert.equal(reply?.content, "Both tools ran.");

  assert.deepEqual(calls, { alpha: 1, beta: 1 }, "each tool ran once, on its owner");
  const requests = (await model.requests()).filter((r) => r.sessionId === created.id);
  assert.equal(requests.length, 3, "three model calls");
  assert.deepEqual(requests[1].toolResults, ["alpha ran on the first client"]);
  assert.deepEqual(requests[2].toolResults, ["alpha ran on the first client", "beta ran on the second client"]);

  // The second client answered beta, once, and sent nothing for alpha.
  const answers = toolAnswers().slice(answeredBefore);
  assert.equal(answers.length, 1, JSON.stringify(answers));
  assert.equal(answers[0].result.textResultForLlm, "beta ran on the second client");
  // Each client left the other's call, and the CLI reported it answered.
  for (const [client, name] of [
    [first, "first"],
    [second, "second"],
  ]) {
    await eventually(() => client.stats().leftAnswered === 1, `${name}: the CLI's report ends the left wait`, 60_000);
    const s = client.stats();
    assert.deepEqual([s.answered, s.declined, s.leftOpen], [1, 1, 0], `${name}: ${JSON.stringify(s)}`);
    assert.equal(
      Object.values(s.refused).reduce((a, b) => a + b, 0),
      0,
      `${name}: no refusal`,
    );
  }
  await created.destroy();
});

test("a tool that throws: its error goes as the call's `error`, no result; the model reads the CLI's words", {
  timeout: 120_000,
}, async () => {
  const calls = {};
  const failing = {
    name: "gamma",
    description: "Fails.",
    parameters: { type: "object" },
    skipPermission: true,
    handler: () => {
      throw new Error("the gamma store is down: secret-password");
    },
  };
  const [created] = await share("failing-tool", counted("alpha", "unused", calls), failing);
  await model.script(created.id, [{ toolCalls: [{ name: "gamma", arguments: {} }] }, { text: "Gamma failed." }]);
  const answeredBefore = toolAnswers().length;
  const acksRefused = second.stats().acksRefused;
  const reply = await created.sendAndWait("Use gamma.", { timeoutMs: 90_000 });
  assert.equal(reply?.content, "Gamma failed.");

  const answers = toolAnswers().slice(answeredBefore);
  assert.equal(answers.length, 1, JSON.stringify(answers));
  assert.equal(answers[0].error, "the gamma store is down: secret-password");
  assert.equal(answers[0].result, undefined, "no result beside the error");
  assert.equal(answers[0].sessionId, created.id);
  assert.equal(second.stats().acksRefused, acksRefused, "the CLI took it");
  const requests = (await model.requests()).filter((r) => r.sessionId === created.id);
  assert.deepEqual(requests[1].toolResults, [cliFailureText("gamma")]);
  assert.ok(!JSON.stringify(requests[1].messages).includes("secret-password"), "the error stays out of the model's view");
  assert.equal(calls.alpha, 0);
  await created.destroy();
});
