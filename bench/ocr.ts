/**
 * The OCR example served by DenoTriton with 1 and 2 Worker instances, on every installed engine,
 * against its ceiling: the same pipeline (ONNX Runtime, in-process) called in a plain loop in this
 * Deno process, without a server (one loop on every core, and two concurrent loops on one thread
 * each). Images per second, in one run.
 *
 * Run: `deno task bench:ocr [--out bench/results/ocr-<date>.md]`.
 *
 * @module
 */

import { closedLoopRate } from "./closed_loop.ts";
import * as ort from "onnxruntime-node";
import { Triton } from "../mod.ts";
import type { EngineKind } from "../src/engine/engine.ts";
import { bindOcr, OCR_MODEL } from "../examples/ocr/model.ts";
import { MODEL_FILES, OcrPipeline } from "../examples/ocr/pipeline.ts";
import { check, CONCURRENCY, IMAGES, REQUESTS, servedRate } from "./ocr_workload.ts";
import { option } from "./args.ts";
import { engines } from "./host_engines.ts";

const ROUNDS = 3;

/**
 * The pipeline called directly in this process: `loops` concurrent loops, each with its own
 * sessions of `threads` intra-op threads (whether two loops' inferences overlap in one thread is
 * what {@linkcode overlap} measures).
 */
async function direct(loops: number, threads: number): Promise<number> {
  const pipelines = await Promise.all(
    Array.from({ length: loops }, () => OcrPipeline.create({ threads })),
  );
  try {
    for (const pipeline of pipelines) {
      for (const image of IMAGES) await pipeline.recognize(image);
    }
    return await closedLoopRate(pipelines, REQUESTS, async (pipeline, index) => {
      const lines = await pipeline.recognize(IMAGES[index % IMAGES.length]!);
      check("direct", index, lines.map((line) => line.text));
    });
  } finally {
    await Promise.all(pipelines.map((pipeline) => pipeline.release()));
  }
}

/**
 * Whether ONNX Runtime sessions overlap in one JavaScript thread: 8 runs of the detection model
 * on two single-threaded sessions, one after the other and then 4 + 4 concurrently.
 * @returns Sequential time divided by concurrent time (2 when they overlap fully, 1 when not).
 */
async function overlap(): Promise<number> {
  const create = (): Promise<ort.InferenceSession> =>
    ort.InferenceSession.create(MODEL_FILES.detection, { intraOpNumThreads: 1 });
  const sessions = await Promise.all([create(), create()]);
  const input = (): Record<string, ort.Tensor> => ({
    x: new ort.Tensor("float32", new Float32Array(3 * 320 * 640).fill(0.5), [1, 3, 320, 640]),
  });
  try {
    for (const session of sessions) await session.run(input());
    let start = performance.now();
    for (let i = 0; i < 8; i++) await sessions[i % 2]!.run(input());
    const sequential = performance.now() - start;
    start = performance.now();
    await Promise.all(sessions.map(async (session) => {
      for (let i = 0; i < 4; i++) await session.run(input());
    }));
    return sequential / (performance.now() - start);
  } finally {
    await Promise.all(sessions.map((session) => session.release()));
  }
}

/** Images/s through the server (binary HTTP), `CONCURRENCY` clients in this process. */
async function served(engine: EngineKind, instances: number): Promise<number> {
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
  await bindOcr(triton, { instances });
  await triton.run();
  return await servedRate(triton.urls.http!, OCR_MODEL);
}

const lines: string[] = [];
const log = (line: string): void => {
  lines.push(line);
  console.log(line);
};

const kinds = await engines();
const best = new Map<string, number>();
const keep = (key: string, value: number): void => {
  best.set(key, Math.max(best.get(key) ?? 0, value));
};
// Alternating rounds, best of each: the host is shared, so interference only lowers figures.
for (let round = 0; round < ROUNDS; round++) {
  keep("direct/1", await direct(1, navigator.hardwareConcurrency));
  keep("direct/2", await direct(2, 1));
  for (const engine of kinds) {
    for (const instances of [1, 2]) keep(`${engine}/${instances}`, await served(engine, instances));
  }
}

const ceiling = Math.max(best.get("direct/1")!, best.get("direct/2")!);
const cores = navigator.hardwareConcurrency;
log(`# OCR benchmark (${new Date().toISOString().slice(0, 10)})`);
log("");
log(
  `Deno ${Deno.version.deno}, ${cores} logical CPUs (shared with other jobs). PP-OCRv4 detection + ` +
    `recognition (examples/ocr) on ONNX Runtime ${ort.env.versions.node} (CPU), ${REQUESTS} images of two rendered text lines (${IMAGES.length} different PNGs), ` +
    `best of ${ROUNDS} alternating runs; every answer is checked against the rendered text. ` +
    `Served: ${CONCURRENCY} concurrent binary-HTTP clients in the server's process; the Workers ` +
    `share the cores (1 Worker: ${cores} ONNX Runtime threads, 2 Workers: ${
      Math.max(1, Math.floor(cores / 2))
    } each). Direct: the same pipeline called in a plain loop in one Deno process, without a ` +
    `server. The ceiling is the better of the two direct rows.`,
);
log("");
log("| setup | images/s | ratio to the ceiling |");
log("| --- | --- | --- |");
const row = (label: string, value: number): void =>
  log(`| ${label} | ${value.toFixed(2)} | ${(value / ceiling).toFixed(2)} |`);
row(`direct: 1 loop, ONNX Runtime on ${cores} threads`, best.get("direct/1")!);
row("direct: 2 concurrent loops, 1 thread each", best.get("direct/2")!);
for (const engine of kinds) {
  for (const instances of [1, 2]) {
    row(
      `${engine} engine, ${instances} Worker${instances === 1 ? "" : "s"}`,
      best.get(`${engine}/${instances}`)!,
    );
  }
}

const speedup = await overlap();
log("");
log(
  `Two ONNX Runtime sessions called concurrently from one JavaScript thread ran ${
    speedup.toFixed(2)
  }x as fast as one after the other (2x would be full overlap): ${
    speedup < 1.3
      ? "session.run() holds the thread while it computes, so in one process inferences do not " +
        "overlap and the direct loops are bound to one thread; Workers run them side by side."
      : "the sessions overlap in one thread."
  }`,
);

const out = option("out");
if (out !== undefined) await Deno.writeTextFile(out, lines.join("\n") + "\n");
