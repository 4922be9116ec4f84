/**
 * Triton's BYTES tensor layout: each element is a 4-byte little-endian length followed by that
 * many raw bytes, elements in row-major order with no padding. Used for HTTP binary data, gRPC
 * raw contents and the Triton core's buffers alike.
 *
 * @module
 */

import { InferenceError } from "../errors.ts";

/**
 * The serialized size of BYTES elements: Σ(4 + length).
 *
 * @param elements The elements.
 * @returns The byte count of their serialization.
 *
 * @example Two elements with their length prefixes
 * ```ts
 * import { serializedBytesSize } from "./bytes_codec.ts";
 * import assert from "node:assert/strict";
 *
 * assert.equal(serializedBytesSize([new Uint8Array(3), new Uint8Array(0)]), 11);
 * ```
 */
export function serializedBytesSize(elements: readonly Uint8Array[]): number {
  let size = 0;
  for (const element of elements) size += 4 + element.byteLength;
  return size;
}

/**
 * Serializes BYTES elements with their 4-byte little-endian length prefixes.
 *
 * @param elements The elements (embedded `\x00` bytes are kept).
 * @param target Where to write; a new buffer when omitted. Must hold {@linkcode serializedBytesSize} bytes.
 * @returns The serialized bytes (`target` when given).
 *
 * @example Two elements
 * ```ts
 * import { serializeBytes } from "./bytes_codec.ts";
 * import assert from "node:assert/strict";
 *
 * const out = serializeBytes([new Uint8Array([97, 0]), new Uint8Array([98])]);
 * assert.deepEqual([...out], [2, 0, 0, 0, 97, 0, 1, 0, 0, 0, 98]);
 * ```
 */
export function serializeBytes(
  elements: readonly Uint8Array[],
  target?: Uint8Array,
): Uint8Array {
  const out = target ?? new Uint8Array(serializedBytesSize(elements));
  const view = new DataView(out.buffer, out.byteOffset, out.byteLength);
  let offset = 0;
  for (const element of elements) {
    view.setUint32(offset, element.byteLength, true);
    out.set(element, offset + 4);
    offset += 4 + element.byteLength;
  }
  return out;
}

/**
 * Splits serialized BYTES data into its elements, as views into `data` (no copy). With an
 * expected count, data holding more elements is refused as soon as one more begins, without
 * building the rest (a 64 MiB body of 16M empty elements for a one-element shape builds one
 * element, not 16M).
 *
 * @param data The serialized bytes.
 * @param expectedCount The element count the shape implies; checked when given.
 * @returns One `Uint8Array` view per element.
 * @throws {InferenceError} (INVALID_ARG) When a length prefix runs past the end, or the count differs.
 *
 * @example Round trip
 * ```ts
 * import { deserializeBytes, serializeBytes } from "./bytes_codec.ts";
 * import assert from "node:assert/strict";
 *
 * const text = new TextEncoder();
 * const wire = serializeBytes([text.encode("hi"), text.encode("a\0b")]);
 * const back = deserializeBytes(wire, 2);
 * assert.deepEqual(back.map((b) => [...b]), [[104, 105], [97, 0, 98]]);
 * assert.throws(() => deserializeBytes(wire, 1), /expected 1 element for the shape, found more/);
 * ```
 */
export function deserializeBytes(data: Uint8Array, expectedCount?: number): Uint8Array[] {
  const view = new DataView(data.buffer, data.byteOffset, data.byteLength);
  const elements: Uint8Array[] = [];
  let offset = 0;
  while (offset < data.byteLength) {
    if (elements.length === expectedCount) {
      throw new InferenceError(
        `Invalid BYTES data: expected ${expectedCount} ${
          expectedCount === 1 ? "element" : "elements"
        } for the shape, found more (${data.byteLength - offset} bytes follow element ${
          expectedCount - 1
        })`,
        { code: "INVALID_ARG" },
      );
    }
    if (offset + 4 > data.byteLength) {
      throw new InferenceError(
        `Invalid BYTES data: a length prefix at byte ${offset} is cut off (only ${
          data.byteLength - offset
        } bytes left)`,
        { code: "INVALID_ARG" },
      );
    }
    const length = view.getUint32(offset, true);
    const start = offset + 4;
    if (start + length > data.byteLength) {
      throw new InferenceError(
        `Invalid BYTES data: element ${elements.length} claims ${length} bytes at byte ${start} but only ${
          data.byteLength - start
        } remain`,
        { code: "INVALID_ARG" },
      );
    }
    elements.push(data.subarray(start, start + length));
    offset = start + length;
  }
  if (expectedCount !== undefined && elements.length !== expectedCount) {
    throw new InferenceError(
      `Invalid BYTES data: expected ${expectedCount} elements for the shape, found ${elements.length}`,
      { code: "INVALID_ARG" },
    );
  }
  return elements;
}
