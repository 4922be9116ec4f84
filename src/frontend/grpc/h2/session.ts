/**
 * The server side of one HTTP/2 connection (RFC 9113) over a `Deno.Conn`, cleartext with prior
 * knowledge (h2c), as gRPC clients speak it.
 *
 * Why not `node:http2`: under Deno it copies every message several times (into the stream's
 * queue, into 16 KiB DATA frames, into a new buffer per frame for JavaScript, and each received
 * chunk into a new zero-filled buffer). Here bytes are read into one reused buffer and handed to
 * the stream as views; a large message is written to the socket from the caller's own buffer,
 * in frames as large as the peer allows, and small frames are gathered into one write.
 *
 * @module
 */

import {
  ErrorCode,
  Flag,
  frame,
  FRAME_HEADER_BYTES,
  FrameType,
  MAX_WINDOW,
  PREFACE,
  readUint32,
  Setting,
  writeFrameHeader,
  writeUint32,
} from "./frames.ts";
import { type HeaderField, HeaderListTooLargeError, HpackDecoder, HpackEncoder } from "./hpack.ts";

/** Options of {@linkcode Http2ServerSession}. */
export interface Http2SessionOptions {
  /**
   * The flow-control window each stream starts with, bytes.
   *
   * @default {16777216}
   */
  streamWindow?: number;
  /**
   * The connection's flow-control window, bytes.
   *
   * @default {67108864}
   */
  connectionWindow?: number;
  /**
   * The largest header list a request may send (names, values and 32 bytes per field).
   *
   * @default {65536}
   */
  maxHeaderListSize?: number;
  /**
   * Streams a client may have open at once; more are refused (REFUSED_STREAM).
   *
   * @default {1000}
   */
  maxConcurrentStreams?: number;
  /**
   * Milliseconds between the server's keepalive PINGs (sent whether or not the connection is
   * busy); unset sends none.
   *
   * @default {undefined}
   */
  keepaliveTimeMs?: number;
  /**
   * How long a keepalive PING may go unanswered before the connection is closed, ms.
   *
   * @default {20000}
   */
  keepaliveTimeoutMs?: number;
}

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
   * @param trailers The trailing fields.
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

/** What a connection error carries. */
class ConnectionError extends Error {
  constructor(readonly code: number, message: string) {
    super(message);
  }
}

/** Bytes read from the socket at a time (grows for one large non-DATA frame). */
const READ_BYTES = 256 * 1024;
/** Segments at least this large are written from the caller's buffer; smaller ones gathered. */
const GATHER_BELOW = 64 * 1024;
/** Largest payload of a non-DATA frame we hold in memory (header blocks, settings, ...). */
const MAX_CONTROL_FRAME = 1024 * 1024;
/** Unwritten replies (acknowledgements, resets) a connection may owe before it is closed. */
const MAX_QUEUED_REPLIES = 1000;
/** The payload of the server's keepalive PINGs. */
const KEEPALIVE_PAYLOAD = new TextEncoder().encode("dt-alive");
/** The frame size the session accepts (the protocol's largest). */
const MAX_FRAME_SIZE = 16 * 1024 * 1024 - 1;

/** A frame whose payload is one 32-bit value (RST_STREAM's error code, WINDOW_UPDATE's increment). */
function uint32Frame(type: number, stream: number, value: number): Uint8Array {
  const payload = new Uint8Array(4);
  writeUint32(payload, 0, value);
  return frame(type, 0, stream, payload);
}

/** One queued piece of output. */
interface Segment {
  readonly bytes: Uint8Array;
  readonly done: (() => void) | undefined;
}

/** Body bytes waiting for flow-control window. */
interface Pending {
  readonly bytes: Uint8Array;
  offset: number;
  readonly done: () => void;
}

/** What a stream asks of its session. */
interface StreamOwner {
  sendHeaders(stream: Stream, fields: readonly HeaderField[], endStream: boolean): void;
  resetStream(stream: Stream, code: number, reason: string): void;
  flush(): void;
}

