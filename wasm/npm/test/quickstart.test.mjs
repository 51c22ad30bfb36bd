// The README's JavaScript example (examples/quickstart.mjs), run as a user
// would run it, against the fake CLI (COPILOT_CLI_PATH points at fake_cli).

import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { test } from "node:test";
import { fileURLToPath } from "node:url";

import { fakeCli } from "./helpers.mjs";

const EXAMPLE = fileURLToPath(new URL("../examples/quickstart.mjs", import.meta.url));

function runExample(env, args = []) {
  return spawnSync(process.execPath, [EXAMPLE, ...args], {
    encoding: "utf8",
    timeout: 60_000,
    env: { ...process.env, COPILOT_CLI_PATH: fakeCli(), ...env },
  });
}

test("the quickstart prints the reply of the turn", () => {
  const reply = "It is sunny in Paris, 22 C.";
  const run = runExample({ FAKE_CLI_REPLY: reply }, ["What is the weather in Paris?"]);
  assert.equal(run.status, 0, `${run.stdout}\n${run.stderr}`);
  assert.equal(run.stdout, `${reply}\n`);
});

test("without a model the quickstart says why and exits with status 2", () => {
  const run = runExample({ FAKE_CLI_REPLY: "" });
  assert.equal(run.status, 2, `${run.stdout}\n${run.stderr}`);
  assert.match(run.stderr, /Copilot could not answer: authentication: No model endpoint/);
});
