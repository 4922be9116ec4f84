/**
 * Tensors in KServe JSON: request `data` (nested or flat, row-major) to an {@linkcode NDArray},
 * and an `NDArray` back to the flat `data` array of a response. BOOL is JSON `true`/`false`,
 * BYTES are JSON strings (UTF-8), 64-bit integers keep every digit (as `bigint` in, as raw JSON
 * numbers out). FP16 and BF16 cannot travel as JSON, as in Triton.
 *
 * @module
 */

import { InferenceError } from "../errors.ts";
import { type DType, kserveName } from "../tensor/dtype.ts";
import { smallTypedArray } from "../tensor/small_tensors.ts";
import type { NDArray, NumericNDArray } from "../tensor/ndarray.ts";
import type { WireTensorSpec } from "./tensor_contents.ts";

const encoder = new TextEncoder();
const decoder = new TextDecoder();
// JSON text must be UTF-8 (RFC 8259): a lenient decoder would turn bad bytes inside strings
// into U+FFFD and hand the model data the client never sent.
const strictDecoder = new TextDecoder("utf-8", { fatal: true });

// Integers longer than 15 digits may exceed 2^53; only then pay for the source-text reviver
// (about 20x slower). Digit runs after a point or before a point/exponent belong to floats,
// whose source the reviver would leave alone anyway: random floats have 16-17 digits.
const LONG_INTEGER = /(?:^|[^\d.])\d{16,}(?![\d.eE])/;
const INTEGER_SOURCE = /^-?\d+$/;

interface ReviverContext {
  source?: string;
}

function bigIntReviver(_key: string, value: unknown, context?: ReviverContext): unknown {
  if (
    typeof value === "number" && !Number.isSafeInteger(value) && context?.source !== undefined &&
    INTEGER_SOURCE.test(context.source)
  ) {
    return BigInt(context.source);
  }
  return value;
}

/**
 * Parses JSON, keeping integers beyond 2^53 exact as `bigint`s.
 *
 * @param text The JSON text.
 * @returns The parsed value.
 * @throws {SyntaxError} For invalid JSON.
 *
 * @example INT64 beyond 2^53
 * ```ts
 * import { parseJsonExact } from "./json_tensor.ts";
 * import assert from "node:assert/strict";
 *
 * const value = parseJsonExact('{"data":[9007199254740993,1]}') as { data: unknown[] };
 * assert.deepEqual(value.data, [9007199254740993n, 1]);
 * ```
 */
export function parseJsonExact(text: string): unknown {
  return LONG_INTEGER.test(text)
    ? JSON.parse(text, bigIntReviver as (key: string, value: unknown) => unknown)
    : JSON.parse(text);
}

/**
 * Decodes and parses a JSON request body: the bytes must be UTF-8, and integers beyond 2^53
 * stay exact (see {@linkcode parseJsonExact}).
 *
 * @param bytes The JSON text's bytes.
 * @returns The parsed value.
 * @throws {SyntaxError} For bytes that are not UTF-8, or invalid JSON; the message says which.
 *
 * @example Bytes that are not UTF-8 are refused
 * ```ts
 * import { parseJsonBytes } from "./json_tensor.ts";
 * import assert from "node:assert/strict";
 *
 * assert.deepEqual(parseJsonBytes(new TextEncoder().encode('["é"]')), ["é"]);
 * assert.throws(
 *   () => parseJsonBytes(new Uint8Array([0x5b, 0x22, 0xff, 0x22, 0x5d])),
 *   { name: "SyntaxError", message: "the JSON text is not valid UTF-8 (byte 2 is 0xff)" },
 * );
 * ```
 */
export function parseJsonBytes(bytes: Uint8Array): unknown {
  // The lenient decoder is Deno's fast path (about a third of the strict one's CPU on a small
  // request). Its text is exact unless it holds U+FFFD, which is the client's own character or
  // stands for bad bytes: only then does the strict decoder decide.
  let text = decoder.decode(bytes);
  if (text.includes("\uFFFD")) {
    try {
      text = strictDecoder.decode(bytes);
    } catch {
      throw new SyntaxError(`the JSON text is not valid UTF-8 (${firstInvalidUtf8(bytes)})`);
    }
  }
  return parseJsonExact(text);
}

/** Describes the first byte that breaks UTF-8, for the message. */
function firstInvalidUtf8(bytes: Uint8Array): string {
  let i = 0;
  while (i < bytes.length) {
    const lead = bytes[i]!;
    const length = lead < 0x80
      ? 1
      : lead >= 0xc2 && lead < 0xe0
      ? 2
      : lead >= 0xe0 && lead < 0xf0
      ? 3
      : lead >= 0xf0 && lead < 0xf5
      ? 4
      : 0;
    if (length === 0) return `byte ${i} is 0x${lead.toString(16).padStart(2, "0")}`;
    const end = i + length;
    if (end > bytes.length) return `byte ${i} starts a sequence the text cuts off`;
    if (!strictDecoderAccepts(bytes.subarray(i, end))) {
      return `bytes ${i}-${end - 1} are not a valid UTF-8 sequence`;
    }
    i = end;
  }
  return "the text ends inside a character";
}

