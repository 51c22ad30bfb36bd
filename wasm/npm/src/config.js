// The session config of `createSession` / `resumeSession`: which keys exist
// (the Rust crate's `SessionConfig` has the same options, in snake_case),
// how they are checked, and what goes on the wire. Every option left unset
// is left out of the request, so the CLI's default applies; what the
// official SDKs always send is sent too. No wasm here: this module is read
// on its own by the tests that compare the two languages.

import { ConfigError } from "./errors.js";
import { clientMode } from "./modes.js";

/** Options of both `session.create` and `session.resume`. */
export const SESSION_OPTIONS = Object.freeze([
  "clientName",
  "model",
  "reasoningEffort",
  "reasoningSummary",
  "contextTier",
  "modelCapabilities",
  "enableExperimentalMode",
  "workingDirectory",
  "additionalDirectories",
  "configDirectory",
  "enableConfigDiscovery",
  "streaming",
  "includeSubAgentStreamingEvents",
  "systemMessage",
  "availableTools",
  "excludedTools",
  "toolSearch",
  "excludedBuiltinAgents",
  "provider",
  "capi",
  "providers",
  "models",
  "mcpServers",
  "mcpOAuthTokenStorage",
  "disabledMcpServers",
  "enableMcpApps",
  "githubMcpToolConfig",
  "customAgents",
  "customAgentsLocalOnly",
  "defaultAgent",
  "agent",
  "skillDirectories",
  "disabledSkills",
  "pluginDirectories",
  "instructionDirectories",
  "infiniteSessions",
  "memory",
  "largeOutput",
  "sessionLimits",
  "enableSessionTelemetry",
  "enableCitations",
  "enableFileChangeTracking",
  "gitHubToken",
  "enableManagedSettings",
  "managedSettings",
  "skipEmbeddingRetrieval",
  "embeddingCacheStorage",
  "organizationCustomInstructions",
  "enableOnDemandInstructionDiscovery",
  "enableFileHooks",
  "enableHostGitOperations",
  "enableSessionStore",
  "enableSkills",
  "remoteSession",
  "expAssignments",
  // Sent once the session is open, in session.options.update (modes.js).
  "skipCustomInstructions",
  "coauthorEnabled",
  "manageScheduleEnabled",
  "canvases",
  "requestCanvasRenderer",
  "requestExtensions",
  "extensionSdkPath",
  "extensionInfo",
  "canvasProvider",
]);

/** Options only `createSession` takes. */
export const CREATE_ONLY_OPTIONS = Object.freeze(["sessionId", "serverAssignedId", "cloud"]);

/** Options only `resumeSession` takes. */
export const RESUME_ONLY_OPTIONS = Object.freeze(["suppressResumeEvent", "continuePendingWork", "openCanvases"]);

/**
 * The handler keys, each with the kind of wait it answers (the core's
 * handler kind names). `systemMessage`, `provider` and `canvases` are
 * options that also carry handlers: section transforms, the bearer-token
 * callback and the canvases' handlers.
 */
export const HANDLER_OPTIONS = Object.freeze({
  onPermission: "permission",
  tools: "tool",
  onUserInput: "userInput",
  onElicitation: "elicitation",
  onMcpOAuth: "mcpOAuth",
  onExitPlanMode: "exitPlanMode",
  commands: "command",
  systemMessage: "systemMessageTransform",
  provider: "providerToken",
  hooks: "hooks",
  canvases: "canvas",
});

/** The client's own handler options, by the kind each answers (inference.js). */
export const CLIENT_HANDLER_OPTIONS = Object.freeze({ requestHandler: "llmInference" });

/**
 * The handler kinds answered by `requestHandlers`, by method or event type:
 * every kind of the engine's answer table without a handler key above.
 */
export const GENERIC_HANDLER_KINDS = Object.freeze([
  "mcpHeadersRefresh",
  "autoModeSwitch",
  "sampling",
  "sessionLimits",
  "queuedCommand",
  "gitHubToken",
  "sessionFs",
  "skillProvider",
  "workflow",
  "tasks",
  "host",
  "extensionLaunch",
  "uiThread",
  "installations",
]);

/** Keys checked and run by hooks.js: the generic request handlers, by name. */
export const RESERVED_OPTIONS = Object.freeze(["requestHandlers"]);

