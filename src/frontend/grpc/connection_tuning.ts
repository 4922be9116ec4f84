/**
 * The HTTP/2 flow-control windows the gRPC front end's session (`h2/session.ts`, cleartext and
 * TLS) advertises, which large tensors need.
 *
 * HTTP/2's default windows are 64 KiB: a client sending a 4 MiB tensor under them stops every
 * 32 KiB to wait for a `WINDOW_UPDATE` from this event loop. Triton's gRPC server (grpc core)
 * grows its windows to megabytes; these let a whole message of the default size arrive without
 * waiting. (The session keeps HTTP/2's default frame size, which h2spec needs: `h2/session.ts`
 * says why.)
 *
 * @module
 */

/** The flow-control window of each stream: a message of 16 MiB arrives without waiting. */
export const STREAM_WINDOW_BYTES = 16 * 1024 * 1024;

/** The flow-control window of each connection, shared by its streams. */
export const CONNECTION_WINDOW_BYTES = 64 * 1024 * 1024;
