/**
 * `NDArray`: a tensor as `{ dtype, shape, data }` with TypedArray data (or `Uint8Array[]` for
 * bytes), plus the few operations the library needs: build, size, raw byte views, batch-axis
 * concatenation and slicing.
 *
 * Over 500 lines for a reason: a third of it is the JSDoc, with asserting examples, of the public
 * `NDArray` API, and the operations share its validation helpers.
 *
 * @module
 */

import { InferenceError, TritonValidationError } from "../errors.ts";
import { deserializeBytes, serializeBytes } from "./bytes_codec.ts";
import {
  type DType,
  type DTypeLike,
  type DTypeOf,
  type DTypeOfArray,
  dtypeOfArray,
  elementSize,
  isBigIntDType,
  newTypedArray,
  type NumericDType,
  toDType,
  type TypedArray,
  type TypedArrayOf,
} from "./dtype.ts";

/** A numeric tensor: row-major elements in a TypedArray. */
export interface NumericNDArray<D extends NumericDType = NumericDType> {
  /** The element type. */
  readonly dtype: D;
  /** The dimensions, row-major. */
  readonly shape: readonly number[];
  /** The elements; `data.length` equals the product of `shape`. */
  readonly data: TypedArrayOf[D];
}

/** A bytes tensor: one `Uint8Array` per element (embedded `\x00` kept). */
export interface BytesNDArray {
  /** Always `"bytes"`. */
  readonly dtype: "bytes";
  /** The dimensions, row-major. */
  readonly shape: readonly number[];
  /** The elements; `data.length` equals the product of `shape`. */
  readonly data: readonly Uint8Array[];
}

/**
 * A tensor value; `NDArray<"float32">` is a tensor whose `data` is a `Float32Array`,
 * `NDArray<"bytes">` one whose `data` holds `Uint8Array`s, and the plain `NDArray` any tensor.
 *
 * @typeParam D The dtype (a union gives a union of tensors).
 */
export type NDArray<D extends DType = DType> = [DType] extends [D] ? NumericNDArray | BytesNDArray
  : D extends "bytes" ? BytesNDArray
  : D extends NumericDType ? NumericNDArray<D>
  : never;

/**
 * One element of a tensor of dtype `D`, as {@linkcode map} and {@linkcode zip} hand it over:
 * `bigint` for 64-bit integers, a `Uint8Array` for bytes, else a `number` (bool 0 or 1, bfloat16
 * its raw 16-bit pattern).
 *
 * @typeParam D The dtype.
 */
export type ElementOf<D extends DType> = D extends "bytes" ? Uint8Array
  : D extends "int64" | "uint64" ? bigint
  : number;

/** Nested arrays of `T`: `T[]`, `T[][]`, ... */
export type NestedArray<T> = readonly T[] | readonly NestedArray<T>[];

/** What {@linkcode ndarray} accepts as data. */
export type NDArrayData =
  | TypedArray
  | readonly (Uint8Array | string)[]
  | readonly unknown[];

/** Options of {@linkcode ndarray}. */
export interface NDArrayOptions {
  /**
   * The dtype; inferred when omitted (TypedArray type, strings/`Uint8Array[]` → bytes, JS numbers
   * → float64, bigints → int64, booleans → bool).
   *
   * @default {undefined}
   */
  dtype?: DTypeLike;
}

const encoder = new TextEncoder();

/**
 * The number of elements of a shape (1 for a scalar shape `[]`).
 *
 * @param shape Dimensions.
 * @returns Their product.
 *
 * @example Six elements of a 2 by 3 shape
 * ```ts
 * import { shapeSize } from "./ndarray.ts";
 * import assert from "node:assert/strict";
 *
 * assert.equal(shapeSize([2, 3]), 6);
 * ```
 */
export function shapeSize(shape: readonly number[]): number {
  let size = 1;
  for (const dim of shape) size *= dim;
  return size;
}

