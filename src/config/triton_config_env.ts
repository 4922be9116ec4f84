/**
 * Reads `TritonConfig` fields from `DENOTRITON_TRITON_CONFIG_<FIELD>` environment variables, and
 * from PyTriton's `PYTRITON_TRITON_CONFIG_<FIELD>` ones, which DenoTriton takes as aliases. An
 * unknown `DENOTRITON_` name is an error; an unknown `PYTRITON_` name is set aside to be warned
 * about and ignored, as PyTriton does, so a PyTriton deployment's environment serves as it is.
 *
 * Values are converted by field kind (booleans, strict integers, setting lists) but not
 * range-checked here: a value that cannot be converted stays a string, so the caller's schema
 * rejects it with a message naming the field, the variable and the value.
 *
 * @module
 */

import { TritonValidationError } from "../errors.ts";

/** Prefix of the environment variables holding `TritonConfig` fields. */
export const TRITON_CONFIG_ENV_PREFIX = "DENOTRITON_TRITON_CONFIG_";

/**
 * Prefix of PyTriton's environment variables for the same fields (`PYTRITON_TRITON_CONFIG_HTTP_PORT`),
 * read as aliases of the `DENOTRITON_TRITON_CONFIG_` ones.
 */
export const PYTRITON_CONFIG_ENV_PREFIX = "PYTRITON_TRITON_CONFIG_";

/**
 * Names PyTriton's documentation gives that are not `TritonConfig` field names, read as the field
 * they mean: PyTriton documents `PYTRITON_TRITON_CONFIG_LOG_VERBOSITY`, while its code reads
 * `..._LOG_VERBOSE` (and ignores the documented name with a warning). The field's own name wins
 * when both are set.
 */
export const PYTRITON_ENV_ALIASES: Readonly<Record<string, string>> = {
  [`${PYTRITON_CONFIG_ENV_PREFIX}LOG_VERBOSITY`]: "logVerbose",
};

/** The environment variable naming a YAML `TritonConfig` file. */
export const TRITON_CONFIG_FILE_ENV = "DENOTRITON_CONFIG_FILE";

/**
 * How a field's environment value is converted: `settings` are lists of Triton setting strings
 * such as `local,size=1048576`.
 */
export type EnvFieldKind = "string" | "integer" | "boolean" | "settings";

/** The fields read from the environment, with the variables they came from. */
export interface TritonConfigEnv {
  /** Converted values by field name (values that could not be converted stay strings). */
  readonly values: Readonly<Record<string, unknown>>;
  /**
   * The variable of each field; for a list given as indexed variables, one variable per list
   * element, in list order.
   */
  readonly variables: Readonly<Record<string, string | readonly string[]>>;
  /**
   * What was not read, one line per variable, for the caller to warn about: `PYTRITON_` names
   * that name no field of DenoTriton (with {@linkcode PYTRITON_CONFIG_ENV_PREFIX} only; any other
   * prefix refuses them), and an alias given beside its field's own name.
   */
  readonly ignored: readonly string[];
}

const TRUE_WORDS = new Set(["true", "1", "yes", "on"]);
const FALSE_WORDS = new Set(["false", "0", "no", "off"]);
const INTEGER = /^[+-]?\d+$/;
const INDEXED = /^(.+)_(\d+)$/;

/**
 * The environment variable name of a `TritonConfig` field: `httpPort` →
 * `DENOTRITON_TRITON_CONFIG_HTTP_PORT`.
 *
 * @param field A camelCase field name.
 * @param prefix The prefix, {@linkcode TRITON_CONFIG_ENV_PREFIX} or
 *   {@linkcode PYTRITON_CONFIG_ENV_PREFIX}.
 * @returns The variable name.
 *
 * @example DenoTriton's and PyTriton's variable names
 * ```ts
 * import { envNameOf, PYTRITON_CONFIG_ENV_PREFIX } from "./triton_config_env.ts";
 * import assert from "node:assert/strict";
 *
 * assert.equal(envNameOf("grpcMaxMessageBytes"), "DENOTRITON_TRITON_CONFIG_GRPC_MAX_MESSAGE_BYTES");
 * assert.equal(envNameOf("httpPort", PYTRITON_CONFIG_ENV_PREFIX), "PYTRITON_TRITON_CONFIG_HTTP_PORT");
 * ```
 */
export function envNameOf(field: string, prefix: string = TRITON_CONFIG_ENV_PREFIX): string {
  return prefix + field.replace(/[A-Z]/g, (c) => `_${c}`).toUpperCase();
}

