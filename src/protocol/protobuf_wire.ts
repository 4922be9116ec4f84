/**
 * The few pieces of the protobuf wire format that DenoTriton reads and writes by hand, around
 * protobufjs, for messages with raw tensor contents: the gRPC codec writes each raw entry's tag
 * and length itself (so the tensor bytes are copied once), and the gRPC front end finds where a
 * message's first raw entry starts before the message has fully arrived (to align it).
 *
 * @module
 */

/** Where the payload of a length-delimited field starts, if the bytes show it yet. */
export type FieldStart = number | "more" | "none";

/** Wire type 2: a varint length, then that many bytes. */
const LENGTH_DELIMITED = 2;

/**
 * The number of bytes a varint takes.
 *
 * @param value A non-negative integer (up to 2^53).
 * @returns Its encoded size.
 *
 * @example 127 takes one byte, 128 two
 * ```ts
 * import { varintSize } from "./protobuf_wire.ts";
 * import assert from "node:assert/strict";
 *
 * assert.equal(varintSize(127), 1);
 * assert.equal(varintSize(128), 2);
 * ```
 */
export function varintSize(value: number): number {
  let size = 1;
  while (value >= 0x80) {
    value = Math.floor(value / 0x80);
    size++;
  }
  return size;
}

/**
 * Reads a varint.
 *
 * @param bytes The bytes.
 * @param at Where the varint starts.
 * @returns The value and the offset after it, or `undefined` when the bytes end first.
 *
 * @example Read 150; a cut-off varint is undefined
 * ```ts
 * import { readVarint } from "./protobuf_wire.ts";
 * import assert from "node:assert/strict";
 *
 * assert.deepEqual(readVarint(new Uint8Array([0x96, 0x01]), 0), [150, 2]);
 * assert.equal(readVarint(new Uint8Array([0x96]), 0), undefined);
 * ```
 */
export function readVarint(bytes: Uint8Array, at: number): [number, number] | undefined {
  let value = 0;
  let scale = 1;
  for (let i = at; i < bytes.length && i < at + 10; i++) {
    const byte = bytes[i]!;
    value += (byte & 0x7f) * scale;
    if (byte < 0x80) return [value, i + 1];
    scale *= 0x80;
  }
  return undefined;
}

/**
 * The size of a length-delimited field's tag and length.
 *
 * @param field The field number.
 * @param length The payload's length.
 * @returns The bytes before the payload.
 *
 * @example The prefix of a 4 MiB field
 * ```ts
 * import { lengthPrefixSize } from "./protobuf_wire.ts";
 * import assert from "node:assert/strict";
 *
 * assert.equal(lengthPrefixSize(6, 4 * 1048576), 5); // one byte of tag, four of length
 * ```
 */
export function lengthPrefixSize(field: number, length: number): number {
  return varintSize(field * 8 + LENGTH_DELIMITED) + varintSize(length);
}

/** A length-delimited field's prefix: which field, and how long its payload is. */
export interface LengthPrefix {
  /** The field number. */
  readonly field: number;
  /** The payload's length. */
  readonly length: number;
}

/**
 * Writes a length-delimited field's tag and length.
 *
 * @param out The buffer.
 * @param at Where to write.
 * @param prefix The field number and the payload's length.
 * @returns The offset after them, where the payload goes.
 *
 * @example Field 6, 300 bytes
 * ```ts
 * import { writeLengthPrefix } from "./protobuf_wire.ts";
 * import assert from "node:assert/strict";
 *
 * const out = new Uint8Array(3);
 * assert.equal(writeLengthPrefix(out, 0, { field: 6, length: 300 }), 3);
 * assert.deepEqual([...out], [0x32, 0xac, 0x02]);
 * ```
 */
export function writeLengthPrefix(out: Uint8Array, at: number, prefix: LengthPrefix): number {
  for (let value of [prefix.field * 8 + LENGTH_DELIMITED, prefix.length]) {
    while (value >= 0x80) {
      out[at++] = (value % 0x80) | 0x80;
      value = Math.floor(value / 0x80);
    }
    out[at++] = value;
  }
  return at;
}

/**
 * Finds where the payload of the first occurrence of a length-delimited field starts in the
 * beginning of a protobuf message.
 *
 * @param bytes The first bytes of the message.
 * @param field The field number.
 * @returns The offset of the payload, `"more"` when the bytes end before it is found, or
 *   `"none"` when the message cannot hold it where it is looked for.
 *
 * @example Field 7 after a model name
 * ```ts
 * import { lengthDelimitedStart } from "./protobuf_wire.ts";
 * import assert from "node:assert/strict";
 *
 * const message = new Uint8Array([0x0a, 0x01, 0x6d, 0x3a, 0x02, 1, 2]);
 * assert.equal(lengthDelimitedStart(message, 7), 5);
 * assert.equal(lengthDelimitedStart(message.subarray(0, 4), 7), "more");
 * ```
 */
export function lengthDelimitedStart(bytes: Uint8Array, field: number): FieldStart {
  let at = 0;
  while (at < bytes.length) {
    const tag = readVarint(bytes, at);
    if (tag === undefined) return "more";
    const [key, afterTag] = tag;
    at = afterTag;
    switch (key % 8) {
      case 0: {
        const value = readVarint(bytes, at);
        if (value === undefined) return "more";
        at = value[1];
        break;
      }
      case 1:
        at += 8;
        break;
      case LENGTH_DELIMITED: {
        const length = readVarint(bytes, at);
        if (length === undefined) return "more";
        if (Math.floor(key / 8) === field) return length[1];
        at = length[1] + length[0];
        break;
      }
      case 5:
        at += 4;
        break;
      default:
        return "none";
    }
  }
  return "more";
}
