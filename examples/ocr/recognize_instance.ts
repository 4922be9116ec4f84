/**
 * The instance module of the split pipeline's recognition model (`OcrRecognize`): one Worker per
 * instance opens the recognition session; each request is the crops detection found (packed,
 * see {@linkcode unpackCrops}) and their boxes, answered with the lines read confidently enough:
 * their texts, scores and boxes.
 *
 * @module
 */

import { type InferFunc, type InferResult, ndarray, type WorkerContext } from "../../mod.ts";
import type { Quad } from "./geometry.ts";
import type { OcrInstanceData } from "./ocr_instance.ts";
import { OcrRecognizer, unpackCrops } from "./pipeline.ts";

/**
 * Builds one instance.
 *
 * @param ctx The instance's context; `ctx.data` is {@linkcode OcrInstanceData}.
 * @returns The inference function: `crop_pixels`, `crop_sizes`, `boxes` to `texts`, `scores`,
 *   `line_boxes`.
 */
export default async function recognizeInstance(ctx: WorkerContext): Promise<InferFunc> {
  const { threads } = ctx.data as OcrInstanceData;
  const recognizer = await OcrRecognizer.create({ threads });
  return async (requests): Promise<InferResult[]> => {
    const results: InferResult[] = [];
    for (const request of requests) {
      const crops = unpackCrops({
        pixels: request.data.crop_pixels!.data as Uint8Array,
        sizes: request.data.crop_sizes!.data as Int32Array,
      });
      const flat = request.data.boxes!.data as Float32Array;
      const boxes = crops.map((_, i) =>
        [0, 1, 2, 3].map((c) => [flat[i * 8 + c * 2]!, flat[i * 8 + c * 2 + 1]!]) as Quad
      );
      const lines = recognizer.lines(boxes, await recognizer.read(crops));
      results.push({
        texts: ndarray(lines.map((line) => line.text), [lines.length], { dtype: "bytes" }),
        scores: ndarray(new Float32Array(lines.map((line) => line.score)), [lines.length]),
        line_boxes: ndarray(new Float32Array(lines.flatMap((line) => line.box.flat())), [
          lines.length,
          4,
          2,
        ]),
      });
    }
    return results;
  };
}
