// The Node entry point ("copilot-wasm" under the "node" condition,
// types/node.d.ts) used as the READMEs use it. Checked by `npm run
// typecheck`, never run: each `@ts-expect-error` line is wrong usage the
// declarations must refuse (tsc fails if one is accepted).

import {
  CopilotClient,
  CapabilityError,
  CliExitedError,
  SessionError,
  RpcError,
  approveAll,
  CanvasError,
  createCanvas,
  withDecisionContext,
  genericRequestNames,
  loadWasm,
  PROTOCOL_VERSION,
  MAX_BACKLOG_BYTES,
  BACKLOG_STALL_MS,
  type BacklogStats,
  ToolSet,
  BuiltInTools,
  type PermissionHandler,
  type SessionConfig,
  type ResumeSessionConfig,
  type Tool,
  type TypedSessionEvent,
  type SessionEventType,
  type AssistantMessageData,
  type LifecycleEvent,
  type rpc,
} from "copilot-wasm";

// The README's quickstart, with its tool's arguments typed.
export async function quickstart(prompt: string): Promise<string | undefined> {
  const client = await CopilotClient.start({ transport: "stdio", logLevel: "error", requestTimeoutMs: 30_000, autoRestart: true });
  try {
    const weather: Tool<{ city: string }> = {
      name: "get_weather",
      description: "Get the current weather for a city.",
      parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
      handler: ({ city }) => `Sunny, 22 C in ${city}`,
    };
    const session = await client.createSession({
      model: "claude-sonnet-4.5",
      onPermission: (request) =>
        request.kind === "custom-tool" ? { kind: "approve-once" } : { kind: "reject", feedback: "Not in this example." },
      tools: [weather],
    });
    session.on("tool.execution_start", (e) => console.error(`[tool] ${e.data.toolName}`));
    const reply = await session.sendAndWait(prompt, { timeoutMs: 120_000 });
    await session.destroy();
    return reply?.content;
  } catch (e) {
    if (e instanceof SessionError) return `Copilot could not answer: ${e.errorType ?? e.message}`;
    if (e instanceof RpcError) return `${e.method} failed with ${e.code}: ${e.rpcMessage}`;
    throw e;
  } finally {
    await client.stop();
  }
}

// Every way to connect the Node entry point declares.
export async function connecting(): Promise<CopilotClient[]> {
  const started = await CopilotClient.start({
    cliPath: "/usr/local/bin/copilot",
    transport: "tcp",
    args: ["--no-auto-login"],
    env: { HOME: "/tmp" },
    cwd: "/tmp",
    authToken: "a secret",
    startupTimeoutMs: 60_000,
    shutdownGraceMs: 3000,
    handlerTimeoutMs: Infinity,
    logger: { warn: (m) => console.warn(m) },
    requestHandlers: { "host.info": () => ({}) },
  });
  const address = started.address;
  const byTcp = await CopilotClient.connect({ host: address?.host, port: address?.port ?? 0, token: "t" });
  const byWebSocket = await CopilotClient.connectWebSocket("ws://127.0.0.1:8080/ws", { token: "t", connectionToken: "c" });
  const byStreams = await CopilotClient.fromStreams(new ReadableStream<Uint8Array>(), new WritableStream<Uint8Array>(), {
    label: "pipe",
  });
  // @ts-expect-error: connect needs the port
  await CopilotClient.connect({ host: "127.0.0.1" });
  // @ts-expect-error: the transport is stdio or tcp
  await CopilotClient.start({ transport: "pipe" });
  // An empty-mode client with a state folder of its own; its sessions name their tools.
  const empty = await CopilotClient.start({ mode: "empty", baseDirectory: "/srv/tenant-1" });
  await empty.createSession({
    availableTools: ["custom:*"],
    coauthorEnabled: false,
    largeOutput: { enabled: true, maxSizeBytes: 10_000, outputDirectory: "/srv/tenant-1/large" },
  });
  // @ts-expect-error: the mode is copilot-cli or empty
  await CopilotClient.start({ mode: "minimal" });
  return [started, byTcp, byWebSocket, byStreams, empty];
}