function strictDecoderAccepts(sequence: Uint8Array): boolean {
  try {
    strictDecoder.decode(sequence);
    return true;
  } catch {
    return false;
  }
}

const INT_RANGE: Partial<Record<DType, readonly [number, number]>> = {
  int8: [-128, 127],
  int16: [-32768, 32767],
  int32: [-2147483648, 2147483647],
  uint8: [0, 255],
  uint16: [0, 65535],
  uint32: [0, 4294967295],
};
const INT64_MIN = -(2n ** 63n);
const INT64_MAX = 2n ** 63n - 1n;
const UINT64_MAX = 2n ** 64n - 1n;

/** Refuses element `index` of an input's data, naming what was expected. */
function badElement(
  name: string,
  dtype: DType,
  flat: readonly unknown[],
  index: number,
  expected: string,
): never {
  throw InferenceError.invalidArg(
    `Unable to parse 'data' of input '${name}': element ${index} is ${
      describe(flat[index])
    }, expected ${expected} for ${kserveName(dtype)}`,
  );
}

function describe(value: unknown): string {
  if (typeof value === "bigint") return value.toString();
  if (typeof value === "string") {
    return JSON.stringify(value.length > 40 ? `${value.slice(0, 40)}...` : value);
  }
  if (Array.isArray(value)) return "an array";
  if (value === null) return "null";
  if (typeof value === "object") return "an object";
  return String(value);
}

/**
 * Decodes the JSON `data` of a request input.
 *
 * @param name The input name, for messages.
 * @param spec The input's dtype and shape.
 * @param data The `data` field: nested or flat arrays (or a single scalar for a scalar shape).
 * @returns The tensor; a small numeric one is a view of a chunk other tensors share
 *   (`tensor/small_tensors.ts`), as binary inputs are views of their request's body.
 * @throws {InferenceError} (INVALID_ARG) For FP16/BF16, wrong element types, out-of-range values
 *   (an FP32 or FP64 value must be finite once stored: `1e400` and, for FP32, `1e39` are
 *   refused), arrays nested more than 64 levels deep (or the shape's rank), or an element count
 *   that does not match the shape.
 *
 * @example Nested INT32 and BYTES
 * ```ts
 * import { jsonToNDArray } from "./json_tensor.ts";
 * import assert from "node:assert/strict";
 *
 * const a = jsonToNDArray("a", { dtype: "int32", shape: [2, 2] }, [[1, 2], [3, 4]]);
 * assert.deepEqual([...(a.data as Int32Array)], [1, 2, 3, 4]);
 * const s = jsonToNDArray("s", { dtype: "bytes", shape: [1] }, ["a\u0000b"]);
 * assert.deepEqual([...(s.data[0] as Uint8Array)], [97, 0, 98]);
 * assert.throws(
 *   () => jsonToNDArray("h", { dtype: "float16", shape: [1] }, [1]),
 *   /FP16 data via JSON/,
 * );
 * ```
 */
export function jsonToNDArray(name: string, spec: WireTensorSpec, data: unknown): NDArray {
  const { dtype, shape } = spec;
  if (dtype === "float16" || dtype === "bfloat16") {
    throw InferenceError.invalidArg(
      `Receiving ${
        kserveName(dtype)
      } data via JSON is not supported: use the binary data format for input '${name}'`,
    );
  }
  let count = 1;
  for (const dim of shape) count *= dim;
  const flat = flatten(name, shape, data);
  if (flat.length !== count) {
    throw InferenceError.invalidArg(
      `Unable to parse 'data' of input '${name}': shape [${shape}] needs ${count} elements but 'data' has ${flat.length}`,
    );
  }
  if (dtype === "bytes") {
    const elements = new Array<Uint8Array>(count);
    for (let i = 0; i < count; i++) {
      const value = flat[i];
      if (typeof value !== "string") badElement(name, dtype, flat, i, "a string");
      elements[i] = encoder.encode(value as string);
    }
    return { dtype, shape, data: elements };
  }
  if (dtype === "bool") {
    const out = smallTypedArray("bool", count) as Uint8Array;
    for (let i = 0; i < count; i++) {
      const value = flat[i];
      if (typeof value !== "boolean") badElement(name, dtype, flat, i, "true or false");
      out[i] = value ? 1 : 0;
    }
    return { dtype, shape, data: out };
  }
  if (dtype === "int64" || dtype === "uint64") {
    const out = smallTypedArray(dtype, count) as BigInt64Array | BigUint64Array;
    const [min, max] = dtype === "int64" ? [INT64_MIN, INT64_MAX] : [0n, UINT64_MAX];
    const what = dtype === "int64" ? "a 64-bit integer" : "a non-negative 64-bit integer";
    for (let i = 0; i < count; i++) {
      const value = flat[i];
      let big: bigint;
      if (typeof value === "bigint") big = value;
      else if (typeof value === "number" && Number.isInteger(value)) big = BigInt(value);
      else big = badElement(name, dtype, flat, i, what);
      if (big < min || big > max) badElement(name, dtype, flat, i, what);
      out[i] = big;
    }
    return { dtype, shape, data: out } as NumericNDArray;
  }
  const out = smallTypedArray(dtype, count) as Float64Array;
  const range = INT_RANGE[dtype];
  if (range === undefined) {
    // JSON.parse turns literals beyond FP64 (1e400) into Infinity, and a Float32Array stores
    // values beyond FP32 (1e39) as Infinity: both are refused rather than stored as Infinity.
    const what = dtype === "float32"
      ? "a finite number within FP32 range (about ±3.4028235e38)"
      : "a finite number";
    for (let i = 0; i < count; i++) {
      const value = flat[i];
      const number = typeof value === "number"
        ? value
        : typeof value === "bigint"
        ? Number(value)
        : badElement(name, dtype, flat, i, "a number");
      out[i] = number;
      if (!Number.isFinite(out[i]!)) badElement(name, dtype, flat, i, what);
    }
  } else {
    const [min, max] = range;
    const what = min === 0 ? `an integer in [0, ${max}]` : `an integer in [${min}, ${max}]`;
    for (let i = 0; i < count; i++) {
      const value = flat[i];
      if (typeof value !== "number" || !Number.isInteger(value) || value < min || value > max) {
        badElement(name, dtype, flat, i, what);
      }
      out[i] = value as number;
    }
  }
  return { dtype, shape, data: out } as unknown as NumericNDArray;
}

