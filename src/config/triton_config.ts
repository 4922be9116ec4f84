/**
 * The server configuration: addresses, ports, endpoints, logging, limits and Triton's cache,
 * metrics and trace settings. Mirrors PyTriton's `TritonConfig` with camelCase names.
 *
 * {@linkcode resolveTritonConfig} merges five sources field by field, highest first: the `config`
 * argument, `DENOTRITON_TRITON_CONFIG_<FIELD>` environment variables, PyTriton's
 * `PYTRITON_TRITON_CONFIG_<FIELD>` ones, a YAML file (named by the `configFile` option or
 * `DENOTRITON_CONFIG_FILE`), and the defaults. Every source is validated with zod; an error names
 * the field and the source (the schema is in `triton_config_schema.ts`).
 * {@linkcode TRITON_CONFIG_FIELD_USES} says which part of the server reads each field, or why a
 * field accepts only its default.
 *
 * The fields themselves, each documented, are in `triton_config_fields.ts`.
 *
 * @module
 */

import { TritonValidationError } from "../errors.ts";
import type { ResolvedTritonConfig, TritonConfig } from "./triton_config_fields.ts";
import {
  envNameOf,
  PYTRITON_CONFIG_ENV_PREFIX,
  PYTRITON_ENV_ALIASES,
  readTritonConfigEnv,
  TRITON_CONFIG_ENV_PREFIX,
  TRITON_CONFIG_FILE_ENV,
} from "./triton_config_env.ts";
import { localCacheSize } from "./cache_config.ts";
import { readTritonConfigFile } from "./triton_config_file.ts";
import {
  DEFAULTS,
  ENV_KINDS,
  FIELD_NAMES,
  type FieldName,
  type Layer,
  show,
  validate,
} from "./triton_config_schema.ts";

/** The parts of the server that act on {@linkcode TritonConfig} fields. */
export type TritonConfigConsumer = "facade" | "logger" | "engine" | "http" | "grpc" | "metrics";

/** What happens to one {@linkcode TritonConfig} field. */
export type TritonConfigFieldUse =
  | {
    /** The parts of the server that read the field. */
    readonly consumers: readonly TritonConfigConsumer[];
  }
  | {
    /** The one value accepted (the default); any other is refused. */
    readonly accepts: unknown;
    /** Why other values are refused, completing "<field> is not supported: ...". */
    readonly refused: string;
  };

/**
 * Every {@linkcode TritonConfig} field and what happens to it: the parts of the server that
 * read it, or the one value accepted and why any other is refused. A test checks that this
 * table names every field of the schema and that each consumer really reads its fields.
 *
 * @example Read and refused fields
 * ```ts
 * import { TRITON_CONFIG_FIELD_USES } from "./triton_config.ts";
 * import assert from "node:assert/strict";
 *
 * assert.deepEqual(TRITON_CONFIG_FIELD_USES.grpcUseSsl, { consumers: ["grpc"] });
 * assert.deepEqual(TRITON_CONFIG_FIELD_USES.grpcKeepalivePermitWithoutCalls, {
 *   accepts: true,
 *   refused: "the gRPC front end sends keepalive pings on idle connections too",
 * });
 * ```
 */
export const TRITON_CONFIG_FIELD_USES: Readonly<Record<keyof TritonConfig, TritonConfigFieldUse>> =
  {
    id: { consumers: ["logger", "engine"] },
    modelRepository: {
      accepts: undefined,
      refused:
        "models come from triton.bind(), and the Triton engine keeps their configs in a temporary repository",
    },
    httpAddress: { consumers: ["http"] },
    httpPort: { consumers: ["http"] },
    grpcAddress: { consumers: ["grpc"] },
    grpcPort: { consumers: ["grpc"] },
    metricsAddress: { consumers: ["metrics"] },
    metricsPort: { consumers: ["metrics"] },
    allowHttp: { consumers: ["facade"] },
    allowGrpc: { consumers: ["facade"] },
    allowMetrics: { consumers: ["facade", "engine"] },
    allowCpuMetrics: { consumers: ["engine"] },
    allowGpuMetrics: { consumers: ["engine"] },
    metricsIntervalMs: { consumers: ["engine"] },
    metricsConfig: { consumers: ["engine"] },
    logVerbose: { consumers: ["logger", "engine"] },
    logFile: { consumers: ["logger", "engine"] },
    logFormat: { consumers: ["logger"] },
    exitTimeoutSecs: { consumers: ["engine"] },
    exitOnError: { consumers: ["facade", "engine"] },
    strictReadiness: { consumers: ["engine"] },
    httpHeaderForwardPattern: { consumers: ["http"] },
    grpcHeaderForwardPattern: { consumers: ["grpc"] },
    pinnedMemoryPoolByteSize: { consumers: ["engine"] },
    responseCacheByteSize: { consumers: ["engine"] },
    cacheConfig: { consumers: ["facade", "engine"] },
    traceConfig: { consumers: ["facade"] },
    maxRequestBytes: { consumers: ["http"] },
    httpThreadCount: { consumers: ["http"] },
    httpCorsOrigins: { consumers: ["http"] },
    httpCorsAllowCredentials: { consumers: ["http"] },
    httpCorsMaxAge: { consumers: ["http"] },
    httpDocs: { consumers: ["http"] },
    grpcMaxMessageBytes: { consumers: ["grpc"] },
    grpcInferResponseCompressionLevel: {
      accepts: "none",
      refused: "the gRPC front end does not compress responses",
    },
    grpcKeepaliveTime: { consumers: ["grpc"] },
    grpcKeepaliveTimeout: { consumers: ["grpc"] },
    grpcKeepalivePermitWithoutCalls: {
      accepts: true,
      refused: "the gRPC front end sends keepalive pings on idle connections too",
    },
    grpcUseSsl: { consumers: ["grpc"] },
    grpcUseSslMutual: { consumers: ["grpc"] },
    grpcServerCert: { consumers: ["grpc"] },
    grpcServerKey: { consumers: ["grpc"] },
    grpcRootCert: { consumers: ["grpc"] },
  };

