// The browser (and any non-Node) entry point: the client over streams.
// The WebAssembly is fetched next to the glue (`dist/copilot_wasm_bg.wasm`)
// on first use; call `loadWasm(input)` first to load it another way.

export {
  PROTOCOL_VERSION,
  CopilotClient,
  DEFAULT_REQUEST_TIMEOUT_MS,
  DEFAULT_HANDLER_TIMEOUT_MS,
  DEFAULT_SHUTDOWN_GRACE_MS,
  MAX_KEPT_EVENTS,
  CopilotError,
  RpcError,
  DisconnectedError,
  TimeoutError,
  SessionError,
  ProtocolVersionError,
  ConfigError,
  Session,
  approveAll,
  withDecisionContext,
  loadWasm,
  SESSION_OPTIONS,
  CREATE_ONLY_OPTIONS,
  RESUME_ONLY_OPTIONS,
  HANDLER_OPTIONS,
  GENERIC_HANDLER_KINDS,
  RESERVED_OPTIONS,
  TOOL_FAILED_TEXT,
} from "./client.js";
export { genericRequestNames } from "./hooks.js";
