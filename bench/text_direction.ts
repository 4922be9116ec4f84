/**
 * The text-direction classifier (examples/text_direction) served by DenoTriton from a Worker
 * pinned to the GPU and from a Worker pinned to the CPU, on the same host, at batches of 1, 8
 * and 64: images per second through the server (binary HTTP, one client sending one request
 * after another, so each request is one batch), beside the same backend called in a plain loop
 * in this process without a server. Every answer is checked against the CPU backend.
 *
 * Without a GPU (or without cuBLAS or NVRTC) only the CPU rows run and the report says what the
 * GPU rows need. Each cell runs for `--seconds` (at least 3 batches); the whole run takes about
 * 12 cells x that, plus start-up.
 *
 * Run: `deno task bench:text-direction [--engine builtin|triton] [--seconds 2]
 * [--out bench/results/text-direction-<date>-<host>.md]`.
 *
 * @module
 */

import { ModelClient } from "../src/client/mod.ts";
import { asDType, discoverGpus, ndarray, Triton } from "../mod.ts";
import type { EngineKind } from "../src/engine/engine.ts";
import { fontAvailable } from "../examples/ocr/render.ts";
import { type Backend, loadClassifierPlan } from "../examples/text_direction/classifier.ts";
import { renderedCrops } from "../examples/text_direction/client.ts";
import { CpuBackend } from "../examples/text_direction/cpu.ts";
import { GpuBackend } from "../examples/text_direction/gpu.ts";
import { bindTextDirection } from "../examples/text_direction/model.ts";
import {
  classifierInput,
  CLS_CHANNELS,
  CLS_HEIGHT,
  CLS_SAMPLE,
  CLS_WIDTH,
} from "../examples/text_direction/preprocess.ts";
import { flag, option } from "./args.ts";

const ENGINE = flag("engine", "builtin") as EngineKind;
const SECONDS = Number(flag("seconds", "2"));
const BATCHES = [1, 8, 64];
const CORES = navigator.hardwareConcurrency;
const plan = loadClassifierPlan();
const cpu = new CpuBackend(plan);

/** A batch: rendered lines (upright, upside down) repeated, or noise without the font. */
function batchInput(size: number): Float32Array {
  const out = new Float32Array(size * CLS_SAMPLE);
  if (fontAvailable()) {
    const lines = classifierInput(renderedCrops());
    for (let i = 0; i < size; i++) {
      const sample = i % (lines.length / CLS_SAMPLE);
      out.set(lines.subarray(sample * CLS_SAMPLE, (sample + 1) * CLS_SAMPLE), i * CLS_SAMPLE);
    }
  } else {
    let state = size;
    for (let i = 0; i < out.length; i++) {
      state = (Math.imul(state, 1103515245) + 12345) >>> 0;
      out[i] = (state / 2 ** 32) * 2 - 1;
    }
  }
  return out;
}

/** The 1-minute load average (Linux), to read the figures by: other jobs may share the host. */
function loadAverage(): string {
  try {
    return Deno.readTextFileSync("/proc/loadavg").split(" ")[0]!;
  } catch {
    return "unknown";
  }
}
const loadAtStart = loadAverage();

const inputs = new Map(BATCHES.map((size) => [size, batchInput(size)]));
const expected = new Map(BATCHES.map((size) => [size, cpu.run(inputs.get(size)!, size)]));

function check(what: string, size: number, probs: Float32Array): void {
  const reference = expected.get(size)!;
  let diff = 0;
  for (let i = 0; i < reference.length; i++) {
    diff = Math.max(diff, Math.abs(probs[i]! - reference[i]!));
  }
  if (!(diff < 1e-4)) throw new Error(`${what}, batch ${size}: answers differ by ${diff}`);
}

/** Batches of `size` for `SECONDS` (at least 3) after one warm-up; images per second. */
async function timed(size: number, run: () => Promise<void> | void): Promise<number> {
  await run();
  let batches = 0;
  const start = performance.now();
  while (batches < 3 || performance.now() - start < SECONDS * 1000) {
    await run();
    batches++;
  }
  return (batches * size) / ((performance.now() - start) / 1000);
}

function direct(backend: Backend, what: string, size: number): Promise<number> {
  const x = inputs.get(size)!;
  check(what, size, backend.run(x, size));
  return timed(size, () => void backend.run(x, size));
}

async function served(url: string, model: string, size: number, device: string): Promise<number> {
  const client = new ModelClient(url, model, { initTimeoutS: 120 });
  try {
    const x = ndarray(inputs.get(size)!, [size, CLS_CHANNELS, CLS_HEIGHT, CLS_WIDTH]);
    const out = await client.inferBatch({ x });
    check(`${model} served`, size, asDType(out.probs, "float32").data);
    const where = new TextDecoder().decode(asDType(out.device, "bytes").data[0]!);
    if (where !== device) throw new Error(`${model} answered from ${where}, not ${device}`);
    return await timed(size, async () => void await client.inferBatch({ x }));
  } finally {
    await client.close();
  }
}

