/**
 * The client's bound on concurrent calls: at most `maxConcurrency` in flight, at most
 * `maxQueueSize` waiting for a slot, in order; one more is refused at once (PyTriton's
 * `FuturesModelClient` with `max_workers`, `max_queue_size` and `non_blocking=True`).
 *
 * @module
 */

import { ClientQueueFullError, ClientValueError } from "./errors.ts";

interface Waiter {
  resolve(release: () => void): void;
  reject(reason: unknown): void;
  detach(): void;
}

function limit(value: number | undefined, min: number, what: string): number {
  if (value === undefined) return Infinity;
  if (value !== Infinity && (!Number.isInteger(value) || value < min)) {
    throw new ClientValueError(
      `Invalid ${what}: expected an integer >= ${min} or Infinity, got ${value}`,
    );
  }
  return value;
}

/**
 * Slots for calls, and a bounded line of calls waiting for one.
 *
 * @example Two slots, one place in line
 * ```ts
 * import { CallLimit } from "./call_limit.ts";
 * import { ClientQueueFullError } from "./errors.ts";
 * import assert from "node:assert/strict";
 *
 * const calls = new CallLimit(2, 1);
 * const first = await calls.acquire("infer");
 * const second = await calls.acquire("infer");
 * const third = calls.acquire("infer"); // waits for a slot
 * await assert.rejects(calls.acquire("infer"), ClientQueueFullError);
 * assert.deepEqual([calls.running, calls.waiting], [2, 1]);
 * first(); // its slot goes to the third call
 * (await third)();
 * second();
 * assert.deepEqual([calls.running, calls.waiting], [0, 0]);
 * ```
 */
export class CallLimit {
  #max: number;
  #queueMax: number;
  #running = 0;
  #waiters: Waiter[] = [];

  /**
   * Creates the limit.
   *
   * @param maxConcurrency Calls in flight at once (an integer >= 1, or `Infinity`).
   * @param maxQueueSize Calls waiting for a slot (an integer >= 0, or `Infinity`).
   * @throws {ClientValueError} When a bound is not such a number.
   */
  constructor(maxConcurrency?: number, maxQueueSize?: number) {
    this.#max = limit(maxConcurrency, 1, "maxConcurrency");
    this.#queueMax = limit(maxQueueSize, 0, "maxQueueSize");
  }

  /** Calls holding a slot. */
  get running(): number {
    return this.#running;
  }

  /** Calls waiting for one. */
  get waiting(): number {
    return this.#waiters.length;
  }

  /**
   * Takes a slot, waiting in line for one while all are taken.
   *
   * @param what The call, completing "Cannot ..." in the error.
   * @param signal Abandons the wait: the promise rejects with its reason.
   * @returns The slot's release, to call once the call is over (a second call does nothing).
   * @throws {ClientQueueFullError} At once, when `maxQueueSize` calls wait already.
   */
  acquire(what: string, signal?: AbortSignal): Promise<() => void> {
    signal?.throwIfAborted();
    if (this.#running < this.#max) {
      this.#running++;
      return Promise.resolve(this.#release());
    }
    if (this.#waiters.length >= this.#queueMax) {
      return Promise.reject(
        new ClientQueueFullError(
          `Cannot ${what}: the client's queue is full (${this.#running} calls in flight, the maxConcurrency, and ${this.#waiters.length} waiting, the maxQueueSize)`,
        ),
      );
    }
    return new Promise((resolve, reject) => {
      const onAbort = (): void => {
        this.#waiters.splice(this.#waiters.indexOf(waiter), 1);
        reject(signal!.reason);
      };
      const waiter: Waiter = {
        resolve,
        reject,
        detach: () => signal?.removeEventListener("abort", onAbort),
      };
      signal?.addEventListener("abort", onAbort, { once: true });
      this.#waiters.push(waiter);
    });
  }

  /**
   * Fails every waiting call (the client closed); calls in flight keep their slots.
   *
   * @param reason What they reject with.
   */
  rejectWaiting(reason: unknown): void {
    for (const waiter of this.#waiters.splice(0)) {
      waiter.detach();
      waiter.reject(reason);
    }
  }

  #release(): () => void {
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const next = this.#waiters.shift();
      if (next === undefined) {
        this.#running--;
        return;
      }
      // The slot passes on as it is: the count stays.
      next.detach();
      next.resolve(this.#release());
    };
  }
}
