// The Node.js entry point: everything of the browser entry, plus starting
// the Copilot CLI (stdio or TCP) and connecting to one over TCP.

import { spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import { readFileSync, realpathSync, statSync } from "node:fs";
import { connect as netConnect } from "node:net";
import { dirname, delimiter, join, resolve as resolvePath, basename } from "node:path";
import { fileURLToPath } from "node:url";

import { initSync } from "../dist/copilot_wasm.js";
import { CopilotClient as BaseClient } from "./client.js";
import { DEFAULT_STARTUP_MS, POLICY } from "./constants.js";
import { checkConnectOptions, factoryOptions } from "./config.js";
import { modeEnv } from "./modes.js";
import { reopenedBy } from "./recovery.js";
import { CopilotError, DisconnectedError, TimeoutError } from "./errors.js";
import { streamTransport } from "./transport.js";
import { setWasmLoader } from "./wasm.js";

// Everything of the browser entry; this module's own CopilotClient (which
// can start and connect) takes precedence over the re-exported one.
export * from "./index.js";

setWasmLoader(() => {
  initSync({ module: readFileSync(fileURLToPath(new URL("../dist/copilot_wasm_bg.wasm", import.meta.url))) });
});

/**
 * How a CLI is started (argv, the secrets' variables, its process group,
 * how a TCP server announces its port): the core's launch table.
 */
const LAUNCH = POLICY.launch;
/** How long, once the stream ended, to wait for the CLI's exit status to report it. */
const EXIT_PROBE_MS = 2000;
/** Lines of the CLI's stderr kept for error messages. */
const STDERR_LINES = 40;

/** The CLI could not be found. */
export class CliNotFoundError extends CopilotError {
  constructor(searched) {
    super(`the Copilot CLI was not found (searched: ${searched.join(", ")}); install it with \`npm install @github/copilot\` or pass cliPath`);
    this.searched = searched;
  }
}

/** The CLI exited before it was ready; `stderr` holds its last lines. */
export class CliExitedError extends CopilotError {
  constructor(exitCode, signal, stderr) {
    const how = exitCode !== null && exitCode !== undefined ? `with status ${exitCode}` : `on signal ${signal ?? "?"}`;
    super(`the Copilot CLI exited ${how} before it was ready${stderr ? `:\n${stderr}` : ""}`);
    this.exitCode = exitCode;
    this.signal = signal;
    this.stderr = stderr;
  }
}

function nativePackage() {
  const key = `${process.platform}-${process.arch}`;
  return {
    "linux-x64": "copilot-linux-x64",
    "linux-arm64": "copilot-linux-arm64",
    "darwin-x64": "copilot-darwin-x64",
    "darwin-arm64": "copilot-darwin-arm64",
    "win32-x64": "copilot-win32-x64",
  }[key];
}

function isFile(p) {
  try {
    return statSync(p).isFile();
  } catch {
    return false;
  }
}

/**
 * The native binary next to an npm install of the CLI, if there is one.
 * `node_modules/.bin/copilot` is a Node loader that starts the native binary
 * as its child; starting the binary itself keeps one process to stop.
 */
export function nativeBinary(cli) {
  const pkg = nativePackage();
  if (!pkg) return undefined;
  let dir;
  try {
    dir = dirname(realpathSync(cli));
  } catch {
    return undefined;
  }
  const exe = process.platform === "win32" ? "copilot.exe" : "copilot";
  for (;;) {
    if (basename(dir) === "node_modules") {
      const candidate = join(dir, "@github", pkg, exe);
      if (isFile(candidate)) return candidate;
    }
    const up = dirname(dir);
    if (up === dir) return undefined;
    dir = up;
  }
}

/**
 * Finds the CLI where the core's `cliSearch` says, in order: `explicit`,
 * `COPILOT_CLI_PATH`, `copilot` in each folder of `PATH`, then
 * `./node_modules/.bin/copilot`; prefers the native binary of an npm
 * install. An explicit path that does not exist is an error, not a reason
 * to run another CLI.
 */
export function resolveCli(explicit) {
  const candidates = [];
  for (const place of LAUNCH.cliSearch) {
    if (place.explicit) {
      if (explicit) candidates.push(String(explicit));
    } else if (place.variable !== undefined) {
      if (process.env[place.variable]) candidates.push(process.env[place.variable]);
    } else if (place.pathFolders !== undefined) {
      // As Rust's split_paths: an empty entry is the working folder.
      const path = process.env.PATH;
      if (path !== undefined) for (const folder of path.split(delimiter)) candidates.push(join(folder, place.pathFolders));
    } else if (place.relative !== undefined) {
      candidates.push(resolvePath(...place.relative.split("/")));
    }
  }
  const searched = [];
  for (const c of candidates) {
    if (isFile(c)) return nativeBinary(c) ?? c;
    searched.push(c);
    if (explicit && c === String(explicit)) break;
  }
  throw new CliNotFoundError(searched);
}

/** A CLI process this client started, in its own process group. */
class CliProcess {
  constructor(child) {
    this.child = child;
    this.stderrTail = [];
    this.exit = new Promise((resolve) => {
      child.once("exit", (code, signal) => resolve({ code, signal }));
      // A spawn failure (ENOENT, EACCES) emits error and no exit.
      child.once("error", (e) => resolve({ code: null, signal: null, error: e }));
    });
    this.exited = false;
    this.exit.then(() => {
      this.exited = true;
      live.delete(this);
    });
    live.add(this);
    let partial = "";
    child.stderr.setEncoding("utf8");
    child.stderr.on("data", (text) => {
      const lines = (partial + text).split("\n");
      partial = lines.pop();
      for (const l of lines) this.#keep(l);
    });
    this.stderrEnded = new Promise((resolve) => {
      child.stderr.once("close", resolve);
      child.stderr.once("end", () => {
        if (partial) this.#keep(partial);
        partial = "";
        resolve();
      });
    });
  }

  /**
   * Why the connection ended, if the CLI exited: its status or signal and
   * the end of its stderr. Undefined if it is still running after a while.
   */
  async describeExit(ms = EXIT_PROBE_MS) {
    if (!(await this.waitForExit(ms))) return undefined;
    const { code, signal, error } = await this.exit;
    if (error) return `the Copilot CLI could not run: ${error.message}`;
    let timer;
    await Promise.race([this.stderrEnded, new Promise((r) => (timer = setTimeout(r, ms)))]);
    clearTimeout(timer);
    const how = code !== null && code !== undefined ? `exited with code ${code}` : `was ended by signal ${signal}`;
    const tail = this.stderrTail.join("\n").trim();
    return `the Copilot CLI ${how}${tail ? `; its stderr ends with:\n${tail}` : ""}`;
  }

  get pid() {
    return this.child.pid;
  }

  #keep(line) {
    this.stderrTail.push(line.replace(/\r$/, ""));
    if (this.stderrTail.length > STDERR_LINES) this.stderrTail.shift();
  }

  /** Resolves true if the process exited within `ms`. */
  async waitForExit(ms) {
    if (this.exited) return true;
    let timer;
    const timeout = new Promise((resolve) => {
      timer = setTimeout(() => resolve(false), ms);
    });
    const done = await Promise.race([this.exit.then(() => true), timeout]);
    clearTimeout(timer);
    return done;
  }

  /** Kills the whole process group (what the CLI started too). */
  kill() {
    const pid = this.child.pid;
    if (pid === undefined) return;
    try {
      if (process.platform === "win32") this.child.kill("SIGKILL");
      else process.kill(-pid, "SIGKILL");
    } catch {
      try {
        this.child.kill("SIGKILL");
      } catch {
        // Gone already.
      }
    }
    live.delete(this);
  }

  /** The error for a CLI that ended before it was ready. */
  async exitedError() {
    const done = await this.waitForExit(2000);
    // Let the stderr reader catch up with the last lines.
    await new Promise((r) => setTimeout(r, 50));
    if (!done) return undefined;
    const { code, signal, error } = await this.exit;
    if (error) return new CopilotError(`cannot start the Copilot CLI: ${error.message}`, { cause: error });
    return new CliExitedError(code, signal, this.stderrTail.join("\n"));
  }
}

