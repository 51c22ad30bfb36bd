// Type declarations of copilot-wasm's public API (the browser entry point;
// the Node entry point, node.d.ts, adds CopilotClient.start/connect).

/** The protocol version this client speaks (the CLI's `protocolVersion`). */
export declare const PROTOCOL_VERSION: 3;

// ---------------------------------------------------------------------------
// Errors

/** Every error this package throws. */
export declare class CopilotError extends Error {}

/** The CLI answered a call with a JSON-RPC error. */
export declare class RpcError extends CopilotError {
  /** The method called. */
  readonly method: string;
  /** The JSON-RPC error code (-32601 method not found, -32002 authentication failed, ...). */
  readonly code: number;
  /** The error's own message (`message` also names the method and code). */
  readonly rpcMessage: string;
  /** The error's `data`, if any. */
  readonly data?: unknown;
}

/** The connection ended; every call waiting on it rejects with this. */
export declare class DisconnectedError extends CopilotError {}

/** A call, a start or a turn took longer than allowed. */
export declare class TimeoutError extends CopilotError {}

/** A turn ended in `session.error` (for example: no login). */
export declare class SessionError extends CopilotError {
  /** `authentication`, `rate_limit`, ... */
  readonly errorType?: string;
  /** The whole `session.error` data. */
  readonly data?: Record<string, unknown>;
}

/** The CLI speaks another protocol version. */
export declare class ProtocolVersionError extends CopilotError {
  readonly server?: number;
  readonly supported: 3;
}

/** A configuration that cannot work (it would hang, or is malformed). */
export declare class ConfigError extends CopilotError {}

/**
 * A call refused before it was sent: the session lacks the capability it
 * needs (a UI call while no client of the session answers elicitations).
 */
export declare class CapabilityError extends CopilotError {
  /** The UI call, such as `confirm`. */
  readonly call: string;
  /** The capability it needs, such as `ui.elicitation`. */
  readonly capability: string;
}

// ---------------------------------------------------------------------------
// Events

// Every event type and RPC method of the CLI's schemas (generated; `TypedSessionEvent`, `rpc.SessionMethods`, ...).
export * from "./generated/events.js";
export * as rpc from "./generated/rpc.js";
import type * as rpc from "./generated/rpc.js";
import type {
  AssistantMessageData,
  SessionEventDataMap,
  SessionEventEnvelope,
  SessionEventType,
  TypedSessionEvent,
} from "./generated/events.js";

/** The event of one type of the schema: `SessionEventOf<"assistant.message">`. */
export type SessionEventOf<T extends SessionEventType> = SessionEventEnvelope<T, SessionEventDataMap[T]>;

/** A session event as the CLI sends it (`params.event` of `session.event`). */
export interface SessionEvent<T extends string = string, D = Record<string, any>> {
  /** `assistant.message`, `session.idle`, `permission.requested`, ... */
  type: T;
  /** The event's own fields. */
  data: D;
  /** The event id. */
  id: string;
  timestamp?: string;
  parentId?: string | null;
  /** Ephemeral events are not persisted (not in `getMessages`). */
  ephemeral?: boolean;
  [key: string]: unknown;
}

/** The `type`s of `session.lifecycle` notifications. */
export type LifecycleEventType =
  | "session.created"
  | "session.deleted"
  | "session.updated"
  | "session.foreground"
  | "session.background";

/** What a lifecycle notification says about its session (not on `session.deleted`). */
export interface LifecycleMetadata {
  /** When the session was created (ISO 8601). */
  startTime: string;
  /** When the session last changed (ISO 8601). */
  modifiedTime: string;
  /** A summary of the session, once there is one. */
  summary?: string;
  [key: string]: unknown;
}

/** A `session.lifecycle` notification's params, discriminated on `type`. */
export type LifecycleEvent =
  | { type: "session.deleted"; sessionId: string; metadata?: undefined }
  | { type: Exclude<LifecycleEventType, "session.deleted">; sessionId: string; metadata: LifecycleMetadata };

/** Any other notification from the CLI (`host.event`, ...). */
export interface Notification {
  method: string;
  params: unknown;
  /** The session it belongs to, if it names one this client has open. */
  sessionId?: string;
}

// ---------------------------------------------------------------------------
// Handlers

/** A permission prompt (`permission.requested`). */
export interface PermissionRequest {
  sessionId: string;
  requestId: string;
  /** `shell`, `write`, `read`, `mcp`, `url`, `custom-tool`, ... */
  kind?: string;
  toolCallId?: string;
  /** Every detail: the command text, paths, the tool's name and arguments. */
  permissionRequest?: Record<string, any>;
  /** The whole event data. */
  data: Record<string, any>;
}

/**
 * The answer to a permission prompt. A string is shorthand for `{ kind }`.
 * `reject` without feedback ends the turn; with feedback the model reads it
 * and carries on.
 */
export type PermissionDecision =
  | { kind: "approve-once" }
  | { kind: "approve-for-session"; approval?: Record<string, unknown>; domain?: string }
  | { kind: "approve-for-location"; approval: Record<string, unknown>; locationKey: string }
  | { kind: "reject"; feedback?: string }
  | { kind: "user-not-available" }
  | { kind: string; [key: string]: unknown }
  | "approve-once"
  | "approve-for-session"
  | "reject"
  | "user-not-available"
  | { kind: "no-result" }
  | "no-result";

/** How and where a permission decision was made (the CLI's `PermissionDecisionContext`). */
export interface PermissionDecisionContext {
  outcome: "auto_approved" | "autopilot_denied" | "prompted_user";
  source: "assisted_approval" | "human_response" | "host_policy" | "unattended_fallback" | "authorization_carry_forward";
  surface: "tui" | "prompt_mode" | "copilot_app" | "acp" | "sdk";
  responseCapability?: "interactive" | "headless" | "none";
  userFeedback?: string;
}

/** A decision with its context; make it with `withDecisionContext`. */
export interface AttributedPermissionDecision {
  kind: "attributed";
  result: PermissionDecision;
  decisionContext: PermissionDecisionContext;
}

/**
 * Decides a permission prompt. Throwing, or returning nothing usable,
 * answers `user-not-available`. `no-result` answers nothing: the prompt is
 * left to another client connected to the same session (if none answers,
 * the turn waits until it is aborted).
 */
export type PermissionHandler = (
  request: PermissionRequest,
) => PermissionDecision | AttributedPermissionDecision | Promise<PermissionDecision | AttributedPermissionDecision>;

/** A call of a client tool. */
export interface ToolInvocation<A = any> {
  sessionId: string;
  toolCallId: string;
  toolName: string;
  /** The arguments, already parsed. */
  arguments: A;
  workingDirectory?: string;
  /** The W3C traceparent of the CLI's span for this call (when its telemetry is on). */
  traceparent?: string;
  /** The W3C tracestate beside it. */
  tracestate?: string;
}

/** What a tool returns to the model (`handlePendingToolCall`'s `result`). */
export interface ToolResultObject {
  textResultForLlm: string;
  /** `success` (default), `failure`, `denied`, `timeout`, `rejected` (ends the turn). */
  resultType?: "success" | "failure" | "denied" | "timeout" | "rejected" | string;
  error?: string;
  sessionLog?: string;
  binaryResultsForLlm?: Array<{ type: "image" | "resource"; data: string; mimeType: string; description?: string }>;
  [key: string]: unknown;
}

/**
 * A tool the model can call, run by this client. The handler returns text,
 * a `ToolResultObject` (`resultType: "failure"` for a failure whose text
 * the model reads), or any other value (sent as JSON text); if it throws,
 * the error is logged and sent as the call's `error` (no result), as the
 * official SDK sends it: the CLI tells the model only that the tool failed.
 */
export interface Tool<A = any> {
  name: string;
  description?: string;
  /** A JSON schema of the arguments. */
  parameters?: Record<string, unknown>;
  /** Run without a permission prompt. */
  skipPermission?: boolean;
  /** Take the place of the built-in tool of the same name. */
  overridesBuiltInTool?: boolean;
  handler: (args: A, invocation: ToolInvocation<A>) => unknown | Promise<unknown>;
}

