/**
 * The instance module of the Linear model: runs in its own Worker, one per instance. The factory
 * loads the "weights" once per Worker (here: derived from the device), then returns the batched
 * inference function.
 *
 * @module
 */

import { batch, type InferFunc, ndarray, type WorkerContext } from "../../mod.ts";

/** Input features and output size of the layer. */
export const FEATURES = 4;

/**
 * Builds one instance: `y = x · W + b` with `W = identity · 2` and `b = 1`, and `device` naming
 * the instance that answered.
 *
 * @param ctx The instance's device, index and model.
 * @returns The inference function.
 */
export default function linear(ctx: WorkerContext): InferFunc {
  const weights = new Float32Array(FEATURES * FEATURES);
  for (let i = 0; i < FEATURES; i++) weights[i * FEATURES + i] = 2;
  const label = `${ctx.device}#${ctx.instanceIndex}`;
  return batch(({ x }) => {
    const input = x!.data as Float32Array;
    const rows = x!.shape[0]!;
    const y = new Float32Array(rows * FEATURES);
    for (let r = 0; r < rows; r++) {
      for (let j = 0; j < FEATURES; j++) {
        let sum = 1;
        for (let k = 0; k < FEATURES; k++) {
          sum += input[r * FEATURES + k]! * weights[k * FEATURES + j]!;
        }
        y[r * FEATURES + j] = sum;
      }
    }
    return {
      y: ndarray(y, [rows, FEATURES]),
      device: ndarray(Array.from({ length: rows }, () => label), [rows, 1]),
    };
  });
}
