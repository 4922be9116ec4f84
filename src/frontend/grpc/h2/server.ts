/**
 * An HTTP/2 server, cleartext on `Deno.listen` or TLS on `tls.ts`'s listener: each connection an
 * {@linkcode Http2ServerSession}; for gRPC ({@linkcode listenGrpc}), each stream a call of the
 * given services ({@linkcode serveCall}).
 *
 * @module
 */

import { Http2ServerSession, type Http2ServerStream, type Http2SessionOptions } from "./session.ts";
import type { Http2Transport } from "./transport.ts";
import { TlsListener } from "./tls.ts";
import { type CallOptions, methodsOf, serveCall } from "./calls.ts";
import type { AccessCheck, Service } from "../call.ts";
import { BufferPool } from "../buffer_pool.ts";
import { CONNECTION_WINDOW_BYTES, STREAM_WINDOW_BYTES } from "../connection_tuning.ts";

/** Options of {@linkcode listenGrpc}. */
export interface ListenGrpcOptions {
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
  /**
   * Where the buffers of large responses come from; each goes back once its bytes are sent.
   *
   * @default {new BufferPool()}
   */
  pool?: BufferPool;
  /**
   * Refuses calls to restricted endpoint groups.
   *
   * @default {undefined}
   */
  accessCheck?: AccessCheck;
  /**
   * Serve over TLS (ALPN `h2`) with this certificate, and under mutual TLS check clients'.
   *
   * @default {undefined}
   */
  tls?: {
    /** The server's PEM certificate chain. */
    cert: Uint8Array;
    /** The server's PEM private key. */
    key: Uint8Array;
    /** PEM root certificates that client certificates must chain to. */
    ca?: Uint8Array;
    /** Refuse clients without a certificate signed by `ca`. */
    requestClientCert: boolean;
  };
}

/** What {@linkcode Http2Server} accepts connections from: a `Deno.Listener`, or a TLS one. */
export interface Http2Listener extends AsyncIterable<Http2Transport> {
  /** The address listened on. */
  readonly addr: { readonly port: number };
  /** Stops listening. */
  close(): void;
}

/**
 * Serves HTTP/2 on a listener: each connection an {@linkcode Http2ServerSession}, each new stream
 * handed to `onStream`. {@linkcode listenGrpc} serves gRPC calls with it.
 *
 * @example Answering every request with "ok", then stopping
 * ```ts ignore
 * import { Http2Server } from "./server.ts";
 *
 * const server = new Http2Server(Deno.listen({ hostname: "127.0.0.1", port: 0 }), (stream) => {
 *   stream.onend = () => {
 *     stream.respond([[":status", "200"]]);
 *     stream.write(new TextEncoder().encode("ok"));
 *     stream.end([]);
 *   };
 * });
 * await new Promise<void>((resolve) => server.tryShutdown(resolve));
 * ```
 */
export class Http2Server {
  readonly #listener: Http2Listener;
  readonly #sessions = new Set<Http2ServerSession>();
  #closing = false;

  /**
   * Starts accepting connections on the listener; the server closes it when it stops.
   *
   * @param listener The listener (cleartext `Deno.listen`, or `tls.ts`'s).
   * @param onStream Called for each new stream of any connection.
   * @param options The sessions' windows, limits and keepalive.
   */
  constructor(
    listener: Http2Listener,
    onStream: (stream: Http2ServerStream) => void,
    options: Http2SessionOptions = {},
  ) {
    this.#listener = listener;
    (async () => {
      for await (const conn of listener) {
        if (this.#closing) {
          conn.close();
          continue;
        }
        const session = new Http2ServerSession(conn, onStream, options);
        this.#sessions.add(session);
        session.closed.then(() => this.#sessions.delete(session));
      }
    })().catch(() => {
      // The listener was closed.
    });
  }

  /** The port listened on. */
  get port(): number {
    return this.#listener.addr.port;
  }

  /**
   * Stops taking connections and streams; calls back once the streams in flight are done.
   *
   * @param callback Called once every connection is closed.
   */
  tryShutdown(callback: () => void): void {
    this.#stopListening();
    for (const session of this.#sessions) session.close();
    Promise.all([...this.#sessions].map((session) => session.closed)).then(() => callback());
  }

  /** Closes every connection now, ending the streams in flight. */
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

/**
 * Serves gRPC services over HTTP/2, cleartext or TLS.
 *
 * @param services The services served.
 * @param options Address, limits, keepalive, access check and TLS.
 * @returns The server, once it listens.
 * @throws {Deno.errors.AddrInUse} And the other errors of `Deno.listen`, or of `node:tls` under
 *   TLS (an address in use, certificates that are not valid PEM).
 *
 * @example Serving nothing, then stopping
 * ```ts ignore
 * import { listenGrpc } from "./server.ts";
 *
 * const server = await listenGrpc([], {
 *   hostname: "127.0.0.1",
 *   port: 0,
 *   maxMessageBytes: 1 << 20,
 *   keepaliveTimeMs: 7_200_000,
 *   keepaliveTimeoutMs: 20_000,
 * });
 * await new Promise<void>((resolve) => server.tryShutdown(resolve));
 * ```
 */
export async function listenGrpc(
  services: readonly Service[],
  options: ListenGrpcOptions,
): Promise<Http2Server> {
  const address = { hostname: options.hostname, port: options.port };
  const listener: Http2Listener = options.tls === undefined
    ? Deno.listen(address)
    : await TlsListener.listen({ ...address, ...options.tls });
  const calls: CallOptions = {
    methods: methodsOf(services),
    maxMessageBytes: options.maxMessageBytes,
    rawFields: options.rawFields ?? new Map(),
    pool: options.pool ?? new BufferPool(),
    accessCheck: options.accessCheck,
  };
  return new Http2Server(listener, (stream) => serveCall(stream, calls), {
    streamWindow: STREAM_WINDOW_BYTES,
    connectionWindow: CONNECTION_WINDOW_BYTES,
    keepaliveTimeMs: options.keepaliveTimeMs,
    keepaliveTimeoutMs: options.keepaliveTimeoutMs,
  });
}
