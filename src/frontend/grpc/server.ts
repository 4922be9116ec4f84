/**
 * The gRPC front end: serves `inference.GRPCInferenceService` (KServe v2 with Triton's
 * extensions) and `grpc.health.v1.Health` over cleartext HTTP/2 with `@grpc/grpc-js`.
 *
 * @module
 */

import * as grpc from "@grpc/grpc-js";
import type { Engine } from "../../engine/engine.ts";
import { TritonBadParameterError, TritonError } from "../../errors.ts";
import { Logger } from "../../log.ts";
import type { ResolvedSecurityConfig } from "../../config/security_config.ts";
import { withAccessCheck } from "./access.ts";
import { createServices, type GrpcService } from "./service.ts";

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
   * (Triton's `--grpc-header-forward-pattern`).
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
   * Access tokens for restricted endpoint groups.
   *
   * @default {undefined}
   */
  security?: ResolvedSecurityConfig;
}

const DEFAULT_MAX_MESSAGE_BYTES = 64 * 1024 * 1024;

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
  #server: grpc.Server;
  #port: number;
  #host: string;
  #shutdownTimeoutMs: number;
  #logger: Logger;
  #stopping: Promise<void> | undefined;

  private constructor(
    server: grpc.Server,
    port: number,
    host: string,
    shutdownTimeoutMs: number,
    logger: Logger,
  ) {
    this.#server = server;
    this.#port = port;
    this.#host = host;
    this.#shutdownTimeoutMs = shutdownTimeoutMs;
    this.#logger = logger;
  }

  /**
   * Starts serving.
   *
   * @param engine The engine answering the RPCs.
   * @param options Address, port, header forwarding, message size and logger.
   * @returns The running front end.
   * @throws {TritonBadParameterError} For a bad port, size or pattern.
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
    let pattern: RegExp | undefined;
    try {
      pattern = typeof options.headerForwardPattern === "string"
        ? new RegExp(options.headerForwardPattern)
        : options.headerForwardPattern;
    } catch (error) {
      throw new TritonBadParameterError(
        `Invalid gRPC headerForwardPattern: ${(error as Error).message}`,
        { cause: error },
      );
    }
    const server = new grpc.Server({
      "grpc.max_receive_message_length": maxMessageBytes,
      "grpc.max_send_message_length": maxMessageBytes,
    });
    const logger = options.logger ?? new Logger();
    const { inference, health } = createServices(engine, {
      ...(pattern !== undefined ? { headerForwardPattern: pattern } : {}),
      logger,
    });
    const guard = (service: GrpcService): GrpcService =>
      options.security === undefined ? service : withAccessCheck(service, options.security);
    const [checkedInference, checkedHealth] = [guard(inference), guard(health)];
    server.addService(checkedInference.definition, checkedInference.implementation);
    server.addService(checkedHealth.definition, checkedHealth.implementation);
    const bound = await new Promise<number>((resolve, reject) => {
      server.bindAsync(
        hostPort(address, port),
        grpc.ServerCredentials.createInsecure(),
        (error, boundPort) => error ? reject(error) : resolve(boundPort),
      );
    }).catch((error: unknown) => {
      server.forceShutdown();
      throw new TritonError(
        `Cannot start the gRPC front end on ${hostPort(address, port)}: ${
          error instanceof Error ? error.message : String(error)
        }`,
        { cause: error },
      );
    });
    const host = address === "0.0.0.0" || address === "::" || address === "[::]"
      ? "127.0.0.1"
      : address;
    return new GrpcFrontend(
      server,
      bound,
      host,
      options.shutdownTimeoutMs ?? 5000,
      logger,
    );
  }

  /** The port the server listens on. */
  get port(): number {
    return this.#port;
  }

  /** The URL clients use, e.g. `grpc://127.0.0.1:8001`. */
  get url(): string {
    return `grpc://${hostPort(this.#host, this.#port)}`;
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
