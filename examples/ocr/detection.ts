/**
 * PP-OCRv4 text detection around the ONNX model: the input tensor (resize to multiples of 32,
 * ImageNet normalisation) and DB post-processing of the probability map (threshold, connected
 * components, minimum-area boxes scored on the map, unclip), with PaddleOCR's defaults but for
 * the unclip ratio.
 *
 * @module
 */

import {
  forEachPixelInQuad,
  minAreaRect,
  type Point,
  type Quad,
  rectCorners,
  unclip,
} from "./geometry.ts";
import { resizeBilinear, type RgbImage } from "./image.ts";

/** Settings of detection, PaddleOCR's names in brackets. */
export interface DetectionOptions {
  /**
   * The longer side is scaled down to at most this (`det_limit_side_len`, limit type `max`).
   *
   * @default {960}
   */
  limitSideLen?: number;
  /**
   * `"max"`: the longer side is scaled down to `limitSideLen`; `"min"`: the shorter side is
   * scaled up to it (`det_limit_type`).
   *
   * @default {"max"}
   */
  limitType?: "max" | "min";
  /**
   * Probability above which a pixel is text (`det_db_thresh`).
   *
   * @default {0.3}
   */
  threshold?: number;
  /**
   * Mean probability inside a box below which it is dropped (`det_db_box_thresh`).
   *
   * @default {0.6}
   */
  boxThreshold?: number;
  /**
   * How far a box grows: `area * ratio / perimeter` on each side (`det_db_unclip_ratio`).
   * PaddleOCR 2.x uses 1.5; with boxes that tight the recognition model drops the spaces between
   * words of a line, so the default here is 2.
   *
   * @default {2}
   */
  unclipRatio?: number;
  /**
   * At most this many components are considered (`max_candidates`).
   *
   * @default {1000}
   */
  maxCandidates?: number;
}

/** A detected text region in source-image pixels. */
export interface DetectedBox {
  /** Top-left, top-right, bottom-right, bottom-left. */
  quad: Quad;
  /** Mean text probability inside the box before unclipping. */
  score: number;
}

/** The detection model's input and how to map its output back. */
export interface DetectionInput {
  /** NCHW float32, channels B, G, R (PaddleOCR reads images with OpenCV). */
  data: Float32Array;
  /** `[1, 3, height, width]`. */
  dims: [number, number, number, number];
}

// ImageNet statistics, applied to B, G, R in this order as PaddleOCR does.
const MEAN = [0.485, 0.456, 0.406];
const STD = [0.229, 0.224, 0.225];
const MIN_SIZE = 3;

/**
 * Builds the detection input: the longer side limited to `limitSideLen`, each side rounded to a
 * multiple of 32 (at least 32), then `(x / 255 - mean) / std` per channel.
 *
 * @param image The source image.
 * @param limitSideLen Longest side before rounding.
 * @returns The tensor data and dims.
 */
export function detectionInput(
  image: RgbImage,
  limitSideLen = 960,
  limitType: "max" | "min" = "max",
): DetectionInput {
  const longest = Math.max(image.width, image.height);
  const shortest = Math.min(image.width, image.height);
  const ratio = limitType === "max"
    ? (longest > limitSideLen ? limitSideLen / longest : 1)
    : (shortest < limitSideLen ? limitSideLen / shortest : 1);
  const round32 = (side: number): number =>
    Math.max(Math.round(Math.trunc(side * ratio) / 32) * 32, 32);
  const width = round32(image.width);
  const height = round32(image.height);
  const resized = resizeBilinear(image, width, height);
  const plane = width * height;
  const data = new Float32Array(3 * plane);
  for (let p = 0; p < plane; p++) {
    for (let c = 0; c < 3; c++) {
      // Channel c of the tensor is B, G, R: RGB index 2 - c.
      data[c * plane + p] = (resized.data[p * 3 + 2 - c]! / 255 - MEAN[c]!) / STD[c]!;
    }
  }
  return { data, dims: [1, 3, height, width] };
}

/**
 * Labels 8-connected components of `prob > threshold` and returns, per component, the points
 * whose hull is the component's hull: its leftmost and rightmost pixel on each row.
 */
