// Recovery of a connection to a CLI server (`CopilotClient.connect`)
// against the real CLI 1.0.102 on the scripted model, as
// tests/tests/recovery_real_cli.rs does it for the Rust host: the
// connection is cut (a TCP proxy the test cuts) mid-session; while the
// client is away, another client (the CLI's owner) runs a turn of the
// session, whose events reach the CLI's event log and not the client. The
// client connects again, resumes the session, reads the gap back from the
// log and delivers every durable event once, in the log's order, before
// the live stream goes on. A server that is gone makes recovery give up
// after the core's attempts, with the cause.

import assert from "node:assert/strict";
import { mkdirSync } from "node:fs";
import { createServer, connect as netConnect } from "node:net";
import { join } from "node:path";
import { test } from "node:test";

import { CopilotClient, DisconnectedError } from "copilot-wasm";

import { MODEL, isolatedEnv, realCli, startScriptedModel, tempDir } from "./helpers.mjs";

/** The package as installed: its policy is read by path (not exported). */
const pkg = new URL(".", import.meta.resolve("copilot-wasm/package.json"));
const { default: policy } = await import(new URL("dist/policy.js", pkg));

/** How long a step may take before the test fails (a failure bound only). */
const WAIT = 90_000;

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

/**
 * A TCP proxy to `upstream` whose connection the test cuts; a connection
 * made while it is cut waits (its bytes kept) until `open()`.
 */
async function startProxy(upstream) {
  let gate = true;
  let current = [];
  const waiting = [];
  const join = (client) => {
    const server = netConnect(upstream);
    current = [client, server];
    for (const [from, to] of [
      [client, server],
      [server, client],
    ]) {
      from.on("data", (b) => to.write(b));
      from.on("close", () => to.destroy());
      from.on("error", () => to.destroy());
    }
    client.resume();
  };
  const listener = createServer((client) => {
    client.pause();
    if (gate) join(client);
    else waiting.push(client);
  });
  await new Promise((r) => listener.listen(0, "127.0.0.1", r));
  return {
    port: listener.address().port,
    /** Cuts the connection in use; the next waits for `open`. */
    cut() {
      gate = false;
      for (const s of current.splice(0)) s.destroy();
    },
    open() {
      gate = true;
      for (const c of waiting.splice(0)) join(c);
    },
    close: () => new Promise((r) => (listener.close(r), current.forEach((s) => s.destroy()))),
  };
}

