/**
 * gRPC message framing (the 5-byte prefix: compressed flag, big-endian length) for the front
 * end's calls, in place of grpc-js's own, which copies every large tensor twice more than
 * needed:
 *
 * - Receiving, grpc-js gathers a message's pieces and copies them into a new buffer, where the
 *   tensor data rarely starts aligned for its element type, so `raw_input_contents` is copied
 *   again to be read as a typed array. {@linkcode AlignedMessageDecoder} copies each message
 *   once, into a buffer sized from its prefix and placed so that the first raw entry starts on a
 *   64-byte boundary.
 * - Sending, grpc-js serializes a response, then copies it after a new prefix. Serializers made
 *   by {@linkcode messageSerializer} encode straight after room left for the prefix instead.
 *
 * grpc-js has no option for either, so {@linkcode framingInterceptor} swaps both on each call
 * (grpc-js's `decoder` field and `serializeMessage` method of its base server call). If a
 * grpc-js release renames them, calls keep grpc-js's framing (the tests that check the copies
 * are spared then fail).
 *
 * @module
 */

import type * as grpc from "@grpc/grpc-js";
import { Buffer } from "node:buffer";
import type { EncodeOptions, MessageCodec } from "../../protocol/grpc_codec.ts";
import { type FieldStart, lengthDelimitedStart } from "../../protocol/protobuf_wire.ts";
import { BufferPool } from "./buffer_pool.ts";
import { STREAM_WINDOW_BYTES } from "./connection_tuning.ts";

/** The length of the prefix before each gRPC message. */
export const MESSAGE_PREFIX_BYTES = 5;

/** The boundary the first raw entry of a received message is placed on (a cache line). */
export const RAW_ALIGNMENT = 64;

/** How far into a message its raw entry is sought. */
const SEARCH_LIMIT = 64 * 1024;

/**
 * The largest message whose buffer is made when its first bytes arrive; a larger one keeps its
 * pieces until it is complete, as grpc-js does, so that a prefix announcing a huge message
 * costs nothing until the bytes come. A client may send this much without waiting for us
 * anyway: it is the stream's flow-control window.
 */
const UPFRONT_BYTES = STREAM_WINDOW_BYTES;

/**
 * Splits a call's received bytes into gRPC messages, each copied once into its own buffer
 * (prefix included, as grpc-js expects), with the first entry of a raw-contents field placed on
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

type Encode = (value: unknown, options: EncodeOptions) => Uint8Array;

const serializers = new WeakMap<(value: unknown) => Buffer, Encode>();

/**
 * A grpc-js `responseSerialize` for a codec, which {@linkcode framingInterceptor} can also
 * use to encode a message straight after its prefix.
 *
 * @param codec The codec of the response messages.
 * @returns The serializer.
 *
 * @example
 * ```ts
 * import { messageSerializer } from "./message_framing.ts";
 * import { codecs } from "../../protocol/grpc_codec.ts";
 * import assert from "node:assert/strict";
 *
 * const serialize = messageSerializer(codecs.ServerLiveResponse);
 * assert.deepEqual([...serialize({ live: true })], [8, 1]);
 * ```
 */
export function messageSerializer<T>(codec: MessageCodec<T>): (value: unknown) => Buffer {
  const serialize = (value: unknown): Buffer => {
    const bytes = codec.encode(value as T);
    return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  };
  serializers.set(serialize, (value, options) => codec.encode(value as T, options));
  return serialize;
}

/**
 * Frames a response for a transport of our own: straight after room for the prefix when the
 * serializer was made by {@linkcode messageSerializer}, else serialized and copied after one.
 *
 * @param serialize The method's response serializer.
 * @param value The message.
 * @param allocate Provides the buffer of a large message.
 * @returns The prefix and the message.
 *
 * @example Framing an empty message
 * ```ts
 * import { frameMessage, messageSerializer } from "./message_framing.ts";
 * import { codecs } from "../../protocol/grpc_codec.ts";
 * import assert from "node:assert/strict";
 *
 * const serialize = messageSerializer(codecs.Empty);
 * assert.deepEqual([...frameMessage(serialize, {}, (n) => new Uint8Array(n))], [0, 0, 0, 0, 0]);
 * ```
 */
