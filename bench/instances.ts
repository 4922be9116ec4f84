/**
 * Worker instances vs main-thread instances, on every installed engine, in one run:
 *
 * 1. A CPU-bound model (a few ms of arithmetic per sample) with 1, 2 and 4 instances: throughput
 *    and its ratio to 1 instance, for `workers(...)` and for a list of main-thread callables.
 * 2. A 16 MiB float32 round trip (binary HTTP, in and out) through one Worker instance, one
 *    main-thread instance, and a plain `Deno.serve` echo of the same bytes; with the bytes the
 *    Worker exchange copied per request.
 *
 * Run: `deno task bench:instances [--out bench/results/instances-<date>.md]`.
 *
 * @module
 */

import { type BindOptions, Triton, workers, type WorkerTransferStats } from "../mod.ts";
import type { EngineKind } from "../src/engine/engine.ts";
import { cpuBound } from "./instances/cpu_model.ts";
import { echo } from "./instances/echo_model.ts";
import { option } from "./args.ts";
import { engines } from "./host_engines.ts";

const CPU_MODULE = new URL("./instances/cpu_model.ts", import.meta.url);
const ECHO_MODULE = new URL("./instances/echo_model.ts", import.meta.url);
const CPU_REQUESTS = 64;
const CPU_CONCURRENCY = 8;
const BIG_BYTES = 16 * 1024 * 1024;
const BIG_ROUNDS = 12;

async function serve(engine: EngineKind, model: BindOptions): Promise<Triton> {
  const triton = new Triton({
    engine,
    config: {
      httpPort: 0,
      grpcPort: 0,
      metricsPort: 0,
      httpAddress: "127.0.0.1",
      grpcAddress: "127.0.0.1",
    },
  });
  await triton.bind(model);
  await triton.run();
  return triton;
}

async function cpuThroughput(
  engine: EngineKind,
  count: number,
  inWorkers: boolean,
): Promise<number> {
  const inferFunc = inWorkers
    ? workers(CPU_MODULE, { count })
    : Array.from({ length: count }, () => cpuBound);
  await using triton = await serve(engine, {
    modelName: "Cpu",
    inferFunc,
    inputs: [{ name: "x", dtype: "float32", shape: [1] }],
    outputs: [{ name: "y", dtype: "float32", shape: [1] }],
    config: { maxBatchSize: 2 },
  });
  const url = `${triton.urls.http}/v2/models/Cpu/infer`;
  const body = JSON.stringify({
    inputs: [{ name: "x", datatype: "FP32", shape: [1, 1], data: [1] }],
  });
  const one = async (): Promise<void> => {
    const response = await fetch(url, {
      method: "POST",
      body,
      headers: { "accept-encoding": "identity" },
    });
    if (response.status !== 200) {
      throw new Error(`HTTP ${response.status}: ${await response.text()}`);
    }
    await response.arrayBuffer();
  };
  await Promise.all(Array.from({ length: count * 2 }, one)); // warm up every instance
  let next = 0;
  const start = performance.now();
  await Promise.all(Array.from({ length: CPU_CONCURRENCY }, async () => {
    while (next++ < CPU_REQUESTS) await one();
  }));
  return CPU_REQUESTS / ((performance.now() - start) / 1000);
}

function binaryRequest(bytes: Uint8Array): { body: Uint8Array<ArrayBuffer>; headerLength: number } {
  const header = new TextEncoder().encode(JSON.stringify({
    inputs: [{
      name: "x",
      datatype: "FP32",
      shape: [1, bytes.byteLength / 4],
      parameters: { binary_data_size: bytes.byteLength },
    }],
    outputs: [{ name: "y", parameters: { binary_data: true } }],
  }));
  const body = new Uint8Array(header.byteLength + bytes.byteLength);
  body.set(header);
  body.set(bytes, header.byteLength);
  return { body, headerLength: header.byteLength };
}

async function roundTrips(
  url: string,
  headers: Record<string, string>,
  body: Uint8Array<ArrayBuffer>,
): Promise<number> {
  const once = async (): Promise<void> => {
    // Without it fetch() asks for gzip, and the server would spend the run compressing.
    const response = await fetch(url, {
      method: "POST",
      body,
      headers: { "accept-encoding": "identity", ...headers },
    });
    if (response.status !== 200) {
      throw new Error(`HTTP ${response.status}: ${await response.text()}`);
    }
    const received = await response.arrayBuffer();
    if (received.byteLength < BIG_BYTES) {
      throw new Error(`Short answer: ${received.byteLength} bytes`);
    }
  };
  await once();
  const start = performance.now();
  for (let i = 0; i < BIG_ROUNDS; i++) await once();
  return (2 * BIG_BYTES * BIG_ROUNDS) / (1024 * 1024) / ((performance.now() - start) / 1000);
}

