/**
 * The instance module of the split pipeline's detection model (`OcrDetect`): one Worker per
 * instance opens the detection session; each request is one encoded image, answered with the
 * boxes of its text lines and their upright crops, packed ({@linkcode packCrops}).
 *
 * @module
 */

import { type InferFunc, type InferResult, ndarray, type WorkerContext } from "../../mod.ts";
import { decodeImage } from "./image.ts";
import type { OcrInstanceData } from "./ocr_instance.ts";
import { OcrDetector, packCrops } from "./pipeline.ts";

/**
 * Builds one instance.
 *
 * @param ctx The instance's context; `ctx.data` is {@linkcode OcrInstanceData}.
 * @returns The inference function: `image` to `boxes`, `crop_pixels`, `crop_sizes`.
 */
export default async function detectInstance(ctx: WorkerContext): Promise<InferFunc> {
  const { threads } = ctx.data as OcrInstanceData;
  const detector = await OcrDetector.create({ threads });
  return async (requests): Promise<InferResult[]> => {
    const results: InferResult[] = [];
    for (const request of requests) {
      const [image] = request.data.image!.data as Uint8Array[];
      const { boxes, crops } = await detector.detect(decodeImage(image!));
      const { pixels, sizes } = packCrops(crops);
      results.push({
        boxes: ndarray(new Float32Array(boxes.flat(2)), [boxes.length, 4, 2]),
        crop_pixels: ndarray(pixels, [pixels.length]),
        crop_sizes: ndarray(sizes, [crops.length, 2]),
      });
    }
    return results;
  };
}