/** One stream's state. */
class Stream implements Http2ServerStream {
  ondata: ((chunk: Uint8Array) => void) | undefined = undefined;
  onend: (() => void) | undefined = undefined;
  readonly controller = new AbortController();
  readonly signal = this.controller.signal;
  sendWindow: number;
  receiveWindow: number;
  receiveConsumed = 0;
  remoteClosed = false;
  localClosed = false;
  pending: Pending[] = [];
  trailers: readonly HeaderField[] | undefined = undefined;

  constructor(
    readonly id: number,
    readonly headers: readonly HeaderField[],
    readonly session: StreamOwner,
    sendWindow: number,
    receiveWindow: number,
  ) {
    this.sendWindow = sendWindow;
    this.receiveWindow = receiveWindow;
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

/**
 * Serves one HTTP/2 connection: reads frames, keeps flow control both ways, and hands each new
 * stream to `onStream`.
 *
 * @example A server that answers every request with "ok"
 * ```ts ignore
 * import { Http2ServerSession } from "./session.ts";
 *
 * for await (const conn of Deno.listen({ port: 0 })) {
 *   new Http2ServerSession(conn, (stream) => {
 *     stream.onend = () => {
 *       stream.respond([[":status", "200"]]);
 *       stream.write(new TextEncoder().encode("ok"));
 *       stream.end([]);
 *     };
 *   });
 * }
 * ```
 */
export class Http2ServerSession {
  readonly #conn: Deno.Conn;
  readonly #onStream: (stream: Http2ServerStream) => void;
  readonly #decoder: HpackDecoder;
  readonly #encoder = new HpackEncoder();
  readonly #streams = new Map<number, Stream>();
  readonly #streamWindow: number;
  readonly #connectionWindow: number;
  readonly #maxStreams: number;
  readonly #closed = Promise.withResolvers<void>();
  #out: Segment[] = [];
  #pumping = false;
  #pumpScheduled = false;
  #flushQueued = false;
  #peerFrameSize = 16384;
  #peerInitialWindow = 65535;
  #sendWindow = 65535;
  #receiveWindow = 65535;
  #receiveConsumed = 0;
  #lastStreamId = 0;
  #goingAway = false;
  #ended = false;
  #repliesQueued = 0;
  #keepalive: ReturnType<typeof setTimeout> | undefined;
  #keepaliveTimeMs: number | undefined;
  #keepaliveTimeoutMs: number;
  // A header block that awaits CONTINUATION frames.
  #block: { stream: number; parts: Uint8Array[]; bytes: number; endStream: boolean } | undefined;
  // The DATA frame whose payload is being read.
  #data:
    | { stream: Stream | undefined; left: number; padding: number; endStream: boolean }
    | undefined;

  /**
   * Starts serving the connection; the session closes it when done.
   *
   * @param conn The accepted connection.
   * @param onStream Called for each new stream, once its headers arrived.
   * @param options Windows and limits.
   */
  constructor(
    conn: Deno.Conn,
    onStream: (stream: Http2ServerStream) => void,
    options: Http2SessionOptions = {},
  ) {
    this.#conn = conn;
    // Small frames (acknowledgements, headers, trailers) must not wait for Nagle's algorithm.
    if ("setNoDelay" in conn) (conn as Deno.TcpConn).setNoDelay(true);
    this.#onStream = onStream;
    this.#streamWindow = options.streamWindow ?? 16 * 1024 * 1024;
    this.#connectionWindow = options.connectionWindow ?? 64 * 1024 * 1024;
    this.#maxStreams = options.maxConcurrentStreams ?? 1000;
    const maxHeaderListSize = options.maxHeaderListSize ?? 65536;
    this.#decoder = new HpackDecoder({ maxHeaderListSize });
    const settings = new Uint8Array(24);
    const entries: [number, number][] = [
      [Setting.MAX_CONCURRENT_STREAMS, this.#maxStreams],
      [Setting.INITIAL_WINDOW_SIZE, this.#streamWindow],
      [Setting.MAX_FRAME_SIZE, MAX_FRAME_SIZE],
      [Setting.MAX_HEADER_LIST_SIZE, maxHeaderListSize],
    ];
    entries.forEach(([key, value], i) => {
      settings[i * 6] = key >> 8;
      settings[i * 6 + 1] = key & 0xff;
      writeUint32(settings, i * 6 + 2, value);
    });
    this.#enqueue(frame(FrameType.SETTINGS, 0, 0, settings));
    if (this.#connectionWindow > this.#receiveWindow) {
      this.#enqueue(
        uint32Frame(FrameType.WINDOW_UPDATE, 0, this.#connectionWindow - this.#receiveWindow),
      );
      this.#receiveWindow = this.#connectionWindow;
    }
    this.#keepaliveTimeMs = options.keepaliveTimeMs;
    this.#keepaliveTimeoutMs = options.keepaliveTimeoutMs ?? 20000;
    this.#scheduleKeepalive();
    this.#read().catch(() => this.#end());
  }

  #scheduleKeepalive(): void {
    if (this.#keepaliveTimeMs === undefined || this.#ended) return;
    this.#keepalive = setTimeout(() => {
      this.#enqueue(frame(FrameType.PING, 0, 0, KEEPALIVE_PAYLOAD));
      // Answered: the PING ACK schedules the next one; unanswered, the connection ends.
      this.#keepalive = setTimeout(() => this.#end(), this.#keepaliveTimeoutMs);
    }, this.#keepaliveTimeMs);
  }

  /** Settles once the connection is closed. */
  get closed(): Promise<void> {
    return this.#closed.promise;
  }

  /** Streams open now. */
  get openStreams(): number {
    return this.#streams.size;
  }

  /**
   * Stops taking new streams (GOAWAY) and closes the connection once the open ones are done.
   */
  close(): void {
    if (this.#goingAway || this.#ended) return;
    this.#goingAway = true;
    this.#enqueue(this.#goaway(ErrorCode.NO_ERROR, ""));
    this.#closeIfIdle();
  }

  /** Closes the connection now, ending every open stream. */
  destroy(): void {
    this.#end();
  }

  readonly #owner: StreamOwner = {
    sendHeaders: (stream, fields, endStream) => this.#sendHeaders(stream, fields, endStream),
    resetStream: (stream, code, reason) => this.#resetStream(stream, code, reason),
    flush: () => this.#flush(),
  };

  #sendHeaders(stream: Stream, fields: readonly HeaderField[], endStream: boolean): void {
    const block = this.#encoder.encode(fields);
    let offset = 0;
    let type: number = FrameType.HEADERS;
    do {
      const length = Math.min(block.length - offset, this.#peerFrameSize);
      const last = offset + length === block.length;
      const flags = (last ? Flag.END_HEADERS : 0) |
        (endStream && type === FrameType.HEADERS ? Flag.END_STREAM : 0);
      this.#enqueue(frame(type, flags, stream.id, block.subarray(offset, offset + length)));
      offset += length;
      type = FrameType.CONTINUATION;
    } while (offset < block.length);
    if (endStream) this.#closeLocal(stream);
  }

  #resetStream(stream: Stream, code: number, reason: string): void {
    if (!this.#ended) this.#reply(uint32Frame(FrameType.RST_STREAM, stream.id, code));
    this.#forget(stream, new Error(`HTTP/2 stream ${stream.id} reset: ${reason}`));
  }

  /** Sends what flow control allows of the streams' queued bodies, soon. */
  #flush(): void {
    if (this.#flushQueued) return;
    this.#flushQueued = true;
    queueMicrotask(() => {
      this.#flushQueued = false;
      this.#flushNow();
    });
  }

  #flushNow(): void {
    if (this.#ended) return;
    for (const stream of this.#streams.values()) {
      while (stream.pending.length > 0 && this.#sendWindow > 0 && stream.sendWindow > 0) {
        const head = stream.pending[0]!;
        const length = Math.min(
          head.bytes.length - head.offset,
          this.#peerFrameSize,
          this.#sendWindow,
          stream.sendWindow,
        );
        const header = new Uint8Array(FRAME_HEADER_BYTES);
        writeFrameHeader(header, 0, length, FrameType.DATA, 0, stream.id);
        this.#enqueue(header);
        const last = head.offset + length === head.bytes.length;
        this.#enqueue(
          head.bytes.subarray(head.offset, head.offset + length),
          last ? head.done : undefined,
        );
        head.offset += length;
        this.#sendWindow -= length;
        stream.sendWindow -= length;
        if (last) stream.pending.shift();
      }
      if (stream.pending.length === 0 && stream.trailers !== undefined && !stream.localClosed) {
        this.#sendHeaders(stream, stream.trailers, true);
      }
    }
  }

  /**
   * Queues a frame the peer's own frames call for (PING and SETTINGS acknowledgements, resets).
   * A peer that sends those without reading the answers would grow the queue without end: past
   * {@linkcode MAX_QUEUED_REPLIES} unwritten, the connection is closed.
   */
  #reply(bytes: Uint8Array): void {
    if (this.#repliesQueued >= MAX_QUEUED_REPLIES) return this.#end();
    this.#repliesQueued++;
    this.#enqueue(bytes, () => this.#repliesQueued--);
  }

  #enqueue(bytes: Uint8Array, done?: () => void): void {
    if (this.#ended) {
      done?.();
      return;
    }
    this.#out.push({ bytes, done });
    if (this.#pumping || this.#pumpScheduled) return;
    // Start writing once this turn of the event loop is over, so that what the turn queues (the
    // headers, message and trailers of every call it answered) goes out in one write.
    this.#pumpScheduled = true;
    setImmediate(() => {
      this.#pumpScheduled = false;
      if (!this.#pumping) this.#pump();
    });
  }

  async #pump(): Promise<void> {
    this.#pumping = true;
    try {
      while (this.#out.length > 0 && !this.#ended) {
        // A large segment alone, or the run of small ones at the head gathered into one buffer.
        let count = 1;
        let bytes = this.#out[0]!.bytes;
        let total = bytes.length;
        if (bytes.length < GATHER_BELOW) {
          while (count < this.#out.length && this.#out[count]!.bytes.length < GATHER_BELOW) {
            total += this.#out[count++]!.bytes.length;
          }
        }
        const written = this.#out.splice(0, count);
        if (count > 1) {
          bytes = new Uint8Array(total);
          let at = 0;
          for (const segment of written) {
            bytes.set(segment.bytes, at);
            at += segment.bytes.length;
          }
        }
        for (let at = 0; at < bytes.length;) at += await this.#conn.write(bytes.subarray(at));
        for (const segment of written) segment.done?.();
      }
    } catch {
      this.#end();
    } finally {
      this.#pumping = false;
    }
    if (this.#goingAway && this.#streams.size === 0) this.#end();
  }

  async #read(): Promise<void> {
    let buffer = new Uint8Array(READ_BYTES);
    let have = 0;
    let prefaceSeen = false;
    let settingsSeen = false;
    try {
      while (!this.#ended) {
        if (have === buffer.length) {
          throw new ConnectionError(ErrorCode.INTERNAL_ERROR, "read buffer full");
        }
        const read = await this.#conn.read(buffer.subarray(have));
        if (read === null) return this.#end();
        have += read;
        let at = 0;
        if (!prefaceSeen) {
          const compared = Math.min(have, PREFACE.length);
          for (let i = 0; i < compared; i++) {
            if (buffer[i] !== PREFACE[i]) {
              throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, "not an HTTP/2 preface");
            }
          }
          if (have < PREFACE.length) continue;
          prefaceSeen = true;
          at = PREFACE.length;
        }
        for (;;) {
          if (this.#ended) return;
          if (this.#data !== undefined) {
            at = this.#readData(buffer, at, have);
            if (this.#data !== undefined) break;
          }
          if (have - at < FRAME_HEADER_BYTES) break;
          const length = (buffer[at]! << 16) | (buffer[at + 1]! << 8) | buffer[at + 2]!;
          const type = buffer[at + 3]!;
          const flags = buffer[at + 4]!;
          const id = readUint32(buffer, at + 5) & 0x7fffffff;
          if (length > MAX_FRAME_SIZE) {
            throw new ConnectionError(ErrorCode.FRAME_SIZE_ERROR, `frame of ${length} bytes`);
          }
          if (!settingsSeen && type !== FrameType.SETTINGS) {
            throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, "the first frame is not SETTINGS");
          }
          settingsSeen = true;
          if (type === FrameType.DATA) {
            // A padded frame's first byte is its pad length.
            const padded = (flags & Flag.PADDED) !== 0;
            if (padded && have - at < FRAME_HEADER_BYTES + 1) break;
            this.#startData(id, length, flags, padded ? buffer[at + FRAME_HEADER_BYTES]! : -1);
            at += FRAME_HEADER_BYTES + (padded ? 1 : 0);
            continue;
          }
          if (length > MAX_CONTROL_FRAME) {
            throw new ConnectionError(
              ErrorCode.ENHANCE_YOUR_CALM,
              `frame of type ${type} with ${length} bytes`,
            );
          }
          if (have - at < FRAME_HEADER_BYTES + length) {
            if (FRAME_HEADER_BYTES + length > buffer.length) {
              const larger = new Uint8Array(FRAME_HEADER_BYTES + length);
              larger.set(buffer.subarray(at, have));
              buffer = larger;
              have -= at;
              at = 0;
            }
            break;
          }
          const payload = buffer.subarray(
            at + FRAME_HEADER_BYTES,
            at + FRAME_HEADER_BYTES + length,
          );
          at += FRAME_HEADER_BYTES + length;
          this.#frame(type, flags, id, payload);
        }
        buffer.copyWithin(0, at, have);
        have -= at;
        // Back to the usual size once a large frame is through (not while one is half read).
        if (buffer.length > READ_BYTES && have === 0) buffer = new Uint8Array(READ_BYTES);
      }
    } catch (error) {
      if (error instanceof ConnectionError) {
        this.#enqueue(this.#goaway(error.code, error.message));
        this.#goingAway = true;
        this.#abortAll(new Error(`HTTP/2 connection error: ${error.message}`));
        this.#closeIfIdle();
        return;
      }
      throw error;
    }
  }

  #startData(id: number, length: number, flags: number, padding: number): void {
    if (id === 0) throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, "DATA on stream 0");
    if (padding >= 0 && padding >= length) {
      throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, "DATA padding longer than the frame");
    }
    if (length > this.#receiveWindow) {
      throw new ConnectionError(ErrorCode.FLOW_CONTROL_ERROR, "DATA beyond the connection window");
    }
    this.#receiveWindow -= length;
    this.#receiveConsumed += length;
    if (this.#receiveConsumed >= this.#connectionWindow / 2) {
      this.#enqueue(uint32Frame(FrameType.WINDOW_UPDATE, 0, this.#receiveConsumed));
      this.#receiveWindow += this.#receiveConsumed;
      this.#receiveConsumed = 0;
    }
    let stream = this.#streams.get(id);
    if (stream === undefined && id > this.#lastStreamId) {
      throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, `DATA on idle stream ${id}`);
    }
    if (stream?.remoteClosed) {
      this.#resetStream(stream, ErrorCode.STREAM_CLOSED, "DATA after the end of the request");
      stream = undefined;
    }
    if (stream !== undefined) {
      if (length > stream.receiveWindow) {
        this.#resetStream(stream, ErrorCode.FLOW_CONTROL_ERROR, "DATA beyond the stream window");
        stream = undefined;
      } else {
        stream.receiveWindow -= length;
        stream.receiveConsumed += length;
        const endStream = (flags & Flag.END_STREAM) !== 0;
        if (!endStream && stream.receiveConsumed >= this.#streamWindow / 2) {
          this.#enqueue(uint32Frame(FrameType.WINDOW_UPDATE, id, stream.receiveConsumed));
          stream.receiveWindow += stream.receiveConsumed;
          stream.receiveConsumed = 0;
        }
      }
    }
    const padBytes = padding >= 0 ? padding : 0;
    this.#data = {
      stream,
      left: length - padBytes - (padding >= 0 ? 1 : 0),
      padding: padBytes,
      endStream: (flags & Flag.END_STREAM) !== 0,
    };
  }

  #readData(buffer: Uint8Array, at: number, have: number): number {
    const data = this.#data!;
    const take = Math.min(data.left, have - at);
    if (take > 0) {
      data.left -= take;
      const stream = data.stream;
      if (stream?.ondata !== undefined && !stream.signal.aborted) {
        this.#deliver(stream, () => stream.ondata?.(buffer.subarray(at, at + take)));
      }
      at += take;
    }
    if (data.left > 0) return at;
    const skip = Math.min(data.padding, have - at);
    data.padding -= skip;
    at += skip;
    if (data.padding > 0) return at;
    this.#data = undefined;
    if (data.endStream && data.stream !== undefined) this.#endRemote(data.stream);
    return at;
  }

  #frame(type: number, flags: number, id: number, payload: Uint8Array): void {
    if (this.#block !== undefined && type !== FrameType.CONTINUATION) {
      throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, "a header block was not continued");
    }
    switch (type) {
      case FrameType.HEADERS:
        return this.#headers(flags, id, payload);
      case FrameType.CONTINUATION: {
        const block = this.#block;
        if (block === undefined || block.stream !== id) {
          throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, "CONTINUATION without HEADERS");
        }
        block.parts.push(payload.slice());
        block.bytes += payload.length;
        if (block.bytes > MAX_CONTROL_FRAME) {
          throw new ConnectionError(ErrorCode.ENHANCE_YOUR_CALM, "header block too large");
        }
        if (flags & Flag.END_HEADERS) this.#headerBlock();
        return;
      }
      case FrameType.PRIORITY:
        if (id === 0) throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, "PRIORITY on stream 0");
        if (payload.length !== 5) {
          throw new ConnectionError(ErrorCode.FRAME_SIZE_ERROR, "PRIORITY is not 5 bytes");
        }
        return;
      case FrameType.RST_STREAM: {
        if (payload.length !== 4) {
          throw new ConnectionError(ErrorCode.FRAME_SIZE_ERROR, "RST_STREAM is not 4 bytes");
        }
        if (id === 0 || id > this.#lastStreamId) {
          throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, `RST_STREAM on idle stream ${id}`);
        }
        const stream = this.#streams.get(id);
        if (stream !== undefined) {
          this.#forget(
            stream,
            new Error(`HTTP/2 stream ${id} reset by the client (code ${readUint32(payload, 0)})`),
          );
        }
        return;
      }
      case FrameType.SETTINGS:
        return this.#settings(flags, id, payload);
      case FrameType.PUSH_PROMISE:
        throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, "a client sent PUSH_PROMISE");
      case FrameType.PING:
        if (id !== 0) throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, "PING on a stream");
        if (payload.length !== 8) {
          throw new ConnectionError(ErrorCode.FRAME_SIZE_ERROR, "PING is not 8 bytes");
        }
        if ((flags & Flag.ACK) === 0) {
          this.#reply(frame(FrameType.PING, Flag.ACK, 0, payload));
        } else if (payload.every((byte, i) => byte === KEEPALIVE_PAYLOAD[i])) {
          clearTimeout(this.#keepalive);
          this.#scheduleKeepalive();
        }
        return;
      case FrameType.GOAWAY:
        if (id !== 0) throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, "GOAWAY on a stream");
        this.#goingAway = true;
        this.#closeIfIdle();
        return;
      case FrameType.WINDOW_UPDATE:
        return this.#windowUpdateReceived(id, payload);
      default:
        // Unknown frame types are ignored (RFC 9113 §4.1).
        return;
    }
  }

  #headers(flags: number, id: number, payload: Uint8Array): void {
    if (id === 0 || id % 2 === 0) {
      throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, `HEADERS on stream ${id}`);
    }
    let start = 0;
    let end = payload.length;
    if (flags & Flag.PADDED) {
      if (payload.length < 1) throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, "bad padding");
      start = 1;
      end -= payload[0]!;
    }
    if (flags & Flag.PRIORITY) start += 5;
    if (end < start) {
      throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, "HEADERS padding too long");
    }
    // Decoded at once when complete; kept (a copy: the read buffer is reused) when continued.
    const part = flags & Flag.END_HEADERS
      ? payload.subarray(start, end)
      : payload.slice(start, end);
    this.#block = {
      stream: id,
      parts: [part],
      bytes: end - start,
      endStream: (flags & Flag.END_STREAM) !== 0,
    };
    if (flags & Flag.END_HEADERS) this.#headerBlock();
  }

  #headerBlock(): void {
    const { stream: id, parts, bytes, endStream } = this.#block!;
    this.#block = undefined;
    let block = parts[0]!;
    if (parts.length > 1) {
      block = new Uint8Array(bytes);
      let at = 0;
      for (const part of parts) {
        block.set(part, at);
        at += part.length;
      }
    }
    let fields: HeaderField[] | undefined;
    let tooLarge = false;
    try {
      fields = this.#decoder.decode(block);
    } catch (error) {
      if (!(error instanceof HeaderListTooLargeError)) {
        throw new ConnectionError(ErrorCode.COMPRESSION_ERROR, (error as Error).message);
      }
      tooLarge = true;
    }
    const existing = this.#streams.get(id);
    if (existing !== undefined) {
      // Trailers of a request: they must end it.
      if (!endStream || existing.remoteClosed) {
        throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, `second header block on stream ${id}`);
      }
      this.#endRemote(existing);
      return;
    }
    // A stream this side already ended or refused: its block was decoded; nothing else to do.
    if (id <= this.#lastStreamId) return;
    this.#lastStreamId = id;
    const stream = new Stream(
      id,
      fields ?? [],
      this.#owner,
      this.#peerInitialWindow,
      this.#streamWindow,
    );
    stream.remoteClosed = endStream;
    if (this.#goingAway || this.#streams.size >= this.#maxStreams) {
      this.#reply(uint32Frame(FrameType.RST_STREAM, id, ErrorCode.REFUSED_STREAM));
      return;
    }
    this.#streams.set(id, stream);
    if (tooLarge) {
      this.#sendHeaders(stream, [[":status", "431"]], true);
      return;
    }
    this.#deliver(stream, () => this.#onStream(stream));
    if (endStream && !stream.signal.aborted) this.#deliver(stream, () => stream.onend?.());
  }

  #settings(flags: number, id: number, payload: Uint8Array): void {
    if (id !== 0) throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, "SETTINGS on a stream");
    if (flags & Flag.ACK) {
      if (payload.length !== 0) {
        throw new ConnectionError(ErrorCode.FRAME_SIZE_ERROR, "SETTINGS ACK with a payload");
      }
      return;
    }
    if (payload.length % 6 !== 0) {
      throw new ConnectionError(ErrorCode.FRAME_SIZE_ERROR, "SETTINGS not a multiple of 6 bytes");
    }
    for (let at = 0; at < payload.length; at += 6) {
      const key = (payload[at]! << 8) | payload[at + 1]!;
      const value = readUint32(payload, at + 2);
      if (key === Setting.INITIAL_WINDOW_SIZE) {
        if (value > MAX_WINDOW) {
          throw new ConnectionError(ErrorCode.FLOW_CONTROL_ERROR, "INITIAL_WINDOW_SIZE too large");
        }
        const delta = value - this.#peerInitialWindow;
        this.#peerInitialWindow = value;
        for (const stream of this.#streams.values()) stream.sendWindow += delta;
      } else if (key === Setting.MAX_FRAME_SIZE) {
        if (value < 16384 || value > MAX_FRAME_SIZE) {
          throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, `MAX_FRAME_SIZE ${value}`);
        }
        this.#peerFrameSize = value;
      } else if (key === Setting.ENABLE_PUSH && value > 1) {
        throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, `ENABLE_PUSH ${value}`);
      }
      // HEADER_TABLE_SIZE needs nothing: the encoder keeps no table.
    }
    this.#reply(frame(FrameType.SETTINGS, Flag.ACK, 0));
    this.#flush();
  }

  #windowUpdateReceived(id: number, payload: Uint8Array): void {
    if (payload.length !== 4) {
      throw new ConnectionError(ErrorCode.FRAME_SIZE_ERROR, "WINDOW_UPDATE is not 4 bytes");
    }
    const increment = readUint32(payload, 0) & 0x7fffffff;
    if (id === 0) {
      if (increment === 0) {
        throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, "WINDOW_UPDATE of 0");
      }
      this.#sendWindow += increment;
      if (this.#sendWindow > MAX_WINDOW) {
        throw new ConnectionError(ErrorCode.FLOW_CONTROL_ERROR, "connection window overflow");
      }
    } else {
      if (id > this.#lastStreamId) {
        throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, `WINDOW_UPDATE on idle stream ${id}`);
      }
      const stream = this.#streams.get(id);
      if (stream === undefined) return;
      if (increment === 0) {
        return this.#resetStream(stream, ErrorCode.PROTOCOL_ERROR, "WINDOW_UPDATE of 0");
      }
      stream.sendWindow += increment;
      if (stream.sendWindow > MAX_WINDOW) {
        return this.#resetStream(stream, ErrorCode.FLOW_CONTROL_ERROR, "stream window overflow");
      }
    }
    this.#flush();
  }

  /** Runs application code for a stream; if it throws, the stream is reset, not the session. */
  #deliver(stream: Stream, call: () => void): void {
    try {
      call();
    } catch {
      this.#resetStream(stream, ErrorCode.INTERNAL_ERROR, "the handler threw");
    }
  }

  #endRemote(stream: Stream): void {
    stream.remoteClosed = true;
    if (!stream.signal.aborted) this.#deliver(stream, () => stream.onend?.());
    if (stream.localClosed) this.#forget(stream, undefined);
  }

  #closeLocal(stream: Stream): void {
    stream.localClosed = true;
    if (!stream.remoteClosed) {
      // The response is complete before the request: tell the client to stop sending.
      this.#reply(uint32Frame(FrameType.RST_STREAM, stream.id, ErrorCode.NO_ERROR));
    }
    this.#forget(stream, undefined);
  }

  /** Drops a stream; `reason` aborts its signal when it ended early. */
  #forget(stream: Stream, reason: Error | undefined): void {
    stream.localClosed = true;
    stream.remoteClosed = true;
    this.#streams.delete(stream.id);
    for (const pending of stream.pending) pending.done();
    stream.pending = [];
    if (reason !== undefined) stream.controller.abort(reason);
    this.#closeIfIdle();
  }

  #abortAll(reason: Error): void {
    for (const stream of [...this.#streams.values()]) this.#forget(stream, reason);
  }

  #closeIfIdle(): void {
    if (this.#goingAway && this.#streams.size === 0 && !this.#pumping && !this.#pumpScheduled) {
      this.#end();
    }
  }

  #end(): void {
    if (this.#ended) return;
    this.#ended = true;
    clearTimeout(this.#keepalive);
    this.#abortAll(new Error("HTTP/2 connection closed"));
    for (const segment of this.#out) segment.done?.();
    this.#out = [];
    try {
      this.#conn.close();
    } catch {
      // Already closed by the peer.
    }
    this.#closed.resolve();
  }

  #goaway(code: number, message: string): Uint8Array {
    const debug = new TextEncoder().encode(message);
    const payload = new Uint8Array(8 + debug.length);
    writeUint32(payload, 0, this.#lastStreamId);
    writeUint32(payload, 4, code);
    payload.set(debug, 8);
    return frame(FrameType.GOAWAY, 0, 0, payload);
  }
}
