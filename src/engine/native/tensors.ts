/**
 * Tensors across the FFI boundary: DenoTriton dtypes ↔ `TRITONSERVER_DataType` values, and
 * NDArrays read in place from memory the core owns.
 *
 * @module
 */

import { InferenceError } from "../../errors.ts";
import type { DType } from "../../tensor/dtype.ts";
import { foreignBuffer, isOwnMemory } from "../../tensor/foreign_memory.ts";
import { fromRawBytes, type NDArray } from "../../tensor/ndarray.ts";
import { SMALL_TENSOR_BYTES, smallTypedArray } from "../../tensor/small_tensors.ts";
import { openLibc } from "../../native/ffi.ts";

const BY_DTYPE: Readonly<Record<DType, number>> = {
  bool: 1,
  uint8: 2,
  uint16: 3,
  uint32: 4,
  uint64: 5,
  int8: 6,
  int16: 7,
  int32: 8,
  int64: 9,
  float16: 10,
  float32: 11,
  float64: 12,
  bytes: 13,
  bfloat16: 14,
};

const BY_VALUE = new Map<number, DType>(
  (Object.entries(BY_DTYPE) as [DType, number][]).map(([dtype, value]) => [value, dtype]),
);

/**
 * The `TRITONSERVER_DataType` value of a dtype.
 *
 * @param dtype A dtype.
 * @returns Its enum value.
 *
 * @example The Triton numbers of float32 and bytes
 * ```ts
 * import { tritonDataType } from "./tensors.ts";
 * import assert from "node:assert/strict";
 *
 * assert.equal(tritonDataType("float32"), 11);
 * assert.equal(tritonDataType("bytes"), 13);
 * ```
 */
export function tritonDataType(dtype: DType): number {
  return BY_DTYPE[dtype];
}

/**
 * The dtype of a `TRITONSERVER_DataType` value.
 *
 * @param value An enum value.
 * @returns The dtype.
 * @throws {InferenceError} (INVALID_ARG) For INVALID or unknown values.
 *
 * @example The dtype of Triton type 9
 * ```ts
 * import { dtypeOfTriton } from "./tensors.ts";
 * import assert from "node:assert/strict";
 *
 * assert.equal(dtypeOfTriton(9), "int64");
 * ```
 */
export function dtypeOfTriton(value: number): DType {
  const dtype = BY_VALUE.get(value);
  if (dtype === undefined) {
    throw InferenceError.invalidArg(`Unsupported Triton data type: ${value}`);
  }
  return dtype;
}

/**
 * The address of JavaScript bytes, for the core. Reading `.buffer` first moves small on-heap
 * typed arrays off-heap, so the address stays put.
 *
 * @param bytes The bytes.
 * @returns Their address.
 */
export function addressOf(bytes: Uint8Array): bigint {
  void bytes.buffer;
  // Empty bytes keep Deno's own answer (it takes their exact address, whatever it is); the rest
  // ask libc, without the WeakMap entry `UnsafePointer.of` makes per call (see `LIBC_SYMBOLS`).
  if (bytes.byteLength === 0) return BigInt(Deno.UnsafePointer.value(Deno.UnsafePointer.of(bytes)));
  return openLibc().addressOf(bytes, 0, 0n);
}

// JavaScript memory handed to the core (request inputs, results lent to responses), by address,
// with a count per address (requests in flight may share the same bytes, e.g. one shared-memory
// region, and an identity model's result is its request's input). An address given back keeps
// its entry, empty, until many are: the allocator hands the same addresses out again, and a
// long-lived Map that every request adds to and deletes from made V8 promote every request's
// objects (see `CompletionPump` in events.ts).
const lent = new Map<bigint, { bytes: Uint8Array | undefined; count: number }>();
let idleEntries = 0;
const IDLE_ENTRIES_KEPT = 4096;

/**
 * Records bytes handed to the core (a request's input, a result lent to its response), so that
 * {@linkcode viewAt} and {@linkcode lentAt} answer the
 * core's pointer to them with a view of the same `ArrayBuffer`: V8 counts each new
 * `ArrayBuffer` over foreign memory as external memory, and megabytes of it per request
 * trigger a garbage collection per request. Give them back with {@linkcode returnLent} once
 * the core is done with them (the request's release, the response's deletion).
 *
 * @param bytes The bytes.
 * @returns Their address (see {@linkcode addressOf}).
 */
export function lend(bytes: Uint8Array): bigint {
  const address = addressOf(bytes);
  const entry = lent.get(address);
  if (entry === undefined) {
    lent.set(address, { bytes, count: 1 });
  } else if (entry.count === 0) {
    entry.bytes = bytes;
    entry.count = 1;
    idleEntries--;
  } else {
    entry.count++;
    if (bytes.byteLength > entry.bytes!.byteLength) entry.bytes = bytes;
  }
  return address;
}

