/**
 * Conversions between gRPC tensor data and {@linkcode NDArray}: raw little-endian contents
 * (`raw_input_contents` / `raw_output_contents`, BYTES with length prefixes) and the typed
 * `InferTensorContents` lists.
 *
 * @module
 */

import { InferenceError } from "../errors.ts";
import { type DType, fromKServe, isBigIntDType, kserveName } from "../tensor/dtype.ts";
import { fromRawBytes, type NDArray, type NumericNDArray, shapeSize } from "../tensor/ndarray.ts";
import type { InferTensorContents, Int64 } from "./grpc_codec.ts";

/**
 * Parses a KServe datatype string of a tensor.
 *
 * @param datatype The wire name, e.g. `"FP32"`.
 * @param what Names the tensor in errors, e.g. `input 'x'`.
 * @returns The dtype.
 * @throws {InferenceError} (INVALID_ARG) For unknown datatypes.
 *
 * @example BYTES parses; FLOAT is refused
 * ```ts
 * import { parseDatatype } from "./tensor_contents.ts";
 * import assert from "node:assert/strict";
 *
 * assert.equal(parseDatatype("BYTES", "input 'x'"), "bytes");
 * assert.throws(() => parseDatatype("FLOAT", "input 'x'"), /Invalid datatype for input 'x'/);
 * ```
 */
export function parseDatatype(datatype: string, what: string): DType {
  const dtype = fromKServe(datatype);
  if (dtype === undefined) {
    throw InferenceError.invalidArg(
      `Invalid datatype for ${what}: '${datatype}' is not a KServe datatype`,
    );
  }
  return dtype;
}

/**
 * Parses a wire shape into numbers, rejecting negative or huge dimensions.
 *
 * @param shape The shape as decoded (decimal strings or numbers).
 * @param what Names the tensor in errors.
 * @returns The dimensions.
 * @throws {InferenceError} (INVALID_ARG) For negative or non-integer dimensions.
 *
 * @example Parse a shape; a negative dimension is refused
 * ```ts
 * import { parseShape } from "./tensor_contents.ts";
 * import assert from "node:assert/strict";
 *
 * assert.deepEqual(parseShape(["2", "3"], "input 'x'"), [2, 3]);
 * assert.throws(() => parseShape(["-1"], "input 'x'"), /Invalid shape for input 'x'/);
 * ```
 */
export function parseShape(shape: readonly Int64[], what: string): number[] {
  return shape.map((dim) => {
    const value = Number(dim);
    if (!Number.isSafeInteger(value) || value < 0) {
      throw InferenceError.invalidArg(
        `Invalid shape for ${what}: dimension ${dim} in [${shape}] must be a non-negative integer`,
      );
    }
    return value;
  });
}

function withContext<T>(what: string, run: () => T): T {
  try {
    return run();
  } catch (error) {
    if (error instanceof InferenceError) {
      throw new InferenceError(`Invalid data for ${what}: ${error.message}`, {
        code: error.code,
        cause: error,
      });
    }
    throw error;
  }
}

/** A tensor's element type and dimensions, as a message's tensor header gives them. */
export interface WireTensorSpec {
  /** Element type. */
  readonly dtype: DType;
  /** Dimensions. */
  readonly shape: readonly number[];
}

/**
 * Builds a tensor from raw little-endian contents (BYTES elements length-prefixed).
 *
 * @param spec Element type and dimensions.
 * @param raw The raw bytes; numeric data is viewed in place when aligned.
 * @param what Names the tensor in errors.
 * @returns The tensor.
 * @throws {InferenceError} (INVALID_ARG) When the byte count does not fit the shape.
 *
 * @example Two int16 values
 * ```ts
 * import { tensorFromRaw } from "./tensor_contents.ts";
 * import assert from "node:assert/strict";
 *
 * const t = tensorFromRaw({ dtype: "int16", shape: [2] }, new Uint8Array([1, 0, 0, 1]), "input 'x'");
 * assert.deepEqual([...(t.data as Int16Array)], [1, 256]);
 * ```
 */
export function tensorFromRaw(spec: WireTensorSpec, raw: Uint8Array, what: string): NDArray {
  return withContext(what, () => fromRawBytes(spec.dtype, spec.shape, raw));
}

function expectCount(length: number, count: number, field: string, what: string): void {
  if (length !== count) {
    throw InferenceError.invalidArg(
      `Invalid data for ${what}: the shape needs ${count} elements but ${field} has ${length}`,
    );
  }
}

function listLength(list: readonly unknown[] | undefined): number {
  return list?.length ?? 0;
}

/**
 * Builds a tensor from typed `InferTensorContents` (FP16 and BF16 have no typed form).
 *
 * @param spec Element type and dimensions.
 * @param contents The typed lists; only the one matching `dtype` may be filled.
 * @param what Names the tensor in errors.
 * @returns The tensor.
 * @throws {InferenceError} (INVALID_ARG) For a count mismatch, values out of range, another
 *   list filled, or FP16/BF16.
 *
 * @example INT32 from int_contents
 * ```ts
 * import { tensorFromContents } from "./tensor_contents.ts";
 * import assert from "node:assert/strict";
 *
 * const t = tensorFromContents({ dtype: "int32", shape: [2] }, { int_contents: [7, -1] }, "input 'x'");
 * assert.deepEqual([...(t.data as Int32Array)], [7, -1]);
 * ```
 */
