/**
 * The built-in engine's options, and the checks that refuse settings it cannot honour (other
 * caches, GPU metrics, metrics settings it does not report): a setting it accepts is one it
 * honours.
 *
 * @module
 */

import { TritonValidationError } from "../../errors.ts";
import type { CommonEngineOptions } from "../engine.ts";

/** Options of {@linkcode BuiltinEngine}: the options both engines take. */
export type BuiltinEngineOptions = CommonEngineOptions;

/** What the built-in engine makes of its cache and metrics options. */
export interface BuiltinSettings {
  /** The local cache's size in bytes; 0 without a cache. */
  readonly cacheBytes: number;
  /** Whether the latency counters are reported. */
  readonly latencyCounters: boolean;
}

/** The metrics-config entries the built-in engine accepts: they match what it reports. */
const BUILTIN_METRICS_SETTINGS = new Set([
  "counter_latencies=true",
  "counter_latencies=false",
  "histogram_latencies=false",
  "summary_latencies=false",
]);

function refuse(what: string, reason: string): TritonValidationError {
  return new TritonValidationError(
    `Cannot start the built-in engine: ${what} is not supported: ${reason}`,
  );
}

/** The local cache size the options ask for, refusing what the built-in engine cannot do. */
function cacheBytes(options: BuiltinEngineOptions): number {
  const cache = options.cacheConfig;
  if (cache === undefined) return options.responseCacheByteSize ?? 0;
  if (cache.name !== "local") {
    throw refuse(
      `cacheConfig cache '${cache.name}'`,
      "the built-in engine has only the local cache",
    );
  }
  const others = Object.keys(cache.config).filter((key) => key !== "size");
  if (others.length > 0) {
    throw refuse(
      `cacheConfig setting local,${others[0]}`,
      "the local cache has only a size",
    );
  }
  const size = Number(cache.config["size"] ?? 0);
  if (!Number.isSafeInteger(size) || size < 0) {
    throw refuse(
      `cacheConfig local,size=${cache.config["size"]}`,
      "the size must be an integer >= 0",
    );
  }
  return size;
}

/**
 * Checks the built-in engine's cache and metrics options.
 *
 * @param options The options.
 * @returns The cache size and whether latency counters are on.
 * @throws {TritonValidationError} For a cache or metrics setting the built-in engine cannot
 *   honour; the message names it.
 *
 * @example Read cache and metrics settings, refuse GPU metrics
 * ```ts
 * import { builtinSettings } from "./options.ts";
 * import assert from "node:assert/strict";
 *
 * const settings = builtinSettings({
 *   cacheConfig: { name: "local", config: { size: "1024" } },
 *   metricsConfig: ["counter_latencies=false"],
 * });
 * assert.deepEqual(settings, { cacheBytes: 1024, latencyCounters: false });
 * assert.throws(() => builtinSettings({ gpuMetrics: true }), /no GPU metrics/);
 * ```
 */
export function builtinSettings(options: BuiltinEngineOptions): BuiltinSettings {
  if (options.gpuMetrics === true) {
    throw refuse("allowGpuMetrics", "the built-in engine has no GPU metrics");
  }
  if ((options.pinnedMemoryPoolByteSize ?? 0) > 0) {
    throw refuse(
      "pinnedMemoryPoolByteSize",
      "the built-in engine copies no tensors to or from GPUs (set 0 or leave it unset)",
    );
  }
  const metricsConfig = options.metricsConfig ?? [];
  for (const entry of metricsConfig) {
    if (!BUILTIN_METRICS_SETTINGS.has(entry)) {
      throw refuse(
        `metricsConfig entry '${entry}'`,
        "the built-in engine reports latency counters only (counter_latencies=<bool>)",
      );
    }
  }
  return {
    cacheBytes: cacheBytes(options),
    latencyCounters: !metricsConfig.includes("counter_latencies=false"),
  };
}