/**
 * Builds an {@linkcode NDArray}.
 *
 * @param data A TypedArray, an array of strings or `Uint8Array`s (bytes), or a (nested) array of
 *   numbers, bigints or booleans.
 * @param shape The dimensions; for flat data defaults to `[data.length]`, for nested arrays to
 *   their nesting.
 * @param options The dtype, when it cannot be inferred or must be converted to.
 * @returns The tensor.
 * @throws {TritonValidationError} When the data does not fit the shape or dtype.
 *
 * @example From a TypedArray
 * ```ts
 * import { ndarray } from "../../mod.ts";
 * import assert from "node:assert/strict";
 *
 * const a = ndarray(new Float32Array([1, 2, 3, 4]), [2, 2]);
 * assert.equal(a.dtype, "float32");
 * assert.deepEqual(a.shape, [2, 2]);
 * ```
 *
 * @example Nested numbers and strings
 * ```ts
 * import { ndarray } from "../../mod.ts";
 * import assert from "node:assert/strict";
 *
 * const m = ndarray([[1, 2], [3, 4]], undefined, { dtype: "int32" });
 * assert.deepEqual(m.shape, [2, 2]);
 * assert.ok(m.data instanceof Int32Array);
 * const s = ndarray(["a", "b\0c"]);
 * assert.equal(s.dtype, "bytes");
 * assert.deepEqual([...(s.data[1] as Uint8Array)], [98, 0, 99]);
 * ```
 */
export function ndarray<const L extends DTypeLike>(
  data: NDArrayData,
  shape: readonly number[] | undefined,
  options: NDArrayOptions & { dtype: L },
): NDArray<DTypeOf<L>>;
/**
 * Builds an {@linkcode NDArray} of a TypedArray's own dtype (a `Uint8Array` gives uint8).
 *
 * @param data The elements.
 * @param shape The dimensions; defaults to `[data.length]`.
 * @returns The tensor, viewing `data` (no copy).
 */
export function ndarray<A extends TypedArray>(
  data: A,
  shape?: readonly number[],
): NDArray<DTypeOfArray<A>>;
/**
 * Builds a bytes {@linkcode NDArray} from strings (UTF-8 encoded) or `Uint8Array`s.
 *
 * @param data The elements, flat or nested.
 * @param shape The dimensions; defaults to the nesting.
 * @returns The tensor.
 */
export function ndarray(
  data: NestedArray<string | Uint8Array>,
  shape?: readonly number[],
): NDArray<"bytes">;
/**
 * Builds a float64 {@linkcode NDArray} from JavaScript numbers.
 *
 * @param data The elements, flat or nested.
 * @param shape The dimensions; defaults to the nesting.
 * @returns The tensor.
 */
export function ndarray(data: NestedArray<number>, shape?: readonly number[]): NDArray<"float64">;
/**
 * Builds an int64 {@linkcode NDArray} from bigints.
 *
 * @param data The elements, flat or nested.
 * @param shape The dimensions; defaults to the nesting.
 * @returns The tensor.
 */
export function ndarray(data: NestedArray<bigint>, shape?: readonly number[]): NDArray<"int64">;
/**
 * Builds a bool {@linkcode NDArray} from booleans.
 *
 * @param data The elements, flat or nested.
 * @param shape The dimensions; defaults to the nesting.
 * @returns The tensor.
 */
export function ndarray(data: NestedArray<boolean>, shape?: readonly number[]): NDArray<"bool">;
/**
 * Builds an {@linkcode NDArray} of any data.
 *
 * @param data A TypedArray or (nested) array.
 * @param shape The dimensions.
 * @param options The dtype.
 * @returns The tensor.
 */
