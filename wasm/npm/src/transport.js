// Byte streams under the client: WHATWG streams or Node streams, told apart
// by their methods, as one shape the driver reads and writes:
// `{ label, start(onData, onEnd), write(bytes), closeWriter(), stopReading(),
// pause(), resume() }`. (websocket.js makes the same shape over a
// WebSocket, without `pause`: a WebSocket cannot be held back; node.js over
// a child process's pipes and TCP sockets.) `pause` stops reading until
// `resume`, so that the peer's writes wait. Nothing here knows the protocol.

const noop = () => {};

/** A chunk of any stream as bytes. */
function toBytes(chunk) {
  if (chunk instanceof Uint8Array) return chunk;
  if (chunk instanceof ArrayBuffer) return new Uint8Array(chunk);
  if (ArrayBuffer.isView(chunk)) return new Uint8Array(chunk.buffer, chunk.byteOffset, chunk.byteLength);
  if (typeof chunk === "string") return new TextEncoder().encode(chunk);
  throw new TypeError(`cannot read a ${typeof chunk} chunk as bytes`);
}

/**
 * `{ start(onData, onEnd), write(bytes), closeWriter(), stopReading() }`
 * over a readable and a writable of either kind. `owned`: the client made
 * them (a socket), so stopping destroys them.
 */
export function streamTransport(readable, writable, { label = "stream", destroy } = {}) {
  let onEnd = () => {};
  let ended = false;
  const end = (reason) => {
    if (!ended) {
      ended = true;
      onEnd(reason);
    }
  };
  let write, closeWriter, startReading, stopReading, pause, resume;

  if (typeof writable?.getWriter === "function") {
    const writer = writable.getWriter();
    const failed = (e) => end(`write failed: ${e?.message ?? e ?? "the stream was closed"}`);
    write = (bytes) => {
      try {
        writer.write(bytes).catch(failed);
      } catch (e) {
        failed(e);
      }
    };
    closeWriter = () => {
      try {
        writer.close().catch(noop);
      } catch {
        // Closed or errored already.
      }
    };
  } else if (typeof writable?.write === "function") {
    // Errors (EPIPE after the peer left) arrive as events: without a
    // listener they would crash the process.
    writable.on?.("error", (e) => end(`write failed: ${e?.message ?? e}`));
    write = (bytes) => {
      if (writable.destroyed || writable.writableEnded) end("write failed: the stream was closed");
      else writable.write(bytes);
    };
    closeWriter = () => {
      if (!writable.destroyed && !writable.writableEnded) writable.end();
    };
  } else {
    throw new TypeError("fromStreams: the writable is neither a WritableStream nor a Node stream.Writable");
  }

  if (typeof readable?.getReader === "function") {
    const reader = readable.getReader();
    // Set while paused: the read loop waits for it before its next read.
    let held = null;
    let release = noop;
    pause = () => {
      held ??= new Promise((resolve) => {
        release = resolve;
      });
    };
    resume = () => {
      held = null;
      release();
    };
    startReading = (onData) => {
      (async () => {
        for (;;) {
          if (held) await held;
          const { value, done } = await reader.read();
          if (done) return end("the stream ended");
          onData(toBytes(value));
        }
      })().catch((e) => end(ended ? "" : `read failed: ${e?.message ?? e}`));
    };
    stopReading = () => {
      resume();
      try {
        reader.cancel().catch(noop);
      } catch {
        // Released or errored already.
      }
    };
  } else if (typeof readable?.on === "function") {
    let dataListener;
    startReading = (onData) => {
      dataListener = (chunk) => onData(toBytes(chunk));
      readable.on("data", dataListener);
      readable.once("end", () => end("the CLI closed the connection"));
      readable.once("close", () => end("the connection closed"));
      readable.once("error", (e) => end(`read failed: ${e?.message ?? e}`));
    };
    stopReading = () => {
      if (dataListener) readable.off("data", dataListener);
      if (typeof readable.destroy === "function" && !readable.destroyed) readable.destroy();
    };
    pause = () => readable.pause?.();
    resume = () => readable.resume?.();
  } else {
    throw new TypeError("fromStreams: the readable is neither a ReadableStream nor a Node stream.Readable");
  }

  return {
    label,
    start(onData, onEndCallback) {
      onEnd = onEndCallback;
      startReading(onData);
    },
    write,
    closeWriter,
    stopReading() {
      stopReading();
      destroy?.();
    },
    pause,
    resume,
  };
}