const CALLBACKS = ["onPermission", "onUserInput", "onElicitation", "onMcpOAuth", "onExitPlanMode"];

function allowedKeys(resuming) {
  return new Set([
    ...SESSION_OPTIONS,
    ...(resuming ? RESUME_ONLY_OPTIONS : CREATE_ONLY_OPTIONS),
    ...Object.keys(HANDLER_OPTIONS),
    ...RESERVED_OPTIONS,
  ]);
}

/**
 * Throws a TypeError naming the first key `createSession` (or, with
 * `resuming`, `resumeSession`) does not take, and a ConfigError for a
 * config that cannot work.
 */
export function checkConfig(config, resuming = false) {
  if (config === null || typeof config !== "object") throw new ConfigError("a session config is an object");
  const allowed = allowedKeys(resuming);
  const method = resuming ? "resumeSession" : "createSession";
  for (const key of Object.keys(config)) {
    if (!allowed.has(key)) {
      const other = resuming ? CREATE_ONLY_OPTIONS.includes(key) : RESUME_ONLY_OPTIONS.includes(key);
      throw new TypeError(
        other
          ? `${key} is an option of ${resuming ? "createSession" : "resumeSession"}, not of ${method}`
          : `${method}: unknown session config key "${key}"`,
      );
    }
  }
  for (const h of CALLBACKS) {
    if (config[h] !== undefined && typeof config[h] !== "function") throw new ConfigError(`${h} must be a function`);
  }
  const { tools = [], commands = [], systemMessage, provider, canvases } = config;
  if (canvases !== undefined) checkCanvases(canvases);
  if (!Array.isArray(tools)) throw new ConfigError("tools must be an array");
  const names = new Set();
  for (const t of tools) {
    if (!t || typeof t.name !== "string" || !t.name) throw new ConfigError("every tool needs a name");
    if (typeof t.handler !== "function") throw new ConfigError(`the tool ${t.name} needs a handler function`);
    if (names.has(t.name)) throw new ConfigError(`two tools are named ${t.name}`);
    names.add(t.name);
  }
  if (!Array.isArray(commands)) throw new ConfigError("commands must be an array");
  const commandNames = new Set();
  for (const c of commands) {
    if (!c || typeof c.name !== "string" || !c.name) throw new ConfigError("every command needs a name");
    if (typeof c.handler !== "function") throw new ConfigError(`the command ${c.name} needs a handler function`);
    if (commandNames.has(c.name)) throw new ConfigError(`two commands are named ${c.name}`);
    commandNames.add(c.name);
  }
  if (systemMessage !== undefined) {
    const mode = systemMessage?.mode ?? "append";
    if (!["append", "replace", "customize"].includes(mode)) {
      throw new ConfigError(`systemMessage.mode is append, replace or customize, not ${mode}`);
    }
    if (mode === "replace" && typeof systemMessage.content !== "string") {
      throw new ConfigError("systemMessage in replace mode needs its content");
    }
  }
  if (provider !== undefined && typeof provider?.baseUrl !== "string") {
    throw new ConfigError("provider needs a baseUrl");
  }
  if (provider?.bearerTokenProvider !== undefined && typeof provider.bearerTokenProvider !== "function") {
    throw new ConfigError("provider.bearerTokenProvider must be a function");
  }
}

/** Throws a ConfigError for a canvas that cannot work. */
export function checkCanvas(c) {
  if (!c || typeof c.id !== "string" || !c.id) throw new ConfigError("every canvas needs an id");
  if (typeof c.open !== "function") throw new ConfigError(`the canvas ${c.id} needs an open function`);
  if (c.onClose !== undefined && typeof c.onClose !== "function") {
    throw new ConfigError(`the onClose of canvas ${c.id} must be a function`);
  }
  if (c.actions !== undefined && !Array.isArray(c.actions)) {
    throw new ConfigError(`the actions of canvas ${c.id} are an array`);
  }
  for (const a of c.actions ?? []) {
    if (!a || typeof a.name !== "string" || !a.name) {
      throw new ConfigError(`every action of canvas ${c.id} needs a name`);
    }
    if (a.handler !== undefined && typeof a.handler !== "function") {
      throw new ConfigError(`the action ${a.name} of canvas ${c.id}: its handler must be a function`);
    }
  }
}

