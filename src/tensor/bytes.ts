/**
 * Byte strings: joining chunks read or encoded in pieces, and comparing them.
 *
 * @module
 */

/**
 * Joins byte chunks into one array. A single chunk is returned as it is (no copy); more are
 * copied once into a new array of `size` bytes.
 *
 * @param chunks The chunks, in order.
 * @param size Their total length in bytes.
 * @returns The joined bytes.
 *
 * @example One chunk is not copied
 * ```ts
 * import { concatBytes } from "./bytes.ts";
 * import assert from "node:assert/strict";
 *
 * const a = new Uint8Array([1, 2]);
 * assert.equal(concatBytes([a], 2), a);
 * assert.deepEqual(concatBytes([a, new Uint8Array([3])], 3), new Uint8Array([1, 2, 3]));
 * ```
 */
export function concatBytes(chunks: readonly Uint8Array[], size: number): Uint8Array {
  if (chunks.length === 1) return chunks[0]!;
  const out = new Uint8Array(size);
  let offset = 0;
  for (const chunk of chunks) {
    out.set(chunk, offset);
    offset += chunk.byteLength;
  }
  return out;
}

/**
 * Compares two byte strings as Python compares `bytes`: lexicographically, a prefix before the
 * longer string.
 *
 * @param a A byte string.
 * @param b Another.
 * @returns Negative when `a` sorts first, 0 when they are equal, positive otherwise.
 *
 * @example Order of byte strings
 * ```ts
 * import { compareBytes } from "./bytes.ts";
 * import assert from "node:assert/strict";
 *
 * assert.ok(compareBytes(new Uint8Array([1]), new Uint8Array([2])) < 0);
 * assert.ok(compareBytes(new Uint8Array([1, 0]), new Uint8Array([1])) > 0);
 * ```
 */
export function compareBytes(a: Uint8Array, b: Uint8Array): number {
  const length = Math.min(a.byteLength, b.byteLength);
  for (let index = 0; index < length; index++) {
    const difference = a[index]! - b[index]!;
    if (difference !== 0) return difference;
  }
  return a.byteLength - b.byteLength;
}

/**
 * Whether two byte strings are equal.
 *
 * @param a A byte string.
 * @param b Another.
 * @returns Whether they hold the same bytes.
 *
 * @example Equal and unequal
 * ```ts
 * import { equalBytes } from "./bytes.ts";
 * import assert from "node:assert/strict";
 *
 * assert.ok(equalBytes(new Uint8Array([1, 2]), new Uint8Array([1, 2])));
 * assert.ok(!equalBytes(new Uint8Array([1, 2]), new Uint8Array([1])));
 * ```
 */
export function equalBytes(a: Uint8Array, b: Uint8Array): boolean {
  if (a.byteLength !== b.byteLength) return false;
  for (let index = 0; index < a.byteLength; index++) if (a[index] !== b[index]) return false;
  return true;
}
