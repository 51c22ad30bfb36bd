#!/usr/bin/env node
// `npm run test:packed`: runs the Node tests against the package exactly as
// a user gets it. Builds dist/ with scripts/build-wasm if it is missing
// (and the test binaries with cargo if they are), packs the package with
// `npm pack`, installs the tarball into a fresh temporary project, copies
// test/ and examples/ there and runs `node --test` in it, one file at a
// time so that the flood's figures are not disturbed.
//
// COPILOT_WASM_REBUILD=1 rebuilds dist/ and the binaries even if present;
// COPILOT_WASM_KEEP=1 keeps the temporary project.

import { spawnSync } from "node:child_process";
import { cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const pkgDir = resolve(fileURLToPath(new URL("..", import.meta.url)));
const root = resolve(pkgDir, "../..");
const rebuild = Boolean(process.env.COPILOT_WASM_REBUILD);

function run(command, args, options = {}) {
  console.log(`$ ${command} ${args.join(" ")}`);
  const r = spawnSync(command, args, { stdio: "inherit", ...options });
  if (r.status !== 0) {
    console.error(`test:packed: ${command} failed (${r.status ?? r.signal})`);
    process.exit(r.status || 1);
  }
  return r;
}

if (rebuild || !existsSync(join(pkgDir, "dist", "copilot_wasm_bg.wasm"))) {
  run(join(root, "scripts", "build-wasm"), [], { cwd: root });
}
const binaries = ["fake_cli", "scripted_model", "conformance_cli"].map((b) => join(root, "target", "debug", b));
if (rebuild || !binaries.every((b) => existsSync(b))) {
  run("cargo", ["build", "-p", "copilot-tests", "--bins"], { cwd: root });
}

const work = mkdtempSync(join(tmpdir(), "copilot-wasm-packed-"));
const packed = spawnSync("npm", ["pack", "--json", "--pack-destination", work], {
  cwd: pkgDir,
  encoding: "utf8",
  stdio: ["ignore", "pipe", "inherit"],
});
if (packed.status !== 0) {
  console.error("test:packed: npm pack failed");
  process.exit(1);
}
const [info] = JSON.parse(packed.stdout);
const tarball = join(work, info.filename);
console.log(
  `npm pack: ${info.filename}: ${info.size} bytes packed, ${info.unpackedSize} unpacked, ${info.entryCount} files`,
);
for (const f of info.files) console.log(`  ${String(f.size).padStart(8)}  ${f.path}`);

const project = join(work, "project");
mkdirSync(project);
writeFileSync(
  join(project, "package.json"),
  JSON.stringify({ name: "copilot-wasm-packed-test", private: true, type: "module" }, null, 2),
);
run("npm", ["install", "--no-audit", "--no-fund", "--loglevel=error", tarball], { cwd: project });
cpSync(join(pkgDir, "test"), join(project, "test"), { recursive: true });
cpSync(join(pkgDir, "examples"), join(project, "examples"), { recursive: true });

// `npm run test:packed -- NAME...`: only the test files whose names hold a NAME.
const only = process.argv.slice(2);
const files = readdirSync(join(project, "test"))
  .filter((f) => f.endsWith(".test.mjs"))
  .filter((f) => only.length === 0 || only.some((name) => f.includes(name)))
  .sort()
  .map((f) => join("test", f));
const tests = spawnSync(process.execPath, ["--test", "--test-concurrency=1", "--test-reporter=spec", ...files], {
  cwd: project,
  stdio: "inherit",
  env: { ...process.env, COPILOT_RS_ROOT: root, COPILOT_WASM_PACKED: "1" },
});
if (tests.status === 0 && !process.env.COPILOT_WASM_KEEP) rmSync(work, { recursive: true, force: true });
else console.log(`test:packed: the temporary project is kept at ${project}`);
process.exit(tests.status ?? 1);
