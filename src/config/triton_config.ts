/**
 * The server configuration: addresses, ports, endpoints, logging, limits and Triton's cache,
 * metrics and trace settings. Mirrors PyTriton's `TritonConfig` with camelCase names.
 *
 * {@linkcode resolveTritonConfig} merges four sources field by field, highest first: the `config`
 * argument, `DENOTRITON_TRITON_CONFIG_<FIELD>` environment variables, a YAML file (named by the
 * `configFile` option or `DENOTRITON_CONFIG_FILE`), and the defaults. Every source is validated
 * with zod; an error names the field and the source.
 *
 * @module
 */

import { z } from "zod";
import { TritonValidationError } from "../errors.ts";
import {
  type EnvFieldKind,
  envNameOf,
  readTritonConfigEnv,
  TRITON_CONFIG_FILE_ENV,
} from "./triton_config_env.ts";
import { readTritonConfigFile } from "./triton_config_file.ts";

/** Compression level of gRPC inference responses. */
export type GrpcCompressionLevel = "none" | "low" | "medium" | "high";

/**
 * Server configuration. Every field is optional; {@linkcode resolveTritonConfig} fills in the
 * defaults.
 */
export interface TritonConfig {
  /**
   * Server identifier reported by the server metadata endpoint.
   *
   * @default {"triton"}
   */
  id?: string;
  /**
   * Directory of the model repository the native engine writes model configs to; unset lets
   * the engine use a temporary directory.
   *
   * @default {undefined}
   */
  modelRepository?: string;
  /**
   * Address the HTTP endpoint listens on.
   *
   * @default {"0.0.0.0"}
   */
  httpAddress?: string;
  /**
   * HTTP port; 0 picks a free port.
   *
   * @default {8000}
   */
  httpPort?: number;
  /**
   * Address the gRPC endpoint listens on.
   *
   * @default {"0.0.0.0"}
   */
  grpcAddress?: string;
  /**
   * gRPC port; 0 picks a free port.
   *
   * @default {8001}
   */
  grpcPort?: number;
  /**
   * Address the Prometheus metrics endpoint listens on; unset means `httpAddress`.
   *
   * @default {undefined}
   */
  metricsAddress?: string;
  /**
   * Metrics port; 0 picks a free port.
   *
   * @default {8002}
   */
  metricsPort?: number;
  /**
   * Serve the HTTP endpoint. `allowHttp` and `allowGrpc` cannot both be false.
   *
   * @default {true}
   */
  allowHttp?: boolean;
  /**
   * Serve the gRPC endpoint. `allowHttp` and `allowGrpc` cannot both be false.
   *
   * @default {true}
   */
  allowGrpc?: boolean;
  /**
   * Serve Prometheus metrics on the metrics port.
   *
   * @default {true}
   */
  allowMetrics?: boolean;
  /**
   * Report CPU metrics.
   *
   * @default {true}
   */
  allowCpuMetrics?: boolean;
  /**
   * Report GPU metrics (native engine).
   *
   * @default {true}
   */
  allowGpuMetrics?: boolean;
  /**
   * How often polled metrics (CPU, GPU) are refreshed, in milliseconds.
   *
   * @default {2000}
   */
  metricsIntervalMs?: number;
  /**
   * Triton metrics settings, each `<setting>=<value>` or `<group>,<setting>=<value>`, e.g.
   * `summary_latencies=true`.
   *
   * @default {[]}
   */
  metricsConfig?: readonly string[];
  /**
   * Log verbosity; 0 logs info, warnings and errors only.
   *
   * @default {0}
   */
  logVerbose?: number;
  /**
   * A file to append log lines to instead of stderr.
   *
   * @default {undefined}
   */
  logFile?: string;
  /**
   * Seconds in-flight requests get to finish when the server stops.
   *
   * @default {30}
   */
  exitTimeoutSecs?: number;
  /**
   * Fail start-up when a model fails to load.
   *
   * @default {true}
   */
  exitOnError?: boolean;
  /**
   * `/v2/health/ready` reports ready only when every model is ready.
   *
   * @default {true}
   */
  strictReadiness?: boolean;
  /**
   * HTTP headers whose names match this regular expression are forwarded into the request's
   * parameters.
   *
   * @default {undefined}
   */
  httpHeaderForwardPattern?: string;
  /**
   * gRPC metadata keys matching this regular expression are forwarded into the request's
   * parameters.
   *
   * @default {undefined}
   */
  grpcHeaderForwardPattern?: string;
  /**
   * Byte size of the local response cache; 0 turns it off. Unset takes the size from a
   * `local,size=<bytes>` entry of `cacheConfig`.
   *
   * @default {0}
   */
  responseCacheByteSize?: number;
  /**
   * Triton cache settings, each `<cache>,<setting>=<value>`, e.g. `local,size=1048576`.
   *
   * @default {[]}
   */
  cacheConfig?: readonly string[];
  /**
   * Triton trace settings, each `<setting>=<value>` or `<mode>,<setting>=<value>`, e.g.
   * `rate=1` or `opentelemetry,url=http://localhost:4318/v1/traces`.
   *
   * @default {[]}
   */
  traceConfig?: readonly string[];
  /**
   * Largest HTTP request body accepted, in bytes.
   *
   * @default {67108864}
   */
  maxRequestBytes?: number;
  /**
   * Largest gRPC message received or sent, in bytes.
   *
   * @default {67108864}
   */
  grpcMaxMessageBytes?: number;
  /**
   * Compression of gRPC inference responses.
   *
   * @default {"none"}
   */
  grpcInferResponseCompressionLevel?: GrpcCompressionLevel;
  /**
   * Interval of gRPC keepalive pings, in milliseconds.
   *
   * @default {7200000}
   */
  grpcKeepaliveTime?: number;
  /**
   * How long to wait for a keepalive ping's answer, in milliseconds.
   *
   * @default {20000}
   */
  grpcKeepaliveTimeout?: number;
  /**
   * Send keepalive pings on connections without calls.
   *
   * @default {false}
   */
  grpcKeepalivePermitWithoutCalls?: boolean;
  /**
   * Serve gRPC over TLS; needs `grpcServerCert` and `grpcServerKey`.
   *
   * @default {false}
   */
  grpcUseSsl?: boolean;
  /**
   * Serve gRPC over mutual TLS (clients present certificates); needs `grpcServerCert`,
   * `grpcServerKey` and `grpcRootCert`. Takes precedence over `grpcUseSsl`.
   *
   * @default {false}
   */
  grpcUseSslMutual?: boolean;
  /**
   * Path of the gRPC server's PEM certificate chain.
   *
   * @default {undefined}
   */
  grpcServerCert?: string;
  /**
   * Path of the gRPC server's PEM private key.
   *
   * @default {undefined}
   */
  grpcServerKey?: string;
  /**
   * Path of the PEM root certificates that client certificates are checked against.
   *
   * @default {undefined}
   */
  grpcRootCert?: string;
}

