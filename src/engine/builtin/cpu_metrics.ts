/**
 * CPU metrics of the built-in engine, the same three gauges the Triton core reports with
 * `--allow-cpu-metrics`: `nv_cpu_utilization`, `nv_cpu_memory_total_bytes` and
 * `nv_cpu_memory_used_bytes`, read from `/proc/stat` and `/proc/meminfo` with the core's
 * formulas. The core polls on a thread; here a scrape refreshes the values when the last
 * reading is at least `intervalMs` old, so scrapers see values of the same age without a timer.
 *
 * @module
 */

import { TritonValidationError } from "../../errors.ts";

/** One reading. */
export interface CpuMetricsValues {
  /** Busy share of CPU time since the previous reading, in [0, 1]. */
  readonly utilization: number;
  /** `MemTotal` in bytes. */
  readonly memoryTotalBytes: number;
  /** `MemTotal - MemAvailable` in bytes. */
  readonly memoryUsedBytes: number;
}

/** Reads a `/proc` file; replaceable in tests. */
export type ProcReader = (path: string) => string;

/** Options of {@linkcode CpuMetrics}. */
export interface CpuMetricsOptions {
  /**
   * Minimum age of a reading before a scrape refreshes it, in milliseconds.
   *
   * @default {2000}
   */
  intervalMs?: number;
  /**
   * How `/proc/stat` and `/proc/meminfo` are read.
   *
   * @default {Deno.readTextFileSync}
   */
  read?: ProcReader;
  /**
   * The clock, in milliseconds.
   *
   * @default {performance.now}
   */
  now?: () => number;
}

interface CpuTimes {
  busy: number;
  idle: number;
}

const STAT = "/proc/stat";
const MEMINFO = "/proc/meminfo";

/**
 * Parses the aggregate `cpu` line of `/proc/stat` into busy (user, nice, system, irq, softirq,
 * steal) and idle (idle, iowait) jiffies, as the core does.
 */
function parseStat(text: string): CpuTimes {
  const line = text.slice(0, text.indexOf("\n") >>> 0);
  if (!line.startsWith("cpu ")) throw new Error(`${STAT} has no aggregate cpu line`);
  const [user, nice, system, idle, iowait, irq, softirq, steal] = line.trim().split(/\s+/)
    .slice(1).map(Number);
  const fields = [user, nice, system, idle, iowait, irq, softirq, steal];
  if (fields.some((field) => field === undefined || !Number.isFinite(field))) {
    throw new Error(`Cannot parse the cpu line of ${STAT}: ${line}`);
  }
  return {
    busy: user! + nice! + system! + irq! + softirq! + steal!,
    idle: idle! + iowait!,
  };
}

function parseMeminfo(text: string): { total: number; used: number } {
  const kib = (name: string): number => {
    const match = new RegExp(`^${name}:\\s+(\\d+)`, "m").exec(text);
    if (match === null) throw new Error(`${MEMINFO} has no ${name}`);
    return Number(match[1]) * 1024;
  };
  const total = kib("MemTotal");
  const available = kib("MemAvailable");
  return { total, used: Math.max(0, total - available) };
}

function gauge(name: string, help: string, value: number): string {
  return `# HELP ${name} ${help}\n# TYPE ${name} gauge\n${name} ${value}\n`;
}

/**
 * The CPU gauges, refreshed on scrape at most once per interval.
 *
 * @example Two readings of fake `/proc` files
 * ```ts
 * import { CpuMetrics } from "./cpu_metrics.ts";
 * import assert from "node:assert/strict";
 *
 * let stat = "cpu  100 0 0 100 0 0 0 0 0 0\n";
 * let clock = 0;
 * const metrics = new CpuMetrics({
 *   intervalMs: 1000,
 *   now: () => clock,
 *   read: (path) =>
 *     path === "/proc/stat" ? stat : "MemTotal: 4 kB\nMemFree: 1 kB\nMemAvailable: 3 kB\n",
 * });
 * stat = "cpu  130 0 0 110 0 0 0 0 0 0\n";
 * clock = 1000;
 * assert.deepEqual(metrics.values(), {
 *   utilization: 0.75, memoryTotalBytes: 4096, memoryUsedBytes: 1024,
 * });
 * assert.match(metrics.render(), /^nv_cpu_utilization 0.75$/m);
 * ```
 */
export class CpuMetrics {
  #intervalMs: number;
  #read: ProcReader;
  #now: () => number;
  #times: CpuTimes;
  #values: CpuMetricsValues;
  #readAt: number;

  /**
   * Takes the first reading.
   *
   * @param options Interval, reader and clock.
   * @throws {TritonValidationError} When `/proc/stat` or `/proc/meminfo` cannot be read (not
   *   Linux, or no read permission) or parsed.
   */
  constructor(options: CpuMetricsOptions = {}) {
    this.#intervalMs = options.intervalMs ?? 2000;
    this.#read = options.read ?? Deno.readTextFileSync;
    this.#now = options.now ?? (() => performance.now());
    try {
      this.#times = parseStat(this.#read(STAT));
      const memory = parseMeminfo(this.#read(MEMINFO));
      this.#values = {
        utilization: 0,
        memoryTotalBytes: memory.total,
        memoryUsedBytes: memory.used,
      };
    } catch (error) {
      const denied = error instanceof Deno.errors.NotCapable ||
        error instanceof Deno.errors.PermissionDenied;
      const reason = denied
        ? `grant --allow-read=${STAT},${MEMINFO}`
        : error instanceof Deno.errors.NotFound
        ? `CPU metrics come from ${STAT} and ${MEMINFO}, which ${Deno.build.os} does not have`
        : (error as Error).message;
      throw new TritonValidationError(`Cannot report CPU metrics (allowCpuMetrics): ${reason}`, {
        cause: error,
      });
    }
    this.#readAt = this.#now();
  }

  /**
   * The current values; reads `/proc` again when the last reading is `intervalMs` old. A failed
   * reading reports zeros, as the core does.
   *
   * @returns Utilization since the previous reading, total and used memory.
   */
  values(): CpuMetricsValues {
    const now = this.#now();
    if (now - this.#readAt < this.#intervalMs) return this.#values;
    this.#readAt = now;
    try {
      const times = parseStat(this.#read(STAT));
      const busy = Math.max(0, times.busy - this.#times.busy);
      const idle = Math.max(0, times.idle - this.#times.idle);
      this.#times = times;
      const memory = parseMeminfo(this.#read(MEMINFO));
      this.#values = {
        utilization: busy + idle === 0 ? 0 : busy / (busy + idle),
        memoryTotalBytes: memory.total,
        memoryUsedBytes: memory.used,
      };
    } catch {
      this.#values = { utilization: 0, memoryTotalBytes: 0, memoryUsedBytes: 0 };
    }
    return this.#values;
  }

  /**
   * The gauges as Prometheus text, with the core's names and help texts.
   *
   * @returns Three gauge families, each ending with a newline.
   */
  render(): string {
    const values = this.values();
    return gauge("nv_cpu_utilization", "CPU utilization rate [0.0 - 1.0]", values.utilization) +
      gauge(
        "nv_cpu_memory_total_bytes",
        "CPU total memory (RAM), in bytes",
        values.memoryTotalBytes,
      ) +
      gauge("nv_cpu_memory_used_bytes", "CPU used memory (RAM), in bytes", values.memoryUsedBytes);
  }
}
