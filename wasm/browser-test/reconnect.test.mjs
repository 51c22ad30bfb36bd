// A dropped WebSocket in the browser: headless Chromium (Debian's, driven by
// playwright-core) runs a client on `connectWebSocket` against the offline
// bridge (the REAL Copilot CLI 1.0.102 on the scripted model), through a TCP
// proxy of this test's that it cuts mid-turn, with a tool call of the page
// pending. The page opens the socket again with the same token, the bridge
// gives it a new CLI on the same state folder, the session is resumed, the
// call answered once, and the `sendAndWait` in flight returns the turn's
// message. With the bridge gone, the reconnection gives up after the core's
// attempts and the turn ends with the cause. Through `--cli`, the new socket
// reaches the same CLI server, whose session waited meanwhile.
//
// Needs what bridge.test.mjs needs: cargo build -p copilot-bridge --bin
// copilot-bridge && cargo build -p copilot-tests --bin copilot-bridge-offline --bin scripted_model

import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync } from "node:fs";
import { once } from "node:events";
import { createServer, connect } from "node:net";
import { tmpdir } from "node:os";
import { createInterface } from "node:readline";
import { join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

import { chromium } from "playwright-core";

const here = fileURLToPath(new URL(".", import.meta.url));
const root = join(here, "..", "..");
const chromiumPath = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium";
const bridgeBin = process.env.COPILOT_BRIDGE ?? join(root, "target", "debug", "copilot-bridge");
const scriptedBin = join(root, "target", "debug", "scripted_model");
const offlineBin = process.env.COPILOT_BRIDGE_OFFLINE ?? join(root, "target", "debug", "copilot-bridge-offline");
const cliPath = process.env.COPILOT_CLI_PATH ?? join(root, "node_modules", "@github", "copilot-linux-x64", "copilot");
const policy = (await import(pathToFileURL(join(root, "wasm", "npm", "dist", "policy.js")).href)).default;

/** How long a step may take before the test fails (a failure bound only). */
const WAIT = 120_000;

const spawned = new Set();
let browser;
const figures = {};

before(async () => {
  assert.ok(existsSync(chromiumPath), `Chromium is missing at ${chromiumPath}: apt-get install chromium`);
  assert.ok(existsSync(offlineBin), "build the offline bridge: cargo build -p copilot-tests --bin copilot-bridge-offline");
  assert.ok(existsSync(cliPath), `the Copilot CLI is missing at ${cliPath}: npm ci at the repository root`);
  browser = await chromium.launch({
    executablePath: chromiumPath,
    headless: true,
    args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync"],
  });
});

after(async () => {
  await browser?.close();
  for (const child of spawned) child.kill("SIGTERM");
  if (Object.keys(figures).length) console.log(`reconnect figures: ${JSON.stringify(figures)}`);
});

/**
 * The offline bridge serving the npm package (or, with `cli`, the published
 * one piping to the CLI server at `cli`); resolves with `{ child, url,
 * token, stderr, exited }`.
 */
async function startBridge(cli) {
  const args = ["--listen", "127.0.0.1:0", "--serve", ...(cli ? ["--cli", cli] : ["--offline"])];
  const child = spawn(cli ? bridgeBin : offlineBin, args, {
    cwd: root,
    env: { ...process.env, COPILOT_CLI_PATH: cliPath },
    stdio: ["ignore", "pipe", "pipe"],
  });
  spawned.add(child);
  child.once("exit", () => spawned.delete(child));
  const stderr = [];
  createInterface({ input: child.stderr }).on("line", (l) => stderr.push(l));
  // A bridge that is killed leaves its state folder: it goes once the bridge has.
  const exited = new Promise((resolve) => child.once("close", resolve)).then((code) => {
    for (const d of readdirSync(tmpdir())) {
      if (d.startsWith(`copilot-bridge-${child.pid}-`)) rmSync(join(tmpdir(), d), { recursive: true, force: true });
    }
    return code;
  });
  const seen = await new Promise((resolve, reject) => {
    const seen = {};
    createInterface({ input: child.stdout }).on("line", (line) => {
      seen.url ??= /^listening on (http:\/\/[^ ]+)$/.exec(line)?.[1];
      seen.token ??= /^open http:\/\/\S+#token=(\S+)$/.exec(line)?.[1];
      if (seen.url && seen.token) resolve(seen);
    });
    exited.then((code) => reject(new Error(`the bridge exited (${code}): ${stderr.join("\n")}`)));
  });
  return { child, exited, stderr, ...seen };
}

/**
 * A TCP proxy to the bridge at `target` (`host:port`): it rewrites the
 * `Host` of each upgrade request to the bridge's (which checks it) and pipes
 * the rest. `cut()` resets every connection: the page sees an abnormal
 * closure (1006), the bridge a socket that ends without a close frame.
 */
async function startProxy(target) {
  const [host, port] = target.split(":");
  const pairs = new Set();
  const server = createServer((down) => {
    const up = connect(Number(port), host);
    const pair = { down, up };
    pairs.add(pair);
    const end = () => {
      pairs.delete(pair);
      down.destroy();
      up.destroy();
    };
    up.on("error", end).on("close", end);
    down.on("error", end).on("close", end);
    let head = Buffer.alloc(0);
    let piped = false;
    down.on("data", (chunk) => {
      if (piped) return up.write(chunk);
      head = Buffer.concat([head, chunk]);
      const at = head.indexOf("\r\n\r\n");
      if (at < 0) return;
      piped = true;
      const text = head.subarray(0, at).toString("latin1").replace(/^host:.*$/im, `Host: ${target}`);
      up.write(Buffer.concat([Buffer.from(text, "latin1"), head.subarray(at)]));
    });
    up.on("data", (chunk) => down.write(chunk));
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  const cut = () => {
    for (const { down, up } of pairs) {
      down.resetAndDestroy();
      up.resetAndDestroy();
    }
    pairs.clear();
  };
  return {
    url: `ws://127.0.0.1:${server.address().port}/ws`,
    connections: () => pairs.size,
    cut,
    close: () => (cut(), new Promise((resolve) => server.close(resolve))),
  };
}

/** Resolves when the process `pid` no longer exists (reaped by the bridge). */
async function gone(pid) {
  while (existsSync(`/proc/${pid}`)) await new Promise((r) => setTimeout(r, 5));
}

/**
 * Opens a page of the bridge's origin and, in it, a client on the proxy's
 * socket with one session whose tool `get_weather` holds its answer until
 * `window.__release()`. Every recovery step is kept in `window.__steps`
 * with the page's time.
 */
async function openClient(bridge, proxyUrl) {
  const page = await browser.newPage();
  const errors = [];
  page.on("pageerror", (e) => errors.push(String(e)));
  await page.goto(`${bridge.url}bridge.json`);
  const sessionId = await page.evaluate(
    async ([url, token]) => {
      const { CopilotClient } = await import("/src/index.js");
      const client = await CopilotClient.connectWebSocket(url, { token });
      window.__steps = [];
      client.onRecovery((step) => window.__steps.push({ ...step, at: performance.now() }));
      window.__calls = [];
      const released = new Promise((resolve) => (window.__release = resolve));
      const session = await client.createSession({
        model: "claude-sonnet-4.5",
        onPermission: () => "approve-once",
        tools: [
          {
            name: "get_weather",
            description: "Get the current weather for a city.",
            parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
            skipPermission: true,
            handler: async (args, call) => {
              window.__calls.push(call.toolCallId);
              await released;
              return `Sunny, 22 C in ${args.city}`;
            },
          },
        ],
      });
      window.__client = client;
      window.__session = session;
      window.__durable = [];
      session.on((e) => e.ephemeral || window.__durable.push(e.id));
      return session.id;
    },
    [proxyUrl, bridge.token],
  );
  return { page, errors, sessionId };
}

/**
 * Scripts the session's replies (through the bridge, or at the scripted
 * model's `modelUrl`), then starts the turn in the page.
 */
async function startTurn(page, token, replies, modelUrl) {
  if (modelUrl) {
    const sessionId = await page.evaluate(() => window.__session.id);
    const r = await fetch(`${modelUrl}/_scripted/script`, { method: "POST", body: JSON.stringify({ sessionId, replies }) });
    assert.ok(r.ok, `the model refused the script: ${r.status}`);
  }
  await page.evaluate(
    async ([token, replies, scripted]) => {
      const r = scripted
        ? { ok: true }
        : await fetch("/offline/script", {
            method: "POST",
            headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
            body: JSON.stringify({ sessionId: window.__session.id, replies }),
          });
      if (!r.ok) throw new Error(`the bridge refused the script: ${r.status}`);
      window.__turn = window.__session.sendAndWait("Weather in Paris?", { timeoutMs: 300_000 }).then(
        (m) => (window.__turnEnd = { content: m?.content, at: performance.now() }),
        (e) => (window.__turnEnd = { error: String(e?.message ?? e), name: e?.name, at: performance.now() }),
      );
    },
    [token, replies, Boolean(modelUrl)],
  );
}

/**
 * Resolves when the session's journal holds the call (the next CLI will
 * know it): in whichever state folder of the bridge's (`copilot-bridge-PID-*`
 * in the temporary folder) the CLI keeps it.
 */
async function callInJournal(bridge, sessionId, toolCallId) {
  const prefix = `copilot-bridge-${bridge.child.pid}-`;
  const has = () =>
    readdirSync(tmpdir())
      .filter((d) => d.startsWith(prefix))
      .map((d) => join(tmpdir(), d, "home", "session-state", sessionId, "events.jsonl"))
      .some(
        (journal) =>
          existsSync(journal) &&
          readFileSync(journal, "utf8")
            .split("\n")
            .some((l) => l.includes('"external_tool.requested"') && l.includes(toolCallId)),
      );
  const deadline = performance.now() + WAIT;
  while (!has()) {
    assert.ok(performance.now() < deadline, `the call never reached the session's journal in ${tmpdir()}/${prefix}*`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

/** Resolves when the page has told the loss (or, failing, ended the turn). */
async function lossSeen(page) {
  await page.waitForFunction(() => window.__steps.some((s) => s.type === "connectionLost") || window.__turnEnd, null, { timeout: WAIT });
  const { steps, turnEnd } = await page.evaluate(() => ({ steps: window.__steps, turnEnd: window.__turnEnd }));
  assert.equal(steps[0]?.type, "connectionLost", JSON.stringify({ steps, turnEnd }));
  assert.equal(steps[0].kind, "websocket", "the socket is opened again");
}

/** Each CLI the bridge started, in order, by pid (logged before its socket sees an answer). */
function started(bridge) {
  return bridge.stderr.flatMap((l) => {
    const m = /: started .* \(pid (\d+)\)$/.exec(l);
    return m ? [Number(m[1])] : [];
  });
}

test("a WebSocket cut mid-turn is reopened with the same token, the session resumed, the call answered once", { timeout: 300_000 }, async () => {
  const bridge = await startBridge();
  const proxy = await startProxy(new URL(bridge.url).host);
  const { page, errors, sessionId } = await openClient(bridge, proxy.url);
  try {
    await startTurn(page, bridge.token, [
      { toolCalls: [{ name: "get_weather", arguments: { city: "Paris" } }] },
      { text: "It is sunny in Paris." },
    ]);
    await page.waitForFunction(() => window.__calls.length === 1, null, { timeout: WAIT });
    const [callId] = await page.evaluate(() => window.__calls);
    await callInJournal(bridge, sessionId, callId);
    const firstCli = started(bridge);
    assert.equal(firstCli.length, 1, "one CLI before the cut");
    assert.equal(proxy.connections(), 1);

    proxy.cut();
    await lossSeen(page);
    // The handler answers while the socket is down: the answer waits for
    // the resumed session.
    await page.evaluate(() => window.__release());
    await page.waitForFunction(() => window.__turnEnd, null, { timeout: WAIT });
    const { steps, turnEnd, calls } = await page.evaluate(() => ({ steps: window.__steps, turnEnd: window.__turnEnd, calls: window.__calls }));
    assert.equal(turnEnd.content, "It is sunny in Paris.", JSON.stringify(turnEnd));
    assert.deepEqual(calls, [callId], "the handler ran once");

    const types = steps.map((s) => s.type);
    assert.deepEqual(types, ["connectionLost", "restarting", "sessionResumed", "recovered"], JSON.stringify(steps));
    assert.match(steps[0].cause, /WebSocket closed \(code 1006/);
    assert.equal(steps[1].attempt, 1, "the first attempt succeeds");
    assert.equal(steps[1].afterMs, policy.recovery.backoffMs[0]);
    assert.equal(steps[2].sessionId, sessionId);
    assert.equal(steps[3].sessions, 1);
    // The reconnection went through the proxy again, with the same token,
    // and the bridge gave it a new CLI (the first was killed with its socket).
    assert.equal(proxy.connections(), 1);
    // (Its log line is read from another pipe than the page's answers.)
    while (started(bridge).length < 2) await new Promise((r) => setTimeout(r, 5));
    const clis = started(bridge);
    assert.equal(clis.length, 2, `a second CLI: ${clis}`);
    await gone(clis[0]);

    // Answered once, on the CLI's side too: nothing pending, no answer
    // refused as a second one, one completion of the call in the log.
    const check = await page.evaluate(async (sessionId) => {
      const client = window.__client;
      const pending = await client.call("session.tools.listPendingRequests", { sessionId });
      const log = await client.call("session.eventLog.read", { sessionId, includeEphemeral: false });
      return { pending, stats: client.stats(), events: log.events.map((e) => ({ id: e.id, type: e.type })), more: log.hasMore, durable: window.__durable };
    }, sessionId);
    // Every durable event of the session, from before the cut and after the
    // resume, reached the page once, in order (nothing was in flight at the
    // cut: the CLI was waiting for the call's answer).
    assert.equal(check.more, false);
    assert.deepEqual(check.durable, check.events.map((e) => e.id), JSON.stringify(check.events.map((e) => e.type)));
    assert.deepEqual(check.pending, { items: [] });
    assert.equal(check.stats.acksRefused, 0, JSON.stringify(check.stats));
    const completed = check.events.filter((e) => e.type === "external_tool.completed");
    assert.equal(completed.length, 1, JSON.stringify(check.events.map((e) => e.type)));
    assert.deepEqual(errors, []);

    // The session goes on over the new socket.
    await startTurn(page, bridge.token, [{ text: "Still here." }]);
    await page.evaluate(() => window.__release());
    await page.waitForFunction(() => window.__turnEnd?.content === "Still here.", null, { timeout: WAIT });

    const lostAt = steps[0].at;
    figures.dropToResumedMs = Math.round(steps[2].at - lostAt);
    figures.dropToRecoveredMs = Math.round(steps[3].tookMs);
    figures.dropToTurnCompletedMs = Math.round(turnEnd.at - lostAt);
    await page.evaluate(() => window.__client.stop());
  } finally {
    await page.close();
    await proxy.close();
    bridge.child.kill("SIGTERM");
    await bridge.exited;
  }
});

test("with the bridge gone, the reconnection gives up after the core's attempts and the turn ends with the cause", { timeout: 300_000 }, async () => {
  const bridge = await startBridge();
  const proxy = await startProxy(new URL(bridge.url).host);
  const { page, errors } = await openClient(bridge, proxy.url);
  try {
    await startTurn(page, bridge.token, [
      { toolCalls: [{ name: "get_weather", arguments: { city: "Paris" } }] },
      { text: "never" },
    ]);
    await page.waitForFunction(() => window.__calls.length === 1, null, { timeout: WAIT });
    // The bridge goes, and its sockets with it (the proxy passes the end
    // on); every reconnection then finds nothing to reach.
    bridge.child.kill("SIGKILL");
    await bridge.exited;
    await page.waitForFunction(() => window.__turnEnd, null, { timeout: WAIT });
    const { steps, turnEnd, closed } = await page.evaluate(() => ({ steps: window.__steps, turnEnd: window.__turnEnd, closed: window.__client.closed }));
    const attempts = policy.recovery.backoffMs.length;
    const types = steps.map((s) => s.type);
    assert.deepEqual(
      types,
      ["connectionLost", ...Array.from({ length: attempts }, () => ["restarting", "attemptFailed"]).flat(), "gaveUp"],
      JSON.stringify(steps),
    );
    assert.deepEqual(steps.filter((s) => s.type === "restarting").map((s) => s.afterMs), policy.recovery.backoffMs);
    const gaveUp = steps.at(-1);
    assert.match(gaveUp.cause, new RegExp(`${attempts} attempts to recover it failed`));
    assert.match(gaveUp.cause, /refused the WebSocket/);
    assert.equal(turnEnd.name, "DisconnectedError", JSON.stringify(turnEnd));
    assert.ok(turnEnd.error.includes(gaveUp.cause), `the turn ends with the cause: ${turnEnd.error}`);
    assert.equal(closed, true);
    assert.deepEqual(errors, []);
    figures.dropToGaveUpMs = Math.round(gaveUp.at - steps[0].at);
  } finally {
    await page.close();
    await proxy.close();
  }
});

test("with autoReconnect: false, a cut socket ends the client with the cause", { timeout: 300_000 }, async () => {
  const bridge = await startBridge();
  const proxy = await startProxy(new URL(bridge.url).host);
  const page = await browser.newPage();
  try {
    await page.goto(`${bridge.url}bridge.json`);
    await page.evaluate(
      async ([url, token]) => {
        const { CopilotClient } = await import("/src/index.js");
        const client = await CopilotClient.connectWebSocket(url, { token, autoReconnect: false });
        // The end, or a first step of a recovery (which must not come).
        window.__outcome = new Promise((resolve) => {
          client.closedPromise().then((reason) => resolve({ reason }));
          client.onRecovery((step) => resolve({ step }));
        });
      },
      [proxy.url, bridge.token],
    );
    proxy.cut();
    const outcome = await page.evaluate(() => window.__outcome);
    assert.match(outcome.reason ?? "", /the WebSocket closed \(code 1006/, JSON.stringify(outcome));
  } finally {
    await page.close();
    await proxy.close();
    bridge.child.kill("SIGTERM");
    await bridge.exited;
  }
});

test("through --cli, a cut socket reconnects to the same CLI server, and the session resumes there", { timeout: 300_000 }, async () => {
  assert.ok(existsSync(bridgeBin) && existsSync(scriptedBin), "cargo build -p copilot-bridge --bin copilot-bridge && cargo build -p copilot-tests --bin scripted_model");
  const model = spawn(scriptedBin, [], { stdio: ["pipe", "pipe", "inherit"] });
  const [line] = await once(createInterface({ input: model.stdout }), "line");
  const scripted = JSON.parse(line);
  const dir = mkdtempSync(join(tmpdir(), "copilot-reconnect-cli-"));
  const folders = Object.fromEntries(
    ["COPILOT_HOME", "XDG_CONFIG_HOME", "XDG_STATE_HOME", "XDG_CACHE_HOME", "COPILOT_CACHE_HOME", "GH_CONFIG_DIR"].map((k) => {
      mkdirSync(join(dir, k));
      return [k, join(dir, k)];
    }),
  );
  const cli = spawn(cliPath, ["--headless", "--no-auto-update", "--no-auto-login", "--log-level", "error", "--auth-token-env", "COPILOT_SDK_AUTH_TOKEN", "--port", "0"], {
    cwd: dir,
    env: { ...process.env, ...folders, ...scripted.env, COPILOT_SDK_AUTH_TOKEN: "offline" },
    stdio: ["pipe", "pipe", "inherit"],
    detached: true,
  });
  let bridge, proxy, page;
  try {
    const port = await new Promise((resolve) => {
      createInterface({ input: cli.stdout }).on("line", (l) => {
        const m = /listening on port (\d+)/.exec(l);
        if (m) resolve(Number(m[1]));
      });
    });
    bridge = await startBridge(`127.0.0.1:${port}`);
    proxy = await startProxy(new URL(bridge.url).host);
    let sessionId;
    ({ page, sessionId } = await openClient(bridge, proxy.url));
    await startTurn(page, bridge.token, [
      { toolCalls: [{ name: "get_weather", arguments: { city: "Paris" } }] },
      { text: "It is sunny in Paris." },
    ], scripted.url);
    await page.waitForFunction(() => window.__calls.length === 1, null, { timeout: WAIT });
    proxy.cut();
    await lossSeen(page);
    await page.evaluate(() => window.__release());
    await page.waitForFunction(() => window.__turnEnd, null, { timeout: WAIT });
    const { steps, turnEnd, calls } = await page.evaluate(() => ({ steps: window.__steps, turnEnd: window.__turnEnd, calls: window.__calls }));
    assert.equal(turnEnd.content, "It is sunny in Paris.", JSON.stringify({ turnEnd, steps }));
    assert.equal(calls.length, 1, "the handler ran once");
    assert.deepEqual(steps.map((s) => s.type), ["connectionLost", "restarting", "sessionResumed", "recovered"], JSON.stringify(steps));
    const check = await page.evaluate(async (sessionId) => {
      const client = window.__client;
      const pending = await client.call("session.tools.listPendingRequests", { sessionId });
      return { pending, stats: client.stats() };
    }, sessionId);
    assert.deepEqual(check.pending, { items: [] });
    assert.equal(check.stats.acksRefused, 0, JSON.stringify(check.stats));
    figures.cliServerDropToResumedMs = Math.round(steps[2].at - steps[0].at);
    figures.cliServerDropToTurnCompletedMs = Math.round(turnEnd.at - steps[0].at);
    await page.evaluate(() => window.__client.stop());
  } finally {
    await page?.close();
    await proxy?.close();
    bridge?.child.kill("SIGTERM");
    process.kill(-cli.pid, "SIGKILL");
    model.stdin.end();
    rmSync(dir, { recursive: true, force: true });
  }
});
