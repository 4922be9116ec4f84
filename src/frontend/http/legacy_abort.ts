/**
 * Deno's one-time `Deno.serve: request.signal aborts on successful responses (legacy behavior)`
 * warning, kept out of DenoTriton's output.
 *
 * Until Deno changes its default (`--unstable-no-legacy-abort` opts in today), `Deno.serve`
 * aborts `request.signal` after every successful response, and warns once per process when a
 * handler that read the signal completes. The HTTP front end reads it only while it handles an
 * inference request, to cancel the request when the client disconnects, and stops listening
 * before it responds, so the legacy abort never reaches it. The warning would ask a DenoTriton
 * user to change code they do not have, on the first request of every server, notebooks
 * included. No `Deno.serve` option turns it off, so the front end drops that one message.
 *
 * @module
 */

const WARNING = "Deno.serve: request.signal aborts on successful responses";

let installed = false;

/**
 * Drops Deno's legacy-abort warning the one time Deno prints it, then puts `console.warn` back.
 * Every other message passes through. Idempotent.
 *
 * @example Only that message is dropped
 * ```ts
 * import { muteLegacyAbortWarning } from "./legacy_abort.ts";
 * import assert from "node:assert/strict";
 *
 * const original = console.warn;
 * const seen: unknown[] = [];
 * console.warn = (...args: unknown[]) => void seen.push(args[0]);
 * try {
 *   muteLegacyAbortWarning();
 *   console.warn("other");
 *   console.warn("Deno.serve: request.signal aborts on successful responses (legacy behavior).");
 *   console.warn("after");
 * } finally {
 *   console.warn = original;
 * }
 * assert.deepEqual(seen, ["other", "after"]);
 * ```
 */
export function muteLegacyAbortWarning(): void {
  if (installed) return;
  installed = true;
  const original = console.warn;
  const filter = (...args: unknown[]): void => {
    if (typeof args[0] === "string" && args[0].startsWith(WARNING)) {
      // Deno prints it once per process: nothing is left to filter.
      if (console.warn === filter) console.warn = original;
      return;
    }
    original.apply(console, args);
  };
  console.warn = filter;
}