/** A question for the user (`userInput.request`, the `ask_user` tool). */
export interface UserInputRequest {
  sessionId: string;
  question: string;
  choices: string[];
  allowFreeform?: boolean;
}

/** The user's answer; a string is a typed (freeform) answer. */
export type UserInputResponse = { answer: string; wasFreeform: boolean } | string;

/** Answers user questions; returning nothing or throwing refuses. */
export type UserInputHandler = (
  request: UserInputRequest,
) => UserInputResponse | null | undefined | Promise<UserInputResponse | null | undefined>;

/** An MCP server's form for the user (`elicitation.requested`): the event data. */
export interface ElicitationRequest {
  sessionId: string;
  requestId: string;
  message: string;
  /** A JSON schema of the fields asked for. */
  requestedSchema?: Record<string, unknown>;
  mode?: string;
  url?: string;
  [key: string]: unknown;
}

/** The user's answer to an elicitation; a string is shorthand for `{ action }`. */
export type ElicitationResponse =
  | { action: "accept"; content?: Record<string, unknown> }
  | { action: "decline" }
  | { action: "cancel" }
  | "decline"
  | "cancel";

/**
 * What the CLI says a session can do, as it last said (only what it said):
 * set by the open's answer, kept current by `capabilities.changed`.
 */
export interface SessionCapabilities {
  ui?: {
    /** A client of the session answers elicitations: `session.ui` calls are answered. */
    elicitation?: boolean;
    /** MCP Apps (SEP-1865) UI passthrough. */
    mcpApps?: boolean;
    /** Canvas rendering. */
    canvases?: boolean;
  };
  /** Extensions are enabled for the session. */
  extensions?: boolean;
}

/** The field of `session.ui.input`: each one given goes as the form field's member. */
export interface UiInputOptions {
  title?: string;
  description?: string;
  minLength?: number;
  maxLength?: number;
  format?: "email" | "uri" | "date" | "date-time";
  default?: string;
}

/**
 * The UI calls of a session (`session.ui`), answered by a client of the
 * session with an elicitation handler. Each rejects with a CapabilityError
 * before anything is sent while `session.capabilities.ui?.elicitation` is
 * not true (a headless CLI would wait forever).
 */
export interface SessionUi {
  /** Asks for a form of the caller's; the answer as the user gave it. */
  elicitation(
    params: { message: string; requestedSchema: Record<string, unknown> },
    options?: CallOptions,
  ): Promise<{ action: "accept" | "decline" | "cancel"; content?: Record<string, unknown> }>;
  /** Asks yes or no: true only when the user accepted and said yes. */
  confirm(message: string, options?: CallOptions): Promise<boolean>;
  /** Asks to pick one of `choices`: the choice, or null when declined or cancelled. */
  select(message: string, choices: string[], options?: CallOptions): Promise<string | null>;
  /** Asks for a line of text: the text, or null when declined or cancelled. */
  input(message: string, inputOptions?: UiInputOptions, options?: CallOptions): Promise<string | null>;
}

/** Answers elicitations; throwing or returning nothing usable refuses (`cancel`). */
export type ElicitationHandler = (request: ElicitationRequest) => ElicitationResponse | Promise<ElicitationResponse>;

/** An MCP server needs an OAuth token (`mcp.oauth_required`): the event data. */
export interface McpOAuthRequest {
  sessionId: string;
  requestId: string;
  serverName: string;
  serverUrl: string;
  [key: string]: unknown;
}

/** A token for an MCP server; a string is the access token. */
export type McpOAuthToken = { accessToken: string; tokenType?: string; expiresIn?: number } | string;

/** Provides MCP OAuth tokens; returning nothing answers `cancelled`. */
export type McpOAuthHandler = (
  request: McpOAuthRequest,
) => McpOAuthToken | null | undefined | Promise<McpOAuthToken | null | undefined>;

/** The agent asks to leave plan mode (`exitPlanMode.request`). */
export interface ExitPlanModeRequest {
  sessionId: string;
  summary: string;
  planContent: string;
  actions: string[];
  recommendedAction?: string;
}

/** The answer; a boolean is shorthand for `{ approved }`. */
export type ExitPlanModeResponse = { approved: boolean; selectedAction?: string; feedback?: string } | boolean;

/** Approves or rejects plans; throwing or returning nothing usable refuses (`approved: false`). */
export type ExitPlanModeHandler = (
  request: ExitPlanModeRequest,
) => ExitPlanModeResponse | Promise<ExitPlanModeResponse>;

/** A slash command run by the user (`command.execute`). */
export interface CommandInvocation {
  sessionId: string;
  /** The whole command line, such as `/deploy staging`. */
  command?: string;
  commandName: string;
  args?: string;
}

/**
 * A slash command this client offers. The handler returns nothing when
 * done, or a string: the error the user sees. Throwing refuses.
 */
export interface Command {
  /** Its name, without the slash. */
  name: string;
  description?: string;
  handler: (invocation: CommandInvocation) => void | string | Promise<void | string>;
}

// ---------------------------------------------------------------------------
// Hooks: callbacks the agent runs at points of its loop (`hooks.invoke`).

/** Every hook type of the CLI's schema. */
export type HookType =
  | "preToolUse"
  | "preMcpToolCall"
  | "postToolUse"
  | "postToolUseFailure"
  | "userPromptSubmitted"
  | "userPromptTransformed"
  | "sessionStart"
  | "sessionEnd"
  | "postResult"
  | "prePRDescription"
  | "errorOccurred"
  | "agentStop"
  | "subagentStart"
  | "subagentStop"
  | "preCompact"
  | "permissionRequest"
  | "notification";

/** Which session a hook runs for. */
export interface HookInvocation {
  /** The session the hook was set on. */
  sessionId: string;
  hookType: HookType;
}

/**
 * What every hook input has, named as the official SDKs name it (the CLI
 * sends `cwd` and the time in Unix ms; the package hands them over as
 * `workingDirectory` and a `Date`).
 */
export interface BaseHookInput {
  /** The session that raised the hook (for a sub-agent's hook, not the one it was set on). */
  sessionId?: string;
  /** The agent's working directory (the CLI's `cwd`). */
  workingDirectory?: string;
  /** When the hook was raised. */
  timestamp?: Date;
  [key: string]: unknown;
}

