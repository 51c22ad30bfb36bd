// copilot-bridge end to end: headless Chromium (Debian's, driven by
// playwright-core) opens the chat page the bridge serves, and the page runs
// full turns against the REAL Copilot CLI 1.0.102, spawned by the bridge
// with --offline (the scripted model on 127.0.0.1, isolated state folders).
// The checks read the page's DOM. Then the bridge's guards: requests
// without the token, with a wrong one, from a foreign origin, an oversize
// message and a non-loopback bind are refused, and no CLI is started for
// them (the bridge's children are counted in /proc). Closing a tab ends its
// CLI; two pages at once get CLIs of their own; a Node program connects
// with connectWebSocket.
//
// Needs the bridge's binaries: the published one, which runs the bridges
// started without --offline, and the tests crate's, the same command with
// the scripted model for --offline:
// cargo build -p copilot-bridge --bin copilot-bridge && cargo build -p copilot-tests --bin copilot-bridge-offline

import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync } from "node:fs";
import { once } from "node:events";
import { tmpdir } from "node:os";
import { request } from "node:http";
import { createInterface } from "node:readline";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

import { chromium } from "playwright-core";

const here = fileURLToPath(new URL(".", import.meta.url));
const root = join(here, "..", "..");
const chromiumPath = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium";
const bridgeBin = process.env.COPILOT_BRIDGE ?? join(root, "target", "debug", "copilot-bridge");
const offlineBin = process.env.COPILOT_BRIDGE_OFFLINE ?? join(root, "target", "debug", "copilot-bridge-offline");
const cliPath = process.env.COPILOT_CLI_PATH ?? join(root, "node_modules", "@github", "copilot-linux-x64", "copilot");

/** Bridges started and still running: stopped at the end, whatever failed. */
const spawned = new Set();

/** Starts the bridge (with --offline, the offline launcher); resolves with its process, address and page address. */
function startBridge(args) {
  const child = spawn(args.includes("--offline") ? offlineBin : bridgeBin, args, {
    cwd: root,
    env: { ...process.env, COPILOT_CLI_PATH: cliPath },
    stdio: ["ignore", "pipe", "pipe"],
  });
  spawned.add(child);
  child.once("exit", () => spawned.delete(child));
  const stderr = [];
  createInterface({ input: child.stderr }).on("line", (l) => stderr.push(l));
  // "close": after the process exited AND its stdout and stderr were read;
  // then the offline state folder it leaves, killed, goes.
  const exited = new Promise((resolve) => child.once("close", (code) => resolve(code))).then((code) => {
    for (const d of readdirSync(tmpdir())) {
      if (d.startsWith(`copilot-bridge-${child.pid}-`)) rmSync(join(tmpdir(), d), { recursive: true, force: true });
    }
    return code;
  });
  const lines = createInterface({ input: child.stdout });
  const ready = new Promise((resolve, reject) => {
    const seen = {};
    lines.on("line", (line) => {
      const m = /^listening on (http:\/\/[^ ]+)$/.exec(line);
      if (m) seen.url = m[1];
      const o = /^open (http:\/\/\S+)$/.exec(line);
      if (o) seen.page = o[1];
      const t = /^token (\S+)$/.exec(line);
      if (t) seen.token = t[1];
      if (seen.url && (seen.page || seen.token)) resolve(seen);
    });
    exited.then((code) => reject(new Error(`the bridge exited (${code}): ${stderr.join("\n")}`)));
  });
  return { child, stderr, exited, ready };
}

/** The bridge's child processes (the CLIs it spawned), from /proc. */
function children(pid) {
  const out = [];
  for (const task of readdirSync(`/proc/${pid}/task`)) {
    let text;
    try {
      text = readFileSync(`/proc/${pid}/task/${task}/children`, "utf8").trim();
    } catch (e) {
      // A thread that ended since the listing: its children, if any, went
      // to another thread of the process, which is read too.
      if (e.code === "ENOENT" || e.code === "ESRCH") continue;
      throw e;
    }
    if (text) out.push(...text.split(/\s+/).map(Number));
  }
  return [...new Set(out)];
}

/** Resolves when the process `pid` no longer exists (reaped by the bridge). */
async function gone(pid) {
  while (existsSync(`/proc/${pid}`)) await new Promise((r) => setTimeout(r, 5));
}

