// The Node half of the flood benchmark (tests/src/bin/flood): one run of
// the npm package's client (from its sources) or of the Node floor, in this
// fresh process, against the flood binary as the fake CLI.
//
//   node flood.mjs RUN TRANSPORT EVENTS FLOOD_BIN PROMPT
//
// RUN is a style of the package's client: `on` (a `session.on` callback),
// `events` (the async iterator), `wait` (`sendAndWait` of the flood turn
// with one `on` subscriber), `mixed` (a callback and an iterator at once);
// or `json`, the Node floor: a plain client that frames the fake's stream
// and calls `JSON.parse` once per body, nothing else. TRANSPORT is stdio
// or tcp. PROMPT makes the fake flood (`flood:N`, deltas, or `flood-mix:N`,
// the realistic mix of tests/src/flood_mix.rs). Every consumer checks that
// event i (id "i") arrives once, in order, intact. Prints one `flood-result {...}` line in the format of
// the Rust runs (see measure.rs): seconds from just before the send to the
// last consumer's `session.idle`, peak RSS (`maxRSS`) before and after.

import { spawn } from "node:child_process";
import { connect } from "node:net";
import { createInterface } from "node:readline";

const [run, transport, count, floodBin, floodPrompt] = process.argv.slice(2);
const N = Number(count);
const SERVE = "serve";

/** The Rust DeliveryCheck, in JS. */
class DeliveryCheck {
  seen = new Uint8Array(N);
  next = 0;
  received = 0;
  outOfOrder = 0;
  duplicates = 0;
  corrupt = 0;
  idle = false;
  /**
   * Records one event; true when it is `session.idle`. A delta's content
   * is its id; a message's content and a tool result's start with it.
   */
  see(e) {
    if (e.type === "session.idle") return (this.idle = true);
    const firstWord = (text) => typeof text === "string" && text.split(" ", 1)[0] === e.id;
    let intact;
    if (e.type === "assistant.message_delta") intact = e.data?.deltaContent === e.id;
    else if (e.type === "assistant.message") intact = firstWord(e.data?.content);
    else if (e.type === "tool.execution_complete") intact = e.data?.toolCallId === e.id && firstWord(e.data?.result?.content);
    else return false;
    this.received++;
    const i = Number(e.id);
    if (!(Number.isInteger(i) && i >= 0 && i < N && intact)) {
      this.corrupt++;
      return false;
    }
    if (this.seen[i]) this.duplicates++;
    else if (i < this.next) this.outOfOrder++;
    this.seen[i] = 1;
    this.next = Math.max(this.next, i + 1);
    return false;
  }
  tally() {
    return {
      lost: this.seen.reduce((lost, s) => lost + (s ? 0 : 1), 0),
      out_of_order: this.outOfOrder,
      duplicates: this.duplicates,
      corrupt: this.corrupt,
      idle: this.idle,
    };
  }
}

/** Sums the faults of several consumers. */
function addTallies(tallies) {
  return tallies.reduce((a, t) => ({
    lost: a.lost + t.lost,
    out_of_order: a.out_of_order + t.out_of_order,
    duplicates: a.duplicates + t.duplicates,
    corrupt: a.corrupt + t.corrupt,
    idle: a.idle && t.idle,
  }));
}

/** Runs `flood` (which resolves when its consumers are done) and measures it. */
async function timed(flood) {
  const rssBefore = process.resourceUsage().maxRSS;
  const cpuBefore = process.cpuUsage();
  const started = performance.now();
  const out = await flood();
  const seconds = (performance.now() - started) / 1000;
  const cpu = process.cpuUsage(cpuBefore);
  return {
    out,
    timing: {
      seconds,
      cpu_seconds: (cpu.user + cpu.system) / 1e6,
      rss_before_kb: rssBefore,
      peak_rss_kb: process.resourceUsage().maxRSS,
      max_backlog: 0,
    },
  };
}

