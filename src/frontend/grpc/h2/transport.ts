/**
 * The connection an HTTP/2 session runs on, as the session (`session.ts`) reads it and its
 * writer (`writer.ts`) writes it: a `Deno.Conn` (h2c) has this shape, and so has `tls.ts`'s
 * socket after ALPN chose `h2`.
 *
 * @module
 */

/** What the session needs of a connection: a `Deno.Conn` has it, and so has `tls.ts`'s. */
export interface Http2Transport {
  /** Reads into `buffer`; null at the end of the stream. */
  read(buffer: Uint8Array): Promise<number | null>;
  /** Writes from `bytes`; settles with how many were taken. */
  write(bytes: Uint8Array): Promise<number>;
  /** Closes the connection. */
  close(): void;
}
