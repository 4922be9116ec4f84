/**
 * Triton's `--trace-config` entries (`TritonConfig.traceConfig`, PyTriton's `trace_config`):
 * global settings as `<setting>=<value>` (`level`, `rate`, `count`, `mode`) and mode settings as
 * `<mode>,<setting>=<value>` (`triton,file=...`, `triton,log-frequency=...`,
 * `opentelemetry,url=...`, `opentelemetry,resource=<key>=<value>`, the batch span processor's
 * `opentelemetry,bsp_*`). One grammar, Triton 2.51's names and defaults, read once when the
 * server is created: a wrong entry fails `new Triton()` naming it.
 *
 * @module
 */

import { dirname, resolve } from "node:path";
import { TritonValidationError } from "../errors.ts";

/** A trace level as the trace extension names it. */
export type TraceLevelName = "OFF" | "TIMESTAMPS" | "TENSORS";

/** Where traces go: Triton's JSON trace file, or OpenTelemetry spans over OTLP. */
export type TraceMode = "triton" | "opentelemetry";

/** The OpenTelemetry mode's exporter settings. */
export interface OpenTelemetryTraceConfig {
  /** The collector's OTLP/HTTP traces endpoint. */
  readonly url: string;
  /** Resource attributes of every span (`service.name` among them). */
  readonly resource: Readonly<Record<string, string>>;
  /** Batch span processor: most spans queued; more are dropped. */
  readonly bspMaxQueueSize: number;
  /** Batch span processor: the longest wait between two exports, in milliseconds. */
  readonly bspScheduleDelayMs: number;
  /** Batch span processor: most spans per export. */
  readonly bspMaxExportBatchSize: number;
}

/** The trace configuration a server starts with. */
export interface TraceConfig {
  /** `["OFF"]`, or the levels traced (`TIMESTAMPS`, `TENSORS`). */
  readonly level: readonly TraceLevelName[];
  /** One request of every `rate` is traced. */
  readonly rate: number;
  /** How many more requests are traced; -1 for no limit. */
  readonly count: number;
  /** Where traces go. */
  readonly mode: TraceMode;
  /** Mode `triton`: the trace file ("" for none). */
  readonly file: string;
  /** Mode `triton`: write every that many traces to `<file>.<n>`; 0 writes `<file>` at the end. */
  readonly logFrequency: number;
  /** Mode `opentelemetry`: the exporter. */
  readonly opentelemetry: OpenTelemetryTraceConfig;
}

/** Triton's defaults (`tritonserver --help`, trace.md). */
export const DEFAULT_TRACE_CONFIG: TraceConfig = Object.freeze({
  level: Object.freeze(["OFF"] as TraceLevelName[]),
  rate: 1000,
  count: -1,
  mode: "triton",
  file: "",
  logFrequency: 0,
  opentelemetry: Object.freeze({
    url: "http://localhost:4318/v1/traces",
    resource: Object.freeze({ "service.name": "triton-inference-server" }),
    bspMaxQueueSize: 2048,
    bspScheduleDelayMs: 5000,
    bspMaxExportBatchSize: 512,
  }),
});

const UINT32_MAX = 2 ** 32 - 1;
const INT32_MAX = 2 ** 31 - 1;

function invalid(entry: string, why: string): TritonValidationError {
  return new TritonValidationError(`Invalid traceConfig entry '${entry}': ${why}`);
}

/**
 * Refuses a trace file whose directory does not exist when the server is made, as the trace
 * extension refuses it, rather than failing at the first trace written. Other errors (a denied
 * read permission) leave it to the write, which names the missing flag.
 */
function checkDirectory(entry: string, path: string): void {
  const directory = dirname(resolve(path));
  try {
    if (Deno.statSync(directory).isDirectory) return;
  } catch (error) {
    if (!(error instanceof Deno.errors.NotFound)) return;
  }
  throw invalid(entry, `directory '${directory}' does not exist`);
}

function integer(entry: string, value: string, min: number, max: number): number {
  if (!/^-?\d+$/.test(value)) throw invalid(entry, `expected an integer, got '${value}'`);
  const n = Number(value);
  if (n < min || n > max) throw invalid(entry, `expected a value in [${min}, ${max}]`);
  return n;
}

/**
 * Reads `traceConfig` entries into a {@linkcode TraceConfig}, over Triton's defaults. `level`
 * may be given several times (the levels add up; `OFF` alone turns tracing off), and so may
 * `opentelemetry,resource=`.
 *
 * @param entries The entries.
 * @returns The configuration.
 * @throws {TritonValidationError} For an entry that does not parse, an unknown setting or mode, a
 *   value out of range, or a configuration that traces without anywhere to write (level on, mode
 *   `triton`, no file).
 *
 * @example Trace every request of the server into a file
 * ```ts
 * import { parseTraceConfig } from "./trace_config.ts";
 * import assert from "node:assert/strict";
 *
 * const config = parseTraceConfig(["level=TIMESTAMPS", "rate=1", "triton,file=/tmp/trace.json"]);
 * assert.deepEqual([config.level, config.rate, config.count, config.file], [
 *   ["TIMESTAMPS"], 1, -1, "/tmp/trace.json",
 * ]);
 * ```
 *
 * @example OpenTelemetry, like `tritonserver --trace-config opentelemetry,url=...`
 * ```ts
 * import { parseTraceConfig } from "./trace_config.ts";
 * import assert from "node:assert/strict";
 *
 * const config = parseTraceConfig([
 *   "mode=opentelemetry", "level=TIMESTAMPS", "rate=1",
 *   "opentelemetry,url=http://collector:4318/v1/traces",
 *   "opentelemetry,resource=service.name=ocr",
 * ]);
 * assert.equal(config.opentelemetry.url, "http://collector:4318/v1/traces");
 * assert.deepEqual(config.opentelemetry.resource, { "service.name": "ocr" });
 * assert.throws(() => parseTraceConfig(["level=ALL"]), {
 *   message: "Invalid traceConfig entry 'level=ALL': expected OFF, TIMESTAMPS or TENSORS",
 * });
 * ```
 */
