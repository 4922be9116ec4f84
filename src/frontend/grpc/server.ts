/**
 * The gRPC front end: serves `inference.GRPCInferenceService` (KServe v2 with Triton's
 * extensions) and `grpc.health.v1.Health` over HTTP/2, cleartext, TLS or mutual TLS, with
 * Triton's keepalive settings. The RPCs (`service.ts`, written against the call contract of
 * `call.ts`) run on our own HTTP/2 session (`h2/`), which copies large messages far less than
 * Deno's `node:http2` does and is held to h2spec: cleartext over `Deno.listen`, TLS over
 * `node:tls`, which (unlike `Deno.listenTls`) checks client certificates (`h2/tls.ts` says
 * why).
 *
 * @module
 */

import type { SharedMemoryRegistry } from "../../shm/registry.ts";
import type { Engine } from "../../engine/engine.ts";
import type { ModelRepository } from "../../engine/repository.ts";
import { messageOf, TritonBadParameterError, TritonError } from "../../errors.ts";
import { Logger } from "../../log.ts";
import type { ResolvedSecurityConfig } from "../../config/security_config.ts";
import { grpcAccessCheck } from "./access.ts";
import { compileHeaderForwardPattern } from "../../protocol/request_parameters.ts";
import { RAW_INPUT_CONTENTS_FIELD } from "../../protocol/grpc_codec.ts";
import { createServices, INFERENCE_SERVICE } from "./service.ts";
import { type Http2Server, listenGrpc, type ListenGrpcOptions } from "./h2/server.ts";
import type { Tracer } from "../../telemetry/tracer.ts";

/** Options of {@linkcode GrpcFrontend.start}. */
export interface GrpcFrontendOptions {
  /**
   * Address to listen on.
   *
   * @default {"0.0.0.0"}
   */
  address?: string;
  /**
   * Port to listen on; 0 picks a free one.
   *
   * @default {8001}
   */
  port?: number;
  /**
   * Metadata keys matching this pattern are forwarded to the model as string request parameters
   * (Triton's `--grpc-header-forward-pattern`), case-insensitively.
   *
   * @default {undefined}
   */
  headerForwardPattern?: string | RegExp;
  /**
   * Largest message received or sent, in bytes.
   *
   * @default {67108864}
   */
  maxMessageBytes?: number;
  /**
   * How long {@linkcode GrpcFrontend.shutdown} waits for calls in flight before cancelling them,
   * in milliseconds.
   *
   * @default {5000}
   */
  shutdownTimeoutMs?: number;
  /**
   * Where the front end logs; gRPC `LogSettings` reads and changes its settings.
   *
   * @default {new Logger()}
   */
  logger?: Logger;
  /**
   * The models the repository extension loads, unloads and lists.
   *
   * @default {engineRepository(engine): the models the engine loaded}
   */
  repository?: ModelRepository;
  /**
   * Access tokens for restricted endpoint groups.
   *
   * @default {undefined}
   */
  security?: ResolvedSecurityConfig;
  /**
   * The server's system shared-memory regions (shared with the HTTP front end); without it the
   * shared-memory RPCs answer "not supported".
   *
   * @default {undefined}
   */
  sharedMemory?: SharedMemoryRegistry;
  /**
   * The server's tracer (the engine's too): `TraceSetting` reads and changes its settings.
   *
   * @default {undefined}
   */
  tracer?: Tracer;
  /**
   * Interval of the server's keepalive pings on each connection, in milliseconds (Triton's
   * `--grpc-keepalive-time`). Idle connections are pinged as well as busy ones.
   *
   * @default {7200000}
   */
  keepaliveTimeMs?: number;
  /**
   * How long a keepalive ping may go unanswered before the connection is dropped, in
   * milliseconds (Triton's `--grpc-keepalive-timeout`).
   *
   * @default {20000}
   */
  keepaliveTimeoutMs?: number;
  /**
   * Serve over TLS instead of cleartext; cleartext clients are then refused.
   *
   * @default {undefined}
   */
  tls?: GrpcTlsOptions;
}

