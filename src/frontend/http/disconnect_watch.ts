/**
 * Late linking of a client's disconnect to an inference request.
 *
 * Reading `request.signal` in a `Deno.serve` handler is not free: Deno then builds the signal
 * and, after every successful response, aborts it with a `DOMException` that captures a stack
 * trace (about 5% of the server's CPU for small requests, measured on add_sub). Most inference
 * requests are answered within milliseconds, before a disconnect could matter, so the HTTP front
 * end watches a request's signal only once the request has been running for a while. One
 * interval serves every request; per request the cost is a `Set` insertion and deletion.
 *
 * @module
 */

/**
 * Runs each scheduled callback once it has waited between `delayMs` and twice that, unless it is
 * cancelled first. The interval runs only while something waits.
 *
 * @example A callback runs late, a cancelled one never
 * ```ts
 * import { LateCalls } from "./disconnect_watch.ts";
 * import assert from "node:assert/strict";
 *
 * const late = new LateCalls(5);
 * const ran: string[] = [];
 * late.schedule(() => ran.push("kept"));
 * const cancel = late.schedule(() => ran.push("cancelled"));
 * cancel();
 * await new Promise((resolve) => setTimeout(resolve, 30));
 * assert.deepEqual(ran, ["kept"]);
 * ```
 */
export class LateCalls {
  #delayMs: number;
  // Two generations: a sweep runs what waited a whole period, then the newer become the older.
  #older = new Set<() => void>();
  #newer = new Set<() => void>();
  #timer: ReturnType<typeof setInterval> | undefined;

  /**
   * @param delayMs The least time a callback waits, in milliseconds.
   */
  constructor(delayMs: number) {
    this.#delayMs = delayMs;
  }

  /**
   * Schedules `callback`.
   *
   * @param callback What to run later.
   * @returns A function that cancels it (harmless once it ran).
   */
  schedule(callback: () => void): () => void {
    const entry = (): void => callback();
    this.#newer.add(entry);
    this.#timer ??= setInterval(() => this.#sweep(), this.#delayMs);
    return () => {
      this.#newer.delete(entry);
      this.#older.delete(entry);
    };
  }

  #sweep(): void {
    const due = this.#older;
    this.#older = this.#newer;
    this.#newer = new Set();
    for (const callback of due) callback();
    if (this.#older.size === 0 && this.#newer.size === 0) {
      clearInterval(this.#timer);
      this.#timer = undefined;
    }
  }
}
