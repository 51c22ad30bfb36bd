// Shared by the package's Node tests: where the repository's binaries are,
// an isolated environment for the real CLI, the scripted model server, and
// a tiny in-process JSON-RPC peer for stream tests.
//
// The tests run against the package as installed (`npm run test:packed`
// copies them into a temporary project that installed the `npm pack`
// tarball), so they import "copilot-wasm", never ../src. COPILOT_RS_ROOT
// names the repository (default: two folders above the package).

import { spawn, spawnSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";

import { CopilotClient } from "copilot-wasm";

export const ROOT = process.env.COPILOT_RS_ROOT ?? resolve(fileURLToPath(new URL("../../..", import.meta.url)));
export const MODEL = "claude-sonnet-4.5";
export const REAL_CLI_VERSION = "1.0.102";

/** A cargo-built helper binary of copilot-tests, built if missing. */
export function testBinary(name) {
  const path = join(ROOT, "target", "debug", name);
  if (!existsSync(path)) {
    const built = spawnSync("cargo", ["build", "-p", "copilot-tests", "--bins"], { cwd: ROOT, stdio: "inherit" });
    if (built.status !== 0 || !existsSync(path)) {
      throw new Error(`cannot build ${name}: \`cargo build -p copilot-tests --bins\` in ${ROOT} failed`);
    }
  }
  return path;
}

export const fakeCli = () => testBinary("fake_cli");

/** The real CLI 1.0.102's native binary; fails (never skips) without it. */
export function realCli() {
  const path = join(ROOT, "node_modules", "@github", "copilot-linux-x64", "copilot");
  if (!existsSync(path)) {
    throw new Error(
      `the Copilot CLI ${REAL_CLI_VERSION} is not installed at ${path}: run \`npm ci\` in ${ROOT} (these tests never skip)`,
    );
  }
  return path;
}

/** A temporary folder, removed by the returned cleanup. */
export function tempDir(prefix) {
  const dir = mkdtempSync(join(tmpdir(), `${prefix}-`));
  return { dir, cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}

/** A loopback URL that refuses connections: a port bound, then released. */
export async function refusingProxy() {
  const server = createServer();
  await new Promise((r) => server.listen(0, "127.0.0.1", r));
  const { port } = server.address();
  await new Promise((r) => server.close(r));
  return `http://127.0.0.1:${port}`;
}

/**
 * Environment that keeps the real CLI on this machine and out of the
 * user's state: home, config, state and cache folders under `dir`, proxies
 * at `proxy` (a refusing port, or the scripted model), loopback direct.
 */
export function isolatedEnv(dir, proxy) {
  const folder = (name) => {
    const p = join(dir, name);
    mkdirSync(p, { recursive: true });
    return p;
  };
  return {
    COPILOT_HOME: folder("home"),
    XDG_CONFIG_HOME: folder("config"),
    XDG_STATE_HOME: folder("state"),
    XDG_CACHE_HOME: folder("cache"),
    COPILOT_CACHE_HOME: folder("cache"),
    GH_CONFIG_DIR: folder("gh"),
    HTTP_PROXY: proxy,
    HTTPS_PROXY: proxy,
    http_proxy: proxy,
    https_proxy: proxy,
    NO_PROXY: "127.0.0.1,localhost,::1",
    no_proxy: "127.0.0.1,localhost,::1",
    // Never the user's login.
    GH_TOKEN: "",
    GITHUB_TOKEN: "",
    COPILOT_GITHUB_TOKEN: "",
  };
}

/**
 * Starts the cargo-built `scripted_model` server: `{ url, model, env,
 * script(sessionId, replies), requests(), stop() }`.
 */
export async function startScriptedModel() {
  const child = spawn(testBinary("scripted_model"), [], { stdio: ["pipe", "pipe", "inherit"] });
  const lines = createInterface({ input: child.stdout });
  const first = await new Promise((resolve, reject) => {
    lines.once("line", resolve);
    child.once("exit", (code) => reject(new Error(`scripted_model exited (${code}) before it was ready`)));
    child.once("error", reject);
  });
  const info = JSON.parse(first);
  const control = async (method, path, body) => {
    const r = await fetch(`${info.url}${path}`, {
      method,
      headers: body ? { "content-type": "application/json" } : {},
      body: body ? JSON.stringify(body) : undefined,
    });
    const json = await r.json();
    if (!r.ok) throw new Error(`${method} ${path}: ${r.status} ${JSON.stringify(json)}`);
    return json;
  };
  return {
    ...info,
    script: (sessionId, replies) => control("POST", "/_scripted/script", { sessionId, replies }),
    requests: async () => (await control("GET", "/_scripted/requests")).requests,
    stop: () =>
      new Promise((resolve) => {
        child.once("exit", resolve);
        child.stdin.end();
      }),
  };
}

/**
 * The real CLI on the scripted model, as the tests of one file share it:
 * `{ model, client, dir, workDir(name), stop() }`. The model server is
 * also the CLI's proxy (it refuses whatever would leave), and the CLI's
 * home is a temporary directory (`prefix`), removed by `stop`.
 */
export async function startRealCli(prefix, options = (dir) => ({})) {
  const model = await startScriptedModel();
  const { dir, cleanup } = tempDir(prefix);
  let client;
  try {
    client = await CopilotClient.start({
      cliPath: realCli(),
      env: { ...isolatedEnv(dir, model.url), ...model.env },
      cwd: dir,
      authToken: "fake-token",
      args: ["--no-auto-login"],
      ...options(dir),
    });
  } catch (e) {
    await model.stop();
    cleanup();
    throw e;
  }
  return {
    model,
    client,
    dir,
    workDir(name) {
      const p = join(dir, "work", name);
      mkdirSync(p, { recursive: true });
      return p;
    },
    async stop() {
      await client.stop();
      await model.stop();
      cleanup();
    },
  };
}

/** Waits until `check()` is truthy, polling, or fails after `ms`. */
export async function eventually(check, what, ms = 5000) {
  const deadline = Date.now() + ms;
  for (;;) {
    if (await check()) return;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

/**
 * Waits until the real CLI under `dir` (its home at `dir/home`) has written
 * the event of external tool call `toolCallId` to session `sessionId`'s
 * journal: a CLI killed before that marks the call interrupted on resume,
 * and lists nothing.
 */
export function callInJournal(dir, sessionId, toolCallId, ms) {
  const journal = join(dir, "home", "session-state", sessionId, "events.jsonl");
  return eventually(
    () =>
      existsSync(journal) &&
      readFileSync(journal, "utf8")
        .split("\n")
        .some((line) => line.includes('"external_tool.requested"') && line.includes(toolCallId)),
    "the call in the journal",
    ms,
  );
}

/** Takes events off an async iterator until `stop(event)` is true (included). */
export async function collectUntil(iterator, stop, ms = 30_000) {
  const out = [];
  const timer = setTimeout(() => iterator.return?.(), ms);
  try {
    for (;;) {
      const { value, done } = await iterator.next();
      if (done) throw new Error(`the stream ended after ${out.map((e) => e.type).join(", ")}`);
      out.push(value);
      if (stop(value)) return out;
    }
  } finally {
    clearTimeout(timer);
  }
}

// ---------------------------------------------------------------------------
// An in-process peer: speaks Content-Length frames over byte callbacks.

export function frame(body) {
  const bytes = new TextEncoder().encode(typeof body === "string" ? body : JSON.stringify(body));
  const header = new TextEncoder().encode(`Content-Length: ${bytes.length}\r\n\r\n`);
  const out = new Uint8Array(header.length + bytes.length);
  out.set(header);
  out.set(bytes, header.length);
  return out;
}

/**
 * A fake CLI in this process. `send(bytes)` delivers to the client; feed it
 * what the client writes with `receive(bytes)`. It answers `connect` (or
 * not, see options), records every message and lets a test answer the rest.
 */
export class Peer {
  #buffer = new Uint8Array(0);
  #waiters = [];
  received = [];

  constructor(send, { protocolVersion = 3, legacy = false, answer } = {}) {
    this.send = (body) => send(frame(body));
    this.protocolVersion = protocolVersion;
    this.legacy = legacy;
    this.answer = answer ?? (() => undefined);
  }

  receive(bytes) {
    const joined = new Uint8Array(this.#buffer.length + bytes.length);
    joined.set(this.#buffer);
    joined.set(bytes, this.#buffer.length);
    this.#buffer = joined;
    for (;;) {
      const text = new TextDecoder().decode(this.#buffer.subarray(0, Math.min(this.#buffer.length, 64)));
      const end = text.indexOf("\r\n\r\n");
      if (end < 0) return;
      const length = Number(/Content-Length: (\d+)/i.exec(text.slice(0, end))[1]);
      const start = end + 4;
      if (this.#buffer.length < start + length) return;
      const body = JSON.parse(new TextDecoder().decode(this.#buffer.subarray(start, start + length)));
      this.#buffer = this.#buffer.slice(start + length);
      this.#handle(body);
    }
  }

  #handle(m) {
    this.received.push(m);
    for (const w of this.#waiters.slice()) {
      if (w.match(m)) {
        this.#waiters.splice(this.#waiters.indexOf(w), 1);
        w.resolve(m);
      }
    }
    if (m.method === "connect") {
      if (this.legacy) this.send({ jsonrpc: "2.0", id: m.id, error: { code: -32601, message: "Method not found" } });
      else this.send({ jsonrpc: "2.0", id: m.id, result: { ok: true, protocolVersion: this.protocolVersion, version: "peer" } });
      return;
    }
    if (m.method === "ping") {
      this.send({ jsonrpc: "2.0", id: m.id, result: { message: "pong", protocolVersion: this.protocolVersion } });
      return;
    }
    if (typeof m.method !== "string" || m.id === undefined) return; // a response or a notification
    const result = this.answer(m);
    if (result !== undefined) this.send({ jsonrpc: "2.0", id: m.id, result });
  }

  /** The first message (received before or after the call) matching. */
  waitFor(match, ms = 5000) {
    const found = this.received.find(match);
    if (found) return Promise.resolve(found);
    return new Promise((resolve, reject) => {
      const w = {
        match,
        resolve: (m) => {
          clearTimeout(timer);
          resolve(m);
        },
      };
      this.#waiters.push(w);
      const timer = setTimeout(() => {
        const i = this.#waiters.indexOf(w);
        if (i >= 0) {
          this.#waiters.splice(i, 1);
          reject(new Error(`timed out waiting for a message (${match})`));
        }
      }, ms);
    });
  }
}
