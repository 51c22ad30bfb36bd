// An in-page fake Copilot CLI: just enough of the protocol for one turn
// with a client tool call. It talks Content-Length frames over WHATWG
// streams, like the real CLI does over stdio. Test code: it checks what the
// client sends and scripts what a real CLI would answer.

const encoder = new TextEncoder();
const decoder = new TextDecoder();

export class FakeCli {
  constructor(write) {
    this.write = write;
    this.buffer = new Uint8Array(0);
    this.received = [];
    this.waiters = new Map();
  }

  send(message) {
    const body = encoder.encode(JSON.stringify({ jsonrpc: "2.0", ...message }));
    const header = encoder.encode(`Content-Length: ${body.length}\r\n\r\n`);
    const frame = new Uint8Array(header.length + body.length);
    frame.set(header);
    frame.set(body, header.length);
    return this.write(frame);
  }

  event(sessionId, type, data, extra = {}) {
    const id = crypto.randomUUID();
    return this.send({ method: "session.event", params: { sessionId, event: { type, data, id, timestamp: new Date().toISOString(), parentId: null, ...extra } } });
  }

  /** Resolves with the next client message of `method`. */
  next(method) {
    const seen = this.received.find((m) => m.method === method && !m.taken);
    if (seen) {
      seen.taken = true;
      return Promise.resolve(seen);
    }
    return new Promise((resolve) => this.waiters.set(method, resolve));
  }

  receive(chunk) {
    const joined = new Uint8Array(this.buffer.length + chunk.length);
    joined.set(this.buffer);
    joined.set(chunk, this.buffer.length);
    this.buffer = joined;
    for (;;) {
      const text = decoder.decode(this.buffer.subarray(0, Math.min(this.buffer.length, 64)));
      const end = text.indexOf("\r\n\r\n");
      if (end < 0) return;
      const length = Number(/Content-Length: (\d+)/i.exec(text)[1]);
      if (this.buffer.length < end + 4 + length) return;
      const message = JSON.parse(decoder.decode(this.buffer.subarray(end + 4, end + 4 + length)));
      this.buffer = this.buffer.slice(end + 4 + length);
      this.handle(message);
    }
  }

  async handle(m) {
    this.received.push(m);
    const waiter = this.waiters.get(m.method);
    if (waiter) {
      this.waiters.delete(m.method);
      m.taken = true;
      waiter(m);
    }
    switch (m.method) {
      case "connect":
        return this.send({ id: m.id, result: { ok: true, protocolVersion: 3, version: "in-page", taskKinds: [] } });
      case "session.create": {
        const sessionId = m.params.sessionId;
        // An event before the answer: the client must not lose it.
        await this.event(sessionId, "session.info", { message: "before the answer" });
        await this.send({ id: m.id, result: { sessionId, workspacePath: "/in-page" } });
        return this.event(sessionId, "session.start", { sessionId, version: 1, producer: "fake", copilotVersion: "in-page", startTime: new Date().toISOString() });
      }
      case "session.send":
        await this.send({ id: m.id, result: { messageId: "m-1" } });
        return this.turn(m.params.sessionId, m.params.prompt);
      case "session.tools.handlePendingToolCall":
      case "session.permissions.handlePendingPermissionRequest":
      case "session.destroy":
        return this.send({ id: m.id, result: { success: true } });
      default:
        if (m.id !== undefined) return this.send({ id: m.id, error: { code: -32601, message: `Unhandled method ${m.method}` } });
    }
  }

  async turn(sessionId, prompt) {
    await this.event(sessionId, "user.message", { content: prompt });
    await this.event(sessionId, "assistant.turn_start", { turnId: "0" });
    await this.event(sessionId, "permission.requested", {
      requestId: "perm-1",
      permissionRequest: { kind: "custom-tool", toolCallId: "call-1", toolName: "get_weather", args: { city: "Paris" } },
    });
    const permission = await this.next("session.permissions.handlePendingPermissionRequest");
    await this.event(sessionId, "permission.completed", { requestId: "perm-1", result: { kind: "approved" } });
    await this.event(sessionId, "external_tool.requested", {
      requestId: "tool-1",
      sessionId,
      toolCallId: "call-1",
      toolName: "get_weather",
      arguments: { city: "Paris" },
    });
    const answer = await this.next("session.tools.handlePendingToolCall");
    const text = answer.params.result.textResultForLlm ?? answer.params.result;
    await this.event(sessionId, "external_tool.completed", { requestId: "tool-1" });
    await this.event(sessionId, "assistant.message", { messageId: "a-1", content: `The tool said: ${text}` });
    await this.event(sessionId, "session.idle", {}, { ephemeral: true });
    this.permissionDecision = permission.params.result;
  }
}
