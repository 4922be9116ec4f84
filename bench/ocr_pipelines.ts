/**
 * The OCR example served three ways on one server, per installed engine: `OCR` (one model,
 * detection and recognition in one Worker), `OcrPipeline` (a callable on the main thread calling
 * `OcrDetect` then `OcrRecognize`, each on a Worker of its own, with `context.infer`) and
 * `OcrEnsemble` (an ensemble of the same two models). Images per second, in one run, every
 * answer checked against the rendered text.
 *
 * Run: `deno task bench:ocr-pipelines [--out bench/results/ocr-pipelines-<date>.md] [--rounds 3]`.
 *
 * @module
 */

import * as ort from "onnxruntime-node";
import { Triton } from "../mod.ts";
import {
  bindOcr,
  bindOcrPipelines,
  OCR_ENSEMBLE,
  OCR_MODEL,
  OCR_PIPELINE,
} from "../examples/ocr/model.ts";
import { CONCURRENCY, IMAGES, REQUESTS, servedRate } from "./ocr_workload.ts";
import { option } from "./args.ts";
import { engines } from "./host_engines.ts";

const ROUNDS = Number(option("rounds") ?? 3);
const FORMS = [OCR_MODEL, OCR_PIPELINE, OCR_ENSEMBLE] as const;

const lines: string[] = [];
const log = (line: string): void => {
  lines.push(line);
  console.log(line);
};

const kinds = await engines();
const best = new Map<string, number>();
// The three forms on one server, in alternating rounds, best of each: the host is shared, so
// interference only lowers figures, and each form meets the same conditions.
for (const engine of kinds) {
  await using triton = new Triton({
    engine,
    config: {
      httpPort: 0,
      grpcPort: 0,
      metricsPort: 0,
      httpAddress: "127.0.0.1",
      grpcAddress: "127.0.0.1",
      logVerbose: 0,
    },
  });
  // One Worker for OCR, one for each of the split models: the same ONNX Runtime threads per
  // Worker (every core), so the forms differ by how the two halves are served.
  const threads = navigator.hardwareConcurrency;
  await bindOcr(triton, { instances: 1, threads });
  await bindOcrPipelines(triton, { instances: 1, threads });
  await triton.run();
  for (let round = 0; round < ROUNDS; round++) {
    for (const form of FORMS) {
      const key = `${engine}/${form}`;
      best.set(key, Math.max(best.get(key) ?? 0, await servedRate(triton.urls.http!, form)));
    }
  }
}

const cores = navigator.hardwareConcurrency;
log(`# OCR pipelines benchmark (${new Date().toISOString().slice(0, 10)})`);
log("");
log(
  `Deno ${Deno.version.deno}, ${cores} logical CPUs (shared with other jobs). PP-OCRv4 detection + ` +
    `recognition (examples/ocr) on ONNX Runtime ${ort.env.versions.node} (CPU), ${REQUESTS} images of ` +
    `two rendered text lines (${IMAGES.length} different PNGs), ${CONCURRENCY} concurrent binary-HTTP ` +
    `clients in the server's process, best of ${ROUNDS} alternating rounds on one server per engine; ` +
    `every answer is checked against the rendered text. OCR: one model, 1 Worker. OcrPipeline: a ` +
    `main-thread callable calling OcrDetect then OcrRecognize (context.infer), 1 Worker each. ` +
    `OcrEnsemble: an ensemble of the same two models. Every Worker runs ONNX Runtime on ${cores} threads.`,
);
log("");
log("| engine | form | images/s | ratio to OCR |");
log("| --- | --- | --- | --- |");
for (const engine of kinds) {
  const single = best.get(`${engine}/${OCR_MODEL}`)!;
  for (const form of FORMS) {
    const value = best.get(`${engine}/${form}`)!;
    log(`| ${engine} | ${form} | ${value.toFixed(2)} | ${(value / single).toFixed(2)} |`);
  }
}

const out = option("out");
if (out !== undefined) await Deno.writeTextFile(out, lines.join("\n") + "\n");