/** Resolves when the bridge has `n` children. */
async function childCount(pid, n) {
  while (children(pid).length !== n) await new Promise((r) => setTimeout(r, 5));
}

/** A raw HTTP request; resolves with { status, body }. */
function http(url, { method = "GET", path = "/ws", headers = {}, keep = false } = {}) {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const req = request({ host: hostname, port, method, path, headers }, (res) => {
      let body = "";
      res.setEncoding("utf8");
      res.on("data", (c) => (body += c));
      res.on("end", () => resolve({ status: res.statusCode, body }));
    });
    req.on("upgrade", (res, socket) => {
      if (keep) resolve({ status: res.statusCode, body: "", socket });
      else {
        socket.destroy();
        resolve({ status: res.statusCode, body: "" });
      }
    });
    req.on("error", reject);
    req.end();
  });
}

const upgrade = (extra) => ({
  connection: "Upgrade",
  upgrade: "websocket",
  "sec-websocket-version": "13",
  "sec-websocket-key": "dGhlIHNhbXBsZSBub25jZQ==",
  ...extra,
});

let bridge, info, browser, token;
const figures = {};

before(async () => {
  assert.ok(existsSync(chromiumPath), `Chromium is missing at ${chromiumPath}: apt-get install chromium`);
  assert.ok(existsSync(bridgeBin), "build the bridge: cargo build -p copilot-bridge --bin copilot-bridge");
  assert.ok(existsSync(offlineBin), "build the offline bridge: cargo build -p copilot-tests --bin copilot-bridge-offline");
  assert.ok(existsSync(cliPath), `the Copilot CLI is missing at ${cliPath}: npm ci at the repository root`);
  assert.ok(existsSync(join(root, "wasm", "npm", "dist", "copilot_wasm_bg.wasm")), "run scripts/build-wasm first");
  bridge = startBridge(["--listen", "127.0.0.1:0", "--serve", "--offline"]);
  info = await bridge.ready;
  token = new URL(info.page).hash.replace("#token=", "");
  browser = await chromium.launch({
    executablePath: chromiumPath,
    headless: true,
    args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync"],
  });
});

after(async () => {
  await browser?.close();
  const exits = [...spawned].map((child) => (child.kill("SIGTERM"), once(child, "close")));
  await Promise.all(exits);
  if (Object.keys(figures).length) console.log(`bridge figures: ${JSON.stringify(figures)}`);
});

async function openChat(query = "") {
  const page = await browser.newPage();
  const errors = [];
  page.on("pageerror", (e) => errors.push(String(e)));
  const url = new URL(info.page);
  url.search = query;
  await page.goto(url.href);
  await page.waitForSelector('body[data-state="ready"]', { timeout: 60_000 });
  return { page, errors };
}

async function texts(page, selector) {
  return page.$$eval(selector, (els) => els.map((e) => e.textContent));
}

