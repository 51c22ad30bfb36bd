// Recovery of a lost connection: the CLI this client started exited, or
// the connection to a CLI server dropped, while the client did not end it.
// The steps are the core's (copilot_core's recovery module, through
// policy.json and `CoreEngine.recover`): the engine forgets what the
// next connection cannot settle and holds its frames; after each wait of
// `POLICY.recovery.backoffMs` in turn, the connection is made again (the
// transport kind's `reconnect`, see below), the handshake runs, every open
// session is resumed with the options it was opened with and
// `POLICY.recovery.resumeFlag`, the engine asks the CLI what is pending,
// the events the connection lost are read back from each session's log
// (`CoreEngine.recover` says which), and the frames held (answers given
// meanwhile) go out. Each step is told to the `onRecovery` listeners and
// the log; when every attempt failed, the connection ends with the cause.
//
// How a connection is made again is the transport kind's: each kind gives
// the client a `reconnect` `{ kind, run(reopen) }`, where `run` makes a new
// stream (starts the CLI again over stdio or TCP, connects to the server
// again, opens a new WebSocket...) and calls `reopen(transport, replaced)`
// on it, which runs the rest (`replaced`: `{ process?, address? }`, what
// the new connection changed); `run` resolves with what `reopen` resolves
// with and undoes its stream if `reopen` throws.

import { POLICY } from "./constants.js";
import { sessionParams, sortedMembers } from "./config.js";
import { CopilotError, errorText } from "./errors.js";

const { backoffMs: BACKOFF_MS, resumeFlag: RESUME_FLAG, eventLog: EVENT_LOG } = POLICY.recovery;

/**
 * The `reconnect` of a transport kind whose connection is simply opened
 * again (a server connected to, a WebSocket): `open()` makes the new
 * stream, `reopen` runs the rest on it, and the stream goes if that fails.
 */
export function reopenedBy(kind, open) {
  return {
    kind,
    run: async (reopen) => {
      const transport = await open();
      try {
        return await reopen(transport, {});
      } catch (e) {
        transport.stopReading();
        throw e;
      }
    },
  };
}

/**
 * One client's recovery. `host`: `{ driver, logger, timeoutMs, reconnect,
 * stopping(), replaced({ process?, address? }), onEnd(reason),
 * handshake(), sessions(), end(tag, reason), shutDown(reason) }`:
 * `reconnect` is the transport kind's (see the top of this file), none if
 * a lost connection is not recovered; `sessions()` gives `{ session,
 * config, kinds, patch }` of every open session (`patch` sends the options
 * the CLI takes once it is open).
 */
export class Recovery {
  #host;
  #listeners = new Set();
  /** Wakes the pause between attempts when the client stops. */
  #wake = null;
  /** Whether a recovery runs (the streams of its attempts end into it). */
  running = false;

  constructor(host) {
    this.#host = host;
  }

  /** Whether a lost connection is recovered at all. */
  get enabled() {
    return typeof this.#host.reconnect?.run === "function";
  }

  /** Adds a listener of every step; returns a function that removes it. */
  on(listener) {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  /** The client stops: a pause between attempts ends at once. */
  stop() {
    this.#wake?.();
  }

  #tell(event) {
    const { logger } = this.#host;
    const text = `recovery: ${JSON.stringify(event)}`;
    if (event.type === "gaveUp" || event.type === "attemptFailed") logger.warn?.(text);
    else logger.info?.(text);
    for (const f of this.#listeners) {
      try {
        f(event);
      } catch (e) {
        logger.error?.(`a recovery listener failed: ${errorText(e)}`);
      }
    }
  }

  /** Recovers the connection lost for `cause`, or ends it. */
  async run(cause) {
    this.running = true;
    try {
      await this.#run(cause);
    } finally {
      this.running = false;
    }
  }

  async #run(cause) {
    const host = this.#host;
    const lost = performance.now();
    const { kind, run } = host.reconnect;
    this.#tell({ type: "connectionLost", cause, kind });
    host.driver.lose(cause);
    let last = cause;
    for (const [at, afterMs] of BACKOFF_MS.entries()) {
      const attempt = at + 1;
      await new Promise((resolve) => {
        const timer = setTimeout(resolve, afterMs);
        this.#wake = () => (clearTimeout(timer), resolve());
      });
      this.#wake = null;
      if (host.stopping()) return;
      this.#tell({ type: "restarting", attempt, afterMs });
      try {
        const sessions = await run((transport, replaced) => this.#reopen(transport, replaced));
        host.driver.recovered();
        this.#tell({ type: "recovered", sessions, tookMs: performance.now() - lost });
        return;
      } catch (e) {
        if (host.stopping()) return;
        this.#tell({ type: "attemptFailed", attempt, error: errorText(e) });
        host.driver.lose(errorText(e));
        last = `attempt ${attempt}: ${errorText(e)}`;
      }
    }
    const reason = `the connection was lost and ${BACKOFF_MS.length} attempts to recover it failed; the last: ${last}`;
    this.#tell({ type: "gaveUp", cause: reason });
    host.shutDown(reason);
  }

