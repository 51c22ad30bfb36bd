// Session options through the real Copilot CLI 1.0.102 and the scripted
// model, checked where they take effect: the model's system prompt and
// tool list, an MCP server's tool called and answered, a custom agent's
// prompt, a BYOK provider's token. The same cases as the Rust crate's
// tests/tests/session_options.rs.

import assert from "node:assert/strict";
import { join } from "node:path";
import { after, before, test } from "node:test";

import { approveAll } from "copilot-wasm";

import { MODEL, ROOT, startRealCli } from "./helpers.mjs";

let model, client, workDir, stop;

before(async () => {
  ({ model, client, workDir, stop } = await startRealCli("copilot-wasm-options"));
});

after(() => stop?.());

let n = 0;
function config(extra = {}) {
  return { model: MODEL, workingDirectory: workDir(`s${n++}`), ...extra };
}

/** One turn of a session made from `cfg`; its reply and the model requests of the turn. */
async function turn(cfg, replies, prompt = "Go.") {
  const session = await client.createSession(cfg);
  await model.script(session.id, replies);
  const reply = await session.sendAndWait(prompt, { timeoutMs: 90_000 });
  const requests = (await model.requests()).filter((r) => r.sessionId === session.id);
  await session.destroy();
  return { reply, requests };
}

test("a replaced system message and a section transform reach the model", { timeout: 120_000 }, async () => {
  const replaced = "You are Zed, a test double. Say only what you are told.";
  const { requests } = await turn(config({ systemMessage: { mode: "replace", content: replaced } }), [{ text: "ok" }]);
  assert.equal(requests[0].systemPrompt, replaced, "the whole system prompt is the replacement");

  let original;
  const transformed = await turn(
    config({
      systemMessage: {
        mode: "customize",
        sections: {
          identity: {
            action: async (content) => {
              original = content;
              return `IDENTITY-REWRITTEN-BY-THE-CLIENT (${content.length} chars before)`;
            },
          },
        },
      },
    }),
    [{ text: "ok" }],
  );
  assert.ok(original, "the transform was called with the section's text");
  const prompt = transformed.requests[0].systemPrompt;
  assert.match(prompt, /IDENTITY-REWRITTEN-BY-THE-CLIENT/);
  assert.ok(!prompt.includes(original.trim()), "the section's own text is gone");
});

test("available and excluded tools change the tools offered to the model", { timeout: 120_000 }, async () => {
  const all = (await turn(config(), [{ text: "ok" }])).requests[0].toolNames;
  assert.ok(all.includes("bash") && all.includes("view"), `${all}`);
  const excluded = (await turn(config({ excludedTools: ["bash"] }), [{ text: "ok" }])).requests[0].toolNames;
  assert.ok(!excluded.includes("bash") && excluded.includes("view"), `${excluded}`);
  const available = (await turn(config({ availableTools: ["view"] }), [{ text: "ok" }])).requests[0].toolNames;
  assert.deepEqual(available, ["view"]);
});

test("the model calls the tool of an MCP server of the session and reads its answer", { timeout: 120_000 }, async () => {
  const server = { command: "node", args: [join(ROOT, "tests", "mcp", "lookup-server.mjs")] };
  const { reply, requests } = await turn(
    config({ mcpServers: { lookup: server }, onPermission: approveAll }),
    [{ toolCalls: [{ name: "lookup-lookup_code", arguments: { name: "grace" } }] }, { text: "Done." }],
    "Look up grace.",
  );
  assert.ok(requests[0].toolNames.includes("lookup-lookup_code"), `${requests[0].toolNames}`);
  assert.deepEqual(requests[1].toolResults, ["code of grace: ECARG"]);
  assert.equal(reply?.content, "Done.");
});

test("a custom agent of the session takes effect", { timeout: 120_000 }, async () => {
  const agent = { name: "haiku-writer", description: "Writes haiku.", prompt: "AGENT-PROMPT-MARK: answer in haiku." };
  const selected = await turn(config({ customAgents: [agent], agent: "haiku-writer" }), [{ text: "Five, seven, five." }]);
  assert.equal(selected.reply?.content, "Five, seven, five.");
  assert.match(selected.requests[0].systemPrompt, /AGENT-PROMPT-MARK/, "the agent's prompt reaches the model");
  const notSelected = await turn(config({ customAgents: [agent] }), [{ text: "ok" }]);
  assert.doesNotMatch(notSelected.requests[0].systemPrompt, /AGENT-PROMPT-MARK/);
});

test("a BYOK provider asks this client for a bearer token per model request", { timeout: 120_000 }, async () => {
  let asked = 0;
  const before = (await model.requests()).length;
  const provider = {
    type: "openai",
    baseUrl: model.url,
    modelId: MODEL,
    bearerTokenProvider: async ({ providerName }) => {
      assert.equal(providerName, "default");
      asked++;
      return "byok-token";
    },
  };
  const session = await client.createSession(config({ provider }));
  const reply = await session.sendAndWait("Go.", { timeoutMs: 90_000 });
  await session.destroy();
  assert.ok(reply, "the turn went through the provider");
  // Requests through the provider carry no session header: count them all
  // (no other test runs meanwhile).
  const requests = (await model.requests()).length - before;
  assert.ok(requests >= 1);
  assert.equal(asked, requests, "one token per model request");
});