// Like Triton, data may nest arrays in any way as long as the elements come out in row-major
// order; but not deeper than this (or the shape's rank, if that is more), so that a request
// nested 100k levels deep is a clear error rather than a stack overflow.
const MAX_DATA_DEPTH = 64;

/** Flattens `data` row-major, without recursion and at most {@linkcode MAX_DATA_DEPTH} deep. */
function flatten(name: string, shape: readonly number[], data: unknown): readonly unknown[] {
  if (!Array.isArray(data)) return [data];
  // Flat data, the usual form, is its own flat list: no copy.
  let nested = false;
  for (let i = 0; i < data.length; i++) {
    if (Array.isArray(data[i])) {
      nested = true;
      break;
    }
  }
  if (!nested) return data;
  const maxDepth = Math.max(shape.length, MAX_DATA_DEPTH);
  const out: unknown[] = [];
  // Each entry: an array and the index of its next element.
  const stack: [unknown[], number][] = [[data, 0]];
  while (stack.length > 0) {
    const top = stack[stack.length - 1]!;
    const [array, index] = top;
    if (index === array.length) {
      stack.pop();
      continue;
    }
    top[1] = index + 1;
    const element = array[index];
    if (!Array.isArray(element)) {
      out.push(element);
      continue;
    }
    if (stack.length === maxDepth) {
      throw InferenceError.invalidArg(
        `Unable to parse 'data' of input '${name}': arrays are nested more than ${maxDepth} levels deep`,
      );
    }
    stack.push([element, 0]);
  }
  return out;
}

/**
 * Encodes a tensor as the flat `data` array of a JSON response: numbers, booleans, strings for
 * BYTES (UTF-8 decoded), and exact raw JSON numbers for 64-bit integers beyond 2^53.
 *
 * @param name The output name, for messages.
 * @param array The tensor.
 * @returns A value for `JSON.stringify`.
 * @throws {InferenceError} (INVALID_ARG) For FP16/BF16, which must be requested as binary.
 *
 * @example Large int64 values stay exact; bools as booleans
 * ```ts
 * import { ndarrayToJson } from "./json_tensor.ts";
 * import assert from "node:assert/strict";
 *
 * const json = ndarrayToJson("o", {
 *   dtype: "int64", shape: [2], data: new BigInt64Array([1n, 2n ** 62n]),
 * });
 * assert.equal(JSON.stringify(json), "[1,4611686018427387904]");
 * const flags = ndarrayToJson("b", { dtype: "bool", shape: [2], data: new Uint8Array([1, 0]) });
 * assert.deepEqual(flags, [true, false]);
 * ```
 */
export function ndarrayToJson(name: string, array: NDArray): unknown[] {
  switch (array.dtype) {
    case "float16":
    case "bfloat16":
      throw InferenceError.invalidArg(
        `Sending ${
          kserveName(array.dtype)
        } data via JSON is not supported: request output '${name}' with parameters.binary_data set to true`,
      );
    case "bytes":
      return array.data.map((element) => decoder.decode(element));
    case "bool":
      return Array.from(array.data as Uint8Array, (value) => value !== 0);
    case "int64":
    case "uint64":
      return Array.from(
        array.data as BigInt64Array | BigUint64Array,
        (value) => {
          const number = Number(value);
          return Number.isSafeInteger(number) ? number : rawJson(value.toString());
        },
      );
    default: {
      // A loop, not Array.from: that goes through the typed array's iterator, one result
      // object per element.
      const data = array.data as Float64Array;
      const out: number[] = new Array(data.length);
      for (let i = 0; i < data.length; i++) out[i] = data[i]!;
      return out;
    }
  }
}

// JSON.rawJSON keeps all digits of 64-bit integers in JSON.stringify output.
const rawJson = (JSON as unknown as { rawJSON(text: string): unknown }).rawJSON;
