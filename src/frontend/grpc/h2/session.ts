/**
 * The server side of one HTTP/2 connection (RFC 9113), as gRPC clients speak it: over a
 * `Deno.Conn` with prior knowledge (h2c), or over TLS once ALPN chose `h2` (`tls.ts`).
 *
 * Why not `node:http2`: under Deno it copies every message several times (into the stream's
 * queue, into 16 KiB DATA frames, into a new buffer per frame for JavaScript, and each received
 * chunk into a new zero-filled buffer). Here bytes are read into one reused buffer and handed to
 * the stream as views; a large message is written to the socket from the caller's own buffer,
 * in frames as large as the peer allows, and small frames are gathered into one write.
 *
 * What a peer may do is held to RFC 9113 and to h2spec (`tests/h2spec_test.ts`): each frame is
 * checked against the state of its stream (idle, open, half-closed, or closed, and how: this
 * side's reset, the peer's, or both ends of the exchange, remembered for the last
 * {@linkcode CLOSED_REMEMBERED} streams), a request's fields against §8 (`request_rules.ts`),
 * and the rate of stream resets against a bound (`reset_limit.ts`). The file is long because it
 * is one state machine: the frame handlers change the stream and connection state kept here,
 * and splitting them from it would spread one rule over several files. The stream's own state
 * and API are in `stream.ts`, the queue of output and its writes in `writer.ts`.
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
import { checkRequest, checkTrailers } from "./request_rules.ts";
import { ResetLimit } from "./reset_limit.ts";
import { type Http2ServerStream, Stream, type StreamOwner } from "./stream.ts";
import type { Http2Transport } from "./transport.ts";
import { FrameWriter } from "./writer.ts";
import { SlotMirror } from "../../../slot_set.ts";

export type { Http2ServerStream } from "./stream.ts";

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
  /**
   * How many streams may be reset at once (by the client's RST_STREAM, or by this side for a
   * client's error) before the connection ends with GOAWAY ENHANCE_YOUR_CALM.
   *
   * @default {1000}
   */
  resetBurst?: number;
  /**
   * How many more resets each second allows, after the burst.
   *
   * @default {100}
   */
  resetsPerSecond?: number;
}

/** What a connection error carries. */
class ConnectionError extends Error {
  constructor(readonly code: number, message: string) {
    super(message);
  }
}

/** Bytes read from the socket at a time. */
const READ_BYTES = 256 * 1024;
/** The largest header block held across CONTINUATION frames, bytes. */
const MAX_HEADER_BLOCK = 1024 * 1024;
/** The payload of the server's keepalive PINGs. */
const KEEPALIVE_PAYLOAD = new TextEncoder().encode("dt-alive");
/**
 * The largest frame payload a peer may send: HTTP/2's default SETTINGS_MAX_FRAME_SIZE, so not
 * advertised. A larger one was tried (HTTP/2's largest, 2^24 - 1) and let grpc core clients send
 * 64 KiB DATA frames; but then a HEADERS frame of 20 KB, which h2spec sends to check that an
 * oversized frame is refused (§4.2), is within the limit. Every frame above it ends the
 * connection with FRAME_SIZE_ERROR (§4.2: for DATA a stream error would do, but the payload
 * would have to be skipped all the same).
 */
const MAX_FRAME_SIZE = 16384;
/**
 * How many closed streams the session remembers, with how each closed: a frame on one of them
 * is ignored (after this side's reset, §5.1 "closed") or an error (after the peer's reset, or
 * the end of both sides). A stream identifier below the last one, closed longer ago, is taken
 * as never opened: HEADERS on it is a PROTOCOL_ERROR (§5.1.1), which RFC 9113 allows ("An
 * endpoint MAY choose to limit the period over which it ignores frames").
 */
export const CLOSED_REMEMBERED = 1000;

