/**
 * Tensor data types: DenoTriton's names, the KServe wire names, Triton's model-config names,
 * element sizes and the TypedArray that holds each type.
 *
 * @module
 */

import { TritonValidationError } from "../errors.ts";

/** The data types a tensor can have, in DenoTriton's spelling. */
export type DType =
  | "bool"
  | "int8"
  | "int16"
  | "int32"
  | "int64"
  | "uint8"
  | "uint16"
  | "uint32"
  | "uint64"
  | "float16"
  | "bfloat16"
  | "float32"
  | "float64"
  | "bytes";

/** The KServe v2 protocol datatype strings. */
export type KServeDType =
  | "BOOL"
  | "INT8"
  | "INT16"
  | "INT32"
  | "INT64"
  | "UINT8"
  | "UINT16"
  | "UINT32"
  | "UINT64"
  | "FP16"
  | "BF16"
  | "FP32"
  | "FP64"
  | "BYTES";

/** The TypedArray holding the elements of each numeric dtype (bytes tensors hold `Uint8Array[]`). */
export interface TypedArrayOf {
  /** Booleans, one byte each, 0 or 1. */
  bool: Uint8Array;
  /** Signed 8-bit integers. */
  int8: Int8Array;
  /** Signed 16-bit integers. */
  int16: Int16Array;
  /** Signed 32-bit integers. */
  int32: Int32Array;
  /** Signed 64-bit integers. */
  int64: BigInt64Array;
  /** Unsigned 8-bit integers. */
  uint8: Uint8Array;
  /** Unsigned 16-bit integers. */
  uint16: Uint16Array;
  /** Unsigned 32-bit integers. */
  uint32: Uint32Array;
  /** Unsigned 64-bit integers. */
  uint64: BigUint64Array;
  /** IEEE half-precision floats. */
  float16: Float16Array;
  /** bfloat16 values, kept as their raw 16-bit patterns. */
  bfloat16: Uint16Array;
  /** Single-precision floats. */
  float32: Float32Array;
  /** Double-precision floats. */
  float64: Float64Array;
}

/** A numeric (fixed-size) dtype. */
export type NumericDType = keyof TypedArrayOf;

/** Any TypedArray DenoTriton uses for tensor data. */
export type TypedArray = TypedArrayOf[NumericDType];

/** A constructor of one of the TypedArrays in {@linkcode TypedArrayOf}. */
export type TypedArrayConstructor =
  | Uint8ArrayConstructor
  | Int8ArrayConstructor
  | Int16ArrayConstructor
  | Int32ArrayConstructor
  | BigInt64ArrayConstructor
  | Uint16ArrayConstructor
  | Uint32ArrayConstructor
  | BigUint64ArrayConstructor
  | Float16ArrayConstructor
  | Float32ArrayConstructor
  | Float64ArrayConstructor;

/**
 * Every spelling of each dtype that DenoTriton accepts: its own name, the KServe name, Triton's
 * model-config name and the common NumPy spellings (`"np.float32"`, the type codes `"f4"` and
 * `"<f4"`). A spelling outside these is a compile error in a {@linkcode DTypeLike} position.
 */
