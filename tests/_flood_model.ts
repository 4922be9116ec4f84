/**
 * The decoupled `Flood` model of tests/backpressure_test.ts, shared by its main-thread and Worker
 * instances: `n` steps of `size` fresh bytes each, yielded as fast as they are pulled.
 *
 * @module
 */

import type { BindOptions, InferRequest, InferResult } from "../mod.ts";
import { ndarray } from "../mod.ts";

/**
 * The steps of one request.
 *
 * @param requests The batch (one request: the model does not batch).
 * @param produced Called after each step was taken.
 * @returns The steps.
 */
export async function* floodSteps(
  requests: InferRequest[],
  produced: () => void,
): AsyncGenerator<InferResult[]> {
  const [request] = requests;
  const n = Number(request!.data.n!.data[0]);
  const size = Number(request!.data.size!.data[0]);
  for (let i = 0; i < n; i++) {
    if (request!.signal.aborted) return;
    // Fresh bytes per step, as a real generator makes them.
    yield [{ chunk: ndarray(new Uint8Array(size).fill(i & 0xff), [size]) }];
    produced();
  }
}

/** The model, without its callable. */
export const FLOOD: Omit<BindOptions, "inferFunc"> = {
  modelName: "Flood",
  inputs: [{ name: "n", dtype: "int32", shape: [1] }, { name: "size", dtype: "int32", shape: [1] }],
  outputs: [{ name: "chunk", dtype: "uint8", shape: [-1] }],
  config: { decoupled: true, batching: false },
};