test("the chat page runs a full turn against the real CLI through the bridge", async () => {
  const { page, errors } = await openChat();
  assert.equal(await page.evaluate(() => location.hash), "", "the token left the address bar");
  assert.match(await page.textContent("#status"), /connected to Copilot CLI 1\.0\.102 .*offline/);
  const [cli] = children(bridge.child.pid);
  assert.ok(cli, "the page's CLI runs as the bridge's child");

  await page.fill("#prompt", "Roll a die, then greet me from the shell.");
  await page.click("#send");
  // The first shell command: allowed in the dialog.
  await page.waitForSelector("dialog#permission[open]");
  assert.match(await page.textContent("#permission-detail"), /echo Hello from the shell/);
  assert.match(await page.textContent("#permission-kind"), /shell/);
  await page.click("#allow");
  // The second: denied.
  await page.waitForFunction(() => document.querySelector("#permission-detail").textContent.includes("A second command") && document.querySelector("dialog#permission").open);
  await page.click("#deny");
  await page.waitForSelector(".turn-time", { timeout: 120_000 });

  assert.deepEqual(await texts(page, ".user"), ["Roll a die, then greet me from the shell."]);
  const replies = await texts(page, ".assistant");
  assert.equal(replies[0], "Let me roll the die first. ");
  assert.match(replies.at(-1), /^You said: “Roll a die, then greet me from the shell\.”/);
  const toolRows = await page.$$eval(".tool", (els) => els.map((e) => ({ tool: e.dataset.tool, state: e.dataset.state, text: e.textContent })));
  const die = toolRows.find((t) => t.tool === "roll_die");
  assert.equal(die?.state, "done", JSON.stringify(toolRows));
  assert.match(die.text, /✓ The die shows [1-6]\./, "the page's own tool ran in the page");
  const shells = toolRows.filter((t) => t.tool === "bash");
  assert.equal(shells[0]?.state, "done", JSON.stringify(toolRows));
  assert.match(shells[0].text, /Hello from the shell/, "the allowed command ran and its output came back");
  assert.ok(!shells.some((t) => /✓ A second command/.test(t.text)), `the denied command did not run: ${JSON.stringify(shells)}`);
  assert.equal(shells[1]?.state, "failed", JSON.stringify(shells));
  assert.match(shells[1].text, /✗ The user rejected this tool call\. User feedback: The user denied it in the page\./);
  assert.deepEqual(await texts(page, ".decision"), ["Allowed: echo Hello from the shell", "Denied: echo A second command"]);
  assert.deepEqual(await texts(page, ".error"), []);
  assert.deepEqual(errors, []);
  figures.fullTurnMs = Math.round(Number(await page.getAttribute(".turn-time", "data-ms")));
  // COPILOT_BRIDGE_SCREENSHOT=file.png keeps a picture of the page (README).
  if (process.env.COPILOT_BRIDGE_SCREENSHOT) {
    await page.setViewportSize({ width: 760, height: 640 });
    await page.screenshot({ path: process.env.COPILOT_BRIDGE_SCREENSHOT, fullPage: true });
  }

  // Closing the tab ends its CLI: the socket closes, the bridge kills the group.
  const closed = performance.now();
  await page.close();
  await gone(cli);
  figures.cliGoneAfterTabCloseMs = Math.round(performance.now() - closed);
  assert.deepEqual(children(bridge.child.pid), []);
});

