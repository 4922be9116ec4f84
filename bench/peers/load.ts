/**
 * The peers benchmark's one load generator: a closed loop of `concurrency` clients, each on a
 * keep-alive HTTP/1.1 connection of its own, sending one peer's natural JSON request for a
 * model, checking every answer, and measuring windows the way perf_analyzer does (a warm-up,
 * then `windows` windows; a window that saw fewer than `minPerWindow` answers runs on until it
 * has them). It reads the server's CPU time (its whole process tree, from `/proc`) over the
 * measured windows, so each cell reports the server's CPU per request.
 *
 *     deno run -A bench/peers/load.ts --port 8000 --shape kserve --model add_sub \
 *       --concurrency 8 [--path /predict] [--window-ms 1500] [--windows 3] [--warmup-ms 1000] \
 *       [--pid <server pid>]
 *
 * prints one JSON line: a {@linkcode LoadResult}.
 *
 * @module
 */

import { cpuSeconds, treeCpuSeconds } from "../process.ts";
import { option } from "../args.ts";
import { Http1Connection, jsonPost } from "./http1.ts";
import { exchange, MODEL_SPECS, type ModelName, MODELS, type Shape } from "./models.ts";

/** What {@linkcode runLoad} measures. */
export interface LoadOptions {
  /** The server's port on 127.0.0.1. */
  readonly port: number;
  /** The request shape. */
  readonly shape: Shape;
  /** The model. */
  readonly model: ModelName;
  /** The request target for the `fields` shape. */
  readonly path?: string;
  /** Concurrent clients. */
  readonly concurrency: number;
  /** Unrecorded warm-up, ms. */
  readonly warmupMs: number;
  /** Each window's length, ms (at least). */
  readonly windowMs: number;
  /** Windows measured. */
  readonly windows: number;
  /**
   * The fewest answers a window needs before it may end.
   *
   * @default {20, or 3 for a tensor over 64 Ki elements}
   */
  readonly minPerWindow?: number;
  /** The server's root pid, for its CPU time. */
  readonly pid?: number;
  /**
   * Gives up when one request takes longer, ms.
   *
   * @default {600000}
   */
  readonly requestTimeoutMs?: number;
}

/** One cell's measurement. */
export interface LoadResult {
  /** Median of the windows' request rates, requests per second. */
  readonly throughput: number;
  /** Each window's rate. */
  readonly windows: readonly number[];
  /** (max − min) / median of the windows' rates. */
  readonly spread: number;
  /** Latency percentiles over the measured windows, µs. */
  readonly p50Us: number;
  /** 99th percentile, µs. */
  readonly p99Us: number;
  /** Mean latency, µs. */
  readonly avgLatencyUs: number;
  /** Answers counted in the windows. */
  readonly requests: number;
  /** Answers checked in all (warm-up and the requests in flight at the end included). */
  readonly checked: number;
  /** Failed requests (a wrong answer, a status other than 200, a broken connection). */
  readonly failed: number;
  /** The first few failures. */
  readonly errors: readonly string[];
  /** The server's CPU seconds over the windows (its process tree), when its pid was given. */
  readonly serverCpuSeconds?: number;
  /** The server's CPU µs per counted request. */
  readonly serverCpuUsPerRequest?: number;
  /** The load generator's own CPU µs per counted request. */
  readonly loaderCpuUsPerRequest: number;
}

/**
 * The value at a quantile of sorted numbers.
 *
 * @param sorted Ascending numbers.
 * @param q The quantile, 0–1.
 * @returns The value (nearest rank), or 0 for none.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { quantile } from "./load.ts";
 *
 * assert.equal(quantile([1, 2, 3, 4], 0.5), 2);
 * assert.equal(quantile([1, 2, 3, 4], 0.99), 4);
 * ```
 */
export function quantile(sorted: ArrayLike<number>, q: number): number {
  if (sorted.length === 0) return 0;
  const rank = Math.max(1, Math.ceil(q * sorted.length));
  return sorted[rank - 1]!;
}

function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? sorted[middle]! : (sorted[middle - 1]! + sorted[middle]!) / 2;
}

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Runs one cell.
 *
 * @param options The server, request and windows.
 * @returns The measurement.
 * @throws {Error} When a request hangs past its timeout, or failures pile up (over 1,000).
 */