/**
 * Converts a boolean environment value: `true/false/1/0/yes/no/on/off`, any case.
 *
 * @param text The variable's value.
 * @returns The boolean, or `text` unchanged when it is none of those words.
 *
 * @example Words and digits in any case, and a value left as text
 * ```ts
 * import { parseEnvBoolean } from "./triton_config_env.ts";
 * import assert from "node:assert/strict";
 *
 * assert.equal(parseEnvBoolean("OFF"), false);
 * assert.equal(parseEnvBoolean("0"), false);
 * assert.equal(parseEnvBoolean("Yes"), true);
 * assert.equal(parseEnvBoolean("maybe"), "maybe");
 * ```
 */
export function parseEnvBoolean(text: string): boolean | string {
  const word = text.trim().toLowerCase();
  if (TRUE_WORDS.has(word)) return true;
  if (FALSE_WORDS.has(word)) return false;
  return text;
}

/**
 * Converts an integer environment value strictly: optional sign and decimal digits only.
 *
 * @param text The variable's value.
 * @returns The number, or `text` unchanged when it is not an integer literal.
 *
 * @example A padded port, and a fraction and exponent left as text
 * ```ts
 * import { parseEnvInteger } from "./triton_config_env.ts";
 * import assert from "node:assert/strict";
 *
 * assert.equal(parseEnvInteger(" 8000 "), 8000);
 * assert.equal(parseEnvInteger("8000.5"), "8000.5");
 * assert.equal(parseEnvInteger("1e3"), "1e3");
 * ```
 */
export function parseEnvInteger(text: string): number | string {
  const trimmed = text.trim();
  return INTEGER.test(trimmed) ? Number(trimmed) : text;
}

/**
 * Splits a comma-separated list of Triton settings. Triton writes one setting per entry as
 * `<group>,<setting>=<value>` (or `<setting>=<value>`), so a part without `=` is the group of
 * the part after it: `local,size=1,redis,host=h` → `["local,size=1", "redis,host=h"]`. Values
 * that contain commas need the indexed variables instead.
 *
 * @param text The variable's value.
 * @returns The entries; an empty or blank value gives an empty list.
 *
 * @example One setting with a comma, two settings, and none
 * ```ts
 * import { splitEnvSettings } from "./triton_config_env.ts";
 * import assert from "node:assert/strict";
 *
 * assert.deepEqual(splitEnvSettings("local,size=1048576"), ["local,size=1048576"]);
 * assert.deepEqual(splitEnvSettings("rate=1, level=TIMESTAMPS"), ["rate=1", "level=TIMESTAMPS"]);
 * assert.deepEqual(splitEnvSettings(""), []);
 * ```
 */
export function splitEnvSettings(text: string): string[] {
  if (text.trim() === "") return [];
  const parts = text.split(",").map((part) => part.trim());
  const entries: string[] = [];
  for (let i = 0; i < parts.length; i++) {
    const part = parts[i]!;
    const next = parts[i + 1];
    if (!part.includes("=") && next !== undefined && next.includes("=")) {
      entries.push(`${part},${next}`);
      i++;
    } else {
      entries.push(part);
    }
  }
  return entries;
}

/**
 * Reads every `DENOTRITON_TRITON_CONFIG_*` variable of `env` (or every variable with another
 * prefix). A list field takes either one comma-separated variable or indexed variables
 * `<NAME>_0`, `<NAME>_1`, ... (ordered by index, gaps dropped); when both are given, the indexed
 * ones win.
 *
 * @param env The environment, e.g. `Deno.env.toObject()`.
 * @param fields The kind of every known field, by camelCase name.
 * @param prefix The variables' prefix; with {@linkcode PYTRITON_CONFIG_ENV_PREFIX}, a variable
 *   naming a field DenoTriton lacks is set aside in `ignored` (PyTriton warns and goes on), and
 *   the names of {@linkcode PYTRITON_ENV_ALIASES} are read as their fields.
 * @returns The converted values, the variable of each field and what was ignored.
 * @throws {TritonValidationError} A variable names no field (any prefix but PyTriton's), or gives
 *   one list index twice.
 *
 * @example Read a port and a list
 * ```ts
 * import { readTritonConfigEnv } from "./triton_config_env.ts";
 * import assert from "node:assert/strict";
 *
 * const { values } = readTritonConfigEnv(
 *   {
 *     DENOTRITON_TRITON_CONFIG_HTTP_PORT: "9000",
 *     DENOTRITON_TRITON_CONFIG_CACHE_CONFIG_1: "redis,host=h",
 *     DENOTRITON_TRITON_CONFIG_CACHE_CONFIG_0: "local,size=64",
 *     HOME: "/root",
 *   },
 *   { httpPort: "integer", cacheConfig: "settings" },
 * );
 * assert.deepEqual(values, { httpPort: 9000, cacheConfig: ["local,size=64", "redis,host=h"] });
 * ```
 *
 * @example PyTriton's names: an alias read, a name DenoTriton lacks set aside
 * ```ts
 * import { PYTRITON_CONFIG_ENV_PREFIX, readTritonConfigEnv } from "./triton_config_env.ts";
 * import assert from "node:assert/strict";
 *
 * const { values, ignored } = readTritonConfigEnv(
 *   {
 *     PYTRITON_TRITON_CONFIG_LOG_VERBOSITY: "2",
 *     PYTRITON_TRITON_CONFIG_ALLOW_VERTEX_AI: "true",
 *   },
 *   { logVerbose: "integer" },
 *   PYTRITON_CONFIG_ENV_PREFIX,
 * );
 * assert.deepEqual(values, { logVerbose: 2 });
 * assert.deepEqual(ignored, [
 *   "Ignoring environment variable PYTRITON_TRITON_CONFIG_ALLOW_VERTEX_AI: DenoTriton has no such field (PyTriton, too, ignores the names it does not know)",
 * ]);
 * ```
 */
