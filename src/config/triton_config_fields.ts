/**
 * The fields of the server configuration: {@linkcode TritonConfig}, each field documented with
 * what each engine does with it and what it refuses, and {@linkcode ResolvedTritonConfig}, the
 * same with every default applied. The schema (`triton_config_schema.ts`) validates them, and
 * `triton_config.ts` resolves them from their sources.
 *
 * @module
 */

import type { LogFormat } from "../log.ts";

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
   * Triton's `--trace-config` entries (PyTriton's `trace_config`): global settings
   * `level=OFF|TIMESTAMPS|TENSORS` (repeatable), `rate=N`, `count=N`,
   * `mode=triton|opentelemetry`, and mode settings `triton,file=PATH`,
   * `triton,log-frequency=N`, `opentelemetry,url=URL`, `opentelemetry,resource=KEY=VALUE`,
   * `opentelemetry,bsp_max_queue_size=N`, `opentelemetry,bsp_schedule_delay=MS`,
   * `opentelemetry,bsp_max_export_batch_size=N`. The trace extension
   * (`/v2/trace/setting`, gRPC `TraceSetting`) changes level, rate, count, file and log
   * frequency while the server runs.
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
 *   `grpcInferResponseCompressionLevel` is `"none"`,
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
