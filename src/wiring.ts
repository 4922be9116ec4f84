/**
 * Which part of the server gets which {@linkcode ResolvedTritonConfig} field: one function per
 * consumer named in `TRITON_CONFIG_FIELD_USES`, each turning the config into that part's
 * options. `Triton` starts the server from these, and a test checks that each function reads
 * every field the table gives its consumer.
 *
 * @module
 */

import type { TritonConfigConsumer } from "./config/triton_config.ts";
import type { ResolvedTritonConfig } from "./config/triton_config_fields.ts";
import { parseCacheConfig } from "./config/cache_config.ts";
import { parseTraceConfig, type TraceConfig } from "./config/trace_config.ts";
import type { EngineOptions } from "./engine/select.ts";
import { describeError, TritonError } from "./errors.ts";
import type { GrpcFrontendOptions, GrpcTlsOptions } from "./frontend/grpc/server.ts";
import type { HttpFrontendOptions } from "./frontend/http/server.ts";
import type { MetricsFrontendOptions } from "./frontend/metrics/server.ts";
import type { LoggerOptions } from "./log.ts";

/** What the facade itself decides from the config. */
export interface FacadePlan {
  /** Serve HTTP. */
  readonly http: boolean;
  /** Serve gRPC. */
  readonly grpc: boolean;
  /** Serve metrics. */
  readonly metrics: boolean;
  /** A model that fails to load at start fails the start (else it is logged and skipped). */
  readonly exitOnError: boolean;
  /** Whether the server has a response cache, which models with `responseCache` need. */
  readonly responseCache: boolean;
  /** The trace configuration (`traceConfig`), from which the server's tracer is made. */
  readonly trace: TraceConfig;
}

/** Where the gRPC TLS files are, before they are read. */
export interface GrpcTlsFiles {
  /** `grpcServerCert`. */
  readonly certChain: string;
  /** `grpcServerKey`. */
  readonly privateKey: string;
  /** `grpcRootCert`, if set. */
  readonly rootCerts: string | undefined;
  /** Mutual TLS (`grpcUseSslMutual`). */
  readonly checkClientCertificate: boolean;
}

/** The gRPC front end's options, with its TLS files still to read. */
export type GrpcPlan = Omit<GrpcFrontendOptions, "tls" | "logger" | "security"> & {
  /** TLS files, when TLS is on. */
  readonly tlsFiles?: GrpcTlsFiles;
};

/**
 * The facade's own decisions: which front ends run, what a failed model load does, and whether
 * the server has a response cache.
 *
 * @param config The resolved config.
 * @returns The plan.
 *
 * @example Turn gRPC off; the response cache stays off
 * ```ts
 * import { facadeOptionsOf } from "./wiring.ts";
 * import { resolveTritonConfig } from "./config/triton_config.ts";
 * import assert from "node:assert/strict";
 *
 * const plan = facadeOptionsOf(resolveTritonConfig({ env: {}, config: { allowGrpc: false } }));
 * assert.equal(plan.grpc, false);
 * assert.equal(plan.responseCache, false);
 * ```
 */
export function facadeOptionsOf(config: ResolvedTritonConfig): FacadePlan {
  const cache = parseCacheConfig(config.cacheConfig);
  const responseCache = cache !== undefined &&
    (cache.name !== "local" || Number(cache.config["size"] ?? 0) > 0);
  return {
    http: config.allowHttp,
    grpc: config.allowGrpc,
    metrics: config.allowMetrics,
    exitOnError: config.exitOnError,
    responseCache,
    trace: parseTraceConfig(config.traceConfig),
  };
}

/**
 * The logger's options.
 *
 * @param config The resolved config.
 * @returns Verbosity, log file and the server id as prefix.
 *
 * @example The server id as the log prefix
 * ```ts
 * import { loggerOptionsOf } from "./wiring.ts";
 * import { resolveTritonConfig } from "./config/triton_config.ts";
 * import assert from "node:assert/strict";
 *
 * assert.deepEqual(loggerOptionsOf(resolveTritonConfig({ env: {}, config: { id: "a" } })), {
 *   verbose: 0, prefix: "a", format: "default",
 * });
 * ```
 */
export function loggerOptionsOf(config: ResolvedTritonConfig): LoggerOptions {
  const options: LoggerOptions = {
    verbose: config.logVerbose,
    prefix: config.id,
    format: config.logFormat,
  };
  if (config.logFile !== undefined) options.file = config.logFile;
  return options;
}