/**
 * Forgets bytes recorded by {@linkcode lend}, once per call of it.
 *
 * @param address What `lend` returned.
 * @returns Whether this isolate had lent it (another isolate sharing the core may have).
 */
export function returnLent(address: bigint): boolean {
  const entry = lent.get(address);
  if (entry === undefined || entry.count === 0) return false;
  if (--entry.count === 0) {
    entry.bytes = undefined;
    if (++idleEntries > IDLE_ENTRIES_KEPT) {
      for (const [key, { count }] of lent) if (count === 0) lent.delete(key);
      idleEntries = 0;
    }
  }
  return true;
}

/**
 * How many addresses are lent now (for tests: every request and response gives its own back).
 *
 * @returns The count.
 */
export function lentCount(): number {
  let count = 0;
  for (const entry of lent.values()) if (entry.count > 0) count++;
  return count;
}

/**
 * The `size` bytes at a core-owned address; empty for size 0. Bytes that JavaScript lent the core
 * (see {@linkcode lend}) are viewed on their own `ArrayBuffer`; other memory (the core's, another
 * isolate's, a mapping) is viewed in place, without a copy, but copied into a shared chunk
 * (`smallTypedArray`) when it is small: an `ArrayBuffer` over foreign memory and its mark cost
 * more than the copy (an HTTP thread's inputs reach the batch so), and a copy cannot go away
 * under the callable.
 *
 * @param address The address.
 * @param size The byte count.
 * @returns A `Uint8Array` over that memory, or of its copy.
 */
export function viewAt(address: number | bigint, size: number): Uint8Array {
  if (size === 0 || address === 0 || address === 0n) return new Uint8Array(0);
  const known = lentAt(address, size);
  if (known !== undefined) return known;
  if (size <= SMALL_TENSOR_BYTES) {
    const copy = smallTypedArray("uint8", size) as Uint8Array;
    openLibc().memcpyFrom(copy, BigInt(address), BigInt(size));
    return copy;
  }
  return new Uint8Array(foreignBuffer(Deno.UnsafePointer.create(BigInt(address))!, size));
}

/**
 * The first `size` bytes JavaScript lent the core at `address` (see {@linkcode lend}), on their
 * own `ArrayBuffer`; `undefined` when none are recorded there.
 *
 * @param address The address.
 * @param size The byte count.
 * @returns A view of JavaScript's own memory, or `undefined`.
 */
export function lentAt(address: number | bigint, size: number): Uint8Array | undefined {
  const known = lent.get(BigInt(address))?.bytes;
  if (known === undefined || known.byteLength < size || (known.buffer as ArrayBuffer).detached) {
    return undefined;
  }
  return known.subarray(0, size);
}

/** Results at least this large are lent to their response rather than copied into it. */
export const LEND_FROM_BYTES = 64 * 1024;

/**
 * Whether a result may be lent to its response (`dt_output` with `OUTPUT_LEND`): large enough
 * for the saved copy to matter, and JavaScript's own memory, not shared, resizable or foreign
 * (memory the core or a mapping owns can go away while the response is still read).
 *
 * @param bytes The result's bytes.
 * @returns `true` when it may be lent.
 */
export function lendable(bytes: Uint8Array): boolean {
  return bytes.byteLength >= LEND_FROM_BYTES && isOwnMemory(bytes);
}

/**
 * An NDArray over core-owned memory: in place when aligned (numeric), BYTES elements as views.
 *
 * @param dtype The element type.
 * @param shape The dimensions.
 * @param bytes The raw little-endian (or length-prefixed BYTES) data.
 * @returns The tensor.
 */
export function tensorInPlace(dtype: DType, shape: readonly number[], bytes: Uint8Array): NDArray {
  return fromRawBytes(dtype, shape, bytes);
}

/** A span of core-owned memory: where it lies and its byte count. */
export interface CoreMemory {
  /** Where the data lies. */
  readonly address: number | bigint;
  /** Its byte count. */
  readonly size: number;
}

/**
 * An NDArray that owns a copy of core-owned memory (for data that dies with a response), copied
 * with `memcpy` rather than through a view of that memory.
 *
 * @param dtype The element type.
 * @param shape The dimensions.
 * @param memory Where the data lies and its byte count.
 * @returns The tensor, independent of that memory.
 */
export function tensorCopy(
  dtype: DType,
  shape: readonly number[],
  memory: CoreMemory,
): NDArray {
  const { address, size } = memory;
  const copy = new Uint8Array(size);
  if (size > 0 && address !== 0 && address !== 0n) {
    openLibc().memcpyFrom(copy, BigInt(address), BigInt(size));
  }
  return fromRawBytes(dtype, shape, copy);
}
