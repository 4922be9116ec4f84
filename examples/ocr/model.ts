/**
 * The OCR model (PP-OCRv4 text detection + recognition on ONNX Runtime) on Worker instances.
 *
 * Input `image`: one PNG or JPEG file (BYTES, shape `[1]`). Outputs, one entry per text line in
 * reading order: `texts` (BYTES `[n]`), `scores` (FP32 `[n]`, recognition confidence) and
 * `boxes` (FP32 `[n, 4, 2]`: top-left, top-right, bottom-right, bottom-left corners in image
 * pixels).
 *
 * @module
 */

import { type Triton, workers } from "../../mod.ts";
import type { OcrInstanceData } from "./ocr_instance.ts";

/** The model's name. */
export const OCR_MODEL = "OCR";

/** Options of {@linkcode bindOcr}. */
export interface OcrModelOptions {
  /**
   * How many Worker instances (each with its own ONNX Runtime sessions).
   *
   * @default {2}
   */
  instances?: number;
  /**
   * ONNX Runtime intra-op threads per session; 0 lets ONNX Runtime use every core.
   *
   * @default {the cores divided among the instances, at least 1}
   */
  threads?: number;
}

/**
 * Binds the OCR model on a server.
 *
 * @param triton The server.
 * @param options Instances and threads.
 * @returns A promise that settles when every Worker has loaded the models.
 */
export function bindOcr(triton: Triton, options: OcrModelOptions = {}): Promise<void> {
  const instances = options.instances ?? 2;
  const data: OcrInstanceData = {
    threads: options.threads ??
      Math.max(1, Math.floor(navigator.hardwareConcurrency / instances)),
  };
  return triton.bind({
    modelName: OCR_MODEL,
    inferFunc: workers(new URL("./ocr_instance.ts", import.meta.url), {
      count: instances,
      data,
    }),
    inputs: [{ name: "image", dtype: "bytes", shape: [1] }],
    outputs: [
      { name: "texts", dtype: "bytes", shape: [-1] },
      { name: "scores", dtype: "float32", shape: [-1] },
      { name: "boxes", dtype: "float32", shape: [-1, 4, 2] },
    ],
    // One image per request: images differ in size, so there is nothing to batch; the
    // instances serve requests in parallel.
    config: { batching: false },
    strict: true,
  });
}
