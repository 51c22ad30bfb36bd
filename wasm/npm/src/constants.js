// The numbers and texts the JS client works by and exports, read from the
// core's policy (`dist/policy.js`, written by scripts/build-wasm from
// wasm/policy.json, which the core's tests hold to the core): the protocol
// version, the default deadlines, the bounds of the events kept for a late
// first subscriber, the text a model reads for a failed tool, and the
// policy's rules themselves (handshake, turn, follow-ups, launch, stop).

import policy from "../dist/policy.js";

/** The core's protocol policy, as data: see wasm/src/policy.rs. */
export const POLICY = policy;

const { limits } = policy;

/** The protocol version this client speaks. */
export const PROTOCOL_VERSION = limits.protocolVersion;

/** How long `destroy()` and `stop()` (in total) wait for a CLI that does not answer. */
export const DEFAULT_SHUTDOWN_GRACE_MS = limits.shutdownGraceMs;

/** How long any call to the CLI may take unless told otherwise. */
export const DEFAULT_REQUEST_TIMEOUT_MS = limits.requestTimeoutMs;

/**
 * How long a handler (permission, tool, user input, ...) may take unless
 * told otherwise; past it the engine answers with the refusal.
 */
export const DEFAULT_HANDLER_TIMEOUT_MS = limits.handlerTimeoutMs;

/** How long a handshake may take unless told otherwise. */
export const DEFAULT_STARTUP_MS = limits.startupTimeoutMs;

/**
 * Events kept for a session's first subscriber while it has none, at most:
 * a whole turn fits many times over, so subscribing right after
 * `createSession` resolves loses nothing, and a session used only through
 * `sendAndWait` keeps memory flat. Events past it (or past
 * `MAX_KEPT_BYTES`) are not kept for a late first subscriber;
 * `session.stats().notKept` counts them.
 */
export const MAX_KEPT_EVENTS = limits.maxKeptEvents;

/** The bytes of the events kept for a first subscriber, at most (with `MAX_KEPT_EVENTS`). */
export const MAX_KEPT_BYTES = limits.maxKeptBytes;

/**
 * Bytes of events handed to async iterators (`session.events()`) and not
 * taken yet, across a connection, before the client stops reading (the
 * core's rule, `CoreEngine.backlog`): a consumer slower than the CLI holds
 * the CLI back instead of growing memory. Reading goes on when half has
 * been taken, at once while a request waits for its answer, and after
 * `BACKLOG_STALL_MS` with nothing taken (an iterator kept and not read
 * must not stop the others).
 */
export const MAX_BACKLOG_BYTES = limits.maxBacklogBytes;

/** How long a full backlog may stay untouched before reading goes on anyway. */
export const BACKLOG_STALL_MS = limits.backlogStallMs;