/**
 * The engine's options (the facade adds its logger and unrecoverable-error hook).
 *
 * @param config The resolved config.
 * @returns Server id, readiness, exit, logging, cache, metrics and GPU options.
 *
 * @example A response cache size becomes a local cache
 * ```ts
 * import { engineOptionsOf } from "./wiring.ts";
 * import { resolveTritonConfig } from "./config/triton_config.ts";
 * import assert from "node:assert/strict";
 *
 * const options = engineOptionsOf(
 *   resolveTritonConfig({ env: {}, config: { responseCacheByteSize: 1024 } }),
 * );
 * assert.deepEqual(options.cacheConfig, { name: "local", config: { size: "1024" } });
 * assert.equal(options.cpuMetrics, false);
 * ```
 */
export function engineOptionsOf(config: ResolvedTritonConfig): EngineOptions {
  const options: EngineOptions = {
    id: config.id,
    strictReadiness: config.strictReadiness,
    exitTimeoutSecs: config.exitTimeoutSecs,
    exitOnError: config.exitOnError,
    responseCacheByteSize: config.responseCacheByteSize,
    logVerbose: config.logVerbose,
    metrics: config.allowMetrics,
    cpuMetrics: config.allowCpuMetrics,
    metricsIntervalMs: config.metricsIntervalMs,
    metricsConfig: config.metricsConfig,
  };
  // Unset, these two follow the GPUs the engine finds.
  if (config.allowGpuMetrics !== undefined) options.gpuMetrics = config.allowGpuMetrics;
  if (config.pinnedMemoryPoolByteSize !== undefined) {
    options.pinnedMemoryPoolByteSize = config.pinnedMemoryPoolByteSize;
  }
  const cache = parseCacheConfig(config.cacheConfig);
  if (cache !== undefined) options.cacheConfig = cache;
  if (config.logFile !== undefined) options.logFile = config.logFile;
  return options;
}

/**
 * The HTTP front end's options (the facade adds its logger and access check).
 *
 * @param config The resolved config.
 * @returns Address, port, body limit, threads, header forwarding, CORS and the docs page.
 *
 * @example The HTTP defaults, and CORS for one origin
 * ```ts
 * import { httpOptionsOf } from "./wiring.ts";
 * import { resolveTritonConfig } from "./config/triton_config.ts";
 * import assert from "node:assert/strict";
 *
 * assert.deepEqual(httpOptionsOf(resolveTritonConfig({ env: {} })), {
 *   hostname: "0.0.0.0", port: 8000, maxRequestBytes: 67108864, threads: 1, docs: true,
 * });
 * const cors = httpOptionsOf(resolveTritonConfig({
 *   env: {}, config: { httpCorsOrigins: ["http://app.test:3000"] },
 * })).cors;
 * assert.deepEqual(cors, {
 *   origins: ["http://app.test:3000"], allowCredentials: false, maxAge: 600,
 * });
 * ```
 */
export function httpOptionsOf(
  config: ResolvedTritonConfig,
): Omit<HttpFrontendOptions, "logger" | "accessCheck" | "security"> {
  const options: HttpFrontendOptions = {
    hostname: config.httpAddress,
    port: config.httpPort,
    maxRequestBytes: config.maxRequestBytes,
    threads: config.httpThreadCount,
    docs: config.httpDocs,
  };
  if (config.httpCorsOrigins.length > 0) {
    options.cors = {
      origins: config.httpCorsOrigins,
      allowCredentials: config.httpCorsAllowCredentials,
      maxAge: config.httpCorsMaxAge,
    };
  }
  if (config.httpHeaderForwardPattern !== undefined) {
    options.headerForwardPattern = config.httpHeaderForwardPattern;
  }
  return options;
}

/**
 * The gRPC front end's options, with the TLS files to read when TLS is on.
 *
 * @param config The resolved config.
 * @returns Address, port, message limit, header forwarding, keepalive and TLS files.
 *
 * @example gRPC over TLS with a certificate and key
 * ```ts
 * import { grpcOptionsOf } from "./wiring.ts";
 * import { resolveTritonConfig } from "./config/triton_config.ts";
 * import assert from "node:assert/strict";
 *
 * const plan = grpcOptionsOf(resolveTritonConfig({
 *   env: {},
 *   config: { grpcUseSsl: true, grpcServerCert: "c.pem", grpcServerKey: "k.pem" },
 * }));
 * assert.equal(plan.keepaliveTimeMs, 7200000);
 * assert.deepEqual(plan.tlsFiles, {
 *   certChain: "c.pem", privateKey: "k.pem", rootCerts: undefined, checkClientCertificate: false,
 * });
 * ```
 */
