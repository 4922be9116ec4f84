/**
 * Small TypedArrays carved from shared chunks. A new `ArrayBuffer` costs Deno and V8 far more
 * than an object (on the 2-core VM about 0.5 to 1.3 µs each, against 0.02 µs for a view of an
 * existing buffer), and a small JSON inference request needs one per input tensor: the front ends
 * decode such tensors into views of one chunk instead.
 *
 * A chunk's bytes are handed out once and never reused, so each view owns its elements; the
 * garbage collector frees a chunk with its last view (a view kept for long keeps its chunk, at
 * most {@linkcode CHUNK_BYTES}). A view's `byteOffset` may be other than 0 and its `buffer`
 * holds other tensors, as for binary inputs viewed in the request body. Chunks are marked
 * ({@linkcode isSharedChunk}): moving or detaching one would detach every tensor in it, so the
 * isolate codec copies their views instead. (The Triton engine, which revokes its views of a
 * batch's inputs when the server gives up on the batch, revokes only views of foreign memory.)
 *
 * @module
 */

import { elementSize, newTypedArray, type NumericDType, type TypedArray } from "./dtype.ts";

/** Bytes of a chunk. */
export const CHUNK_BYTES = 16 * 1024;

/** The largest tensor, in bytes, that a chunk holds; larger ones get buffers of their own. */
export const SMALL_TENSOR_BYTES = 512;

const chunks = new WeakSet<ArrayBufferLike>();
let chunk: ArrayBuffer | undefined;
let used = CHUNK_BYTES;

/**
 * A zeroed TypedArray of `length` elements: a view of a shared chunk when it is small, else a
 * TypedArray of its own.
 *
 * @param dtype Its element type.
 * @param length Its element count.
 * @returns The TypedArray, 8-byte aligned.
 *
 * @example Two small tensors share a chunk, a large one does not
 * ```ts
 * import { isSharedChunk, smallTypedArray } from "./small_tensors.ts";
 * import assert from "node:assert/strict";
 *
 * const a = smallTypedArray("float32", 8);
 * const b = smallTypedArray("int64", 2);
 * assert.equal(a.buffer, b.buffer);
 * assert.ok(isSharedChunk(a.buffer));
 * assert.deepEqual([...a], [0, 0, 0, 0, 0, 0, 0, 0]);
 * assert.equal(b.byteOffset % 8, 0);
 * assert.ok(!isSharedChunk(smallTypedArray("float64", 10_000).buffer));
 * ```
 */
export function smallTypedArray(dtype: NumericDType, length: number): TypedArray {
  const bytes = length * elementSize(dtype);
  if (bytes === 0 || bytes > SMALL_TENSOR_BYTES) return newTypedArray(dtype, length);
  let start = (used + 7) & ~7;
  if (chunk === undefined || start + bytes > CHUNK_BYTES) {
    chunk = new ArrayBuffer(CHUNK_BYTES);
    chunks.add(chunk);
    start = 0;
  }
  used = start + bytes;
  return newTypedArray(dtype, chunk, { byteOffset: start, length });
}

/**
 * Whether a buffer is a chunk of {@linkcode smallTypedArray}'s, which other tensors share.
 *
 * @param buffer A TypedArray's buffer.
 * @returns `true` for a shared chunk.
 */
export function isSharedChunk(buffer: ArrayBufferLike): boolean {
  return chunks.has(buffer);
}