/** CLIs started and not yet stopped: killed if this process exits first. */
const live = new Set();
let exitHookInstalled = false;
function installExitHook() {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  process.once("exit", () => {
    for (const p of live) p.kill();
  });
}

/** `LAUNCH.portAnnouncement` in any case, then the port's digits. */
const PORT_ANNOUNCEMENT = new RegExp(`${LAUNCH.portAnnouncement.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}\\s*(\\d+)`, "i");

/**
 * The port a TCP server announces in one line of its stdout, as the core
 * reads it (1 to 65535, at most five digits); undefined if the line has none.
 */
function announcedPort(line) {
  const m = PORT_ANNOUNCEMENT.exec(line);
  if (!m || m[1].length > 5) return undefined;
  const port = Number(m[1]);
  return port > 0 && port <= 65535 ? port : undefined;
}

/** Reads the port the CLI announces on its stdout. */
function readPort(proc, timeoutMs) {
  return new Promise((resolve, reject) => {
    const stdout = proc.child.stdout;
    stdout.setEncoding("utf8");
    let buffered = "";
    let timer;
    let settled = false;
    const done = (f, v) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      stdout.off("data", onData);
      // Keep draining: a full pipe would block the CLI.
      stdout.resume();
      f(v);
    };
    const onData = (text) => {
      const lines = (buffered + text).split("\n");
      // The last piece is a line not yet ended.
      buffered = lines.pop();
      for (const line of lines) {
        const port = announcedPort(line);
        if (port !== undefined) return done(resolve, port);
      }
      if (buffered.length > 65536) buffered = buffered.slice(-1024);
    };
    stdout.on("data", onData);
    proc.exit.then(async () => {
      if (!settled) done(reject, (await proc.exitedError()) ?? new DisconnectedError("the CLI exited"));
    });
    timer = setTimeout(
      () => done(reject, new TimeoutError(`the CLI did not announce its port within ${timeoutMs} ms`)),
      timeoutMs,
    );
  });
}

