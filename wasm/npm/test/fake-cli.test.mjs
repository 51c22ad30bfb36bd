// Against the fake CLI (the cargo-built `fake_cli`, spawned as the client
// spawns the real one): events racing the create answer, a server-assigned
// id, the handshake's fallbacks, and a 100,000-event flood.

import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { test } from "node:test";
import { fileURLToPath } from "node:url";

import { CopilotClient, DisconnectedError, ProtocolVersionError } from "copilot-wasm";

import { collectUntil, eventually, fakeCli } from "./helpers.mjs";

const RACE_ARGS = ["--early-events", "5", "--early-permission-requests", "3", "--create-delay-ms", "20"];

async function eventsRacingTheCreateAnswer(transport, sessionConfig = {}) {
  const client = await CopilotClient.start({ cliPath: fakeCli(), transport, args: RACE_ARGS });
  try {
    const asked = [];
    const session = await client.createSession({
      model: "fake-model",
      ...sessionConfig,
      onPermission: (request) => {
        asked.push(request.requestId);
        return { kind: "approve-once" };
      },
    });
    // Subscribed only after createSession resolved: the first subscriber
    // still gets every event that arrived before it, in order.
    const events = await collectUntil(session.events(), (e) => e.type === "session.start");
    const first8 = events.slice(0, 8).map((e) => [e.type, e.data.n ?? e.data.requestId]);
    assert.deepEqual(first8, [
      ["session.info", 0],
      ["session.info", 1],
      ["session.info", 2],
      ["session.info", 3],
      ["session.info", 4],
      ["permission.requested", "perm-0"],
      ["permission.requested", "perm-1"],
      ["permission.requested", "perm-2"],
    ]);
    await eventually(() => asked.length === 3, "three permission answers");
    assert.deepEqual(asked, ["perm-0", "perm-1", "perm-2"]);
    const stats = client.stats();
    assert.equal(stats.unknownSession, 0, JSON.stringify(stats));
    await session.destroy();
    await client.stop();
    return { session, stats };
  } finally {
    client.forceStop();
  }
}

test("events and permission prompts racing the create answer are delivered in order and answered (stdio)", () =>
  eventsRacingTheCreateAnswer("stdio"));

test("events and permission prompts racing the create answer are delivered in order and answered (tcp)", () =>
  eventsRacingTheCreateAnswer("tcp"));

test("with a server-assigned id the racing frames are parked, then released in order", async () => {
  const { session, stats } = await eventsRacingTheCreateAnswer("stdio", { serverAssignedId: true });
  assert.equal(session.id, "fake-1");
  assert.ok(stats.parked >= 8, JSON.stringify(stats));
});

test("a CLI without connect is reached through ping; another protocol version is refused", async () => {
  const legacy = await CopilotClient.start({ cliPath: fakeCli(), args: ["--legacy-connect"] });
  assert.equal(legacy.serverInfo.protocolVersion, 3);
  await legacy.stop();
  await assert.rejects(
    CopilotClient.start({ cliPath: fakeCli(), args: ["--protocol-version", "2"] }),
    (e) => e instanceof ProtocolVersionError && e.server === 2,
  );
});

test("a CLI that disappears rejects every pending call and ends every stream", async () => {
  // A client that does not recover (that one: recovery.test.mjs).
  const client = await CopilotClient.start({ cliPath: fakeCli(), autoRestart: false });
  const session = await client.createSession({ model: "m" });
  const events = session.events();
  await collectUntil(events, (e) => e.type === "session.start");
  const disconnects = [];
  client.on("disconnect", (reason) => disconnects.push(reason));
  process.kill(-client.pid, "SIGKILL");
  await assert.rejects(session.sendAndWait("hi"), DisconnectedError);
  await assert.rejects(client.ping(), DisconnectedError);
  const rest = [];
  for await (const e of events) rest.push(e.type);
  assert.deepEqual(rest, []);
  assert.equal(disconnects.length, 1);
  assert.equal(client.closed, true);
  await client.stop();
});

// Each transport in a fresh Node process (test/flood-child.mjs), so that
// its peak RSS is its own.
for (const transport of ["stdio", "tcp"]) {
  test(`a 100,000-event flood over ${transport} is received completely and in order`, { timeout: 120_000 }, () => {
    const N = 100_000;
    const child = spawnSync(process.execPath, [fileURLToPath(new URL("flood-child.mjs", import.meta.url)), transport, String(N)], {
      encoding: "utf8",
      env: { ...process.env, COPILOT_FAKE_CLI: fakeCli() },
    });
    assert.equal(child.status, 0, `flood child failed:\n${child.stdout}\n${child.stderr}`);
    const result = JSON.parse(child.stdout.trim().split("\n").pop());
    assert.equal(result.received, N, "every event, exactly once, in order");
    assert.equal(result.unknownSession + result.malformed + result.parkDropped + result.refused.parkOverflow, 0, JSON.stringify(result));
    console.log(
      `flood over ${transport}: ${N} events in ${result.seconds.toFixed(3)} s = ${Math.round(result.eventsPerSecond)} events/s; ` +
        `peak RSS ${result.maxRssMb.toFixed(1)} MB (${result.rssBeforeMb.toFixed(1)} MB before the flood); ` +
        `${(result.bytes / 1e6).toFixed(1)} MB routed; lost 0`,
    );
  });
}