// The GPU for the direct loop, and why not.
const host = discoverGpus();
let gpu: GpuBackend | undefined;
let gpuMissing: string | undefined;
if (host.devices.length === 0) gpuMissing = `this host has no GPU (${host.reason})`;
else {
  try {
    gpu = GpuBackend.create(plan, { device: 0 });
  } catch (error) {
    gpuMissing = (error as Error).message;
  }
}

const results = new Map<string, number>();
await using triton = new Triton({
  engine: ENGINE,
  config: {
    httpPort: 0,
    grpcPort: 0,
    metricsPort: 0,
    httpAddress: "127.0.0.1",
    grpcAddress: "127.0.0.1",
    logVerbose: 0,
  },
});
await bindTextDirection(triton, { modelName: "TextDirectionCpu", devices: ["cpu"] });
if (gpu !== undefined) {
  await bindTextDirection(triton, { modelName: "TextDirectionGpu", devices: ["cuda:0"] });
}
await triton.run();
const url = triton.urls.http!;
for (const size of BATCHES) {
  console.error(`batch ${size}: CPU`);
  results.set(`cpu direct ${size}`, await direct(cpu, "CPU direct", size));
  results.set(`cpu served ${size}`, await served(url, "TextDirectionCpu", size, "cpu CPU"));
  if (gpu !== undefined) {
    console.error(`batch ${size}: GPU`);
    results.set(`gpu direct ${size}`, await direct(gpu, "GPU direct", size));
    results.set(`gpu served ${size}`, await served(url, "TextDirectionGpu", size, "cuda:0 GPU"));
  }
}
gpu?.[Symbol.dispose]();

const fmt = (value: number | undefined): string => value === undefined ? "—" : value.toFixed(1);
const ratio = (a: number | undefined, b: number | undefined): string =>
  a === undefined || b === undefined ? "—" : (a / b).toFixed(2);
const date = new Date().toISOString().slice(0, 10);
const device = gpu === undefined
  ? `GPU rows not run: they need a GPU with cuBLAS and NVRTC; here ${gpuMissing}.`
  : `GPU: ${
    host.devices[0]!.name
  } (cuBLAS ${gpu.info.cublasVersion}, kernels compiled by NVRTC ${gpu.info.nvrtcVersion} for ${gpu.info.target}; ${gpu.info.libraries.cublas}, ${gpu.info.libraries.nvrtc})`;
const rows = BATCHES.map((size) => {
  const get = (key: string): number | undefined => results.get(`${key} ${size}`);
  return `| ${size} | ${fmt(get("cpu direct"))} | ${fmt(get("cpu served"))} | ${
    fmt(get("gpu direct"))
  } | ${fmt(get("gpu served"))} | ${ratio(get("gpu served"), get("cpu served"))} | ${
    ratio(get("cpu served"), get("cpu direct"))
  } | ${ratio(get("gpu served"), get("gpu direct"))} |`;
});
const report = [
  `# Text-direction classifier on the GPU and on the CPU (${date})`,
  "",
  `\`deno task bench:text-direction --engine ${ENGINE} --seconds ${SECONDS}\`, Deno ${Deno.version.deno}, ${CORES} logical CPUs ` +
  `(1-minute load average ${loadAtStart} at the start, ${loadAverage()} at the end). ` +
  "PaddleOCR's ch_ppocr_mobile_v2.0_cls (examples/text_direction), inputs 3 x 48 x 192, each batch " +
  `of rendered text lines; images per second over ${SECONDS} s (at least 3 batches) per cell, one run. ` +
  `Served: the ${ENGINE} engine, one Worker instance pinned to \`cpu\`` +
  `${gpu === undefined ? "" : " and one to `cuda:0`"}, ` +
  "one binary-HTTP client in this process sending one request of the batch after another. " +
  "Direct: the same backend called in a loop in this process, without a server. The CPU backend " +
  "runs on one thread. Every answer is checked against the CPU backend.",
  "",
  device,
  "",
  "| batch | CPU direct | CPU served | GPU direct | GPU served | GPU / CPU served | CPU served / direct | GPU served / direct |",
  "| --: | --: | --: | --: | --: | --: | --: | --: |",
  ...rows,
  "",
].join("\n");
console.log(report);
const label = option("label") ??
  (gpu === undefined ? "cpu-only" : host.devices[0]!.name.toLowerCase().replace(/\W+/g, "-"));
const out = option("out") ?? `bench/results/text-direction-${date}-${label}.md`;
await Deno.writeTextFile(out, report);
// Formatted as the repository's Markdown is (`deno fmt --check` runs in CI).
await new Deno.Command(Deno.execPath(), { args: ["fmt", "--quiet", out] }).output();
console.error(`Wrote ${out}`);
