/**
 * Gzip bombs against the HTTP front end: a small gzip body that inflates to gigabytes is sent
 * to a server in its own process while health probes run, and the script prints the server's
 * peak resident-memory growth and the slowest health probe.
 *
 *     deno run -A bench/gzip_bomb.ts [--engine builtin|triton] [--sizes-mib 1024,4096]
 *
 * The peak comes from the kernel's high-water mark (`VmHWM`, reset through
 * `/proc/<pid>/clear_refs` before each bomb), so it holds however short the spike. Linux only.
 *
 * @module
 */

import { Triton } from "../mod.ts";
import { startServer } from "./process.ts";
import { flag } from "./args.ts";

const MIB = 1024 * 1024;

if (Deno.args.includes("--serve")) {
  // The server side: one identity model on the given port, default limits.
  await using triton = new Triton({
    engine: flag("engine", "builtin") as "builtin" | "triton",
    config: {
      httpAddress: "127.0.0.1",
      httpPort: Number(flag("http-port", "8000")),
      allowGrpc: false,
      allowMetrics: false,
    },
  });
  triton.bind({
    modelName: "identity",
    inferFunc: (requests) => requests.map((request) => ({ y: request.data.x! })),
    inputs: [{ name: "x", dtype: "float32", shape: [-1] }],
    outputs: [{ name: "y", dtype: "float32", shape: [-1] }],
  });
  await triton.serve();
  Deno.exit(0);
}

/** Reads a `kB` field of `/proc/<pid>/status` in bytes. */
function statusBytes(pid: number, field: "VmRSS" | "VmHWM"): number {
  const text = Deno.readTextFileSync(`/proc/${pid}/status`);
  const match = new RegExp(`^${field}:\\s+(\\d+) kB`, "m").exec(text);
  if (match === null) throw new Error(`No ${field} in /proc/${pid}/status`);
  return Number(match[1]) * 1024;
}

/** Gzip of `size` zero bytes, compressed as a stream (the input never exists at once). */
async function gzipZeros(size: number): Promise<Uint8Array> {
  const block = new Uint8Array(MIB);
  let left = size;
  const zeros = new ReadableStream<Uint8Array<ArrayBuffer>>({
    pull(controller): void {
      if (left <= 0) return controller.close();
      const take = Math.min(left, block.byteLength);
      controller.enqueue(take === block.byteLength ? block : block.subarray(0, take));
      left -= take;
    },
  });
  return await new Response(zeros.pipeThrough(new CompressionStream("gzip"))).bytes();
}

interface BombResult {
  inflatedMib: number;
  bodyBytes: number;
  status: number;
  answerMs: number;
  rssBeforeMib: number;
  peakGrowthMib: number;
  probes: number;
  slowestProbeMs: number;
}

async function bomb(base: string, pid: number, size: number): Promise<BombResult> {
  const body = await gzipZeros(size);
  // Settle, then reset the kernel's peak so VmHWM is this bomb's peak.
  await new Promise((resolve) => setTimeout(resolve, 500));
  const before = statusBytes(pid, "VmRSS");
  await Deno.writeTextFile(`/proc/${pid}/clear_refs`, "5");

  let done = false;
  let probes = 0;
  let slowest = 0;
  const probing = (async (): Promise<void> => {
    while (!done) {
      const start = performance.now();
      const response = await fetch(`${base}/v2/health/live`);
      await response.body?.cancel();
      if (response.status !== 200) throw new Error(`Health probe answered ${response.status}`);
      slowest = Math.max(slowest, performance.now() - start);
      probes++;
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  })();
  const start = performance.now();
  const response = await fetch(`${base}/v2/models/identity/infer`, {
    method: "POST",
    headers: { "content-encoding": "gzip", "content-type": "application/json" },
    body: body as Uint8Array<ArrayBuffer>,
  });
  await response.body?.cancel();
  const answerMs = performance.now() - start;
  // Keep probing a little after the answer: a server still busy would show here.
  await new Promise((resolve) => setTimeout(resolve, 200));
  done = true;
  await probing;
  return {
    inflatedMib: size / MIB,
    bodyBytes: body.byteLength,
    status: response.status,
    answerMs,
    rssBeforeMib: before / MIB,
    peakGrowthMib: (statusBytes(pid, "VmHWM") - before) / MIB,
    probes,
    slowestProbeMs: slowest,
  };
}

const engine = flag("engine", "builtin");
const sizes = flag("sizes-mib", "1024,4096").split(",").map((mib) => Number(mib) * MIB);
const logFile = await Deno.makeTempFile({ prefix: "gzip-bomb-", suffix: ".log" });
await using server = await startServer({
  command: Deno.execPath(),
  args: (ports) => [
    "run",
    "-A",
    new URL(import.meta.url).pathname,
    "--serve",
    "--engine",
    engine,
    "--http-port",
    String(ports.http),
  ],
  models: ["identity"],
  logFile,
});
const base = `http://127.0.0.1:${server.ports.http}`;
console.log(`engine ${engine}, server pid ${server.pid}, log ${logFile}`);
console.log(
  "inflates to | gzip body | status | answer ms | RSS before MiB | peak growth MiB | probes | slowest probe ms",
);
for (const size of sizes) {
  const r = await bomb(base, server.pid, size);
  console.log(
    `${r.inflatedMib} MiB | ${r.bodyBytes} B | ${r.status} | ${r.answerMs.toFixed(0)} | ${
      r.rssBeforeMib.toFixed(0)
    } | ${r.peakGrowthMib.toFixed(1)} | ${r.probes} | ${r.slowestProbeMs.toFixed(1)}`,
  );
}
