// Type declarations of copilot-wasm's Node.js entry point: the browser API
// plus starting the CLI (stdio or TCP) and connecting to one over TCP.

import {
  ClientRequestOptions,
  ByteReadable,
  ByteWritable,
  CopilotClient as BaseClient,
  CopilotError,
  Logger,
  StreamOptions,
  TelemetryConfig,
  TimeoutOptions,
  WebSocketOptions,
} from "./index.js";

export {
  PROTOCOL_VERSION,
  DEFAULT_REQUEST_TIMEOUT_MS,
  DEFAULT_HANDLER_TIMEOUT_MS,
  DEFAULT_SHUTDOWN_GRACE_MS,
  MAX_KEPT_EVENTS,
  MAX_BACKLOG_BYTES,
  BACKLOG_STALL_MS,
  CopilotError,
  RpcError,
  DisconnectedError,
  TimeoutError,
  SessionError,
  ProtocolVersionError,
  ConfigError,
  CapabilityError,
  Session,
  CanvasError,
  CopilotRequestHandler,
  CopilotWebSocketCloseStatus,
  CopilotWebSocketHandler,
  createCanvas,
  ToolSet,
  BuiltInTools,
  approveAll,
  withDecisionContext,
  genericRequestNames,
  loadWasm,
  SESSION_OPTIONS,
  CREATE_ONLY_OPTIONS,
  RESUME_ONLY_OPTIONS,
  HANDLER_OPTIONS,
  GENERIC_HANDLER_KINDS,
  RESERVED_OPTIONS,
} from "./index.js";
export type * from "./index.js";

/** Options of `CopilotClient.start`. */
export interface StartOptions extends TimeoutOptions, ClientRequestOptions {
  /**
   * The CLI to run. Default: `COPILOT_CLI_PATH`, then
   * `./node_modules/.bin/copilot`; the native binary of an npm install
   * (`node_modules/@github/copilot-<platform>-<arch>/copilot`) is preferred.
   */
  cliPath?: string;
  /** `stdio` (default) or `tcp` (`--port 0`, the port read from its stdout). */
  transport?: "stdio" | "tcp";
  /** Extra CLI arguments, after the client's own (for example `--no-auto-login`). */
  args?: string[];
  /** Extra environment, over `process.env`. */
  env?: Record<string, string | undefined>;
  /** The CLI's working directory. */
  cwd?: string;
  /**
   * A GitHub token for the CLI, passed in its environment
   * (`--auth-token-env`), never argv, and named to the CLI as a secret
   * (`--secret-env-vars`) so that the shells it runs do not receive it.
   */
  authToken?: string;
  /**
   * For TCP: a token the CLI then requires of every connection
   * (`COPILOT_CONNECTION_TOKEN`). Default: a random one, so that no other
   * local process can drive the CLI.
   */
  connectionToken?: string;
  /** The CLI's `--log-level` (default `error`). */
  logLevel?: string;
  /** How long the CLI may take to start and answer `connect` (default 60 000 ms). */
  startupTimeoutMs?: number;
  logger?: Logger;
  /** The largest frame accepted (default 16 MiB; larger ones are reported and skipped). */
  maxFrameBytes?: number;
  /** The CLI's own OpenTelemetry export (off when not set). */
  telemetry?: TelemetryConfig;
  /** The started CLI's state folder (its `COPILOT_HOME`); required in `mode: "empty"`. */
  baseDirectory?: string;
  /**
   * When the CLI (over stdio or TCP) exits while the client did not end
   * it: start it again (after each wait of the core's backoff, 250 ms, 1 s
   * and 4 s, then give up), resume every open session with its handlers
   * and `continuePendingWork`, answer the waits the CLI lists, once, and
   * deliver the events the connection lost (read back from each session's
   * log) before the live ones. Calls in flight at the loss fail; a
   * `sendAndWait` goes on to the turn's end. Each step is told to
   * `onRecovery`. Default true.
   */
  autoRestart?: boolean;
}

/** Options of `CopilotClient.connect`. */
export interface ConnectOptions extends TimeoutOptions, ClientRequestOptions {
  /** Default `127.0.0.1`. */
  host?: string;
  port: number;
  /** The CLI's connection token, if it requires one. */
  token?: string;
  startupTimeoutMs?: number;
  logger?: Logger;
  /** The largest frame accepted (default 16 MiB; larger ones are reported and skipped). */
  maxFrameBytes?: number;
  /**
   * When the connection drops while the client did not end it: connect
   * again (the core's backoff, as `StartOptions.autoRestart`), resume
   * every open session and deliver the events it lost. Default true: the
   * server's sessions outlive a dropped connection.
   */
  autoRestart?: boolean;
}

/** A connection to one Copilot CLI (Node.js). */
export declare class CopilotClient extends BaseClient {
  /**
   * Starts the CLI (`--headless --no-auto-update --log-level <l>` and
   * `--stdio` or `--port 0`) in its own process group and connects to it.
   * Rejects with CliNotFoundError, or CliExitedError (with its stderr) if
   * it stops before it is ready.
   */
  static start(options?: StartOptions): Promise<CopilotClient>;
  /** Connects to a CLI already serving TCP (`copilot --headless --port N`). */
  static connect(options: ConnectOptions): Promise<CopilotClient>;
  /** Runs the client over any duplex byte stream (see the browser entry point). */
  static fromStreams(readable: ByteReadable, writable: ByteWritable, options?: StreamOptions): Promise<CopilotClient>;
  /** Connects through a WebSocket to a copilot-bridge (needs a global `WebSocket`: Node 22+, or 20 with --experimental-websocket). */
  static connectWebSocket(url: string, options?: WebSocketOptions): Promise<CopilotClient>;
}

/** The CLI could not be found. */
export declare class CliNotFoundError extends CopilotError {
  readonly searched: string[];
}

/** The CLI exited before it was ready. */
export declare class CliExitedError extends CopilotError {
  readonly exitCode: number | null;
  readonly signal: string | null;
  /** The last lines of its stderr. */
  readonly stderr: string;
}

/** The CLI to run: `explicit`, `COPILOT_CLI_PATH`, `./node_modules/.bin/copilot` (native binary preferred). */
export declare function resolveCli(explicit?: string): string;

/** The native binary next to an npm install of the CLI, if there is one. */
export declare function nativeBinary(cli: string): string | undefined;