export function ndarray(
  data: NDArrayData,
  shape?: readonly number[],
  options?: NDArrayOptions,
): NDArray;
export function ndarray(
  data: NDArrayData,
  shape?: readonly number[],
  options: NDArrayOptions = {},
): NDArray {
  const wanted = options.dtype === undefined ? undefined : toDType(options.dtype);
  let result: NDArray;
  if (ArrayBuffer.isView(data)) {
    const own = wanted === "bool" && data instanceof Uint8Array ? "bool" : dtypeOfArray(data);
    const typed = data as TypedArray;
    const dims = shape ?? [typed.length];
    if (wanted === undefined || wanted === own) {
      result = { dtype: own as NumericDType, shape: dims, data: typed } as NumericNDArray;
    } else {
      result = fromValues(Array.from(typed as ArrayLike<number | bigint>), dims, wanted);
    }
  } else {
    const { flat, dims } = flatten(data as readonly unknown[]);
    result = fromValues(flat, shape ?? dims, wanted);
  }
  if (shapeSize(result.shape) !== result.data.length) {
    throw new TritonValidationError(
      `Cannot build ndarray: shape [${result.shape}] needs ${
        shapeSize(result.shape)
      } elements but the data has ${result.data.length}`,
    );
  }
  return result;
}

function flatten(data: readonly unknown[]): { flat: unknown[]; dims: number[] } {
  const dims: number[] = [];
  let level: unknown = data;
  while (Array.isArray(level)) {
    dims.push(level.length);
    level = level[0];
  }
  const flat = dims.length > 1 ? (data as unknown[]).flat(dims.length - 1) : [...data];
  return { flat, dims };
}

function inferDType(sample: unknown): DType {
  switch (typeof sample) {
    case "string":
      return "bytes";
    case "bigint":
      return "int64";
    case "boolean":
      return "bool";
    case "number":
      return "float64";
    default:
      return sample instanceof Uint8Array ? "bytes" : "float64";
  }
}

function fromValues(values: readonly unknown[], shape: readonly number[], wanted?: DType): NDArray {
  const dtype = wanted ?? inferDType(values[0]);
  if (dtype === "bytes") {
    const data = values.map((value, index) => {
      if (typeof value === "string") return encoder.encode(value);
      if (value instanceof Uint8Array) return value;
      throw new TritonValidationError(
        `Cannot build bytes ndarray: element ${index} is ${typeof value}, expected a string or Uint8Array`,
      );
    });
    return { dtype, shape, data };
  }
  const big = isBigIntDType(dtype);
  const converted = values.map((value, index) => {
    if (big) {
      if (typeof value === "bigint") return value;
      if (typeof value === "number" && Number.isInteger(value)) return BigInt(value);
      if (typeof value === "boolean") return value ? 1n : 0n;
    } else {
      if (typeof value === "number") return value;
      if (typeof value === "boolean") return value ? 1 : 0;
      if (typeof value === "bigint") return Number(value);
    }
    throw new TritonValidationError(
      `Cannot build ${dtype} ndarray: element ${index} (${String(value)}) is not a ${
        big ? "bigint or integer" : "number"
      }`,
    );
  });
  const typed = newTypedArray(dtype, converted);
  return { dtype, shape, data: typed } as NumericNDArray;
}

/**
 * The raw little-endian bytes of a tensor: a view for numeric tensors, the length-prefixed
 * serialization for bytes tensors.
 *
 * @param array A tensor.
 * @returns Its wire bytes.
 *
 * @example An int16 tensor's little-endian bytes
 * ```ts
 * import { ndarray, toRawBytes } from "./ndarray.ts";
 * import assert from "node:assert/strict";
 *
 * assert.deepEqual([...toRawBytes(ndarray(new Int16Array([1, 256])))], [1, 0, 0, 1]);
 * ```
 */
export function toRawBytes(array: NDArray): Uint8Array {
  if (array.dtype === "bytes") return serializeBytes(array.data);
  const data = array.data;
  return new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
}

/**
 * The byte size of a tensor's wire form.
 *
 * @param array A tensor.
 * @returns The size in bytes.
 *
 * @example A string's length prefix counts
 * ```ts
 * import { ndarray, rawByteSize } from "./ndarray.ts";
 * import assert from "node:assert/strict";
 *
 * assert.equal(rawByteSize(ndarray(["ab"])), 6);
 * ```
 */
export function rawByteSize(array: NDArray): number {
  if (array.dtype !== "bytes") return array.data.byteLength;
  let size = 0;
  for (const element of array.data) size += 4 + element.byteLength;
  return size;
}