function components(
  prob: Float32Array,
  width: number,
  height: number,
  threshold: number,
): Point[][] {
  const labels = new Int32Array(width * height).fill(-1);
  const result: Point[][] = [];
  const stack: number[] = [];
  for (let start = 0; start < prob.length; start++) {
    if (labels[start] !== -1 || !(prob[start]! > threshold)) continue;
    const label = result.length;
    const rows = new Map<number, [number, number]>();
    labels[start] = label;
    stack.push(start);
    while (stack.length > 0) {
      const index = stack.pop()!;
      const x = index % width;
      const y = (index - x) / width;
      const span = rows.get(y);
      if (span === undefined) rows.set(y, [x, x]);
      else {
        span[0] = Math.min(span[0], x);
        span[1] = Math.max(span[1], x);
      }
      for (let dy = -1; dy <= 1; dy++) {
        const ny = y + dy;
        if (ny < 0 || ny >= height) continue;
        for (let dx = -1; dx <= 1; dx++) {
          const nx = x + dx;
          if (nx < 0 || nx >= width) continue;
          const next = ny * width + nx;
          if (labels[next] === -1 && prob[next]! > threshold) {
            labels[next] = label;
            stack.push(next);
          }
        }
      }
    }
    const points: Point[] = [];
    for (const [y, [left, right]] of rows) points.push([left, y], [right, y]);
    result.push(points);
  }
  return result;
}

/** PaddleOCR's `box_score_fast`: the mean probability over the pixels inside the quad. */
function boxScore(prob: Float32Array, width: number, height: number, quad: Quad): number {
  let sum = 0;
  let count = 0;
  forEachPixelInQuad(quad, width, height, (x, y) => {
    sum += prob[y * width + x]!;
    count++;
  });
  return count === 0 ? 0 : sum / count;
}

/**
 * DB post-processing: turns the probability map into text boxes in source-image pixels, sorted
 * top to bottom, then left to right within a line (PaddleOCR's `sorted_boxes`).
 *
 * @param prob The `[height, width]` probability map (the model's output).
 * @param width Map width (the model input's width).
 * @param height Map height.
 * @param source The source image's size.
 * @param options Thresholds.
 * @returns The boxes.
 */
export function detectionBoxes(
  prob: Float32Array,
  width: number,
  height: number,
  source: { width: number; height: number },
  options: DetectionOptions = {},
): DetectedBox[] {
  const threshold = options.threshold ?? 0.3;
  const boxThreshold = options.boxThreshold ?? 0.6;
  const unclipRatio = options.unclipRatio ?? 2;
  const maxCandidates = options.maxCandidates ?? 1000;
  const boxes: DetectedBox[] = [];
  for (const points of components(prob, width, height, threshold).slice(0, maxCandidates)) {
    const rect = minAreaRect(points);
    if (Math.min(rect.width, rect.height) < MIN_SIZE) continue;
    const score = boxScore(prob, width, height, rectCorners(rect));
    if (score < boxThreshold) continue;
    const grown = unclip(rect, unclipRatio);
    if (Math.min(grown.width, grown.height) < MIN_SIZE + 2) continue;
    const sx = source.width / width;
    const sy = source.height / height;
    const clip = (v: number, max: number): number => Math.min(Math.max(v, 0), max - 1);
    const quad = rectCorners(grown).map(([x, y]) => [
      clip(Math.round(x * sx), source.width),
      clip(Math.round(y * sy), source.height),
    ]) as Quad;
    const boxWidth = Math.round(Math.hypot(quad[1][0] - quad[0][0], quad[1][1] - quad[0][1]));
    const boxHeight = Math.round(Math.hypot(quad[3][0] - quad[0][0], quad[3][1] - quad[0][1]));
    if (boxWidth <= 3 || boxHeight <= 3) continue;
    boxes.push({ quad, score });
  }
  return sortReadingOrder(boxes);
}

/**
 * Sorts boxes top to bottom, and boxes whose tops are within 10 px left to right (PaddleOCR's
 * `sorted_boxes`).
 *
 * @param boxes The boxes (not modified).
 * @returns A sorted copy.
 */
export function sortReadingOrder(boxes: readonly DetectedBox[]): DetectedBox[] {
  const sorted = [...boxes].sort((a, b) =>
    a.quad[0][1] - b.quad[0][1] || a.quad[0][0] - b.quad[0][0]
  );
  for (let i = 0; i < sorted.length - 1; i++) {
    for (let j = i; j >= 0; j--) {
      const a = sorted[j]!;
      const b = sorted[j + 1]!;
      if (Math.abs(b.quad[0][1] - a.quad[0][1]) < 10 && b.quad[0][0] < a.quad[0][0]) {
        sorted[j] = b;
        sorted[j + 1] = a;
      } else break;
    }
  }
  return sorted;
}