export function grpcOptionsOf(config: ResolvedTritonConfig): GrpcPlan {
  const options: GrpcFrontendOptions = {
    address: config.grpcAddress,
    port: config.grpcPort,
    maxMessageBytes: config.grpcMaxMessageBytes,
    keepaliveTimeMs: config.grpcKeepaliveTime,
    keepaliveTimeoutMs: config.grpcKeepaliveTimeout,
  };
  if (config.grpcHeaderForwardPattern !== undefined) {
    options.headerForwardPattern = config.grpcHeaderForwardPattern;
  }
  const tls = config.grpcUseSsl;
  const mutual = config.grpcUseSslMutual;
  const certChain = config.grpcServerCert;
  const privateKey = config.grpcServerKey;
  const rootCerts = config.grpcRootCert;
  // resolveTritonConfig() has checked that TLS comes with its files.
  if ((tls || mutual) && certChain !== undefined && privateKey !== undefined) {
    return {
      ...options,
      tlsFiles: { certChain, privateKey, rootCerts, checkClientCertificate: mutual },
    };
  }
  return options;
}

/**
 * The metrics front end's options (the facade adds its logger).
 *
 * @param config The resolved config.
 * @returns Address and port.
 *
 * @example The metrics defaults
 * ```ts
 * import { metricsOptionsOf } from "./wiring.ts";
 * import { resolveTritonConfig } from "./config/triton_config.ts";
 * import assert from "node:assert/strict";
 *
 * assert.deepEqual(metricsOptionsOf(resolveTritonConfig({ env: {} })), {
 *   hostname: "0.0.0.0", port: 8002,
 * });
 * ```
 */
export function metricsOptionsOf(
  config: ResolvedTritonConfig,
): Omit<MetricsFrontendOptions, "logger"> {
  return { hostname: config.metricsAddress, port: config.metricsPort };
}

/**
 * The options function of each consumer in `TRITON_CONFIG_FIELD_USES`.
 *
 * @example Every consumer has one
 * ```ts
 * import { CONSUMER_OPTIONS } from "./wiring.ts";
 * import { resolveTritonConfig } from "./config/triton_config.ts";
 * import assert from "node:assert/strict";
 *
 * const config = resolveTritonConfig({ env: {} });
 * assert.deepEqual(CONSUMER_OPTIONS.metrics(config), { hostname: "0.0.0.0", port: 8002 });
 * assert.deepEqual(Object.keys(CONSUMER_OPTIONS).sort(), [
 *   "engine", "facade", "grpc", "http", "logger", "metrics",
 * ]);
 * ```
 */
export const CONSUMER_OPTIONS: Readonly<
  Record<TritonConfigConsumer, (config: ResolvedTritonConfig) => unknown>
> = {
  facade: facadeOptionsOf,
  logger: loggerOptionsOf,
  engine: engineOptionsOf,
  http: httpOptionsOf,
  grpc: grpcOptionsOf,
  metrics: metricsOptionsOf,
};

async function readPem(field: string, path: string): Promise<Uint8Array> {
  try {
    return await Deno.readFile(path);
  } catch (error) {
    const reason = describeError(error);
    throw new TritonError(
      `Cannot start the gRPC front end: cannot read ${field} ${path}: ${reason}`,
      {
        cause: error,
      },
    );
  }
}

/**
 * Reads the gRPC TLS files.
 *
 * @param files Where they are.
 * @returns The PEM contents for {@linkcode GrpcFrontendOptions.tls}.
 * @throws {TritonError} When a file cannot be read (the message names the config field).
 *
 * @example A missing file is named with its field
 * ```ts
 * import { readGrpcTls } from "./wiring.ts";
 * import assert from "node:assert/strict";
 *
 * await assert.rejects(
 *   readGrpcTls({
 *     certChain: "/nonexistent/c.pem",
 *     privateKey: "/nonexistent/k.pem",
 *     rootCerts: undefined,
 *     checkClientCertificate: false,
 *   }),
 *   /^TritonError: Cannot start the gRPC front end: cannot read grpcServerCert \/nonexistent\/c\.pem: NotFound/,
 * );
 * ```
 */
export async function readGrpcTls(files: GrpcTlsFiles): Promise<GrpcTlsOptions> {
  const tls: GrpcTlsOptions = {
    certChain: await readPem("grpcServerCert", files.certChain),
    privateKey: await readPem("grpcServerKey", files.privateKey),
    checkClientCertificate: files.checkClientCertificate,
  };
  if (files.rootCerts !== undefined) tls.rootCerts = await readPem("grpcRootCert", files.rootCerts);
  return tls;
}