/** TLS settings of the gRPC front end (Triton's `--grpc-use-ssl*` and certificate flags). */
export interface GrpcTlsOptions {
  /** The server's PEM certificate chain. */
  certChain: Uint8Array;
  /** The server's PEM private key. */
  privateKey: Uint8Array;
  /**
   * PEM root certificates that client certificates must chain to; needed when
   * `checkClientCertificate` is true.
   *
   * @default {undefined}
   */
  rootCerts?: Uint8Array;
  /**
   * Mutual TLS: refuse clients without a certificate signed by `rootCerts`.
   *
   * @default {false}
   */
  checkClientCertificate?: boolean;
}

const DEFAULT_MAX_MESSAGE_BYTES = 64 * 1024 * 1024;
const DEFAULT_KEEPALIVE_TIME_MS = 7_200_000;
const DEFAULT_KEEPALIVE_TIMEOUT_MS = 20_000;

// `raw_input_contents` of ModelInferRequest: received tensor data is aligned in place.
const RAW_INPUT_FIELDS: ReadonlyMap<string, number> = new Map([
  [`/${INFERENCE_SERVICE}/ModelInfer`, RAW_INPUT_CONTENTS_FIELD],
  [`/${INFERENCE_SERVICE}/ModelStreamInfer`, RAW_INPUT_CONTENTS_FIELD],
]);

function positiveInteger(name: string, value: number): number {
  if (!Number.isInteger(value) || value < 1) {
    throw new TritonBadParameterError(`Invalid gRPC ${name}: ${value} is not a positive integer`);
  }
  return value;
}

/** The TLS settings of the HTTP/2 server, checked. */
function tlsOf(tls: GrpcTlsOptions | undefined): ListenGrpcOptions["tls"] {
  if (tls === undefined) return undefined;
  const mutual = tls.checkClientCertificate ?? false;
  if (mutual && tls.rootCerts === undefined) {
    throw new TritonBadParameterError(
      "Invalid gRPC TLS options: checking client certificates needs rootCerts",
    );
  }
  return {
    cert: tls.certChain,
    key: tls.privateKey,
    ...(tls.rootCerts === undefined ? {} : { ca: tls.rootCerts }),
    requestClientCert: mutual,
  };
}

function hostPort(address: string, port: number): string {
  return address.includes(":") && !address.startsWith("[")
    ? `[${address}]:${port}`
    : `${address}:${port}`;
}

/**
 * The gRPC front end over an {@linkcode Engine}.
 *
 * @example Serve and query liveness
 * ```ts
 * import { GrpcFrontend } from "./server.ts";
 * import type { Engine } from "../../engine/engine.ts";
 * import assert from "node:assert/strict";
 *
 * const engine = { isLive: () => true } as Engine;
 * await using frontend = await GrpcFrontend.start(engine, { address: "127.0.0.1", port: 0 });
 * assert.match(frontend.url, /^grpc:\/\/127\.0\.0\.1:\d+$/);
 * ```
 */
export class GrpcFrontend implements AsyncDisposable {
  #server: Http2Server;
  #port: number;
  #host: string;
  #shutdownTimeoutMs: number;
  #logger: Logger;
  #tls: boolean;
  #stopping: Promise<void> | undefined;

  private constructor(parts: {
    readonly server: Http2Server;
    readonly port: number;
    readonly host: string;
    readonly shutdownTimeoutMs: number;
    readonly logger: Logger;
    readonly tls: boolean;
  }) {
    this.#server = parts.server;
    this.#port = parts.port;
    this.#host = parts.host;
    this.#shutdownTimeoutMs = parts.shutdownTimeoutMs;
    this.#logger = parts.logger;
    this.#tls = parts.tls;
  }