/** Throws a ConfigError for canvases that cannot work (ids unique). */
export function checkCanvases(canvases) {
  if (!Array.isArray(canvases)) throw new ConfigError("canvases must be an array");
  const ids = new Set();
  for (const c of canvases) {
    checkCanvas(c);
    if (ids.has(c.id)) throw new ConfigError(`two canvases have the id ${c.id}`);
    ids.add(c.id);
  }
}

/** What is declared on the open: each canvas without its handlers. */
export function canvasDeclarations(canvases) {
  return canvases.map((c) => {
    const d = { id: c.id, displayName: c.displayName, description: c.description };
    if (c.inputSchema !== undefined) d.inputSchema = c.inputSchema;
    if (c.actions?.length) {
      d.actions = c.actions.map(({ name, description, inputSchema }) => {
        const w = { name };
        if (description !== undefined) w.description = description;
        if (inputSchema !== undefined) w.inputSchema = inputSchema;
        return w;
      });
    }
    return d;
  });
}

/** The section transforms of a config's system message, by section id. */
export function sectionTransforms(config) {
  const sections = config.systemMessage?.mode === "customize" ? (config.systemMessage.sections ?? {}) : {};
  const transforms = new Map();
  for (const [id, s] of Object.entries(sections)) {
    if (typeof s?.action === "function") transforms.set(id, s.action);
  }
  return transforms;
}

// `d` below is the core's config defaults (`POLICY.config`, see
// wasm/src/policy.rs): an MCP server's type from the members it has, the
// args of a local one, the wire name of its working directory, and a
// provider's default type and token-callback flag, a system message's
// default mode and the action of a section the client rewrites.

function wireMcpServer(server, d) {
  const [dirName, dirWire] = d.mcpWorkingDirectory;
  const { [dirName]: workingDirectory, type, ...rest } = server;
  const inferred = d.mcpTypeByMember.find(([member]) => server[member] !== undefined)?.[1];
  const wire = { type: type ?? inferred ?? d.mcpDefaultType, ...rest };
  if (d.mcpLocalTypes.includes(wire.type)) wire.args = rest.args ?? [];
  if (workingDirectory !== undefined) wire[dirWire] = String(workingDirectory);
  return wire;
}

function wireMcpServers(servers, d) {
  return Object.fromEntries(Object.entries(servers).map(([name, s]) => [name, wireMcpServer(s, d)]));
}

function wireSystemMessage(m, d) {
  if (m.mode !== "customize") return m.mode === undefined ? { mode: d.systemMessageDefaultMode, ...m } : { ...m };
  const sections = {};
  for (const [id, s] of Object.entries(m.sections ?? {})) {
    if (!s) continue;
    sections[id] =
      typeof s.action === "function"
        ? { action: d.sectionTransformAction }
        : s.content === undefined
          ? { action: s.action }
          : { action: s.action, content: s.content };
  }
  const wire = { mode: "customize", sections };
  if (m.content !== undefined) wire.content = m.content;
  return wire;
}

function wireProvider(p, d) {
  const { bearerTokenProvider, ...rest } = p;
  const wire = { type: d.providerDefaultType, ...rest };
  if (bearerTokenProvider) wire[d.providerTokenCallbackFlag] = true;
  return wire;
}

function wireLargeOutput(config, d) {
  const wire = { ...config };
  for (const [name, wireName] of d.largeOutputRenames) {
    if (name in wire) {
      const value = wire[name];
      delete wire[name];
      if (value !== undefined) wire[wireName] = value;
    }
  }
  return wire;
}

/** How a value is written where it is not sent as given (the wire names are the core's). */
const WIRE_VALUE = {
  largeOutput: wireLargeOutput,
  configDirectory: String,
  workingDirectory: String,
  systemMessage: wireSystemMessage,
  provider: wireProvider,
  mcpServers: wireMcpServers,
  extensionSdkPath: String,
  // The declarations; an empty list is left out, as the Rust host leaves it.
  canvases: (v) => (v.length ? canvasDeclarations(v) : undefined),
  customAgents: (v, d) => v.map((a) => (a.mcpServers ? { ...a, mcpServers: wireMcpServers(a.mcpServers, d) } : a)),
};