test("a server connection cut mid-session is reconnected, and the events of the gap are delivered once, in order", {
  timeout: 300_000,
}, async () => {
  const model = await startScriptedModel();
  const { dir, cleanup } = tempDir("copilot-wasm-recovery-tcp");
  const workingDirectory = join(dir, "work");
  mkdirSync(workingDirectory, { recursive: true });
  let owner, client, proxy;
  try {
    // A CLI serving TCP, kept by its owner; the client under test reaches
    // it through the proxy.
    owner = await CopilotClient.start({
      cliPath: realCli(),
      transport: "tcp",
      connectionToken: "recovery-token",
      env: { ...isolatedEnv(dir, model.url), ...model.env },
      cwd: dir,
      authToken: "fake-token",
      args: ["--no-auto-login"],
    });
    proxy = await startProxy(owner.address);
    client = await CopilotClient.connect({ port: proxy.port, token: "recovery-token" });
    const steps = recoverySteps(client);
    const config = { model: MODEL, workingDirectory, onPermission: () => "approve-once" };
    const session = await client.createSession(config);
    const id = session.id;
    const seen = [];
    session.on((e) => seen.push(e));
    await model.script(id, [{ text: "First." }]);
    assert.equal((await session.sendAndWait("One?", { timeoutMs: WAIT }))?.content, "First.");

    // The connection is cut; while the client is away, the owner runs a
    // turn of the session: its events reach the CLI's log, not the client.
    const cutAt = performance.now();
    proxy.cut();
    // (A client that does not recover ends: the test fails, not waits.)
    const ended = client.closedPromise().then((cause) => ({ type: "closed", cause }));
    const lost = await Promise.race([steps.next(), ended]);
    assert.equal(lost.type, "connectionLost", JSON.stringify(lost));
    assert.equal(lost.kind, "server");
    const joined = await owner.resumeSession(id, config);
    await model.script(id, [{ text: "Second." }]);
    assert.equal((await joined.sendAndWait("Two?", { timeoutMs: WAIT }))?.content, "Second.");
    const openedAt = performance.now();
    proxy.open();
    let resumed, recovered;
    while (!recovered) {
      const step = await Promise.race([steps.next(), ended]);
      if (step.type === "sessionResumed") {
        assert.equal(step.sessionId, id);
        resumed = step;
      } else if (step.type === "recovered") recovered = step;
      else if (step.type !== "restarting" && step.type !== "attemptFailed") assert.fail(`unexpected step ${JSON.stringify(step)}`);
    }
    const recoveredAt = performance.now();
    assert.equal(recovered.sessions, 1);
    assert.ok(resumed.gapEvents > 0, "the owner's turn is the gap");
    // The session goes on over the new connection.
    await model.script(id, [{ text: "Third." }]);
    assert.equal((await session.sendAndWait("Three?", { timeoutMs: WAIT }))?.content, "Third.");
    const completedAt = performance.now();

    // Every durable event of the log reached the client once, in the log's
    // order; the owner's turn among them.
    const log = await client.call("session.eventLog.read", { sessionId: id, includeEphemeral: false, max: 1000 });
    const durable = log.events.map((e) => e.id);
    const seenIds = seen.map((e) => e.id);
    for (const eventId of durable) {
      assert.equal(seenIds.filter((s) => s === eventId).length, 1, `event ${eventId} delivered once`);
    }
    assert.deepEqual(
      seenIds.filter((s) => durable.includes(s)),
      durable,
      "in the log's order",
    );
    const messages = log.events.filter((e) => e.type === "assistant.message").map((e) => e.data.content);
    assert.deepEqual(messages, ["First.", "Second.", "Third."]);
    assert.deepEqual(
      seen.filter((e) => e.type === "assistant.message").map((e) => e.data.content),
      ["First.", "Second.", "Third."],
      "the client saw the owner's turn, once",
    );
    console.log(
      `recovery over TCP (server): ${resumed.gapEvents} events of the gap read back; ${durable.length} durable events ` +
        `in the log; proxy open to recovered ${Math.round(recoveredAt - openedAt)} ms, to the next turn's end ` +
        `${Math.round(completedAt - openedAt)} ms (cut to recovered ${Math.round(recoveredAt - cutAt)} ms, ` +
        `the owner's turn in between)`,
    );
    await joined.destroy().catch(() => {});
  } finally {
    await client?.stop().catch(() => {});
    await owner?.stop().catch(() => {});
    await proxy?.close();
    await model.stop();
    cleanup();
  }
});

test("a server that is gone makes recovery give up after its attempts, with the cause", {
  timeout: 300_000,
}, async () => {
  const model = await startScriptedModel();
  const { dir, cleanup } = tempDir("copilot-wasm-recovery-tcp-gone");
  let owner, client;
  try {
    owner = await CopilotClient.start({
      cliPath: realCli(),
      transport: "tcp",
      connectionToken: "recovery-token",
      env: { ...isolatedEnv(dir, model.url), ...model.env },
      cwd: dir,
      authToken: "fake-token",
      args: ["--no-auto-login"],
    });
    client = await CopilotClient.connect({ port: owner.address.port, token: "recovery-token" });
    const steps = recoverySteps(client);
    const session = await client.createSession({ model: MODEL, onPermission: () => "approve-once" });
    const events = session.events();

    // The server goes, and stays gone.
    owner.forceStop();
    const cause = await client.closedPromise();
    let attempts = 0;
    let gaveUp;
    for (const step of steps.seen) {
      if (step.type === "restarting") attempts = step.attempt;
      else if (step.type === "attemptFailed") assert.match(step.error, /cannot connect/);
      else if (step.type === "gaveUp") gaveUp = step.cause;
    }
    assert.equal(attempts, policy.recovery.backoffMs.length, "every attempt, no more");
    assert.equal(gaveUp, cause);
    assert.match(cause, /attempts to recover it failed.*cannot connect to 127\.0\.0\.1/s, "the cause says why");
    // Every call and stream ends with it.
    await assert.rejects(client.ping(), (e) => e instanceof DisconnectedError && e.message === cause);
    for (;;) {
      const { done } = await events.next();
      if (done) break;
    }
  } finally {
    await client?.stop().catch(() => {});
    await owner?.stop().catch(() => {});
    await model.stop();
    cleanup();
  }
});
