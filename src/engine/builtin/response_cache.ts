/**
 * The built-in engine's response cache: responses of identical requests (same model, version,
 * input names, dtypes, shapes and bytes, and requested outputs), kept in LRU order within a byte
 * budget.
 *
 * @module
 */

import { concatBytes, equalBytes } from "../../tensor/bytes.ts";
import type { DType } from "../../tensor/dtype.ts";
import {
  type NDArray,
  type NumericNDArray,
  rawByteSize,
  toRawBytes,
} from "../../tensor/ndarray.ts";

const encoder = new TextEncoder();

/** FNV-1a over bytes, 32 bits; equal keys are then compared byte for byte. */
function fnv1a(bytes: Uint8Array, seed = 0x811c9dc5): number {
  let hash = seed;
  for (let i = 0; i < bytes.length; i++) {
    hash ^= bytes[i]!;
    hash = Math.imul(hash, 0x01000193);
  }
  return hash >>> 0;
}

function copyArray(array: NDArray): NDArray {
  if (array.dtype === "bytes") {
    return { dtype: "bytes", shape: [...array.shape], data: array.data.map((e) => e.slice()) };
  }
  return {
    dtype: array.dtype as DType,
    shape: [...array.shape],
    data: array.data.slice(),
  } as NumericNDArray;
}

/** A cache key: its hash and the exact bytes it stands for. */
export interface CacheKey {
  /** Hash and length, the map key. */
  readonly id: string;
  /** Everything the key covers, for an exact comparison. */
  readonly bytes: Uint8Array;
}

/**
 * Builds the key of a request.
 *
 * @param model The model version: its name and version.
 * @param inputs Input tensors by name.
 * @param outputs Requested output names.
 * @returns The key.
 *
 * @example Equal requests, equal keys
 * ```ts
 * import { cacheKey } from "./response_cache.ts";
 * import { ndarray } from "../../tensor/ndarray.ts";
 * import assert from "node:assert/strict";
 *
 * const a = cacheKey({ name: "m", version: 1 }, new Map([["x", ndarray(new Int32Array([1]))]]), ["y"]);
 * const b = cacheKey({ name: "m", version: 1 }, new Map([["x", ndarray(new Int32Array([1]))]]), ["y"]);
 * assert.equal(a.id, b.id);
 * ```
 */
export function cacheKey(
  model: { readonly name: string; readonly version: number },
  inputs: ReadonlyMap<string, NDArray>,
  outputs: readonly string[],
): CacheKey {
  const names = [...inputs.keys()].sort();
  const header = JSON.stringify([
    model.name,
    model.version,
    outputs,
    names.map((name) => {
      const array = inputs.get(name)!;
      return [name, array.dtype, array.shape];
    }),
  ]);
  const parts = [
    encoder.encode(header),
    new Uint8Array([0]),
    ...names.map((name) => toRawBytes(inputs.get(name)!)),
  ];
  const bytes = concatBytes(parts, parts.reduce((total, part) => total + part.byteLength, 0));
  return { id: `${fnv1a(bytes).toString(16)}:${bytes.byteLength}`, bytes };
}

interface CacheEntry {
  readonly key: Uint8Array;
  readonly outputs: ReadonlyMap<string, NDArray>;
  readonly size: number;
}

/**
 * An LRU response cache bounded by bytes (keys plus outputs).
 *
 * @example Hit after insert
 * ```ts
 * import { cacheKey, ResponseCache } from "./response_cache.ts";
 * import { ndarray } from "../../tensor/ndarray.ts";
 * import assert from "node:assert/strict";
 *
 * const cache = new ResponseCache(1 << 20);
 * const key = cacheKey({ name: "m", version: 1 }, new Map([["x", ndarray(new Int32Array([1]))]]), ["y"]);
 * assert.equal(cache.lookup(key), undefined);
 * cache.insert(key, new Map([["y", ndarray(new Int32Array([2]))]]));
 * assert.deepEqual([...(cache.lookup(key)!.get("y")!.data as Int32Array)], [2]);
 * ```
 */
export class ResponseCache {
  #capacity: number;
  #used = 0;
  #entries = new Map<string, CacheEntry>();

  /**
   * Creates an empty cache.
   *
   * @param byteSize The byte budget.
   */
  constructor(byteSize: number) {
    this.#capacity = byteSize;
  }

  /** Bytes in use. */
  get usedBytes(): number {
    return this.#used;
  }

  /** Number of cached responses. */
  get size(): number {
    return this.#entries.size;
  }

  /**
   * Looks a key up, marking the entry most recently used.
   *
   * @param key The request's key.
   * @returns Copies of the cached outputs (a response's outputs are its receiver's, who may move
   *   them to another isolate: a caller in a Worker), or `undefined` on a miss.
   */
  lookup(key: CacheKey): ReadonlyMap<string, NDArray> | undefined {
    const entry = this.#entries.get(key.id);
    if (entry === undefined || !equalBytes(entry.key, key.bytes)) return undefined;
    this.#entries.delete(key.id);
    this.#entries.set(key.id, entry);
    return new Map([...entry.outputs].map(([name, array]) => [name, copyArray(array)]));
  }

  /**
   * Stores outputs (copied) under a key, evicting least recently used entries to fit. Entries
   * larger than the whole budget are not stored.
   *
   * @param key The request's key.
   * @param outputs The response's outputs.
   */
  insert(key: CacheKey, outputs: ReadonlyMap<string, NDArray>): void {
    let size = key.bytes.byteLength;
    for (const array of outputs.values()) size += rawByteSize(array);
    if (size > this.#capacity) return;
    const old = this.#entries.get(key.id);
    if (old !== undefined) {
      this.#entries.delete(key.id);
      this.#used -= old.size;
    }
    for (const [id, entry] of this.#entries) {
      if (this.#used + size <= this.#capacity) break;
      this.#entries.delete(id);
      this.#used -= entry.size;
    }
    const copied = new Map([...outputs].map(([name, array]) => [name, copyArray(array)]));
    this.#entries.set(key.id, { key: key.bytes, outputs: copied, size });
    this.#used += size;
  }
}