export function tensorFromContents(
  spec: WireTensorSpec,
  contents: InferTensorContents,
  what: string,
): NDArray {
  const { dtype, shape } = spec;
  const count = shapeSize(shape);
  const field = contentsField(dtype);
  if (field === undefined) {
    throw InferenceError.invalidArg(
      `Invalid data for ${what}: ${
        kserveName(dtype)
      } tensors must be sent in raw_input_contents, not contents`,
    );
  }
  for (const [key, list] of Object.entries(contents)) {
    if (key !== field && Array.isArray(list) && list.length > 0) {
      throw InferenceError.invalidArg(
        `Invalid data for ${what}: ${
          kserveName(dtype)
        } data goes in contents.${field}, but contents.${key} is set`,
      );
    }
  }
  const list = (contents[field] ?? []) as readonly unknown[];
  expectCount(listLength(list), count, `contents.${field}`, what);
  if (dtype === "bytes") {
    return { dtype, shape, data: [...(list as Uint8Array[])] };
  }
  if (dtype === "bool") {
    const data = Uint8Array.from(list as boolean[], (value) => (value ? 1 : 0));
    return { dtype, shape, data };
  }
  if (isBigIntDType(dtype)) {
    const data = dtype === "int64" ? new BigInt64Array(count) : new BigUint64Array(count);
    (list as Int64[]).forEach((value, index) => {
      data[index] = BigInt(value);
    });
    return { dtype, shape, data } as NumericNDArray;
  }
  const array = newNumericArray(dtype, count);
  const [low, high] = RANGES[dtype] ?? [-Infinity, Infinity];
  (list as number[]).forEach((value, index) => {
    if (value < low || value > high) {
      throw InferenceError.invalidArg(
        `Invalid data for ${what}: element ${index} (${value}) is out of range for ${
          kserveName(dtype)
        }`,
      );
    }
    array[index] = value;
  });
  return { dtype, shape, data: array } as NumericNDArray;
}

const RANGES: Partial<Record<DType, [number, number]>> = {
  int8: [-128, 127],
  int16: [-32768, 32767],
  uint8: [0, 255],
  uint16: [0, 65535],
};

function newNumericArray(
  dtype: DType,
  count: number,
):
  | Int8Array
  | Int16Array
  | Int32Array
  | Uint8Array
  | Uint16Array
  | Uint32Array
  | Float32Array
  | Float64Array {
  switch (dtype) {
    case "int8":
      return new Int8Array(count);
    case "int16":
      return new Int16Array(count);
    case "int32":
      return new Int32Array(count);
    case "uint8":
      return new Uint8Array(count);
    case "uint16":
      return new Uint16Array(count);
    case "uint32":
      return new Uint32Array(count);
    case "float32":
      return new Float32Array(count);
    default:
      return new Float64Array(count);
  }
}

/**
 * The `InferTensorContents` field that carries a dtype's elements.
 *
 * @param dtype Element type.
 * @returns The field name, or `undefined` for FP16/BF16 (raw only).
 *
 * @example uint16's field; none for float16
 * ```ts
 * import { contentsField } from "./tensor_contents.ts";
 * import assert from "node:assert/strict";
 *
 * assert.equal(contentsField("uint16"), "uint_contents");
 * assert.equal(contentsField("float16"), undefined);
 * ```
 */
export function contentsField(dtype: DType): keyof InferTensorContents | undefined {
  switch (dtype) {
    case "bool":
      return "bool_contents";
    case "int8":
    case "int16":
    case "int32":
      return "int_contents";
    case "int64":
      return "int64_contents";
    case "uint8":
    case "uint16":
    case "uint32":
      return "uint_contents";
    case "uint64":
      return "uint64_contents";
    case "float32":
      return "fp32_contents";
    case "float64":
      return "fp64_contents";
    case "bytes":
      return "bytes_contents";
    default:
      return undefined;
  }
}

/**
 * Typed `InferTensorContents` for a tensor (what a client sends without raw contents).
 *
 * @param array The tensor; FP16/BF16 are not allowed.
 * @returns The contents with one list filled.
 * @throws {InferenceError} (INVALID_ARG) For FP16/BF16 tensors.
 *
 * @example Booleans as bool_contents
 * ```ts
 * import { tensorToContents } from "./tensor_contents.ts";
 * import { ndarray } from "../tensor/ndarray.ts";
 * import assert from "node:assert/strict";
 *
 * assert.deepEqual(tensorToContents(ndarray([true, false])), { bool_contents: [true, false] });
 * ```
 */
export function tensorToContents(array: NDArray): InferTensorContents {
  const field = contentsField(array.dtype);
  if (field === undefined) {
    throw InferenceError.invalidArg(
      `Cannot send ${kserveName(array.dtype)} tensors as typed contents: use raw`,
    );
  }
  if (array.dtype === "bytes") return { bytes_contents: [...array.data] };
  if (array.dtype === "bool") {
    return { bool_contents: Array.from(array.data as Uint8Array, (v) => v !== 0) };
  }
  return { [field]: Array.from(array.data as ArrayLike<number | bigint>) };
}