/** Whether a handler of each key is set, by the key's handler kind. */
const HANDLER_SET = {
  tools: (v) => Array.isArray(v) && v.length > 0,
  commands: (v) => Array.isArray(v) && v.length > 0,
  systemMessage: (v) => Object.values(v?.sections ?? {}).some((s) => typeof s?.action === "function"),
  provider: (v) => typeof v?.bearerTokenProvider === "function",
  hooks: (v) => Boolean(v) && Object.values(v).some((f) => typeof f === "function"),
  canvases: (v) => Array.isArray(v) && v.length > 0,
};

/** The handler kinds (the engine's names) a config sets a handler for. */
export function handlerKindsOf(config) {
  return Object.entries(HANDLER_OPTIONS)
    .filter(([key]) => (HANDLER_SET[key] ?? ((v) => typeof v === "function"))(config[key]))
    .map(([, kind]) => kind);
}

/**
 * The user's options of session.create / session.resume under their wire
 * names; the engine adds which waits the session answers and the defaults
 * (`CoreEngine.openParams`). `names` is the core's option table
 * (`POLICY.options`): `wire` (an option's wire name where it differs,
 * `null`: not sent) and `onlyWhenTrue` (sent as `true` when set, else left
 * out); `defaults` the core's config defaults (`POLICY.config`). Given by
 * the caller, so that this module loads before any build.
 */
export function sessionParams(config, id, resuming, { wire, onlyWhenTrue }, defaults) {
  const p = {};
  if (id != null) p.sessionId = id;
  if (config.tools?.length) {
    p.tools = config.tools.map((t) => {
      const d = { name: t.name, description: t.description ?? "", parameters: t.parameters ?? { type: "object" } };
      if (t.skipPermission) d.skipPermission = true;
      if (t.overridesBuiltInTool) d.overridesBuiltInTool = true;
      return d;
    });
  }
  if (config.commands?.length) {
    p.commands = config.commands.map((c) => ({ name: c.name, description: c.description ?? "" }));
  }
  const options = [...SESSION_OPTIONS, ...(resuming ? RESUME_ONLY_OPTIONS : ["cloud"])];
  for (const key of options) {
    const value = config[key];
    if (value === undefined || value === null) continue;
    const name = Object.hasOwn(wire, key) ? wire[key] : key;
    if (name === null) continue;
    if (onlyWhenTrue.includes(key)) {
      if (value) p[name] = true;
    } else {
      p[name] = WIRE_VALUE[key] ? WIRE_VALUE[key](value, defaults) : value;
    }
  }
  return p;
}

/**
 * `value` (parsed JSON) with the members of every object in code-point
 * order of their names: the order the Rust host sends (a serde_json map),
 * so both clients send the same bytes for the same open params
 * (tests/tests/same_bytes.rs). JSON gives member order no meaning.
 */
export function sortedMembers(value) {
  if (Array.isArray(value)) return value.map(sortedMembers);
  if (value === null || typeof value !== "object") return value;
  const sorted = {};
  for (const key of Object.keys(value).sort()) sorted[key] = sortedMembers(value[key]);
  return sorted;
}

/**
 * Throws a ConfigError for the first option of `options` that only starts
 * a CLI (`names`: the core's `spawnOnlyOptions`), for a client that
 * connects to a CLI it did not start.
 */
export function checkConnectOptions(options, { spawnOnlyOptions, spawnOnlyRefusal }) {
  for (const name of spawnOnlyOptions) {
    if (options?.[name] !== undefined) throw new ConfigError(`${spawnOnlyRefusal}${name}`);
  }
}

/**
 * The options every client factory hands the client as given, the mode
 * checked (`m`: the core's `POLICY.modes`): deadlines, bounds, handlers,
 * the logger, the trace context.
 */
export function factoryOptions(o, m) {
  const { logger, startupTimeoutMs, maxFrameBytes, requestTimeoutMs, shutdownGraceMs, handlerTimeoutMs } = o;
  const { requestHandlers, requestHandler, onGetTraceContext } = o;
  const mode = clientMode(o, m);
  return {
    ...{ logger, startupTimeoutMs, maxFrameBytes, requestTimeoutMs, shutdownGraceMs, handlerTimeoutMs },
    ...{ requestHandlers, requestHandler, onGetTraceContext, mode },
  };
}
