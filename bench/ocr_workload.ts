/**
 * The OCR benchmarks' shared workload (`ocr.ts`, `ocr_pipelines.ts`): the rendered images and the
 * texts each must read as, and the served measurement, so both scripts measure the same requests
 * the same way (which engines the host has: `host_engines.ts`, shared with `instances.ts`).
 *
 * @module
 */

import { ModelClient } from "../src/client/mod.ts";
import { ndarray } from "../mod.ts";
import { renderText } from "../examples/ocr/render.ts";
import { closedLoopRate } from "./closed_loop.ts";

/** The two lines of text on each image. */
export const TEXTS: readonly (readonly string[])[] = [
  ["Hello DenoTriton", "Serving 42 models"],
  ["Invoice No. 2026-117", "Total: 349.90 EUR"],
  ["The quick brown fox", "jumps over the lazy dog"],
  ["KServe v2 protocol", "HTTP and gRPC"],
];
/** The images, as PNG bytes, in the order of {@linkcode TEXTS}. */
export const IMAGES: readonly Uint8Array[] = TEXTS.map((lines) => renderText(lines));
/** How many images one measurement reads. */
export const REQUESTS = 32;
/** How many clients (or direct loops) read at once. */
export const CONCURRENCY = 4;

const decoder = new TextDecoder();

/**
 * Throws unless image `index` read as its text.
 *
 * @param what Names the form or setup in the error.
 * @param index The request's index (`index % IMAGES.length` is the image).
 * @param texts What it read, line by line.
 */
export function check(what: string, index: number, texts: readonly string[]): void {
  const expected = TEXTS[index % TEXTS.length]!;
  if (texts.join("\n") !== expected.join("\n")) {
    throw new Error(`${what}: image ${index % TEXTS.length} read as ${JSON.stringify(texts)}`);
  }
}

/**
 * Images/s of one model through a server: {@linkcode CONCURRENCY} binary-HTTP clients in this
 * process, each warmed with one image, then {@linkcode REQUESTS} images in a closed loop, every
 * answer checked.
 *
 * @param url The server's HTTP URL.
 * @param model The model to read with.
 * @returns Images per second.
 */
export async function servedRate(url: string, model: string): Promise<number> {
  const clients = Array.from(
    { length: CONCURRENCY },
    () => new ModelClient(url, model, { initTimeoutS: 60, inferenceTimeoutS: 120 }),
  );
  try {
    const once = async (client: ModelClient, index: number): Promise<void> => {
      const image = IMAGES[index % IMAGES.length]!;
      const out = await client.inferSample({ image: ndarray([image], [1]) });
      check(model, index, (out.texts!.data as Uint8Array[]).map((bytes) => decoder.decode(bytes)));
    };
    // Warm every instance.
    await Promise.all(clients.map((client, i) => once(client, i)));
    return await closedLoopRate(clients, REQUESTS, once);
  } finally {
    await Promise.all(clients.map((client) => client.close()));
  }
}
