// The conformance table of issue 8, run by the JS client: every obligation
// kind of the engine's answer table (the rows come from the cargo-built
// `conformance_cli`, which reads them from `copilot_core::ANSWERS`) x every
// way its answer can go wrong. The fake CLI records what reaches it and
// reports, per cell, whether exactly one answer with the expected payload
// arrived. Also: 2,000 permission prompts pending at once, answered slowly
// to a CLI that acknowledges slowly; a resume of a session open here.

import assert from "node:assert/strict";
import { test } from "node:test";

import { CopilotClient, GENERIC_HANDLER_KINDS, genericRequestNames, loadWasm } from "copilot-wasm";

import { collectUntil, eventually, testBinary } from "./helpers.mjs";

const conformanceCli = () => testBinary("conformance_cli");

// The generic handlers' names come from the engine's answer table.
await loadWasm();

/** The kinds answered by a generic handler (`requestHandlers`). */
const GENERIC_KINDS = new Set(GENERIC_HANDLER_KINDS);

/** The handler kinds the JS client runs (as host-std's SessionConfig). */
const JS_KINDS = new Set([
  "permission",
  "tool",
  "userInput",
  "elicitation",
  "mcpOAuth",
  "exitPlanMode",
  "command",
  "hooks",
  "canvas",
  ...GENERIC_KINDS,
]);

/** What each handler below answers, as it reaches the CLI (`null`: the key left out). */
const ANSWERS = {
  permission: { kind: "approve-once" },
  tool: { textResultForLlm: "ran", resultType: "success" },
  userInput: { answer: "blue", wasFreeform: true },
  elicitation: { action: "decline" },
  mcpOAuth: { kind: "token", accessToken: "tok" },
  exitPlanMode: { approved: true },
  command: null,
  hooks: { permissionDecision: "allow" },
};

/** What the canvas below answers, by request. */
const CANVAS_ANSWERS = {
  "canvas.open": { url: "https://example.test/i-1" },
  "canvas.close": null,
  "canvas.action.invoke": { acted: { x: 1 } },
};

/** A failed canvas handler's coded error, as the official SDKs send it. */
const canvasError = (message, code = "canvas_handler_error") => ({
  error: { code: -32603, message, data: { code, message } },
});

/** What the handler of `row` answers. */
const answerOf = (row) =>
  GENERIC_KINDS.has(row.handler)
    ? { answeredBy: row.name }
    : row.handler === "canvas"
      ? CANVAS_ANSWERS[row.name]
      : ANSWERS[row.handler];

/**
 * A session config with every handler kind; `act(kind)` is what each does:
 * returns the value the handler returns (maybe a promise), or throws.
 */
function handlers(act) {
  return {
    onPermission: () => act("permission", "approve-once"),
    onUserInput: () => act("userInput", "blue"),
    onElicitation: () => act("elicitation", "decline"),
    onMcpOAuth: () => act("mcpOAuth", "tok"),
    onExitPlanMode: () => act("exitPlanMode", true),
    tools: [{ name: "conformance_tool", handler: () => act("tool", "ran") }],
    commands: [{ name: "conformance", handler: () => act("command", undefined) }],
    hooks: { onPreToolUse: () => act("hooks", { permissionDecision: "allow" }) },
    canvases: [
      {
        id: "conformance",
        displayName: "Conformance",
        description: "a canvas",
        open: () => act("canvas", CANVAS_ANSWERS["canvas.open"]),
        onClose: () => act("canvas", undefined),
        actions: [{ name: "act", handler: (ctx) => act("canvas", { acted: ctx.input }) }],
      },
    ],
    requestHandlers: Object.fromEntries(
      genericRequestNames().map((name) => [name, (_, invocation) => act(name, { answeredBy: invocation.name })]),
    ),
  };
}

const answering = handlers((_, value) => value);
const throwing = handlers(() => {
  throw new Error("boom");
});

/** A handler set that waits on `gate` and records that it was called. */
function gated() {
  let open;
  const gate = new Promise((r) => (open = r));
  const called = [];
  const config = handlers(async (kind, value) => {
    called.push(kind);
    await gate;
    return value;
  });
  return { config, called, open };
}

async function start(options = {}) {
  return CopilotClient.start({ cliPath: conformanceCli(), transport: "stdio", ...options });
}

/**
 * What the cell must get: the handler's answer, the row's refusal, or,
 * where this client has no handler for a wait the core's table leaves to
 * another client of the session (`row.unhandled`), nothing.
 */
