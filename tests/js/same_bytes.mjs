// The JavaScript half of tests/tests/same_bytes.rs: the package's client
// (from its sources) runs the same scenario as the Rust half against the
// fake CLI, which writes what the client sent to a file.
//
//   node same_bytes.mjs FAKE_CLI SCENARIO TRANSPORT FAKE_ARGS...
//
// Starts the fake over TRANSPORT (stdio or tcp) with FAKE_ARGS (among them
// `--record FILE`). The scenario `start-stop` stops at once; `obligations`
// opens a session with a permission handler, a tool
// whose handler throws, an MCP OAuth handler that gives a token, an
// elicitation handler that accepts without content, user input and
// exit-plan-mode handlers, a section transform, a BYOK provider with a
// token callback, three canvases, a local and a remote MCP server (no `type`: the core's
// inference) and a pre-tool-use hook that denies, runs the
// turn `obligations:failing_tool` (the fake raises one wait of each kind
// and ends the turn when all are answered), then stops. The mode scenarios
// (`empty-mode`, `empty-mode-fails`, `default-mode`) open the sessions the
// Rust half's `run_rust_modes` opens, with the state folder
// `SAME_BYTES_HOME`, print the open's error (if any) and stop.

import { CanvasError, CopilotClient, approveAll } from "../../wasm/npm/src/node.js";

const [fakeCli, scenario, transport, ...args] = process.argv.slice(2);
const empty = scenario.startsWith("empty-mode");
const modeOptions = empty ? { mode: "empty", baseDirectory: process.env.SAME_BYTES_HOME } : {};
const client = await CopilotClient.start({ cliPath: fakeCli, transport, args, ...modeOptions });
try {
  if (scenario === "obligations") await obligations();
  if (scenario.endsWith("-mode") || scenario.endsWith("-fails")) await modes();
  await client.stop();
} finally {
  client.forceStop();
}

async function obligations() {
  const session = await client.createSession({
    onPermission: approveAll,
    onElicitation: () => ({ action: "accept" }),
    onMcpOAuth: () => ({ accessToken: "tok", tokenType: "Bearer", expiresIn: 60 }),
    onUserInput: () => ({ answer: "a", wasFreeform: false }),
    onExitPlanMode: () => ({ approved: true, selectedAction: "interactive" }),
    systemMessage: { mode: "customize", sections: { tone: { action: (text) => text.toUpperCase() } } },
    provider: { baseUrl: "http://127.0.0.1:9/v1", bearerTokenProvider: () => "bearer-1" },
    mcpServers: { local: { command: "mcp-server", args: ["--x"] }, remote: { url: "https://mcp.example/" } },
    tools: [
      {
        name: "failing_tool",
        description: "Always fails.",
        parameters: { type: "object" },
        handler: () => {
          throw new Error("the tool broke");
        },
      },
    ],
    // Results with their members in name order, as the Rust host writes a
    // serde_json value: a user's value, not a rule of the core.
    canvases: [
      {
        id: "counter",
        displayName: "Counter",
        description: "Counts.",
        open: () => ({ title: "Count", url: "https://example.test/c1" }),
        onClose: () => {},
        actions: [
          { name: "increment", handler: () => ({ count: 5 }) },
          {
            name: "explode",
            handler: () => {
              throw new CanvasError("counter_broke", 'the counter "broke"');
            },
          },
          { name: "missing" },
        ],
      },
      { id: "quiet", displayName: "Quiet", description: "Says nothing.", open: () => {} },
      {
        id: "broken",
        displayName: "Broken",
        description: "Never opens.",
        open: () => {
          throw new Error("this canvas is broken");
        },
      },
    ],
    hooks: {
      onPreToolUse: () => ({ permissionDecision: "deny", permissionDecisionReason: "not in this test" }),
    },
  });
  await session.sendAndWait("obligations:failing_tool", { timeoutMs: 30_000 });
}

async function modes() {
  const largeOutput = { enabled: true, maxSizeBytes: 1000, outputDirectory: "/tmp/copilot-large-output" };
  const [first, second] = empty
    ? [
        {
          sessionId: "empty-1",
          availableTools: ["custom:*"],
          enableSkills: true,
          memory: { enabled: true },
          systemMessage: { content: "Be brief." },
          largeOutput,
          coauthorEnabled: true,
          skipCustomInstructions: false,
        },
        { sessionId: "empty-2", availableTools: [], systemMessage: { mode: "customize", sections: { tone: { action: "remove" } } } },
      ]
    : [{ sessionId: "cli-1", coauthorEnabled: false, largeOutput }, { sessionId: "cli-2" }];
  try {
    await client.createSession(first);
    await client.createSession(second);
  } catch (e) {
    console.log(e.message);
  }
}
