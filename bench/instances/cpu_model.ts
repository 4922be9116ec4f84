/**
 * The CPU-bound model of `bench/instances.ts`: a few milliseconds of arithmetic per sample. The
 * default export is the Worker factory; {@linkcode cpuBound} is the same callable for main-thread
 * instances.
 *
 * @module
 */

import { batch, type InferFunc, type NDArray, ndarray } from "../../mod.ts";

/** Iterations of the inner loop per sample (a few ms on one core). */
export const WORK = 2_000_000;

function work(seed: number): number {
  let acc = seed;
  for (let i = 0; i < WORK; i++) acc = (acc * 1.000001 + 0.5) % 1000;
  return acc;
}

/** Returns `y[i] = f(x[i])` after {@linkcode WORK} iterations per sample. */
export const cpuBound: InferFunc = batch((inputs: Record<string, NDArray>) => {
  const x = inputs.x!;
  const values = x.data as Float32Array;
  const rows = x.shape[0]!;
  const y = new Float32Array(rows);
  for (let row = 0; row < rows; row++) y[row] = work(values[row * (values.length / rows)]!);
  return { y: ndarray(y, [rows, 1]) };
});

/** The Worker factory. */
export default function factory(): InferFunc {
  return cpuBound;
}
