/**
 * A long mixed soak, run by hand (not in CI): `--minutes` at `--concurrency` callers mixing HTTP
 * unary calls (the server's HTTP on `--http-threads` Workers), gRPC unary calls and gRPC streams
 * on one engine, against a server in a process of its own (`bench/soak_server.ts`).
 *
 *     deno run -A bench/soak.ts --engine builtin|triton --minutes 60 --concurrency 64 \
 *       [--http-threads 2] [--json bench/results/soak-<date>-<engine>.json]
 *
 * Each caller sends one kind after the other (HTTP, gRPC, stream, ...; callers start at different
 * kinds), and checks every answer: AddSub's `add` and `sub` of its own random inputs, Count's
 * responses 0 .. n-1 in order. It reports the requests, failures and latencies per kind, and from
 * the server's `/proc/<pid>`: resident memory (its growth from the end of the first minute to the
 * end of the run, as a %), threads and open file descriptors at the start (before the load), in
 * the first minute (its high-water mark) and at the end. Sockets count apart: the callers' HTTP
 * pool opens and keeps connections as the load comes (about 50 for 21 HTTP callers), so what must
 * stay flat is the server's sockets less the callers' own. The run passes with 0 failed requests,
 * memory growth under 10%, and threads, descriptors other than sockets and sockets beyond the
 * callers' at the end no higher than in the first minute; the exit code is 1 otherwise.
 *
 * @module
 */

import { ModelClient, ndarray } from "../src/client/mod.ts";
import { cpuSeconds, firstLine } from "./process.ts";
import { flag, option } from "./args.ts";

const engine = flag("engine", "builtin");
const minutes = Number(flag("minutes", "60"));
const concurrency = Number(flag("concurrency", "64"));
const httpThreads = flag("http-threads", "2");
const jsonPath = option("json");
if (engine !== "builtin" && engine !== "triton") {
  throw new Error(`Unknown engine '${engine}': expected builtin or triton`);
}
if (!(minutes > 0) || !Number.isInteger(concurrency) || concurrency < 1) {
  throw new Error("--minutes must be > 0 and --concurrency an integer >= 1");
}

const KINDS = ["http", "grpc", "stream"] as const;
type Kind = typeof KINDS[number];

/** What `/proc/<pid>` says about the server at one moment. */
interface Sample {
  /** Seconds since the load began (negative: before it). */
  readonly t: number;
  readonly rssBytes: number;
  readonly threads: number;
  /** Open file descriptors, sockets included. */
  readonly fds: number;
  /** Those that are not sockets (files, pipes, event fds). */
  readonly otherFds: number;
  /**
   * The server's sockets less the callers' (this process's): what the server holds beyond the
   * connections the callers keep open. The callers' HTTP connection pool grows and shrinks with
   * the load (about 50 connections for 21 HTTP callers here), so the server's socket count alone
   * would say more about the callers than about the server.
   */
  readonly socketsBeyondCallers: number;
}

function sample(pid: number, t: number): Sample | undefined {
  try {
    return read(pid, t);
  } catch {
    return undefined; // The server exited: its /proc entry is gone.
  }
}

function read(pid: number, t: number): Sample {
  const status = Deno.readTextFileSync(`/proc/${pid}/status`);
  const field = (name: string): number =>
    Number(new RegExp(`^${name}:\\s+(\\d+)`, "m").exec(status)?.[1] ?? NaN);
  const sockets = (of: number | "self"): { fds: number; sockets: number } => {
    let fds = 0;
    let sockets = 0;
    for (const entry of Deno.readDirSync(`/proc/${of}/fd`)) {
      fds++;
      try {
        if (Deno.readLinkSync(`/proc/${of}/fd/${entry.name}`).startsWith("socket:")) sockets++;
      } catch {
        // Closed while we looked.
      }
    }
    return { fds, sockets };
  };
  const server = sockets(pid);
  return {
    t,
    rssBytes: field("VmRSS") * 1024,
    threads: field("Threads"),
    fds: server.fds,
    otherFds: server.fds - server.sockets,
    socketsBeyondCallers: server.sockets - sockets("self").sockets,
  };
}

// The server, in a process of its own: what /proc shows is the server's alone.
const server = new Deno.Command(Deno.execPath(), {
  args: [
    "run",
    "-A",
    "--unstable-net",
    new URL("./soak_server.ts", import.meta.url).pathname,
    "--engine",
    engine,
    "--http-threads",
    httpThreads,
  ],
  stdin: "null",
  stdout: "piped",
  stderr: "piped",
}).spawn();
const serverLog = new Response(server.stderr).text();
const stdout = server.stdout.pipeThrough(new TextDecoderStream()).getReader();
const ready = await firstLine(stdout);
if (ready === undefined) {
  throw new Error(`The soak server exited before it served:\n${await serverLog}`);
}
const urls: { http: string; grpc: string } = JSON.parse(ready);
let serverExited = false;
const serverStatus = server.status.then((status) => {
  serverExited = true;
  return status;
});

