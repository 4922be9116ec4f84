/**
 * gRPC message framing (the 5-byte prefix: compressed flag, big-endian length) for the front
 * end's calls (`h2/calls.ts`), with as few copies of a large tensor as the wire allows:
 *
 * - Receiving: {@linkcode AlignedMessageDecoder} copies each message once, into a buffer sized
 *   from its prefix and placed so that the first raw entry (`raw_input_contents`) starts on a
 *   64-byte boundary, so the tensor is read as a typed array in place. (A decoder that gathers a
 *   message's pieces into a fresh buffer, as grpc-js's does, leaves the tensor data where it
 *   falls, and reading it as a typed array then costs a second copy.)
 * - Sending: {@linkcode frameMessage} encodes a response straight after room left for the
 *   prefix, instead of encoding it and copying it after a new prefix.
 *
 * @module
 */

import { Buffer } from "node:buffer";
import type { ResponseEncoder } from "./call.ts";
import { type FieldStart, lengthDelimitedStart } from "../../protocol/protobuf_wire.ts";
import { STREAM_WINDOW_BYTES } from "./connection_tuning.ts";

/** The length of the prefix before each gRPC message. */
export const MESSAGE_PREFIX_BYTES = 5;

/** The boundary the first raw entry of a received message is placed on (a cache line). */
export const RAW_ALIGNMENT = 64;

/** How far into a message its raw entry is sought. */
const SEARCH_LIMIT = 64 * 1024;

/**
 * The largest message whose buffer is made when its first bytes arrive; a larger one keeps its
 * pieces until it is complete, so that a prefix announcing a huge message
 * costs nothing until the bytes come. A client may send this much without waiting for us
 * anyway: it is the stream's flow-control window.
 */
const UPFRONT_BYTES = STREAM_WINDOW_BYTES;

/**
 * Splits a call's received bytes into gRPC messages, each copied once into its own buffer
 * (prefix included), with the first entry of a raw-contents field placed on
 * a {@linkcode RAW_ALIGNMENT}-byte boundary when the message's beginning shows where it is.
 *
 * @example Two messages across three chunks
 * ```ts
 * import { AlignedMessageDecoder } from "./message_framing.ts";
 * import { Buffer } from "node:buffer";
 * import assert from "node:assert/strict";
 *
 * const decoder = new AlignedMessageDecoder(1024, 7);
 * const wire = Buffer.from([0, 0, 0, 0, 5, 0x3a, 3, 1, 2, 3, 0, 0, 0, 0, 1, 8]);
 * assert.deepEqual(decoder.write(wire.subarray(0, 7)), []);
 * const [first] = decoder.write(wire.subarray(7, 10));
 * assert.deepEqual([...first!], [0, 0, 0, 0, 5, 0x3a, 3, 1, 2, 3]);
 * assert.equal((first!.byteOffset + 7) % 64, 0); // the raw entry's payload is aligned
 * assert.deepEqual(decoder.write(wire.subarray(10)).map((m) => [...m]), [[0, 0, 0, 0, 1, 8]]);
 * ```
 */
export class AlignedMessageDecoder {
  #maxBytes: number;
  #rawField: number | undefined;
  #prefix = new Uint8Array(MESSAGE_PREFIX_BYTES);
  #prefixRead = 0;
  #size = 0;
  // Body bytes received before the message's buffer is placed.
  #pending: Uint8Array[] = [];
  #pendingBytes = 0;
  #message: Buffer | undefined;
  #filled = 0;
  // Set once a message was refused: the call is failing, and nothing more is read.
  #refused: Error | undefined;
  #borrowed: boolean;

  /**
   * Makes a decoder for one call.
   *
   * @param maxBytes The largest message accepted, in bytes; -1 for no limit.
   * @param rawField The number of the `bytes` field to align (7: `raw_input_contents`), or
   *   `undefined` for none.
   * @param borrowed Whether the chunks given to {@linkcode AlignedMessageDecoder.write} are
   *   only lent for the call (a transport that reads into one reused buffer): pieces kept until
   *   a message's buffer is placed are then copied.
   */
  constructor(maxBytes: number, rawField?: number, borrowed = false) {
    this.#maxBytes = maxBytes;
    this.#rawField = rawField;
    this.#borrowed = borrowed;
  }

