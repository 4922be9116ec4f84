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

interface JupyterNamespace {
  broadcast(msgType: string, content: Record<string, unknown>): Promise<void>;
}

/**
 * Sends `text` to the running cell's stderr output through IOPub. Unlike `console.error`, whose
 * output the kernel forwards through a channel it flushes a few milliseconds after the cell's
 * reply (so on a loaded machine a cell's last lines can miss the cell), the returned promise
 * settles once the message is on its way, so awaiting it keeps a cell's lines in that cell.
 *
 * @param text The text, with its line ends.
 * @returns A promise that settles when the message is sent.
 */
export async function writeToCell(text: string): Promise<void> {
  const jupyter = (Deno as unknown as { jupyter: JupyterNamespace }).jupyter;
  // A refused send (the kernel's IOPub socket is busy) is tried again, then the line goes the
  // way console output goes: a log line is never dropped on our side.
  for (const delay of [0, 20, 100]) {
    if (delay > 0) await new Promise((resolve) => setTimeout(resolve, delay));
    try {
      return await jupyter.broadcast("stream", { name: "stderr", text });
    } catch {
      // tried again below
    }
  }
  console.error(text.replace(/\n$/, ""));
}
