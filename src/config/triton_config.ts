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
 * Over 500 lines for a reason: {@linkcode TritonConfig} documents each of its 42 fields (what
 * each engine does with it, and what it refuses), which is half of this file.
 *
 * @module
 */

import { TritonValidationError } from "../errors.ts";
import type { LogFormat } from "../log.ts";
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

/** Compression level of gRPC inference responses. */
export type GrpcCompressionLevel = "none" | "low" | "medium" | "high";

/**
 * Server configuration. Every field is optional; {@linkcode resolveTritonConfig} fills in the
 * defaults. Each field says what it does on the Triton engine (the core) and on the built-in
 * engine; a value DenoTriton cannot honour is refused with an error naming the field, never
 * ignored.
 */
export interface TritonConfig {
  /**
   * Server identifier reported by the server metadata endpoint and prefixed to log lines. Both
   * engines.
   *
   * @default {"triton"}
   */
  id?: string;
  /**
   * Not supported, so any value is refused: models come from `triton.bind()`, and the Triton
   * engine writes their generated configs to a temporary repository of its own. (PyTriton's
   * `model_repository` is the same internal directory.)
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
   * Serve Prometheus metrics on the metrics port. Off, the engine keeps none either: no metric
   * reporters in the Triton core (unless an earlier Triton-engine server in this process turned
   * them on), no CPU or GPU metrics read.
   *
   * @default {true}
   */
  allowMetrics?: boolean;
  /**
   * Report CPU utilization and memory (`nv_cpu_utilization`, `nv_cpu_memory_total_bytes`,
   * `nv_cpu_memory_used_bytes`). The Triton engine's core polls them; the built-in engine reads
   * the same `/proc/stat` and `/proc/meminfo` with the same formulas (Linux only; it needs
   * `--allow-read=/proc/stat,/proc/meminfo`, and refuses to start without). Off by default,
   * unlike `tritonserver`, so that a server needs no `/proc` access unless asked. The core's
   * metrics are process-wide: once a Triton-engine server in a process turned them on, later
   * ones in that process report them too.
   *
   * @default {false}
   */
  allowCpuMetrics?: boolean;
  /**
   * Report GPU metrics (`nv_gpu_*`, through DCGM). Unset, the Triton engine turns them on when it
   * finds GPUs (as `tritonserver` does) and leaves them off when it finds none; `true` is handed
   * to the core, which only warns on a host without GPUs. The built-in engine has no GPU metrics:
   * unset is off, and `true` is refused.
   *
   * @default {undefined}
   */
  allowGpuMetrics?: boolean;
  /**
   * How often CPU and GPU metrics are refreshed, in milliseconds. The Triton engine's core polls
   * at this interval; the built-in engine reads `/proc` again on a scrape when its last reading
   * is this old.
   *
   * @default {2000}
   */
  metricsIntervalMs?: number;
  /**
   * Triton metrics settings, `<setting>=<value>`: `counter_latencies=<bool>`,
   * `histogram_latencies=<bool>`, `summary_latencies=<bool>` and
   * `summary_quantiles=<quantile>:<error>,...` (the four settings Triton 2.51 reads; any other
   * entry is refused). The Triton engine hands them to the core. The built-in engine honours
   * `counter_latencies` and refuses to start with histograms, summaries or quantiles.
   *
   * @default {[]}
   */
  metricsConfig?: readonly string[];
  /**
   * Log verbosity; 0 logs info, warnings and errors only. Both engines; the Triton engine sets
   * the core's verbose level too.
   *
   * @default {0}
   */
  logVerbose?: number;
  /**
   * A file to append log lines to instead of stderr; the Triton engine sends the core's log
   * there too.
   *
   * @default {undefined}
   */
  logFile?: string;
  /**
   * The layout of the lines DenoTriton writes (to stderr or `logFile`), as Triton's
   * `--log-format`: `"default"` starts with the level letter and the date
   * (`I1122 12:47:48.123 triton] ...`), `"ISO8601"` with an ISO 8601 time. Both engines (the
   * core's lines go through the same logger); `/v2/logging` and gRPC `LogSettings` change it
   * while serving. Lines handed to a logger of your own (the `logger` option of `Triton`) are its
   * to lay out.
   *
   * @default {"default"}
   */
  logFormat?: LogFormat;
  /**
   * Seconds in-flight requests get to finish when the server stops. Both engines.
   *
   * @default {30}
   */
  exitTimeoutSecs?: number;
  /**
   * Whether a model that fails to load while the server starts fails the start. With `false`,
   * `run()` logs the failure and serves the models that did load (the failed one answers as
   * not ready). Both engines; the Triton engine sets the core's `--exit-on-error` too.
   *
   * @default {true}
   */
  exitOnError?: boolean;
  /**
   * `/v2/health/ready` reports ready only when every model is ready. Both engines.
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
   * Byte size of the Triton core's pinned (page-locked) host memory pool, which speeds up copies
   * between host and GPU memory. Unset, the Triton engine uses `tritonserver`'s 256 MiB when it
   * finds GPUs and 0 when it finds none; a size above 0 is handed to the core, which warns and
   * goes on without the pool on a host without GPUs. The built-in engine copies nothing to GPUs:
   * it accepts 0 and refuses a size above it.
   *
   * @default {undefined}
   */
  pinnedMemoryPoolByteSize?: number;
  /**
   * Byte size of the local response cache; 0 turns it off. Unset takes the size from a
   * `local,size=<bytes>` entry of `cacheConfig`. Both engines. A model bound with
   * `responseCache: true` while the server has no cache is refused by `bind()`.
   *
   * @default {0}
   */
  responseCacheByteSize?: number;
  /**
   * Triton cache settings, each `<cache>,<setting>=<value>`, e.g. `local,size=1048576`. The
   * Triton engine hands them to the core (its wheel ships only the `local` cache); the built-in
   * engine has only `local,size=` and refuses to start with any other cache or setting.
   *
   * @default {[]}
   */
  cacheConfig?: readonly string[];
  /**
   * Not supported: DenoTriton does not trace requests, so any entry is refused (an empty list
   * is accepted).
   *
   * @default {[]}
   */
  traceConfig?: readonly string[];
  /**
   * Largest HTTP request body accepted, in bytes, both as received and after
   * `Content-Encoding` decompression (which stops as soon as it passes the limit). Larger
   * bodies are answered 413.
   *
   * @default {67108864}
   */
  maxRequestBytes?: number;
  /**
   * How many threads serve HTTP (Triton's and PyTriton's `http_thread_count`): at 1 the main
   * isolate; above that, as many Workers, all listening on `httpPort` through `reusePort`, which
   * needs Deno's `--unstable-net` flag (without it the start fails with one line naming the
   * flag), while the main isolate keeps to the engine and gRPC. A Worker decodes, encodes and
   * compresses inference requests itself, and on the Triton engine also submits them to the
   * core; the built-in engine's call, and every other request, is handed to the main isolate.
   *
   * @default {1}
   */
  httpThreadCount?: number;
  /**
   * Origins whose pages may call the HTTP front end from a browser (CORS): exact origins such as
   * `https://app.example:8443` (scheme, host and port, no path), or `"*"` for any. Empty, the
   * front end answers no preflight and adds no CORS header, as `tritonserver` does. A
   * preflight from an allowed origin is answered 204 with the method asked for, the headers
   * asked for (`Content-Type`, `Content-Encoding`, `Inference-Header-Content-Length`,
   * `triton-access-token`, `Authorization`, and headers `httpHeaderForwardPattern` forwards) and
   * `httpCorsMaxAge`; answers expose `Inference-Header-Content-Length`. In an environment
   * variable, the origins are comma-separated. Both engines.
   *
   * @default {[]}
   */
  httpCorsOrigins?: readonly string[];
  /**
   * Let allowed origins send credentials (cookies, HTTP authentication) with their calls
   * (`Access-Control-Allow-Credentials: true`). Needs exact origins in `httpCorsOrigins`, not
   * `"*"`. The access token travels in a header, which needs no credentials.
   *
   * @default {false}
   */
  httpCorsAllowCredentials?: boolean;
  /**
   * How long a browser may keep the answer to a CORS preflight, in seconds
   * (`Access-Control-Max-Age`; browsers cap it, Chromium at 7200).
   *
   * @default {600}
   */
  httpCorsMaxAge?: number;
  /**
   * Serve the docs page at `/docs`: Swagger UI over the server's OpenAPI document
   * (`/v2/openapi.json`, which is served either way), with "Try it out" against this server.
   * Its files come with the `swagger-ui-dist` npm package and need no permission. Both engines.
   *
   * @default {true}
   */
  httpDocs?: boolean;
  /**
   * Largest gRPC message received or sent, in bytes.
   *
   * @default {67108864}
   */
  grpcMaxMessageBytes?: number;
  /**
   * Compression of gRPC inference responses. Only `"none"` is supported: the gRPC front end
   * does not compress responses, so any other level is refused.
   *
   * @default {"none"}
   */
  grpcInferResponseCompressionLevel?: GrpcCompressionLevel;
  /**
   * Interval of the gRPC server's keepalive pings, in milliseconds (Triton's
   * `--grpc-keepalive-time`).
   *
   * @default {7200000}
   */
  grpcKeepaliveTime?: number;
  /**
   * How long the gRPC server waits for a keepalive ping's answer before it drops the
   * connection, in milliseconds (Triton's `--grpc-keepalive-timeout`).
   *
   * @default {20000}
   */
  grpcKeepaliveTimeout?: number;
  /**
   * Send keepalive pings on connections without calls. The gRPC front end pings every
   * connection, busy or idle, so only `true` is supported and `false` is refused; that is why
   * the default differs from `tritonserver`'s `false`.
   *
   * @default {true}
   */
  grpcKeepalivePermitWithoutCalls?: boolean;
  /**
   * Serve gRPC over TLS; needs `grpcServerCert` and `grpcServerKey`. Cleartext clients are
   * refused.
   *
   * @default {false}
   */
  grpcUseSsl?: boolean;
  /**
   * Serve gRPC over mutual TLS: clients must present a certificate signed by `grpcRootCert`.
   * Needs `grpcServerCert`, `grpcServerKey` and `grpcRootCert`. Takes precedence over
   * `grpcUseSsl`. Client certificates must be X.509 v3.
   *
   * @default {false}
   */
  grpcUseSslMutual?: boolean;
  /**
   * Path of the gRPC server's PEM certificate chain (read when the server starts).
   *
   * @default {undefined}
   */
  grpcServerCert?: string;
  /**
   * Path of the gRPC server's PEM private key (read when the server starts).
   *
   * @default {undefined}
   */
  grpcServerKey?: string;
  /**
   * Path of the PEM root certificates that client certificates are checked against (read when
   * the server starts; used with `grpcUseSslMutual`).
   *
   * @default {undefined}
   */
  grpcRootCert?: string;
}

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
 * assert.deepEqual(TRITON_CONFIG_FIELD_USES.traceConfig, {
 *   accepts: [],
 *   refused: "DenoTriton does not trace requests",
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
    traceConfig: { accepts: [], refused: "DenoTriton does not trace requests" },
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

// ResolvedTritonConfig maps over Required<TritonConfig>, not with `-?`: without
// exactOptionalPropertyTypes (Deno's default in a user's project) `-?` strips `undefined` also
// from the fields that may stay unset.
/**
 * A {@linkcode TritonConfig} with every default applied: each field as documented there, set
 * (the nine fields without a default, such as `logFile`, may stay `undefined`). Beside the
 * defaults:
 *
 * - `metricsAddress` is `httpAddress` unless set;
 * - `responseCacheByteSize` and `cacheConfig` agree: `cacheConfig` holds
 *   `local,size=<responseCacheByteSize>` whenever the size is above 0;
 * - a field DenoTriton refuses holds its one accepted value (`modelRepository` is `undefined`,
 *   `traceConfig` is empty, `grpcInferResponseCompressionLevel` is `"none"`,
 *   `grpcKeepalivePermitWithoutCalls` is `true`);
 * - list fields are frozen.
 */
export type ResolvedTritonConfig = {
  readonly [K in keyof Required<TritonConfig>]: K extends // The fields without a default:
  | "modelRepository"
  | "logFile"
  | "httpHeaderForwardPattern"
  | "grpcHeaderForwardPattern"
  | "allowGpuMetrics" // unset: when the engine finds GPUs
  | "pinnedMemoryPoolByteSize" // unset: 256 MiB when the engine finds GPUs, else 0
  | "grpcServerCert"
  | "grpcServerKey"
  | "grpcRootCert" ? TritonConfig[K] | undefined
    : Exclude<TritonConfig[K], undefined>;
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
