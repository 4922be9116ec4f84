/**
 * HTTP/2 frame layout (RFC 9113 §4, §6): types, flags, error codes, settings, and writing a
 * frame's 9-byte header.
 *
 * @module
 */

/** Frame types. */
export const FrameType = {
  DATA: 0x0,
  HEADERS: 0x1,
  PRIORITY: 0x2,
  RST_STREAM: 0x3,
  SETTINGS: 0x4,
  PUSH_PROMISE: 0x5,
  PING: 0x6,
  GOAWAY: 0x7,
  WINDOW_UPDATE: 0x8,
  CONTINUATION: 0x9,
} as const;

/** Frame flags. */
export const Flag = {
  END_STREAM: 0x1,
  ACK: 0x1,
  END_HEADERS: 0x4,
  PADDED: 0x8,
  PRIORITY: 0x20,
} as const;

/** Error codes of RST_STREAM and GOAWAY. */
export const ErrorCode = {
  NO_ERROR: 0x0,
  PROTOCOL_ERROR: 0x1,
  INTERNAL_ERROR: 0x2,
  FLOW_CONTROL_ERROR: 0x3,
  STREAM_CLOSED: 0x5,
  FRAME_SIZE_ERROR: 0x6,
  REFUSED_STREAM: 0x7,
  CANCEL: 0x8,
  COMPRESSION_ERROR: 0x9,
  ENHANCE_YOUR_CALM: 0xb,
} as const;

/** Setting identifiers. */
export const Setting = {
  HEADER_TABLE_SIZE: 0x1,
  ENABLE_PUSH: 0x2,
  MAX_CONCURRENT_STREAMS: 0x3,
  INITIAL_WINDOW_SIZE: 0x4,
  MAX_FRAME_SIZE: 0x5,
  MAX_HEADER_LIST_SIZE: 0x6,
} as const;

/** Bytes of a frame header. */
export const FRAME_HEADER_BYTES = 9;

/** The largest flow-control window (2^31 − 1). */
export const MAX_WINDOW = 0x7fffffff;

/** The client's connection preface (RFC 9113 §3.4). */
export const PREFACE: Uint8Array = new TextEncoder().encode("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n");

/** A frame header's fields (RFC 9113 §4.1), but the reserved bit. */
export interface FrameHeader {
  /** The payload's length. */
  readonly length: number;
  /** The frame type ({@linkcode FrameType}). */
  readonly type: number;
  /** The flags ({@linkcode Flag}). */
  readonly flags: number;
  /** The stream identifier (0: the connection). */
  readonly stream: number;
}

/**
 * Writes a frame header.
 *
 * @param target Where to write.
 * @param at The offset of the header in `target`.
 * @param header The payload's length, the frame type, the flags and the stream identifier.
 *
 * @example A DATA frame's header that ends stream 1
 * ```ts
 * import { Flag, FRAME_HEADER_BYTES, FrameType, writeFrameHeader } from "./frames.ts";
 * import assert from "node:assert/strict";
 *
 * const header = new Uint8Array(FRAME_HEADER_BYTES);
 * writeFrameHeader(header, 0, { length: 300, type: FrameType.DATA, flags: Flag.END_STREAM, stream: 1 });
 * assert.deepEqual([...header], [0, 1, 44, 0, 1, 0, 0, 0, 1]);
 * ```
 */
export function writeFrameHeader(target: Uint8Array, at: number, header: FrameHeader): void {
  const { length, type, flags, stream } = header;
  target[at] = length >>> 16;
  target[at + 1] = (length >>> 8) & 0xff;
  target[at + 2] = length & 0xff;
  target[at + 3] = type;
  target[at + 4] = flags;
  writeUint32(target, at + 5, stream);
}

/**
 * A whole frame in a new buffer.
 *
 * @param header The frame type, the flags and the stream identifier (the length is the
 *   payload's).
 * @param payload The payload.
 * @returns The frame.
 *
 * @example A PING acknowledgement
 * ```ts
 * import { Flag, frame, FrameType } from "./frames.ts";
 * import assert from "node:assert/strict";
 *
 * const ack = frame({ type: FrameType.PING, flags: Flag.ACK, stream: 0 }, new Uint8Array(8));
 * assert.deepEqual([...ack.subarray(0, 9)], [0, 0, 8, 6, 1, 0, 0, 0, 0]);
 * ```
 */
export function frame(
  header: Omit<FrameHeader, "length">,
  payload: Uint8Array = new Uint8Array(0),
): Uint8Array {
  const bytes = new Uint8Array(FRAME_HEADER_BYTES + payload.length);
  writeFrameHeader(bytes, 0, {
    length: payload.length,
    type: header.type,
    flags: header.flags,
    stream: header.stream,
  });
  bytes.set(payload, FRAME_HEADER_BYTES);
  return bytes;
}

/**
 * Writes a big-endian 32-bit unsigned integer.
 *
 * @param target Where to write.
 * @param at The offset.
 * @param value The value.
 */
export function writeUint32(target: Uint8Array, at: number, value: number): void {
  target[at] = value >>> 24;
  target[at + 1] = (value >>> 16) & 0xff;
  target[at + 2] = (value >>> 8) & 0xff;
  target[at + 3] = value & 0xff;
}

/**
 * Reads a big-endian 32-bit unsigned integer.
 *
 * @param source Where to read.
 * @param at The offset.
 * @returns The value.
 */
export function readUint32(source: Uint8Array, at: number): number {
  return ((source[at]! << 24) | (source[at + 1]! << 16) | (source[at + 2]! << 8) |
    source[at + 3]!) >>> 0;
}
