// Recovery against the real CLI 1.0.102 on the scripted model, as
// tests/tests/recovery_real_cli.rs does it for the Rust host: the CLI a
// client started (over stdio, and over TCP) is killed mid-turn with a
// client tool call pending. The client starts it again, resumes the session with its
// handlers and `continuePendingWork`, the call is answered once, the turn
// completes and the `sendAndWait` in flight returns its message. A CLI that
// keeps exiting makes recovery give up after the core's attempts, with the
// cause.

import assert from "node:assert/strict";
import { chmodSync, existsSync, mkdirSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";

import { CopilotClient, DisconnectedError } from "copilot-wasm";

import { MODEL, callInJournal, eventually, isolatedEnv, realCli, startScriptedModel, tempDir } from "./helpers.mjs";

/** The package as installed: its policy is read by path (not exported). */
const pkg = new URL(".", import.meta.resolve("copilot-wasm/package.json"));
const { default: policy } = await import(new URL("dist/policy.js", pkg));

/** How long a step may take before the test fails (a failure bound only). */
const WAIT = 90_000;

const WEATHER = {
  name: "get_weather",
  description: "Get the current weather for a city.",
  parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
};

/** The steps of the recoveries, as the client tells them: `next()` awaits the next one. */
function recoverySteps(client) {
  const seen = [];
  const waiting = [];
  client.onRecovery((step) => (waiting.length > 0 ? waiting.shift()(step) : seen.push(step)));
  return {
    seen,
    next: () => (seen.length > 0 ? Promise.resolve(seen.shift()) : new Promise((resolve) => waiting.push(resolve))),
  };
}

function startOptions(dir, model, cliPath = realCli(), transport = "stdio") {
  return {
    cliPath,
    transport,
    env: { ...isolatedEnv(dir, model.url), ...model.env },
    cwd: dir,
    authToken: "fake-token",
    args: ["--no-auto-login"],
  };
}

for (const transport of ["stdio", "tcp"]) {
  test(`a CLI killed mid-turn (${transport}) is started again, the pending call answered once, and sendAndWait returns`, {
    timeout: 300_000,
  }, () => killedMidTurn(transport));
}

async function killedMidTurn(transport) {
  const model = await startScriptedModel();
  const { dir, cleanup } = tempDir("copilot-wasm-recovery");
  const workingDirectory = join(dir, "work");
  mkdirSync(workingDirectory, { recursive: true });
  let client;
  try {
    client = await CopilotClient.start(startOptions(dir, model, realCli(), transport));
    const steps = recoverySteps(client);
    const firstPid = client.pid;
    const firstAddress = client.address;

    // The handler is called, and holds its answer until the CLI is gone.
    const calls = [];
    let release;
    const released = new Promise((resolve) => (release = resolve));
    const session = await client.createSession({
      model: MODEL,
      workingDirectory,
      onPermission: () => "approve-once",
      tools: [
        {
          ...WEATHER,
          skipPermission: true,
          handler: async (args, call) => {
            calls.push(call.toolCallId);
            await released;
            return `Sunny, 22 C in ${args.city}`;
          },
        },
      ],
    });
    const id = session.id;
    await model.script(id, [
      { toolCalls: [{ name: "get_weather", arguments: { city: "Paris" } }] },
      { text: "It is sunny in Paris." },
    ]);
    const turn = session.sendAndWait("Weather in Paris?", { timeoutMs: 2 * WAIT });
    await eventually(() => calls.length === 1, "the handler is called", WAIT);
    // The call's event is in the session's journal: the restarted CLI knows it.
    await callInJournal(dir, id, calls[0], WAIT);
    const lostAt = performance.now();
    process.kill(-firstPid, "SIGKILL");
    const lost = await steps.next();
    const lostSeenAt = performance.now();
    assert.equal(lost.type, "connectionLost", JSON.stringify(lost));
    assert.match(lost.cause, /SIGKILL/);
    assert.equal(lost.kind, transport === "stdio" ? "spawn-stdio" : "spawn-tcp");
    // The handler answers while the connection is down: the answer waits
    // for the resumed session.
    release();

    const resumed = [];
    let recovered, restartingAt, resumedAt;
    while (!recovered) {
      const step = await steps.next();
      if (step.type === "restarting") {
        assert.equal(step.attempt, 1, "the first attempt succeeds");
        restartingAt = performance.now();
      } else if (step.type === "sessionResumed") {
        resumed.push(step.sessionId);
        resumedAt = performance.now();
      } else if (step.type === "recovered") recovered = step;
      else assert.fail(`unexpected step ${JSON.stringify(step)}`);
    }
    const restartedAt = performance.now();
    assert.deepEqual(resumed, [id]);
    assert.equal(recovered.sessions, 1);
    assert.notEqual(client.pid, firstPid, "a new CLI");
    if (transport === "tcp") assert.notEqual(client.address.port, firstAddress.port, "the new CLI's port");

    const reply = await turn;
    const completedAt = performance.now();
    assert.equal(reply?.content, "It is sunny in Paris.");
    assert.equal(calls.length, 1, "the handler ran once");
    const requests = (await model.requests()).filter((r) => r.sessionId === id);
    assert.deepEqual(requests.at(-1).toolResults, ["Sunny, 22 C in Paris"]);
    const stats = client.stats();
    console.log(
      `recovery (${transport}): kill to loss seen ${Math.round(lostSeenAt - lostAt)} ms, to restarting ` +
        `${Math.round(restartingAt - lostAt)} ms, to session resumed ${Math.round(resumedAt - lostAt)} ms; ` +
        `loss to sessions resumed ${Math.round(restartedAt - lostAt)} ms (client's figure ` +
        `${Math.round(recovered.tookMs)} ms), to the turn's end ${Math.round(completedAt - lostAt)} ms; lists sent ` +
        `${stats.listsSent}, waits taken on from lists ${stats.listed}, duplicates ${stats.duplicateWaits}, answers ` +
        `${stats.answersSent} (accepted ${stats.acksAccepted})`,
    );
    assert.equal(stats.acksRefused, 0, "no answer was refused as a second one");
    assert.deepEqual(await client.call("session.tools.listPendingRequests", { sessionId: id }), { items: [] });
    // The session goes on: another turn on the new CLI.
    await model.script(id, [{ text: "Still here." }]);
    const again = await session.sendAndWait("Still there?", { timeoutMs: WAIT });
    assert.equal(again?.content, "Still here.");
  } finally {
    await client?.stop().catch(() => {});
    await model.stop();
    cleanup();
  }
}

// A session the restarted CLI no longer has (its state folder went while
// the CLI was down) is refused at its resume: that session ends with the
// CLI's words, the others are resumed and carry on (the Rust host's
// recovery_real_cli.rs checks the same).
test("a session the restarted CLI refuses to resume ends, and the others carry on", { timeout: 300_000 }, async () => {
  const model = await startScriptedModel();
  const { dir, cleanup } = tempDir("copilot-wasm-recovery-refused");
  let client;
  try {
    client = await CopilotClient.start(startOptions(dir, model));
    const steps = recoverySteps(client);
    const open = async (name) => {
      const workingDirectory = join(dir, "work", name);
      mkdirSync(workingDirectory, { recursive: true });
      const session = await client.createSession({ model: MODEL, workingDirectory, onPermission: () => "approve-once" });
      await model.script(session.id, [{ text: "Hello." }]);
      await session.sendAndWait("Hi", { timeoutMs: WAIT });
      return session;
    };
    const kept = await open("kept");
    const gone = await open("gone");
    const state = join(dir, "home", "session-state", gone.id);
    assert.ok(existsSync(state), `the CLI keeps the session in ${state}`);
    rmSync(state, { recursive: true });
    process.kill(-client.pid, "SIGKILL");

    const resumed = [];
    let recovered;
    while (!recovered) {
      const step = await steps.next();
      if (step.type === "sessionResumed") resumed.push(step.sessionId);
      else if (step.type === "recovered") recovered = step;
      else assert.notEqual(step.type, "gaveUp", JSON.stringify(step));
    }
    assert.deepEqual(resumed, [kept.id], "only the session the CLI still has");
    assert.equal(recovered.sessions, 1);
    await assert.rejects(
      gone.sendAndWait("Still there?", { timeoutMs: WAIT }),
      (e) => e instanceof DisconnectedError && /session\.resume failed after the connection was recovered/.test(e.message),
    );
    await model.script(kept.id, [{ text: "Still here." }]);
    assert.equal((await kept.sendAndWait("Still there?", { timeoutMs: WAIT }))?.content, "Still here.");
  } finally {
    await client?.stop().catch(() => {});
    await model.stop();
    cleanup();
  }
});

test("a CLI that keeps exiting makes recovery give up after its attempts, with the cause", {
  timeout: 300_000,
}, async () => {
  const model = await startScriptedModel();
  const { dir, cleanup } = tempDir("copilot-wasm-recovery-gives-up");
  let client;
  try {
    // The CLI starts once; every later start exits at once, with a reason.
    const marker = join(dir, "started-once");
    const script = join(dir, "copilot-once");
    writeFileSync(
      script,
      `#!/bin/sh\nif [ -e '${marker}' ]; then echo 'cannot start again' >&2; exit 3; fi\ntouch '${marker}'\nexec '${realCli()}' "$@"\n`,
    );
    chmodSync(script, 0o755);
    client = await CopilotClient.start(startOptions(dir, model, script));
    const steps = recoverySteps(client);
    const session = await client.createSession({ model: MODEL, onPermission: () => "approve-once" });
    const events = session.events();

    process.kill(-client.pid, "SIGKILL");
    const cause = await client.closedPromise();
    let attempts = 0;
    let gaveUp;
    for (const step of steps.seen) {
      if (step.type === "restarting") attempts = step.attempt;
      else if (step.type === "attemptFailed") assert.match(step.error, /exited/);
      else if (step.type === "gaveUp") gaveUp = step.cause;
    }
    assert.equal(attempts, policy.recovery.backoffMs.length, "every attempt, no more");
    assert.equal(gaveUp, cause);
    assert.match(cause, /cannot start again|status 3/, "the cause says why");
    // Every call and stream ends with it.
    await assert.rejects(client.ping(), (e) => e instanceof DisconnectedError && e.message === cause);
    for (;;) {
      const { done } = await events.next();
      if (done) break;
    }
  } finally {
    await client?.stop().catch(() => {});
    await model.stop();
    cleanup();
  }
});