export interface PreToolUseHookInput extends BaseHookInput {
  toolName: string;
  toolArgs: unknown;
}
/** `deny` keeps the tool from running; the model reads the reason. */
export interface PreToolUseHookOutput {
  permissionDecision?: "allow" | "deny" | "ask";
  permissionDecisionReason?: string;
  modifiedArgs?: unknown;
  additionalContext?: string;
  suppressOutput?: boolean;
}
export interface PreMcpToolCallHookInput extends BaseHookInput {
  toolCallId?: string;
  serverName: string;
  toolName: string;
  arguments: unknown;
  _meta?: Record<string, unknown>;
}
/** `metaToUse`: absent keeps the request's `_meta`, `null` drops it, an object replaces it. */
export interface PreMcpToolCallHookOutput {
  metaToUse?: Record<string, unknown> | null;
}
export interface PostToolUseHookInput extends BaseHookInput {
  toolName: string;
  toolArgs: unknown;
  /** The tool's result (`{ textResultForLlm, resultType, ... }`). */
  toolResult: Record<string, unknown>;
}
export interface PostToolUseHookOutput {
  /** A result for the model instead. */
  modifiedResult?: Record<string, unknown>;
  additionalContext?: string;
  suppressOutput?: boolean;
}
export interface PostToolUseFailureHookInput extends BaseHookInput {
  toolName: string;
  toolArgs: unknown;
  error: string;
}
export interface PostToolUseFailureHookOutput {
  additionalContext?: string;
}
export interface UserPromptSubmittedHookInput extends BaseHookInput {
  prompt: string;
}
export interface UserPromptSubmittedHookOutput {
  /** The prompt the model gets instead. */
  modifiedPrompt?: string;
  additionalContext?: string;
  suppressOutput?: boolean;
}
export interface UserPromptTransformedHookInput extends BaseHookInput {
  prompt: string;
  transformedPrompt: string;
}
export interface UserPromptTransformedHookOutput {
  modifiedTransformedPrompt?: string;
}
export interface SessionStartHookInput extends BaseHookInput {
  source: "startup" | "resume" | "new";
  initialPrompt?: string;
}
export interface SessionStartHookOutput {
  additionalContext?: string;
  modifiedConfig?: Record<string, unknown>;
}
export interface SessionEndHookInput extends BaseHookInput {
  reason: "complete" | "error" | "abort" | "timeout" | "user_exit";
  finalMessage?: string;
  error?: string;
}
export interface SessionEndHookOutput {
  suppressOutput?: boolean;
  cleanupActions?: string[];
  sessionSummary?: string;
}
export interface ErrorOccurredHookInput extends BaseHookInput {
  error: string;
  errorContext: "model_call" | "tool_execution" | "system" | "user_input";
  recoverable: boolean;
}
export interface ErrorOccurredHookOutput {
  suppressOutput?: boolean;
  errorHandling?: "retry" | "skip" | "abort";
  retryCount?: number;
  userNotification?: string;
}
export interface AgentStopHookInput extends BaseHookInput {
  stopReason?: string;
  transcriptPath?: string;
  /** Whether this stop follows an earlier `block` (the CLI's `stop_hook_active`). */
  stopHookActive?: boolean;
}
/** `{ decision: "block", reason }` keeps the agent running with `reason` as its next message. */
export interface AgentStopHookOutput {
  decision?: "block";
  reason?: string;
}

/**
 * A hook: returns its output, or nothing for none. Throwing is a failed
 * handler: the agent goes on as if no hook were set.
 */
export type Hook<I, O> = (input: I, invocation: HookInvocation) => O | void | null | Promise<O | void | null>;

/** A session's hooks, one per hook type; setting any sends `hooks: true`. */
export interface SessionHooks {
  onPreToolUse?: Hook<PreToolUseHookInput, PreToolUseHookOutput>;
  onPreMcpToolCall?: Hook<PreMcpToolCallHookInput, PreMcpToolCallHookOutput>;
  onPostToolUse?: Hook<PostToolUseHookInput, PostToolUseHookOutput>;
  onPostToolUseFailure?: Hook<PostToolUseFailureHookInput, PostToolUseFailureHookOutput>;
  onUserPromptSubmitted?: Hook<UserPromptSubmittedHookInput, UserPromptSubmittedHookOutput>;
  onUserPromptTransformed?: Hook<UserPromptTransformedHookInput, UserPromptTransformedHookOutput>;
  onSessionStart?: Hook<SessionStartHookInput, SessionStartHookOutput>;
  onSessionEnd?: Hook<SessionEndHookInput, SessionEndHookOutput>;
  onErrorOccurred?: Hook<ErrorOccurredHookInput, ErrorOccurredHookOutput>;
  onAgentStop?: Hook<AgentStopHookInput, AgentStopHookOutput>;
  /** The hook types below have no typed input or output: JSON as the CLI sends it. */
  onPostResult?: Hook<BaseHookInput, Record<string, unknown>>;
  onPrePRDescription?: Hook<BaseHookInput, Record<string, unknown>>;
  onSubagentStart?: Hook<BaseHookInput, Record<string, unknown>>;
  onSubagentStop?: Hook<BaseHookInput, Record<string, unknown>>;
  onPreCompact?: Hook<BaseHookInput, Record<string, unknown>>;
  onPermissionRequest?: Hook<BaseHookInput, Record<string, unknown>>;
  onNotification?: Hook<BaseHookInput, Record<string, unknown>>;
}

// ---------------------------------------------------------------------------
// Generic handlers of the waits without a typed handler.

/** Which wait a generic handler answers. */
export interface RequestInvocation {
  /** The server request's method or the awaited event's type. */
  name: string;
  /** The session it came for; `undefined` for a client-wide request. */
  sessionId?: string;
}

/**
 * Answers one request or awaited event: gets the request's params (or the
 * event's `data`) and returns the response's `result` (or what goes under
 * the answering RPC's key). Throwing is a failed handler: the engine's
 * refusal goes.
 */
export type RequestHandler = (params: any, invocation: RequestInvocation) => unknown | Promise<unknown>;

/**
 * Generic handlers by name: a server request's method (`sessionFs.readFile`)
 * or an awaited event's type (`sampling.requested`), for the kinds without
 * a typed handler (see `genericRequestNames()`).
 */
export type RequestHandlers = Record<string, RequestHandler>;

/** The names a generic handler can be set for, from the engine's answer table (after `loadWasm`). */
export declare function genericRequestNames(): string[];

/** Client-wide handlers, for requests that name no session. */
export interface ClientRequestOptions {
  /** Handlers of client-wide requests (`host.*`, `uiThread.run`, ...), by method. */
  requestHandlers?: RequestHandlers;
  /**
   * The inference request handler (experimental): the client registers as
   * the CLI's inference provider and the CLI's model HTTP requests go to
   * it instead of the network.
   */
  requestHandler?: CopilotRequestHandler;
  /**
   * The caller's W3C trace context, asked at each open and send, whose
   * params carry it, so the CLI's spans join the caller's trace (wire it to
   * the OpenTelemetry SDK in use).
   */
  onGetTraceContext?: TraceContextProvider;
  /**
   * How sessions default what the application leaves unset: "copilot-cli"
   * (default; the CLI's own defaults) or "empty" (optional features off: a
   * started CLI needs `baseDirectory`, every session `availableTools`;
   * unset options take the empty-mode defaults, the system prompt loses
   * its `environment_context` section, and each session is patched with
   * `session.options.update` once open).
   */
  mode?: ClientMode;
}

/** How a client defaults what the application leaves unset. */
export type ClientMode = "copilot-cli" | "empty";

/** Large tool outputs written to a file, the model given a reference to it. */
export interface LargeToolOutputConfig {
  /** On or off (the CLI's default: on). */
  enabled?: boolean;
  /** The size in bytes over which an output goes to a file (the CLI's default: 50 KB). */
  maxSizeBytes?: number;
  /** Where the files go (`outputDir` on the wire; the CLI's default: the system's temporary folder). */
  outputDirectory?: string;
}

/** A W3C trace context. */
export interface TraceContext {
  traceparent?: string;
  tracestate?: string;
}

/** Gives the caller's current trace context. */
export type TraceContextProvider = () => TraceContext | undefined | Promise<TraceContext | undefined>;

/** How a started CLI exports its own OpenTelemetry traces (each option sets the CLI's variable). */
export interface TelemetryConfig {
  /** OTEL_EXPORTER_OTLP_ENDPOINT. */
  otlpEndpoint?: string;
  /** OTEL_EXPORTER_OTLP_PROTOCOL. */
  otlpProtocol?: "http/json" | "http/protobuf";
  /** COPILOT_OTEL_FILE_EXPORTER_PATH: spans as JSON lines. */
  filePath?: string;
  /** COPILOT_OTEL_EXPORTER_TYPE: `otlp-http` or `file`. */
  exporterType?: string;
  /** COPILOT_OTEL_SOURCE_NAME. */
  sourceName?: string;
  /** OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT. */
  captureContent?: boolean;
}

/** An action on a section of the system prompt; a function rewrites the section's text. */
export type SectionAction =
  | "replace"
  | "remove"
  | "append"
  | "prepend"
  | "preserve"
  | ((content: string) => string | Promise<string>);

/**
 * How the system prompt is made: the CLI's with `content` appended, only
 * `content`, or the CLI's with sections changed (by id: `identity`, `tone`,
 * `safety`, `environment_context`, ...). A transform function is called
 * with the section's text when the CLI builds the prompt; if it throws the
 * text is kept.
 */