/** Options of {@linkcode resolveTritonConfig}. */
export interface ResolveTritonConfigOptions {
  /**
   * Field values that take precedence over every other source.
   *
   * @default {{}}
   */
  config?: TritonConfig;
  /**
   * A YAML file of fields (camelCase or snake_case keys), the lowest source above the defaults.
   * Unset reads the path from `DENOTRITON_CONFIG_FILE`, if any.
   *
   * @default {undefined}
   */
  configFile?: string;
  /**
   * The environment to read `DENOTRITON_TRITON_CONFIG_*` and `DENOTRITON_CONFIG_FILE` from.
   * Unset reads the process environment as far as env permission allows, without prompting.
   *
   * @default {undefined}
   */
  env?: Readonly<Record<string, string>>;
  /**
   * Receives each warning, one line each: a `PYTRITON_TRITON_CONFIG_*` variable that names no
   * field of DenoTriton and is ignored.
   *
   * @default {console.warn}
   */
  onWarning?: (message: string) => void;
}

/**
 * Resolves the server configuration from the `config` argument, the environment, a YAML file
 * and the defaults (in that order of precedence, field by field).
 *
 * Environment variables are `DENOTRITON_TRITON_CONFIG_` + the field in upper snake case, e.g.
 * `DENOTRITON_TRITON_CONFIG_HTTP_PORT=9000`. Booleans take `true/false/1/0/yes/no/on/off` (any
 * case); integers must be plain decimal. A list takes one comma-separated variable
 * (`DENOTRITON_TRITON_CONFIG_CACHE_CONFIG=local,size=1048576`) or indexed variables
 * (`..._CACHE_CONFIG_0`, `..._CACHE_CONFIG_1`; they win over the plain one). PyTriton's
 * `PYTRITON_TRITON_CONFIG_<FIELD>` variables are read the same way as aliases, below the
 * `DENOTRITON_` ones (and PyTriton's documented `PYTRITON_TRITON_CONFIG_LOG_VERBOSITY` as
 * `logVerbose`); one naming a field DenoTriton lacks is a warning and is ignored, as PyTriton
 * does, while an unknown `DENOTRITON_` variable is an error.
 *
 * A field DenoTriton cannot honour (see {@linkcode TRITON_CONFIG_FIELD_USES}) accepts only its
 * default; another value is an error saying so.
 *
 * When both `responseCacheByteSize` and a `local,size=` entry of `cacheConfig` are set and
 * disagree, the one from the higher source wins; from the same source they are an error.
 *
 * @param options The `config` argument, the YAML file and the environment.
 * @returns A frozen configuration with every field set.
 * @throws {TritonValidationError} A source holds an unknown field or a bad value (the message
 * names both the field and the source), or the merged fields contradict each other.
 *
 * @example Precedence, field by field
 * ```ts
 * import { resolveTritonConfig } from "./triton_config.ts";
 * import assert from "node:assert/strict";
 *
 * const config = resolveTritonConfig({
 *   config: { httpPort: 9000 },
 *   env: { DENOTRITON_TRITON_CONFIG_HTTP_PORT: "9100", DENOTRITON_TRITON_CONFIG_GRPC_PORT: "9101" },
 * });
 * assert.equal(config.httpPort, 9000);
 * assert.equal(config.grpcPort, 9101);
 * assert.equal(config.metricsPort, 8002);
 * assert.equal(config.metricsAddress, "0.0.0.0");
 * ```
 *
 * @example Errors name the field and the source
 * ```ts
 * import { resolveTritonConfig } from "./triton_config.ts";
 * import assert from "node:assert/strict";
 *
 * assert.throws(
 *   () => resolveTritonConfig({ env: { DENOTRITON_TRITON_CONFIG_HTTP_PORT: "abc" } }),
 *   {
 *     name: "TritonValidationError",
 *     message: 'Invalid TritonConfig from environment variable DENOTRITON_TRITON_CONFIG_HTTP_PORT: httpPort must be an integer between 0 and 65535, got "abc"',
 *   },
 * );
 * ```
 *
 * @example A PyTriton deployment's environment: what DenoTriton lacks is a warning
 * ```ts
 * import { resolveTritonConfig } from "./triton_config.ts";
 * import assert from "node:assert/strict";
 *
 * const warnings: string[] = [];
 * const config = resolveTritonConfig({
 *   env: {
 *     PYTRITON_TRITON_CONFIG_HTTP_PORT: "9000",
 *     PYTRITON_TRITON_CONFIG_CACHE_DIRECTORY: "/opt/tritonserver/caches",
 *   },
 *   onWarning: (message) => warnings.push(message),
 * });
 * assert.equal(config.httpPort, 9000);
 * assert.deepEqual(warnings, [
 *   "Ignoring environment variable PYTRITON_TRITON_CONFIG_CACHE_DIRECTORY: DenoTriton has no such field (PyTriton, too, ignores the names it does not know)",
 * ]);
 * ```
 */