/** A {@linkcode TritonConfig} with every default applied. */
export interface ResolvedTritonConfig {
  /** Server identifier. */
  readonly id: string;
  /** Model repository directory of the native engine, if set. */
  readonly modelRepository: string | undefined;
  /** HTTP address. */
  readonly httpAddress: string;
  /** HTTP port (0: a free port). */
  readonly httpPort: number;
  /** gRPC address. */
  readonly grpcAddress: string;
  /** gRPC port (0: a free port). */
  readonly grpcPort: number;
  /** Metrics address (`httpAddress` unless set). */
  readonly metricsAddress: string;
  /** Metrics port (0: a free port). */
  readonly metricsPort: number;
  /** Serve HTTP. */
  readonly allowHttp: boolean;
  /** Serve gRPC. */
  readonly allowGrpc: boolean;
  /** Serve metrics. */
  readonly allowMetrics: boolean;
  /** Report CPU metrics. */
  readonly allowCpuMetrics: boolean;
  /** Report GPU metrics. */
  readonly allowGpuMetrics: boolean;
  /** Polled metrics refresh interval in milliseconds. */
  readonly metricsIntervalMs: number;
  /** Triton metrics settings. */
  readonly metricsConfig: readonly string[];
  /** Log verbosity. */
  readonly logVerbose: number;
  /** Log file, if set. */
  readonly logFile: string | undefined;
  /** Shutdown grace period in seconds. */
  readonly exitTimeoutSecs: number;
  /** Fail start-up when a model fails to load. */
  readonly exitOnError: boolean;
  /** Server readiness requires every model ready. */
  readonly strictReadiness: boolean;
  /** HTTP header forwarding pattern (a valid `RegExp` source), if set. */
  readonly httpHeaderForwardPattern: string | undefined;
  /** gRPC metadata forwarding pattern (a valid `RegExp` source), if set. */
  readonly grpcHeaderForwardPattern: string | undefined;
  /** Local response cache size in bytes (0: off); agrees with `cacheConfig`. */
  readonly responseCacheByteSize: number;
  /**
   * Triton cache settings; holds `local,size=<responseCacheByteSize>` whenever the size is
   * above 0.
   */
  readonly cacheConfig: readonly string[];
  /** Triton trace settings. */
  readonly traceConfig: readonly string[];
  /** HTTP body limit in bytes. */
  readonly maxRequestBytes: number;
  /** gRPC message limit in bytes. */
  readonly grpcMaxMessageBytes: number;
  /** gRPC response compression. */
  readonly grpcInferResponseCompressionLevel: GrpcCompressionLevel;
  /** gRPC keepalive interval in milliseconds. */
  readonly grpcKeepaliveTime: number;
  /** gRPC keepalive answer timeout in milliseconds. */
  readonly grpcKeepaliveTimeout: number;
  /** Keepalive pings without calls. */
  readonly grpcKeepalivePermitWithoutCalls: boolean;
  /** gRPC over TLS. */
  readonly grpcUseSsl: boolean;
  /** gRPC over mutual TLS. */
  readonly grpcUseSslMutual: boolean;
  /** gRPC server certificate path, if set. */
  readonly grpcServerCert: string | undefined;
  /** gRPC server key path, if set. */
  readonly grpcServerKey: string | undefined;
  /** gRPC root certificates path, if set. */
  readonly grpcRootCert: string | undefined;
}

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
}