// A session config with a typed value for each kind of option.
export function fullConfig(): SessionConfig {
  const onPermission: PermissionHandler = async (request) => {
    if (request.kind === "shell") return { kind: "reject", feedback: `not ${String(request.permissionRequest?.fullCommandText)}` };
    if (request.kind === "url") return "no-result";
    return withDecisionContext(approveAll(request), {
      outcome: "prompted_user",
      source: "human_response",
      surface: "sdk",
    });
  };
  return {
    sessionId: "3d9f1c1e-0000-4000-8000-000000000000",
    clientName: "types-test",
    model: "claude-sonnet-4.5",
    reasoningEffort: "high",
    streaming: true,
    workingDirectory: "/tmp",
    systemMessage: {
      mode: "customize",
      sections: {
        tone: { action: "replace", content: "Be terse." },
        safety: { action: async (text) => `${text}\nNever delete files.` },
      },
    },
    availableTools: ["builtin:*", "custom:*"],
    excludedTools: new ToolSet().addBuiltIn(BuiltInTools.Isolated).addMcp("*").addCustom("get_weather"),
    provider: {
      type: "openai",
      baseUrl: "https://models.example/v1",
      bearerTokenProvider: async ({ providerName, sessionId }) => `${providerName}:${sessionId}`,
      headers: { "x-team": "types" },
    },
    mcpServers: {
      files: { command: "mcp-files", args: ["--root", "/tmp"], env: { DEBUG: "1" }, tools: ["read"] },
      search: { type: "http", url: "https://mcp.example/search", headers: { authorization: "Bearer x" } },
    },
    customAgents: [{ name: "reviewer", prompt: "Review the diff.", tools: ["view"], reasoningEffort: "medium" }],
    infiniteSessions: { enabled: true, backgroundCompactionThreshold: 0.8 },
    onPermission,
    tools: [
      {
        name: "add",
        parameters: { type: "object", properties: { a: { type: "number" }, b: { type: "number" } } },
        handler: (args: { a: number; b: number }, invocation) =>
          invocation.toolCallId ? { textResultForLlm: String(args.a + args.b), resultType: "success" } : "none",
      },
    ],
    onUserInput: (request) => (request.choices.length > 0 ? request.choices[0] : { answer: "yes", wasFreeform: true }),
    onElicitation: (request) => (request.requestedSchema ? { action: "accept", content: { ok: true } } : "decline"),
    onMcpOAuth: (request) => (request.serverUrl.startsWith("https:") ? { accessToken: "token", expiresIn: 3600 } : undefined),
    onExitPlanMode: (request) => request.actions.includes("autopilot"),
    commands: [{ name: "deploy", description: "Deploy it", handler: (invocation) => (invocation.args ? undefined : "which target?") }],
    hooks: {
      onPreToolUse: (input, { hookType }) =>
        input.toolName === "bash" && hookType === "preToolUse"
          ? { permissionDecision: "deny", permissionDecisionReason: "no shell here" }
          : undefined,
      onUserPromptSubmitted: async (input) => ({ modifiedPrompt: input.prompt.trim() }),
      onSessionEnd: (input) => {
        console.error(`ended: ${input.reason}`);
      },
      onAgentStop: (input) => (input.stopHookActive ? null : { decision: "block", reason: "Run the tests first." }),
    },
    requestHandlers: {
      "sessionFs.readFile": (params: { path: string }, { name, sessionId }) => ({ content: `${name} ${sessionId} ${params.path}` }),
    },
  };
}

export function wrongConfigs(): SessionConfig[] {
  return [
    // @ts-expect-error: a key no session takes
    { model: "gpt-5", temperature: 0.2 },
    // @ts-expect-error: a hook type the CLI does not have
    { hooks: { onBeforeEverything: () => undefined } },
    // @ts-expect-error: a permission decision's kind is a string or one of the decisions, not a boolean
    { onPermission: () => true },
    // @ts-expect-error: a replaced system message needs its content
    { systemMessage: { mode: "replace" } },
  ];
}

// @ts-expect-error: createSession-only options are not resume options
export const wrongResume: ResumeSessionConfig = { serverAssignedId: true };

// Events: narrowed on their `type`, data typed by the CLI's schema.
export async function events(client: CopilotClient): Promise<void> {
  const session = await client.createSession({ onPermission: approveAll });
  const unsubscribe = session.on("assistant.message", (e) => {
    const content: string = e.data.content;
    const messageId: string = e.data.messageId;
    console.log(messageId, content, e.id, e.timestamp);
    // @ts-expect-error: assistant.message data has no `text`
    console.log(e.data.text);
  });
  unsubscribe();
  session.on("session.error", (e) => console.error(e.data.errorType, e.data.message));
  // Every event, narrowed by hand.
  session.on((e) => {
    if (e.type === "assistant.message_delta") console.log(e.data.deltaContent);
    // @ts-expect-error: tool.execution_start data has no `content`
    if (e.type === "tool.execution_start") console.log(e.data.content);
  });
  session.on("*", (e: TypedSessionEvent) => e.type);
  // An event type newer than the schema still subscribes; its data is untyped.
  session.on("session.some_future_event", (e) => console.log(e.type, e.data));
  for await (const e of session) {
    const type: SessionEventType = e.type;
    if (e.type === "assistant.message") console.log(type, e.data.content);
    if (e.type === "session.idle") break;
  }
  for await (const e of session.events()) {
    if (e.type === "tool.execution_complete") console.log(e.data.toolCallId, e.data.success);
  }
  const messageId: string = await session.send({
    prompt: "Summarize this file",
    attachments: [{ type: "file", path: "/tmp/a.txt", displayName: "a.txt" }],
    mode: "enqueue",
  });
  const reply: AssistantMessageData | undefined = await session.sendAndWait("Hello", { timeoutMs: 60_000 });
  console.log(messageId, reply?.content);
  // @ts-expect-error: sendAndWait's reply is the assistant.message data, which has no `text`
  console.log(reply?.text);
  await session.abort();
  const history = await session.getMessages();
  console.log(history.length, session.stats().events, session.id, session.workspacePath);
  if (session.capabilities.ui?.elicitation) {
    const ok: boolean = await session.ui.confirm("Deploy?");
    const pick: string | null = await session.ui.select("Which?", ["a", "b"], { timeoutMs: 5000 });
    const name: string | null = await session.ui.input("Name?", { title: "Name", format: "email" });
    const form = await session.ui.elicitation({ message: "Form", requestedSchema: { type: "object", properties: {} } });
    console.log(ok, pick, name, form.action);
    // @ts-expect-error: select needs its choices
    await session.ui.select("Which?");
  }
  await session.destroy({ timeoutMs: 1000 });
  console.log(new Error() instanceof CapabilityError);
}

