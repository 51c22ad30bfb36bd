// The JavaScript half of tests/tests/same_bytes.rs: the package's client
// (from its sources) runs the same scenario as the Rust half against the
// fake CLI, which writes what the client sent to a file.
//
//   node same_bytes.mjs FAKE_CLI RECORD_FILE
//
// Start the fake (stdio), open a session with a permission handler, a tool
// whose handler throws, an MCP OAuth handler, an elicitation handler that
// accepts without content and a pre-tool-use hook that denies; run the
// turn `obligations:failing_tool` (the fake raises one wait of each kind
// and ends the turn when all are answered); stop the client.

import { CopilotClient, approveAll } from "../../wasm/npm/src/node.js";

const [fakeCli, record] = process.argv.slice(2);
const client = await CopilotClient.start({ cliPath: fakeCli, transport: "stdio", args: ["--record", record] });
try {
  const session = await client.createSession({
    onPermission: approveAll,
    onElicitation: () => ({ action: "accept" }),
    onMcpOAuth: () => null,
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
    hooks: {
      onPreToolUse: () => ({ permissionDecision: "deny", permissionDecisionReason: "not in this test" }),
    },
  });
  await session.sendAndWait("obligations:failing_tool", { timeoutMs: 30_000 });
  await client.stop();
} finally {
  client.forceStop();
}
