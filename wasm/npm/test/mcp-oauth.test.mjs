// An MCP server behind OAuth, against the real Copilot CLI 1.0.102 on the
// scripted model (its server `mcpOAuth.path`: 401 without the token): the
// case of the Rust crate's tests/tests/mcp_oauth.rs. The session's
// onMcpOAuth handler is asked once, with the server's name and URL, and
// its token reaches the server: the model is offered the server's tool.

import assert from "node:assert/strict";
import { test } from "node:test";

import { MODEL, startRealCli } from "./helpers.mjs";

const SERVER = "oauthsrv";

test("the onMcpOAuth handler is asked once and its token reaches the MCP server", { timeout: 180_000 }, async () => {
  const { model, client, workDir, stop } = await startRealCli("copilot-wasm-mcp-oauth");
  try {
    const { path, token, tool } = model.mcpOAuth;
    const serverUrl = `${model.url}${path}`;
    const asked = [];
    const session = await client.createSession({
      model: MODEL,
      workingDirectory: workDir("oauth"),
      mcpServers: { [SERVER]: { type: "http", url: serverUrl } },
      onMcpOAuth: (request) => {
        asked.push([request.serverName, request.serverUrl]);
        return { accessToken: token };
      },
    });
    // The CLI connects the server beside the first turn, once the handler
    // has given the token: the second turn waits until the CLI says the
    // server's tools are loaded, so what the model is offered then does not
    // depend on which came first (on a loaded machine the connection could
    // still be under way after a second turn).
    let unsubscribe;
    const loaded = new Promise((resolve) => {
      unsubscribe = session.on("session.mcp_server_tools_loaded", (event) => {
        if (event.data.serverName === SERVER) resolve();
      });
    });
    await model.script(session.id, [{ text: "Hello." }, { text: "Again." }]);
    await session.sendAndWait("Hi", { timeoutMs: 90_000 });
    await loaded;
    unsubscribe();
    await session.sendAndWait("Hi again", { timeoutMs: 90_000 });
    assert.deepEqual(asked, [[SERVER, serverUrl]], "asked once, with the server's name and URL");
    const requests = (await model.requests()).filter((r) => r.sessionId === session.id);
    assert.ok(requests.at(-1).toolNames.includes(`${SERVER}-${tool}`), `${requests.at(-1).toolNames}`);
    await session.destroy();
  } finally {
    await stop();
  }
});
