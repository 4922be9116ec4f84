/**
 * Triton's `--metrics-config` settings (`TritonConfig.metricsConfig`): which ones exist, what
 * values they take, and how an entry splits into the group, setting and value the core's
 * `TRITONSERVER_ServerOptionsSetMetricsConfig` takes.
 *
 * The Triton 2.51 core reads four settings of the global group and ignores everything else
 * without a word, so DenoTriton refuses every other entry instead of passing it on.
 *
 * @module
 */

/** One `metricsConfig` entry, split. */
export interface MetricsSetting {
  /** The group; `""` is the global group (an entry without `<group>,`). */
  readonly group: string;
  /** The setting's name, e.g. `counter_latencies`. */
  readonly setting: string;
  /** The value as written, e.g. `false`. */
  readonly value: string;
}

const BOOLEAN = /^(?:true|false)$/;
// <quantile>:<error>[,<quantile>:<error>...] with decimal numbers in [0, 1].
const QUANTILES =
  /^(?:0(?:\.\d+)?|1(?:\.0*)?):(?:0(?:\.\d+)?|1(?:\.0*)?)(?:,(?:0(?:\.\d+)?|1(?:\.0*)?):(?:0(?:\.\d+)?|1(?:\.0*)?))*$/;

/** The settings the core reads, with what a valid value is. */
const KNOWN: Readonly<Record<string, { test: RegExp; expected: string }>> = {
  counter_latencies: { test: BOOLEAN, expected: "true or false" },
  histogram_latencies: { test: BOOLEAN, expected: "true or false" },
  summary_latencies: { test: BOOLEAN, expected: "true or false" },
  summary_quantiles: {
    test: QUANTILES,
    expected: "<quantile>:<error> pairs in [0, 1] separated by commas, e.g. 0.5:0.05,0.9:0.01",
  },
};

/**
 * Splits a `metricsConfig` entry: `<setting>=<value>` or `<group>,<setting>=<value>`.
 *
 * @param entry The entry.
 * @returns Its group (`""` for the global group), setting and value.
 *
 * @example A setting without a group, and quantiles with commas
 * ```ts
 * import { parseMetricsSetting } from "./metrics_config.ts";
 * import assert from "node:assert/strict";
 *
 * assert.deepEqual(parseMetricsSetting("counter_latencies=false"), {
 *   group: "", setting: "counter_latencies", value: "false",
 * });
 * assert.deepEqual(parseMetricsSetting("summary_quantiles=0.5:0.05,0.9:0.01"), {
 *   group: "", setting: "summary_quantiles", value: "0.5:0.05,0.9:0.01",
 * });
 * ```
 */
export function parseMetricsSetting(entry: string): MetricsSetting {
  const equals = entry.indexOf("=");
  const head = equals < 0 ? entry : entry.slice(0, equals);
  const value = equals < 0 ? "" : entry.slice(equals + 1);
  const comma = head.indexOf(",");
  return comma < 0
    ? { group: "", setting: head, value }
    : { group: head.slice(0, comma), setting: head.slice(comma + 1), value };
}

/**
 * Checks a `metricsConfig` entry against the settings the Triton core reads.
 *
 * @param entry The entry.
 * @returns Why the entry is refused, or `undefined` when it is valid.
 *
 * @example A valid setting, a bad boolean, an unsupported setting
 * ```ts
 * import { metricsSettingProblem } from "./metrics_config.ts";
 * import assert from "node:assert/strict";
 *
 * assert.equal(metricsSettingProblem("summary_latencies=true"), undefined);
 * assert.equal(
 *   metricsSettingProblem("counter_latencies=no"),
 *   "counter_latencies must be true or false",
 * );
 * assert.match(metricsSettingProblem("cpu_metrics=true")!, /is not supported/);
 * ```
 */
export function metricsSettingProblem(entry: string): string | undefined {
  const { group, setting, value } = parseMetricsSetting(entry);
  const known = Object.hasOwn(KNOWN, setting) ? KNOWN[setting] : undefined;
  if (group !== "" || known === undefined) {
    return `${
      group === "" ? setting : `${group},${setting}`
    } is not supported: the Triton core reads only ${
      Object.keys(KNOWN).join(", ")
    }, without a group`;
  }
  if (!known.test.test(value)) return `${setting} must be ${known.expected}`;
  return undefined;
}
