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

import { SlotSet } from "../../slot_set.ts";
import { muteLegacyAbortWarning } from "./legacy_abort.ts";
import type { RouteContext } from "./router.ts";

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
  // Slots, not a Set: one entry per inference request comes and goes (see slot_set.ts).
  #waiting = new SlotSet<{ callback: () => void; sweep: number; slot: number }>();
  // Sweeps so far: an entry runs at the first sweep after the one that followed its scheduling,
  // so it has waited a whole period at least, and two at most.
  #sweeps = 0;
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
    const entry = { callback, sweep: this.#sweeps, slot: 0 };
    entry.slot = this.#waiting.add(entry);
    this.#timer ??= setInterval(() => this.#sweep(), this.#delayMs);
    return () => void this.#waiting.delete(entry.slot, entry);
  }

  #sweep(): void {
    const sweep = this.#sweeps++;
    for (const entry of this.#waiting.values()) {
      if (entry.sweep >= sweep) continue;
      // Gone already when an earlier callback of this sweep cancelled it.
      if (this.#waiting.delete(entry.slot, entry)) entry.callback();
    }
    if (this.#waiting.size === 0) {
      clearInterval(this.#timer);
      this.#timer = undefined;
    }
  }
}

/**
 * The route context of one request, whose `signal` aborts when the client disconnects while the
 * request is handled: the signal is built when a route first reads it, and linked to
 * `request.signal` only once the request has run for a while (see the module's notes).
 *
 * A class and not an object literal with `get signal()`: with a fresh getter closing over the
 * request in every context, V8 promoted the whole request (its headers, body and tensors) to the
 * old generation, where only a full collection frees it. Our reading is that the getter is kept
 * with the object's shape, which V8 allocates in the old generation, so the young closure is
 * reached from there at every scavenge. Measured on add_sub, c=8 (`--v8-flags=--trace-gc-nvp`):
 * 0.66 KB promoted per `/v2/health/ready` request and 2.97 KB per inference before, 0.00 and 1.07
 * after (the rest was a getter in `batchCalls`, see `callable/calls.ts`).
 *
 * @example The signal aborts once the client is gone
 * ```ts
 * import { LateCalls, RequestContext } from "./disconnect_watch.ts";
 * import assert from "node:assert/strict";
 *
 * const client = new AbortController();
 * const request = new Request("http://x/", { signal: client.signal });
 * const context = new RequestContext(request, {}, new LateCalls(5));
 * const signal = context.signal;
 * client.abort(new Error("gone"));
 * await new Promise((resolve) => setTimeout(resolve, 30));
 * assert.ok(signal.aborted);
 * context.end();
 * ```
 */
export class RequestContext implements RouteContext {
  /** The request. */
  readonly request: Request;
  /** Decoded path parameters. */
  readonly params: Readonly<Record<string, string>>;
  #late: LateCalls;
  #disconnect: AbortController | undefined;
  #cancelLink: (() => void) | undefined;
  #onAbort: (() => void) | undefined;

  /**
   * @param request The request.
   * @param params Its path parameters.
   * @param late Where its link to `request.signal` waits.
   */
  constructor(request: Request, params: Readonly<Record<string, string>>, late: LateCalls) {
    this.request = request;
    this.params = params;
    this.#late = late;
  }

  /** Aborted when the client disconnects before the response is ready. */
  get signal(): AbortSignal {
    if (this.#disconnect === undefined) {
      this.#disconnect = new AbortController();
      this.#cancelLink = this.#late.schedule(() => this.#link());
    }
    return this.#disconnect.signal;
  }

  /** Stops watching the client (the response is ready). */
  end(): void {
    this.#cancelLink?.();
    if (this.#onAbort !== undefined) {
      this.request.signal.removeEventListener("abort", this.#onAbort);
    }
  }

  #link(): void {
    const disconnect = this.#disconnect!;
    const { signal } = this.request;
    muteLegacyAbortWarning();
    if (signal.aborted) {
      disconnect.abort(signal.reason);
      return;
    }
    this.#onAbort = (): void => disconnect.abort(signal.reason);
    signal.addEventListener("abort", this.#onAbort, { once: true });
  }
}