/** How a stream closed, for frames that arrive on it later. */
const Closed = {
  /** Both sides ended it (END_STREAM each way): more frames are an error. */
  ENDED: 0,
  /** This side sent RST_STREAM: frames already in flight are ignored. */
  BY_US: 1,
  /** The peer sent RST_STREAM: frames other than PRIORITY are a stream error. */
  BY_PEER: 2,
} as const;
type Closed = typeof Closed[keyof typeof Closed];

/** A frame whose payload is one 32-bit value (RST_STREAM's error code, WINDOW_UPDATE's increment). */
function uint32Frame(type: number, stream: number, value: number): Uint8Array {
  const payload = new Uint8Array(4);
  writeUint32(payload, 0, value);
  return frame({ type, flags: 0, stream }, payload);
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
  readonly #conn: Http2Transport;
  readonly #onStream: (stream: Http2ServerStream) => void;
  readonly #decoder: HpackDecoder;
  readonly #encoder = new HpackEncoder();
  // By id, in slots: not a Map, which one entry per call churns on a long-lived connection (see
  // slot_set.ts).
  readonly #streams = new SlotMirror<Stream>();
  // Recently closed streams, oldest first, with how each closed.
  readonly #closedStreams = new Map<number, Closed>();
  readonly #resets: ResetLimit;
  readonly #streamWindow: number;
  readonly #connectionWindow: number;
  readonly #maxStreams: number;
  readonly #closed = Promise.withResolvers<void>();
  readonly #writer: FrameWriter;
  #flushQueued = false;
  #peerFrameSize = 16384;
  #peerInitialWindow = 65535;
  #sendWindow = 65535;
  #receiveWindow = 65535;
  #receiveConsumed = 0;
  #lastStreamId = 0;
  #goingAway = false;
  #ended = false;
  #keepalive: ReturnType<typeof setTimeout> | undefined;
  #keepaliveTimeMs: number | undefined;
  #keepaliveTimeoutMs: number;
  // A header block that awaits CONTINUATION frames.
  #block:
    | {
      stream: number;
      parts: Uint8Array[];
      bytes: number;
      endStream: boolean;
      selfDependent: boolean;
    }
    | undefined;
  // The DATA frame whose payload is being read.
  #data:
    | { stream: Stream | undefined; left: number; padding: number; endStream: boolean }
    | undefined;

  /**
   * Starts serving the connection; the session closes it when done.
   *
   * @param conn The accepted connection (a `Deno.Conn`, or a TLS connection from `tls.ts`).
   * @param onStream Called for each new stream, once its headers arrived.
   * @param options Windows and limits.
   */
  constructor(
    conn: Http2Transport,
    onStream: (stream: Http2ServerStream) => void,
    options: Http2SessionOptions = {},
  ) {
    this.#conn = conn;
    this.#writer = new FrameWriter(conn, () => this.#end(), () => this.#closeIfIdle());
    // Small frames (acknowledgements, headers, trailers) must not wait for Nagle's algorithm.
    if ("setNoDelay" in conn) (conn as Deno.TcpConn).setNoDelay(true);
    this.#resets = new ResetLimit(options.resetBurst ?? 1000, options.resetsPerSecond ?? 100);
    this.#onStream = onStream;
    this.#streamWindow = options.streamWindow ?? 16 * 1024 * 1024;
    this.#connectionWindow = options.connectionWindow ?? 64 * 1024 * 1024;
    this.#maxStreams = options.maxConcurrentStreams ?? 1000;
    const maxHeaderListSize = options.maxHeaderListSize ?? 65536;
    this.#decoder = new HpackDecoder({ maxHeaderListSize });
    const entries: [number, number][] = [
      [Setting.MAX_CONCURRENT_STREAMS, this.#maxStreams],
      [Setting.INITIAL_WINDOW_SIZE, this.#streamWindow],
      [Setting.MAX_HEADER_LIST_SIZE, maxHeaderListSize],
    ];
    const settings = new Uint8Array(entries.length * 6);
    entries.forEach(([key, value], i) => {
      settings[i * 6] = key >> 8;
      settings[i * 6 + 1] = key & 0xff;
      writeUint32(settings, i * 6 + 2, value);
    });
    this.#enqueue(frame({ type: FrameType.SETTINGS, flags: 0, stream: 0 }, settings));
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
      this.#enqueue(frame({ type: FrameType.PING, flags: 0, stream: 0 }, KEEPALIVE_PAYLOAD));
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
    stream.responseStarted = true;
    const block = this.#encoder.encode(fields);
    let offset = 0;
    let type: number = FrameType.HEADERS;
    do {
      const length = Math.min(block.length - offset, this.#peerFrameSize);
      const last = offset + length === block.length;
      const flags = (last ? Flag.END_HEADERS : 0) |
        (endStream && type === FrameType.HEADERS ? Flag.END_STREAM : 0);
      this.#enqueue(
        frame({ type, flags, stream: stream.id }, block.subarray(offset, offset + length)),
      );
      offset += length;
      type = FrameType.CONTINUATION;
    } while (offset < block.length);
    if (endStream) this.#closeLocal(stream);
  }

  /** Resets a stream for this side's reasons: the application's, or a client's error. */
  #resetStream(stream: Stream, code: number, reason: string): void {
    if (!this.#ended) this.#reply(uint32Frame(FrameType.RST_STREAM, stream.id, code));
    this.#forget(stream, new Error(`HTTP/2 stream ${stream.id} reset: ${reason}`), Closed.BY_US);
  }

  /**
   * A stream error the client caused (RFC 9113 §5.4.2): the stream is reset, open or not, and
   * the reset counts against the connection's limit.
   */
  #streamError(id: number, code: number, reason: string): void {
    const stream = this.#streams.get(id);
    if (stream !== undefined) {
      this.#resetStream(stream, code, reason);
    } else {
      this.#reply(uint32Frame(FrameType.RST_STREAM, id, code));
      // An idle stream (PRIORITY naming itself) stays idle: it may still be opened.
      if (id <= this.#lastStreamId) this.#remember(id, Closed.BY_US);
    }
    this.#countReset();
  }

  /** Counts a reset; past the limit, the connection ends (CVE-2023-44487, `reset_limit.ts`). */
  #countReset(): void {
    if (!this.#resets.take()) {
      throw new ConnectionError(ErrorCode.ENHANCE_YOUR_CALM, "too many streams reset");
    }
  }

  /** Notes how a stream closed, forgetting the oldest past {@linkcode CLOSED_REMEMBERED}. */
  #remember(id: number, how: Closed): void {
    this.#closedStreams.set(id, how);
    if (this.#closedStreams.size > CLOSED_REMEMBERED) {
      this.#closedStreams.delete(this.#closedStreams.keys().next().value!);
    }
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
        const last = head.offset + length === head.bytes.length;
        // Without trailers the body's last frame ends the stream.
        const endStream = last && stream.pending.length === 1 && stream.trailers?.length === 0;
        const header = new Uint8Array(FRAME_HEADER_BYTES);
        writeFrameHeader(
          header,
          0,
          {
            length,
            type: FrameType.DATA,
            flags: endStream ? Flag.END_STREAM : 0,
            stream: stream.id,
          },
        );
        this.#enqueue(header);
        this.#enqueue(
          head.bytes.subarray(head.offset, head.offset + length),
          last ? head.done : undefined,
        );
        head.offset += length;
        this.#sendWindow -= length;
        stream.sendWindow -= length;
        if (last) stream.pending.shift();
        if (endStream) this.#closeLocal(stream);
      }
      if (stream.pending.length === 0 && stream.trailers !== undefined && !stream.localClosed) {
        if (stream.trailers.length > 0) {
          this.#sendHeaders(stream, stream.trailers, true);
        } else {
          this.#enqueue(frame({ type: FrameType.DATA, flags: Flag.END_STREAM, stream: stream.id }));
          this.#closeLocal(stream);
        }
      }
    }
  }

  /**
   * Queues a frame the peer's own frames call for (acknowledgements, resets); a peer that owes
   * too many unread is cut off (`writer.ts`).
   */
  #reply(bytes: Uint8Array): void {
    if (!this.#writer.reply(bytes)) this.#end();
  }

  #enqueue(bytes: Uint8Array, done?: () => void): void {
    this.#writer.enqueue(bytes, done);
  }

  async #read(): Promise<void> {
    const buffer = new Uint8Array(READ_BYTES);
    let have = 0;
    let prefaceSeen = false;
    let settingsSeen = false;
    try {
      while (!this.#ended) {
        // Never full between reads: a frame (at most MAX_FRAME_SIZE) is far smaller.
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
            throw new ConnectionError(
              ErrorCode.FRAME_SIZE_ERROR,
              `frame of ${length} bytes, over SETTINGS_MAX_FRAME_SIZE`,
            );
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
          if (have - at < FRAME_HEADER_BYTES + length) break;
          const payload = buffer.subarray(
            at + FRAME_HEADER_BYTES,
            at + FRAME_HEADER_BYTES + length,
          );
          at += FRAME_HEADER_BYTES + length;
          this.#frame(type, flags, id, payload);
        }
        buffer.copyWithin(0, at, have);
        have -= at;
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
    // DATA counts against the connection's window whatever its stream's state (§6.9).
    this.#receiveWindow -= length;
    this.#receiveConsumed += length;
    if (this.#receiveConsumed >= this.#connectionWindow / 2) {
      this.#enqueue(uint32Frame(FrameType.WINDOW_UPDATE, 0, this.#receiveConsumed));
      this.#receiveWindow += this.#receiveConsumed;
      this.#receiveConsumed = 0;
    }
    const endStream = (flags & Flag.END_STREAM) !== 0;
    const content = length - (padding >= 0 ? padding + 1 : 0);
    let stream = this.#streams.get(id);
    if (stream === undefined) {
      if (id > this.#lastStreamId) {
        throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, `DATA on idle stream ${id}`);
      }
      // §5.1: ignored after this side's reset (the client may have sent it before it knew);
      // otherwise a stream error.
      if (this.#closedStreams.get(id) !== Closed.BY_US) {
        this.#streamError(id, ErrorCode.STREAM_CLOSED, "DATA on a closed stream");
      }
    } else if (stream.remoteClosed) {
      this.#streamError(id, ErrorCode.STREAM_CLOSED, "DATA after the end of the request");
      stream = undefined;
    } else if (length > stream.receiveWindow) {
      this.#streamError(id, ErrorCode.FLOW_CONTROL_ERROR, "DATA beyond the stream window");
      stream = undefined;
    } else if (
      stream.contentLength >= 0 &&
      (stream.received + content > stream.contentLength ||
        (endStream && stream.received + content !== stream.contentLength))
    ) {
      // §8.1.1: the body must be as long as content-length says.
      this.#streamError(id, ErrorCode.PROTOCOL_ERROR, "DATA unlike content-length");
      stream = undefined;
    } else {
      stream.received += content;
      stream.receiveWindow -= length;
      stream.receiveConsumed += length;
      if (!endStream && stream.receiveConsumed >= this.#streamWindow / 2) {
        this.#enqueue(uint32Frame(FrameType.WINDOW_UPDATE, id, stream.receiveConsumed));
        stream.receiveWindow += stream.receiveConsumed;
        stream.receiveConsumed = 0;
      }
    }
    const padBytes = padding >= 0 ? padding : 0;
    this.#data = { stream, left: content, padding: padBytes, endStream };
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
        if (block.bytes > MAX_HEADER_BLOCK) {
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
        // Priorities are not acted on (RFC 9113 §5.3.2), but one naming its own stream is
        // still an error (§5.3.1).
        if ((readUint32(payload, 0) & 0x7fffffff) === id) {
          this.#streamError(id, ErrorCode.PROTOCOL_ERROR, "a stream depending on itself");
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
            Closed.BY_PEER,
          );
          // Only a reset before the response counts: the attack (CVE-2023-44487) makes the
          // server set up work and throws it away at once. A client that cancels a call it is
          // being answered on (grpc-js ends a finished stream call so; a reader that stops
          // early) waited for that work, however many it does a second.
          if (!stream.responseStarted) this.#countReset();
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
          this.#reply(frame({ type: FrameType.PING, flags: Flag.ACK, stream: 0 }, payload));
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
    let selfDependent = false;
    if (flags & Flag.PRIORITY) {
      selfDependent = end >= start + 5 && (readUint32(payload, start) & 0x7fffffff) === id;
      start += 5;
    }
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
      selfDependent,
    };
    if (flags & Flag.END_HEADERS) this.#headerBlock();
  }

  #headerBlock(): void {
    const { stream: id, parts, bytes, endStream, selfDependent } = this.#block!;
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
    // Decoded whatever becomes of the stream: the HPACK table is the connection's (§4.3).
    let fields: HeaderField[] = [];
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
    if (existing !== undefined) return this.#trailers(existing, fields, endStream, selfDependent);
    if (id <= this.#lastStreamId) return this.#headersOnClosed(id);
    // A new stream; the ones below it that were never opened are now closed (§5.1.1).
    this.#lastStreamId = id;
    if (selfDependent) {
      return this.#streamError(id, ErrorCode.PROTOCOL_ERROR, "a stream depending on itself");
    }
    if (this.#goingAway) {
      // Not the client's fault: it had not seen the GOAWAY yet.
      this.#reply(uint32Frame(FrameType.RST_STREAM, id, ErrorCode.REFUSED_STREAM));
      return this.#remember(id, Closed.BY_US);
    }
    if (this.#streams.size >= this.#maxStreams) {
      return this.#streamError(
        id,
        ErrorCode.REFUSED_STREAM,
        "over SETTINGS_MAX_CONCURRENT_STREAMS",
      );
    }
    const check = tooLarge ? { contentLength: -1 } : checkRequest(fields);
    if (check.malformed !== undefined) {
      return this.#streamError(id, ErrorCode.PROTOCOL_ERROR, check.malformed);
    }
    if (endStream && check.contentLength > 0) {
      return this.#streamError(id, ErrorCode.PROTOCOL_ERROR, "no body after content-length");
    }
    const stream = new Stream(id, this.#owner, {
      headers: fields,
      sendWindow: this.#peerInitialWindow,
      receiveWindow: this.#streamWindow,
      contentLength: check.contentLength,
    });
    stream.remoteClosed = endStream;
    this.#streams.put(id, stream);
    if (tooLarge) {
      this.#sendHeaders(stream, [[":status", "431"]], true);
      return;
    }
    this.#deliver(stream, () => this.#onStream(stream));
    // Unless the handler already answered (or reset) it.
    if (endStream && this.#streams.get(id) === stream) {
      this.#deliver(stream, () => stream.onend?.());
    }
  }

  /** A second header block on an open stream: the request's trailers, which must end it. */
  #trailers(
    stream: Stream,
    fields: readonly HeaderField[],
    endStream: boolean,
    selfDependent: boolean,
  ): void {
    const id = stream.id;
    // §5.1: a half-closed (remote) stream takes no more HEADERS.
    if (stream.remoteClosed) {
      return this.#streamError(id, ErrorCode.STREAM_CLOSED, "HEADERS after END_STREAM");
    }
    if (selfDependent) {
      return this.#streamError(id, ErrorCode.PROTOCOL_ERROR, "a stream depending on itself");
    }
    // §8.1: only trailers may follow the request's header block, and they end it.
    if (!endStream) {
      return this.#streamError(id, ErrorCode.PROTOCOL_ERROR, "a header block without END_STREAM");
    }
    const problem = checkTrailers(fields);
    if (problem !== undefined) return this.#streamError(id, ErrorCode.PROTOCOL_ERROR, problem);
    if (stream.contentLength >= 0 && stream.received !== stream.contentLength) {
      return this.#streamError(id, ErrorCode.PROTOCOL_ERROR, "a body unlike content-length");
    }
    this.#endRemote(stream);
  }

  /** HEADERS on a stream that is closed, or below the last one and never opened. */
  #headersOnClosed(id: number): void {
    const how = this.#closedStreams.get(id);
    // §5.1 "closed": ignored after this side's reset, a stream error after the peer's.
    if (how === Closed.BY_US) return;
    if (how === Closed.BY_PEER) {
      return this.#streamError(id, ErrorCode.STREAM_CLOSED, "HEADERS after RST_STREAM");
    }
    if (how === Closed.ENDED) {
      throw new ConnectionError(ErrorCode.STREAM_CLOSED, `HEADERS on closed stream ${id}`);
    }
    // §5.1.1: identifiers only grow; this one was skipped, or closed too long ago to tell.
    throw new ConnectionError(
      ErrorCode.PROTOCOL_ERROR,
      `HEADERS on stream ${id}, below stream ${this.#lastStreamId}`,
    );
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
        if (value < 16384 || value > 16 * 1024 * 1024 - 1) {
          throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, `MAX_FRAME_SIZE ${value}`);
        }
        this.#peerFrameSize = value;
      } else if (key === Setting.ENABLE_PUSH && value > 1) {
        throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, `ENABLE_PUSH ${value}`);
      }
      // HEADER_TABLE_SIZE needs nothing: the encoder keeps no table.
    }
    this.#reply(frame({ type: FrameType.SETTINGS, flags: Flag.ACK, stream: 0 }));
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
      // §5.1: a closed stream may still get WINDOW_UPDATE from a peer that had not seen it end.
      if (stream === undefined) return;
      if (increment === 0) {
        return this.#streamError(id, ErrorCode.PROTOCOL_ERROR, "WINDOW_UPDATE of 0");
      }
      stream.sendWindow += increment;
      if (stream.sendWindow > MAX_WINDOW) {
        return this.#streamError(id, ErrorCode.FLOW_CONTROL_ERROR, "stream window overflow");
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
    // Closed meanwhile: answered, or reset, while its last DATA frame was read.
    if (this.#streams.get(stream.id) !== stream) return;
    stream.remoteClosed = true;
    this.#deliver(stream, () => stream.onend?.());
  }

  #closeLocal(stream: Stream): void {
    stream.localClosed = true;
    if (!stream.remoteClosed) {
      // The response is complete before the request: tell the client to stop sending (§8.1).
      this.#reply(uint32Frame(FrameType.RST_STREAM, stream.id, ErrorCode.NO_ERROR));
      this.#forget(stream, undefined, Closed.BY_US);
    } else {
      this.#forget(stream, undefined, Closed.ENDED);
    }
  }

  /**
   * Drops a stream; `reason` aborts its signal when it ended early, and `how` it closed is
   * remembered (undefined: the connection is ending).
   */
  #forget(stream: Stream, reason: Error | undefined, how: Closed | undefined): void {
    stream.localClosed = true;
    stream.remoteClosed = true;
    this.#streams.delete(stream.id);
    if (how !== undefined) this.#remember(stream.id, how);
    for (const pending of stream.pending) pending.done();
    stream.pending = [];
    if (reason !== undefined) stream.controller.abort(reason);
    this.#closeIfIdle();
  }

  #abortAll(reason: Error): void {
    for (const stream of this.#streams.values()) this.#forget(stream, reason, undefined);
  }

  #closeIfIdle(): void {
    if (this.#goingAway && this.#streams.size === 0 && this.#writer.idle) {
      this.#end();
    }
  }

  #end(): void {
    if (this.#ended) return;
    this.#ended = true;
    clearTimeout(this.#keepalive);
    this.#abortAll(new Error("HTTP/2 connection closed"));
    this.#writer.close();
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
    return frame({ type: FrameType.GOAWAY, flags: 0, stream: 0 }, payload);
  }
}