export type SystemMessageConfig =
  | { mode?: "append"; content?: string }
  | { mode: "replace"; content: string }
  | { mode: "customize"; sections?: Record<string, { action: SectionAction; content?: string }>; content?: string };

/** A model provider of the user's own (BYOK). `apiKey` and `bearerToken` are secrets. */
export interface ProviderConfig {
  /** Default `openai`. */
  type?: "openai" | "azure" | "anthropic";
  wireApi?: "completions" | "responses";
  transport?: "http" | "websockets";
  baseUrl: string;
  apiKey?: string;
  bearerToken?: string;
  /** Gives a bearer token for each model request (`providerToken.getToken`); wins over the others. */
  bearerTokenProvider?: (request: { providerName: string; sessionId: string }) => string | Promise<string>;
  azure?: { apiVersion?: string };
  headers?: Record<string, string>;
  modelId?: string;
  wireModel?: string;
  maxPromptTokens?: number;
  maxOutputTokens?: number;
}

/** An MCP server: local (stdio, the default when `command` is given) or remote. */
export type MCPServerConfig =
  | {
      type?: "local" | "stdio";
      command: string;
      args?: string[];
      /** Values, not variable names. */
      env?: Record<string, string>;
      workingDirectory?: string;
      /** The tools to take from it; default all. */
      tools?: string[];
      timeout?: number;
    }
  | { type: "http" | "sse"; url: string; headers?: Record<string, string>; tools?: string[]; timeout?: number };

/** An agent of the session's own. */
export interface CustomAgentConfig {
  name: string;
  displayName?: string;
  description?: string;
  /** The tools it may use; default all. */
  tools?: string[] | null;
  prompt: string;
  mcpServers?: Record<string, MCPServerConfig>;
  /** Whether the model may pick it by itself (default yes). */
  infer?: boolean;
  skills?: string[];
  model?: string;
  reasoningEffort?: ReasoningEffort;
}

/** How hard a model that supports it reasons. */
export type ReasoningEffort = "low" | "medium" | "high" | "xhigh" | "max";

/** Persistent workspaces and automatic compaction (on by default). */
export interface InfiniteSessionConfig {
  enabled?: boolean;
  backgroundCompactionThreshold?: number;
  bufferExhaustionThreshold?: number;
}

/**
 * Options of both `createSession` and `resumeSession`; the Rust crate's
 * `SessionConfig` names each the same in snake_case. An option left out is
 * left out of the request (the CLI's default applies) unless a default is
 * named. A key not listed here is refused with a TypeError naming it.
 */
export interface SessionConfigBase {
  /** A name for this application (`session.list`, the User-Agent). */
  clientName?: string;
  /** The model, such as `claude-sonnet-4.5`. Pass it: without it the CLI picks its own. */
  model?: string;
  reasoningEffort?: ReasoningEffort;
  /** `none` suppresses reasoning summaries. */
  reasoningSummary?: string;
  /** `default` or `long_context`. */
  contextTier?: string;
  modelCapabilities?: Record<string, unknown>;
  /** Experimental CLI features (`isExperimentalMode`). */
  enableExperimentalMode?: boolean;
  /** The directory tools run in. */
  workingDirectory?: string;
  additionalDirectories?: string[];
  /** The CLI's configuration and state directory (`configDir`). */
  configDirectory?: string;
  enableConfigDiscovery?: boolean;
  /** Deliver `assistant.message_delta` events as the reply streams. Default false. */
  streaming?: boolean;
  /** Deliver sub-agents' streaming deltas too. Default true. */
  includeSubAgentStreamingEvents?: boolean;
  systemMessage?: SystemMessageConfig;
  /** The only tools offered (`builtin:*`, `mcp:<name>`, `custom:*`, bare names; or a `ToolSet`). */
  availableTools?: string[] | ToolSet;
  /** Tools never offered, even if available. */
  excludedTools?: string[] | ToolSet;
  toolSearch?: Record<string, unknown>;
  excludedBuiltinAgents?: string[];
  provider?: ProviderConfig;
  capi?: Record<string, unknown>;
  /** Named BYOK providers (experimental). */
  providers?: Record<string, unknown>[];
  models?: Record<string, unknown>[];
  mcpServers?: Record<string, MCPServerConfig>;
  mcpOAuthTokenStorage?: "persistent" | "in-memory";
  disabledMcpServers?: string[];
  /** MCP Apps UI passthrough (`requestMcpApps`). Default false. */
  enableMcpApps?: boolean;
  githubMcpToolConfig?: Record<string, unknown>;
  customAgents?: CustomAgentConfig[];
  customAgentsLocalOnly?: boolean;
  defaultAgent?: { excludedTools?: string[] };
  /** The custom agent the session starts as. */
  agent?: string;
  skillDirectories?: string[];
  disabledSkills?: string[];
  pluginDirectories?: string[];
  instructionDirectories?: string[];
  infiniteSessions?: InfiniteSessionConfig;
  memory?: Record<string, unknown>;
  largeOutput?: LargeToolOutputConfig;
  sessionLimits?: Record<string, unknown>;
  enableSessionTelemetry?: boolean;
  enableCitations?: boolean;
  enableFileChangeTracking?: boolean;
  /** A GitHub token for this session's identity (a secret). */
  gitHubToken?: string;
  enableManagedSettings?: boolean;
  managedSettings?: Record<string, unknown>;
  skipEmbeddingRetrieval?: boolean;
  embeddingCacheStorage?: "persistent" | "in-memory";
  organizationCustomInstructions?: string;
  enableOnDemandInstructionDiscovery?: boolean;
  enableFileHooks?: boolean;
  enableHostGitOperations?: boolean;
  enableSessionStore?: boolean;
  enableSkills?: boolean;
  remoteSession?: "off" | "export" | "on";
  /** Experiment assignments of the integrator's own (the CLI's feature flags), as the CLI's schema describes them. */
  expAssignments?: Record<string, unknown>;
  /** Skip custom instructions (`AGENTS.md`, ...); sent once open, in `session.options.update`. Empty mode: true unless set. */
  skipCustomInstructions?: boolean;
  /** A `Co-authored-by` trailer in the agent's commits (sent once open). Empty mode: false unless set. */
  coauthorEnabled?: boolean;
  /** The `manage_schedule` tool (sent once open). Empty mode: false unless set. */
  manageScheduleEnabled?: boolean;
  /** Canvases this session declares and serves (experimental; see `createCanvas`). */
  canvases?: Canvas[];
  /** Offer the agent the canvas tools (`open_canvas`, ...): this client renders canvases (experimental). */
  requestCanvasRenderer?: boolean;
  /** Wire extension management tools onto the session for this connection (experimental). */
  requestExtensions?: boolean;
  /** A `copilot-sdk/` folder given to extension processes in place of the CLI's own (experimental). */
  extensionSdkPath?: string;
  /** A stable extension identity for this connection's canvases, as the official SDK sends it (experimental). */
  extensionInfo?: ExtensionInfo;
  /** A stable provider identity for this connection's canvases, used as their provider id (experimental). */
  canvasProvider?: CanvasProviderIdentity;
  /** Answers permission prompts (and asks the CLI for them: `requestPermission: true`). Without it every prompt is answered `user-not-available`. */
  onPermission?: PermissionHandler;
  /** Tools offered to the model, run here. */
  tools?: Tool[];
  /** Answers the agent's questions to the user (adds the `ask_user` tool). */
  onUserInput?: UserInputHandler;
  /** Answers MCP servers' forms (`requestElicitation: true`). */
  onElicitation?: ElicitationHandler;
  /** Provides MCP servers' OAuth tokens. */
  onMcpOAuth?: McpOAuthHandler;
  /** Answers requests to leave plan mode (`requestExitPlanMode: true`). */
  onExitPlanMode?: ExitPlanModeHandler;
  /** Slash commands offered to the user. */
  commands?: Command[];
  /** Hooks of the agent loop (setting any asks the CLI to call them: `hooks: true`). */
  hooks?: SessionHooks;
  /** Handlers of this session's other requests and awaited events, by name. */
  requestHandlers?: RequestHandlers;
}

