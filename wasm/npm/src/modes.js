// The client's mode ("copilot-cli", the default, or "empty"), as the core
// decides it (`POLICY.modes`, see wasm/src/policy_modes.rs): what an
// empty-mode client refuses, the defaults its sessions take under the
// user's options, its system message without the host's environment, and
// the options patched once a session is open (in any mode). No wasm here:
// the tests that compare the two languages read this module on its own.

import { ConfigError } from "./errors.js";

/** The mode named by the client's options; throws a ConfigError for an unknown one. */
export function clientMode(options, m) {
  const mode = options?.mode ?? m.names[0];
  if (!m.names.includes(mode)) throw new ConfigError(`mode is ${m.names.map((n) => JSON.stringify(n)).join(" or ")}, not ${JSON.stringify(mode)}`);
  return mode;
}

/**
 * The variables the mode gives a started CLI, after the user's environment:
 * `baseDirectory` as its state folder, and in empty mode no system
 * keychain. An empty-mode client without `baseDirectory` is refused.
 */
export function modeEnv({ baseDirectory }, mode, m) {
  const env = {};
  if (baseDirectory !== undefined && baseDirectory !== null) env[m.baseDirectoryEnv] = String(baseDirectory);
  if (mode === m.empty) {
    if (env[m.baseDirectoryEnv] === undefined) throw new ConfigError(m.emptyNeedsBaseDirectory);
    for (const [name, value] of m.emptyEnv) env[name] = value;
  }
  return env;
}

/**
 * Throws a ConfigError, before anything is sent, for a tool filter that
 * is not a list of names (or a ToolSet), one that matches no tool (a bare
 * wildcard; `o` is the core's `POLICY.options`), and for a session the
 * mode cannot open (an empty-mode session must name its tools).
 */
export function checkTools(config, mode, o, m) {
  for (const option of o.toolFilters) {
    let filter = config[option];
    if (filter === undefined || filter === null) continue;
    if (typeof filter.toJSON === "function") filter = filter.toJSON();
    if (!Array.isArray(filter) || !filter.every((t) => typeof t === "string")) {
      throw new ConfigError(`${option} is a list of tool names or a ToolSet`);
    }
    if (filter.includes(o.bareToolWildcard)) {
      throw new ConfigError(`${option}${o.bareToolWildcardRefusal}`);
    }
  }
  const tools = config[m.emptyToolsOption];
  if (mode === m.empty && (tools === undefined || tools === null)) throw new ConfigError(m.emptyNeedsAvailableTools);
}

/**
 * The system message as the mode sends it: in empty mode without the
 * section `m.emptySection` unless the application said what happens to it
 * (a replaced prompt, or a customized one that names the section).
 * `defaultMode` is the mode of a system message that names none.
 */
function systemMessageForMode(given, m, defaultMode) {
  const [section, action] = m.emptySection;
  const mode = given ? (given.mode ?? defaultMode) : undefined;
  if (m.systemMessageKeptModes.includes(mode)) return given;
  if (mode === m.systemMessageCustomize) {
    if (given.sections?.[section]) return given;
    return { ...given, sections: { ...given.sections, [section]: { action } } };
  }
  const wire = { mode: m.systemMessageCustomize, sections: { [section]: { action } } };
  if (given?.content !== undefined) wire.content = given.content;
  return wire;
}

/**
 * The session config as the mode opens it: in empty mode each option of
 * `m.emptyDefaults` the user left unset (or null) takes its default, and
 * the system message loses the host's environment. `defaults` is the
 * core's config defaults (`POLICY.config`).
 */
export function configForMode(config, mode, m, defaults) {
  if (mode !== m.empty) return config;
  const moded = { ...config };
  for (const [name, value] of Object.entries(m.emptyDefaults)) {
    if (moded[name] === undefined || moded[name] === null) moded[name] = structuredClone(value);
  }
  moded.systemMessage = systemMessageForMode(config.systemMessage, m, defaults.systemMessageDefaultMode);
  return moded;
}

/**
 * The params of `m.optionsUpdate` once session `sessionId` is open: the
 * user's value of each option of `m.optionsUpdateMembers`, else its
 * empty-mode default (empty mode only), then `m.emptyUpdateFixed` in
 * empty mode; `null` when there is nothing to patch.
 */
export function optionsUpdate(sessionId, config, mode, m) {
  const empty = mode === m.empty;
  const patch = { sessionId };
  for (const [name, emptyDefault] of m.optionsUpdateMembers) {
    const given = config[name];
    if (given !== undefined && given !== null) patch[name] = Boolean(given);
    else if (empty) patch[name] = emptyDefault;
  }
  if (empty) Object.assign(patch, structuredClone(m.emptyUpdateFixed));
  return Object.keys(patch).length > 1 ? patch : null;
}

/**
 * Sends the options patch of a session just opened, if there is one
 * (`request(method, params)`); when it fails, destroys the session (it
 * would run with the CLI's defaults) and rejects with the patch's error.
 */
export async function patchOptions(session, config, mode, m, request) {
  const update = optionsUpdate(session.id, config, mode, m);
  if (!update) return;
  try {
    await request(m.optionsUpdate, update);
  } catch (e) {
    await session.destroy().catch(() => {});
    throw e;
  }
}
