/**
 * The instance module of the OCR model: runs in its own Worker, one per instance. The factory
 * opens the ONNX Runtime sessions (detection and recognition) once per Worker; every request
 * is one encoded image.
 *
 * @module
 */

import { type InferFunc, type InferResult, ndarray, type WorkerContext } from "../../mod.ts";
import { OcrPipeline } from "./pipeline.ts";

/** What {@linkcode bindOcr} passes to each instance as `ctx.data`. */
export interface OcrInstanceData {
  /** ONNX Runtime intra-op threads per session (0: one per core). */
  threads: number;
}

/**
 * Builds one instance: decode, detect, recognise.
 *
 * @param ctx The instance's context; `ctx.data` is {@linkcode OcrInstanceData}.
 * @returns The inference function: `image` (one PNG/JPEG) to `texts`, `scores`, `boxes`.
 */
export default async function ocrInstance(ctx: WorkerContext): Promise<InferFunc> {
  const { threads } = ctx.data as OcrInstanceData;
  const pipeline = await OcrPipeline.create({ threads });
  return async (requests): Promise<InferResult[]> => {
    const results: InferResult[] = [];
    // Without batching every call carries one request; images differ in size anyway.
    for (const request of requests) {
      const [image] = request.data.image!.data as Uint8Array[];
      const lines = await pipeline.recognize(image!);
      results.push({
        texts: ndarray(lines.map((line) => line.text), [lines.length], { dtype: "bytes" }),
        scores: ndarray(new Float32Array(lines.map((line) => line.score)), [lines.length]),
        boxes: ndarray(new Float32Array(lines.flatMap((line) => line.box.flat())), [
          lines.length,
          4,
          2,
        ]),
      });
    }
    return results;
  };
}
