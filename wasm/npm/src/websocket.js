// The WebSocket transport: a CopilotClient over a WebSocket to a
// copilot-bridge (or anything that pipes the socket's bytes to a CLI). The
// token goes as the subprotocol `copilot.token.<TOKEN>`, which browsers can
// send and which stays out of URLs; the bridge must echo it.
//
// Works wherever a WHATWG `WebSocket` exists: browsers, Node 22+, and Node
// 20 with --experimental-websocket (or pass `WebSocket` in the options).

import { CopilotError, TimeoutError } from "./errors.js";

/**
 * Opens a WebSocket to `url` and resolves with a transport for
 * `CopilotClient._handshaken` once it is open. `prefix` is the subprotocol
 * prefix that carries the token: the core's, which the bridge checks
 * (`POLICY.bridgeTokenProtocolPrefix`, given by the client so that this
 * module stays below the policy).
 */
export function webSocketTransport(
  url,
  { token, WebSocket: Impl = globalThis.WebSocket, openTimeoutMs = 30_000 } = {},
  prefix,
) {
  if (typeof Impl !== "function") {
    return Promise.reject(new CopilotError("no WebSocket here: pass one as the WebSocket option"));
  }
  const protocols = token ? [prefix + token] : [];
  let ws;
  try {
    ws = new Impl(url, protocols);
  } catch (e) {
    return Promise.reject(new CopilotError(`cannot open a WebSocket to ${url}: ${e?.message ?? e}`, { cause: e }));
  }
  ws.binaryType = "arraybuffer";
  const label = `websocket ${url}`;

  return new Promise((resolve, reject) => {
    let timer;
    const fail = (error) => {
      clearTimeout(timer);
      ws.onopen = ws.onclose = ws.onerror = null;
      try {
        ws.close();
      } catch {
        // Not open.
      }
      reject(error);
    };
    timer = setTimeout(() => fail(new TimeoutError(`the WebSocket to ${url} did not open within ${openTimeoutMs} ms`)), openTimeoutMs);
    ws.onerror = () => {};
    ws.onclose = (e) =>
      fail(
        new CopilotError(
          `the bridge at ${url} refused the WebSocket (code ${e.code}${e.reason ? `: ${e.reason}` : ""}); ` +
            "check the token and that this page's origin is allowed",
        ),
      );
    ws.onopen = () => {
      clearTimeout(timer);
      if (token && ws.protocol !== protocols[0]) {
        fail(new CopilotError(`the server at ${url} did not accept the token subprotocol`));
        return;
      }
      resolve(transportOf(ws, label));
    };
  });
}

/**
 * `{ start, write, closeWriter, stopReading }` over an open WebSocket. No
 * `pause`: a WebSocket cannot hold its peer back, so a full backlog does
 * not stop reading it.
 */
function transportOf(ws, label) {
  let ended = false;
  let onEnd = () => {};
  const end = (reason) => {
    if (!ended) {
      ended = true;
      onEnd(reason);
    }
  };
  const close = () => {
    try {
      ws.close(1000);
    } catch {
      // Closed already.
    }
  };
  return {
    label,
    start(onData, onEndCallback) {
      onEnd = onEndCallback;
      ws.onmessage = (e) => {
        const d = e.data;
        if (d instanceof ArrayBuffer) onData(new Uint8Array(d));
        else if (typeof d === "string") onData(new TextEncoder().encode(d));
        else if (ArrayBuffer.isView(d)) onData(new Uint8Array(d.buffer, d.byteOffset, d.byteLength));
      };
      ws.onclose = (e) => end(`the WebSocket closed (code ${e.code}${e.reason ? `: ${e.reason}` : ""})`);
      ws.onerror = () => end("the WebSocket failed");
    },
    write(bytes) {
      if (ws.readyState !== 1) {
        end("write failed: the WebSocket is not open");
        return;
      }
      ws.send(bytes);
    },
    closeWriter: close,
    stopReading: close,
  };
}
