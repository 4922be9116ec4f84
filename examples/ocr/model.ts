/**
 * The OCR model (PP-OCRv4 text detection + recognition on ONNX Runtime) on Worker instances, and
 * the same pipeline split in two models served two more ways.
 *
 * Input `image`: one PNG or JPEG file (BYTES, shape `[1]`). Outputs, one entry per text line in
 * reading order: `texts` (BYTES `[n]`), `scores` (FP32 `[n]`, recognition confidence) and
 * `boxes` (FP32 `[n, 4, 2]`: top-left, top-right, bottom-right, bottom-left corners in image
 * pixels).
 *
 * The split: `OcrDetect` (image → boxes and their crops) and `OcrRecognize` (crops and boxes →
 * texts, scores and the boxes kept), each on Workers of its own. `OcrPipeline` is a callable that
 * calls the two (`context.infer`); `OcrEnsemble` is an ensemble of them. All three answer like
 * `OCR`.
 *
 * @module
 */

import {
  type BindOptions,
  ensemble,
  ensembleStep,
  type InferRequest,
  type TensorsOf,
  type Triton,
  workers,
} from "../../mod.ts";
import type { OcrInstanceData } from "./ocr_instance.ts";

/** The model's name. */
export const OCR_MODEL = "OCR";
/** The detection model of the split pipeline. */
export const OCR_DETECT = "OcrDetect";
/** The recognition model of the split pipeline. */
export const OCR_RECOGNIZE = "OcrRecognize";
/** The split pipeline as a callable calling the two models. */
export const OCR_PIPELINE = "OcrPipeline";
/** The split pipeline as an ensemble of the two models. */
export const OCR_ENSEMBLE = "OcrEnsemble";

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
  return triton.bind({
    modelName: OCR_MODEL,
    inferFunc: workers(new URL("./ocr_instance.ts", import.meta.url), {
      count: instances,
      data: instanceData(options, instances),
    }),
    inputs: IMAGE,
    outputs: LINES,
    // One image per request: images differ in size, so there is nothing to batch; the
    // instances serve requests in parallel.
    config: { batching: false },
    strict: true,
  });
}

/** The input of every form: one encoded image. */
const IMAGE = [{ name: "image", dtype: "bytes", shape: [1] }] as const;
/** The outputs of every form: the lines read. */
const LINES = [
  { name: "texts", dtype: "bytes", shape: [-1] },
  { name: "scores", dtype: "float32", shape: [-1] },
  { name: "boxes", dtype: "float32", shape: [-1, 4, 2] },
] as const;
/** Detection's outputs: the boxes, and their crops packed (see `packCrops`). */
const DETECTED = [
  { name: "boxes", dtype: "float32", shape: [-1, 4, 2] },
  { name: "crop_pixels", dtype: "uint8", shape: [-1] },
  { name: "crop_sizes", dtype: "int32", shape: [-1, 2] },
] as const;
/** Recognition's inputs: detection's outputs. */
const CROPS = DETECTED;
/** Recognition's outputs: the lines kept. */
const READ = [
  { name: "texts", dtype: "bytes", shape: [-1] },
  { name: "scores", dtype: "float32", shape: [-1] },
  { name: "line_boxes", dtype: "float32", shape: [-1, 4, 2] },
] as const;

function instanceData(options: OcrModelOptions, instances: number): OcrInstanceData {
  return {
    threads: options.threads ??
      Math.max(1, Math.floor(navigator.hardwareConcurrency / instances)),
  };
}

/**
 * The detection model of the split pipeline.
 *
 * @param options Instances and threads.
 * @returns What `bind()` takes.
 */
export function ocrDetectModel(
  options: OcrModelOptions = {},
): BindOptions<typeof IMAGE, typeof DETECTED> {
  const instances = options.instances ?? 1;
  return {
    modelName: OCR_DETECT,
    inferFunc: workers(new URL("./detect_instance.ts", import.meta.url), {
      count: instances,
      data: instanceData(options, instances),
    }),
    inputs: IMAGE,
    outputs: DETECTED,
    config: { batching: false },
    strict: true,
  };
}

/**
 * The recognition model of the split pipeline.
 *
 * @param options Instances and threads.
 * @returns What `bind()` takes.
 */
export function ocrRecognizeModel(
  options: OcrModelOptions = {},
): BindOptions<typeof CROPS, typeof READ> {
  const instances = options.instances ?? 1;
  return {
    modelName: OCR_RECOGNIZE,
    inferFunc: workers(new URL("./recognize_instance.ts", import.meta.url), {
      count: instances,
      data: instanceData(options, instances),
    }),
    inputs: CROPS,
    outputs: READ,
    config: { batching: false },
    strict: true,
  };
}

/**
 * Binds the split pipeline: its two models, the callable that calls them and the ensemble of
 * them.
 *
 * @param triton The server.
 * @param options Instances and threads of each of the two models.
 * @returns A promise that settles once all four are loaded.
 */
export async function bindOcrPipelines(
  triton: Triton,
  options: OcrModelOptions = {},
): Promise<void> {
  const detect = ocrDetectModel(options);
  const recognize = ocrRecognizeModel(options);
  await triton.bind(detect);
  await triton.bind(recognize);
  // The callable runs on the main thread: it only hands tensors from one model to the next (the
  // same arrays on the built-in engine; lent to the core on the Triton engine).
  await triton.bind({
    modelName: OCR_PIPELINE,
    inferFunc: (requests: InferRequest<TensorsOf<typeof IMAGE>>[], context) =>
      Promise.all(requests.map(async (request) => {
        const detected = await context.infer(detect, { image: request.image }, { request });
        const read = await context.infer(recognize, detected, { request });
        return { texts: read.texts, scores: read.scores, boxes: read.line_boxes };
      })),
    inputs: IMAGE,
    outputs: LINES,
    config: { batching: false },
  });
  await triton.bind(ensemble({
    modelName: OCR_ENSEMBLE,
    inputs: IMAGE,
    outputs: LINES,
    steps: [
      ensembleStep(detect, {
        inputMap: { image: "image" },
        outputMap: { boxes: "detected", crop_pixels: "pixels", crop_sizes: "sizes" },
      }),
      ensembleStep(recognize, {
        inputMap: { boxes: "detected", crop_pixels: "pixels", crop_sizes: "sizes" },
        outputMap: { texts: "texts", scores: "scores", line_boxes: "boxes" },
      }),
    ],
  }));
}
