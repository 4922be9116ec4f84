/**
 * Reusable buffers for large outgoing messages. Every fresh `ArrayBuffer` of megabytes costs
 * zero-filling, page faults and, above all, garbage collection: V8 counts the memory behind
 * array buffers and starts a full mark-compact once enough was allocated since the last one,
 * which with 4 MiB tensors came every few requests. A response buffer is free again once the
 * HTTP/2 stream has taken its bytes, so the next response of that size reuses it.
 *
 * @module
 */

/** Options of {@linkcode BufferPool}. */
export interface BufferPoolOptions {
  /**
   * Buffers smaller than this are not pooled (allocating them is cheap); pooled sizes are
   * rounded up to a multiple of it.
   *
   * @default {65536}
   */
  granularity?: number;
  /**
   * The most bytes kept for reuse; buffers given back beyond it are left to the collector.
   *
   * @default {67108864}
   */
  maxBytes?: number;
}

/**
 * A pool of large byte buffers, by size.
 *
 * @example Take, give back, take again
 * ```ts
 * import { BufferPool } from "./buffer_pool.ts";
 * import assert from "node:assert/strict";
 *
 * const pool = new BufferPool();
 * const first = pool.take(100_000);
 * assert.equal(first.byteLength, 100_000);
 * pool.give(first);
 * assert.equal(pool.take(100_001).buffer, first.buffer);
 * assert.notEqual(pool.take(100_000).buffer, first.buffer); // in use again: a new one
 * ```
 */
export class BufferPool {
  #granularity: number;
  #maxBytes: number;
  #free = new Map<number, ArrayBuffer[]>();
  #freeBytes = 0;
  #ours = new WeakSet<ArrayBuffer>();

  /**
   * Makes an empty pool.
   *
   * @param options The smallest pooled size and the most bytes kept.
   */
  constructor(options: BufferPoolOptions = {}) {
    this.#granularity = options.granularity ?? 64 * 1024;
    this.#maxBytes = options.maxBytes ?? 64 * 1024 * 1024;
  }

  /** Bytes held for reuse now. */
  get freeBytes(): number {
    return this.#freeBytes;
  }

  /**
   * A buffer of exactly `bytes` bytes, reused when one of its size class is free. Its contents
   * are unspecified.
   *
   * @param bytes The size.
   * @returns The buffer.
   */
  take(bytes: number): Uint8Array {
    if (bytes < this.#granularity) return new Uint8Array(bytes);
    const size = Math.ceil(bytes / this.#granularity) * this.#granularity;
    const reused = this.#free.get(size)?.pop();
    if (reused !== undefined) {
      this.#freeBytes -= size;
      return new Uint8Array(reused, 0, bytes);
    }
    const buffer = new ArrayBuffer(size);
    this.#ours.add(buffer);
    return new Uint8Array(buffer, 0, bytes);
  }

  /**
   * Gives back a buffer from {@linkcode BufferPool.take} once nothing reads it any more; other
   * buffers are ignored.
   *
   * @param bytes The buffer, or any view of it.
   */
  give(bytes: Uint8Array): void {
    const buffer = bytes.buffer;
    if (!(buffer instanceof ArrayBuffer) || !this.#ours.has(buffer)) return;
    if (this.#freeBytes + buffer.byteLength > this.#maxBytes) return;
    const list = this.#free.get(buffer.byteLength) ?? [];
    if (list.includes(buffer)) return;
    list.push(buffer);
    this.#free.set(buffer.byteLength, list);
    this.#freeBytes += buffer.byteLength;
  }
}
