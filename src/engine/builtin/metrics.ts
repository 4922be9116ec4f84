/**
 * Prometheus text exposition of the built-in engine's per-model statistics, with Triton's metric
 * names, help texts and `model`/`version` labels.
 *
 * @module
 */

import type { ModelStatistics } from "../engine.ts";

/** One model version's state for the metrics page. */
export interface ModelMetricsSource {
  /** Its statistics. */
  readonly stats: ModelStatistics;
  /** Requests queued and not yet running. */
  readonly pending: number;
  /**
   * Whether the model uses the response cache; only then has it cache metrics, like Triton.
   *
   * @default {false}
   */
  readonly cached?: boolean;
}

interface Family {
  name: string;
  help: string;
  type: "counter" | "gauge";
  value: (source: ModelMetricsSource) => number;
  cacheOnly?: boolean;
  /**
   * Turned off by `counter_latencies=false`: the latency counters, and the cache counters the
   * core creates along with them.
   */
  latency?: boolean;
}

/** Options of {@linkcode renderMetrics}. */
export interface RenderMetricsOptions {
  /**
   * Whether the cumulative latency counters (`nv_inference_*_duration_us`) are reported, as
   * with Triton's `--metrics-config counter_latencies=<bool>`.
   *
   * @default {true}
   */
  latencyCounters?: boolean;
}

const us = (ns: number): number => Math.floor(ns / 1000);

const FAMILIES: readonly Family[] = [
  {
    name: "nv_inference_request_success",
    help: "Number of successful inference requests, all batch sizes",
    type: "counter",
    value: (s) => s.stats.inference_stats.success.count,
  },
  {
    name: "nv_inference_request_failure",
    help: "Number of failed inference requests, all batch sizes",
    type: "counter",
    value: (s) => s.stats.inference_stats.fail.count,
  },
  {
    name: "nv_inference_count",
    help: "Number of inferences performed (does not include cached requests)",
    type: "counter",
    value: (s) => s.stats.inference_count,
  },
  {
    name: "nv_inference_exec_count",
    help: "Number of model executions performed (does not include cached requests)",
    type: "counter",
    value: (s) => s.stats.execution_count,
  },
  {
    name: "nv_inference_request_duration_us",
    latency: true,
    help: "Cumulative inference request duration in microseconds (includes cached requests)",
    type: "counter",
    value: (s) => us(s.stats.inference_stats.success.ns),
  },
  {
    name: "nv_inference_queue_duration_us",
    latency: true,
    help: "Cumulative inference queuing duration in microseconds (includes cached requests)",
    type: "counter",
    value: (s) => us(s.stats.inference_stats.queue.ns),
  },
  {
    name: "nv_inference_compute_input_duration_us",
    latency: true,
    help: "Cumulative compute input duration in microseconds (does not include cached requests)",
    type: "counter",
    value: (s) => us(s.stats.inference_stats.compute_input.ns),
  },
  {
    name: "nv_inference_compute_infer_duration_us",
    latency: true,
    help:
      "Cumulative compute inference duration in microseconds (does not include cached requests)",
    type: "counter",
    value: (s) => us(s.stats.inference_stats.compute_infer.ns),
  },
  {
    name: "nv_inference_compute_output_duration_us",
    latency: true,
    help:
      "Cumulative inference compute output duration in microseconds (does not include cached requests)",
    type: "counter",
    value: (s) => us(s.stats.inference_stats.compute_output.ns),
  },
  {
    name: "nv_inference_pending_request_count",
    help: "Instantaneous number of pending requests awaiting execution per-model.",
    type: "gauge",
    value: (s) => s.pending,
  },
  {
    name: "nv_cache_num_hits_per_model",
    latency: true,
    help: "Number of cache hits per model",
    type: "counter",
    cacheOnly: true,
    value: (s) => s.stats.inference_stats.cache_hit.count,
  },
  {
    name: "nv_cache_num_misses_per_model",
    latency: true,
    help: "Number of cache misses per model",
    type: "counter",
    cacheOnly: true,
    value: (s) => s.stats.inference_stats.cache_miss.count,
  },
];

function escapeLabel(value: string): string {
  return value.replaceAll("\\", "\\\\").replaceAll('"', '\\"').replaceAll("\n", "\\n");
}

/**
 * Renders the metrics of every model version as Prometheus text.
 *
 * @param sources One entry per loaded model version.
 * @param options Which families are reported.
 * @returns The text exposition (ends with a newline when not empty).
 *
 * @example Render a model's counters as Prometheus text
 * ```ts
 * import { renderMetrics } from "./metrics.ts";
 * import { ModelStatsRecorder } from "./statistics.ts";
 * import assert from "node:assert/strict";
 *
 * const text = renderMetrics([{ stats: new ModelStatsRecorder("m", 1).snapshot(), pending: 0 }]);
 * assert.match(text, /^nv_inference_request_success\{model="m",version="1"\} 0$/m);
 * assert.match(text, /^# TYPE nv_inference_count counter$/m);
 * ```
 */
export function renderMetrics(
  sources: readonly ModelMetricsSource[],
  options: RenderMetricsOptions = {},
): string {
  if (sources.length === 0) return "";
  const latencyCounters = options.latencyCounters ?? true;
  const lines: string[] = [];
  for (const family of FAMILIES) {
    if (family.latency && !latencyCounters) continue;
    const members = family.cacheOnly ? sources.filter((s) => s.cached) : sources;
    if (members.length === 0) continue;
    lines.push(`# HELP ${family.name} ${family.help}`, `# TYPE ${family.name} ${family.type}`);
    for (const source of members) {
      const labels = `model="${escapeLabel(source.stats.name)}",version="${
        escapeLabel(source.stats.version)
      }"`;
      lines.push(`${family.name}{${labels}} ${family.value(source)}`);
    }
  }
  return lines.join("\n") + "\n";
}
