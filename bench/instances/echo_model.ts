/**
 * The large-tensor model of `bench/instances.ts`: returns its float32 input as output (a fresh
 * array, as a real model's output would be).
 *
 * @module
 */

import { batch, type InferFunc, type NDArray } from "../../mod.ts";

/** Echoes `x` into `y`. */
export const echo: InferFunc = batch((inputs: Record<string, NDArray>) => {
  const x = inputs.x!;
  return { y: { dtype: "float32", shape: x.shape, data: (x.data as Float32Array).slice() } };
});

/** The Worker factory. */
export default function factory(): InferFunc {
  return echo;
}
