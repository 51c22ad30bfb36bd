// Against the real Copilot CLI 1.0.102 (installed by `npm ci` at the
// repository root), isolated, over stdio and TCP: the handshake, a
// session's life, a prompt without a login, stopping. Never skipped:
// without the CLI these tests fail and say how to install it.

import assert from "node:assert/strict";
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";

import { CliExitedError, CliNotFoundError, CopilotClient, RpcError, SessionError, nativeBinary, resolveCli } from "copilot-wasm";

import { MODEL, REAL_CLI_VERSION, ROOT, collectUntil, isolatedEnv, realCli, refusingProxy, tempDir } from "./helpers.mjs";

function alive(pid) {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

async function startIsolated(transport, extra = {}) {
  const { dir, cleanup } = tempDir("copilot-wasm-real");
  const env = isolatedEnv(dir, await refusingProxy());
  const client = await CopilotClient.start({
    cliPath: realCli(),
    transport,
    env,
    cwd: dir,
    args: ["--no-auto-login", ...(extra.args ?? [])],
    ...extra.options,
  });
  return { client, dir, cleanup };
}

async function sessionLifeCycle(transport) {
  const started = performance.now();
  const { client, dir, cleanup } = await startIsolated(transport);
  try {
    console.log(`${transport}: started and connected in ${Math.round(performance.now() - started)} ms`);
    assert.deepEqual(client.serverInfo, { protocolVersion: 3, version: REAL_CLI_VERSION });
    if (transport === "tcp") assert.equal(client.address.host, "127.0.0.1");
    assert.equal((await client.ping("hello")).message, "pong: hello");
    const status = await client.status();
    assert.deepEqual([status.version, status.protocolVersion], [REAL_CLI_VERSION, 3]);
    assert.equal((await client.authStatus()).isAuthenticated, false, "the isolated CLI has no login");

    const lifecycle = [];
    client.on("lifecycle", (l) => lifecycle.push(l));
    const work = join(dir, "work");
    mkdirSync(work);
    const session = await client.createSession({ model: MODEL, workingDirectory: work });
    assert.match(session.id, /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/, "a client UUID");
    const events = session.events();

    // Without a login the turn ends in session.error: sendAndWait rejects.
    const error = await session.sendAndWait("What is 2 + 2?", { timeoutMs: 60_000 }).then(
      (r) => assert.fail(`expected a session error, got ${JSON.stringify(r)}`),
      (e) => e,
    );
    assert.ok(error instanceof SessionError, `${error}`);
    assert.match(error.message, /token|auth/i);

    const seen = await collectUntil(events, (e) => e.type === "session.idle");
    const types = seen.map((e) => e.type);
    const start = seen.find((e) => e.type === "session.start");
    assert.ok(start, `no session.start among ${types}`);
    assert.equal(start.data.sessionId, session.id);
    assert.equal(start.data.selectedModel, MODEL);
    assert.ok(types.includes("session.error"), `${types}`);

    const listed = await client.listSessions();
    assert.ok(listed.some((s) => s.sessionId === session.id), JSON.stringify(listed));
    assert.equal(await client.lastSessionId(), session.id);

    await session.destroy();
    const after = [];
    for await (const e of events) after.push(e.type); // ends with the session
    assert.ok(after.includes("session.shutdown"), `${after}`);
    const resumed = await client.resumeSession(session.id, { model: MODEL });
    assert.equal(resumed.id, session.id);
    await resumed.destroy();
    await client.deleteSession(session.id);
    // A second delete fails, saying which session and why (the CLI's words).
    await assert.rejects(client.deleteSession(session.id), (e) => {
      assert.ok(e instanceof RpcError, `${e}`);
      assert.ok(e.message.includes(`failed to delete session ${session.id}: `) && e.message.includes("not found"), e.message);
      return true;
    });

    const kinds = lifecycle.filter((l) => l.sessionId === session.id).map((l) => l.type);
    assert.ok(kinds.includes("session.created") && kinds.includes("session.deleted"), `${kinds}`);
    const stats = client.stats();
    assert.deepEqual(
      [stats.malformed, stats.oversize, stats.unknownSession, stats.unmatchedResponses, stats.pendingRequests],
      [0, 0, 0, 0, 0],
      JSON.stringify(stats),
    );

    const pid = client.pid;
    assert.ok(alive(pid));
    const stopping = performance.now();
    await client.stop();
    console.log(`${transport}: stopped in ${Math.round(performance.now() - stopping)} ms`);
    assert.equal(alive(pid), false, "the CLI is gone after stop");
    assert.equal(client.closed, true);
    await assert.rejects(client.ping(), /closed|stopped/);
  } finally {
    client.forceStop();
    cleanup();
  }
}

test("real CLI over stdio: connect, status, a session, a prompt without login, stop", { timeout: 120_000 }, () =>
  sessionLifeCycle("stdio"),
);

test("real CLI over TCP: connect, status, a session, a prompt without login, stop", { timeout: 120_000 }, () =>
  sessionLifeCycle("tcp"),
);

test("real CLI over TCP: the connection token is required and checked", { timeout: 120_000 }, async () => {
  const { client: owner, cleanup } = await startIsolated("tcp", { options: { connectionToken: "s3cret" } });
  try {
    const { port } = owner.address;
    const refused = await CopilotClient.connect({ port }).then(
      () => assert.fail("connected without the token"),
      (e) => e,
    );
    assert.equal(refused.code, -32002, `${refused}`);
    await assert.rejects(CopilotClient.connect({ port, token: "wrong" }), (e) => e.code === -32002);
    const second = await CopilotClient.connect({ port, token: "s3cret" });
    assert.equal((await second.status()).protocolVersion, 3);
    await second.stop();
    assert.equal((await owner.ping()).protocolVersion, 3, "a connected client stops without stopping the CLI");
    await owner.stop();
  } finally {
    owner.forceStop();
    cleanup();
  }
});

test("real CLI: one that exits at start is reported with its stderr", { timeout: 120_000 }, async () => {
  const { dir, cleanup } = tempDir("copilot-wasm-exit");
  try {
    const started = CopilotClient.start({
      cliPath: realCli(),
      env: isolatedEnv(dir, await refusingProxy()),
      cwd: dir,
      args: ["--no-auto-login", "--no-such-flag-for-copilot"],
    });
    const error = await started.then(
      () => assert.fail("an unknown flag should stop the CLI"),
      (e) => e,
    );
    assert.ok(error instanceof CliExitedError, `${error}`);
    assert.match(error.stderr, /no-such-flag-for-copilot/);
  } finally {
    cleanup();
  }
});

test("the native binary of an npm install is preferred to its Node loader; a missing explicit path is an error", () => {
  const loader = join(ROOT, "node_modules", ".bin", "copilot");
  assert.equal(nativeBinary(loader), realCli());
  assert.equal(resolveCli(loader), realCli());
  assert.throws(
    () => resolveCli("/nonexistent/copilot"),
    (e) => e instanceof CliNotFoundError && e.searched.length === 1 && e.searched[0] === "/nonexistent/copilot",
  );
});