function tcpSocket(host, port, timeoutMs) {
  return new Promise((resolve, reject) => {
    const socket = netConnect({ host, port });
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new TimeoutError(`cannot connect to ${host}:${port} within ${timeoutMs} ms`));
    }, timeoutMs);
    socket.once("connect", () => {
      clearTimeout(timer);
      socket.setNoDelay(true);
      resolve(socket);
    });
    socket.once("error", (e) => {
      clearTimeout(timer);
      reject(new CopilotError(`cannot connect to ${host}:${port}: ${e.message}`, { cause: e }));
    });
  });
}

/**
 * Starts the CLI of `launch` (`{ program, argv, cwd, env }`) in its own
 * process group and opens its stream: `{ proc, transport, address? }`.
 */
async function startCli({ program, argv, cwd, env }, transport, startupTimeoutMs) {
  const child = spawn(program, argv, {
    cwd,
    env,
    stdio: ["pipe", "pipe", "pipe"],
    // Its own process group, so that stopping it stops what it started.
    detached: LAUNCH.ownProcessGroup && process.platform !== "win32",
    windowsHide: true,
  });
  const proc = new CliProcess(child);
  const spawned = await Promise.race([
    new Promise((resolve) => child.once("spawn", () => resolve(true))),
    proc.exit.then(() => false),
  ]);
  if (!spawned) throw (await proc.exitedError()) ?? new CopilotError(`cannot start ${program}`);
  try {
    if (transport === "stdio") return { proc, transport: streamTransport(child.stdout, child.stdin, { label: "stdio" }) };
    const port = await readPort(proc, startupTimeoutMs);
    const socket = await tcpSocket("127.0.0.1", port, startupTimeoutMs);
    const label = `tcp 127.0.0.1:${port}`;
    const address = { host: "127.0.0.1", port };
    return { proc, address, transport: streamTransport(socket, socket, { label, destroy: () => socket.destroy() }) };
  } catch (e) {
    proc.kill();
    throw e;
  }
}

/**
 * Runs `open` (the handshake and what follows) on the CLI `proc` just
 * started; if it fails, the CLI is killed, and a connection that ended
 * says why the CLI exited.
 */
async function reopened(proc, open) {
  try {
    return await open();
  } catch (e) {
    const exited = e instanceof DisconnectedError ? await proc.exitedError() : undefined;
    proc.kill();
    throw exited ?? e;
  }
}

/** A stream to a CLI serving TCP at `host`:`port`. */
async function serverTransport(host, port, timeoutMs) {
  const socket = await tcpSocket(host, port, timeoutMs);
  return streamTransport(socket, socket, { label: `tcp ${host}:${port}`, destroy: () => socket.destroy() });
}

/**
 * How a lost connection is made again, by transport kind (recovery.js's
 * `reconnect`): a CLI this client started (over stdio or TCP) is started
 * again as it was first; `reopen` runs the handshake and the resumes on it,
 * and kills it if they fail.
 */