export function parseTraceConfig(entries: readonly string[]): TraceConfig {
  const defaults = DEFAULT_TRACE_CONFIG;
  let levels: TraceLevelName[] | undefined;
  let rate = defaults.rate;
  let count = defaults.count;
  let mode: TraceMode = defaults.mode;
  let file = defaults.file;
  let logFrequency = defaults.logFrequency;
  const otel = { ...defaults.opentelemetry };
  let resource: Record<string, string> | undefined;
  for (const entry of entries) {
    const comma = entry.indexOf(",");
    const equals = entry.indexOf("=");
    const scoped = comma >= 0 && (equals < 0 || comma < equals);
    const section = scoped ? entry.slice(0, comma) : "";
    const rest = scoped ? entry.slice(comma + 1) : entry;
    const at = rest.indexOf("=");
    if (at < 1) {
      throw invalid(entry, "expected <setting>=<value> or <mode>,<setting>=<value>");
    }
    const setting = rest.slice(0, at);
    const value = rest.slice(at + 1);
    if (section === "") {
      if (setting === "level") {
        if (value !== "OFF" && value !== "TIMESTAMPS" && value !== "TENSORS") {
          throw invalid(entry, "expected OFF, TIMESTAMPS or TENSORS");
        }
        levels ??= [];
        if (value === "OFF") levels.length = 0;
        else if (!levels.includes(value)) levels.push(value);
      } else if (setting === "rate") {
        rate = integer(entry, value, 1, UINT32_MAX);
      } else if (setting === "count") {
        count = integer(entry, value, -1, INT32_MAX);
      } else if (setting === "mode") {
        if (value !== "triton" && value !== "opentelemetry") {
          throw invalid(entry, "expected the mode triton or opentelemetry");
        }
        mode = value;
      } else {
        throw invalid(
          entry,
          `unknown setting '${setting}' (global settings: level, rate, count, mode; mode settings are written <mode>,<setting>=<value>)`,
        );
      }
    } else if (section === "triton") {
      if (setting === "file") {
        checkDirectory(entry, value);
        file = value;
      } else if (setting === "log-frequency") {
        logFrequency = integer(entry, value, 0, UINT32_MAX);
      } else throw invalid(entry, `unknown triton setting '${setting}' (file, log-frequency)`);
    } else if (section === "opentelemetry") {
      if (setting === "url") {
        try {
          new URL(value);
        } catch {
          throw invalid(entry, "the url is not an absolute URL");
        }
        otel.url = value;
      } else if (setting === "resource") {
        const inner = value.indexOf("=");
        if (inner < 1) throw invalid(entry, "expected resource=<key>=<value>");
        resource ??= { ...defaults.opentelemetry.resource };
        resource[value.slice(0, inner)] = value.slice(inner + 1);
      } else if (setting === "bsp_max_queue_size") {
        otel.bspMaxQueueSize = integer(entry, value, 1, INT32_MAX);
      } else if (setting === "bsp_schedule_delay") {
        otel.bspScheduleDelayMs = integer(entry, value, 0, INT32_MAX);
      } else if (setting === "bsp_max_export_batch_size") {
        otel.bspMaxExportBatchSize = integer(entry, value, 1, INT32_MAX);
      } else {
        throw invalid(
          entry,
          `unknown opentelemetry setting '${setting}' (url, resource, bsp_max_queue_size, bsp_schedule_delay, bsp_max_export_batch_size)`,
        );
      }
    } else {
      throw invalid(entry, `unknown trace mode '${section}' (triton, opentelemetry)`);
    }
  }
  if (otel.bspMaxExportBatchSize > otel.bspMaxQueueSize) {
    throw new TritonValidationError(
      `Invalid traceConfig: opentelemetry,bsp_max_export_batch_size (${otel.bspMaxExportBatchSize}) is larger than bsp_max_queue_size (${otel.bspMaxQueueSize})`,
    );
  }
  const level: TraceLevelName[] = levels === undefined || levels.length === 0 ? ["OFF"] : levels;
  if (level[0] !== "OFF" && mode === "triton" && file === "") {
    throw new TritonValidationError(
      "Invalid traceConfig: tracing is on in mode triton but no trace file is given (add triton,file=<path>)",
    );
  }
  if (resource !== undefined) otel.resource = Object.freeze(resource);
  return Object.freeze({
    level: Object.freeze(level),
    rate,
    count,
    mode,
    file,
    logFrequency,
    opentelemetry: Object.freeze(otel),
  });
}
