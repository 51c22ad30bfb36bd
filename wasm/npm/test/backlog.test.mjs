// The connection's backlog (the core's rule, `CoreEngine.backlog`): an
// async iterator slower than the CLI pauses the client's reading, so the
// CLI is held back and memory stays bounded; a request made meanwhile is
// still answered; an iterator kept and never read does not stop the
// others. Against the fake CLI (`flood:N`: N deltas with ids "0", "1",
// ... then session.idle), over stdio and TCP (Node streams) and over WHATWG
// streams on a child's pipes (`fromStreams`): each a real pipe or socket
// whose writer waits while the client does not read.
//
// No test bounds a duration: "paused" is read from `client.backlog()`,
// and a test that waits for it also stops waiting once the whole flood has
// been read, so that a client that never pauses fails instead of hanging.

import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { Readable, Writable } from "node:stream";
import { mock, test } from "node:test";

import { CopilotClient, MAX_BACKLOG_BYTES } from "copilot-wasm";

import { fakeCli } from "./helpers.mjs";

const FLOOD = 40_000;

/** One read's chunk past the bound (the pause comes after its events are delivered), and room. */
const SLACK = 256 << 10;

const tick = () => new Promise((resolve) => setImmediate(resolve));

/** A client of a fake CLI over `kind`: "stdio", "tcp" or "whatwg". */
async function fakeClient(kind) {
  if (kind !== "whatwg") return CopilotClient.start({ cliPath: fakeCli(), transport: kind });
  const child = spawn(fakeCli(), ["--headless", "--stdio"], { stdio: ["pipe", "pipe", "inherit"] });
  const client = await CopilotClient.fromStreams(Readable.toWeb(child.stdout), Writable.toWeb(child.stdin));
  const stop = client.stop.bind(client);
  client.stop = async () => {
    await stop().catch(() => {});
    child.kill();
  };
  return client;
}

/** Waits until reading has paused, or the whole flood was delivered. */
async function untilPaused(client, session, pauses = 1) {
  while (client.backlog().pauses < pauses && session.stats().events < FLOOD) await tick();
  assert.ok(client.backlog().pauses >= pauses, `reading never paused: ${JSON.stringify(client.backlog())}`);
}

/**
 * Takes the flood from `events`, checking its order, one event a turn of
 * the event loop (slower than the client reads, unless it pauses);
 * returns how many deltas came.
 */
async function takeFlood(events) {
  let next = 0;
  for await (const e of events) {
    await new Promise((resolve) => setImmediate(resolve));
    if (e.type === "assistant.message_delta") {
      assert.equal(e.id, String(next), "an event out of order, lost or twice");
      next++;
    }
    if (e.type === "session.idle") break;
  }
  return next;
}

for (const kind of ["stdio", "tcp", "whatwg"]) {
  test(`over ${kind}, a slow iterator holds the CLI back and the backlog stays bounded`, { timeout: 120_000 }, async () => {
    const client = await fakeClient(kind);
    try {
      const session = await client.createSession({ model: "m", streaming: true });
      const events = session.events();
      // The stall's timer stands still while the flood is taken: a machine
      // that holds this process off the CPU for the stall's time cannot
      // make the reader read on (that rule has tests of its own, on a
      // virtual clock in the core and below), so the bound is the pause's.
      mock.timers.enable({ apis: ["setTimeout"] });
      try {
        await session.send(`flood:${FLOOD}`);
        // Nothing is taken until reading has paused over a full backlog.
        await untilPaused(client, session);
        assert.ok(session.stats().events < FLOOD, "the client read on while paused");
        assert.equal(await takeFlood(events), FLOOD);
      } finally {
        mock.timers.reset();
      }
      const backlog = client.backlog();
      assert.ok(backlog.peakBytes > MAX_BACKLOG_BYTES, `the bound was reached: ${JSON.stringify(backlog)}`);
      assert.ok(backlog.peakBytes <= MAX_BACKLOG_BYTES + SLACK, `bounded: ${JSON.stringify(backlog)}`);
      assert.equal(backlog.bytes, 0, "an iterator left with break gave its bytes back");
    } finally {
      await client.stop();
    }
  });
}

test("over a full backlog, a request is answered, and the flood then arrives whole", { timeout: 120_000 }, async () => {
  const client = await CopilotClient.start({ cliPath: fakeCli(), transport: "stdio" });
  try {
    const session = await client.createSession({ model: "m", streaming: true });
    const events = session.events();
    // Timers stand still from the flood to its end: it is the request that
    // wakes the reading, not the stall's timer (nor its own deadline), and
    // a process held off the CPU while it takes the flood cannot make the
    // reader read on for a stall.
    mock.timers.enable({ apis: ["setTimeout"] });
    try {
      await session.send(`flood:${FLOOD}`);
      await untilPaused(client, session);
      // Its answer is behind events nobody takes: reading goes on for it.
      const pong = await client.ping("over the backlog");
      assert.match(pong.message, /over the backlog/);
      assert.ok(client.backlog().bytes > MAX_BACKLOG_BYTES, "nothing was taken meanwhile");
      assert.equal(await takeFlood(events), FLOOD);
    } finally {
      mock.timers.reset();
    }
    assert.equal(client.backlog().overruns, 0, "the reading that went on was the request's, not a stall's");
  } finally {
    await client.stop();
  }
});

test("an iterator kept and never read: nothing is read while paused, then the stall lets a callback subscriber have every event", {
  timeout: 120_000,
}, async () => {
  const warnings = [];
  let session;
  // The events delivered when reading goes on after the stall.
  let atStall;
  const logger = {
    warn: (text) => {
      atStall ??= session.stats().events;
      warnings.push(text);
    },
  };
  const client = await CopilotClient.start({ cliPath: fakeCli(), transport: "stdio", logger });
  try {
    session = await client.createSession({ model: "m", streaming: true });
    const kept = session.events();
    let deltas = 0;
    const idle = new Promise((resolve) => {
      session.on((e) => {
        if (e.type === "assistant.message_delta") deltas++;
        if (e.type === "session.idle") resolve();
      });
    });
    await session.send(`flood:${FLOOD}`);
    await untilPaused(client, session);
    const atPause = session.stats().events;
    await idle;
    assert.equal(atStall, atPause, "nothing was read from the pause to the stall");
    assert.equal(deltas, FLOOD, "every event reached the callback");
    const backlog = client.backlog();
    assert.ok(backlog.pauses >= 1 && backlog.overruns >= 1, `paused, then read on: ${JSON.stringify(backlog)}`);
    assert.ok(backlog.bytes > MAX_BACKLOG_BYTES, "the kept iterator holds the flood");
    assert.ok(warnings.some((w) => /none was taken .* reading on/.test(w)), `said so: ${warnings}`);
    await kept.return();
    assert.equal(client.backlog().bytes, 0, "given back when the iterator is closed");
  } finally {
    await client.stop();
  }
});