const clients = {
  http: new ModelClient(urls.http, "AddSub"),
  grpc: new ModelClient(urls.grpc, "AddSub"),
  stream: new ModelClient(urls.grpc, "Count"),
};
await clients.http.waitForModel(60);
await clients.stream.waitForModel(60);

const counts: Record<Kind, { ok: number; failed: number }> = {
  http: { ok: 0, failed: 0 },
  grpc: { ok: 0, failed: 0 },
  stream: { ok: 0, failed: 0 },
};
/** Latencies of each kind, in 1 ms buckets up to 60 s (the client's inference timeout). */
const latencies: Record<Kind, Uint32Array> = {
  http: new Uint32Array(60_001),
  grpc: new Uint32Array(60_001),
  stream: new Uint32Array(60_001),
};

function percentile(buckets: Uint32Array, p: number): number {
  const total = buckets.reduce((sum, n) => sum + n, 0);
  let seen = 0;
  for (let ms = 0; ms < buckets.length; ms++) {
    seen += buckets[ms]!;
    if (seen >= total * p) return ms;
  }
  return NaN;
}

/** The first failures of each kind, for the report. */
const errors: Record<Kind, string[]> = { http: [], grpc: [], stream: [] };

/** One call of a kind, with its answer checked; throws what went wrong. */
async function call(kind: Kind): Promise<void> {
  if (kind === "stream") {
    const n = 1 + Math.floor(Math.random() * 8);
    const seen: number[] = [];
    for await (const { i } of clients.stream.inferStream([ndarray(new Int32Array([n]))])) {
      seen.push(i!.data[0] as number);
    }
    const expected = Array.from({ length: n }, (_, i) => i);
    if (seen.join() !== expected.join()) {
      throw new Error(`Count(${n}) answered [${seen}], not [${expected}]`);
    }
    return;
  }
  const size = 1 + Math.floor(Math.random() * 16);
  const a = new Float32Array(size).map(() => Math.round(Math.random() * 1000));
  const b = new Float32Array(size).map(() => Math.round(Math.random() * 1000));
  const { add, sub } = await clients[kind].inferSample({ a: ndarray(a), b: ndarray(b) });
  const want = (f: (x: number, y: number) => number): string =>
    Array.from(a, (x, i) => f(x, b[i]!)).join();
  if (
    Array.from(add!.data as Float32Array).join() !== want((x, y) => x + y) ||
    Array.from(sub!.data as Float32Array).join() !== want((x, y) => x - y)
  ) {
    throw new Error(`AddSub answered a wrong sum or difference for ${size} values`);
  }
}

const durationMs = minutes * 60_000;
const cpuAtStart = {
  server: cpuSeconds(`/proc/${server.pid}/stat`),
  driver: cpuSeconds("/proc/self/stat"),
};
const samples: Sample[] = [read(server.pid, 0)];
const startedAt = performance.now();
const seconds = (): number => Math.round((performance.now() - startedAt) / 100) / 10;
const sampler = setInterval(() => {
  const now = sample(server.pid, seconds());
  if (now !== undefined) samples.push(now);
}, 5000);
const progress = setInterval(() => {
  const line = KINDS.map((kind) => `${kind} ${counts[kind].ok} ok ${counts[kind].failed} failed`);
  const last = samples.at(-1)!;
  console.error(
    `${seconds()} s: ${line.join(", ")}; RSS ${(last.rssBytes / 2 ** 20).toFixed(1)} MiB, ` +
      `${last.threads} threads, ${last.fds} fds`,
  );
}, 60_000);

await Promise.all(Array.from({ length: concurrency }, async (_, caller) => {
  for (let turn = caller; performance.now() - startedAt < durationMs && !serverExited; turn++) {
    const kind = KINDS[turn % KINDS.length]!;
    const sent = performance.now();
    try {
      await call(kind);
      counts[kind].ok++;
      latencies[kind][Math.min(60_000, Math.round(performance.now() - sent))]!++;
    } catch (error) {
      counts[kind].failed++;
      if (errors[kind].length < 5) {
        errors[kind].push(error instanceof Error ? error.message : String(error));
      }
    }
  }
}));
const elapsedS = (performance.now() - startedAt) / 1000;
const crashed = serverExited;
const cpu = {
  server: cpuSeconds(`/proc/${server.pid}/stat`) - cpuAtStart.server,
  driver: cpuSeconds("/proc/self/stat") - cpuAtStart.driver,
};
clearInterval(sampler);
clearInterval(progress);
const end = sample(server.pid, seconds()) ?? samples.at(-1)!;
if (end !== samples.at(-1)) samples.push(end);
for (const client of Object.values(clients)) await client.close();

