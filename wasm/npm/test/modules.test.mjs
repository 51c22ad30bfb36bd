// The client's modules, as installed: their imports go one way (no module
// needs a module that needs it back), the layers at the bottom import
// nothing above them, and no hand-written module is over 600 lines.

import assert from "node:assert/strict";
import { readFileSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";

const pkg = fileURLToPath(import.meta.resolve("copilot-wasm/package.json")).replace(/package\.json$/, "");
const src = join(pkg, "src");

/** The hand-written modules (generated code aside), by file name. */
const modules = readdirSync(src).filter((f) => f.endsWith(".js"));

/** The modules of src/ a module imports or re-exports, statically or not. */
function importsOf(text) {
  const found = new Set();
  const patterns = [/\bfrom\s+["']\.\/([\w-]+\.js)["']/g, /\bimport\s*\(\s*["']\.\/([\w-]+\.js)["']\s*\)/g];
  for (const pattern of patterns) {
    for (const m of text.matchAll(pattern)) found.add(m[1]);
  }
  return [...found];
}

const graph = new Map(modules.map((f) => [f, importsOf(readFileSync(join(src, f), "utf8"))]));

/** Every module `from` reaches through imports. */
function reach(from) {
  const seen = new Set();
  const stack = [...graph.get(from)];
  while (stack.length > 0) {
    const next = stack.pop();
    if (seen.has(next)) continue;
    seen.add(next);
    stack.push(...(graph.get(next) ?? []));
  }
  return seen;
}

test("the client's modules import one way: none reaches itself", () => {
  assert.ok(graph.size >= 10, `${graph.size} modules`);
  for (const f of modules) assert.ok(!reach(f).has(f), `${f} imports a module that imports it back`);
});

test("the bottom layers import nothing above them", () => {
  // What each may reach, at most.
  // config.js, modes.js and errors.js reach nothing built (a test of the
  // workspace reads config.js on its own, before any build).
  const below = {
    "constants.js": [],
    "errors.js": [],
    "transport.js": [],
    "wasm.js": ["errors.js"],
    "websocket.js": ["errors.js"],
    "modes.js": ["errors.js"],
    "config.js": ["errors.js", "modes.js"],
    "driver.js": ["errors.js", "constants.js"],
  };
  for (const [module, allowed] of Object.entries(below)) {
    const extra = [...reach(module)].filter((m) => !allowed.includes(m));
    assert.deepEqual(extra, [], `${module} reaches ${extra.join(", ")}`);
  }
  for (const f of ["config.js", ...reach("config.js")]) {
    assert.doesNotMatch(readFileSync(join(src, f), "utf8"), /from\s+["']\.\.\/dist\//, `${f} imports what is built`);
  }
  // Nothing but the entry points reaches the client, and nothing reaches an entry point but the other.
  for (const f of modules) {
    if (!["client.js", "index.js", "node.js"].includes(f)) assert.ok(!reach(f).has("client.js"), `${f} imports the client`);
    if (f !== "node.js") assert.ok(!reach(f).has("node.js") && !reach(f).has("index.js"), `${f} imports an entry point`);
  }
});

test("no hand-written module of the client is over 600 lines", () => {
  for (const f of modules) {
    const lines = readFileSync(join(src, f), "utf8").split("\n").length - 1;
    assert.ok(lines <= 600, `${f} has ${lines} lines`);
  }
});