  /**
   * On a new connection: the handshake, then the resume of every session
   * still open; resolves with the number resumed.
   */
  async #reopen(transport, replaced = {}) {
    const host = this.#host;
    if (host.stopping()) throw new CopilotError("the client is stopping");
    host.replaced(replaced);
    host.driver.attach(transport, (reason) => host.onEnd(reason));
    await host.handshake();
    let resumed = 0;
    for (const { session, config, kinds, patch } of host.sessions()) {
      if (await this.#resume(session, config, kinds, patch)) resumed++;
    }
    return resumed;
  }

  /**
   * Resumes one session under its own id and tag: the engine takes its
   * open waits over and, once the CLI answers, asks what is pending; the
   * events the connection lost are read back from its log and delivered
   * before the live ones, held meanwhile. A session the CLI refuses to
   * resume ends with the CLI's error.
   */
  async #resume(session, config, kinds, patch) {
    session._hold();
    let log = [];
    let gapEvents = 0;
    try {
      if (!(await this.#reopenSession(session, config, kinds, patch))) return false;
      log = await this.#readGap(session);
    } finally {
      gapEvents = this.#deliverGap(session, log);
    }
    this.#tell({ type: "sessionResumed", sessionId: session.id, gapEvents });
    return true;
  }

  /**
   * Delivers the events of `log` the connection lost (`CoreEngine.recover`
   * says where they start), then the live events held but those the log
   * brought (the same id: an event is delivered once); the number from
   * the log. Under no await: no live event can come between.
   */
  #deliverGap(session, log) {
    const { driver, logger } = this.#host;
    const from = log.length > 0 ? driver.gap(session._tag, log) : undefined;
    const events = from === undefined || from < 0 ? [] : log.slice(from);
    const ids = new Set(events.map((e) => e.id));
    session._releaseHeld(
      events.map((e) => [e, JSON.stringify(e).length]),
      session._held.flatMap((e, i) => (typeof e?.id === "string" && ids.has(e.id) ? [i] : [])),
    );
    if (events.length > 0) logger.info?.(`recovery: session ${session.id}: ${events.length} events of the gap read back from its log`);
    return events.length;
  }

  /**
   * The log of `session` read backward (`POLICY.recovery.eventLog`, durable
   * events only), a page at a time, until it reaches the last event
   * delivered before the loss (`CoreEngine.recover`): the events read, oldest
   * first, or none when nothing is to be read back or it is not within
   * the pages (the gap is unknown: nothing is delivered twice).
   */
  async #readGap(session) {
    const { driver, timeoutMs, logger } = this.#host;
    const tag = session._tag;
    if (driver.gap(tag, []) === undefined) return [];
    let events = [];
    let cursor;
    for (let page = 0; page < EVENT_LOG.maxPages; page++) {
      const params = { sessionId: session.id, direction: "backward", max: EVENT_LOG.page, includeEphemeral: false };
      if (cursor !== undefined) params.cursor = cursor;
      const read = await driver.request(EVENT_LOG.method, params, timeoutMs);
      const got = Array.isArray(read?.events) ? read.events : [];
      events = [...got, ...events];
      if (driver.gap(tag, events) !== -1) return events;
      if (!read?.hasMore || got.length === 0) break;
      cursor = read.cursor;
    }
    logger.warn?.(
      `recovery: session ${session.id}: the last event delivered is not in the last ${events.length} of its log; events of the gap, if any, are not delivered`,
    );
    return [];
  }

  /** The resume of one session and what follows it; false if the CLI refused it. */
  async #reopenSession(session, config, kinds, patch) {
    const { driver, timeoutMs } = this.#host;
    const tag = session._tag;
    const options = sessionParams(config, session.id, true, POLICY.options, POLICY.config);
    const params = JSON.parse(driver.openParams(JSON.stringify(options), kinds.join(",")));
    params[RESUME_FLAG] = true;
    driver.reserve(session.id, tag, true);
    let refused;
    const onResponse = (item) => {
      const ok = "result" in item;
      const opened = driver.completeOpen(tag, ok, ok ? JSON.stringify(item.result ?? null) : String(item.message));
      if (opened.opened) session._answered(item.result);
      else refused = opened.error;
      driver.routeItems(opened.routes);
    };
    try {
      await driver.request("session.resume", sortedMembers(params), timeoutMs, onResponse);
    } catch (e) {
      if (refused === undefined) throw e;
    }
    if (refused !== undefined) {
      this.#host.end(tag, `session.resume failed after the connection was recovered: ${refused}`);
      return false;
    }
    for (const followUp of POLICY.followUps) {
      if (kinds.includes(followUp.handler)) {
        await driver.request(followUp.method, { sessionId: session.id, eventType: followUp.eventType }, timeoutMs);
      }
    }
    await patch?.();
    return true;
  }
}
