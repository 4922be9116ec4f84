/**
 * Joining byte chunks read or encoded in pieces.
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
 * import { concatBytes } from "./concat_bytes.ts";
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