try {
  server.kill("SIGINT");
} catch {
  // It exited already (the report says so).
}
const exit = await serverStatus;
const log = await serverLog;

// The first minute: the load's start-up (connections, pools, JIT) may grow anything; from its end
// on, nothing should.
const firstMinute = samples.filter((s) => s.t > 0 && s.t <= 60);
const atMinute = firstMinute.at(-1) ?? samples[0]!;
const highWater = (key: "threads" | "fds" | "otherFds" | "socketsBeyondCallers"): number =>
  Math.max(...[samples[0]!, ...firstMinute].map((s) => s[key]));
const growthPercent = (end.rssBytes - atMinute.rssBytes) / atMinute.rssBytes * 100;
const failed = KINDS.reduce((sum, kind) => sum + counts[kind].failed, 0);
const verdicts = {
  "0 failed requests (and the server ran to the end)": failed === 0 && !crashed,
  "resident memory growth under 10% after the first minute": growthPercent < 10,
  "threads flat (end <= first minute's high-water mark)": end.threads <= highWater("threads"),
  "file descriptors flat (other than sockets, and sockets beyond the callers' connections; end <= first minute's high-water mark)":
    end.otherFds <= highWater("otherFds") &&
    end.socketsBeyondCallers <= highWater("socketsBeyondCallers"),
  "server stopped cleanly (exit code 0)": exit.code === 0,
};

const mib = (bytes: number): string => (bytes / 2 ** 20).toFixed(1);
const report = [
  `Soak: ${engine} engine, ${(elapsedS / 60).toFixed(1)} min at c=${concurrency} ` +
  `(HTTP on ${httpThreads} threads, gRPC unary, gRPC streams), deno ${Deno.version.deno}`,
  "",
  "| kind | requests | failed | req/s | p50 ms | p99 ms |",
  "| --- | ---: | ---: | ---: | ---: | ---: |",
  ...KINDS.map((kind) => {
    const { ok, failed } = counts[kind];
    return `| ${kind} | ${ok + failed} | ${failed} | ${((ok + failed) / elapsedS).toFixed(0)} | ${
      percentile(latencies[kind], 0.5)
    } | ${percentile(latencies[kind], 0.99)} |`;
  }),
  "",
  "| server | start | 1 min | end |",
  "| --- | ---: | ---: | ---: |",
  `| RSS (MiB) | ${mib(samples[0]!.rssBytes)} | ${mib(atMinute.rssBytes)} | ${mib(end.rssBytes)} |`,
  `| threads | ${samples[0]!.threads} | ${highWater("threads")} (high) | ${end.threads} |`,
  `| open fds | ${samples[0]!.fds} | ${highWater("fds")} (high) | ${end.fds} |`,
  `| of them not sockets | ${samples[0]!.otherFds} | ${
    highWater("otherFds")
  } (high) | ${end.otherFds} |`,
  `| sockets beyond the callers' | ${samples[0]!.socketsBeyondCallers} | ${
    highWater("socketsBeyondCallers")
  } (high) | ${end.socketsBeyondCallers} |`,
  "",
  `CPU: the server ${(cpu.server / elapsedS * 100).toFixed(0)}% of a core, the callers (this ` +
  `process) ${
    (cpu.driver / elapsedS * 100).toFixed(0)
  }%, on ${navigator.hardwareConcurrency} cores`,
  `RSS growth after the first minute: ${growthPercent.toFixed(1)}% ` +
  `(${mib(atMinute.rssBytes)} -> ${mib(end.rssBytes)} MiB; peak ${
    mib(Math.max(...samples.map((s) => s.rssBytes)))
  } MiB)`,
  ...Object.entries(verdicts).map(([what, ok]) => `${ok ? "PASS" : "FAIL"} ${what}`),
  ...KINDS.flatMap((kind) => errors[kind].map((message) => `first ${kind} failures: ${message}`)),
  ...(exit.code === 0 ? [] : [`server exit code ${exit.code}; its log:`, log]),
].join("\n");
console.log(report);
if (jsonPath !== undefined) {
  await Deno.writeTextFile(
    jsonPath,
    JSON.stringify(
      {
        engine,
        minutes,
        concurrency,
        httpThreads,
        elapsedS,
        counts,
        errors,
        cpu,
        samples,
        verdicts,
      },
      null,
      2,
    ) + "\n",
  );
}
Deno.exit(Object.values(verdicts).every(Boolean) ? 0 : 1);