export interface DTypeSpellings {
  /** Booleans. */
  bool: "bool" | "BOOL" | "TYPE_BOOL" | "bool_" | "np.bool_" | "?" | "b1" | "|b1";
  /** Signed 8-bit integers. */
  int8: "int8" | "INT8" | "TYPE_INT8" | "np.int8" | "i1" | "|i1";
  /** Signed 16-bit integers. */
  int16: "int16" | "INT16" | "TYPE_INT16" | "np.int16" | "i2" | "<i2";
  /** Signed 32-bit integers. */
  int32: "int32" | "INT32" | "TYPE_INT32" | "np.int32" | "i4" | "<i4";
  /** Signed 64-bit integers. */
  int64: "int64" | "INT64" | "TYPE_INT64" | "np.int64" | "i8" | "<i8";
  /** Unsigned 8-bit integers. */
  uint8: "uint8" | "UINT8" | "TYPE_UINT8" | "np.uint8" | "u1" | "|u1";
  /** Unsigned 16-bit integers. */
  uint16: "uint16" | "UINT16" | "TYPE_UINT16" | "np.uint16" | "u2" | "<u2";
  /** Unsigned 32-bit integers. */
  uint32: "uint32" | "UINT32" | "TYPE_UINT32" | "np.uint32" | "u4" | "<u4";
  /** Unsigned 64-bit integers. */
  uint64: "uint64" | "UINT64" | "TYPE_UINT64" | "np.uint64" | "u8" | "<u8";
  /** IEEE half-precision floats. */
  float16: "float16" | "FP16" | "TYPE_FP16" | "np.float16" | "f2" | "<f2";
  /** bfloat16 (NumPy has no such type; `ml_dtypes` calls it `bfloat16`). */
  bfloat16: "bfloat16" | "BF16" | "TYPE_BF16";
  /** Single-precision floats. */
  float32: "float32" | "FP32" | "TYPE_FP32" | "np.float32" | "f4" | "<f4";
  /** Double-precision floats. */
  float64: "float64" | "FP64" | "TYPE_FP64" | "np.float64" | "f8" | "<f8";
  /** Byte strings (PyTriton declares them as `np.bytes_` or `object`). */
  bytes:
    | "bytes"
    | "BYTES"
    | "TYPE_STRING"
    | "TYPE_BYTES"
    | "string"
    | "bytes_"
    | "np.bytes_"
    | "object"
    | "np.object_";
}

/**
 * What {@linkcode toDType} accepts, and so what a tensor spec's `dtype` may be: one of the
 * {@linkcode DTypeSpellings} or a TypedArray constructor.
 */
export type DTypeLike = DTypeSpellings[DType] | TypedArrayConstructor;

/**
 * The dtype a TypedArray holds (`Uint8Array` reads as `"uint8"`, `Uint16Array` as `"uint16"`).
 *
 * @typeParam A A TypedArray type.
 */
export type DTypeOfArray<A> = A extends Float32Array ? "float32"
  : A extends Float64Array ? "float64"
  : A extends Int32Array ? "int32"
  : A extends BigInt64Array ? "int64"
  : A extends Uint8Array ? "uint8"
  : A extends Int8Array ? "int8"
  : A extends Int16Array ? "int16"
  : A extends Uint16Array ? "uint16"
  : A extends Uint32Array ? "uint32"
  : A extends BigUint64Array ? "uint64"
  : A extends Float16Array ? "float16"
  : NumericDType;

/**
 * The dtype a {@linkcode DTypeLike} names, at the type level: `DTypeOf<"f4">` and
 * `DTypeOf<Float32ArrayConstructor>` are `"float32"`; the wide `DTypeLike` gives `DType`.
 *
 * @typeParam L A spelling or a TypedArray constructor type.
 */
export type DTypeOf<L extends DTypeLike> = L extends TypedArrayConstructor
  ? DTypeOfArray<L["prototype"]>
  : { [D in DType]: L extends DTypeSpellings[D] ? D : never }[DType];

interface DTypeInfo {
  kserve: KServeDType;
  config: string;
  size: number;
  array?: TypedArrayConstructor;
}

