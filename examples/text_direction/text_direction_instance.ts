/**
 * The instance module of the TextDirection model: each Worker runs the classifier on its GPU
 * (cuBLAS SGEMM and NVRTC-compiled kernels through FFI) or, with one log line saying what is
 * missing, on the CPU. A Worker pinned to `cuda:N` has that GPU's context current on its thread
 * before this factory runs.
 *
 * @module
 */

import { batch, type InferFunc, ndarray, type TensorsOf, type WorkerContext } from "../../mod.ts";
import { loadClassifierPlan, openBackend } from "./classifier.ts";
import type { CudaLibraryPaths } from "./cuda.ts";
import { CLS_CHANNELS, CLS_HEIGHT, CLS_LABELS, CLS_WIDTH } from "./preprocess.ts";

/** The input: one text line, prepared by `classifierInput` (preprocess.ts). */
export const INPUTS = [
  { name: "x", dtype: "float32", shape: [CLS_CHANNELS, CLS_HEIGHT, CLS_WIDTH] },
] as const;

/**
 * The outputs: the probabilities of upright and of upside down, the more likely label (`"0"` or
 * `"180"`), and where it was computed (`cuda:0 GPU`, `cuda:0 CPU`, `cpu CPU`).
 */
export const OUTPUTS = [
  { name: "probs", dtype: "float32", shape: [2] },
  { name: "label", dtype: "bytes", shape: [1] },
  { name: "device", dtype: "bytes", shape: [1] },
] as const;

/** The type of the instance's callable. */
export type TextDirectionFunc = InferFunc<TensorsOf<typeof INPUTS>, TensorsOf<typeof OUTPUTS>>;

/** What `bindTextDirection` passes to each instance as `ctx.data`. */
export interface TextDirectionInstanceData {
  /** Where the CUDA libraries are, where not in the usual places. */
  libraries?: CudaLibraryPaths;
}

/**
 * Builds one instance: reads and plans the model, and opens its backend.
 *
 * @param ctx The instance's device (and GPU), index and model; `ctx.data` is
 *   {@linkcode TextDirectionInstanceData}.
 * @returns The batched inference function.
 */
export default function textDirection(ctx: WorkerContext): TextDirectionFunc {
  const data = (ctx.data ?? {}) as TextDirectionInstanceData;
  const plan = loadClassifierPlan();
  const { backend, kind, note } = openBackend(plan, {
    pinnedToGpu: ctx.deviceKind === "gpu",
    gpu: ctx.gpu,
    ...(data.libraries === undefined ? {} : { libraries: data.libraries }),
  });
  if (note !== undefined) {
    console.error(`Instance ${ctx.instanceIndex} (${ctx.device}) of '${ctx.modelName}': ${note}`);
  }
  const where = `${ctx.device} ${kind === "gpu" ? "GPU" : "CPU"}`;
  return batch(({ x }) => {
    const rows = x.shape[0]!;
    const probs = backend.run(x.data, rows);
    const labels = Array.from(
      { length: rows },
      (_, i) => CLS_LABELS[probs[2 * i + 1]! > probs[2 * i]! ? 1 : 0],
    );
    return {
      probs: ndarray(probs, [rows, 2]),
      label: ndarray(labels, [rows, 1]),
      device: ndarray(Array.from({ length: rows }, () => where), [rows, 1]),
    };
  });
}
