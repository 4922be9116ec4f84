/**
 * PP-OCRv4 text recognition around the ONNX model: cropping a detected box upright, the input
 * tensor (height 48, width by aspect ratio, `(x / 255 - 0.5) / 0.5`) and greedy CTC decoding
 * with the character dictionary.
 *
 * @module
 */

import type { Quad } from "./geometry.ts";
import type { RgbImage } from "./image.ts";

/** The recognition model's input height. */
export const REC_HEIGHT = 48;
/** The narrowest input width (PaddleOCR's `rec_image_shape` 3,48,320). */
export const REC_MIN_WIDTH = 320;

/**
 * The CTC classes of the model: `blank` (index 0), then the dictionary's lines, then a space
 * (PaddleOCR's `use_space_char`).
 *
 * @param dictionary The dictionary file's text, one character a line.
 * @returns The class of each output index; index 0 is the blank and maps to `""`.
 */
export function ctcClasses(dictionary: string): string[] {
  const lines = dictionary.split(/\r?\n/);
  // The file ends without a newline; a trailing empty line would be a bogus class.
  if (lines.at(-1) === "") lines.pop();
  return ["", ...lines, " "];
}

/**
 * Cuts a box out of the image, upright: the quad's top edge becomes the crop's top row
 * (PaddleOCR's `get_rotate_crop_image`, sampled bilinearly with edge pixels repeated). A crop at
 * least 1.5 times taller than wide is turned a quarter counter-clockwise.
 *
 * @param image The source image.
 * @param quad Top-left, top-right, bottom-right, bottom-left.
 * @returns The crop.
 */
export function cropQuad(image: RgbImage, quad: Quad): RgbImage {
  const [p0, p1, p2, p3] = quad;
  const dist = (a: readonly number[], b: readonly number[]): number =>
    Math.hypot(a[0]! - b[0]!, a[1]! - b[1]!);
  const width = Math.max(1, Math.trunc(Math.max(dist(p0, p1), dist(p2, p3))));
  const height = Math.max(1, Math.trunc(Math.max(dist(p0, p3), dist(p1, p2))));
  const out = new Uint8Array(width * height * 3);
  const src = image.data;
  const stride = image.width * 3;
  // The quad is a parallelogram (a rotated rectangle scaled per axis), so the map from crop
  // pixel (u, v) to the source is affine: p0 + u/W (p1 - p0) + v/H (p3 - p0).
  const ux = (p1[0] - p0[0]) / width;
  const uy = (p1[1] - p0[1]) / width;
  const vx = (p3[0] - p0[0]) / height;
  const vy = (p3[1] - p0[1]) / height;
  for (let v = 0; v < height; v++) {
    for (let u = 0; u < width; u++) {
      const fx = Math.min(Math.max(p0[0] + u * ux + v * vx, 0), image.width - 1);
      const fy = Math.min(Math.max(p0[1] + u * uy + v * vy, 0), image.height - 1);
      const x0 = Math.floor(fx);
      const y0 = Math.floor(fy);
      const x1 = Math.min(x0 + 1, image.width - 1);
      const y1 = Math.min(y0 + 1, image.height - 1);
      const wx = fx - x0;
      const wy = fy - y0;
      const a = y0 * stride + x0 * 3;
      const b = y0 * stride + x1 * 3;
      const c = y1 * stride + x0 * 3;
      const d = y1 * stride + x1 * 3;
      const o = (v * width + u) * 3;
      for (let ch = 0; ch < 3; ch++) {
        const top = src[a + ch]! + (src[b + ch]! - src[a + ch]!) * wx;
        const bottom = src[c + ch]! + (src[d + ch]! - src[c + ch]!) * wx;
        out[o + ch] = Math.round(top + (bottom - top) * wy);
      }
    }
  }
  const crop = { width, height, data: out };
  return height / width >= 1.5 ? rotateCounterClockwise(crop) : crop;
}

function rotateCounterClockwise(image: RgbImage): RgbImage {
  const { width, height, data } = image;
  const out = new Uint8Array(data.length);
  // New image is height wide and width tall; source column (width - 1 - y) becomes row y.
  for (let y = 0; y < width; y++) {
    for (let x = 0; x < height; x++) {
      const from = (x * width + (width - 1 - y)) * 3;
      const to = (y * height + x) * 3;
      out.set(data.subarray(from, from + 3), to);
    }
  }
  return { width: height, height: width, data: out };
}

