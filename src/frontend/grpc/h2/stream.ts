/**
 * One HTTP/2 stream as the application sees it ({@linkcode Http2ServerStream}), and the state
 * the session keeps for it ({@linkcode Stream}): windows, what each side has ended, the body
 * waiting for window, and the length the request announced.
 *
 * @module
 */

import { ErrorCode } from "./frames.ts";
import type { HeaderField } from "./hpack.ts";

/** The state of one stream that the application sees. */
export interface Http2ServerStream {
  /** The stream identifier. */
  readonly id: number;
  /** The request's header fields, pseudo-headers (`:path`, ...) included, in order. */
  readonly headers: readonly HeaderField[];
  /**
   * Called with each piece of the request body. The view is only valid during the call: the
   * session reads the next bytes into the same memory. Set it in the `onStream` callback.
   */
  ondata: ((chunk: Uint8Array) => void) | undefined;
  /** Called once the client has sent all of its body (END_STREAM). */
  onend: (() => void) | undefined;
  /**
   * Aborted when the stream ends before the server has answered: the client reset it, or the
   * connection closed.
   */
  readonly signal: AbortSignal;
  /**
   * Sends the response headers.
   *
   * @param fields `:status` first, then the other fields (lower-case).
   * @param endStream Whether these headers are the whole response.
   */
  respond(fields: readonly HeaderField[], endStream?: boolean): void;
  /**
   * Queues body bytes, sent as flow control allows.
   *
   * @param bytes The bytes; the session keeps a view of them, so they must not change until the
   *   promise settles.
   * @returns Settles once the bytes were handed to the socket, or dropped because the stream
   *   ended; either way the caller may reuse them.
   */
  write(bytes: Uint8Array): Promise<void>;
  /**
   * Ends the response with trailers, after the queued body.
   *
   * @param trailers The trailing fields; none (an empty list) ends the stream with the last
   *   DATA frame instead.
   */
  end(trailers: readonly HeaderField[]): void;
  /**
   * Ends the stream at once with RST_STREAM.
   *
   * @param code The HTTP/2 error code.
   * @default {ErrorCode.CANCEL}
   */
  reset(code?: number): void;
}

/** Body bytes waiting for flow-control window. */
export interface Pending {
  /** The bytes the application wrote. */
  readonly bytes: Uint8Array;
  /** How many of them were sent. */
  offset: number;
  /** Called once they all were handed to the socket, or dropped. */
  readonly done: () => void;
}

/** What a stream asks of its session. */
export interface StreamOwner {
  /** Sends a header block on the stream. */
  sendHeaders(stream: Stream, fields: readonly HeaderField[], endStream: boolean): void;
  /** Resets the stream. */
  resetStream(stream: Stream, code: number, reason: string): void;
  /** Sends what flow control allows of the queued bodies, soon. */
  flush(): void;
}

/** What a {@linkcode Stream} starts with, from the request's HEADERS and both sides' settings. */
export interface StreamInit {
  /** The request's fields. */
  readonly headers: readonly HeaderField[];
  /** The peer's initial stream window. */
  readonly sendWindow: number;
  /** This side's initial stream window. */
  readonly receiveWindow: number;
  /** The `content-length` the request announced, or -1. */
  readonly contentLength: number;
}

/** One open stream's state, kept by the session. */
export class Stream implements Http2ServerStream {
  /** See {@linkcode Http2ServerStream.ondata}. */
  ondata: ((chunk: Uint8Array) => void) | undefined = undefined;
  /** See {@linkcode Http2ServerStream.onend}. */
  onend: (() => void) | undefined = undefined;
  /** Aborts {@linkcode Stream.signal}. */
  readonly controller = new AbortController();
  /** See {@linkcode Http2ServerStream.signal}. */
  readonly signal: AbortSignal = this.controller.signal;
  /** How many body bytes the peer lets this side send. */
  sendWindow: number;
  /** How many body bytes the peer may send. */
  receiveWindow: number;
  /** Bytes received since the last WINDOW_UPDATE this side sent. */
  receiveConsumed = 0;
  /** Whether the peer ended its side (END_STREAM). */
  remoteClosed = false;
  /** Whether this side ended its side. */
  localClosed = false;
  /**
   * Whether this side has sent the response's HEADERS: a reset after that is a client giving up
   * on an answer it is getting, not the rapid reset `reset_limit.ts` bounds.
   */
  responseStarted = false;
  /** Body bytes waiting for window. */
  pending: Pending[] = [];
  /** The trailers to send once the body is out, once the application ended the response. */
  trailers: readonly HeaderField[] | undefined = undefined;
  /** Body bytes received (padding aside), held against `contentLength`. */
  received = 0;

  /** The request's fields. */
  readonly headers: readonly HeaderField[];
  /** The `content-length` the request announced, or -1. */
  readonly contentLength: number;

  /**
   * Makes the state of a stream the client opened.
   *
   * @param id The stream identifier.
   * @param session The session that owns the stream.
   * @param init The request's fields, the two initial stream windows and the announced length.
   */
  constructor(readonly id: number, readonly session: StreamOwner, init: StreamInit) {
    this.headers = init.headers;
    this.sendWindow = init.sendWindow;
    this.receiveWindow = init.receiveWindow;
    this.contentLength = init.contentLength;
  }

  respond(fields: readonly HeaderField[], endStream = false): void {
    if (this.localClosed) return;
    this.session.sendHeaders(this, fields, endStream);
  }

  write(bytes: Uint8Array): Promise<void> {
    if (this.localClosed || this.trailers !== undefined || bytes.length === 0) {
      return Promise.resolve();
    }
    const { promise, resolve } = Promise.withResolvers<void>();
    this.pending.push({ bytes, offset: 0, done: resolve });
    this.session.flush();
    return promise;
  }

  end(trailers: readonly HeaderField[]): void {
    if (this.localClosed || this.trailers !== undefined) return;
    this.trailers = trailers;
    this.session.flush();
  }

  reset(code: number = ErrorCode.CANCEL): void {
    if (this.localClosed && this.remoteClosed) return;
    this.session.resetStream(this, code, "the server reset the stream");
  }
}
