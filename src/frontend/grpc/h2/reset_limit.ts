/**
 * The bound on how fast one connection may have its streams reset (HTTP/2 "rapid reset",
 * CVE-2023-44487): a client that opens streams and cancels them at once makes the server set up
 * and tear down a call for each without any limit on streams in flight to stop it. Servers
 * patched for it (nghttp2, Go's x/net, Envoy) end such a connection; here a token bucket counts
 * the resets, and the session ends the connection with GOAWAY ENHANCE_YOUR_CALM once it is
 * empty.
 *
 * @module
 */

/**
 * A token bucket of stream resets: `burst` at first, refilled at `perSecond`.
 *
 * @example The 3rd reset at once is one too many for a burst of 2
 * ```ts
 * import { ResetLimit } from "./reset_limit.ts";
 * import assert from "node:assert/strict";
 *
 * const limit = new ResetLimit(2, 1);
 * assert.deepEqual([limit.take(), limit.take(), limit.take()], [true, true, false]);
 * ```
 */
export class ResetLimit {
  readonly #burst: number;
  readonly #perMs: number;
  #tokens: number;
  #last = performance.now();

  /**
   * Makes a full bucket.
   *
   * @param burst How many resets may come at once.
   * @param perSecond How many more each second allows.
   */
  constructor(burst: number, perSecond: number) {
    this.#burst = burst;
    this.#perMs = perSecond / 1000;
    this.#tokens = burst;
  }

  /**
   * Counts one reset.
   *
   * @returns Whether it was within the limit.
   */
  take(): boolean {
    const now = performance.now();
    this.#tokens = Math.min(this.#burst, this.#tokens + (now - this.#last) * this.#perMs);
    this.#last = now;
    if (this.#tokens < 1) return false;
    this.#tokens -= 1;
    return true;
  }
}