/** A batch of crops as one recognition input. */
export interface RecognitionInput {
  /** NCHW float32, channels B, G, R. */
  data: Float32Array;
  /** `[crops, 3, 48, width]`. */
  dims: [number, number, number, number];
}

/**
 * Builds the recognition input for crops of similar shape: every crop scaled to height 48 at its
 * aspect ratio, normalised to [-1, 1], and zero-padded on the right to the widest crop of the
 * batch (at least 320).
 *
 * @param crops The crops (at least one).
 * @returns The tensor data and dims.
 */
export function recognitionInput(crops: readonly RgbImage[]): RecognitionInput {
  let maxRatio = REC_MIN_WIDTH / REC_HEIGHT;
  for (const crop of crops) maxRatio = Math.max(maxRatio, crop.width / crop.height);
  const width = Math.trunc(REC_HEIGHT * maxRatio);
  const plane = REC_HEIGHT * width;
  const data = new Float32Array(crops.length * 3 * plane);
  crops.forEach((crop, n) => {
    const scaledWidth = Math.min(width, Math.ceil(REC_HEIGHT * crop.width / crop.height));
    const sx = crop.width / scaledWidth;
    const sy = crop.height / REC_HEIGHT;
    const base = n * 3 * plane;
    for (let y = 0; y < REC_HEIGHT; y++) {
      const fy = Math.min(Math.max((y + 0.5) * sy - 0.5, 0), crop.height - 1);
      const y0 = Math.floor(fy);
      const y1 = Math.min(y0 + 1, crop.height - 1);
      const wy = fy - y0;
      for (let x = 0; x < scaledWidth; x++) {
        const fx = Math.min(Math.max((x + 0.5) * sx - 0.5, 0), crop.width - 1);
        const x0 = Math.floor(fx);
        const x1 = Math.min(x0 + 1, crop.width - 1);
        const wx = fx - x0;
        for (let c = 0; c < 3; c++) {
          const ch = 2 - c; // tensor channel c is B, G, R
          const at = (xx: number, yy: number): number =>
            crop.data[(yy * crop.width + xx) * 3 + ch]!;
          const top = at(x0, y0) + (at(x1, y0) - at(x0, y0)) * wx;
          const bottom = at(x0, y1) + (at(x1, y1) - at(x0, y1)) * wx;
          const value = Math.round(top + (bottom - top) * wy);
          data[base + c * plane + y * width + x] = (value / 255 - 0.5) / 0.5;
        }
      }
    }
  });
  return { data, dims: [crops.length, 3, REC_HEIGHT, width] };
}

/** One decoded line. */
export interface DecodedText {
  /** The characters. */
  text: string;
  /** Mean probability of the kept characters (0 when none was kept). */
  score: number;
}

/**
 * Greedy CTC decoding: the most probable class per time step, repeats merged, blanks dropped.
 *
 * @param probs `[batch, steps, classes]` softmax output, row-major.
 * @param dims Its dims.
 * @param classes From {@linkcode ctcClasses}.
 * @returns One text per batch entry.
 */
export function ctcDecode(
  probs: Float32Array,
  dims: readonly [number, number, number],
  classes: readonly string[],
): DecodedText[] {
  const [batch, steps, count] = dims;
  if (count !== classes.length) {
    throw new Error(
      `Cannot decode recognition output: it has ${count} classes, the dictionary gives ${classes.length}`,
    );
  }
  const out: DecodedText[] = [];
  for (let n = 0; n < batch; n++) {
    let text = "";
    let sum = 0;
    let kept = 0;
    let previous = -1;
    for (let t = 0; t < steps; t++) {
      const row = (n * steps + t) * count;
      let best = 0;
      let bestProb = probs[row]!;
      for (let k = 1; k < count; k++) {
        const p = probs[row + k]!;
        if (p > bestProb) {
          best = k;
          bestProb = p;
        }
      }
      if (best !== 0 && best !== previous) {
        text += classes[best]!;
        sum += bestProb;
        kept++;
      }
      previous = best;
    }
    out.push({ text, score: kept === 0 ? 0 : sum / kept });
  }
  return out;
}