const MIB_64 = 64 * 1024 * 1024;
const SETTING = /^(?:[^,=\s]+,)?[^,=\s]+=.*$/;
const LOCAL_SIZE = /^local,size=(.*)$/;
const NON_NEGATIVE_INTEGER = /^\d+$/;

interface FieldSpec {
  kind: EnvFieldKind;
  schema: z.ZodType;
  /** What a valid value is, completing "<field> must be ...". */
  description: string;
}

function field(kind: EnvFieldKind, schema: z.ZodType, description: string): FieldSpec {
  return { kind, schema, description };
}

const nonEmptyString = field("string", z.string().min(1), "a non-empty string");
const port = field("integer", z.int().min(0).max(65535), "an integer between 0 and 65535");
const flag = field("boolean", z.boolean(), "a boolean");
const nonNegative = field("integer", z.int().min(0), "an integer >= 0");
const positive = field("integer", z.int().min(1), "an integer >= 1");
const pattern = field(
  "string",
  z.string().superRefine((source, context) => {
    try {
      new RegExp(source);
    } catch (error) {
      context.addIssue({ code: "custom", message: (error as Error).message });
    }
  }),
  "a valid regular expression",
);
const SETTING_DESCRIPTION = `a "<group>,<setting>=<value>" or "<setting>=<value>" string`;
const settings = field("settings", z.array(z.string().regex(SETTING)), "a list of strings");