interface BigResult {
  mibPerSecond: number;
  stats?: WorkerTransferStats;
}

async function bigThroughput(engine: EngineKind, inWorkers: boolean): Promise<BigResult> {
  const provider = inWorkers ? workers(ECHO_MODULE, { count: 1 }) : undefined;
  await using triton = await serve(engine, {
    modelName: "Echo",
    inferFunc: provider ?? echo,
    inputs: [{ name: "x", dtype: "float32", shape: [-1] }],
    outputs: [{ name: "y", dtype: "float32", shape: [-1] }],
    config: { maxBatchSize: 1 },
  });
  const values = new Float32Array(BIG_BYTES / 4).map((_, i) => i);
  const { body, headerLength } = binaryRequest(new Uint8Array(values.buffer));
  const mibPerSecond = await roundTrips(`${triton.urls.http}/v2/models/Echo/infer`, {
    "Inference-Header-Content-Length": String(headerLength),
  }, body);
  return provider === undefined ? { mibPerSecond } : { mibPerSecond, stats: { ...provider.stats } };
}

async function plainEcho(): Promise<number> {
  await using server = Deno.serve(
    { port: 0, hostname: "127.0.0.1", onListen: () => {} },
    async (request) => new Response(await request.arrayBuffer()),
  );
  const values = new Float32Array(BIG_BYTES / 4).map((_, i) => i);
  return await roundTrips(
    `http://127.0.0.1:${server.addr.port}/`,
    {},
    new Uint8Array(values.buffer),
  );
}

function perRequest(stats: WorkerTransferStats): string {
  const mib = (n: number): string => `${(n / stats.requests / (1024 * 1024)).toFixed(2)} MiB`;
  return `in: copied ${mib(stats.inputCopiedBytes)}, moved ${
    mib(stats.inputMovedBytes)
  }, by address ${mib(stats.inputNativeBytes)}; out: copied in Worker ${
    mib(stats.outputCopiedBytes)
  }, moved ${mib(stats.outputMovedBytes)}`;
}

const lines: string[] = [];
const log = (line: string): void => {
  lines.push(line);
  console.log(line);
};

log(`# Worker instances benchmark (${new Date().toISOString().slice(0, 10)})`);
log("");
log(
  `Deno ${Deno.version.deno}, ${navigator.hardwareConcurrency} logical CPUs (shared with other jobs). ` +
    `CPU model: ${CPU_REQUESTS} requests of 1 sample, ${CPU_CONCURRENCY} concurrent HTTP clients in the ` +
    `server's process, maxBatchSize 2, best of 3 runs. Large tensor: ${BIG_ROUNDS} sequential 16 MiB float32 round trips (binary HTTP).`,
);
for (const engine of await engines()) {
  log("");
  log(`## Engine: ${engine}`);
  log("");
  log("| instances | Workers req/s | ratio vs 1 | main-thread req/s | ratio vs 1 |");
  log("| --- | --- | --- | --- | --- |");
  let baseWorkers = 0;
  let baseMain = 0;
  for (const count of [1, 2, 4]) {
    // Best of three alternating runs: the host is shared, so interference only lowers figures.
    let w = 0;
    let m = 0;
    for (let round = 0; round < 3; round++) {
      w = Math.max(w, await cpuThroughput(engine, count, true));
      m = Math.max(m, await cpuThroughput(engine, count, false));
    }
    if (count === 1) [baseWorkers, baseMain] = [w, m];
    log(
      `| ${count} | ${w.toFixed(1)} | ${(w / baseWorkers).toFixed(2)} | ${m.toFixed(1)} | ${
        (m / baseMain).toFixed(2)
      } |`,
    );
  }
  log("");
  const inWorker = await bigThroughput(engine, true);
  const onMain = await bigThroughput(engine, false);
  log("| 16 MiB round trip | MiB/s (in + out) |");
  log("| --- | --- |");
  log(`| Worker instance | ${inWorker.mibPerSecond.toFixed(0)} |`);
  log(`| main-thread instance | ${onMain.mibPerSecond.toFixed(0)} |`);
  log("");
  log(
    `Worker tensor exchange per request: ${perRequest(inWorker.stats!)}` +
      (engine === "triton"
        ? "; plus one copy of the output into Triton's buffer by the bridge."
        : "."),
  );
}
log("");
log("| 16 MiB round trip | MiB/s (in + out) |");
log("| --- | --- |");
log(`| plain Deno.serve echo | ${(await plainEcho()).toFixed(0)} |`);

const out = option("out");
if (out !== undefined) await Deno.writeTextFile(out, lines.join("\n") + "\n");
