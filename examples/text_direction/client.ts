/**
 * Asks TextDirection which way up some lines of text are. Without files it renders lines of text
 * with DejaVu Sans and sends each one upright and turned upside down; with files (PNG or JPEG,
 * one text line each) it sends those.
 *
 *     deno run -A examples/text_direction/client.ts [url] [line.png ...]
 *
 * @module
 */

import { ModelClient } from "../../src/client/mod.ts";
import { asDType, ndarray } from "../../mod.ts";
import { decodeImage, type RgbImage } from "../ocr/image.ts";
import { renderText } from "../ocr/render.ts";
import { TEXT_DIRECTION_MODEL } from "./model.ts";
import {
  classifierInput,
  CLS_CHANNELS,
  CLS_HEIGHT,
  CLS_WIDTH,
  cropToText,
  rotateHalfTurn,
} from "./preprocess.ts";

/** The lines the client renders when it is given no files. */
export const SAMPLE_LINES = [
  "Hello DenoTriton",
  "Invoice No. 2026-117",
  "The quick brown fox",
  "KServe v2 protocol",
];

/** One answer. */
export interface DirectionAnswer {
  /** `"0"` (upright) or `"180"` (upside down). */
  label: string;
  /** The probabilities of upright and of upside down. */
  probs: [number, number];
  /** Where it was computed (`cuda:0 GPU`, `cuda:0 CPU`). */
  device: string;
}

/**
 * Text lines rendered with DejaVu Sans and cropped to the text, each followed by its half turn.
 *
 * @param lines The texts.
 * @returns Crops: line 0 upright, line 0 upside down, line 1 upright, ...
 */
export function renderedCrops(lines: readonly string[] = SAMPLE_LINES): RgbImage[] {
  return lines.flatMap((line) => {
    const crop = cropToText(decodeImage(renderText([line])));
    return [crop, rotateHalfTurn(crop)];
  });
}

/**
 * Classifies crops in one request.
 *
 * @param url Server URL (`http://...` or `grpc://...`).
 * @param crops Text lines.
 * @param model The model's name.
 * @returns One answer per crop.
 */
export async function runClient(
  url: string,
  crops: readonly RgbImage[],
  model = TEXT_DIRECTION_MODEL,
): Promise<DirectionAnswer[]> {
  const client = new ModelClient(url, model, { initTimeoutS: 60 });
  try {
    const x = ndarray(classifierInput(crops), [crops.length, CLS_CHANNELS, CLS_HEIGHT, CLS_WIDTH]);
    const out = await client.inferBatch({ x });
    const probs = asDType(out.probs, "float32").data;
    const decoder = new TextDecoder();
    const labels = asDType(out.label, "bytes").data;
    const devices = asDType(out.device, "bytes").data;
    return crops.map((_, i) => ({
      label: decoder.decode(labels[i]!),
      probs: [probs[2 * i]!, probs[2 * i + 1]!],
      device: decoder.decode(devices[i]!),
    }));
  } finally {
    await client.close();
  }
}

if (import.meta.main) {
  const [url = "http://127.0.0.1:8000", ...files] = Deno.args;
  const crops = files.length > 0
    ? files.map((file) => decodeImage(Deno.readFileSync(file)))
    : renderedCrops();
  const names = files.length > 0
    ? files
    : SAMPLE_LINES.flatMap((line) => [`"${line}"`, `"${line}" upside down`]);
  const answers = await runClient(url, crops);
  answers.forEach((answer, i) => {
    const [up, down] = answer.probs.map((p) => p.toFixed(4));
    console.log(`${names[i]}: ${answer.label} (p0=${up}, p180=${down}) on ${answer.device}`);
  });
}
