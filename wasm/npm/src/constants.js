// The numbers and texts the JS client works by and exports: the protocol
// version it speaks, the default deadlines, the bound of the events kept for
// a late first subscriber, the text a model reads for a failed tool. No
// imports: every other module may read these.

/** The protocol version this client speaks. */
export const PROTOCOL_VERSION = 3;

/** How long `destroy()` and `stop()` (in total) wait for a CLI that does not answer. */
export const DEFAULT_SHUTDOWN_GRACE_MS = 3000;

/** How long any call to the CLI may take unless told otherwise. */
export const DEFAULT_REQUEST_TIMEOUT_MS = 60_000;

/**
 * How long a handler (permission, tool, user input, ...) may take unless
 * told otherwise; past it the engine answers with the refusal.
 */
export const DEFAULT_HANDLER_TIMEOUT_MS = 5 * 60_000;

/** How long a handshake may take unless told otherwise. */
export const DEFAULT_STARTUP_MS = 60_000;

/**
 * Events kept for a session's first subscriber while it has none, at most:
 * a whole turn fits many times over, so subscribing right after
 * `createSession` resolves loses nothing, and a session used only through
 * `sendAndWait` keeps memory flat. Events past it are not kept for a late
 * first subscriber; `session.stats().notKept` counts them.
 */
export const MAX_KEPT_EVENTS = 1024;

/** What the model reads when a tool's handler throws (the engine sends it; the error goes to the logs). */
export const TOOL_FAILED_TEXT = "Invoking this tool produced an error. Detailed information is not available.";
