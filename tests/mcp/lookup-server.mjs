#!/usr/bin/env node
// A tiny MCP server over stdio (newline-delimited JSON-RPC), for tests: no
// dependency, no network. It offers one tool, `lookup_code`, which answers
// `code of <name>: <CODE>` where CODE is the name reversed and upper-cased,
// so a test can tell the answer came from here.

import { createInterface } from "node:readline";

const TOOL = {
  name: "lookup_code",
  description: "Looks up the code of a name.",
  inputSchema: {
    type: "object",
    properties: { name: { type: "string", description: "The name to look up." } },
    required: ["name"],
  },
};

const reply = (id, result) => process.stdout.write(`${JSON.stringify({ jsonrpc: "2.0", id, result })}\n`);
const fail = (id, code, message) =>
  process.stdout.write(`${JSON.stringify({ jsonrpc: "2.0", id, error: { code, message } })}\n`);

createInterface({ input: process.stdin }).on("line", (line) => {
  if (!line.trim()) return;
  let m;
  try {
    m = JSON.parse(line);
  } catch {
    return fail(null, -32700, "parse error");
  }
  if (m.id === undefined) return; // A notification (`notifications/initialized`, ...).
  switch (m.method) {
    case "initialize":
      return reply(m.id, {
        protocolVersion: m.params?.protocolVersion ?? "2025-03-26",
        capabilities: { tools: {} },
        serverInfo: { name: "lookup", version: "1.0.0" },
      });
    case "ping":
      return reply(m.id, {});
    case "tools/list":
      return reply(m.id, { tools: [TOOL] });
    case "tools/call": {
      const name = String(m.params?.arguments?.name ?? "");
      const code = [...name].reverse().join("").toUpperCase();
      return reply(m.id, { content: [{ type: "text", text: `code of ${name}: ${code}` }] });
    }
    default:
      return fail(m.id, -32601, `method not found: ${m.method}`);
  }
});