export function resolveTritonConfig(
  options: ResolveTritonConfigOptions = {},
): ResolvedTritonConfig {
  const env = options.env ?? readProcessEnv();
  const layers: Layer[] = [];
  const file = options.configFile ?? env[TRITON_CONFIG_FILE_ENV];
  if (file !== undefined && file !== "") {
    layers.push({ rank: 1, values: readTritonConfigFile(file), sourceOf: () => file });
  }
  const onWarning = options.onWarning ?? ((message: string) => console.warn(message));
  layers.push(envLayer(env, PYTRITON_CONFIG_ENV_PREFIX, 2, onWarning));
  layers.push(envLayer(env, TRITON_CONFIG_ENV_PREFIX, 3, onWarning));
  if (options.config !== undefined) {
    layers.push({
      rank: 4,
      values: withoutUndefined(options.config),
      sourceOf: () => "the config argument",
    });
  }

  const merged = new Map<FieldName, { value: unknown; layer: Layer }>();
  for (const layer of layers) {
    const values = validate(layer);
    for (const name of FIELD_NAMES) {
      if (values[name] !== undefined) merged.set(name, { value: values[name], layer });
    }
  }
  const get = <K extends FieldName>(name: K): TritonConfig[K] | undefined =>
    merged.get(name)?.value as TritonConfig[K] | undefined;
  const sourceOf = (name: FieldName): string => merged.get(name)?.layer.sourceOf(name) ?? "";

  if (get("allowHttp") === false && get("allowGrpc") === false) {
    throw new TritonValidationError(
      `Invalid TritonConfig: allowHttp (from ${sourceOf("allowHttp")}) and allowGrpc (from ${
        sourceOf("allowGrpc")
      }) are both false: at least one of HTTP and gRPC must stay on`,
    );
  }
  const tls = get("grpcUseSslMutual") === true
    ? "grpcUseSslMutual"
    : get("grpcUseSsl") === true
    ? "grpcUseSsl"
    : undefined;
  if (tls !== undefined) {
    const needed: FieldName[] = ["grpcServerCert", "grpcServerKey"];
    if (tls === "grpcUseSslMutual") needed.push("grpcRootCert");
    const missing = needed.filter((name) => get(name) === undefined);
    if (missing.length > 0) {
      throw new TritonValidationError(
        `Invalid TritonConfig: ${tls} (from ${sourceOf(tls)}) needs ${missing.join(" and ")}`,
      );
    }
  }

  if (
    get("httpCorsAllowCredentials") === true && (get("httpCorsOrigins") ?? []).includes("*")
  ) {
    throw new TritonValidationError(
      `Invalid TritonConfig: httpCorsAllowCredentials (from ${
        sourceOf("httpCorsAllowCredentials")
      }) needs exact origins in httpCorsOrigins (from ${
        sourceOf("httpCorsOrigins")
      }), not "*": browsers refuse credentialed answers to "*"`,
    );
  }

  for (const name of FIELD_NAMES) {
    const use: TritonConfigFieldUse = TRITON_CONFIG_FIELD_USES[name];
    const entry = merged.get(name);
    if (!("refused" in use) || entry === undefined) continue;
    if (JSON.stringify(entry.value) === JSON.stringify(use.accepts)) continue;
    throw new TritonValidationError(
      `Invalid TritonConfig from ${sourceOf(name)}: ${name} is not supported: ${use.refused} (got ${
        show(entry.value)
      })`,
    );
  }

  const cache = resolveCache(merged);
  const resolved: ResolvedTritonConfig = {
    ...DEFAULTS,
    ...Object.fromEntries([...merged].map(([name, { value }]) => [name, value])),
    metricsAddress: get("metricsAddress") ?? get("httpAddress") ?? DEFAULTS.httpAddress,
    metricsConfig: Object.freeze([...(get("metricsConfig") ?? [])]),
    traceConfig: Object.freeze([...(get("traceConfig") ?? [])]),
    httpCorsOrigins: Object.freeze([...(get("httpCorsOrigins") ?? [])]),
    cacheConfig: Object.freeze(cache.cacheConfig),
    responseCacheByteSize: cache.responseCacheByteSize,
  };
  return Object.freeze(resolved);
}

