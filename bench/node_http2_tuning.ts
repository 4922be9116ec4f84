/**
 * HTTP/2 connection settings for `bench/grpc_ceiling.ts`'s `node:http2` echo, so that it stands
 * for the best a `node:http2` server does with large tensors here (`node:http2` has no option
 * for them; the front end itself serves gRPC on its own session, `src/frontend/grpc/h2/`):
 *
 * - Flow-control windows: the ones the front end's session advertises
 *   (`src/frontend/grpc/connection_tuning.ts`).
 * - Frame size. A peer may send DATA frames no larger than this side's `SETTINGS_MAX_FRAME_SIZE`,
 *   16 KiB by default. Advertising HTTP/2's maximum lets grpc core clients (tritonclient,
 *   perf_analyzer) send larger frames: grpcio's 4 MiB message then reached the stream as 81
 *   pieces of up to 64 KiB instead of 322 of 16 KiB, a quarter as many for Deno's HTTP/2 session
 *   to take in. (Deno sends its own frames at 16 KiB whatever the peer allows.)
 * - Write coalescing. Deno's HTTP/2 session writes each frame (header and payload apart) to the
 *   socket with its own call, about 500 `write(2)` calls for a 4 MiB response. Corking the socket
 *   until the current tick ends sends the frames written in that tick with one `writev(2)`.
 *
 * @module
 */

import process from "node:process";
import {
  CONNECTION_WINDOW_BYTES,
  STREAM_WINDOW_BYTES,
} from "../src/frontend/grpc/connection_tuning.ts";

/** The largest frame a peer may send: HTTP/2's maximum, 2^24 − 1 bytes. */
export const MAX_FRAME_BYTES = 16 * 1024 * 1024 - 1;

/** What this module uses of a Node HTTP/2 session. */
interface Session {
  settings(settings: { initialWindowSize: number; maxFrameSize: number }): void;
  setLocalWindowSize(bytes: number): void;
}

/** What this module uses of a socket. */
interface Corkable {
  write: (...args: never[]) => boolean;
  cork(): void;
  uncork(): void;
}

/** What this module uses of a Node HTTP/2 server. */
export interface Http2ServerLike {
  on(event: "session", listener: (session: Session) => void): unknown;
  on(event: "connection" | "secureConnection", listener: (socket: Corkable) => void): unknown;
}

/**
 * Makes a socket send what is written to it in one tick with one system call: the first write
 * of a tick corks it, and the end of the tick uncorks it.
 *
 * @param socket A writable socket (`net.Socket` or `tls.TLSSocket`).
 *
 * @example Two writes in one tick reach the socket together
 * ```ts
 * import { corkPerTick } from "./node_http2_tuning.ts";
 * import { Writable } from "node:stream";
 * import assert from "node:assert/strict";
 *
 * const calls: number[] = [];
 * const socket = new Writable({
 *   write(_chunk, _encoding, done) { calls.push(1); done(); },
 *   writev(chunks, done) { calls.push(chunks.length); done(); },
 * });
 * corkPerTick(socket);
 * socket.write("a");
 * socket.write("b");
 * await new Promise((resolve) => setTimeout(resolve, 0));
 * assert.deepEqual(calls, [2]);
 * ```
 */
export function corkPerTick(socket: Corkable): void {
  const write = socket.write;
  let corked = false;
  const uncork = (): void => {
    corked = false;
    socket.uncork();
  };
  socket.write = function (this: Corkable, ...args: never[]): boolean {
    if (!corked) {
      corked = true;
      socket.cork();
      process.nextTick(uncork);
    }
    return write.apply(this, args);
  };
}

/**
 * Applies the windows, frame size and write coalescing to every connection an HTTP/2 server
 * accepts from now on.
 *
 * @param http2Server A `node:http2` server.
 * @param tls Whether it serves TLS (its sockets come from `secureConnection`).
 *
 * @example
 * ```ts
 * import http2 from "node:http2";
 * import { tuneHttp2Server } from "./node_http2_tuning.ts";
 *
 * const server = http2.createServer();
 * tuneHttp2Server(server, false);
 * ```
 */
export function tuneHttp2Server(http2Server: Http2ServerLike, tls: boolean): void {
  http2Server.on("session", (session) => {
    session.settings({ initialWindowSize: STREAM_WINDOW_BYTES, maxFrameSize: MAX_FRAME_BYTES });
    session.setLocalWindowSize(CONNECTION_WINDOW_BYTES);
  });
  http2Server.on(tls ? "secureConnection" : "connection", corkPerTick);
}