// The client's calls, its notifications, and the typed RPC of both.
export async function calls(client: CopilotClient): Promise<void> {
  const models: rpc.Model[] = await client.listModels();
  console.log(models.map((m) => `${m.id}: ${m.capabilities.supports?.vision ?? false}`));
  const list = await client.rpc.models.list();
  console.log(list.models.length);
  const ping = await client.rpc.ping({ message: "hi" });
  console.log(ping.protocolVersion === PROTOCOL_VERSION);
  // @ts-expect-error: the server has no models.switchTo (that is session.rpc.model.switchTo)
  await client.rpc.models.switchTo({ modelId: "gpt-5" });

  const session = await client.resumeSession("3d9f1c1e-0000-4000-8000-000000000000", {
    onPermission: approveAll,
    suppressResumeEvent: true,
  });
  await session.rpc.model.switchTo({ modelId: "gpt-5" }, { timeoutMs: 10_000 });
  await session.rpc.agent.select({ name: "reviewer" });
  // @ts-expect-error: switchTo needs the model id
  await session.rpc.model.switchTo({});
  // @ts-expect-error: the model id is a string
  await session.rpc.model.switchTo({ modelId: 5 });
  const raw = await session.call<{ ok: boolean }>("session.custom.method", { a: 1 });
  console.log(raw.ok, await client.call("status.get"));

  client.on("lifecycle", (e: LifecycleEvent) => {
    if (e.type !== "session.deleted") console.log(e.sessionId, e.metadata.modifiedTime);
  });
  client.on("notification", (n) => console.log(n.method, n.sessionId));
  client.on("disconnect", (reason) => console.log(reason));
  const unsubscribe = client.onRecovery((step) => {
    if (step.type === "restarting") console.log(step.attempt, step.afterMs);
    else if (step.type === "recovered") console.log(step.sessions, step.tookMs);
    else if (step.type === "connectionLost" || step.type === "gaveUp") console.log(step.cause);
  });
  unsubscribe();
  // @ts-expect-error: no such client notification kind
  client.on("event", () => undefined);

  const status = await client.status();
  const auth = await client.authStatus();
  const sessions = await client.listSessions({ cwd: "/tmp" });
  const stats = client.stats();
  const backlog: BacklogStats = client.backlog();
  console.log(backlog.bytes <= MAX_BACKLOG_BYTES, backlog.peakBytes, backlog.pauses, backlog.overruns, BACKLOG_STALL_MS);
  console.log(status.version, auth.isAuthenticated, sessions[0]?.sessionId, stats.refused.deadline, genericRequestNames());
  console.log(await client.closedPromise());
}

export async function failures(): Promise<void> {
  await loadWasm();
  try {
    await CopilotClient.start();
  } catch (e) {
    if (e instanceof CliExitedError) console.error(e.exitCode, e.signal, e.stderr);
  }
}

// Canvases and the extension options.
async function canvases(client: CopilotClient) {
  const counter = createCanvas({
    id: "counter",
    displayName: "Counter",
    description: "Counts.",
    open: (ctx) => ({ url: `https://example.test/${ctx.instanceId}` }),
    onClose: () => {},
    actions: [
      { name: "increment", handler: (ctx) => ({ input: ctx.input }) },
      {
        name: "reset",
        handler: () => {
          throw new CanvasError("no_reset", "cannot reset");
        },
      },
    ],
  });
  const session = await client.createSession({
    canvases: [counter],
    requestCanvasRenderer: true,
    requestExtensions: true,
    extensionSdkPath: "/opt/sdk",
    extensionInfo: { source: "github-app", name: "app" },
    canvasProvider: { id: "app:builtin:1" },
  });
  const ids: string[] = session.openCanvases.map((i) => i.instanceId);
  // @ts-expect-error: a canvas needs its open handler
  createCanvas({ id: "x", displayName: "X", description: "" });
  return ids;
}

// @ts-expect-error: a ToolSet's entries are added by source, not given as a list.
new ToolSet(["custom:*"]);

// The inference request handler: a subclass that changes each request.
import { CopilotRequestHandler as InferenceHandler } from "copilot-wasm";
class TaggingHandler extends InferenceHandler {
  protected override async sendRequest(request: Request, ctx: import("copilot-wasm").CopilotRequestContext): Promise<Response> {
    request.headers.set("x-session", ctx.sessionId ?? "none");
    return super.sendRequest(request, ctx);
  }
}
export const inferenceOptions = { requestHandler: new TaggingHandler() };