function expected(row, path) {
  const noHandler = row.unhandled === "leave" ? "nothing" : "refusal";
  const handled = JS_KINDS.has(row.handler);
  if (!handled) return noHandler;
  switch (path) {
    case "noHandler":
      return noHandler;
    case "handler":
      return { answer: answerOf(row) };
    case "unreadable":
      // JS reads lone surrogates and 1e400, so the handler answers; but
      // with every string a lone surrogate, no tool or command has the
      // name asked for: no handler (for a tool, left to another client;
      // for a command, refused). Nor does a hook: its type is no hook type.
      if (row.handler === "tool") return noHandler;
      // Nor is there a canvas of that id: the official SDKs' error (its
      // text, with the lone surrogate, cannot travel to the fake as JSON).
      if (row.handler === "canvas") return { error: { code: -32603 } };
      return ["command", "hooks"].includes(row.handler) ? "refusal" : { answer: answerOf(row) };
    case "handlerPanics":
      // A tool that throws failed: its error goes as the call's `error`,
      // no result, as the official SDK sends it (the CLI tells the model
      // only that the tool failed).
      if (row.handler === "canvas") return canvasError("boom");
      return row.handler === "tool" ? { failure: "boom" } : "refusal";
    case "drifted":
      // Every field of an exit-plan-mode request has a default; the generic
      // handlers read JSON as it comes.
      return row.handler === "exitPlanMode" || GENERIC_KINDS.has(row.handler) ? { answer: answerOf(row) } : "refusal";
    default:
      return "refusal";
  }
}

async function report(client) {
  // Every answer written before this call reaches the CLI before it.
  return client.call("conformance.report", {});
}

async function allAnswered(client, n) {
  await eventually(
    async () => {
      const r = await report(client);
      return r.cells.length === n && r.cells.every((c) => c.expect === "nothing" || c.answers.length > 0);
    },
    `${n} cells answered`,
    60_000,
  );
}

function assertReport(r, what) {
  const bad = r.cells.filter((c) => !c.ok);
  assert.equal(
    bad.length,
    0,
    `${what}: ${bad.length} of ${r.cells.length} cells wrong:\n${bad
      .slice(0, 20)
      .map((c) => `${c.name} x ${c.path}: ${c.why} (${JSON.stringify(c.answers)})`)
      .join("\n")}`,
  );
  assert.equal(r.ok, true);
}

test("conformance: every obligation kind x every path gets exactly one answer, the expected one", { timeout: 300_000 }, async () => {
  const client = await start();
  const slow = await start({ handlerTimeoutMs: 100 });
  try {
    const { rows, paths } = await client.call("conformance.rows", {});
    assert.ok(rows.length >= 40, `the engine's table has ${rows.length} rows`);
    assert.deepEqual(paths, [
      "handler",
      "noHandler",
      "handlerPanics",
      "deadline",
      "unreadable",
      "drifted",
      "sessionDropped",
      "destroyedMidDecision",
      "parkOverflow",
    ]);
    const kinds = new Set(rows.map((r) => r.handler));
    for (const k of JS_KINDS) assert.ok(kinds.has(k), `the table has ${k} rows`);

    const withHandlers = await client.createSession(answering);
    const without = await client.createSession({});
    const throwingSession = await client.createSession(throwing);
    const dropped = await client.createSession(answering);
    await dropped.destroy();
    let cells = 0;
    const trigger = async (c, sessionId, row, path, extra = {}) => {
      cells++;
      return c.call("conformance.trigger", { sessionId, row: row.row, path, expect: expected(row, path), ...extra });
    };

    for (const row of rows) {
      await trigger(client, withHandlers.id, row, "handler");
      await trigger(client, without.id, row, "noHandler");
      await trigger(client, throwingSession.id, row, "handlerPanics");
      await trigger(client, withHandlers.id, row, "unreadable");
      await trigger(client, withHandlers.id, row, "drifted");
      await trigger(client, dropped.id, row, "sessionDropped");

      // The session is destroyed while its handler decides: the engine
      // refuses at the release; the handler's late answer goes nowhere.
      const mid = gated();
      const s = await client.createSession(mid.config);
      await trigger(client, s.id, row, "destroyedMidDecision");
      if (JS_KINDS.has(row.handler)) await eventually(() => mid.called.length === 1, `${row.name}'s handler called`);
      await s.destroy();
      mid.open();

      // Parking overflows during a server-assigned create: the wait that
      // does not fit is refused, never dropped.
      await trigger(client, null, row, "parkOverflow", { fill: 10_000 });
      const parked = await client.createSession({ ...answering, serverAssignedId: true });
      await parked.destroy();
    }
    // Late answers (after the gates opened) would show up as second answers.
    await new Promise((r) => setImmediate(r));
    await allAnswered(client, cells);
    assertReport(await report(client), "conformance");
    const stats = client.stats();
    assert.equal(stats.openObligations, 0, JSON.stringify(stats));

    // Past the handler's deadline: the engine refuses at the deadline; the
    // handler's answer, once it comes, is stale and not sent.
    const late = gated();
    const s = await slow.createSession(late.config);
    for (const row of rows) {
      await slow.call("conformance.trigger", { sessionId: s.id, row: row.row, path: "deadline", expect: expected(row, "deadline") });
    }
    await allAnswered(slow, rows.length);
    late.open();
    await new Promise((r) => setImmediate(r));
    assert.equal(late.called.length, [...rows].filter((r) => JS_KINDS.has(r.handler)).length, "every handled kind was asked");
    const r = await report(slow);
    assertReport(r, "deadline");
    assert.ok(slow.stats().refused.deadline >= late.called.length, JSON.stringify(slow.stats()));
    console.log(
      `conformance: ${rows.length} rows x ${paths.length} paths = ${cells + rows.length} cells, each answered exactly once as expected`,
    );
  } finally {
    client.forceStop();
    slow.forceStop();
  }
});

