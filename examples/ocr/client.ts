/**
 * Sends an image to the OCR model and prints the lines it read. Without a file it renders a
 * two-line PNG first.
 *
 *     deno run -A examples/ocr/client.ts [url] [image.png|image.jpg|-] [model]
 *
 * `-` (or no file) renders the test image; `model` picks the form that reads it (`OCR`,
 * `OcrPipeline`, `OcrEnsemble`).
 *
 * @module
 */

import { ModelClient } from "../../src/client/mod.ts";
import { ndarray } from "../../mod.ts";
import type { Quad } from "./geometry.ts";
import { OCR_MODEL } from "./model.ts";
import { renderText } from "./render.ts";

/** One line as the server returned it. */
export interface OcrAnswer {
  /** The text. */
  text: string;
  /** Recognition confidence. */
  score: number;
  /** Corners in image pixels. */
  box: Quad;
}

/**
 * Reads the text of one image through the server.
 *
 * @param url Server URL (`http://...` or `grpc://...`).
 * @param image PNG or JPEG bytes.
 * @param model Which form reads it: `OCR`, `OcrPipeline` or `OcrEnsemble`.
 * @returns The lines in reading order.
 */
export async function runClient(
  url: string,
  image: Uint8Array,
  model: string = OCR_MODEL,
): Promise<OcrAnswer[]> {
  await using client = new ModelClient(url, model, { initTimeoutS: 60, inferenceTimeoutS: 60 });
  const out = await client.inferSample({ image: ndarray([image], [1]) });
  const decoder = new TextDecoder();
  const texts = (out.texts!.data as Uint8Array[]).map((bytes) => decoder.decode(bytes));
  const scores = out.scores!.data as Float32Array;
  const boxes = out.boxes!.data as Float32Array;
  return texts.map((text, i) => ({
    text,
    score: scores[i]!,
    box: [0, 1, 2, 3].map((c) => [boxes[i * 8 + c * 2]!, boxes[i * 8 + c * 2 + 1]!]) as Quad,
  }));
}

if (import.meta.main) {
  const url = Deno.args[0] ?? "http://127.0.0.1:8000";
  const image = Deno.args[1] === undefined || Deno.args[1] === "-"
    ? renderText(["Hello DenoTriton", "Serving 42 models"])
    : await Deno.readFile(Deno.args[1]);
  for (const line of await runClient(url, image, Deno.args[2])) {
    console.log(`${line.score.toFixed(3)}  ${JSON.stringify(line.box)}  ${line.text}`);
  }
}