function envLayer(
  env: Readonly<Record<string, string>>,
  prefix: string,
  rank: number,
  onWarning: (message: string) => void,
): Layer {
  const { values, variables, ignored } = readTritonConfigEnv(env, ENV_KINDS, prefix);
  for (const message of ignored) onWarning(message);
  return {
    rank,
    env: true,
    values,
    sourceOf(name: string, index?: number): string {
      const variable = variables[name];
      if (typeof variable === "string") return `environment variable ${variable}`;
      if (variable === undefined) return "the environment";
      const one = index === undefined ? undefined : variable[index];
      return one === undefined
        ? `environment variables ${variable.join(", ")}`
        : `environment variable ${one}`;
    },
  };
}

function withoutUndefined(config: TritonConfig): Record<string, unknown> {
  if (typeof config !== "object" || config === null || Array.isArray(config)) {
    throw new TritonValidationError(
      `Invalid TritonConfig from the config argument: expected an object, got ${show(config)}`,
    );
  }
  return Object.fromEntries(Object.entries(config).filter(([, value]) => value !== undefined));
}

function resolveCache(
  merged: ReadonlyMap<FieldName, { value: unknown; layer: Layer }>,
): { responseCacheByteSize: number; cacheConfig: string[] } {
  const cacheEntry = merged.get("cacheConfig");
  const cacheConfig = [...(cacheEntry?.value as readonly string[] | undefined ?? [])];
  let localSize: number | undefined;
  for (const entry of cacheConfig) {
    localSize = localCacheSize(entry) ?? localSize; // Triton lets the last setting win.
  }
  const sizeEntry = merged.get("responseCacheByteSize");
  const explicit = sizeEntry?.value as number | undefined;
  if (explicit === undefined || explicit === localSize) {
    return { responseCacheByteSize: localSize ?? 0, cacheConfig };
  }
  if (localSize !== undefined && cacheEntry !== undefined && sizeEntry !== undefined) {
    if (cacheEntry.layer.rank === sizeEntry.layer.rank) {
      throw new TritonValidationError(
        `Invalid TritonConfig from ${
          sizeEntry.layer.sourceOf("responseCacheByteSize")
        }: responseCacheByteSize ${explicit} disagrees with cacheConfig size ${localSize}`,
      );
    }
    if (cacheEntry.layer.rank > sizeEntry.layer.rank) {
      return { responseCacheByteSize: localSize, cacheConfig };
    }
  }
  const others = cacheConfig.filter((entry) => localCacheSize(entry) === undefined);
  if (explicit > 0) others.push(`local,size=${explicit}`);
  return { responseCacheByteSize: explicit, cacheConfig: others };
}

/** Reads the process environment without prompting: all of it, or the variables granted. */
function readProcessEnv(): Record<string, string> {
  try {
    if (Deno.permissions.querySync({ name: "env" }).state === "granted") {
      return Deno.env.toObject();
    }
    // Partial grants (--allow-env=NAME,...) cannot be listed, so try each known name.
    const env: Record<string, string> = {};
    const names = [TRITON_CONFIG_FILE_ENV];
    for (const prefix of [TRITON_CONFIG_ENV_PREFIX, PYTRITON_CONFIG_ENV_PREFIX]) {
      names.push(...FIELD_NAMES.map((name) => envNameOf(name, prefix)));
    }
    names.push(...Object.keys(PYTRITON_ENV_ALIASES));
    for (const name of names) {
      if (Deno.permissions.querySync({ name: "env", variable: name }).state !== "granted") {
        continue;
      }
      const value = Deno.env.get(name);
      if (value !== undefined) env[name] = value;
    }
    return env;
  } catch (error) {
    if (error instanceof Deno.errors.NotCapable || error instanceof Deno.errors.PermissionDenied) {
      return {};
    }
    throw error;
  }
}
