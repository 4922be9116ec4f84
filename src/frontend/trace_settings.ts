/**
 * The trace extension shared by both front ends: HTTP `GET/POST /v2[/models/{model}]/trace/setting`
 * carries the settings as JSON (strings, `trace_level` a list, `null` to clear), gRPC
 * `TraceSetting` as `SettingValue`s (lists of strings, an empty list to clear); both convert to
 * one change and go to the server's trace settings (`telemetry/trace_settings.ts`), so they
 * validate and answer alike, on both engines.
 *
 * @module
 */

import type { Engine } from "../engine/engine.ts";
import { InferenceError } from "../errors.ts";
import type { TraceSettingsChange, TraceSettingsWire } from "../telemetry/trace_settings.ts";
import type { Tracer } from "../telemetry/tracer.ts";

/**
 * A JSON body as a change: each value a string, a list of strings (`trace_level`), or `null`.
 *
 * @param body The parsed body.
 * @returns The change.
 * @throws {InferenceError} INVALID_ARG for a value of another type, naming the setting.
 */
export function httpTraceChange(body: Readonly<Record<string, unknown>>): TraceSettingsChange {
  const change: Record<string, readonly string[] | null> = {};
  for (const [key, value] of Object.entries(body)) {
    if (value === null) change[key] = null;
    else if (typeof value === "string") change[key] = [value];
    else if (Array.isArray(value) && value.every((entry) => typeof entry === "string")) {
      change[key] = value as string[];
    } else {
      throw InferenceError.invalidArg(
        `Invalid '${key}': expected ${key === "trace_level" ? "a list of strings" : "a string"}`,
      );
    }
  }
  return change;
}

/** Options of {@linkcode traceSettings}. */
export interface TraceSettingsOptions {
  /** The model whose settings to read or change; absent, the global settings. */
  readonly model?: string | undefined;
  /** The change to make first; absent, the settings are only read. */
  readonly change?: TraceSettingsChange | undefined;
}

/**
 * Reads, and with a change first changes, the global or a model's trace settings.
 *
 * @param tracer The server's tracer; without one, settings are the defaults and cannot change.
 * @param engine The engine (a model named must be known to it).
 * @param options The model (absent: the global settings) and the change (absent: only read).
 * @returns The settings afterwards.
 * @throws {InferenceError} NOT_FOUND for an unknown model, INVALID_ARG for a bad setting,
 *   UNSUPPORTED for a change without a tracer.
 */
export function traceSettings(
  tracer: Tracer | undefined,
  engine: Engine,
  options: TraceSettingsOptions = {},
): TraceSettingsWire {
  const { model, change } = options;
  if (model !== undefined) engine.model(model);
  if (tracer === undefined) {
    if (change !== undefined && Object.keys(change).length > 0) {
      throw InferenceError.unsupported(
        "Cannot change trace settings: this front end has no tracer (give the engine and the front end the same Tracer)",
      );
    }
    return {
      trace_level: ["OFF"],
      trace_rate: "1000",
      trace_count: "-1",
      log_frequency: "0",
      trace_file: "",
      trace_mode: "triton",
    };
  }
  return change === undefined ? tracer.settings.get(model) : tracer.settings.update(model, change);
}
