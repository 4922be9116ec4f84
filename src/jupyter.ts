/**
 * Whether this process is a Deno Jupyter kernel (`deno jupyter`). A kernel shows what goes
 * through `console` in the cell's output, but not direct writes to `Deno.stderr`; and a cell run
 * again leaves what it created before running, out of reach.
 *
 * @module
 */

/**
 * Tells whether this process is a Deno Jupyter kernel: `Deno.jupyter` exists there, and its
 * getter throws everywhere else.
 *
 * @returns `true` inside `deno jupyter`.
 *
 * @example Outside a notebook
 * ```ts
 * import { inJupyterKernel } from "./jupyter.ts";
 * import assert from "node:assert/strict";
 *
 * assert.equal(inJupyterKernel(), false);
 * ```
 */
export function inJupyterKernel(): boolean {
  try {
    return typeof (Deno as { jupyter?: unknown }).jupyter === "object";
  } catch {
    return false;
  }
}
