/**
 * The instance module of the Linear model: runs in its own Worker, one per instance. The factory
 * loads the "weights" once per Worker (here: derived from the device), then returns the batched
 * inference function.
 *
 * @module
 */

import {
  batch,
  type InferFunc,
  ndarray,
  rows,
  type TensorsOf,
  type WorkerContext,
  zip,
} from "../../mod.ts";

/** Input features and output size of the layer. */
export const FEATURES = 4;

/** The input: one feature vector per sample. */
export const INPUTS = [{ name: "x", dtype: "float32", shape: [FEATURES] }] as const;

/** The outputs: the layer's output, and the label of the instance that computed it. */
export const OUTPUTS = [
  { name: "y", dtype: "float32", shape: [FEATURES] },
  { name: "device", dtype: "bytes", shape: [1] },
] as const;

/** The type of the instance's callable. */
export type LinearFunc = InferFunc<TensorsOf<typeof INPUTS>, TensorsOf<typeof OUTPUTS>>;

/**
 * Builds one instance: `y = x · W + b` with `W = identity · 2` and `b = 1`, and `device` naming
 * the instance that answered.
 *
 * @param ctx The instance's device, index and model.
 * @returns The inference function.
 */
export default function linear(ctx: WorkerContext): LinearFunc {
  // Column j of W, as a tensor shaped like one sample.
  const columns = Array.from(
    { length: FEATURES },
    (_, j) => ndarray(Float32Array.from({ length: FEATURES }, (_, k) => k === j ? 2 : 0)),
  );
  const label = `${ctx.device}#${ctx.instanceIndex}`;
  return batch(({ x }) => {
    const samples = rows(x);
    const y = samples.flatMap((sample) =>
      columns.map((column) =>
        zip(sample, column, (v, w) => v * w).data.reduce((sum, v) => sum + v, 1)
      )
    );
    return {
      y: ndarray(new Float32Array(y), [samples.length, FEATURES]),
      device: ndarray(samples.map(() => label), [samples.length, 1]),
    };
  });
}
