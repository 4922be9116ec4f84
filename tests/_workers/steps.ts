/**
 * A decoupled instance module for the Worker tests: streams `n` steps (input `n`, INT32 `[1]`),
 * one every 10 ms, and deliberately ignores `request.signal`, so a stream goes on until its
 * consumer stops pulling. `ctx.data` is a `SharedArrayBuffer` of Int32 flags: [0] streams running
 * now in this Worker, [1] the most that ever ran at once, [2] steps that found their input changed
 * (read in place each step).
 *
 * @module
 */

import {
  type InferFunc,
  type InferResult,
  ndarray,
  type Request,
  type WorkerContext,
} from "../../mod.ts";

/** The factory. */
export default function factory(ctx: WorkerContext): InferFunc {
  const flags = new Int32Array(ctx.data as SharedArrayBuffer);
  return async function* (requests: Request[]): AsyncGenerator<InferResult[]> {
    const running = Atomics.add(flags, 0, 1) + 1;
    if (running > Atomics.load(flags, 1)) Atomics.store(flags, 1, running);
    try {
      const n = requests[0]!.data.n!.data as Int32Array;
      const steps = n[0]!;
      for (let i = 0; i < steps; i++) {
        if (n[0] !== steps) Atomics.add(flags, 2, 1);
        yield [{ i: ndarray([i], [1], { dtype: "int32" }) }];
        await new Promise((resolve) => setTimeout(resolve, 10));
      }
    } finally {
      Atomics.sub(flags, 0, 1);
    }
  };
}
