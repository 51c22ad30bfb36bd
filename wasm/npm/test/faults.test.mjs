// Faults of the CLI: nothing hangs, every waiter learns the real cause,
// memory stays bounded, and a started TCP CLI admits only its client.
//
// - A frozen CLI (SIGSTOP on its process group, real CLI 1.0.102, stdio
//   and TCP): every call rejects with a TimeoutError by its deadline,
//   destroy() and stop() return, and stop() kills the process.
// - The CLI killed in the middle of a turn: the turn, the event stream
//   and every later call end with the CLI's death as the cause.
// - 3 turns of 100,000 deltas through sendAndWait only: what is kept for a
//   first subscriber that never comes is bounded and counted (heap figures
//   printed, not asserted).
// - A started TCP CLI refuses a connection without its generated token.
//
// No test bounds a duration: a deadline test asserts that the call
// rejected with a TimeoutError; that it returned at all is proven by the
// test ending.

import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";

import { CopilotClient, DisconnectedError, MAX_KEPT_EVENTS, RpcError, TimeoutError } from "copilot-wasm";

import { MODEL, fakeCli, isolatedEnv, realCli, refusingProxy, startScriptedModel, tempDir } from "./helpers.mjs";

/** Waits until every thread of `pid` is stopped (a signal lands when the target next runs). */
async function waitStopped(pid) {
  for (;;) {
    const tasks = readdirSync(`/proc/${pid}/task`);
    const stopped = tasks.every((t) => {
      let stat = "";
      try {
        stat = readFileSync(`/proc/${pid}/task/${t}/stat`, "utf8");
      } catch {
        return true; // the thread is gone
      }
      const state = stat.slice(stat.lastIndexOf(") ") + 2)[0];
      return state === "T" || state === "t";
    });
    if (stopped) return;
    await new Promise((r) => setImmediate(r));
  }
}

/** Waits until `pid` is gone (killed and reaped). */
async function waitGone(pid) {
  while (existsSync(`/proc/${pid}`)) await new Promise((r) => setTimeout(r, 10));
}

for (const transport of ["stdio", "tcp"]) {
  test(`a frozen CLI over ${transport}: every call times out, destroy and stop return, the CLI is killed`, {
    timeout: 300_000,
  }, async () => {
    const { dir, cleanup } = tempDir("copilot-wasm-frozen");
    const client = await CopilotClient.start({
      cliPath: realCli(),
      transport,
      env: isolatedEnv(dir, await refusingProxy()),
      cwd: dir,
      args: ["--no-auto-login"],
      requestTimeoutMs: 1000,
      shutdownGraceMs: 1000,
    });
    const pid = client.pid;
    try {
      const sessions = [];
      // On a loaded machine a create may outlast the 1 s deadline: that is a
      // TimeoutError, and creating again is what a caller does.
      while (sessions.length < 3) {
        try {
          sessions.push(await client.createSession({ model: MODEL }));
        } catch (e) {
          if (!(e instanceof TimeoutError)) throw e;
        }
      }
      const [s] = sessions;
      const events = s.events();
      process.kill(-pid, "SIGSTOP");
      await waitStopped(pid);

      const calls = {
        ping: () => client.ping(),
        status: () => client.status(),
        "session.list": () => client.listSessions(),
        "session.delete": () => client.deleteSession("nope"),
        "session.create": () => client.createSession({ model: MODEL }),
        "ping (300 ms of its own)": () => client.call("ping", {}, { timeoutMs: 300 }),
        send: () => s.send("hello"),
        "sendAndWait (2 s)": () => s.sendAndWait("hello", { timeoutMs: 2000 }),
        abort: () => s.abort(),
        getMessages: () => s.getMessages(),
        call: () => s.call("session.model.getCurrent"),
        destroy: () => s.destroy(),
      };
      for (const [what, call] of Object.entries(calls)) {
        const started = performance.now();
        await assert.rejects(call(), TimeoutError, what);
        console.log(`frozen CLI over ${transport}: ${what} returned after ${Math.round(performance.now() - started)} ms`);
      }
      // The destroyed session's stream ends.
      for await (const _ of events);
      // Two sessions still open: stop is bounded in total, then kills.
      const started = performance.now();
      await assert.rejects(client.stop(), TimeoutError);
      console.log(
        `frozen CLI over ${transport}: stop (2 sessions open) returned after ${Math.round(performance.now() - started)} ms`,
      );
      await waitGone(pid);
    } finally {
      client.forceStop();
      cleanup();
    }
  });
}

