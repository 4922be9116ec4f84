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

/** What {@linkcode toDType} accepts: a DenoTriton name, a KServe name, a Triton config name or a TypedArray constructor. */
export type DTypeLike = DType | KServeDType | `TYPE_${string}` | TypedArrayConstructor | string;

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

const BY_NAME = new Map<string, DType>();
// fromKServe() runs for every tensor of every request: a lookup, not a scan of INFO.
const BY_KSERVE = new Map<string, DType>();
for (const [name, info] of Object.entries(INFO) as [DType, DTypeInfo][]) {
  BY_KSERVE.set(info.kserve, name);
  BY_NAME.set(name, name);
  BY_NAME.set(info.kserve, name);
  BY_NAME.set(info.config, name);
}
BY_NAME.set("TYPE_BYTES", "bytes");
BY_NAME.set("string", "bytes");

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
 * @param value `"float32"`, `"FP32"`, `"TYPE_FP32"`, `Float32Array`, ...
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
 * assert.equal(toDType(BigInt64Array), "int64");
 * ```
 */
export function toDType(value: DTypeLike): DType {
  const found = typeof value === "string" ? BY_NAME.get(value) : BY_CONSTRUCTOR.get(value);
  if (found === undefined) {
    const shown = typeof value === "function" ? value.name : JSON.stringify(value);
    throw new TritonValidationError(
      `Unknown dtype ${shown}: expected one of ${
        DTYPES.join(", ")
      }, a KServe name like "FP32" or a TypedArray constructor`,
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
 * @example
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
 * @example
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
 * @example
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
 * @example
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
 * @example
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
 * Whether the dtype's elements are `bigint` (64-bit integers).
 *
 * @param dtype A dtype.
 * @returns `true` for int64 and uint64.
 *
 * @example
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
 * @example
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
