// Recovery of a lost connection: the CLI this client started exited, or
// the connection to a CLI server dropped, while the client did not end it.
// The core sequences it (copilot_core's `Recovery`, through
// `Driver.recoverStep`): when to try again and how often, which session to
// resume and in what order, how far back to read its log, what to deliver
// from it, when to give up. This file does each step the core gives: waits,
// makes the connection again (the transport kind's `reconnect`, see below)
// and runs the handshake, resumes a session with the options it was opened
// with and `POLICY.recovery.resumeFlag` (its live events held), reads a
// page of its log, delivers the events of the gap, ends a session whose
// resume the CLI refused; then reports how it went. Each step is told to
// the `onRecovery` listeners and the log; when the core gives up, the
// connection ends with the cause.
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
import { CopilotError, RpcError, errorText } from "./errors.js";

const { resumeFlag: RESUME_FLAG, eventLog: EVENT_LOG, refused: REFUSED, gaveUp: GAVE_UP, gaps: GAPS } = POLICY.recovery;

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
    const { kind, run } = host.reconnect;
    const { driver } = host;
    this.#tell({ type: "connectionLost", cause, kind });
    driver.lose(cause);
    // What the steps carry from one to the next: the attempt, the last
    // failure, and the session being resumed with its log read so far.
    const at = { attempt: 0, last: cause, current: null, log: [], cursor: undefined };
    const failed = (e) => {
      // The session being resumed keeps what it held: the next attempt
      // delivers it after the gap, which the core has read back again
      // from where it started (each event once, by id). The end of the
      // client (gave up, stopped) delivers what is still held.
      at.current = null;
      if (host.stopping()) return null;
      this.#tell({ type: "attemptFailed", attempt: at.attempt, error: errorText(e) });
      driver.lose(errorText(e));
      at.last = `attempt ${at.attempt}: ${errorText(e)}`;
      return "failed";
    };
    let report = "next";
    let events = [];
    while (report !== null) {
      const [step, a, b, c] = driver.recoverStep(report, events);
      events = [];
      if (step === "wait") {
        await this.#pause(a - performance.now());
        report = host.stopping() ? null : "next";
      } else if (step === "connect") {
        at.attempt = a;
        this.#tell({ type: "restarting", attempt: a, afterMs: b });
        try {
          await run((transport, replaced) => this.#reopen(transport, replaced));
          report = "connected";
        } catch (e) {
          report = failed(e);
        }
      } else if (step === "resume") {
        try {
          report = await this.#resume(a, at);
        } catch (e) {
          report = failed(e);
        }
      } else if (step === "readLog") {
        try {
          const more = await this.#readLog(b, at);
          report = more ? "logMore" : "log";
          events = at.log;
        } catch (e) {
          report = failed(e);
        }
      } else if (step === "deliver") {
        this.#deliverGap(at, b, GAPS[c]);
        report = "next";
      } else if (step === "end") {
        at.current?.session._releaseHeld();
        host.end(a, `${REFUSED}${at.current?.refused ?? ""}`);
        at.current = null;
        report = "next";
      } else if (step === "recovered") {
        this.#tell({ type: "recovered", sessions: a, tookMs: b });
        return;
      } else {
        const reason = `${GAVE_UP[0]}${a}${GAVE_UP[1]}${at.last}`;
        this.#tell({ type: "gaveUp", cause: reason });
        host.shutDown(reason);
        return;
      }
    }
  }

  /** Waits `ms`, or less when the client stops meanwhile. */
  async #pause(ms) {
    await new Promise((resolve) => {
      const timer = setTimeout(resolve, Math.max(0, ms));
      this.#wake = () => (clearTimeout(timer), resolve());
    });
    this.#wake = null;
  }

  /**
   * On a new connection: the handshake (and what follows every one).
   */
  async #reopen(transport, replaced = {}) {
    const host = this.#host;
    if (host.stopping()) throw new CopilotError("the client is stopping");
    host.replaced(replaced);
    host.driver.attach(transport, (reason) => host.onEnd(reason));
    await host.handshake();
  }

  /**
   * Resumes the session of `tag` under its own id with the options it was
   * opened with, its live events held, then sends what follows an open:
   * the report for the core (`"resumed"`, `"refused"`: the CLI's error
   * answer, kept in `at.current` for its end, or `"skipped"`: not opened
   * by this client).
   */
  async #resume(tag, at) {
    const host = this.#host;
    const found = host.sessions().find(({ session }) => session._tag === tag);
    if (found === undefined) return "skipped";
    const { session, config, kinds, patch } = found;
    const { driver, timeoutMs } = host;
    at.current = { session, refused: undefined };
    session._hold();
    const options = sessionParams(config, session.id, true, POLICY.options, POLICY.config);
    const params = JSON.parse(driver.openParams(JSON.stringify(options), kinds.join(",")));
    params[RESUME_FLAG] = true;
    try {
      session._answered(await driver.request("session.resume", sortedMembers(params), timeoutMs));
    } catch (e) {
      if (!(e instanceof RpcError)) throw e;
      at.current.refused = e.rpcMessage;
      return "refused";
    }
    for (const followUp of POLICY.followUps) {
      if (kinds.includes(followUp.handler)) {
        await driver.request(followUp.method, { sessionId: session.id, eventType: followUp.eventType }, timeoutMs);
      }
    }
    await patch?.();
    return "resumed";
  }

  /**
   * Reads page `page` of the log of the session being resumed, backward
   * and durable events only (`POLICY.recovery.eventLog`; from page 1 on,
   * from the cursor of the page before), and puts its events before those
   * read so far: whether the CLI has more further back.
   */
  async #readLog(page, at) {
    const { driver, timeoutMs } = this.#host;
    if (page === 0) {
      at.log = [];
      at.cursor = undefined;
    }
    const params = { sessionId: at.current.session.id, direction: "backward", max: EVENT_LOG.page, includeEphemeral: false };
    if (at.cursor !== undefined) params.cursor = at.cursor;
    const read = await driver.request(EVENT_LOG.method, params, timeoutMs);
    const got = Array.isArray(read?.events) ? read.events : [];
    at.log = [...got, ...at.log];
    at.cursor = read?.cursor;
    return Boolean(read?.hasMore) && got.length > 0;
  }

  /**
   * Delivers the events of the log from index `from` on (none if `-1`),
   * then the live events held but those the log brought (the same id: an
   * event is delivered once). Under no await: no live event can come
   * between.
   */
  #deliverGap(at, from, gap) {
    const { logger } = this.#host;
    const { session } = at.current;
    const log = at.log;
    at.log = [];
    at.current = null;
    if (gap === "cut") {
      logger.warn?.(
        `recovery: session ${session.id}: the last event delivered is not in the last ${log.length} of its log; events of the gap, if any, are not delivered`,
      );
    } else if (gap === "unmarked") {
      logger.warn?.(
        `recovery: session ${session.id}: no durable event had been delivered before the loss; events of the gap, if any, are not delivered`,
      );
    }
    const events = from < 0 ? [] : log.slice(from);
    const ids = new Set(events.map((e) => e.id));
    session._releaseHeld(
      events.map((e) => [e, JSON.stringify(e).length]),
      session._held.flatMap((e, i) => (typeof e?.id === "string" && ids.has(e.id) ? [i] : [])),
    );
    if (events.length > 0) logger.info?.(`recovery: session ${session.id}: ${events.length} events of the gap read back from its log`);
    this.#tell({ type: "sessionResumed", sessionId: session.id, gapEvents: events.length, gap });
  }
}
