/**
 * The trace extension's settings, kept as Triton 2.51's `TraceManager` keeps them: one global
 * setting and, per model, a setting whose fields fall back to the global one until they are
 * set (a `null` clears a field back to the fallback; a model setting with no field left is
 * dropped). Each setting object counts its own samples: replacing it (an update) starts the
 * rate and `trace_count` over, and writes the traces it collected. Both engines sample through
 * {@linkcode TraceSettingsStore.sample}; both front ends read and change the settings through
 * {@linkcode TraceSettingsStore.get} and {@linkcode TraceSettingsStore.update}, with the
 * settings as the extension names them (`trace_level`, `trace_rate`, `trace_count`,
 * `log_frequency`, `trace_file`, `trace_mode`), so they validate and answer alike.
 *
 * @module
 */

import { dirname, resolve } from "node:path";
import type { TraceConfig, TraceLevelName, TraceMode } from "../config/trace_config.ts";
import { InferenceError } from "../errors.ts";
import { TraceFile } from "./trace_file.ts";

/** The core's level bits (`TRITONSERVER_InferenceTraceLevel`). */
export const TRACE_LEVEL_TIMESTAMPS = 0x4;
/** The core's level bits for tensors. */
export const TRACE_LEVEL_TENSORS = 0x8;

/** The settings as the trace extension answers them (every value a string, levels a list). */
export interface TraceSettingsWire {
  /** `["OFF"]` or the levels. */
  trace_level: string[];
  /** One of every that many requests is traced. */
  trace_rate: string;
  /** Traces left; -1 for no limit. */
  trace_count: string;
  /** Traces per indexed file; 0 writes the file at the end. */
  log_frequency: string;
  /** The trace file. */
  trace_file: string;
  /** `triton` or `opentelemetry` (fixed at start). */
  trace_mode: string;
}

/** The settings' names, in the order answers list them. */
export const TRACE_SETTING_NAMES: readonly (keyof TraceSettingsWire)[] = [
  "trace_level",
  "trace_rate",
  "trace_count",
  "log_frequency",
  "trace_file",
  "trace_mode",
];

/** A change as the front ends decode it: each setting's strings, or `null` to clear it. */
export type TraceSettingsChange = Readonly<Record<string, readonly string[] | null>>;

interface Values {
  level: number;
  rate: number;
  count: number;
  logFrequency: number;
  file: string;
}

type Field = keyof Values;

const UINT32_MAX = 2 ** 32 - 1;
const INT32_MAX = 2 ** 31 - 1;

function levelBits(levels: readonly TraceLevelName[]): number {
  let bits = 0;
  for (const level of levels) {
    if (level === "TIMESTAMPS") bits |= TRACE_LEVEL_TIMESTAMPS;
    if (level === "TENSORS") bits |= TRACE_LEVEL_TENSORS;
  }
  return bits;
}

function levelNames(bits: number): string[] {
  if (bits === 0) return ["OFF"];
  const names: string[] = [];
  if (bits & TRACE_LEVEL_TIMESTAMPS) names.push("TIMESTAMPS");
  if (bits & TRACE_LEVEL_TENSORS) names.push("TENSORS");
  return names;
}

/**
 * One setting object: its values, which fields were given (the rest follow the fallback), its
 * sample counters and the traces it has not written yet.
 */
export class TraceSetting {
  /** The level bits; 0 is off. */
  readonly level: number;
  /** The values. */
  readonly values: Readonly<Values>;
  /** The fields set on this setting itself. */
  readonly specified: ReadonlySet<Field>;
  readonly #mode: TraceMode;
  readonly #file: TraceFile | undefined;
  #count: number;
  #sampled = 0;
  #created = 0;
  #collected = 0;
  #inStream: string[] = [];
  // Replaced (or the server stopped): a trace that ends later is written at once.
  #retired = false;

  /**
   * A setting.
   *
   * @param values Its values.
   * @param specified The fields set on it.
   * @param output The server's trace mode, and the trace file of `values.file` (mode `triton`).
   */
  constructor(
    values: Values,
    specified: ReadonlySet<Field>,
    output: { readonly mode: TraceMode; readonly file?: TraceFile | undefined },
  ) {
    this.values = Object.freeze({ ...values });
    this.level = values.level;
    this.specified = specified;
    this.#mode = output.mode;
    this.#file = output.file;
    this.#count = values.count;
  }

  /** Traces left to take (-1: no limit). */
  get count(): number {
    return this.#count;
  }

