// Loading the WebAssembly core, once per page or process. Browsers fetch
// `dist/copilot_wasm_bg.wasm` next to the glue; the Node entry point sets a
// loader that reads the file instead.

import initWasm from "../dist/copilot_wasm.js";
import { CopilotError } from "./errors.js";

let wasmLoader = () => initWasm();
let wasmReady;

/**
 * Loads the WebAssembly core. Browsers fetch `dist/copilot_wasm_bg.wasm`
 * next to the glue by default; pass bytes, a `Response`, a URL or a compiled
 * `WebAssembly.Module` to load it another way. Called by every factory;
 * calling it first is optional.
 */
export async function loadWasm(input) {
  if (input !== undefined) {
    wasmReady = initWasm({ module_or_path: input });
  }
  wasmReady ??= Promise.resolve().then(() => wasmLoader());
  try {
    await wasmReady;
  } catch (e) {
    wasmReady = undefined;
    throw new CopilotError(`cannot load the copilot-wasm WebAssembly: ${e?.message ?? e}`, { cause: e });
  }
}

/** For the Node entry point: how to load the module there. */
export function setWasmLoader(loader) {
  wasmLoader = loader;
}
