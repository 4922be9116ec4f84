/**
 * `ArrayBuffer`s over memory that JavaScript does not own: the Triton core's memory, a
 * shared-memory mapping. Such memory may be freed or unmapped while a buffer over it is still
 * reachable, so code that keeps bytes past a call (the Triton engine lending a result to its
 * response) must copy them instead. A buffer moved to another isolate keeps the mark when it
 * travels with its wire tensor's `foreign` flag.
 *
 * @module
 */

const foreign = new WeakSet<ArrayBufferLike>();

/**
 * An `ArrayBuffer` over `byteLength` bytes of foreign memory (no copy), marked as such.
 *
 * @param pointer Where the memory starts.
 * @param byteLength The byte count (more than 0).
 * @param offset Bytes to skip from `pointer`.
 * @returns The buffer.
 *
 * @example View memory through a pointer and mark it foreign
 * ```ts
 * import { foreignBuffer, isForeign } from "./foreign_memory.ts";
 * import assert from "node:assert/strict";
 *
 * const own = new Uint8Array([1, 2, 3]);
 * const view = foreignBuffer(Deno.UnsafePointer.of(own)!, 3);
 * assert.deepEqual([...new Uint8Array(view)], [1, 2, 3]);
 * assert.ok(isForeign(view));
 * assert.ok(!isForeign(own.buffer));
 * ```
 */
export function foreignBuffer(
  pointer: Deno.PointerObject,
  byteLength: number,
  offset = 0,
): ArrayBuffer {
  const buffer = Deno.UnsafePointerView.getArrayBuffer(pointer, byteLength, offset);
  foreign.add(buffer);
  return buffer;
}

/**
 * Marks a buffer as foreign memory (one received from an isolate where it was).
 *
 * @param buffer The buffer.
 */
export function markForeign(buffer: ArrayBufferLike): void {
  foreign.add(buffer);
}

/**
 * Whether a buffer is over foreign memory (made by {@linkcode foreignBuffer} or marked).
 *
 * @param buffer The buffer.
 * @returns `true` for foreign memory.
 */
export function isForeign(buffer: ArrayBufferLike): boolean {
  return foreign.has(buffer);
}

/**
 * Whether bytes are JavaScript's own memory that code may keep past a call: a plain
 * `ArrayBuffer`, not shared, resizable, detached or foreign.
 *
 * @param bytes The bytes.
 * @returns `true` for such memory.
 *
 * @example A plain buffer is own memory, a shared one is not
 * ```ts
 * import { isOwnMemory } from "./foreign_memory.ts";
 * import assert from "node:assert/strict";
 *
 * assert.ok(isOwnMemory(new Uint8Array(4)));
 * assert.ok(!isOwnMemory(new Uint8Array(new SharedArrayBuffer(4))));
 * ```
 */
export function isOwnMemory(bytes: Uint8Array): bytes is Uint8Array<ArrayBuffer> {
  const buffer = bytes.buffer;
  return buffer instanceof ArrayBuffer && !buffer.resizable && !buffer.detached &&
    !foreign.has(buffer);
}