const INFO: Record<DType, DTypeInfo> = {
  bool: { kserve: "BOOL", config: "TYPE_BOOL", size: 1, array: Uint8Array },
  int8: { kserve: "INT8", config: "TYPE_INT8", size: 1, array: Int8Array },
  int16: { kserve: "INT16", config: "TYPE_INT16", size: 2, array: Int16Array },
  int32: { kserve: "INT32", config: "TYPE_INT32", size: 4, array: Int32Array },
  int64: { kserve: "INT64", config: "TYPE_INT64", size: 8, array: BigInt64Array },
  uint8: { kserve: "UINT8", config: "TYPE_UINT8", size: 1, array: Uint8Array },
  uint16: { kserve: "UINT16", config: "TYPE_UINT16", size: 2, array: Uint16Array },
  uint32: { kserve: "UINT32", config: "TYPE_UINT32", size: 4, array: Uint32Array },
  uint64: { kserve: "UINT64", config: "TYPE_UINT64", size: 8, array: BigUint64Array },
  float16: { kserve: "FP16", config: "TYPE_FP16", size: 2, array: Float16Array },
  bfloat16: { kserve: "BF16", config: "TYPE_BF16", size: 2, array: Uint16Array },
  float32: { kserve: "FP32", config: "TYPE_FP32", size: 4, array: Float32Array },
  float64: { kserve: "FP64", config: "TYPE_FP64", size: 8, array: Float64Array },
  bytes: { kserve: "BYTES", config: "TYPE_STRING", size: 0 },
};

/** Every dtype, in Triton's enum order. */
export const DTYPES: readonly DType[] = Object.keys(INFO) as DType[];

// Typed so that the compiler checks it against DTypeSpellings: every spelling, mapped to its dtype.
const SPELLINGS: { readonly [D in DType as DTypeSpellings[D]]: D } = {
  bool: "bool",
  BOOL: "bool",
  TYPE_BOOL: "bool",
  bool_: "bool",
  "np.bool_": "bool",
  "?": "bool",
  b1: "bool",
  "|b1": "bool",
  int8: "int8",
  INT8: "int8",
  TYPE_INT8: "int8",
  "np.int8": "int8",
  i1: "int8",
  "|i1": "int8",
  int16: "int16",
  INT16: "int16",
  TYPE_INT16: "int16",
  "np.int16": "int16",
  i2: "int16",
  "<i2": "int16",
  int32: "int32",
  INT32: "int32",
  TYPE_INT32: "int32",
  "np.int32": "int32",
  i4: "int32",
  "<i4": "int32",
  int64: "int64",
  INT64: "int64",
  TYPE_INT64: "int64",
  "np.int64": "int64",
  i8: "int64",
  "<i8": "int64",
  uint8: "uint8",
  UINT8: "uint8",
  TYPE_UINT8: "uint8",
  "np.uint8": "uint8",
  u1: "uint8",
  "|u1": "uint8",
  uint16: "uint16",
  UINT16: "uint16",
  TYPE_UINT16: "uint16",
  "np.uint16": "uint16",
  u2: "uint16",
  "<u2": "uint16",
  uint32: "uint32",
  UINT32: "uint32",
  TYPE_UINT32: "uint32",
  "np.uint32": "uint32",
  u4: "uint32",
  "<u4": "uint32",
  uint64: "uint64",
  UINT64: "uint64",
  TYPE_UINT64: "uint64",
  "np.uint64": "uint64",
  u8: "uint64",
  "<u8": "uint64",
  float16: "float16",
  FP16: "float16",
  TYPE_FP16: "float16",
  "np.float16": "float16",
  f2: "float16",
  "<f2": "float16",
  bfloat16: "bfloat16",
  BF16: "bfloat16",
  TYPE_BF16: "bfloat16",
  float32: "float32",
  FP32: "float32",
  TYPE_FP32: "float32",
  "np.float32": "float32",
  f4: "float32",
  "<f4": "float32",
  float64: "float64",
  FP64: "float64",
  TYPE_FP64: "float64",
  "np.float64": "float64",
  f8: "float64",
  "<f8": "float64",
  bytes: "bytes",
  BYTES: "bytes",
  TYPE_STRING: "bytes",
  TYPE_BYTES: "bytes",
  string: "bytes",
  bytes_: "bytes",
  "np.bytes_": "bytes",
  object: "bytes",
  "np.object_": "bytes",
};

const BY_NAME = new Map<string, DType>(Object.entries(SPELLINGS));
// fromKServe() runs for every tensor of every request: a lookup, not a scan of INFO.
const BY_KSERVE = new Map<string, DType>();
for (const [name, info] of Object.entries(INFO) as [DType, DTypeInfo][]) {
  BY_KSERVE.set(info.kserve, name);
}

