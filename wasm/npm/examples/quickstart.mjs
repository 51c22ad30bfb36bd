// One chat turn through the GitHub Copilot CLI, with a tool the model can
// call and that runs here, in JavaScript.
//
//   npm install copilot-wasm @github/copilot
//   node quickstart.mjs "What is the weather in Paris?"
//
// The CLI is found at COPILOT_CLI_PATH or ./node_modules/.bin/copilot and
// uses its own Copilot login (run `npx copilot` once and `/login`).
import { CopilotClient, SessionError } from "copilot-wasm";

const prompt = process.argv[2] ?? "What is the weather in Paris?";
const client = await CopilotClient.start({ transport: "stdio" });
try {
  const session = await client.createSession({
    model: "claude-sonnet-4.5",
    // Asked before a tool runs: allow our own tool, refuse anything else.
    onPermission: (request) =>
      request.kind === "custom-tool" ? { kind: "approve-once" } : { kind: "reject", feedback: "Not in this example." },
    tools: [
      {
        name: "get_weather",
        description: "Get the current weather for a city.",
        parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
        handler: ({ city }) => `Sunny, 22 C in ${city}`,
      },
    ],
  });
  session.on("tool.execution_start", (e) => console.error(`[tool] ${e.data.toolName}`));
  const reply = await session.sendAndWait(prompt, { timeoutMs: 120_000 });
  console.log(reply?.content ?? "(no reply)");
  await session.destroy();
} catch (e) {
  if (!(e instanceof SessionError)) throw e;
  console.error(`Copilot could not answer: ${e.message}`); // no login, for one
  process.exitCode = 2;
} finally {
  await client.stop();
}