  /**
   * Counts a request and says whether it is traced: one of every `rate`, while `trace_count`
   * lasts; `forced` (a request that carries its client's trace context, in mode
   * `opentelemetry`) is traced whenever tracing is on.
   *
   * @param forced Trace it regardless of rate and count.
   * @returns Whether to trace it.
   */
  sample(forced = false): boolean {
    if (this.level === 0) return false;
    if (this.#count === 0 && !forced) return false;
    const hit = ++this.#sampled % this.values.rate === 0;
    if ((hit && this.#count !== 0) || forced) {
      if (hit && this.#count > 0) this.#count--;
      this.#created++;
      return true;
    }
    return false;
  }

  /**
   * Takes one finished trace's records (mode `triton`): kept until `log_frequency` traces are
   * in, or until `trace_count` is used up, then written to the next indexed file.
   *
   * @param records The trace's records, joined by commas.
   */
  write(records: string): void {
    if (this.#file === undefined) return;
    if (this.#retired) {
      this.#file.save(records, this.values.logFrequency !== 0);
      return;
    }
    this.#inStream.push(records);
    this.#collected++;
    const countDone = this.#count === 0 && this.#collected === this.#created;
    const frequency = this.values.logFrequency;
    if (countDone || (frequency !== 0 && this.#inStream.length >= frequency)) {
      const stream = this.#inStream.join(",");
      this.#inStream = [];
      this.#file.save(stream, true);
    }
  }

  /**
   * Writes the traces still kept, to an indexed file with `log_frequency`, else to the file;
   * the setting is replaced (or the server stops), so traces still running write on their own.
   */
  flush(): void {
    this.#retired = true;
    if (this.#file === undefined || this.#inStream.length === 0 || this.#mode !== "triton") return;
    const stream = this.#inStream.join(",");
    this.#inStream = [];
    this.#file.save(stream, this.values.logFrequency !== 0);
  }
}

/** The server's trace settings: global and per model. */
export class TraceSettingsStore {
  /** The server's trace mode (fixed at start). */
  readonly mode: TraceMode;
  #default: TraceSetting;
  #global: TraceSetting;
  #models = new Map<string, TraceSetting>();
  #files = new Map<string, TraceFile>();

  /**
   * The settings a server starts with.
   *
   * @param config The server's trace configuration.
   */
  constructor(config: TraceConfig) {
    this.mode = config.mode;
    const values: Values = {
      level: levelBits(config.level),
      rate: config.rate,
      count: config.count,
      logFrequency: config.logFrequency,
      file: config.file === "" ? "" : resolve(config.file),
    };
    this.#default = new TraceSetting(values, new Set(), { mode: this.mode });
    this.#global = this.#make(values, new Set());
  }

  /** Whether any setting traces at all (a request finds out cheaply when none does). */
  get active(): boolean {
    if (this.#global.level !== 0 && this.#global.count !== 0) return true;
    for (const setting of this.#models.values()) if (setting.level !== 0) return true;
    return false;
  }

  /**
   * The setting a model's requests are sampled by: its own, else the global one.
   *
   * @param model The model's name.
   * @returns The setting.
   */
  settingFor(model: string): TraceSetting {
    return this.#models.get(model) ?? this.#global;
  }

  /**
   * The settings of a model (its own, else the global ones) or the global settings.
   *
   * @param model The model, or `undefined` for the global settings.
   * @returns The settings as the extension answers them.
   */
  get(model?: string): TraceSettingsWire {
    const setting = model === undefined ? this.#global : this.settingFor(model);
    const { values } = setting;
    return {
      trace_level: levelNames(values.level),
      trace_rate: String(values.rate),
      trace_count: String(setting.count),
      log_frequency: String(values.logFrequency),
      trace_file: values.file,
      trace_mode: this.mode,
    };
  }

  /**
   * Changes the global settings or a model's: only the settings named change, `null` clears
   * one (back to the global value, or to the server's start value for the global settings).
   *
   * @param model The model, or `undefined` for the global settings.
   * @param change The settings to change.
   * @returns The settings afterwards.
   * @throws {InferenceError} INVALID_ARG naming the setting: an unknown setting, a level other
   *   than `OFF`, `TIMESTAMPS` and `TENSORS`, a rate below 1, a count below -1, a file in a
   *   directory that does not exist, a different `trace_mode`, or settings that trace in mode
   *   `triton` with no file. Nothing changes then.
   */
  update(model: string | undefined, change: TraceSettingsChange): TraceSettingsWire {
    const given = parseChange(change, this.mode);
    const current = model === undefined ? this.#global : this.#models.get(model);
    const fallback = model === undefined ? this.#default : this.#global;
    const values: Values = { ...fallback.values };
    const specified = new Set<Field>();
    for (const field of ["level", "rate", "count", "logFrequency", "file"] as const) {
      const update = given.get(field);
      if (update === null) continue;
      if (update !== undefined) {
        (values as unknown as Record<Field, number | string>)[field] = update;
        specified.add(field);
      } else if (current?.specified.has(field)) {
        (values as unknown as Record<Field, number | string>)[field] = field === "count"
          ? current.count
          : current.values[field];
        specified.add(field);
      }
    }
    if (values.level !== 0 && this.mode === "triton" && values.file === "") {
      throw InferenceError.invalidArg(
        "Invalid trace settings: trace_level is on in trace mode triton but trace_file is empty",
      );
    }
    const next = this.#make(values, specified);
    if (model === undefined) {
      this.#global.flush();
      this.#global = next;
    } else {
      current?.flush();
      if (specified.size === 0) this.#models.delete(model);
      else this.#models.set(model, next);
    }
    return this.get(model);
  }

  /** Writes every trace still kept and closes the trace files (the server stops). */
  close(): void {
    this.#global.flush();
    for (const setting of this.#models.values()) setting.flush();
    for (const file of this.#files.values()) file.close();
    this.#files.clear();
  }

  #make(values: Values, specified: ReadonlySet<Field>): TraceSetting {
    let file: TraceFile | undefined;
    if (this.mode === "triton" && values.file !== "") {
      file = this.#files.get(values.file);
      if (file === undefined) {
        file = new TraceFile(values.file);
        this.#files.set(values.file, file);
      }
    }
    return new TraceSetting(values, specified, { mode: this.mode, file });
  }
}

function invalid(message: string): InferenceError {
  return InferenceError.invalidArg(message);
}

function one(name: string, values: readonly string[]): string {
  if (values.length !== 1) {
    throw invalid(`Invalid ${name}: expected one value, got ${values.length}`);
  }
  return values[0]!;
}

function integerIn(name: string, text: string, min: number, max: number, expected: string): number {
  if (!/^-?\d+$/.test(text) || Number(text) < min || Number(text) > max) {
    throw invalid(`Invalid ${name} '${text}': expected ${expected}`);
  }
  return Number(text);
}

function parseChange(
  change: TraceSettingsChange,
  mode: TraceMode,
): Map<Field, number | string | null> {
  const fields = new Map<Field, number | string | null>();
  for (const [name, values] of Object.entries(change)) {
    if (!(TRACE_SETTING_NAMES as readonly string[]).includes(name)) {
      throw invalid(
        `Unknown trace setting '${name}': expected one of ${TRACE_SETTING_NAMES.join(", ")}`,
      );
    }
    if (name === "trace_mode") {
      if (values !== null && one(name, values) !== mode) {
        throw invalid(
          `Invalid trace_mode '${
            values[0]
          }': the trace mode is set when the server starts (traceConfig mode=...), and it is '${mode}'`,
        );
      }
      continue;
    }
    if (values === null) {
      fields.set(FIELD_OF[name]!, null);
      continue;
    }
    if (name === "trace_level") {
      if (values.length === 0) throw invalid("Invalid trace_level: expected at least one level");
      let bits = 0;
      for (const level of values) {
        if (level === "OFF") {
          if (values.length > 1) {
            throw invalid("Invalid trace_level: OFF cannot be combined with other levels");
          }
        } else if (level === "TIMESTAMPS") bits |= TRACE_LEVEL_TIMESTAMPS;
        else if (level === "TENSORS") bits |= TRACE_LEVEL_TENSORS;
        else throw invalid(`Invalid trace_level '${level}': expected OFF, TIMESTAMPS or TENSORS`);
      }
      fields.set("level", bits);
    } else if (name === "trace_rate") {
      const text = one(name, values);
      fields.set(
        "rate",
        integerIn(name, text, 1, UINT32_MAX, `an integer from 1 to ${UINT32_MAX}`),
      );
    } else if (name === "trace_count") {
      const text = one(name, values);
      fields.set(
        "count",
        integerIn(name, text, -1, INT32_MAX, `-1 or an integer from 0 to ${INT32_MAX}`),
      );
    } else if (name === "log_frequency") {
      const text = one(name, values);
      fields.set(
        "logFrequency",
        integerIn(name, text, 0, UINT32_MAX, `an integer from 0 to ${UINT32_MAX}`),
      );
    } else {
      const text = one(name, values);
      fields.set("file", text === "" ? "" : checkTraceFile(text));
    }
  }
  return fields;
}

const FIELD_OF: Readonly<Record<string, Field>> = {
  trace_level: "level",
  trace_rate: "rate",
  trace_count: "count",
  log_frequency: "logFrequency",
  trace_file: "file",
};

/**
 * Resolves a trace file path, refusing one whose directory does not exist or is not a
 * directory.
 *
 * @param path The path.
 * @returns The absolute path.
 * @throws {InferenceError} INVALID_ARG naming `trace_file`.
 */
export function checkTraceFile(path: string): string {
  const absolute = resolve(path);
  const directory = dirname(absolute);
  let isDirectory = false;
  try {
    isDirectory = Deno.statSync(directory).isDirectory;
  } catch (error) {
    if (!(error instanceof Deno.errors.NotFound)) throw error;
  }
  if (!isDirectory) {
    throw invalid(`Invalid trace_file '${path}': directory '${directory}' does not exist`);
  }
  return absolute;
}
