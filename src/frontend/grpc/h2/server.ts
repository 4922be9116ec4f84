/**
 * A cleartext gRPC server on `Deno.listen`: each connection an {@linkcode Http2ServerSession},
 * each stream a call of the given services ({@linkcode serveCall}).
 *
 * @module
 */

import { Http2ServerSession } from "./session.ts";
import { type CallOptions, methodsOf, serveCall } from "./calls.ts";
import type { GrpcService } from "../service.ts";
import { BufferPool } from "../buffer_pool.ts";
import { CONNECTION_WINDOW_BYTES, STREAM_WINDOW_BYTES } from "../connection_tuning.ts";

/** Options of {@linkcode H2GrpcServer.listen}. */
export interface H2GrpcServerOptions {
  /** The address to listen on. */
  hostname: string;
  /** The port; 0 picks a free one. */
  port: number;
  /** The largest message received or sent, bytes. */
  maxMessageBytes: number;
  /** Milliseconds between keepalive PINGs on each connection. */
  keepaliveTimeMs: number;
  /** How long a keepalive PING may go unanswered, ms. */
  keepaliveTimeoutMs: number;
  /**
   * The raw-contents field to align in requests, by method path.
   *
   * @default {new Map()}
   */
  rawFields?: ReadonlyMap<string, number>;
}

/**
 * Serves gRPC services over HTTP/2 without TLS.
 *
 * @example Serving nothing, then stopping
 * ```ts ignore
 * import { H2GrpcServer } from "./server.ts";
 *
 * const server = H2GrpcServer.listen([], {
 *   hostname: "127.0.0.1",
 *   port: 0,
 *   maxMessageBytes: 1 << 20,
 *   keepaliveTimeMs: 7_200_000,
 *   keepaliveTimeoutMs: 20_000,
 * });
 * await new Promise<void>((resolve) => server.tryShutdown(resolve));
 * ```
 */
export class H2GrpcServer {
  readonly #listener: Deno.TcpListener;
  readonly #sessions = new Set<Http2ServerSession>();
  #closing = false;

  private constructor(
    listener: Deno.TcpListener,
    services: readonly GrpcService[],
    options: H2GrpcServerOptions,
  ) {
    this.#listener = listener;
    const calls: CallOptions = {
      methods: methodsOf(services),
      maxMessageBytes: options.maxMessageBytes,
      rawFields: options.rawFields ?? new Map(),
      pool: new BufferPool(),
    };
    const sessionOptions = {
      streamWindow: STREAM_WINDOW_BYTES,
      connectionWindow: CONNECTION_WINDOW_BYTES,
      keepaliveTimeMs: options.keepaliveTimeMs,
      keepaliveTimeoutMs: options.keepaliveTimeoutMs,
    };
    (async () => {
      for await (const conn of listener) {
        if (this.#closing) {
          conn.close();
          continue;
        }
        const session = new Http2ServerSession(
          conn,
          (stream) => serveCall(stream, calls),
          sessionOptions,
        );
        this.#sessions.add(session);
        session.closed.then(() => this.#sessions.delete(session));
      }
    })().catch(() => {
      // The listener was closed.
    });
  }

  /**
   * Starts listening.
   *
   * @param services The services served.
   * @param options Address, limits and keepalive.
   * @returns The server.
   * @throws {Deno.errors.AddrInUse} And the other errors of `Deno.listen`.
   */
  static listen(services: readonly GrpcService[], options: H2GrpcServerOptions): H2GrpcServer {
    const listener = Deno.listen({ hostname: options.hostname, port: options.port });
    return new H2GrpcServer(listener, services, options);
  }

  /** The port listened on. */
  get port(): number {
    return this.#listener.addr.port;
  }

  /**
   * Stops taking connections and calls; calls back once the calls in flight are done.
   *
   * @param callback Called once every connection is closed.
   */
  tryShutdown(callback: () => void): void {
    this.#stopListening();
    for (const session of this.#sessions) session.close();
    Promise.all([...this.#sessions].map((session) => session.closed)).then(() => callback());
  }

  /** Closes every connection now, cancelling the calls in flight. */
  forceShutdown(): void {
    this.#stopListening();
    for (const session of this.#sessions) session.destroy();
  }

  #stopListening(): void {
    if (this.#closing) return;
    this.#closing = true;
    try {
      this.#listener.close();
    } catch {
      // Already closed.
    }
  }
}