test("the bridge refuses what it was not started for, and starts no CLI for it", async () => {
  const own = new URL(info.url).origin;
  const pid = bridge.child.pid;
  assert.deepEqual(children(pid), []);
  // Every CLI the bridge starts is logged ("started ... (pid N)") before its
  // socket sees any answer: a count that a CLI killed quickly cannot hide.
  const started = () => bridge.stderr.filter((l) => /: started .* \(pid \d+\)$/.test(l));
  const startedBefore = started().length;
  const refused = [
    ["plain HTTP to the socket", { headers: {} }, 426],
    ["no token", { headers: upgrade({ origin: own }) }, 401],
    ["a wrong token", { headers: upgrade({ origin: own, "sec-websocket-protocol": `copilot.token.${"0".repeat(64)}` }) }, 401],
    ["a foreign origin", { headers: upgrade({ origin: "http://example.com", "sec-websocket-protocol": `copilot.token.${token}` }) }, 403],
    ["a wrong token and no origin (a program)", { headers: upgrade({ "sec-websocket-protocol": `copilot.token.x${token}` }) }, 401],
    ["a foreign Host (DNS rebinding)", { headers: upgrade({ host: `example.com:${new URL(own).port}`, origin: "http://example.com", "sec-websocket-protocol": `copilot.token.${token}` }) }, 403],
    ["a script without the token", { method: "POST", path: "/offline/script", headers: { origin: own, "content-length": "2" } }, 401],
  ];
  for (const [what, options, status] of refused) {
    const r = await http(info.url, options);
    assert.equal(r.status, status, `${what}: ${r.status} ${r.body}`);
    assert.deepEqual(children(pid), [], `${what}: no CLI started`);
  }
  // The token itself is never logged.
  // (Logged before the answer is written, but read from another pipe.)
  while (!bridge.stderr.some((l) => /refused .*wrong token/.test(l))) await new Promise((r) => setTimeout(r, 5));
  assert.ok(!bridge.stderr.some((l) => l.includes(token)), "the token is not in the log");

  // From a page of the bridge's own origin: an oversize first message is
  // refused with 1009 and no CLI; a small one starts a CLI, closing ends it.
  const page = await browser.newPage();
  await page.goto(`${info.url}bridge.json`);
  const open = (payload) =>
    page.evaluate(
      ([url, token, size, text]) =>
        new Promise((resolve) => {
          const ws = new WebSocket(url, [`copilot.token.${token}`]);
          ws.binaryType = "arraybuffer";
          ws.onopen = () => ws.send(size ? new Uint8Array(size) : text);
          ws.onmessage = () => {
            ws.onclose = null;
            window.__ws = ws;
            resolve({ message: true, protocol: ws.protocol });
          };
          ws.onclose = (e) => resolve({ code: e.code, reason: e.reason });
        }),
      [info.url.replace("http:", "ws:") + "ws", token, payload.size ?? 0, payload.text ?? ""],
    );
  const big = await open({ size: 5 << 20 });
  assert.equal(big.code, 1009, JSON.stringify(big));
  assert.deepEqual(children(pid), [], "no CLI for an oversize message");
  const ping = '{"jsonrpc":"2.0","id":1,"method":"ping","params":{}}';
  const small = await open({ text: `Content-Length: ${ping.length}\r\n\r\n${ping}` });
  assert.deepEqual(small, { message: true, protocol: `copilot.token.${token}` }, "the accepted subprotocol is echoed");
  const [cli] = children(pid);
  assert.ok(cli, "a message that fits starts a CLI");
  while (!started().some((l) => l.endsWith(`(pid ${cli})`))) await new Promise((r) => setTimeout(r, 5));
  assert.equal(started().length, startedBefore + 1, `one CLI started, for the message that fits: ${started().join("\n")}`);
  await page.evaluate(() => window.__ws.close());
  await gone(cli);
  await page.close();

  // Connections are bounded: with --max-connections 1, a second socket
  // while the first is open is refused (and the first costs no CLI until
  // it sends a message).
  const limited = startBridge(["--listen", "127.0.0.1:0", "--max-connections", "1"]);
  const l = await limited.ready;
  const headers = upgrade({ "sec-websocket-protocol": `copilot.token.${l.token}` });
  const first = await http(l.url, { headers, keep: true });
  assert.equal(first.status, 101);
  assert.equal((await http(l.url, { headers })).status, 503, "a second connection is refused");
  first.socket.destroy();
  assert.deepEqual(children(limited.child.pid), []);
  limited.child.kill("SIGTERM");

  // A non-loopback bind without --allow-remote: refused at start.
  const remote = startBridge(["--listen", "0.0.0.0:0", "--offline"]);
  remote.ready.catch(() => {});
  assert.equal(await remote.exited, 2);
  assert.match(remote.stderr.join("\n"), /not a loopback address.*--allow-remote/);
});

/** Runs node-websocket-child.mjs (a Node client); resolves with its summary. */
async function nodeClient(...args) {
  const child = spawn(process.execPath, ["--experimental-websocket", "--no-warnings", join(here, "node-websocket-child.mjs"), ...args], {
    stdio: ["ignore", "pipe", "inherit"],
  });
  let out = "";
  child.stdout.setEncoding("utf8").on("data", (t) => (out += t));
  const code = await new Promise((resolve) => child.once("exit", resolve));
  assert.equal(code, 0, out);
  return JSON.parse(out);
}

test("Node connects with connectWebSocket (global WebSocket) and runs a turn", async () => {
  const result = await nodeClient(info.url, token, "Hello to Node through the bridge.");
  assert.equal(result.version, "1.0.102");
  assert.equal(result.reply, "Hello to Node through the bridge.");
  assert.ok(result.events.includes("assistant.message_delta") && result.events.includes("session.idle"), result.events.join());
  await childCount(bridge.child.pid, 0);
});

