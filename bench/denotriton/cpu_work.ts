/**
 * The CPU-bound work of the benchmark's `cpu_1` / `cpu_2` models: rounds of `v = sin(v) * 0.5 +
 * 0.25` over 4096 float64 values, calibrated so one sample costs about 2 ms here (PyTriton's
 * script does the same with numpy). Its own module so a Worker can load it.
 *
 * @module
 */

import { batch, type InferFunc, ndarray, type WorkerContext } from "../../mod.ts";

const WORK_SIZE = 4096;
const SAMPLE_MS = 2;

/**
 * Runs `k` rounds of the arithmetic.
 *
 * @param k Rounds.
 * @returns The first value, so the work cannot be optimised away.
 */
export function rounds(k: number): number {
  const v = new Float64Array(WORK_SIZE);
  for (let i = 0; i < WORK_SIZE; i++) v[i] = i / (WORK_SIZE - 1);
  for (let r = 0; r < k; r++) {
    for (let i = 0; i < WORK_SIZE; i++) v[i] = Math.sin(v[i]!) * 0.5 + 0.25;
  }
  return v[0]!;
}

/**
 * How many rounds take about 2 ms on this machine.
 *
 * @returns Rounds per sample.
 */
export function calibrate(): number {
  rounds(20);
  let k = 16;
  while (time(k) < 20) k *= 2;
  // The fastest of several runs: a busy machine only ever makes a run slower.
  const best = Math.min(...Array.from({ length: 7 }, () => time(k)));
  return Math.max(1, Math.round(k * SAMPLE_MS / best));
}

function time(k: number): number {
  const start = performance.now();
  rounds(k);
  return performance.now() - start;
}

/**
 * The batched callable: `y = x` after `roundsPerSample` rounds of work per sample.
 *
 * @param roundsPerSample From {@linkcode calibrate}.
 * @returns The inference function.
 */
export function cpuInfer(roundsPerSample: number): InferFunc {
  return batch(({ x }) => {
    const samples = x!.shape[0]!;
    let acc = 0;
    for (let s = 0; s < samples; s++) acc += rounds(roundsPerSample);
    const data = (x!.data as Float32Array).map((value) => value + acc * 0);
    return { y: ndarray(data, x!.shape) };
  });
}

/**
 * The Worker instance factory (`workers()`): the main thread calibrates once and passes
 * `{ rounds }` as data, so every instance does the same work.
 *
 * @param ctx The Worker's context.
 * @returns The inference function.
 */
export default function factory(ctx: WorkerContext): InferFunc {
  return cpuInfer((ctx.data as { rounds: number }).rounds);
}
