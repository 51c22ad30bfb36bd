// Recovery of a lost connection: the CLI this client started exited while
// the client did not end it. The steps are the core's (copilot_core's
// recovery module, through policy.json and `CoreEngine.recovering`): the
// engine forgets what the next connection cannot settle and holds its
// frames; after each wait of `POLICY.recovery.backoffMs` in turn, the CLI
// is started again (the Node entry's `restart`), the handshake runs, every
// open session is resumed with the options it was opened with and
// `POLICY.recovery.resumeFlag`, the engine asks the CLI what is pending,
// and the frames held (answers given meanwhile) go out. Each step is told
// to the `onRecovery` listeners and the log; when every attempt failed,
// the connection ends with the cause.

import { POLICY } from "./constants.js";
import { sessionParams, sortedMembers } from "./config.js";
import { CopilotError, errorText } from "./errors.js";

const { backoffMs: BACKOFF_MS, resumeFlag: RESUME_FLAG } = POLICY.recovery;

/**
 * One client's recovery. `host`: `{ driver, logger, timeoutMs, restart,
 * stopping(), setProcess(process), onEnd(reason), handshake(), sessions(),
 * end(tag, reason), shutDown(reason) }`: `restart(reopen)` starts the CLI
 * again and calls `reopen(transport, process)`, which runs the rest on it;
 * `sessions()` gives `{ session, config, kinds, patch }` of every open
 * session (`patch` sends the options the CLI takes once it is open).
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
    return typeof this.#host.restart === "function";
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
    this.#tell({ type: "connectionLost", cause });
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
        const sessions = await host.restart((transport, process) => this.#reopen(transport, process));
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
   * On a new CLI: the handshake, then the resume of every session still
   * open; resolves with the number resumed.
   */
  async #reopen(transport, process) {
    const host = this.#host;
    if (host.stopping()) throw new CopilotError("the client is stopping");
    host.setProcess(process);
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
   * open waits over and, once the CLI answers, asks what is pending. A
   * session the CLI refuses to resume ends with the CLI's error.
   */
  async #resume(session, config, kinds, patch) {
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
    this.#tell({ type: "sessionResumed", sessionId: session.id });
    return true;
  }
}
