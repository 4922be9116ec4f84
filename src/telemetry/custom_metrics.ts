/**
 * The built-in engine's registry of the metrics models declare (`context.metrics`), rendered in
 * Prometheus' text format beside the engine's own metrics, the way the Triton core's
 * prometheus-cpp registry renders the families a backend creates with
 * `TRITONSERVER_MetricFamilyNew`.
 *
 * @module
 */

import type { MetricChange, MetricFamilyOptions, MetricsBackend } from "../callable/metrics.ts";
import { TritonBadParameterError } from "../errors.ts";

interface Series {
  readonly labels: Readonly<Record<string, string>>;
  value: number;
  readonly buckets?: readonly number[];
  readonly counts?: number[];
  sum: number;
  count: number;
}

interface Family {
  readonly options: MetricFamilyOptions;
  readonly series: Map<string, Series>;
}

function labelKey(labels: Readonly<Record<string, string>>): string {
  return JSON.stringify(Object.entries(labels).sort(([a], [b]) => a < b ? -1 : 1));
}

function escape(value: string): string {
  return value.replaceAll("\\", "\\\\").replaceAll("\n", "\\n").replaceAll('"', '\\"');
}

function labelText(labels: Readonly<Record<string, string>>, extra?: [string, string]): string {
  const pairs = Object.entries(labels).map(([k, v]) => `${k}="${escape(v)}"`);
  if (extra !== undefined) pairs.push(`${extra[0]}="${extra[1]}"`);
  return pairs.length === 0 ? "" : `{${pairs.join(",")}}`;
}

function number(value: number): string {
  if (value === Infinity) return "+Inf";
  if (value === -Infinity) return "-Inf";
  return String(value);
}

/**
 * The models' own metrics of one engine.
 *
 * @example A counter with a label
 * ```ts
 * import { CustomMetricsRegistry } from "./custom_metrics.ts";
 * import { ModelMetrics } from "../callable/metrics.ts";
 * import assert from "node:assert/strict";
 *
 * const registry = new CustomMetricsRegistry();
 * const metrics = new ModelMetrics(registry);
 * metrics.family({ name: "hits_total", description: "Hits", kind: "counter" })
 *   .metric({ labels: { route: "a" } }).increment(3);
 * assert.equal(
 *   registry.render(),
 *   '# HELP hits_total Hits\n# TYPE hits_total counter\nhits_total{route="a"} 3\n',
 * );
 * ```
 */
export class CustomMetricsRegistry implements MetricsBackend {
  #families = new Map<string, Family>();

  /**
   * Applies one change.
   *
   * @param change The change.
   * @throws {TritonBadParameterError} When the family's name is taken by another kind, or by a
   *   reserved family of the server (`nv_*`).
   */
  apply(change: MetricChange): void {
    const { name, kind, description } = change.family;
    let family = this.#families.get(name);
    if (family === undefined) {
      if (name.startsWith("nv_")) {
        throw new TritonBadParameterError(
          `Cannot declare metric family '${name}': names starting with nv_ are the server's`,
        );
      }
      family = { options: { name, kind, description }, series: new Map() };
      this.#families.set(name, family);
    } else if (family.options.kind !== kind) {
      throw new TritonBadParameterError(
        `Cannot declare metric family '${name}': it is a ${family.options.kind}, not a ${kind}`,
      );
    }
    const key = labelKey(change.labels);
    let series = family.series.get(key);
    if (series === undefined) {
      series = {
        labels: { ...change.labels },
        value: 0,
        sum: 0,
        count: 0,
        ...(kind === "histogram"
          ? { buckets: change.buckets ?? [], counts: (change.buckets ?? []).map(() => 0) }
          : {}),
      };
      family.series.set(key, series);
    }
    switch (change.operation) {
      case "increment":
        series.value += change.value;
        break;
      case "set":
        series.value = change.value;
        break;
      case "observe":
        series.sum += change.value;
        series.count++;
        series.buckets!.forEach((bound, index) => {
          if (change.value <= bound) series!.counts![index]!++;
        });
        break;
    }
  }

  /**
   * The metrics in Prometheus' text format.
   *
   * @returns The text; empty when no model declared any.
   */
  render(): string {
    let text = "";
    for (const { options, series } of this.#families.values()) {
      text += `# HELP ${options.name} ${options.description.replaceAll("\n", "\\n")}\n`;
      text += `# TYPE ${options.name} ${options.kind}\n`;
      for (const entry of series.values()) {
        if (options.kind !== "histogram") {
          text += `${options.name}${labelText(entry.labels)} ${number(entry.value)}\n`;
          continue;
        }
        entry.buckets!.forEach((bound, index) => {
          text += `${options.name}_bucket${labelText(entry.labels, ["le", number(bound)])} ${
            entry.counts![index]
          }\n`;
        });
        text += `${options.name}_bucket${labelText(entry.labels, ["le", "+Inf"])} ${entry.count}\n`;
        text += `${options.name}_sum${labelText(entry.labels)} ${number(entry.sum)}\n`;
        text += `${options.name}_count${labelText(entry.labels)} ${entry.count}\n`;
      }
    }
    return text;
  }
}