/**
 * Builds a tensor from its wire bytes. Numeric data is viewed in place when aligned, else copied
 * once; bytes elements are views.
 *
 * @param dtype The element type.
 * @param shape The dimensions.
 * @param bytes The raw bytes.
 * @returns The tensor.
 * @throws {InferenceError} (INVALID_ARG) When the byte count does not match the shape.
 *
 * @example Two int16 values from four bytes
 * ```ts
 * import { fromRawBytes } from "./ndarray.ts";
 * import assert from "node:assert/strict";
 *
 * const t = fromRawBytes("int16", [2], new Uint8Array([1, 0, 0, 1]));
 * assert.deepEqual([...(t.data as Int16Array)], [1, 256]);
 * ```
 */
export function fromRawBytes(dtype: DType, shape: readonly number[], bytes: Uint8Array): NDArray {
  const count = shapeSize(shape);
  if (dtype === "bytes") {
    return { dtype, shape, data: deserializeBytes(bytes, count) };
  }
  const size = elementSize(dtype);
  if (bytes.byteLength !== count * size) {
    throw new InferenceError(
      `Unexpected byte size for ${dtype} tensor of shape [${shape}]: expected ${
        count * size
      } bytes, got ${bytes.byteLength}`,
      { code: "INVALID_ARG" },
    );
  }
  const aligned = bytes.byteOffset % size === 0;
  // new Uint8Array(view) copies, also for Node Buffers whose slice() is a view.
  const source = aligned ? bytes : new Uint8Array(bytes);
  const data = newTypedArray(dtype, source.buffer, {
    byteOffset: source.byteOffset,
    length: count,
  });
  return { dtype, shape, data } as NumericNDArray;
}

/**
 * Concatenates tensors along axis 0 (the batch axis). Trailing dimensions must match.
 *
 * @param arrays Tensors of one dtype.
 * @returns One tensor whose first dimension is the sum of theirs.
 * @throws {TritonValidationError} When dtypes or trailing dimensions differ.
 *
 * @example Stack two one-row tensors
 * ```ts
 * import { concatBatch, ndarray } from "./ndarray.ts";
 * import assert from "node:assert/strict";
 *
 * const c = concatBatch([ndarray(new Int32Array([1, 2]), [1, 2]), ndarray(new Int32Array([3, 4]), [1, 2])]);
 * assert.deepEqual(c.shape, [2, 2]);
 * assert.deepEqual([...(c.data as Int32Array)], [1, 2, 3, 4]);
 * ```
 */
export function concatBatch(arrays: readonly NDArray[]): NDArray {
  const first = arrays[0];
  if (first === undefined) throw new TritonValidationError("Cannot concatenate: no tensors given");
  if (arrays.length === 1) return first;
  const tail = first.shape.slice(1);
  let rows = 0;
  for (const array of arrays) {
    if (array.dtype !== first.dtype) {
      throw new TritonValidationError(
        `Cannot concatenate tensors of dtypes ${first.dtype} and ${array.dtype}`,
      );
    }
    if (
      array.shape.length !== first.shape.length ||
      array.shape.slice(1).some((d, i) => d !== tail[i])
    ) {
      throw new TritonValidationError(
        `Cannot concatenate tensors of shapes [${first.shape}] and [${array.shape}]: trailing dimensions differ`,
      );
    }
    rows += array.shape[0] ?? 1;
  }
  const shape = [rows, ...tail];
  if (first.dtype === "bytes") {
    return { dtype: "bytes", shape, data: arrays.flatMap((a) => a.data as Uint8Array[]) };
  }
  const total = arrays.reduce((n, a) => n + a.data.length, 0);
  const data = newTypedArray(first.dtype, total);
  let offset = 0;
  for (const array of arrays) {
    // deno-lint-ignore no-explicit-any
    (data as any).set(array.data, offset);
    offset += array.data.length;
  }
  return { dtype: first.dtype, shape, data } as NumericNDArray;
}