export function frameMessage(
  serialize: (value: unknown) => Buffer,
  value: unknown,
  allocate: (bytes: number) => Uint8Array,
): Uint8Array {
  const encode = serializers.get(serialize);
  if (encode !== undefined) return framed(encode, value, allocate);
  const bytes = serialize(value);
  const message = allocate(MESSAGE_PREFIX_BYTES + bytes.byteLength);
  message.set(bytes, MESSAGE_PREFIX_BYTES);
  return writePrefix(message);
}

/**
 * Encodes a message with its gRPC prefix, in one buffer.
 *
 * @param encode Encodes the message after the given headroom.
 * @param value The message.
 * @param allocate Provides the buffer of a large message.
 * @returns The prefix and the message.
 */
function framed(
  encode: Encode,
  value: unknown,
  allocate: (bytes: number) => Uint8Array,
): Buffer {
  const bytes = writePrefix(encode(value, { headroom: MESSAGE_PREFIX_BYTES, allocate }));
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

/**
 * Writes the gRPC prefix (not compressed, the length) into the first
 * {@linkcode MESSAGE_PREFIX_BYTES} bytes, left free before a message encoded after them.
 *
 * @param bytes The room for the prefix, then the message.
 * @returns The same bytes.
 *
 * @example
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

/** What this module replaces on grpc-js's base server call. */
interface FramingHooks {
  decoder: { write(data: Uint8Array): Uint8Array[] };
  serializeMessage(value: unknown): Buffer;
  sendMessage(message: unknown, callback: () => void): void;
  maxReceiveMessageSize: number;
}

/** Options of {@linkcode framingInterceptor}. */
export interface FramingOptions {
  /**
   * The raw-contents field to align in each method's requests, by method path (e.g. 7 for
   * `/inference.GRPCInferenceService/ModelInfer`).
   *
   * @default {new Map()}
   */
  rawFields?: ReadonlyMap<string, number>;
  /**
   * Where the buffers of large responses come from; each goes back once the HTTP/2 stream has
   * taken its bytes.
   *
   * @default {new BufferPool()}
   */
  pool?: BufferPool;
}

/**
 * A grpc-js server interceptor that gives every call an {@linkcode AlignedMessageDecoder} and,
 * for methods whose `responseSerialize` came from {@linkcode messageSerializer}, responses
 * encoded straight after their prefix.
 *
 * @param options The fields to align.
 * @returns The interceptor (for the `interceptors` server option).
 *
 * @example Install on a server
 * ```ts
 * import * as grpc from "@grpc/grpc-js";
 * import { framingInterceptor } from "./message_framing.ts";
 * import assert from "node:assert/strict";
 *
 * const server = new grpc.Server({ interceptors: [framingInterceptor()] });
 * assert.ok(server);
 * ```
 */
export function framingInterceptor(options: FramingOptions = {}): grpc.ServerInterceptor {
  const rawFields = options.rawFields ?? new Map<string, number>();
  const pool = options.pool ?? new BufferPool();
  const allocate = (bytes: number): Uint8Array => pool.take(bytes);
  return (method, call) => {
    const base = call as unknown as Partial<FramingHooks>;
    if (
      typeof base.decoder?.write === "function" &&
      typeof base.serializeMessage === "function" &&
      typeof base.sendMessage === "function" &&
      typeof base.maxReceiveMessageSize === "number"
    ) {
      base.decoder = new AlignedMessageDecoder(
        base.maxReceiveMessageSize,
        rawFields.get(method.path),
      );
      const encode = serializers.get(method.responseSerialize as (value: unknown) => Buffer);
      if (encode !== undefined) {
        // grpc-js serializes inside sendMessage, then calls back once the stream has taken the
        // bytes: the buffer is free from then on. One message is sent at a time per call.
        let sending: Buffer | undefined;
        base.serializeMessage = (value) => sending = framed(encode, value, allocate);
        const send = base.sendMessage.bind(base);
        base.sendMessage = (message, callback) => {
          // Set once sendMessage returns: a callback run before that gives nothing back.
          const sent: { buffer?: Buffer | undefined } = {};
          sending = undefined;
          send(message, () => {
            if (sent.buffer !== undefined) pool.give(sent.buffer);
            callback();
          });
          sent.buffer = sending;
        };
      }
    }
    // The call itself, not a wrapper: a pass-through layer would cost every call a little.
    return call as grpc.ServerInterceptingCall;
  };
}
