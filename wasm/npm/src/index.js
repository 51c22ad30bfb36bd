// The browser (and any non-Node) entry point: the client over streams.
// The WebAssembly is fetched next to the glue (`dist/copilot_wasm_bg.wasm`)
// on first use; call `loadWasm(input)` first to load it another way.

export {
  PROTOCOL_VERSION,
  DEFAULT_REQUEST_TIMEOUT_MS,
  DEFAULT_HANDLER_TIMEOUT_MS,
  DEFAULT_SHUTDOWN_GRACE_MS,
  MAX_KEPT_EVENTS,
  MAX_BACKLOG_BYTES,
  BACKLOG_STALL_MS,
} from "./constants.js";
export {
  CopilotError,
  RpcError,
  DisconnectedError,
  TimeoutError,
  SessionError,
  ProtocolVersionError,
  ConfigError,
  CapabilityError,
} from "./errors.js";
export { CopilotClient } from "./client.js";
export { Session } from "./session.js";
export { approveAll, withDecisionContext } from "./answering.js";
export { CanvasError, createCanvas } from "./canvas.js";
export { BuiltInTools, ToolSet } from "./toolset.js";
export { CopilotRequestHandler } from "./inference.js";
export { CopilotWebSocketCloseStatus, CopilotWebSocketHandler } from "./inference-websocket.js";
export { loadWasm } from "./wasm.js";
export {
  SESSION_OPTIONS,
  CREATE_ONLY_OPTIONS,
  RESUME_ONLY_OPTIONS,
  HANDLER_OPTIONS,
  GENERIC_HANDLER_KINDS,
  RESERVED_OPTIONS,
} from "./config.js";
export { genericRequestNames } from "./hooks.js";