const FIELDS = {
  id: nonEmptyString,
  modelRepository: nonEmptyString,
  httpAddress: nonEmptyString,
  httpPort: port,
  grpcAddress: nonEmptyString,
  grpcPort: port,
  metricsAddress: nonEmptyString,
  metricsPort: port,
  allowHttp: flag,
  allowGrpc: flag,
  allowMetrics: flag,
  allowCpuMetrics: flag,
  allowGpuMetrics: flag,
  metricsIntervalMs: positive,
  metricsConfig: settings,
  logVerbose: nonNegative,
  logFile: nonEmptyString,
  exitTimeoutSecs: nonNegative,
  exitOnError: flag,
  strictReadiness: flag,
  httpHeaderForwardPattern: pattern,
  grpcHeaderForwardPattern: pattern,
  responseCacheByteSize: nonNegative,
  cacheConfig: field(
    "settings",
    z.array(
      z.string().regex(SETTING).superRefine((entry, context) => {
        const size = LOCAL_SIZE.exec(entry)?.[1];
        if (size !== undefined && !NON_NEGATIVE_INTEGER.test(size)) {
          context.addIssue({
            code: "custom",
            message: "the local cache size must be an integer >= 0",
          });
        }
      }),
    ),
    "a list of strings",
  ),
  traceConfig: settings,
  maxRequestBytes: positive,
  grpcMaxMessageBytes: field(
    "integer",
    z.int().min(1).max(2 ** 31 - 1),
    "an integer between 1 and 2147483647",
  ),
  grpcInferResponseCompressionLevel: field(
    "string",
    z.enum(["none", "low", "medium", "high"]),
    `one of "none", "low", "medium", "high"`,
  ),
  grpcKeepaliveTime: positive,
  grpcKeepaliveTimeout: positive,
  grpcKeepalivePermitWithoutCalls: flag,
  grpcUseSsl: flag,
  grpcUseSslMutual: flag,
  grpcServerCert: nonEmptyString,
  grpcServerKey: nonEmptyString,
  grpcRootCert: nonEmptyString,
} as const satisfies Record<keyof TritonConfig, FieldSpec>;

type FieldName = keyof typeof FIELDS;

const FIELD_NAMES = Object.keys(FIELDS) as FieldName[];

const SCHEMA = z.strictObject(
  Object.fromEntries(FIELD_NAMES.map((name) => [name, FIELDS[name].schema.optional()])),
);

const ENV_KINDS: Record<string, EnvFieldKind> = Object.fromEntries(
  FIELD_NAMES.map((name) => [name, FIELDS[name].kind]),
);

type Defaults = Omit<ResolvedTritonConfig, "metricsAddress">;

const DEFAULTS: Defaults = {
  id: "triton",
  modelRepository: undefined,
  httpAddress: "0.0.0.0",
  httpPort: 8000,
  grpcAddress: "0.0.0.0",
  grpcPort: 8001,
  metricsPort: 8002,
  allowHttp: true,
  allowGrpc: true,
  allowMetrics: true,
  allowCpuMetrics: true,
  allowGpuMetrics: true,
  metricsIntervalMs: 2000,
  metricsConfig: [],
  logVerbose: 0,
  logFile: undefined,
  exitTimeoutSecs: 30,
  exitOnError: true,
  strictReadiness: true,
  httpHeaderForwardPattern: undefined,
  grpcHeaderForwardPattern: undefined,
  responseCacheByteSize: 0,
  cacheConfig: [],
  traceConfig: [],
  maxRequestBytes: MIB_64,
  grpcMaxMessageBytes: MIB_64,
  grpcInferResponseCompressionLevel: "none",
  grpcKeepaliveTime: 7_200_000,
  grpcKeepaliveTimeout: 20_000,
  grpcKeepalivePermitWithoutCalls: false,
  grpcUseSsl: false,
  grpcUseSslMutual: false,
  grpcServerCert: undefined,
  grpcServerKey: undefined,
  grpcRootCert: undefined,
};

/** One source of field values, validated on its own. */
interface Layer {
  /** Higher wins. */
  rank: number;
  values: Partial<Record<FieldName, unknown>>;
  /** Where a field (or one element of a list field) came from, for messages. */
  sourceOf(field: string, index?: number): string;
}

