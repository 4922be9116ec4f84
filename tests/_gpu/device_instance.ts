/**
 * The instance module of the GPU Worker tests: `ctx.data` is the CUDA driver library. `who`
 * names the device the instance is pinned to, the GPU it got, and the GPU current on the Worker's
 * thread when the factory ran and when the batch ran.
 *
 * @module
 */

import { batch, currentGpu, type InferFunc, ndarray, type WorkerContext } from "../../mod.ts";

/** Copies `x` into `y`; `who` is `device|gpu index|gpu name|current at factory|current at infer`. */
export default function factory(ctx: WorkerContext): InferFunc {
  const driver = ctx.data as string;
  const atFactory = currentGpu(driver);
  return batch(({ x }) => {
    const who = [
      ctx.device,
      ctx.gpu?.index ?? "-",
      ctx.gpu?.name ?? "-",
      atFactory ?? "-",
      currentGpu(driver) ?? "-",
    ].join("|");
    const rows = x!.shape[0]!;
    return { y: x!, who: ndarray(Array.from({ length: rows }, () => who), [rows, 1]) };
  });
}
