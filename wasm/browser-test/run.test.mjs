// Loads the web build of copilot-wasm (wasm/npm, built by scripts/build-wasm)
// from a page on 127.0.0.1 in headless Chromium (Debian's /usr/bin/chromium,
// driven by playwright-core) and checks that a session runs over
// `CopilotClient.fromStreams` against an in-page fake CLI: events arrive
// (one of them before the create answer), a permission prompt and a tool
// call are answered.

import { test } from "node:test";
import assert from "node:assert/strict";
import { createServer } from "node:http";
import { readFile } from "node:fs/promises";
import { existsSync } from "node:fs";
import { extname, join, normalize } from "node:path";
import { fileURLToPath } from "node:url";

import { chromium } from "playwright-core";

const here = fileURLToPath(new URL(".", import.meta.url));
const pkg = join(here, "..", "npm");
const chromiumPath = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium";
const types = { ".html": "text/html", ".js": "text/javascript", ".wasm": "application/wasm", ".json": "application/json" };

/** Serves this folder at / and the npm package at /pkg/. */
function serve() {
  const server = createServer(async (req, res) => {
    const path = normalize(decodeURIComponent(new URL(req.url, "http://x").pathname));
    const file = path.startsWith("/pkg/") ? join(pkg, path.slice(5)) : join(here, path);
    try {
      const body = await readFile(file);
      res.writeHead(200, { "content-type": types[extname(file)] ?? "application/octet-stream" });
      res.end(body);
    } catch {
      res.writeHead(404).end();
    }
  });
  return new Promise((resolve) => server.listen(0, "127.0.0.1", () => resolve(server)));
}

test("a session runs in headless Chromium over fromStreams", async () => {
  assert.ok(existsSync(chromiumPath), `Chromium is missing at ${chromiumPath}: apt-get install chromium`);
  assert.ok(existsSync(join(pkg, "dist", "copilot_wasm_bg.wasm")), "build the package first: scripts/build-wasm");
  const server = await serve();
  const browser = await chromium.launch({
    executablePath: chromiumPath,
    headless: true,
    args: [
      "--no-sandbox",
      "--disable-gpu",
      "--disable-quic",
      "--no-first-run",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
    ],
  });
  try {
    const page = await browser.newPage();
    const errors = [];
    page.on("pageerror", (e) => errors.push(String(e)));
    await page.goto(`http://127.0.0.1:${server.address().port}/page.html`);
    await page.waitForFunction(() => window.__result, null, { timeout: 30000 });
    const result = await page.evaluate(() => window.__result);
    assert.deepEqual(errors, []);
    assert.ok(result.ok, result.error);
    assert.match(result.userAgent, /HeadlessChrome|Chrome/);
    assert.equal(result.reply, "The tool said: Sunny in Paris");
    assert.deepEqual(result.calls, [{ city: "Paris" }], "the tool handler got the parsed arguments");
    assert.deepEqual(result.permission, { kind: "approve-once" });
    assert.equal(result.requestPermission, true);
    assert.deepEqual(result.toolsOffered, ["get_weather"]);
    for (const t of ["session.info", "session.start", "permission.requested", "external_tool.requested", "assistant.message", "session.idle"]) {
      assert.ok(result.types.includes(t), `${t} missing from ${result.types}`);
    }
    assert.equal(result.types[0], "session.info", "the event sent before the create answer came first");
  } finally {
    await browser.close();
    server.close();
  }
});
