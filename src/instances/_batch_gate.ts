/**
 * One batch at a time per instance: each caller waits for the previous batch to release the gate.
 *
 * @module
 */

/**
 * A FIFO gate that lets one holder in at a time.
 *
 * @example Second holder waits for the first
 * ```ts
 * import { BatchGate } from "./_batch_gate.ts";
 * import assert from "node:assert/strict";
 *
 * const gate = new BatchGate();
 * const order: string[] = [];
 * const first = await gate.acquire();
 * const second = gate.acquire().then((release) => { order.push("second"); release(); });
 * order.push("first");
 * first();
 * await second;
 * assert.deepEqual(order, ["first", "second"]);
 * ```
 *
 * @example A free gate is entered at once
 * ```ts
 * import { BatchGate } from "./_batch_gate.ts";
 * import assert from "node:assert/strict";
 *
 * const gate = new BatchGate();
 * const release = gate.tryAcquire();
 * assert.ok(release !== undefined);
 * assert.equal(gate.tryAcquire(), undefined);
 * release();
 * assert.ok(gate.tryAcquire() !== undefined);
 * ```
 */
export class BatchGate {
  #tail: Promise<void> = Promise.resolve();
  /** Holders and waiters not yet released: 0 when the gate is free. */
  #pending = 0;

  /**
   * Waits until the previous holder released the gate.
   *
   * @returns The function that releases it again.
   */
  async acquire(): Promise<() => void> {
    const previous = this.#tail;
    const release = this.#enter();
    await previous;
    return release;
  }

  /**
   * Enters the gate now when it is free (no holder, no waiter), without waiting for a promise.
   *
   * @returns The function that releases it again, or `undefined` when the gate is not free.
   */
  tryAcquire(): (() => void) | undefined {
    return this.#pending === 0 ? this.#enter() : undefined;
  }

  #enter(): () => void {
    this.#pending++;
    let resolveTail!: () => void;
    this.#tail = new Promise<void>((resolve) => resolveTail = resolve);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.#pending--;
      resolveTail();
    };
  }

  /**
   * Resolves once every holder and waiter so far has released the gate.
   *
   * @returns A promise of the free gate.
   */
  idle(): Promise<void> {
    return this.#tail;
  }
}