const BY_CONSTRUCTOR = new Map<unknown, DType>([
  [Uint8Array, "uint8"],
  [Int8Array, "int8"],
  [Int16Array, "int16"],
  [Int32Array, "int32"],
  [BigInt64Array, "int64"],
  [Uint16Array, "uint16"],
  [Uint32Array, "uint32"],
  [BigUint64Array, "uint64"],
  [Float16Array, "float16"],
  [Float32Array, "float32"],
  [Float64Array, "float64"],
]);

/**
 * Normalises any accepted spelling of a dtype to DenoTriton's name.
 *
 * @param value `"float32"`, `"FP32"`, `"TYPE_FP32"`, `"np.float32"`, `"<f4"`, `Float32Array`, ...
 *   (any of the {@linkcode DTypeSpellings}); other strings, read at run time, throw.
 * @returns The DenoTriton dtype name.
 * @throws {TritonValidationError} When the value names no dtype.
 *
 * @example Every spelling
 * ```ts
 * import { toDType } from "./dtype.ts";
 * import assert from "node:assert/strict";
 *
 * assert.equal(toDType("FP32"), "float32");
 * assert.equal(toDType("TYPE_STRING"), "bytes");
 * assert.equal(toDType("<f4"), "float32");
 * assert.equal(toDType("np.int64"), "int64");
 * assert.equal(toDType(BigInt64Array), "int64");
 * assert.throws(() => toDType("flaot32"), /Unknown dtype "flaot32"/);
 * ```
 */
export function toDType(value: string | TypedArrayConstructor): DType {
  const found = typeof value === "string" ? BY_NAME.get(value) : BY_CONSTRUCTOR.get(value);
  if (found === undefined) {
    const shown = typeof value === "function" ? value.name : JSON.stringify(value);
    throw new TritonValidationError(
      `Unknown dtype ${shown}: expected one of ${
        DTYPES.join(", ")
      }, a KServe name like "FP32", a NumPy name like "np.float32" or "<f4", or a TypedArray constructor`,
    );
  }
  return found;
}

/**
 * Looks up a dtype by its KServe name, returning `undefined` for unknown names.
 *
 * @param name A KServe datatype string such as `"FP32"`.
 * @returns The dtype or `undefined`.
 *
 * @example A KServe name, and a dtype name that is not one
 * ```ts
 * import { fromKServe } from "./dtype.ts";
 * import assert from "node:assert/strict";
 *
 * assert.equal(fromKServe("INT64"), "int64");
 * assert.equal(fromKServe("float32"), undefined);
 * ```
 */
export function fromKServe(name: string): DType | undefined {
  return BY_KSERVE.get(name);
}

/**
 * The KServe datatype string of a dtype.
 *
 * @param dtype A dtype.
 * @returns The wire name, e.g. `"FP32"`.
 *
 * @example The KServe name of bytes
 * ```ts
 * import { kserveName } from "./dtype.ts";
 * import assert from "node:assert/strict";
 *
 * assert.equal(kserveName("bytes"), "BYTES");
 * ```
 */
export function kserveName(dtype: DType): KServeDType {
  return INFO[dtype].kserve;
}

/**
 * The Triton model-config name of a dtype (`TYPE_FP32`; bytes is `TYPE_STRING`).
 *
 * @param dtype A dtype.
 * @returns The `DataType` enum name of `model_config.proto`.
 *
 * @example The config name of bytes
 * ```ts
 * import { configName } from "./dtype.ts";
 * import assert from "node:assert/strict";
 *
 * assert.equal(configName("bytes"), "TYPE_STRING");
 * ```
 */
export function configName(dtype: DType): string {
  return INFO[dtype].config;
}

/**
 * Bytes per element; 0 for `bytes`, whose elements vary in length.
 *
 * @param dtype A dtype.
 * @returns The element size in bytes.
 *
 * @example The size of a float64
 * ```ts
 * import { elementSize } from "./dtype.ts";
 * import assert from "node:assert/strict";
 *
 * assert.equal(elementSize("float64"), 8);
 * ```
 */
