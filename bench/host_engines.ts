/**
 * Which engines the benchmarks can serve on this host.
 *
 * @module
 */

import type { EngineKind } from "../src/engine/engine.ts";

/**
 * The engines this host can serve on: the built-in one, and the core where it is installed.
 *
 * @returns `["builtin"]`, with `"triton"` after it when a Triton install is found.
 */
export async function engines(): Promise<EngineKind[]> {
  const found: EngineKind[] = ["builtin"];
  try {
    const install = await import("../src/setup/install.ts");
    if ((await install.findTritonInstall()) !== undefined) found.push("triton");
  } catch {
    // Without the core only the built-in engine runs.
  }
  return found;
}
