// ToolSet: a session's tool filter (`availableTools` or `excludedTools`)
// built from source-qualified entries, as the official SDKs' builder of
// the same name builds it. The sources, the characters of a name and the
// isolated built-in tools are the core's (policy.json `options`).

import { POLICY } from "./constants.js";
import { ConfigError } from "./errors.js";

const o = POLICY.options;
const NAME = new RegExp(`^[${o.toolNameChars}]+$`);
const [BUILTIN, MCP, CUSTOM] = o.toolSources;

/**
 * A list of tool filter entries (`builtin:<name>`, `mcp:<name>`,
 * `custom:<name>`; each name a tool's or `*` for every tool of its source).
 * The CLI classifies a tool by where it was registered, so `builtin:bash`
 * matches only the CLI's own `bash`. Give it as `availableTools` or
 * `excludedTools`; it is sent as its entries.
 */
export class ToolSet {
  #items = [];

  /** Adds a built-in tool by name (or `*`), or each of a list of names. */
  addBuiltIn(nameOrNames) {
    for (const name of typeof nameOrNames === "string" ? [nameOrNames] : nameOrNames) this.#add(BUILTIN, name);
    return this;
  }

  /** Adds an MCP server's tool by the CLI's name for it (such as `github-list_issues`), or `*`. */
  addMcp(toolName) {
    return this.#add(MCP, toolName);
  }

  /** Adds one of the client's own tools (or a custom agent's) by name, or `*`. */
  addCustom(name) {
    return this.#add(CUSTOM, name);
  }

  /** A copy of the entries, in the order they were added. */
  toArray() {
    return [...this.#items];
  }

  /** The entries, as a session's options send them. */
  toJSON() {
    return this.toArray();
  }

  #add(source, name) {
    if (name !== o.toolSourceWildcard && !(typeof name === "string" && NAME.test(name))) {
      throw new ConfigError(`invalid ${source} tool name ${JSON.stringify(name)}${o.toolNameRefusal}`);
    }
    this.#items.push(`${source}:${name}`);
    return this;
  }
}

/** Curated sets of built-in tools for `ToolSet.addBuiltIn`. */
export const BuiltInTools = Object.freeze({
  /**
   * The built-in tools that act only within their session (no host files
   * outside it, no other session, no host environment, no network): safe
   * for an empty-mode server shared by many users.
   */
  Isolated: Object.freeze([...o.builtinToolsIsolated]),
});
