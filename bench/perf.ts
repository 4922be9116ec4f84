/**
 * Runs `perf_analyzer` for one benchmark cell and reads its verbose output: the throughput and
 * average latency of each measurement window ("Pass [n]" lines), and the client p50/p99 over
 * the stable windows.
 *
 * @module
 */

/** One cell's measurement. */
export interface PerfResult {
  /** Median of the windows' throughputs, inferences per second. */
  readonly throughput: number;
  /** Each window's throughput. */
  readonly windows: readonly number[];
  /** (max − min) / median of the windows' throughputs. */
  readonly spread: number;
  /** Median of the windows' average latencies, µs. */
  readonly avgLatencyUs: number;
  /** Client p50 latency over the windows, µs. */
  readonly p50Us: number;
  /** Client p99 latency over the windows, µs. */
  readonly p99Us: number;
}

/**
 * The median of numbers.
 *
 * @param values Numbers; at least one.
 * @returns The middle value, or the mean of the two middle values.
 *
 * @example Median of three
 * ```ts
 * import assert from "node:assert/strict";
 * import { median } from "./perf.ts";
 *
 * assert.equal(median([3, 1, 2]), 2);
 * assert.equal(median([4, 1, 2, 3]), 2.5);
 * ```
 */
export function median(values: readonly number[]): number {
  if (values.length === 0) throw new RangeError("Cannot take the median: no values");
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? sorted[middle]! : (sorted[middle - 1]! + sorted[middle]!) / 2;
}

/**
 * Reads a `perf_analyzer -v` run of one concurrency: the last `windows` passes count.
 *
 * @param output What perf_analyzer printed.
 * @param windows How many of the last passes to use.
 * @returns The measurement.
 * @throws {Error} When the output has no pass lines or no p50/p99 lines.
 *
 * @example Three windows
 * ```ts
 * import assert from "node:assert/strict";
 * import { parsePerfOutput } from "./perf.ts";
 *
 * const result = parsePerfOutput([
 *   "  Pass [1] throughput: 100 infer/sec. Avg latency: 900 usec (std 10 usec). ",
 *   "  Pass [2] throughput: 120 infer/sec. Avg latency: 800 usec (std 10 usec). ",
 *   "  Pass [3] throughput: 110 infer/sec. Avg latency: 850 usec (std 10 usec). ",
 *   "    p50 latency: 840 usec",
 *   "    p99 latency: 990 usec",
 * ].join("\n"));
 * assert.equal(result.throughput, 110);
 * assert.equal(result.avgLatencyUs, 850);
 * assert.equal(result.p99Us, 990);
 * ```
 */
export function parsePerfOutput(output: string, windows = 3): PerfResult {
  const passes = [...output.matchAll(
    /Pass \[\d+\] throughput: ([\d.]+) infer\/sec\. Avg latency: (\d+) usec/g,
  )].map((match) => ({ throughput: Number(match[1]), latency: Number(match[2]) }));
  const p50 = output.match(/p50 latency: (\d+) usec/);
  const p99 = output.match(/p99 latency: (\d+) usec/);
  if (passes.length === 0 || p50 === null || p99 === null) {
    throw new Error(`Cannot read perf_analyzer output: no pass or percentile lines\n${output}`);
  }
  const used = passes.slice(-windows);
  const throughputs = used.map((pass) => pass.throughput);
  const middle = median(throughputs);
  return {
    throughput: middle,
    windows: throughputs,
    spread: middle === 0 ? 0 : (Math.max(...throughputs) - Math.min(...throughputs)) / middle,
    avgLatencyUs: median(used.map((pass) => pass.latency)),
    p50Us: Number(p50[1]),
    p99Us: Number(p99[1]),
  };
}

/** What to measure. */
export interface PerfOptions {
  /** The binary. */
  readonly path: string;
  /** Its environment (library path). */
  readonly env: Readonly<Record<string, string>>;
  /** Model name. */
  readonly model: string;
  /** `host:port`. */
  readonly url: string;
  /** Protocol. */
  readonly protocol: "http" | "grpc";
  /** Concurrent requests. */
  readonly concurrency: number;
  /** Window length, ms. */
  readonly windowMs: number;
  /** Number of windows (perf_analyzer's `--max-trials`; stability is not required). */
  readonly windows: number;
  /** Kills perf_analyzer after this many ms. */
  readonly timeoutMs: number;
  /**
   * More perf_analyzer arguments (e.g. `--shared-memory system`).
   *
   * @default {[]}
   */
  readonly extraArgs?: readonly string[];
}

/**
 * Runs perf_analyzer for one cell; stability is switched off (`-s 1000`) so exactly
 * `windows` windows run, and their spread is reported instead.
 *
 * @param options The cell.
 * @returns The measurement.
 * @throws {Error} When perf_analyzer fails; the message holds its output.
 */
export async function runPerf(options: PerfOptions): Promise<PerfResult> {
  const args = [
    "-m",
    options.model,
    "-u",
    options.url,
    "-i",
    options.protocol,
    "--concurrency-range",
    String(options.concurrency),
    "--measurement-interval",
    String(options.windowMs),
    "-s",
    "1000",
    "--max-trials",
    String(options.windows),
    "-v",
    ...(options.extraArgs ?? []),
  ];
  const result = await new Deno.Command(options.path, {
    args,
    env: { ...options.env },
    stdout: "piped",
    stderr: "piped",
    signal: AbortSignal.timeout(options.timeoutMs),
  }).output();
  const decoder = new TextDecoder();
  const output = decoder.decode(result.stdout) + decoder.decode(result.stderr);
  if (!result.success) {
    throw new Error(`perf_analyzer ${args.join(" ")} failed (exit ${result.code}):\n${output}`);
  }
  return parsePerfOutput(output, options.windows);
}
