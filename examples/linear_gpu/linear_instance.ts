/**
 * The instance module of linear_gpu: each Worker computes `y = xW + b` on its GPU with cuBLAS
 * `sgemm`, or on the CPU, with a log line saying why, where the host has no GPU or no cuBLAS.
 * The Worker's GPU is already current on its thread when this factory runs.
 *
 * @module
 */

import { batch, type InferFunc, ndarray, type TensorsOf, type WorkerContext } from "../../mod.ts";
import { CublasLinear } from "./cublas.ts";
import { IN_FEATURES, linearCpu, linearWeights, OUT_FEATURES } from "./linear.ts";

/** The input: one feature vector per sample. */
export const INPUTS = [{ name: "x", dtype: "float32", shape: [IN_FEATURES] }] as const;

/** The outputs: the layer's output, and where it was computed (`cuda:0 cuBLAS`, `cuda:0 CPU`). */
export const OUTPUTS = [
  { name: "y", dtype: "float32", shape: [OUT_FEATURES] },
  { name: "device", dtype: "bytes", shape: [1] },
] as const;

/** The type of the instance's callable. */
export type LinearGpuFunc = InferFunc<TensorsOf<typeof INPUTS>, TensorsOf<typeof OUTPUTS>>;

/**
 * Builds one instance: uploads the weights to the Worker's GPU once, when it has one and cuBLAS
 * is found.
 *
 * @param ctx The instance's device (and GPU), index and model.
 * @returns The batched inference function.
 */
export default function linearGpu(ctx: WorkerContext): LinearGpuFunc {
  const layer = linearWeights();
  const label = `Instance ${ctx.instanceIndex} (${ctx.device}) of '${ctx.modelName}'`;
  let gpu: CublasLinear | undefined;
  if (ctx.gpu !== undefined) {
    try {
      gpu = new CublasLinear(layer);
      console.error(`${label}: cuBLAS sgemm on ${ctx.gpu.name} (${gpu.library})`);
    } catch (error) {
      console.error(`${label}: ${(error as Error).message}; computing on the CPU`);
    }
  } else if (ctx.deviceKind === "gpu") {
    console.error(`${label}: this host has no GPU; computing on the CPU`);
  }
  const where = `${ctx.device} ${gpu === undefined ? "CPU" : "cuBLAS"}`;
  return batch(({ x }) => {
    const rows = x.shape[0]!;
    const y = gpu === undefined ? linearCpu(layer, x.data, rows) : gpu.forward(x.data, rows);
    return {
      y: ndarray(y, [rows, OUT_FEATURES]),
      device: ndarray(Array.from({ length: rows }, () => where), [rows, 1]),
    };
  });
}