/** Options of `createSession`. */
export interface SessionConfig extends SessionConfigBase {
  /** The session id; default a fresh `crypto.randomUUID()`, reserved before the create is sent. */
  sessionId?: string;
  /** Send no id and let the CLI name the session (frames for it are held until then). */
  serverAssignedId?: boolean;
  /** A cloud session in place of a local one. */
  cloud?: Record<string, unknown>;
}

/** Options of `resumeSession`. */
export interface ResumeSessionConfig extends SessionConfigBase {
  /** Resume without a `session.resume` event (`disableResume`). Default false. */
  suppressResumeEvent?: boolean;
  /**
   * Continue the tool calls and prompts pending when the session stopped:
   * the client asks the CLI which are pending (the CLI does not send their
   * events again) and answers each once, with this config's handlers.
   * Default false: the CLI lists none, and marks them interrupted at the
   * next send.
   */
  continuePendingWork?: boolean;
  /** The canvases open in this client, handed back as the official SDKs do (the CLI 1.0.102's schema does not name it). */
  openCanvases?: OpenCanvasInstance[];
}

/** The option keys of both methods (camelCase of the Rust crate's names). */
export declare const SESSION_OPTIONS: readonly string[];
/** Option keys of `createSession` only. */
export declare const CREATE_ONLY_OPTIONS: readonly string[];
/** Option keys of `resumeSession` only. */
export declare const RESUME_ONLY_OPTIONS: readonly string[];
/** Handler keys, each with the kind of wait it answers. */
export declare const HANDLER_OPTIONS: Readonly<Record<string, HandlerKind>>;
/** The handler kinds answered by `requestHandlers`, by method or event type. */
export declare const GENERIC_HANDLER_KINDS: readonly HandlerKind[];
/** Keys accepted for other parts of the client (the generic request handlers). */
export declare const RESERVED_OPTIONS: readonly string[];

/** What to send: a prompt, or a prompt with attachments and mode. */
export type MessageOptions =
  | string
  | { prompt: string; attachments?: rpc.Attachment[]; mode?: "enqueue" | "immediate"; [key: string]: unknown };

/** Options of a call: every call has a deadline. */
export interface CallOptions {
  /**
   * Reject with a TimeoutError after this many milliseconds (the call is
   * then forgotten); default: the client's `requestTimeoutMs`.
   */
  timeoutMs?: number;
}

/** Something to log to; every method optional. Nothing is logged by default. */
export interface Logger {
  debug?(message: string): void;
  warn?(message: string): void;
  error?(message: string): void;
}

/** Deadlines of a client's calls. */
export interface TimeoutOptions {
  /**
   * How long any call to the CLI may take, the answers to the agent's
   * requests included, unless the call is given its own `timeoutMs`
   * (default 60 000).
   */
  requestTimeoutMs?: number;
  /**
   * How long `destroy()` and `stop()` (in total, however many sessions are
   * open) wait for the CLI before they release everything and go on
   * (default 3000).
   */
  shutdownGraceMs?: number;
  /**
   * How long a handler (permission, tool, user input, ...) may take before
   * the agent gets the refusal in its place; its later answer is not sent
   * (default 300 000; `Infinity`: no limit).
   */
  handlerTimeoutMs?: number;
}

/** How long a handler may take unless told otherwise (300 000 ms). */
export declare const DEFAULT_HANDLER_TIMEOUT_MS: number;

/** How long any call may take unless told otherwise (60 000 ms). */
export declare const DEFAULT_REQUEST_TIMEOUT_MS: number;
/** How long `destroy()` and `stop()` wait for a CLI that does not answer (3000 ms). */
export declare const DEFAULT_SHUTDOWN_GRACE_MS: number;
/**
 * Events kept for a session's first subscriber while it has none, at most
 * (1024, and 4 MiB of them: the core's bounds): the early events of a
 * session are never lost to a subscriber that comes right after
 * `createSession`; later ones are counted in `session.stats().notKept`.
 */
export declare const MAX_KEPT_EVENTS: number;
/**
 * Bytes of events read and not yet taken by async iterators
 * (`session.events()`), across a connection, before the client stops
 * reading (1 MiB, the core's bound): a consumer slower than the CLI holds
 * the CLI back. Reading goes on when half has been taken, at once while a
 * request waits for its answer, and after `BACKLOG_STALL_MS` with nothing
 * taken. A WebSocket connection cannot be held back and reads on.
 */
export declare const MAX_BACKLOG_BYTES: number;
/** How long a full backlog may stay untouched before reading goes on anyway (1000 ms). */
export declare const BACKLOG_STALL_MS: number;

/** `CopilotClient.backlog()`. */
export interface BacklogStats {
  /** Bytes held now for iterators that have not taken them. */
  bytes: number;
  /** The most bytes held at once. */
  peakBytes: number;
  /** Times reading paused because the backlog was full. */
  pauses: number;
  /** Times it read on over the bound because nothing was taken for `BACKLOG_STALL_MS`. */
  overruns: number;
}

/** Options of `CopilotClient.connectWebSocket`. */
export interface WebSocketOptions extends TimeoutOptions, ClientRequestOptions {
  /** The bridge's token, sent as the subprotocol `copilot.token.<TOKEN>`. */
  token?: string;
  /** For a CLI server that requires one (`COPILOT_CONNECTION_TOKEN`): sent in `connect`. */
  connectionToken?: string;
  /** The WebSocket class to use (default: the global one). */
  WebSocket?: unknown;
  /** How long the socket may take to open (default 30 s). */
  openTimeoutMs?: number;
  /** How long the handshake may take (default 60 s). */
  startupTimeoutMs?: number;
  logger?: Logger;
  /** The largest frame accepted (default 16 MiB; larger ones are reported and skipped). */
  maxFrameBytes?: number;
  /**
   * A socket that drops while the client did not end it is opened again
   * (same address, same token) after the core's backoff, and every open
   * session resumed with `continuePendingWork`; the waits the CLI lists
   * are answered once, and a `sendAndWait` goes on to the turn's end.
   * Each step is told to `onRecovery`. Default true.
   */
  autoReconnect?: boolean;
}

/** Options of `CopilotClient.fromStreams`. */
export interface StreamOptions extends TimeoutOptions, ClientRequestOptions {
  /** For a CLI that requires one (`COPILOT_CONNECTION_TOKEN`): sent in `connect`. */
  token?: string;
  /** How long the handshake may take (default 60 s). */
  startupTimeoutMs?: number;
  logger?: Logger;
  /** A label for logs. */
  label?: string;
  /** The largest frame accepted (default 16 MiB; larger ones are reported and skipped). */
  maxFrameBytes?: number;
}

/** A byte source: a WHATWG stream of Uint8Array or a Node stream.Readable. */
export type ByteReadable = ReadableStream<Uint8Array | ArrayBuffer> | NodeLikeReadable;
/** A byte sink: a WHATWG stream or a Node stream.Writable. */
export type ByteWritable = WritableStream<Uint8Array> | NodeLikeWritable;

/** The part of a Node `stream.Readable` the client uses. */
export interface NodeLikeReadable {
  on(event: "data", listener: (chunk: Uint8Array | string) => void): unknown;
  once(event: string, listener: (...args: any[]) => void): unknown;
  off(event: string, listener: (...args: any[]) => void): unknown;
  destroy?(): unknown;
}

/** The part of a Node `stream.Writable` the client uses. */
export interface NodeLikeWritable {
  write(chunk: Uint8Array): unknown;
  end(): unknown;
  on?(event: "error", listener: (error: Error) => void): unknown;
  readonly destroyed?: boolean;
  readonly writableEnded?: boolean;
}

/** Why the engine answered a wait with its refusal. */
export type RefusalCause =
  | "noHandler"
  | "handlerFailed"
  | "deadline"
  | "unreadable"
  | "sessionGone"
  | "parkOverflow"
  | "tableFull"
  | "notServed"
  | "malformed";