test("with --cli, two clients share one CLI server, each on a connection and a session of its own", async () => {
  const scriptedBin = join(root, "target", "debug", "scripted_model");
  assert.ok(existsSync(scriptedBin), "build it: cargo build -p copilot-tests --bin scripted_model");
  const model = spawn(scriptedBin, [], { stdio: ["pipe", "pipe", "inherit"] });
  const [line] = await once(createInterface({ input: model.stdout }), "line");
  const scripted = JSON.parse(line);
  const dir = mkdtempSync(join(tmpdir(), "copilot-bridge-cli-"));
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
  let shared;
  try {
    const port = await new Promise((resolve) => {
      createInterface({ input: cli.stdout }).on("line", (l) => {
        const m = /listening on port (\d+)/.exec(l);
        if (m) resolve(Number(m[1]));
      });
    });
    shared = startBridge(["--listen", "127.0.0.1:0", "--cli", `127.0.0.1:${port}`]);
    const b = await shared.ready;
    const [one, two] = await Promise.all([
      // Client one waits for another session's lifecycle before it leaves,
      // so the two overlap on the server however the turns are timed.
      nodeClient(b.url, b.token, "Hello, client one.", scripted.url, "await-peer"),
      nodeClient(b.url, b.token, "Hello, client two.", scripted.url),
    ]);
    assert.equal(one.reply, "Hello, client one.");
    assert.equal(two.reply, "Hello, client two.");
    assert.notEqual(one.sessionId, two.sessionId);
    for (const me of [one, two]) {
      assert.equal(me.stats.unknownSession, 0, `no event of another session reached this connection: ${JSON.stringify(me.stats)}`);
    }
    // The CLI does tell every connection about every session's lifecycle
    // (ids and states): the README says so; spawned CLIs (the default) do
    // not share even that.
    assert.ok(one.lifecycle.includes(two.sessionId), `lifecycle is shared: ${JSON.stringify(one.lifecycle)}`);
    assert.deepEqual(children(shared.child.pid), [], "with --cli the bridge spawns nothing");
  } finally {
    shared?.child.kill("SIGTERM");
    process.kill(-cli.pid, "SIGKILL");
    model.stdin.end();
    rmSync(dir, { recursive: true, force: true });
  }
});

test("two pages at once get CLIs of their own and see only their own turn", async () => {
  const a = await openChat("?script=plain");
  const b = await openChat("?script=plain");
  await childCount(bridge.child.pid, 2);
  const clis = children(bridge.child.pid);
  const ids = [await a.page.evaluate(() => window.copilotChat.session.id), await b.page.evaluate(() => window.copilotChat.session.id)];
  assert.notEqual(ids[0], ids[1]);
  await a.page.fill("#prompt", "alpha from page one");
  await b.page.fill("#prompt", "bravo from page two");
  await Promise.all([a.page.click("#send"), b.page.click("#send")]);
  await Promise.all([a.page.waitForSelector(".turn-time"), b.page.waitForSelector(".turn-time")]);
  const [ta, tb] = [await a.page.textContent("#transcript"), await b.page.textContent("#transcript")];
  assert.match(ta, /You said: “alpha from page one”/);
  assert.match(tb, /You said: “bravo from page two”/);
  assert.ok(!ta.includes("bravo") && !tb.includes("alpha"), "neither page saw the other's turn");
  for (const { page } of [a, b]) {
    assert.equal(await page.evaluate(() => window.copilotChat.client.stats().unknownSession), 0, "no frame of another session");
  }
  figures.plainTurnBothPagesMs = [a, b].length && Math.round(Number(await a.page.getAttribute(".turn-time", "data-ms")));
  // A plain turn and a page-tool turn alone, for the figures.
  await a.page.fill("#prompt", "once more");
  await a.page.click("#send");
  await a.page.waitForFunction(() => document.querySelectorAll(".turn-time").length === 2);
  figures.plainTurnAloneMs = Math.round(Number(await a.page.$$eval(".turn-time", (els) => els[1].dataset.ms)));
  await a.page.close();
  await b.page.close();
  await Promise.all(clis.map(gone));
  // The same CLI warmed by a first turn, as the Rust figures are.
  const t = await openChat("?script=tool");
  for (const n of [1, 2]) {
    await t.page.fill("#prompt", `roll ${n}`);
    await t.page.click("#send");
    await t.page.waitForFunction((n) => document.querySelectorAll(".turn-time").length === n, n);
  }
  figures.pageToolTurnMs = Math.round(Number(await t.page.$$eval(".turn-time", (els) => els[1].dataset.ms)));
  assert.equal((await texts(t.page, '.tool[data-state="done"]')).length, 2);
  const [cli] = children(bridge.child.pid);
  await t.page.close();
  await gone(cli);
});
