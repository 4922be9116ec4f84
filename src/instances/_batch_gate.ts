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
 */
export class BatchGate {
  #tail: Promise<void> = Promise.resolve();

  /**
   * Waits until the previous holder released the gate.
   *
   * @returns The function that releases it again.
   */
  async acquire(): Promise<() => void> {
    const previous = this.#tail;
    let release!: () => void;
    this.#tail = new Promise<void>((resolve) => release = resolve);
    await previous;
    return release;
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