function respawn(launch, transport, startupTimeoutMs) {
  return {
    kind: transport === "stdio" ? "spawn-stdio" : "spawn-tcp",
    run: async (reopen) => {
      const next = await startCli(launch, transport, startupTimeoutMs);
      return reopened(next.proc, () => reopen(next.transport, { process: next.proc, address: next.address }));
    },
  };
}

/**
 * A connection to one Copilot CLI (Node): `start` spawns it, `connect`
 * reaches one serving TCP, `fromStreams` runs over any duplex.
 */
export class CopilotClient extends BaseClient {
  /**
   * Starts the CLI and connects to it: `--headless --no-auto-update
   * --log-level <logLevel>` and `--stdio` or `--port 0`, in its own process
   * group.
   */
  static async start(options = {}) {
    const {
      cliPath,
      transport = "stdio",
      args = [],
      env = {},
      cwd,
      authToken,
      connectionToken,
      logLevel = LAUNCH.logLevel,
      startupTimeoutMs = DEFAULT_STARTUP_MS,
      telemetry,
      autoRestart = true,
    } = options;
    if (transport !== "stdio" && transport !== "tcp") {
      throw new CopilotError(`transport is "stdio" or "tcp", not ${JSON.stringify(transport)}`);
    }
    const common = factoryOptions(options, POLICY.modes);
    // The mode's variables (a state folder of the application's own; in
    // empty mode, required, and no keychain), over the user's environment.
    const modeVariables = modeEnv(options, common.mode, POLICY.modes);
    const program = resolveCli(cliPath);
    // The core's launch table (`POLICY.launch`, see wasm/src/policy.rs).
    const argv = [...LAUNCH.args, logLevel];
    const childEnv = { ...process.env, ...env, ...modeVariables };
    // The CLI's own trace export, over the user's environment (the
    // secrets come after it): the core's variables.
    if (telemetry) {
      childEnv[LAUNCH.telemetryEnabledEnv] = "true";
      for (const [option, variable] of LAUNCH.telemetryEnv) {
        if (telemetry[option] !== undefined) childEnv[variable] = String(telemetry[option]);
      }
    }
    // The CLI keeps these from the shells and MCP servers it starts.
    const secrets = [];
    if (authToken) {
      argv.push(...LAUNCH.authArgs);
      childEnv[LAUNCH.authTokenEnv] = authToken;
      secrets.push(LAUNCH.authTokenEnv);
    }
    // Without a token of the caller's, one is generated: no other local
    // process can drive a CLI this client started.
    const token = transport === "tcp" ? (connectionToken ?? randomUUID()) : undefined;
    if (transport === "stdio") argv.push(...LAUNCH.stdioArgs);
    else {
      argv.push(...LAUNCH.tcpArgs, "0");
      childEnv[LAUNCH.connectionTokenEnv] = token;
      secrets.push(LAUNCH.connectionTokenEnv);
    }
    if (secrets.length > 0) argv.push(`${LAUNCH.secretsArg}${secrets.join(",")}`);
    argv.push(...args.map(String));

    installExitHook();
    const launch = { program, argv, cwd, env: childEnv };
    const { proc, transport: transportImpl, address } = await startCli(launch, transport, startupTimeoutMs);
    // A CLI that exits while the client did not end it is started again
    // the same way, and its sessions resumed (recovery.js).
    const reconnect = autoRestart ? respawn(launch, transport, startupTimeoutMs) : undefined;
    return reopened(proc, () =>
      this._handshaken(transportImpl, { ...common, startupTimeoutMs, process: proc, address, token, reconnect }),
    );
  }

  /**
   * Connects to a CLI already serving TCP (`copilot --headless --port N`).
   * A connection that drops while the client did not end it is made again
   * (`autoRestart`, default true: the server's sessions outlive the
   * connection), and its sessions resumed.
   */
  static async connect(options = {}) {
    checkConnectOptions(options, POLICY.launch);
    const common = factoryOptions(options, POLICY.modes);
    const { host = "127.0.0.1", port, token, startupTimeoutMs = DEFAULT_STARTUP_MS, autoRestart = true } = options;
    if (!Number.isInteger(port)) throw new CopilotError("connect needs a port");
    const transport = await serverTransport(host, port, startupTimeoutMs);
    const reconnect = autoRestart ? reopenedBy("server", () => serverTransport(host, port, startupTimeoutMs)) : undefined;
    return this._handshaken(transport, { ...common, startupTimeoutMs, token, address: { host, port }, reconnect });
  }
}