/**
 * The handler kinds of the engine's answer table. The JS client runs
 * `permission`, `tool`, `userInput`, `elicitation`, `mcpOAuth`,
 * `exitPlanMode` and `command`; the others are refused (`noHandler`).
 */
export type HandlerKind =
  | "permission"
  | "tool"
  | "userInput"
  | "elicitation"
  | "mcpOAuth"
  | "mcpHeadersRefresh"
  | "exitPlanMode"
  | "autoModeSwitch"
  | "sampling"
  | "sessionLimits"
  | "command"
  | "queuedCommand"
  | "hooks"
  | "systemMessageTransform"
  | "providerToken"
  | "gitHubToken"
  | "sessionFs"
  | "skillProvider"
  | "workflow"
  | "tasks"
  | "canvas"
  | "host"
  | "extensionLaunch"
  | "llmInference"
  | "uiThread"
  | "installations";

/** The engine's counters and the client's open calls and sessions. */
export interface ClientStats {
  frames: number;
  bytes: number;
  malformed: number;
  oversize: number;
  unknownSession: number;
  /** Frames parked (in total) during server-assigned creates. */
  parked: number;
  unmatchedResponses: number;
  /** Waits of the agent open now, and the age (ms) of the oldest. */
  openObligations: number;
  oldestObligationAge: number | null;
  /** Waits recorded, answered by a handler, refused by the engine (by cause). */
  opened: number;
  answered: number;
  /**
   * Waits left to another client of the session (nothing was sent): a
   * handler declined, or this client has no handler for a wait the CLI
   * sends to every client of the session. Of those, `leftOpen` are kept
   * now, `leftAnswered` the CLI reported answered (by another client) and
   * `leftUnanswered` were forgotten without that report, at the handler
   * deadline or when their session was released (still nothing sent).
   */
  declined: number;
  leftOpen: number;
  leftAnswered: number;
  leftUnanswered: number;
  refused: Record<RefusalCause, number>;
  /** Awaited events without a usable `requestId`: nothing can answer them. */
  unanswerable: number;
  /** Frames and bytes parked now. */
  parkedFrames: number;
  parkedBytes: number;
  /** Plain events lost to a full parking (waits are refused instead). */
  parkDropped: number;
  /** Answers and refusals sent, and the CLI's acknowledgements. */
  answersSent: number;
  acksAccepted: number;
  acksRefused: number;
  /** Lists of pending waits asked (after a resume), those that failed, the waits taken on from them. */
  listsSent: number;
  listsFailed: number;
  listed: number;
  /** Waits named again (an event and a list, either order) and not taken on twice. */
  duplicateWaits: number;
  /** Running turns found silent for the stall interval (30 s), then asked what is pending. */
  stalls: number;
  pendingRequests: number;
  sessions: number;
}

// ---------------------------------------------------------------------------
// The batch format between the WebAssembly engine and the JS client
// (`CoreEngine.feed`, `complete_open`, `release_session` return a JSON array
// of these). Not needed to use the client; typed for those who build on the
// engine directly.

/** What the engine decided about a wait the host must have answered. */
export interface ObligationFields {
  /** Give it back to `settle(obligation, false, answerJson)` or `settle(obligation, true, cause)`. */
  obligation: string;
  /** Which handler answers. */
  handler: HandlerKind;
  /** When (in the host's `now` milliseconds) the engine refuses in the handler's place; null: never. */
  deadline: number | null;
}

/** Fields the engine may add to any item. */
export interface EngineFields {
  /** The engine already answered this wait with its refusal. */
  refused?: RefusalCause;
  /** The CLI's reply to an answer the engine sent (true: accepted). */
  answerAck?: boolean;
}

/**
 * A `session.event` for a session of this client (`session`: its tag).
 * `CoreEngine.feed` gives a plain event (none of the engine's fields) as
 * its text and its session's tag instead; parked frames routed later, and
 * the events with an obligation, a refusal or `listed`, come as this.
 */
export interface EventItem extends EngineFields, Partial<ObligationFields> {
  route: "event";
  session: number;
  sessionId: string;
  type: string;
  event: SessionEvent;
  /**
   * A wait the CLI listed as pending (the engine asks after a resume),
   * taken on by the engine: `event` is the event it writes for the wait
   * (no `id`). Answer it; it is not one of the session's events.
   */
  listed?: true;
}

/** A `session.lifecycle` notification. */
export interface LifecycleItem extends EngineFields {
  route: "lifecycle";
  type: string;
  sessionId: string;
  params: LifecycleEvent;
}

/** The response to a request of this client: `result`, or `code`/`message`/`data`. */
export interface ResponseItem extends EngineFields {
  route: "response";
  id: number;
  result?: unknown;
  code?: number;
  message?: string;
  data?: unknown;
}

/** A server-to-client request (`idText`: its id's exact JSON text). */
export interface RequestItem extends EngineFields, Partial<ObligationFields> {
  route: "request";
  idText: string;
  method: string;
  params: unknown;
  session: number | null;
}

/** A notification other than events and lifecycle. */
export interface NotificationItem extends EngineFields {
  route: "notification";
  method: string;
  params: unknown;
  session: number | null;
}

/** A frame kept for a session whose id the server has yet to assign. */
export interface ParkedItem extends EngineFields {
  route: "parked";
  sessionId: string;
}

/** A frame for a session this client does not have (its wait, if any, was refused). */
export interface UnknownSessionItem extends EngineFields {
  route: "unknownSession";
  sessionId: string;
  method: string;
  type?: string;
}

/** A response nobody awaits, or (with `answerAck`) the CLI's reply to an answer. */
export interface UnmatchedResponseItem extends EngineFields {
  route: "unmatchedResponse";
  idText: string;
}

/** A message that is not valid JSON-RPC (answered with its error if it had an id). */
export interface MalformedItem extends EngineFields {
  route: "malformed";
  error: string;
}

/** A framing error (a bad header, an oversize frame, a cut frame at the end). */
export interface FrameErrorItem extends EngineFields {
  route: "frameError";
  error: string;
}

/** One routed item of a batch. */
export type RoutedItem =
  | EventItem
  | LifecycleItem
  | ResponseItem
  | RequestItem
  | NotificationItem
  | ParkedItem
  | UnknownSessionItem
  | UnmatchedResponseItem
  | MalformedItem
  | FrameErrorItem;

/** What `CoreEngine.complete_open` returns. */
export interface OpenOutcome {
  opened: boolean;
  error?: string;
  /** The parked frames this made routable. */
  routes: RoutedItem[];
}

/** One entry of `session.list`. */
export interface SessionMetadata {
  sessionId: string;
  startTime?: string;
  modifiedTime?: string;
  summary?: string;
  isRemote?: boolean;
  context?: Record<string, unknown>;
  [key: string]: unknown;
}

// ---------------------------------------------------------------------------
// Client and session

/**
 * One step of a recovery of the connection (Node's `autoRestart`, a
 * WebSocket's `autoReconnect`): the connection lost and why (the calls in
 * flight failed with it; `kind`: how it is made again: `"spawn-stdio"` or
 * `"spawn-tcp"`, the CLI started again, `"server"`, the server connected to
 * again, `"websocket"`, the socket opened again), each attempt and each
 * failure, each session resumed (`gapEvents`: the events the connection
 * lost, read back from its log and delivered before the live ones; `gap`:
 * `"whole"` when the log was read back to the last event delivered, so
 * every durable event of the gap was delivered, `"cut"` when that event
 * was not within the pages read, `"unmarked"` when no durable event had
 * been delivered before the loss: in both, events of the gap may be
 * missing; ephemeral events are never read back), then
 * recovered (`tookMs`: from the loss to every session resumed) or given up
 * (the connection ends with `cause`, every call and stream too).
 */