  /**
   * Starts serving.
   *
   * @param engine The engine answering the RPCs.
   * @param options Address, port, header forwarding, message size, keepalive, TLS and logger.
   * @returns The running front end.
   * @throws {TritonBadParameterError} For a bad port, size, keepalive time, pattern or TLS
   *   setting.
   * @throws {TritonError} When the address cannot be bound.
   */
  static async start(engine: Engine, options: GrpcFrontendOptions = {}): Promise<GrpcFrontend> {
    const address = options.address ?? "0.0.0.0";
    const port = options.port ?? 8001;
    if (!Number.isInteger(port) || port < 0 || port > 65535) {
      throw new TritonBadParameterError(`Invalid gRPC port: ${port} is not within [0, 65535]`);
    }
    const maxMessageBytes = options.maxMessageBytes ?? DEFAULT_MAX_MESSAGE_BYTES;
    if (!Number.isInteger(maxMessageBytes) || maxMessageBytes < 1) {
      throw new TritonBadParameterError(
        `Invalid gRPC maxMessageBytes: ${maxMessageBytes} is not a positive integer`,
      );
    }
    const pattern = compileHeaderForwardPattern(
      options.headerForwardPattern,
      "gRPC headerForwardPattern",
    );
    const keepaliveTimeMs = positiveInteger(
      "keepaliveTimeMs",
      options.keepaliveTimeMs ?? DEFAULT_KEEPALIVE_TIME_MS,
    );
    const keepaliveTimeoutMs = positiveInteger(
      "keepaliveTimeoutMs",
      options.keepaliveTimeoutMs ?? DEFAULT_KEEPALIVE_TIMEOUT_MS,
    );
    const tls = tlsOf(options.tls);
    const logger = options.logger ?? new Logger();
    const { inference, health } = createServices(engine, {
      ...(pattern !== undefined ? { headerForwardPattern: pattern } : {}),
      logger,
      ...(options.repository === undefined ? {} : { repository: options.repository }),
      ...(options.sharedMemory !== undefined ? { sharedMemory: options.sharedMemory } : {}),
      ...(options.tracer !== undefined ? { tracer: options.tracer } : {}),
    });
    const accessCheck = options.security === undefined
      ? undefined
      : grpcAccessCheck(options.security);
    const cannotStart = (error: unknown): TritonError =>
      new TritonError(
        `Cannot start the gRPC front end on ${hostPort(address, port)}: ${messageOf(error)}`,
        { cause: error },
      );
    let server: Http2Server;
    try {
      server = await listenGrpc([inference, health], {
        hostname: address.replace(/^\[(.*)\]$/, "$1"),
        port,
        maxMessageBytes,
        keepaliveTimeMs,
        keepaliveTimeoutMs,
        rawFields: RAW_INPUT_FIELDS,
        ...(accessCheck === undefined ? {} : { accessCheck }),
        ...(tls === undefined ? {} : { tls }),
      });
    } catch (error) {
      throw cannotStart(error);
    }
    const host = address === "0.0.0.0" || address === "::" || address === "[::]"
      ? "127.0.0.1"
      : address;
    return new GrpcFrontend({
      server,
      port: server.port,
      host,
      shutdownTimeoutMs: options.shutdownTimeoutMs ?? 5000,
      logger,
      tls: options.tls !== undefined,
    });
  }

  /** The port the server listens on. */
  get port(): number {
    return this.#port;
  }

  /** The URL clients use, e.g. `grpc://127.0.0.1:8001`, or `grpcs://...` over TLS. */
  get url(): string {
    return `${this.#tls ? "grpcs" : "grpc"}://${hostPort(this.#host, this.#port)}`;
  }

  /**
   * Stops accepting calls, waits for calls in flight (up to the shutdown timeout), then
   * cancels whatever is left. Idempotent.
   *
   * @returns A promise resolving once the server is closed.
   */
  shutdown(): Promise<void> {
    this.#stopping ??= new Promise<void>((resolve) => {
      const timer = setTimeout(() => {
        this.#logger.warn("gRPC calls still running at shutdown: cancelling them");
        this.#server.forceShutdown();
      }, this.#shutdownTimeoutMs);
      this.#server.tryShutdown(() => {
        clearTimeout(timer);
        resolve();
      });
    });
    return this.#stopping;
  }

  /** Same as {@linkcode GrpcFrontend.shutdown}. */
  async [Symbol.asyncDispose](): Promise<void> {
    await this.shutdown();
  }
}