/**
 * Rows `[start, end)` of axis 0, as a view (no copy).
 *
 * @param array A tensor with at least one dimension.
 * @param start First row.
 * @param end Row after the last.
 * @returns The slice.
 *
 * @example View the last two rows
 * ```ts
 * import { ndarray, sliceBatch } from "./ndarray.ts";
 * import assert from "node:assert/strict";
 *
 * const s = sliceBatch(ndarray(new Float32Array([1, 2, 3, 4, 5, 6]), [3, 2]), 1, 3);
 * assert.deepEqual(s.shape, [2, 2]);
 * assert.deepEqual([...(s.data as Float32Array)], [3, 4, 5, 6]);
 * ```
 */
export function sliceBatch(array: NDArray, start: number, end: number): NDArray {
  const rowSize = shapeSize(array.shape.slice(1));
  const shape = [end - start, ...array.shape.slice(1)];
  if (array.dtype === "bytes") {
    return { dtype: "bytes", shape, data: array.data.slice(start * rowSize, end * rowSize) };
  }
  const data = array.data.subarray(start * rowSize, end * rowSize) as TypedArray;
  return { dtype: array.dtype, shape, data } as NumericNDArray;
}

/**
 * Whether a value is an {@linkcode NDArray}.
 *
 * @param value Anything.
 * @returns `true` for an object with a known dtype, a shape array and fitting data.
 *
 * @example An ndarray passes, a look-alike object does not
 * ```ts
 * import { isNDArray, ndarray } from "./ndarray.ts";
 * import assert from "node:assert/strict";
 *
 * assert.ok(isNDArray(ndarray([1, 2])));
 * assert.ok(!isNDArray({ data: [1] }));
 * ```
 */
export function isNDArray(value: unknown): value is NDArray {
  if (typeof value !== "object" || value === null) return false;
  const candidate = value as { dtype?: unknown; shape?: unknown; data?: unknown };
  if (typeof candidate.dtype !== "string" || !Array.isArray(candidate.shape)) return false;
  if (candidate.dtype === "bytes") return Array.isArray(candidate.data);
  return ArrayBuffer.isView(candidate.data);
}

/**
 * A tensor checked to have dtype `dtype`, typed as such: for outputs a client received, or any
 * tensor whose dtype is known only at run time. Nothing is converted.
 *
 * @typeParam L The dtype's spelling.
 * @param array A tensor, or `undefined` (a missing output).
 * @param dtype The dtype it must have, in any spelling `toDType` accepts.
 * @returns The same tensor, typed `NDArray<dtype>`.
 * @throws {TritonValidationError} When `array` is not a tensor, or has another dtype.
 *
 * @example Read a float32 output
 * ```ts
 * import { asDType, ndarray, type Tensors } from "../../mod.ts";
 * import assert from "node:assert/strict";
 *
 * const outputs: Tensors = { y: ndarray(new Float32Array([0.5])) };
 * const [y] = asDType(outputs.y, "float32").data;
 * assert.equal(y, 0.5);
 * assert.throws(() => asDType(outputs.y, "int32"), /Expected an int32 tensor, got a float32 tensor/);
 * assert.throws(() => asDType(outputs.z, "FP32"), /Expected a float32 tensor, got undefined/);
 * ```
 */
export function asDType<const L extends DTypeLike>(
  array: NDArray | undefined,
  dtype: L,
): NDArray<DTypeOf<L>> {
  const wanted = toDType(dtype);
  const article = (name: string): string => /^[aeiou]/.test(name) ? "an" : "a";
  if (!isNDArray(array)) {
    throw new TritonValidationError(
      `Expected ${article(wanted)} ${wanted} tensor, got ${
        array === null || array === undefined ? String(array) : typeof array
      }`,
    );
  }
  if (array.dtype !== wanted) {
    throw new TritonValidationError(
      `Expected ${article(wanted)} ${wanted} tensor, got ${
        article(array.dtype)
      } ${array.dtype} tensor`,
    );
  }
  return array as NDArray as NDArray<DTypeOf<L>>;
}