async function clientRun() {
  const { CopilotClient } = await import("../../wasm/npm/src/node.js");
  const client = await CopilotClient.start({ cliPath: floodBin, transport, args: [SERVE] });
  const session = await client.createSession({ model: "fake-model", streaming: true });
  const prompt = floodPrompt;
  /** A checking callback and the promise of its idle. */
  const onCheck = () => {
    const check = new DeliveryCheck();
    let resolveIdle;
    const idle = new Promise((resolve) => (resolveIdle = resolve));
    const unsubscribe = session.on((e) => {
      if (check.see(e)) resolveIdle();
    });
    return { check, idle, unsubscribe };
  };
  const drain = async (iterator, check) => {
    for (;;) {
      const { value, done } = await iterator.next();
      if (done || check.see(value)) return;
    }
  };
  let checks;
  let measured;
  if (run === "on") {
    const on = onCheck();
    checks = [on.check];
    measured = await timed(async () => {
      await session.send(prompt);
      await on.idle;
    });
  } else if (run === "events") {
    const iterator = session.events();
    const check = new DeliveryCheck();
    checks = [check];
    measured = await timed(async () => {
      await session.send(prompt);
      await drain(iterator, check);
    });
  } else if (run === "wait") {
    const on = onCheck();
    checks = [on.check];
    measured = await timed(() => session.sendAndWait(prompt, { timeoutMs: 30_000 + N }));
  } else if (run === "mixed") {
    const on = onCheck();
    const iterator = session.events();
    const check = new DeliveryCheck();
    checks = [on.check, check];
    measured = await timed(async () => {
      await session.send(prompt);
      await Promise.all([on.idle, drain(iterator, check)]);
    });
  } else {
    throw new Error(`unknown run ${run}`);
  }
  const stats = client.stats();
  await client.stop();
  return {
    ...measured.timing,
    ...addTallies(checks.map((c) => c.tally())),
    frames: stats.frames ?? 0,
    bytes: stats.bytes ?? 0,
    malformed: stats.malformed ?? 0,
    unknown_session: stats.unknown_session ?? stats.unknownSession ?? 0,
  };
}

/** Starts the fake CLI and connects to it: [child, readable, writable]. */
async function startFake() {
  if (transport === "stdio") {
    const child = spawn(floodBin, [SERVE, "--stdio"], { stdio: ["pipe", "pipe", "inherit"] });
    return [child, child.stdout, child.stdin];
  }
  const child = spawn(floodBin, [SERVE, "--port", "0"], { stdio: ["ignore", "pipe", "inherit"] });
  const lines = createInterface({ input: child.stdout });
  const [line] = await lines[Symbol.asyncIterator]().next().then((r) => [r.value]);
  const port = Number(line?.split(" ").pop());
  const socket = connect({ port, host: "127.0.0.1", noDelay: true });
  await new Promise((resolve, reject) => socket.once("connect", resolve).once("error", reject));
  return [child, socket, socket];
}

function frame(body) {
  const bytes = Buffer.from(body);
  return Buffer.concat([Buffer.from(`Content-Length: ${bytes.length}\r\n\r\n`), bytes]);
}

async function floorRun() {
  const [child, readable, writable] = await startFake();
  const sid = "flood-floor";
  // Frames wanted next, and what to do with each body (a Buffer slice).
  let want = 0;
  let onBody = () => {};
  let done = () => {};
  let frames = 0;
  let bytes = 0;
  let pending = Buffer.alloc(0);
  let lastBody = "";
  readable.on("data", (chunk) => {
    let buf = pending.length ? Buffer.concat([pending, chunk]) : chunk;
    let at = 0;
    for (;;) {
      const end = buf.indexOf("\r\n\r\n", at, "latin1");
      if (end < 0) break;
      const header = buf.toString("latin1", at, end);
      const len = Number(/Content-Length:\s*(\d+)/i.exec(header)?.[1]);
      const start = end + 4;
      if (buf.length < start + len) break;
      const body = buf.subarray(start, start + len);
      at = start + len;
      frames++;
      bytes += len;
      onBody(body);
      if (frames === want) {
        lastBody = body.toString("utf8");
        done();
      }
    }
    pending = buf.subarray(at);
  });
  const read = (n, each) =>
    new Promise((resolve) => {
      want = frames + n;
      onBody = each;
      done = resolve;
    });
  writable.write(
    frame(JSON.stringify({ jsonrpc: "2.0", id: 1, method: "session.create", params: { sessionId: sid, model: "fake-model", streaming: true } })),
  );
  // The lifecycle notice, the answer and session.start.
  await read(3, () => {});
  const [createFrames, createBytes] = [frames, bytes];
  const measured = await timed(async () => {
    writable.write(frame(JSON.stringify({ jsonrpc: "2.0", id: 2, method: "session.send", params: { sessionId: sid, prompt: floodPrompt } })));
    // The answer to the send, the deltas and the idle.
    await read(N + 2, (body) => JSON.parse(body.toString("utf8")));
  });
  const got = frames - createFrames;
  if (transport === "stdio") writable.end();
  else writable.destroy();
  await new Promise((resolve) => (child.exitCode !== null ? resolve() : child.once("exit", resolve)));
  return {
    ...measured.timing,
    lost: Math.max(0, N + 2 - got),
    out_of_order: 0,
    duplicates: 0,
    corrupt: 0,
    idle: lastBody.includes('"session.idle"'),
    frames: got,
    bytes: bytes - createBytes,
    malformed: 0,
    unknown_session: 0,
  };
}

const result = run === "json" ? await floorRun() : await clientRun();
console.log(`flood-result ${JSON.stringify({ run: `node-${run}`, transport, events: N, ...result })}`);
process.exit(0);