  /**
   * Takes the next bytes received.
   *
   * @param data The bytes.
   * @returns The messages completed by them, each with its prefix.
   * @throws {Error} When a message is larger than the limit.
   */
  write(data: Uint8Array): Buffer[] {
    if (this.#refused !== undefined) throw this.#refused;
    const done: Buffer[] = [];
    let at = 0;
    while (at < data.length) {
      if (this.#prefixRead < MESSAGE_PREFIX_BYTES) {
        const take = Math.min(MESSAGE_PREFIX_BYTES - this.#prefixRead, data.length - at);
        this.#prefix.set(data.subarray(at, at + take), this.#prefixRead);
        this.#prefixRead += take;
        at += take;
        if (this.#prefixRead === MESSAGE_PREFIX_BYTES) this.#startMessage(done);
        continue;
      }
      const take = Math.min(this.#size - this.#filled - this.#pendingBytes, data.length - at);
      const piece = data.subarray(at, at + take);
      at += take;
      if (this.#message === undefined) {
        this.#pending.push(piece);
        this.#pendingBytes += take;
        this.#maybePlace();
        // Still waiting for its buffer: keep a copy of a borrowed piece.
        if (this.#message === undefined && this.#borrowed) {
          this.#pending[this.#pending.length - 1] = piece.slice();
        }
      } else {
        this.#message.set(piece, MESSAGE_PREFIX_BYTES + this.#filled);
        this.#filled += take;
      }
      if (this.#message !== undefined && this.#filled === this.#size) this.#finish(done);
    }
    return done;
  }

  #startMessage(done: Buffer[]): void {
    const prefix = this.#prefix;
    const size = ((prefix[1]! << 24) >>> 0) + (prefix[2]! << 16) + (prefix[3]! << 8) +
      prefix[4]!;
    if (this.#maxBytes !== -1 && size > this.#maxBytes) {
      this.#refused = new Error(`Received message larger than max (${size} vs ${this.#maxBytes})`);
      throw this.#refused;
    }
    this.#size = size;
    if (this.#size === 0) {
      this.#place(0);
      this.#finish(done);
    }
  }

  // Places the message's buffer once the raw entry's offset is known, or known not to be found.
  #maybePlace(): void {
    const complete = this.#pendingBytes === this.#size;
    if (!complete && this.#size > UPFRONT_BYTES) return;
    let start: FieldStart = "none";
    if (this.#rawField !== undefined) {
      start = lengthDelimitedStart(this.#head(), this.#rawField);
      if (start === "more" && !complete && this.#pendingBytes < SEARCH_LIMIT) return;
    }
    this.#place(typeof start === "number" ? start : 0);
    for (const piece of this.#pending) {
      this.#message!.set(piece, MESSAGE_PREFIX_BYTES + this.#filled);
      this.#filled += piece.byteLength;
    }
    this.#pending = [];
    this.#pendingBytes = 0;
  }

  // The first bytes received of the message, as far as its raw entry is sought.
  #head(): Uint8Array {
    const first = this.#pending[0]!;
    const length = Math.min(this.#pendingBytes, SEARCH_LIMIT);
    if (first.byteLength >= length) return first;
    const head = new Uint8Array(length);
    let at = 0;
    for (const piece of this.#pending) {
      if (at === length) break;
      const take = Math.min(piece.byteLength, length - at);
      head.set(piece.subarray(0, take), at);
      at += take;
    }
    return head;
  }

  // Allocates the message's buffer so that body offset `rawOffset` lands on the alignment.
  #place(rawOffset: number): void {
    const misaligned = (MESSAGE_PREFIX_BYTES + rawOffset) % RAW_ALIGNMENT;
    const lead = misaligned === 0 ? 0 : RAW_ALIGNMENT - misaligned;
    const buffer = new ArrayBuffer(lead + MESSAGE_PREFIX_BYTES + this.#size);
    const message = Buffer.from(buffer, lead, MESSAGE_PREFIX_BYTES + this.#size);
    message.set(this.#prefix, 0);
    this.#message = message;
  }

  #finish(done: Buffer[]): void {
    done.push(this.#message!);
    this.#message = undefined;
    this.#filled = 0;
    this.#prefixRead = 0;
    this.#size = 0;
  }
}

/**
 * Encodes a message with its gRPC prefix, in one buffer: the message is encoded straight after
 * room left for the prefix, so framing costs no copy.
 *
 * @param encoder The method's response encoder.
 * @param message The message.
 * @param allocate Provides the buffer of a large message.
 * @returns The prefix and the message.
 *
 * @example Framing an empty message
 * ```ts
 * import { frameMessage } from "./message_framing.ts";
 * import { codecs } from "../../protocol/grpc_codec.ts";
 * import assert from "node:assert/strict";
 *
 * const framed = frameMessage(codecs.ServerLiveResponse, { live: true }, (n) => new Uint8Array(n));
 * assert.deepEqual([...framed], [0, 0, 0, 0, 2, 8, 1]);
 * ```
 */
export function frameMessage<T>(
  encoder: ResponseEncoder<T>,
  message: T,
  allocate: (bytes: number) => Uint8Array,
): Uint8Array {
  return writePrefix(encoder.encode(message, { headroom: MESSAGE_PREFIX_BYTES, allocate }));
}

/**
 * Writes the gRPC prefix (not compressed, the length) into the first
 * {@linkcode MESSAGE_PREFIX_BYTES} bytes, left free before a message encoded after them.
 *
 * @param bytes The room for the prefix, then the message.
 * @returns The same bytes.
 *
 * @example Write the prefix over the first five bytes
 * ```ts
 * import { writePrefix } from "./message_framing.ts";
 * import assert from "node:assert/strict";
 *
 * assert.deepEqual([...writePrefix(new Uint8Array([9, 9, 9, 9, 9, 8, 1]))], [0, 0, 0, 0, 2, 8, 1]);
 * ```
 */
export function writePrefix(bytes: Uint8Array): Uint8Array {
  // Not compressed (flag 0), then the length, big-endian.
  bytes[0] = 0;
  new DataView(bytes.buffer, bytes.byteOffset, MESSAGE_PREFIX_BYTES)
    .setUint32(1, bytes.byteLength - MESSAGE_PREFIX_BYTES);
  return bytes;
}