export type RecoveryEvent =
  | { type: "connectionLost"; cause: string; kind: string }
  | { type: "restarting"; attempt: number; afterMs: number }
  | { type: "attemptFailed"; attempt: number; error: string }
  | { type: "sessionResumed"; sessionId: string; gapEvents: number; gap: "whole" | "cut" | "unmarked" }
  | { type: "recovered"; sessions: number; tookMs: number }
  | { type: "gaveUp"; cause: string };

/** A connection to one Copilot CLI. */
export declare class CopilotClient {
  protected constructor();

  /**
   * Runs the client over any duplex byte stream: WHATWG streams of
   * Uint8Array (a WebSocket wrapped in streams, an in-page pipe) or Node
   * streams. Resolves after the handshake (`connect`, or `ping` for a CLI
   * without it; protocol version 3 required). The client takes the streams
   * over: `stop()` closes the writable and cancels the readable.
   */
  static fromStreams(readable: ByteReadable, writable: ByteWritable, options?: StreamOptions): Promise<CopilotClient>;

  /**
   * Connects through a WebSocket to a copilot-bridge (`ws://HOST:PORT/ws`),
   * presenting `options.token` as the subprotocol `copilot.token.<TOKEN>`;
   * the bridge pipes the socket to a CLI of its own. Resolves once the
   * handshake has succeeded; `stop()` closes the socket.
   */
  static connectWebSocket(url: string, options?: WebSocketOptions): Promise<CopilotClient>;

  /** Node.js only (import from the Node entry point); rejects elsewhere. */
  static start(options?: unknown): Promise<CopilotClient>;
  /** Node.js only (import from the Node entry point); rejects elsewhere. */
  static connect(options?: unknown): Promise<CopilotClient>;

  /** What the handshake learned. */
  readonly serverInfo: { protocolVersion: number; version?: string };
  /** For a TCP connection: where the CLI is. */
  readonly address: { host: string; port: number } | undefined;
  /** The process id of a CLI this client started (the one running now, after a recovery). */
  readonly pid: number | undefined;
  /** Whether the connection has ended. */
  readonly closed: boolean;

  /** Every `session.lifecycle` notification. Returns an unsubscribe function. */
  on(kind: "lifecycle", handler: (event: LifecycleEvent) => void): () => void;
  /** Every other notification. Returns an unsubscribe function. */
  on(kind: "notification", handler: (notification: Notification) => void): () => void;
  /** The end of the connection, with its reason. Returns an unsubscribe function. */
  on(kind: "disconnect", handler: (reason: string) => void): () => void;
  /**
   * Each step of the recoveries to come (Node's `autoRestart`, a WebSocket's `autoReconnect`). Returns a
   * function that removes the listener.
   */
  onRecovery(listener: (event: RecoveryEvent) => void): () => void;

  /** `ping`. */
  ping(message?: string): Promise<{ message?: string; timestamp?: number; protocolVersion?: number }>;
  /** `status.get`. */
  status(): Promise<{ version: string; protocolVersion: number }>;
  /** `auth.getStatus`: whether the CLI has a Copilot login. */
  authStatus(): Promise<{ isAuthenticated: boolean; authType?: string; host?: string; login?: string; statusMessage?: string }>;
  /** `session.list`. */
  listSessions(filter?: { cwd?: string; gitRoot?: string; repository?: string; branch?: string }): Promise<SessionMetadata[]>;
  /** `session.getLastId`: the most recently updated session, if any. */
  lastSessionId(): Promise<string | undefined>;
  /** `session.delete`: removes a session's persisted state; rejects if it failed. */
  deleteSession(sessionId: string): Promise<void>;
  /** Calls any method this client does not wrap. */
  call<R = any>(method: string, params?: Record<string, unknown>, options?: CallOptions): Promise<R>;
  /** The CLI's server methods as typed calls: `client.rpc.models.list()`. */
  readonly rpc: rpc.ServerApi;
  /** `models.list`: the models the CLI offers, with their capabilities, limits, policy and billing. */
  listModels(options?: CallOptions): Promise<rpc.Model[]>;
  /** The core's counters. */
  stats(): ClientStats;
  /** The events read and not yet taken by async iterators, and the pauses of reading over them. */
  backlog(): BacklogStats;

  /**
   * Creates a session. Its id is reserved in the core before
   * `session.create` is sent, so events racing the answer are delivered.
   */
  createSession(config?: SessionConfig): Promise<Session>;
  /**
   * Resumes a session by id (reserved before `session.resume` is sent). If
   * the id is open on this client, the new handle takes it over: the old
   * handle's streams end ("resumed by another handle on this client") and
   * the waits it had open are answered through the new one.
   */
  resumeSession(sessionId: string, config?: ResumeSessionConfig): Promise<Session>;

  /**
   * Stops cleanly within `graceMs` in total (default: `shutdownGraceMs`):
   * destroys the sessions still open (all at once), sends
   * `runtime.shutdown` to a CLI this client started, closes the connection,
   * waits for the CLI to exit and kills its process group when the grace is
   * over. Rejects with the first error met (a TimeoutError from a CLI that
   * did not answer), having stopped anyway.
   */
  stop(options?: { graceMs?: number }): Promise<void>;
  /** Stops at once: kills a CLI this client started and closes the connection. */
  forceStop(): void;
  /**
   * Resolves when the connection has ended, with the reason: the CLI's
   * exit (code or signal, and the end of its stderr), the stream's end or
   * failure, or this client stopping it.
   */
  closedPromise(): Promise<string>;
  /** The client's mode (see `ClientRequestOptions.mode`). */
  readonly mode: ClientMode;
  /** The default timeout of every call, in milliseconds. */
  readonly requestTimeoutMs: number;
  /** How long `destroy()` and `stop()` wait for the CLI, in milliseconds. */
  readonly shutdownGraceMs: number;
}

/**
 * An open session. Its events are delivered in order to every subscriber,
 * never dropped (queues are unbounded); the first subscriber also receives
 * the events that arrived before it. Iterating it (`for await`) yields its
 * events and ends when the session ends.
 */
export declare class Session implements AsyncIterable<TypedSessionEvent> {
  protected constructor();
  /** The session id. */
  readonly id: string;
  /** Where the CLI keeps the session's state, if it said. */
  readonly workspacePath: string | undefined;
  /** The whole answer of `session.create` / `session.resume`. */
  readonly createResult: Record<string, any> | undefined;
  /** Whether the session is open. */
  readonly active: boolean;
  /** What the CLI says the session can do, as it last said. */
  readonly capabilities: SessionCapabilities;
  /**
   * The canvas instances open in this session (experimental), as the CLI
   * last said, oldest first: set by a resume's answer, kept current by
   * `session.canvas.opened` / `closed` (changed before the event is delivered).
   */
  readonly openCanvases: OpenCanvasInstance[];
  /** The session's UI calls (confirm, select, input, elicitation). */
  readonly ui: SessionUi;

  /** Sends a prompt; resolves with the message id. The turn's events follow. */
  send(message: MessageOptions, options?: CallOptions): Promise<string>;
  /**
   * Sends a prompt and waits for `session.idle`. Resolves with the data of
   * the turn's last top-level `assistant.message` (undefined if none);
   * rejects with a SessionError on `session.error`, a TimeoutError after
   * `timeoutMs` (default: the client's `requestTimeoutMs`; it covers the
   * send too), a DisconnectedError if the session ends.
   */
  sendAndWait(message: MessageOptions, options?: CallOptions): Promise<AssistantMessageData | undefined>;
  /** Aborts the running turn (harmless when idle). */
  abort(reason?: string, options?: CallOptions): Promise<void>;
  /** The session's persisted events (`session.getMessages`). */
  getMessages(options?: CallOptions): Promise<SessionEvent[]>;
  /**
   * Delivery counters: events delivered (or kept), and events not kept for
   * a late first subscriber (past `MAX_KEPT_EVENTS` or 4 MiB).
   */
  stats(): { events: number; notKept: number };
  /** Calls a session method this client does not wrap; `sessionId` is added. */
  call<R = any>(method: string, params?: Record<string, unknown>, options?: CallOptions): Promise<R>;
  /** The CLI's session methods as typed calls, `sessionId` added: `session.rpc.model.switchTo({ modelId })`. */
  readonly rpc: rpc.SessionApi;
  /**
   * Destroys the session in the CLI; its event delivery then ends. The
   * CLI's answer is awaited for `timeoutMs` at most (default: the client's
   * `shutdownGraceMs`); the session is released then, answered or not.
   */
  destroy(options?: CallOptions): Promise<void>;

