// The client over streams of the caller's (`CopilotClient.fromStreams`),
// both Node streams and WHATWG streams, against an in-process peer that
// sends exactly what a test needs: server requests for unknown sessions,
// unknown methods, malformed messages, waiting events without handlers,
// handlers that throw or hang, a dropped connection.

import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { readFileSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { PassThrough } from "node:stream";
import { describe, test } from "node:test";
import { fileURLToPath } from "node:url";

import {
  ConfigError,
  CopilotClient,
  DisconnectedError,
  ProtocolVersionError,
  TimeoutError,
} from "copilot-wasm";

import { Peer, collectUntil, eventually } from "./helpers.mjs";

/** A connected pair: `{ client, peer, close() }` over streams of `kind`. */
async function connected(kind, { peer: peerOptions, client: clientOptions } = {}) {
  let peer, close;
  let client;
  if (kind === "node") {
    const toClient = new PassThrough();
    const fromClient = new PassThrough();
    let closed = false;
    peer = new Peer((bytes) => closed || toClient.write(bytes), peerOptions);
    fromClient.on("data", (b) => peer.receive(b));
    close = () => {
      closed = true;
      toClient.end();
    };
    client = CopilotClient.fromStreams(toClient, fromClient, clientOptions);
  } else {
    const toClient = new TransformStream();
    const fromClient = new TransformStream();
    const writer = toClient.writable.getWriter();
    let closed = false;
    // Node 20's web streams trip an internal assertion on a write after the
    // other side cancelled: the peer stops writing once it closed.
    peer = new Peer((bytes) => closed || writer.write(bytes).catch(() => {}), peerOptions);
    (async () => {
      for await (const chunk of fromClient.readable) peer.receive(chunk);
    })().catch(() => {});
    close = () => {
      closed = true;
      writer.close().catch(() => {});
    };
    client = CopilotClient.fromStreams(toClient.readable, fromClient.writable, clientOptions);
  }
  return { client: await client, peer, close };
}

const sessionEvent = (sessionId, type, data, id) => ({
  jsonrpc: "2.0",
  method: "session.event",
  params: { sessionId, event: { type, data, id: id ?? `${type}-${Math.random()}`, timestamp: "t", parentId: null } },
});

/** Answers session.create / destroy / send like the CLI; `beforeCreate` runs first. */
function cliLike({ beforeCreate } = {}) {
  let peer;
  const answer = (m) => {
    switch (m.method) {
      case "session.create":
        beforeCreate?.(peer, m);
        return { sessionId: m.params.sessionId ?? "server-named", workspacePath: "/w" };
      case "session.destroy":
        peer.send(sessionEvent(m.params.sessionId, "session.shutdown", {}));
        return { success: true };
      case "session.send":
        setTimeout(() => {
          peer.send(sessionEvent(m.params.sessionId, "assistant.message", { content: `echo ${m.params.prompt}` }));
          peer.send(sessionEvent(m.params.sessionId, "session.idle", {}));
        }, 1);
        return { messageId: "m1" };
      default:
        return m.method.startsWith("session.") ? { success: true } : undefined;
    }
  };
  return {
    answer,
    bind(p) {
      peer = p;
    },
  };
}

async function withCli(kind, sessionConfig, { beforeCreate, clientOptions } = {}) {
  const cli = cliLike({ beforeCreate });
  const pair = await connected(kind, { peer: { answer: cli.answer }, client: clientOptions });
  cli.bind(pair.peer);
  const session = await pair.client.createSession({ model: "m", ...sessionConfig });
  return { ...pair, session };
}

const errorAnswer = (peer, id) => peer.waitFor((m) => m.id === id && (m.error || m.result));

for (const kind of ["node", "whatwg"]) {
  describe(`over ${kind} streams`, () => {
    test("handshake: connect carries the token; a legacy server is reached through ping", async () => {
      const { client, peer } = await connected(kind, { client: { token: "t0k" } });
      const connect = peer.received.find((m) => m.method === "connect");
      assert.deepEqual(connect.params, { supportedTaskKinds: [], token: "t0k" });
      assert.deepEqual(client.serverInfo, { protocolVersion: 3, version: "peer" });
      await client.stop();

      const legacy = await connected(kind, { peer: { legacy: true } });
      assert.ok(legacy.peer.received.some((m) => m.method === "ping"));
      await legacy.client.stop();

      await assert.rejects(connected(kind, { peer: { protocolVersion: 4 } }), ProtocolVersionError);
    });

    test("the session id is reserved before session.create: racing events and requests reach it", async () => {
      const asked = [];
      const { client, peer, session } = await withCli(
        kind,
        { onUserInput: (q) => (asked.push(q.question), "blue") },
        {
          beforeCreate: (p, m) => {
            p.send(sessionEvent(m.params.sessionId, "session.info", { n: 0 }, "early-0"));
            p.send({
              jsonrpc: "2.0",
              id: 41,
              method: "userInput.request",
              params: { sessionId: m.params.sessionId, question: "Colour?" },
            });
          },
        },
      );
      const create = peer.received.find((m) => m.method === "session.create");
      assert.equal(create.params.sessionId, session.id);
      assert.equal(create.params.requestUserInput, true);
      assert.equal(create.params.streaming, false);
      const answer = await errorAnswer(peer, 41);
      assert.deepEqual(answer.result, { answer: "blue", wasFreeform: true });
      assert.deepEqual(asked, ["Colour?"]);
      const [early] = await collectUntil(session.events(), () => true);
      assert.equal(early.id, "early-0", "the first subscriber gets what came before it");
      assert.equal(session.workspacePath, "/w");
      assert.equal(client.stats().unknownSession, 0);
      await client.stop();
    });

    test("server requests are answered or refused: unknown sessions, unknown methods, malformed messages", async () => {
      const { client, peer, session } = await withCli(kind, {});
      const sid = session.id;
      // The engine's answer table decides every answer here.
      const cases = [
        [{ id: 1, method: "userInput.request", params: { sessionId: "nobody" } }, { code: -32603, message: /the user is not available/ }],
        [{ id: "s-2", method: "no.such.method", params: {} }, { code: -32601, message: /method not found/ }],
        [{ id: 3, method: "no.such.method", params: { sessionId: sid } }, { code: -32601 }],
        [{ id: 4, method: "userInput.request", params: { sessionId: sid, question: "?" } }, { code: -32603, message: /the user is not available/ }],
        [{ id: 5, method: "exitPlanMode.request", params: { sessionId: sid } }, { result: { approved: false } }],
        [{ id: 6, method: "autoModeSwitch.request", params: { sessionId: sid } }, { result: { response: "no" } }],
        [{ id: 7, method: 5 }, { code: -32600 }],
      ];
      for (const [message, expected] of cases) {
        peer.send({ jsonrpc: "2.0", ...message });
        const answer = await errorAnswer(peer, message.id);
        if (expected.result) assert.deepEqual(answer.result, expected.result);
        else {
          assert.equal(answer.error?.code, expected.code, JSON.stringify(answer));
          if (expected.message) assert.match(answer.error.message, expected.message);
        }
      }
      // An id only the core can echo exactly: 1e400 (no JS number holds it).
      peer.send('{"jsonrpc":"2.0","id":1e400,"method":"x.y","params":{"sessionId":"nobody"}}');
      await eventually(() => client.stats().unknownSession >= 2, "the unknown session to be counted");
      const stats = client.stats();
      assert.ok(stats.malformed >= 1, JSON.stringify(stats));
      await client.stop();
    });

    test("waiting events are settled once: no handler (left to another client, or refused), a throwing handler, a failing tool", async () => {
      let prompts = 0;
      const { client, peer, session } = await withCli(kind, {
        onPermission: () => {
          prompts++;
          if (prompts === 1) throw new Error("boom");
          if (prompts === 2) return "approve-once";
          return undefined; // no decision
        },
        tools: [
          { name: "fails", description: "", parameters: {}, handler: () => Promise.reject(new Error("it broke")) },
          { name: "object", description: "", parameters: {}, handler: (args) => ({ echoed: args }) },
          { name: "full", skipPermission: true, handler: () => ({ textResultForLlm: "x", resultType: "denied" }) },
        ],
      });
      const sid = session.id;
      const create = peer.received.find((m) => m.method === "session.create");
      assert.equal(create.params.requestPermission, true);
      assert.deepEqual(
        create.params.tools.map((t) => [t.name, t.skipPermission ?? false]),
        [
          ["fails", false],
          ["object", false],
          ["full", true],
        ],
      );
      const answered = (method, requestId) =>
        peer.waitFor((m) => m.method === method && m.params.requestId === requestId).then((m) => m.params);
      const perm = "session.permissions.handlePendingPermissionRequest";
      const tool = "session.tools.handlePendingToolCall";
      for (const r of ["p1", "p2", "p3"]) peer.send(sessionEvent(sid, "permission.requested", { requestId: r, permissionRequest: { kind: "shell" } }));
      assert.deepEqual((await answered(perm, "p1")).result, { kind: "user-not-available" });
      assert.deepEqual((await answered(perm, "p2")).result, { kind: "approve-once" });
      assert.deepEqual((await answered(perm, "p3")).result, { kind: "user-not-available" });
      peer.send(sessionEvent(sid, "permission.requested", { requestId: "hook", resolvedByHook: true, permissionRequest: {} }));

      const call = (requestId, toolName, args) =>
        peer.send(sessionEvent(sid, "external_tool.requested", { requestId, toolCallId: `c-${requestId}`, toolName, arguments: args }));
      call("t1", "fails", {});
      call("t2", "object", { a: 1 });
      call("t3", "missing", {});
      call("t4", "full", {});
      // A tool that throws: its error goes as the call's `error`, no result.
      const failed = await answered(tool, "t1");
      assert.equal(failed.error, "it broke");
      assert.equal(failed.result, undefined);
      assert.deepEqual((await answered(tool, "t2")).result, { textResultForLlm: '{"echoed":{"a":1}}', resultType: "success" });
      assert.deepEqual((await answered(tool, "t4")).result, { textResultForLlm: "x", resultType: "denied" });

      peer.send(sessionEvent(sid, "elicitation.requested", { requestId: "e1", message: "?" }));
      peer.send(sessionEvent(sid, "command.execute", { requestId: "c1", commandName: "deploy" }));
      peer.send(sessionEvent(sid, "mcp.oauth_required", { requestId: "o1", serverName: "docs", serverUrl: "https://docs.example" }));
      // A command goes to the client that registered it: refused.
      assert.equal((await answered("session.commands.handlePendingCommand", "c1")).error, "This client has no handler for this command.");
      // A tool, an elicitation and an MCP OAuth request without a handler
      // are left to another client of the session: nothing is sent.
      await eventually(() => client.stats().declined === 3, "the missing tool, elicitation and OAuth left");
      for (const id of ["t3", "e1", "o1"]) {
        assert.equal(peer.received.filter((m) => m.params?.requestId === id).length, 0, `nothing for ${id}`);
      }
      assert.equal(peer.received.filter((m) => m.params?.requestId === "hook").length, 0, "resolved by a hook: no answer");
      assert.equal(prompts, 3);
      await client.stop();
    });

    test("a handler that hangs holds up nothing else", async () => {
      const { client, peer, session } = await withCli(kind, {
        onPermission: () => new Promise(() => {}), // a person who never answers
      });
      peer.send(sessionEvent(session.id, "permission.requested", { requestId: "stuck", permissionRequest: { kind: "shell" } }));
      const reply = await session.sendAndWait("hi", { timeoutMs: 5000 });
      assert.equal(reply.content, "echo hi");
      assert.equal((await client.ping()).protocolVersion, 3);
      client.forceStop();
    });

    test("subscriptions: the first gets earlier events, later ones do not; unsubscribe stops delivery", async () => {
      const { client, peer, session } = await withCli(kind, {});
      for (let n = 0; n < 3; n++) peer.send(sessionEvent(session.id, "session.info", { n }, `before-${n}`));
      await peer.waitFor(() => false, 50).catch(() => {});
      const first = [];
      const second = [];
      const off = session.on((e) => first.push(e.id));
      session.on("session.info", (e) => second.push(e.id));
      peer.send(sessionEvent(session.id, "session.info", { n: 3 }, "after-0"));
      await eventually(() => second.length === 1, "the later event");
      assert.deepEqual(first, ["before-0", "before-1", "before-2", "after-0"]);
      assert.deepEqual(second, ["after-0"]);
      off();
      peer.send(sessionEvent(session.id, "session.info", { n: 4 }, "after-1"));
      await eventually(() => second.length === 2, "the next event");
      assert.equal(first.length, 4);
      await client.stop();
    });

    test("a timed-out call is forgotten; its late answer is reported, not delivered", async () => {
      const { client, peer } = await connected(kind);
      await assert.rejects(client.call("slow.method", {}, { timeoutMs: 20 }), TimeoutError);
      const request = await peer.waitFor((m) => m.method === "slow.method");
      peer.send({ jsonrpc: "2.0", id: request.id, result: {} });
      await eventually(() => client.stats().unmatchedResponses === 1, "the unmatched answer");
      await client.stop();
    });

    test("a config that cannot work, or has a key no session takes, is refused", async () => {
      const { client } = await connected(kind);
      await assert.rejects(client.createSession({ tools: [{ name: "t" }] }), ConfigError);
      // Unknown keys are refused, not dropped: a misspelt option would
      // otherwise do nothing, silently.
      await assert.rejects(client.createSession({ extra: { requestPermission: true } }), {
        name: "TypeError",
        message: /unknown session config key "extra"/,
      });
      await assert.rejects(client.createSession({ model: "m", excludeTools: ["bash"] }), {
        name: "TypeError",
        message: /"excludeTools"/,
      });
      await assert.rejects(client.createSession({ continuePendingWork: true }), {
        name: "TypeError",
        message: /continuePendingWork is an option of resumeSession/,
      });
      await assert.rejects(client.resumeSession("s", { sessionId: "x" }), {
        name: "TypeError",
        message: /sessionId is an option of createSession/,
      });
      await client.stop();
    });

    test("on disconnect every pending call rejects and every stream ends", async () => {
      const { client, peer, session, close } = await withCli(kind, {});
      const events = session.events();
      const pending = client.call("never.answered");
      await peer.waitFor((m) => m.method === "never.answered");
      const turn = session.sendAndWait("hi").catch((e) => e); // answered, never idle: see below
      close();
      await assert.rejects(pending, DisconnectedError);
      const turnError = await turn;
      assert.ok(turnError instanceof DisconnectedError || turnError?.content === "echo hi", `${turnError}`);
      for await (const e of events) assert.ok(e.type); // ends
      await assert.rejects(client.createSession({}), DisconnectedError);
      await assert.rejects(session.sendAndWait("again"), DisconnectedError);
      assert.equal(client.closed, true);
      await client.stop();
    });

    test("a server-assigned id: frames are parked until the answer names the session", async () => {
      const { client, peer } = await connected(kind, {
        peer: {
          answer: (m) => {
            if (m.method === "session.destroy") return { success: true };
            if (m.method !== "session.create") return undefined;
            assert.equal(m.params.sessionId, undefined);
            for (let n = 0; n < 3; n++) peer.send(sessionEvent("srv-1", "session.info", { n }, `p${n}`));
            return { sessionId: "srv-1" };
          },
        },
      });
      const session = await client.createSession({ serverAssignedId: true });
      assert.equal(session.id, "srv-1");
      const got = await collectUntil(session.events(), (e) => e.id === "p2");
      assert.deepEqual(
        got.map((e) => e.id),
        ["p0", "p1", "p2"],
      );
      assert.equal(client.stats().parked, 3);
      await client.stop();
    });
  });
}

test("the browser entry point runs over WHATWG streams and imports nothing of Node", () => {
  const child = spawnSync(process.execPath, [fileURLToPath(new URL("browser-child.mjs", import.meta.url)), "run"], {
    encoding: "utf8",
  });
  assert.equal(child.status, 0, `${child.stdout}\n${child.stderr}`);
  assert.match(child.stdout, /browser entry ok/);
  // Every module of the client but the Node entry (node.js), and the glue.
  const pkg = fileURLToPath(import.meta.resolve("copilot-wasm/package.json")).replace(/package\.json$/, "");
  const modules = readdirSync(join(pkg, "src"), { recursive: true })
    .filter((f) => f.endsWith(".js") && f !== "node.js")
    .map((f) => `src/${f}`);
  assert.ok(modules.includes("src/index.js") && modules.includes("src/client.js"), modules.join(", "));
  for (const file of [...modules, "dist/copilot_wasm.js"]) {
    const text = readFileSync(join(pkg, file), "utf8");
    assert.doesNotMatch(text, /from\s+["']node:|require\(/, `${file} must run in a browser`);
  }
});

test("the tests run against the installed package (npm run test:packed) or the sources (npm test)", () => {
  const resolved = fileURLToPath(import.meta.resolve("copilot-wasm"));
  const expected = process.env.COPILOT_WASM_PACKED ? /node_modules[\\/]copilot-wasm[\\/]src[\\/]node\.js$/ : /src[\\/]node\.js$/;
  assert.match(resolved, expected);
});
