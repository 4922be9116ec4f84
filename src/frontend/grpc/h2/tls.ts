/**
 * TLS under the HTTP/2 session: a listener on `node:tls` that yields each connection, once ALPN
 * chose `h2`, as an {@linkcode Http2Transport} (the session reads and writes it as it does a
 * `Deno.Conn`).
 *
 * Why `node:tls` and not `Deno.listenTls`: mutual TLS. `Deno.listenTls` (Deno 2.9) takes a
 * certificate, a key and ALPN protocols, and has no way to ask for a client certificate or to
 * check one against root certificates; `node:tls` under Deno does both (`requestCert`, `ca`,
 * `rejectUnauthorized`). Why not grpc-js on `node:http2`, which served TLS before: one client's
 * frames could end the whole process there (h2spec's stream-state tests made grpc-js call
 * `stream.respond` on a stream Deno's `node:http2` had destroyed, and the error was thrown
 * where nothing could catch it), while this session answers them as RFC 9113 says.
 *
 * @module
 */

import tls from "node:tls";
import { Buffer } from "node:buffer";
import type { Http2Transport } from "./transport.ts";

/** Options of {@linkcode TlsListener.listen}. */
export interface TlsListenOptions {
  /** The address to listen on. */
  hostname: string;
  /** The port; 0 picks a free one. */
  port: number;
  /** The server's PEM certificate chain. */
  cert: Uint8Array;
  /** The server's PEM private key. */
  key: Uint8Array;
  /**
   * PEM root certificates that client certificates must chain to.
   *
   * @default {undefined}
   */
  ca?: Uint8Array;
  /**
   * Mutual TLS: refuse clients without a certificate signed by `ca`.
   *
   * @default {false}
   */
  requestClientCert?: boolean;
}

/** Received bytes held per connection before the socket is paused (the session reads on). */
const HIGH_WATER = 1024 * 1024;

/** A TLS socket as the session's transport: received chunks queued, read into its buffer. */
class SocketTransport implements Http2Transport {
  readonly #socket: tls.TLSSocket;
  readonly #chunks: Uint8Array[] = [];
  #offset = 0;
  #bytes = 0;
  #ended = false;
  #wake: (() => void) | undefined;

  constructor(socket: tls.TLSSocket) {
    this.#socket = socket;
    // Small frames (acknowledgements, headers, trailers) must not wait for Nagle's algorithm.
    socket.setNoDelay(true);
    socket.on("data", (chunk: Buffer) => {
      this.#chunks.push(chunk);
      this.#bytes += chunk.length;
      if (this.#bytes >= HIGH_WATER) socket.pause();
      this.#signal();
    });
    // An error ends the connection: the session reads its end and closes.
    const end = (): void => {
      this.#ended = true;
      this.#signal();
    };
    socket.on("end", end);
    socket.on("close", end);
    socket.on("error", end);
  }

  #signal(): void {
    const wake = this.#wake;
    this.#wake = undefined;
    wake?.();
  }

  async read(buffer: Uint8Array): Promise<number | null> {
    while (this.#bytes === 0) {
      if (this.#ended) return null;
      await new Promise<void>((resolve) => this.#wake = resolve);
    }
    let n = 0;
    while (n < buffer.length && this.#chunks.length > 0) {
      const chunk = this.#chunks[0]!;
      const take = Math.min(chunk.length - this.#offset, buffer.length - n);
      buffer.set(chunk.subarray(this.#offset, this.#offset + take), n);
      n += take;
      this.#offset += take;
      if (this.#offset === chunk.length) {
        this.#chunks.shift();
        this.#offset = 0;
      }
    }
    this.#bytes -= n;
    if (this.#bytes < HIGH_WATER && this.#socket.isPaused()) this.#socket.resume();
    return n;
  }

  write(bytes: Uint8Array): Promise<number> {
    return new Promise((resolve, reject) => {
      // The callback comes once the socket took the bytes: the session may then reuse them.
      this.#socket.write(bytes, (error) => error ? reject(error) : resolve(bytes.length));
    });
  }

  close(): void {
    this.#socket.destroy();
  }
}

/**
 * A TLS listener whose connections speak HTTP/2 (ALPN `h2`): others are closed after the
 * handshake, as are clients that fail it (a cleartext client, or under mutual TLS one without
 * a valid certificate).
 *
 * @example Listening on a free port, then closing
 * ```ts ignore
 * import { TlsListener } from "./tls.ts";
 *
 * const [cert, key] = [Deno.readFileSync("server.pem"), Deno.readFileSync("server.key")];
 * const listener = await TlsListener.listen({ hostname: "127.0.0.1", port: 0, cert, key });
 * console.log(listener.addr.port);
 * listener.close();
 * ```
 */
export class TlsListener implements AsyncIterable<Http2Transport> {
  readonly #server: tls.Server;
  readonly #accepted: Http2Transport[] = [];
  #wake: (() => void) | undefined;
  #closed = false;

  private constructor(server: tls.Server) {
    this.#server = server;
    server.on("secureConnection", (socket: tls.TLSSocket) => {
      // Listened for before anything else, so that no socket error goes uncaught.
      socket.on("error", () => {});
      if (socket.alpnProtocol !== "h2" || this.#closed) {
        socket.destroy();
        return;
      }
      this.#accepted.push(new SocketTransport(socket));
      this.#signal();
    });
    server.on("tlsClientError", (_error: Error, socket: tls.TLSSocket) => socket.destroy());
    // Errors of the listening socket after it listens (e.g. out of file descriptors) drop
    // that connection only.
    server.on("error", () => {});
  }

  /**
   * Starts listening.
   *
   * @param options Address, certificates and whether clients must present one.
   * @returns The listener, once it listens.
   * @throws {Error} When the address cannot be bound, or the certificates are not valid PEM.
   */
  static async listen(options: TlsListenOptions): Promise<TlsListener> {
    const server = tls.createServer({
      cert: Buffer.from(options.cert),
      key: Buffer.from(options.key),
      ...(options.ca === undefined ? {} : { ca: Buffer.from(options.ca) }),
      requestCert: options.requestClientCert ?? false,
      rejectUnauthorized: options.requestClientCert ?? false,
      ALPNProtocols: ["h2"],
    });
    const listener = new TlsListener(server);
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(options.port, options.hostname, () => {
        server.off("error", reject);
        resolve();
      });
    });
    return listener;
  }

  /** The address listened on. */
  get addr(): { port: number } {
    return { port: (this.#server.address() as { port: number }).port };
  }

  /** Stops listening; connections already accepted go on. */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#server.close();
    for (const transport of this.#accepted.splice(0)) transport.close();
    this.#signal();
  }

  #signal(): void {
    const wake = this.#wake;
    this.#wake = undefined;
    wake?.();
  }

  /** Yields each accepted connection, until the listener is closed. */
  async *[Symbol.asyncIterator](): AsyncIterator<Http2Transport> {
    for (;;) {
      const next = this.#accepted.shift();
      if (next !== undefined) {
        yield next;
        continue;
      }
      if (this.#closed) return;
      await new Promise<void>((resolve) => this.#wake = resolve);
    }
  }
}