export function elementSize(dtype: DType): number {
  return INFO[dtype].size;
}

/**
 * The TypedArray constructor for a numeric dtype.
 *
 * @param dtype A numeric dtype.
 * @returns Its TypedArray constructor.
 *
 * @example int64 uses BigInt64Array
 * ```ts
 * import { arrayConstructorOf } from "./dtype.ts";
 * import assert from "node:assert/strict";
 *
 * assert.equal(arrayConstructorOf("int64"), BigInt64Array);
 * ```
 */
export function arrayConstructorOf(dtype: NumericDType): TypedArrayConstructor {
  return INFO[dtype].array!;
}

/**
 * Makes a TypedArray of a dtype: of `length` zeroed elements, a copy of `elements`, or a view of
 * `length` elements of `buffer` from `byteOffset`. One place for the constructor call that a
 * union of TypedArray constructors cannot type.
 *
 * @param dtype A numeric dtype.
 * @param source A length, elements to copy, or a buffer to view.
 * @param view With a buffer: where the view starts, and how many elements it holds (to the
 *   buffer's end when `length` is left out).
 * @returns The TypedArray.
 *
 * @example Zeroed, copied, and a view
 * ```ts
 * import { newTypedArray } from "./dtype.ts";
 * import assert from "node:assert/strict";
 *
 * assert.deepEqual(newTypedArray("int64", 2), new BigInt64Array(2));
 * assert.deepEqual(newTypedArray("float32", [1, 2]), new Float32Array([1, 2]));
 * const bytes = new Uint8Array([0, 0, 1, 0, 2, 0]);
 * assert.deepEqual(
 *   newTypedArray("uint16", bytes.buffer, { byteOffset: 2, length: 2 }),
 *   new Uint16Array([1, 2]),
 * );
 * ```
 */
export function newTypedArray(
  dtype: NumericDType,
  source: number | ArrayLike<number | bigint> | ArrayBufferLike,
  view?: { readonly byteOffset: number; readonly length?: number },
): TypedArray {
  // Each constructor of the union takes these arguments; the union's `new` signatures do not
  // combine, hence the one cast.
  const Ctor = arrayConstructorOf(dtype) as unknown as new (
    source: number | ArrayLike<number | bigint> | ArrayBufferLike,
    byteOffset?: number,
    length?: number,
  ) => TypedArray;
  return view === undefined ? new Ctor(source) : new Ctor(source, view.byteOffset, view.length);
}

/**
 * Whether the dtype's elements are `bigint` (64-bit integers).
 *
 * @param dtype A dtype.
 * @returns `true` for int64 and uint64.
 *
 * @example uint64 elements are bigints
 * ```ts
 * import { isBigIntDType } from "./dtype.ts";
 * import assert from "node:assert/strict";
 *
 * assert.ok(isBigIntDType("uint64"));
 * ```
 */
export function isBigIntDType(dtype: DType): dtype is "int64" | "uint64" {
  return dtype === "int64" || dtype === "uint64";
}

/**
 * Infers the dtype of a TypedArray (a `Uint8Array` reads as uint8).
 *
 * @param data A TypedArray.
 * @returns Its dtype.
 * @throws {TritonValidationError} For array types DenoTriton does not use.
 *
 * @example The dtype of a Float32Array
 * ```ts
 * import { dtypeOfArray } from "./dtype.ts";
 * import assert from "node:assert/strict";
 *
 * assert.equal(dtypeOfArray(new Float32Array(2)), "float32");
 * ```
 */
export function dtypeOfArray(data: ArrayBufferView): DType {
  const found = BY_CONSTRUCTOR.get(data.constructor);
  if (found === undefined) {
    throw new TritonValidationError(
      `Unsupported tensor data: ${data.constructor.name} is not a TypedArray DenoTriton uses`,
    );
  }
  return found;
}
