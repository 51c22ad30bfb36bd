// Every error class this package throws. No wasm and no other module of the
// client here (config.js, which uses them, is read on its own by a test of
// the workspace, before any build): everything else may import these.

/** Every error this package throws. */
export class CopilotError extends Error {
  constructor(message, options) {
    super(message, options);
    this.name = new.target.name;
  }
}

/** A configuration that cannot work (it would hang, or is malformed). */
export class ConfigError extends CopilotError {}

/** The CLI answered a call with a JSON-RPC error. */
export class RpcError extends CopilotError {
  constructor(method, code, message, data) {
    super(`${method}: ${message} (code ${code})`);
    this.method = method;
    this.code = code;
    this.rpcMessage = message;
    this.data = data;
  }
}

/** The connection ended; every call waiting on it rejects with this. */
export class DisconnectedError extends CopilotError {}

/** A call, a start or a turn took longer than allowed. */
export class TimeoutError extends CopilotError {}

/** A turn ended in `session.error`. */
export class SessionError extends CopilotError {
  constructor(errorType, message, data) {
    super(`${errorType ?? "error"}: ${message ?? "session error"}`);
    this.errorType = errorType;
    this.data = data;
  }
}

/** The CLI speaks another protocol version (`supported`: this client's). */
export class ProtocolVersionError extends CopilotError {
  constructor(server, supported) {
    super(`the CLI speaks protocol version ${server ?? "(unknown)"}; this client needs ${supported}`);
    this.server = server;
    this.supported = supported;
  }
}

/** An error's message, or the thrown value as text. */
export function errorText(e) {
  return e instanceof Error ? e.message : String(e);
}

/** Calls a listener `f` with `value`; its failure (thrown or rejected) goes to `logger` as a `what` handler's. */
export function callListener(logger, f, value, what) {
  const failed = (e) => logger.error?.(`a ${what} handler failed: ${errorText(e)}`);
  try {
    const r = f(value);
    if (r && typeof r.then === "function") r.then(() => {}, failed);
  } catch (e) {
    failed(e);
  }
}

/**
 * A call the session cannot answer was refused before it was sent: the
 * session lacks the capability it needs (`capability`, such as
 * `ui.elicitation`, for the UI call `call`).
 */
export class CapabilityError extends CopilotError {
  constructor(call, capability, message) {
    super(message);
    this.call = call;
    this.capability = capability;
  }
}