export function readTritonConfigEnv(
  env: Readonly<Record<string, string>>,
  fields: Readonly<Record<string, EnvFieldKind>>,
  prefix: string = TRITON_CONFIG_ENV_PREFIX,
): TritonConfigEnv {
  const byVariable = new Map<string, string>();
  for (const field of Object.keys(fields)) byVariable.set(envNameOf(field, prefix), field);
  const pytriton = prefix === PYTRITON_CONFIG_ENV_PREFIX;

  const values: Record<string, unknown> = {};
  const variables: Record<string, string | readonly string[]> = {};
  const indexed = new Map<string, Map<number, [string, string]>>();
  const ignored: string[] = [];
  const aliased: [string, string, string][] = [];

  for (const [name, text] of Object.entries(env)) {
    if (!name.startsWith(prefix)) continue;
    const field = byVariable.get(name);
    if (field !== undefined) {
      values[field] = convert(text, fields[field]!);
      variables[field] = name;
      continue;
    }
    const alias = pytriton ? PYTRITON_ENV_ALIASES[name] : undefined;
    if (alias !== undefined && fields[alias] !== undefined) {
      aliased.push([name, alias, text]);
      continue;
    }
    const match = INDEXED.exec(name);
    const base = match ? byVariable.get(match[1]!) : undefined;
    if ((match === null || base === undefined) && pytriton) {
      ignored.push(
        `Ignoring environment variable ${name}: DenoTriton has no such field (PyTriton, too, ignores the names it does not know)`,
      );
      continue;
    }
    if (match === null || base === undefined) {
      throw new TritonValidationError(
        `Invalid TritonConfig from environment variable ${name}: unknown field (names are ${prefix} followed by a field in upper snake case, e.g. ${
          envNameOf("httpPort", prefix)
        })`,
      );
    }
    if (fields[base] !== "settings") {
      throw new TritonValidationError(
        `Invalid TritonConfig from environment variable ${name}: ${base} is not a list, so it takes no index`,
      );
    }
    const index = Number(match[2]);
    let entries = indexed.get(base);
    if (entries === undefined) indexed.set(base, entries = new Map());
    const previous = entries.get(index);
    if (previous !== undefined) {
      throw new TritonValidationError(
        `Invalid TritonConfig from environment variable ${name}: index ${index} of ${base} is given twice (also by ${
          previous[0]
        })`,
      );
    }
    entries.set(index, [name, text]);
  }

  // After the fields' own names, which win.
  for (const [name, field, text] of aliased) {
    const own = variables[field];
    if (own !== undefined) {
      ignored.push(`Ignoring environment variable ${name}: ${own} sets ${field} already`);
      continue;
    }
    values[field] = convert(text, fields[field]!);
    variables[field] = name;
  }
  // Applied last, so indexed variables replace the comma-separated form of the same list.
  for (const [field, entries] of indexed) {
    const ordered = [...entries].sort(([a], [b]) => a - b).map(([, entry]) => entry);
    values[field] = ordered.map(([, text]) => text);
    variables[field] = ordered.map(([name]) => name);
  }
  return { values, variables, ignored };
}

function convert(text: string, kind: EnvFieldKind): unknown {
  switch (kind) {
    case "string":
      return text;
    case "integer":
      return parseEnvInteger(text);
    case "boolean":
      return parseEnvBoolean(text);
    case "settings":
      return splitEnvSettings(text);
  }
}