  /**
   * Calls `handler` for each event of `type` ("*" or no type: all). Returns
   * an unsubscribe function. Events are typed by the CLI's schema
   * (`TypedSessionEvent`, narrowed on `type`); a type the schema does not
   * list (a newer CLI's) subscribes too, with its data untyped.
   */
  on<T extends SessionEventType>(type: T, handler: (event: SessionEventOf<T>) => unknown): () => void;
  on(type: "*", handler: (event: TypedSessionEvent) => unknown): () => void;
  on(type: string, handler: (event: SessionEvent) => unknown): () => void;
  on(handler: (event: TypedSessionEvent) => unknown): () => void;
  /** An async iterator over the events; it ends when the session ends. */
  events(): AsyncIterableIterator<TypedSessionEvent>;
  [Symbol.asyncIterator](): AsyncIterableIterator<TypedSessionEvent>;
}

/** A permission handler that approves every prompt once. */
export declare function approveAll(request?: PermissionRequest): { kind: "approve-once" };

/** `decision` with context on how and where it was made (sent as `decisionContext`). */
export declare function withDecisionContext(
  decision: PermissionDecision | AttributedPermissionDecision,
  context: PermissionDecisionContext,
): AttributedPermissionDecision;

/**
 * Where the WebAssembly comes from: its bytes, a URL, a fetch `Response`
 * (or a promise of one), or a compiled `WebAssembly.Module`.
 */
export type WasmSource = ArrayBuffer | ArrayBufferView | URL | string | object | PromiseLike<object>;

/**
 * Loads the WebAssembly core. Browsers fetch `copilot_wasm_bg.wasm` next to
 * the glue (`new URL(..., import.meta.url)`, which bundlers follow) on first
 * use, Node reads it from the package; pass a source to load it another
 * way (before anything else uses it). Calling it is optional.
 */
export declare function loadWasm(input?: WasmSource): Promise<void>;

/** A stable extension identity for session participants that provide canvases (experimental). */
export interface ExtensionInfo {
  /** The namespace, such as `github-app`. */
  source: string;
  /** The provider's name within it. */
  name: string;
}

/** A stable identity of a host that supplies canvases (experimental); an id starting `connection:` is ignored by the CLI. */
export interface CanvasProviderIdentity {
  id: string;
  name?: string;
}

/** A canvas request of the CLI, as a canvas's handlers get it (experimental). */
export interface CanvasContext {
  sessionId: string;
  extensionId: string;
  canvasId: string;
  instanceId: string;
  /** `canvas.action.invoke` only. */
  actionName?: string;
  input?: unknown;
  host?: Record<string, unknown>;
  session?: Record<string, unknown>;
}

/** An action the agent may invoke on a canvas (experimental). Without a handler it answers `CanvasError.noHandler()`. */
export interface CanvasAction {
  name: string;
  description?: string;
  inputSchema?: Record<string, unknown>;
  handler?: (ctx: CanvasContext) => unknown | Promise<unknown>;
}

/** A canvas a session declares and serves (experimental). */
export interface Canvas {
  id: string;
  displayName: string;
  description: string;
  inputSchema?: Record<string, unknown>;
  actions?: CanvasAction[];
  /** Opens (or focuses) an instance: `{url?, title?, status?}`; nothing answers `{}`. */
  open: (ctx: CanvasContext) => unknown | Promise<unknown>;
  /** Told when an instance closes. */
  onClose?: (ctx: CanvasContext) => void | Promise<void>;
}

/** HTTP headers of a model request: lower-case name -> its values. */
export type CopilotHeaders = Record<string, string[]>;

/** What a {@link CopilotRequestHandler} knows of one model request (experimental). */
export interface CopilotRequestContext {
  readonly requestId: string;
  readonly sessionId?: string;
  readonly agentId?: string;
  readonly parentAgentId?: string;
  readonly interactionType?: string;
  readonly transport: "http" | "websocket";
  url: string;
  headers: CopilotHeaders;
  /** Aborts when the CLI cancels the request. */
  readonly signal: AbortSignal;
}

/**
 * Serves the CLI's model requests (experimental). Subclass it and override
 * `sendRequest`; one that overrides nothing sends each request on with
 * `fetch`. A throw gives the CLI an error for the request, which ends the
 * turn with a session.error that quotes it.
 */
export declare class CopilotRequestHandler {
  protected sendRequest(request: Request, ctx: CopilotRequestContext): Promise<Response>;
  /**
   * Opens a WebSocket model request (`ctx.transport` "websocket"): a
   * handler made with `ctx`, or nothing (the default): no WebSocket
   * support, and the request is refused so that the CLI sends it over HTTP.
   */
  protected openWebSocket(
    ctx: CopilotRequestContext,
  ): CopilotWebSocketHandler | undefined | Promise<CopilotWebSocketHandler | undefined>;
}

/** How a WebSocket closes: normally, or with an error (experimental). */
export declare class CopilotWebSocketCloseStatus {
  static readonly normalClosure: CopilotWebSocketCloseStatus;
  constructor(description?: string, errorCode?: string, error?: Error);
  readonly description?: string;
  readonly errorCode?: string;
  readonly error?: Error;
}

/**
 * One open WebSocket of a model request (experimental): it takes the CLI's
 * messages in order and sends the model's back; the CLI gets one end,
 * whichever side ends it first.
 */
export declare abstract class CopilotWebSocketHandler {
  protected constructor(context: CopilotRequestContext);
  protected readonly context: CopilotRequestContext;
  /** One message of the CLI (a string for a text frame, bytes for a binary one); a throw ends the WebSocket with it. */
  abstract sendRequestMessage(data: string | Uint8Array): void | Promise<void>;
  /** Sends one message to the CLI, after the ones before it. */
  sendResponseMessage(data: string | Uint8Array): Promise<void>;
  /** Ends the WebSocket once (with an error when `status` has one); called last by the client too. */
  close(status?: CopilotWebSocketCloseStatus): Promise<void>;
}

/** A canvas handler's failure: its `code` and message go to the CLI as the error's `data` (experimental). */
export declare class CanvasError extends Error {
  constructor(code: string, message: string);
  readonly code: string;
  /** The error of an action without a handler (`canvas_action_no_handler`). */
  static noHandler(): CanvasError;
}

/** Checks a canvas (a ConfigError if it cannot work) and returns it (experimental). */
export declare function createCanvas(options: Canvas): Canvas;

/**
 * A tool filter (`availableTools` or `excludedTools`) built from
 * source-qualified entries (`builtin:<name>`, `mcp:<name>`, `custom:<name>`,
 * each name a tool's or `*`); a name no tool can have throws a ConfigError.
 */
export declare class ToolSet {
  addBuiltIn(name: string): ToolSet;
  addBuiltIn(names: readonly string[]): ToolSet;
  addMcp(toolName: string): ToolSet;
  addCustom(name: string): ToolSet;
  /** A copy of the entries, in the order they were added. */
  toArray(): string[];
  toJSON(): string[];
}

/** Curated sets of built-in tools for `ToolSet.addBuiltIn`. */
export declare const BuiltInTools: {
  /** The built-in tools that act only within their session: safe for an empty-mode server shared by many users. */
  readonly Isolated: readonly string[];
};

/** A canvas instance open in a session, as the CLI describes it (experimental). */
export interface OpenCanvasInstance {
  instanceId: string;
  extensionId: string;
  canvasId: string;
  title?: string;
  status?: string;
  url?: string;
  input?: unknown;
  [member: string]: unknown;
}
