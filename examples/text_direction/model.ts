/**
 * The TextDirection model: PaddleOCR's text-direction classifier (is a line of text upright or
 * upside down?) on Worker instances pinned to devices, each on its GPU through cuBLAS and NVRTC
 * kernels, or on the CPU.
 *
 * Input `x`: FP32 `[3, 48, 192]` per sample (a text line prepared by `classifierInput`), batched
 * up to 64. Outputs: `probs` FP32 `[2]` (upright, upside down), `label` BYTES `[1]` (`"0"` or
 * `"180"`), `device` BYTES `[1]` (where it ran).
 *
 * @module
 */

import { type Triton, workers } from "../../mod.ts";
import type { CudaLibraryPaths } from "./cuda.ts";
import { INPUTS, OUTPUTS, type TextDirectionInstanceData } from "./text_direction_instance.ts";

/** The model's default name. */
export const TEXT_DIRECTION_MODEL = "TextDirection";

/** The largest batch a request (or the batcher) may send. */
export const MAX_BATCH = 64;

/** Options of {@linkcode bindTextDirection}. */
export interface TextDirectionOptions {
  /**
   * The model's name.
   *
   * @default {"TextDirection"}
   */
  modelName?: string;
  /**
   * One Worker instance per device.
   *
   * @default {["cuda:0"]}
   */
  devices?: readonly string[];
  /** Where the CUDA libraries are, where not in the usual places. */
  libraries?: CudaLibraryPaths;
}

/**
 * Binds TextDirection on a server.
 *
 * @param triton The server.
 * @param options Name, devices and libraries.
 * @returns A promise that settles when the model is bound (loaded, when the server runs).
 */
export function bindTextDirection(
  triton: Triton,
  options: TextDirectionOptions = {},
): Promise<void> {
  const data: TextDirectionInstanceData = options.libraries === undefined
    ? {}
    : { libraries: options.libraries };
  return triton.bind({
    modelName: options.modelName ?? TEXT_DIRECTION_MODEL,
    inferFunc: workers(new URL("./text_direction_instance.ts", import.meta.url), {
      devices: options.devices ?? ["cuda:0"],
      data,
    }),
    inputs: INPUTS,
    outputs: OUTPUTS,
    config: { maxBatchSize: MAX_BATCH },
    strict: true,
  });
}