for (const transport of ["stdio", "tcp"]) {
  test(`the CLI killed mid-turn over ${transport}: the turn, its stream and later calls end with the cause`, {
    timeout: 300_000,
  }, async () => {
    const model = await startScriptedModel();
    const { dir, cleanup } = tempDir("copilot-wasm-killed");
    // A client that does not recover (that one: recovery.test.mjs).
    const client = await CopilotClient.start({
      autoRestart: false,
      cliPath: realCli(),
      transport,
      env: { ...isolatedEnv(dir, model.url), ...model.env },
      cwd: dir,
      authToken: "fake-token",
      args: ["--no-auto-login"],
    });
    let release;
    const released = new Promise((r) => (release = r));
    let called;
    const toolCalled = new Promise((r) => (called = r));
    try {
      const session = await client.createSession({
        model: MODEL,
        workingDirectory: dir,
        tools: [
          {
            name: "wait_here",
            description: "Waits.",
            parameters: { type: "object" },
            skipPermission: true,
            handler: async () => {
              called();
              await released;
              return "too late";
            },
          },
        ],
      });
      await model.script(session.id, [
        { toolCalls: [{ name: "wait_here", arguments: {} }] },
        { text: "never said" },
      ]);
      const events = session.events();
      const turn = session.sendAndWait("Wait for me.", { timeoutMs: 3_600_000 }).then(
        () => assert.fail("the turn cannot finish"),
        (e) => e,
      );
      await toolCalled;
      process.kill(client.pid, "SIGKILL");

      const reason = await client.closedPromise();
      assert.match(reason, /SIGKILL/, "the cause is the CLI's death");
      const error = await turn;
      assert.ok(error instanceof DisconnectedError, `${error}`);
      assert.match(error.message, /SIGKILL/);
      let seen = 0;
      for await (const _ of events) seen++;
      assert.ok(seen > 0, "the turn's events arrived before the kill");
      await assert.rejects(client.ping(), (e) => e instanceof DisconnectedError && /SIGKILL/.test(e.message));
    } finally {
      release();
      client.forceStop();
      await model.stop();
      cleanup();
    }
  });
}

test("3 turns of 100,000 deltas through sendAndWait only keep memory flat", { timeout: 300_000 }, () => {
  const child = spawnSync(
    process.execPath,
    ["--expose-gc", fileURLToPath(new URL("kept-memory-child.mjs", import.meta.url)), "3", "100000"],
    { encoding: "utf8", env: { ...process.env, COPILOT_FAKE_CLI: fakeCli() } },
  );
  assert.equal(child.status, 0, `kept-memory child failed:\n${child.stdout}\n${child.stderr}`);
  const lines = child.stdout.trim().split("\n");
  for (const line of lines.slice(0, -1)) console.log(`kept memory: ${line}`);
  const stats = JSON.parse(lines.at(-1));
  assert.ok(stats.events > 300_000, JSON.stringify(stats));
  assert.equal(stats.notKept, stats.events - MAX_KEPT_EVENTS, "what is not kept is counted");
});

test("a started TCP CLI refuses a connection without its generated token", { timeout: 120_000 }, async () => {
  const { dir, cleanup } = tempDir("copilot-wasm-token");
  const client = await CopilotClient.start({
    cliPath: realCli(),
    transport: "tcp",
    env: isolatedEnv(dir, await refusingProxy()),
    cwd: dir,
    args: ["--no-auto-login"],
  });
  try {
    await client.ping();
    const { port } = client.address;
    await assert.rejects(CopilotClient.connect({ port }), (e) => e instanceof RpcError && e.code === -32002);
    await assert.rejects(
      CopilotClient.connect({ port, token: "a-wrong-token" }),
      (e) => e instanceof RpcError && e.code === -32002,
    );
  } finally {
    await client.stop();
    cleanup();
  }
});
