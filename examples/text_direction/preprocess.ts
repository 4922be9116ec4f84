/**
 * The classifier's input from a crop of one text line, the way PaddleOCR prepares it for
 * `ch_ppocr_mobile_v2.0_cls` (`cls_image_shape` 3,48,192): scaled to height 48 at its aspect
 * ratio (squeezed to width 192 when wider), normalised to [-1, 1], channels B, G, R, and
 * zero-padded on the right. Also the helpers the client, tests and benchmark use to make crops:
 * a tight crop around dark text and a half turn. Decoding and resizing are the OCR example's.
 *
 * @module
 */

import { resizeBilinear, type RgbImage } from "../ocr/image.ts";

/** Input channels. */
export const CLS_CHANNELS = 3;
/** Input height. */
export const CLS_HEIGHT = 48;
/** Input width. */
export const CLS_WIDTH = 192;
/** Floats per sample: 3 x 48 x 192. */
export const CLS_SAMPLE = CLS_CHANNELS * CLS_HEIGHT * CLS_WIDTH;
/** The classes, in the order of the model's output: upright, turned by a half turn. */
export const CLS_LABELS = ["0", "180"] as const;

/**
 * Writes one crop's input into `out` at sample `index`.
 *
 * @param crop The text line.
 * @param out `[N, 3, 48, 192]` float32.
 * @param index The sample.
 */
export function writeClassifierInput(crop: RgbImage, out: Float32Array, index: number): void {
  const width = Math.min(CLS_WIDTH, Math.ceil(CLS_HEIGHT * crop.width / crop.height));
  const scaled = resizeBilinear(crop, width, CLS_HEIGHT);
  const plane = CLS_HEIGHT * CLS_WIDTH;
  const base = index * CLS_SAMPLE;
  out.fill(0, base, base + CLS_SAMPLE);
  for (let y = 0; y < CLS_HEIGHT; y++) {
    for (let x = 0; x < width; x++) {
      const pixel = (y * width + x) * 3;
      for (let c = 0; c < 3; c++) {
        // Tensor channel c is B, G, R: PaddleOCR reads images with OpenCV.
        const value = scaled.data[pixel + 2 - c]!;
        out[base + c * plane + y * CLS_WIDTH + x] = (value / 255 - 0.5) / 0.5;
      }
    }
  }
}

/**
 * The classifier's input for a batch of crops.
 *
 * @param crops Text lines, one per sample.
 * @returns `[crops.length, 3, 48, 192]` float32.
 */
export function classifierInput(crops: readonly RgbImage[]): Float32Array {
  const out = new Float32Array(crops.length * CLS_SAMPLE);
  crops.forEach((crop, i) => writeClassifierInput(crop, out, i));
  return out;
}

/**
 * The smallest box around pixels darker than mid-grey, with a margin: a rendered line of text
 * cropped the way a text detector would box it.
 *
 * @param image Dark text on a light background.
 * @param margin Pixels kept around the text on each side.
 * @returns The crop (the whole image when nothing is dark).
 */
export function cropToText(image: RgbImage, margin = 4): RgbImage {
  let [left, top, right, bottom] = [image.width, image.height, -1, -1];
  for (let y = 0; y < image.height; y++) {
    for (let x = 0; x < image.width; x++) {
      const p = (y * image.width + x) * 3;
      if (image.data[p]! + image.data[p + 1]! + image.data[p + 2]! < 3 * 128) {
        left = Math.min(left, x);
        right = Math.max(right, x);
        top = Math.min(top, y);
        bottom = Math.max(bottom, y);
      }
    }
  }
  if (right < 0) return image;
  left = Math.max(0, left - margin);
  top = Math.max(0, top - margin);
  right = Math.min(image.width - 1, right + margin);
  bottom = Math.min(image.height - 1, bottom + margin);
  const width = right - left + 1;
  const height = bottom - top + 1;
  const data = new Uint8Array(width * height * 3);
  for (let y = 0; y < height; y++) {
    const from = ((top + y) * image.width + left) * 3;
    data.set(image.data.subarray(from, from + width * 3), y * width * 3);
  }
  return { width, height, data };
}

/**
 * Turns an image by a half turn (180 degrees).
 *
 * @param image The image.
 * @returns The image upside down and mirrored: pixel (x, y) moves to (w-1-x, h-1-y).
 */
export function rotateHalfTurn(image: RgbImage): RgbImage {
  const pixels = image.width * image.height;
  const data = new Uint8Array(pixels * 3);
  for (let p = 0; p < pixels; p++) {
    data.set(image.data.subarray(p * 3, p * 3 + 3), (pixels - 1 - p) * 3);
  }
  return { width: image.width, height: image.height, data };
}