/**
 * Resolves the server configuration from the `config` argument, the environment, a YAML file
 * and the defaults (in that order of precedence, field by field).
 *
 * Environment variables are `DENOTRITON_TRITON_CONFIG_` + the field in upper snake case, e.g.
 * `DENOTRITON_TRITON_CONFIG_HTTP_PORT=9000`. Booleans take `true/false/1/0/yes/no/on/off` (any
 * case); integers must be plain decimal. A list takes one comma-separated variable
 * (`DENOTRITON_TRITON_CONFIG_CACHE_CONFIG=local,size=1048576`) or indexed variables
 * (`..._CACHE_CONFIG_0`, `..._CACHE_CONFIG_1`; they win over the plain one).
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
  layers.push(envLayer(env));
  if (options.config !== undefined) {
    layers.push({
      rank: 3,
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

  const cache = resolveCache(merged);
  const resolved: ResolvedTritonConfig = {
    ...DEFAULTS,
    ...Object.fromEntries([...merged].map(([name, { value }]) => [name, value])),
    metricsAddress: get("metricsAddress") ?? get("httpAddress") ?? DEFAULTS.httpAddress,
    metricsConfig: Object.freeze([...(get("metricsConfig") ?? [])]),
    traceConfig: Object.freeze([...(get("traceConfig") ?? [])]),
    cacheConfig: Object.freeze(cache.cacheConfig),
    responseCacheByteSize: cache.responseCacheByteSize,
  };
  return Object.freeze(resolved);
}

function envLayer(env: Readonly<Record<string, string>>): Layer {
  const { values, variables } = readTritonConfigEnv(env, ENV_KINDS);
  return {
    rank: 2,
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

function validate(layer: Layer): Partial<Record<FieldName, unknown>> {
  const result = SCHEMA.safeParse(layer.values);
  if (result.success) return result.data;
  const problems: { source: string; message: string }[] = [];
  for (const issue of result.error.issues) {
    if (issue.code === "unrecognized_keys") {
      for (const key of issue.keys) {
        problems.push({ source: layer.sourceOf(key), message: `unknown field "${key}"` });
      }
      continue;
    }
    const name = String(issue.path[0]);
    const spec = FIELDS[name as FieldName];
    const value = layer.values[name as FieldName];
    const index = issue.path[1];
    const detail = issue.code === "custom" ? `: ${issue.message}` : "";
    let message: string;
    if (typeof index === "number" && Array.isArray(value)) {
      const element = show(value[index]);
      message = issue.code === "custom"
        ? `${name}[${index}] ${element}: ${issue.message}`
        : `${name}[${index}] must be ${SETTING_DESCRIPTION}, got ${element}`;
    } else {
      let description = spec.description;
      if (layer.rank === 2 && spec.kind === "boolean") {
        description += " (true, false, 1, 0, yes, no, on or off)";
      }
      message = `${name} must be ${description}, got ${show(value)}${detail}`;
    }
    problems.push({
      source: layer.sourceOf(name, typeof index === "number" ? index : undefined),
      message,
    });
  }
  const sources = new Set(problems.map(({ source }) => source));
  const text = sources.size === 1
    ? `Invalid TritonConfig from ${problems[0]!.source}: ${
      problems.map(({ message }) => message).join("; ")
    }`
    : `Invalid TritonConfig: ${
      problems.map(({ source, message }) => `from ${source}: ${message}`).join("; ")
    }`;
  throw new TritonValidationError(text);
}

function resolveCache(
  merged: ReadonlyMap<FieldName, { value: unknown; layer: Layer }>,
): { responseCacheByteSize: number; cacheConfig: string[] } {
  const cacheEntry = merged.get("cacheConfig");
  const cacheConfig = [...(cacheEntry?.value as readonly string[] | undefined ?? [])];
  let localSize: number | undefined;
  for (const entry of cacheConfig) {
    const size = LOCAL_SIZE.exec(entry)?.[1];
    if (size !== undefined) localSize = Number(size); // Triton lets the last setting win.
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
  const others = cacheConfig.filter((entry) => !LOCAL_SIZE.test(entry));
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
    for (const name of [TRITON_CONFIG_FILE_ENV, ...FIELD_NAMES.map(envNameOf)]) {
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

function show(value: unknown): string {
  if (typeof value === "number" || typeof value === "bigint" || value === undefined) {
    return String(value);
  }
  try {
    return JSON.stringify(value) ?? String(value);
  } catch {
    return String(value);
  }
}