test("2,000 permission prompts pending at once, a slow handler, a CLI slow to acknowledge: all 2,000 answered", { timeout: 300_000 }, async () => {
  const N = 2000;
  const client = await CopilotClient.start({ cliPath: conformanceCli(), transport: "stdio", args: ["--ack-delay-ms", "1"] });
  try {
    const { rows } = await client.call("conformance.rows", {});
    const row = rows.find((r) => r.name === "permission.requested");
    let open;
    const gate = new Promise((r) => (open = r));
    let asked = 0;
    const session = await client.createSession({
      onPermission: async () => {
        asked++;
        await gate; // answered only once every prompt is pending
        return "approve-once";
      },
    });
    for (let i = 0; i < N; i++) {
      await client.call("conformance.trigger", { sessionId: session.id, row: row.row, path: "handler", expect: { answer: { kind: "approve-once" } } });
    }
    await eventually(() => asked === N, `${N} prompts asked`, 60_000);
    const pending = client.stats();
    assert.equal(pending.openObligations, N, "all pending at once");
    open();
    await allAnswered(client, N);
    assertReport(await report(client), "2,000 prompts");
    await eventually(() => client.stats().acksAccepted === N, "every answer acknowledged", 120_000);
    const stats = client.stats();
    assert.equal(stats.answered, N, JSON.stringify(stats));
    assert.equal(stats.openObligations, 0);
    console.log(`2,000 prompts: ${stats.answered} answered, ${stats.acksAccepted} acknowledged, ${stats.pendingRequests} requests pending`);
  } finally {
    client.forceStop();
  }
});

test("resuming a session open on this client: the new handle takes it over, the old one's streams end", { timeout: 60_000 }, async () => {
  const client = await start();
  try {
    const first = await client.createSession({});
    const events = first.events();
    const second = await client.resumeSession(first.id, answering);
    assert.equal(second.id, first.id);
    assert.equal(first.active, false, "the old handle is no longer open");
    assert.equal(second.active, true);
    const { done } = await events.next();
    assert.equal(done, true, "the old handle's stream ended");
    await assert.rejects(first.send("hi"), /resumed by another handle on this client/);
    // The new handle answers the session's waits.
    const { rows } = await client.call("conformance.rows", {});
    const row = rows.find((r) => r.name === "permission.requested");
    const seen = collectUntil(second.events(), (e) => e.type === "permission.requested");
    await client.call("conformance.trigger", { sessionId: second.id, row: row.row, path: "handler", expect: { answer: ANSWERS.permission } });
    await seen;
    await allAnswered(client, 1);
    assertReport(await report(client), "resume");
  } finally {
    client.forceStop();
  }
});

test("client-wide requests (naming no session) are answered by the client's requestHandlers", { timeout: 120_000 }, async () => {
  const requestHandlers = Object.fromEntries(
    genericRequestNames().map((name) => [
      name,
      (params, invocation) => {
        if (params?.fail) throw new Error("asked to fail");
        return { answeredBy: invocation.name, session: invocation.sessionId ?? null };
      },
    ]),
  );
  const client = await start({ requestHandlers });
  try {
    const { rows } = await client.call("conformance.rows", {});
    let cells = 0;
    for (const row of rows.filter((r) => r.trigger === "request")) {
      const answer = GENERIC_KINDS.has(row.handler) ? { answer: { answeredBy: row.name, session: null } } : "refusal";
      for (const [path, data, expect] of [
        ["handler", {}, answer],
        ["handlerPanics", { fail: true }, "refusal"],
      ]) {
        await client.call("conformance.trigger", { row: row.row, path, expect, data });
        cells++;
      }
    }
    await allAnswered(client, cells);
    assertReport(await report(client), "client-wide");
  } finally {
    client.forceStop();
  }
  await assert.rejects(start({ requestHandlers: { "hooks.invoke": () => ({}) } }), /hooks\.invoke/);
});