export async function runLoad(options: LoadOptions): Promise<LoadResult> {
  const { port, shape, model, concurrency, warmupMs, windowMs, windows } = options;
  const large = MODEL_SPECS[model].elements > 65536;
  const minPerWindow = options.minPerWindow ?? (large ? 3 : 20);
  const requestTimeoutMs = options.requestTimeoutMs ?? 600_000;
  const host = `127.0.0.1:${port}`;
  // Distinct inputs, each with its expected answer (two for the large tensor: 9 MB each).
  const variants = large ? 2 : 8;
  const cases = Array.from({ length: variants }, (_, v) => {
    const ex = exchange(shape, model, v, options.path);
    return { request: jsonPost(host, ex.path, ex.body), check: ex.check };
  });

  // -1: warm-up; 0..windows-1: measured; windows: done (answers still checked, not counted).
  let window = -1;
  const counts = new Array<number>(windows).fill(0);
  let latencies = new Float64Array(1 << 16);
  let recorded = 0;
  let checked = 0;
  let failed = 0;
  const errors: string[] = [];
  let stop = false;
  let hung: Error | undefined;
  const fail = (message: string): void => {
    failed++;
    if (errors.length < 5) errors.push(message);
  };

  // When each client's request in flight started; a watchdog fails the cell when one hangs.
  const started = new Float64Array(concurrency).fill(Infinity);
  const conns = new Array<Http1Connection | undefined>(concurrency);
  const watchdog = setInterval(() => {
    const now = performance.now();
    for (let i = 0; i < concurrency; i++) {
      if (now - started[i]! > requestTimeoutMs) {
        hung ??= new Error(`A request took over ${requestTimeoutMs} ms`);
        stop = true;
        conns[i]?.close();
      }
    }
  }, 500);
  const client = async (index: number): Promise<void> => {
    let conn: Http1Connection | undefined;
    for (let n = index; !stop; n += concurrency) {
      const { request, check } = cases[n % cases.length]!;
      try {
        conn ??= conns[index] = await Http1Connection.open("127.0.0.1", port);
        const sent = performance.now();
        started[index] = sent;
        const response = await conn.send(request);
        started[index] = Infinity;
        const done = performance.now();
        const wrong = response.status !== 200
          ? `HTTP ${response.status}: ${new TextDecoder().decode(response.body.subarray(0, 300))}`
          : check(response.body);
        checked++;
        if (wrong !== undefined) {
          fail(wrong);
        } else if (window >= 0 && window < windows) {
          counts[window]!++;
          if (recorded === latencies.length) {
            const grown = new Float64Array(latencies.length * 2);
            grown.set(latencies);
            latencies = grown;
          }
          latencies[recorded++] = (done - sent) * 1000;
        }
        if (conn.closed) conn = undefined;
      } catch (error) {
        if (stop) break;
        fail(`connection: ${error instanceof Error ? error.message : String(error)}`);
        conn?.close();
        conn = undefined;
        await sleep(10);
      }
      if (failed > 1000) stop = true;
    }
    conn?.close();
  };

  const clients = Array.from({ length: concurrency }, (_, i) => client(i));
  await sleep(warmupMs);
  const durations: number[] = [];
  const serverStart = options.pid === undefined ? NaN : treeCpuSeconds(options.pid);
  const loaderStart = cpuSeconds("/proc/self/stat");
  let windowStart = performance.now();
  window = 0;
  while (window < windows && !stop) {
    await sleep(Math.max(1, windowStart + windowMs - performance.now()));
    while (counts[window]! < minPerWindow && !stop) await sleep(20);
    const now = performance.now();
    durations.push(now - windowStart);
    windowStart = now;
    window++;
  }
  const serverEnd = options.pid === undefined ? NaN : treeCpuSeconds(options.pid);
  const loaderEnd = cpuSeconds("/proc/self/stat");
  stop = true;
  await Promise.all(clients);
  clearInterval(watchdog);
  if (hung !== undefined) throw hung;
  if (failed > 1000) throw new Error(`Over 1,000 failed requests; first: ${errors.join(" | ")}`);

  const rates = durations.map((ms, i) => counts[i]! / (ms / 1000));
  const sorted = latencies.slice(0, recorded).sort();
  const requests = counts.reduce((sum, n) => sum + n, 0);
  const middle = median(rates);
  const serverCpu = serverEnd - serverStart;
  return {
    throughput: middle,
    windows: rates,
    spread: middle === 0 ? 0 : (Math.max(...rates) - Math.min(...rates)) / middle,
    p50Us: Math.round(quantile(sorted, 0.5)),
    p99Us: Math.round(quantile(sorted, 0.99)),
    avgLatencyUs: Math.round(sorted.reduce((sum, x) => sum + x, 0) / Math.max(1, recorded)),
    requests,
    checked,
    failed,
    errors,
    ...(Number.isNaN(serverCpu) ? {} : {
      serverCpuSeconds: serverCpu,
      serverCpuUsPerRequest: requests === 0 ? 0 : serverCpu * 1e6 / requests,
    }),
    loaderCpuUsPerRequest: requests === 0 ? 0 : (loaderEnd - loaderStart) * 1e6 / requests,
  };
}

if (import.meta.main) {
  const model = option("model") as ModelName;
  const shape = option("shape") as Shape;
  if (!MODELS.includes(model)) throw new Error(`Unknown model '${model}'`);
  if (!["kserve", "fields", "bentoml"].includes(shape)) throw new Error(`Unknown shape '${shape}'`);
  const pid = option("pid");
  const path = option("path");
  const result = await runLoad({
    port: Number(option("port")),
    shape,
    model,
    ...(path === undefined ? {} : { path }),
    concurrency: Number(option("concurrency") ?? "1"),
    warmupMs: Number(option("warmup-ms") ?? "1000"),
    windowMs: Number(option("window-ms") ?? "1500"),
    windows: Number(option("windows") ?? "3"),
    ...(pid === undefined ? {} : { pid: Number(pid) }),
  });
  console.log(JSON.stringify(result));
}
