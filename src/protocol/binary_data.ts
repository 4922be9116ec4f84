/**
 * KServe v2's binary tensor data extension over HTTP, one set of rules for the front end and the
 * client: a body is a JSON header followed by the bytes of each tensor whose parameters carry
 * `binary_data_size`, in the order the JSON lists them, and the `Inference-Header-Content-Length`
 * header gives the JSON's length (without it the body is all JSON). Requests carry inputs so
 * (client → server), responses outputs (server → client); `binary_data` on a requested output,
 * or `binary_data_output` on the request, asks for binary outputs. Tensor bytes are raw
 * little-endian, BYTES elements each after a 4-byte length.
 *
 * {@linkcode BinaryDataWriter} lays a body out, {@linkcode BinaryDataReader} reads one back.
 *
 * @module
 */

import { InferenceError } from "../errors.ts";
import { deserializeBytes } from "../tensor/bytes_codec.ts";
import { type DType, elementSize } from "../tensor/dtype.ts";
import { fromRawBytes, type NDArray } from "../tensor/ndarray.ts";
import type { WireTensorSpec } from "./tensor_contents.ts";

/** The header giving the JSON's length, lower-case as `Headers` reads it. */
export const HEADER_LENGTH_HEADER = "inference-header-content-length";

/** The tensor parameter giving the byte size of a tensor's binary data. */
export const BINARY_DATA_SIZE = "binary_data_size";

/** The requested-output parameter asking for that output as binary data. */
export const BINARY_DATA = "binary_data";

/** The request parameter asking for every output not named otherwise as binary data. */
export const BINARY_DATA_OUTPUT = "binary_data_output";

const encoder = new TextEncoder();

function badHeaderLength(value: unknown, bodyLength: number): InferenceError {
  return InferenceError.invalidArg(
    `Invalid 'Inference-Header-Content-Length' header: expected an integer within [0, ${bodyLength}] (the body size), got '${value}'`,
  );
}

/**
 * Parses the `Inference-Header-Content-Length` header.
 *
 * @param value The header value (`null` when absent).
 * @param bodyLength The byte length of the (decompressed) body.
 * @returns The JSON length, or `undefined` when the header is absent.
 * @throws {InferenceError} (INVALID_ARG) Unless the value is an integer in `[0, bodyLength]`.
 *
 * @example A length within the body; none; too long and negative refused
 * ```ts
 * import { parseHeaderLength } from "./binary_data.ts";
 * import assert from "node:assert/strict";
 *
 * assert.equal(parseHeaderLength("12", 20), 12);
 * assert.equal(parseHeaderLength(null, 20), undefined);
 * assert.throws(() => parseHeaderLength("21", 20), /Inference-Header-Content-Length/);
 * assert.throws(() => parseHeaderLength("-1", 20), /Inference-Header-Content-Length/);
 * ```
 */
export function parseHeaderLength(value: string | null, bodyLength: number): number | undefined {
  if (value === null) return undefined;
  const text = value.trim();
  const length = /^\d{1,15}$/.test(text) ? Number(text) : NaN;
  if (!(length >= 0 && length <= bodyLength)) throw badHeaderLength(value, bodyLength);
  return length;
}

/**
 * Reads a tensor's `binary_data_size`.
 *
 * @param parameters The tensor's parameters (JSON values; integers may be bigints).
 * @param what Names the tensor in errors, e.g. `input 'x'`.
 * @returns The byte size, or `undefined` when the tensor has no binary data.
 * @throws {InferenceError} (INVALID_ARG) Unless it is a non-negative safe integer.
 *
 * @example A size, none, and a negative size refused
 * ```ts
 * import { binaryDataSize } from "./binary_data.ts";
 * import assert from "node:assert/strict";
 *
 * assert.equal(binaryDataSize({ binary_data_size: 8 }, "input 'x'"), 8);
 * assert.equal(binaryDataSize({}, "input 'x'"), undefined);
 * assert.throws(
 *   () => binaryDataSize({ binary_data_size: -1 }, "input 'x'"),
 *   /Unable to parse 'binary_data_size' of input 'x': expected a non-negative integer/,
 * );
 * ```
 */
export function binaryDataSize(
  parameters: Readonly<Record<string, unknown>> | undefined,
  what: string,
): number | undefined {
  const value = parameters?.[BINARY_DATA_SIZE];
  if (value === undefined) return undefined;
  if (typeof value === "number" && Number.isSafeInteger(value) && value >= 0) return value;
  if (typeof value === "bigint" && value >= 0n && value <= BigInt(Number.MAX_SAFE_INTEGER)) {
    return Number(value);
  }
  throw InferenceError.invalidArg(
    `Unable to parse '${BINARY_DATA_SIZE}' of ${what}: expected a non-negative integer`,
  );
}

/** Which message a body is: a request carries inputs, a response outputs. */
export type BinaryDataMessage = "request" | "response";

/** What a {@linkcode BinaryDataReader}'s body is, for its errors. */
export interface BinaryDataReaderOptions {
  /** Whether the body is a request's or a response's. */
  readonly message: BinaryDataMessage;
  /** The model's name; errors name no model without it. */
  readonly model?: string;
}

/** A binary tensor's description in the JSON header, which {@linkcode BinaryDataReader.tensor} reads. */
export interface BinaryTensorHeader extends WireTensorSpec {
  /** Its `binary_data_size`. */
  readonly size: number;
}

/**
 * Reads the tensors after a body's JSON, each in turn, with the rules of the extension.
 *
 * @example Two inputs after the JSON
 * ```ts
 * import { BinaryDataReader } from "./binary_data.ts";
 * import assert from "node:assert/strict";
 *
 * const body = new Uint8Array([...new TextEncoder().encode("{}"), 1, 0, 2, 0, 7]);
 * const reader = new BinaryDataReader(body, 2, { message: "request", model: "m" });
 * assert.equal(new TextDecoder().decode(reader.json), "{}");
 * const a = reader.tensor("input 'a'", { dtype: "int16", shape: [2], size: 4 });
 * assert.deepEqual([...(a.data as Int16Array)], [1, 2]);
 * assert.throws(
 *   () => reader.tensor("input 'b'", { dtype: "uint8", shape: [2], size: 2 }),
 *   /only 1 remain/,
 * );
 * assert.throws(() => reader.end(), /1 bytes after the last input/);
 * ```
 */
export class BinaryDataReader {
  readonly #body: Uint8Array;
  readonly #headerLength: number | undefined;
  readonly #message: BinaryDataMessage;
  readonly #model: string | undefined;
  #offset: number;

  /**
   * @param body The whole (decompressed) body.
   * @param headerLength The JSON's length (`Inference-Header-Content-Length`); `undefined` when
   *   the body is all JSON.
   * @param options Whether the body is a request's or a response's, and the model's name, for
   *   errors.
   * @throws {InferenceError} (INVALID_ARG) When `headerLength` is not an integer within the
   *   body.
   */
  constructor(
    body: Uint8Array,
    headerLength: number | undefined,
    options: BinaryDataReaderOptions,
  ) {
    if (
      headerLength !== undefined &&
      !(Number.isInteger(headerLength) && headerLength >= 0 && headerLength <= body.byteLength)
    ) {
      throw badHeaderLength(headerLength, body.byteLength);
    }
    this.#body = body;
    this.#headerLength = headerLength;
    this.#message = options.message;
    this.#model = options.model;
    this.#offset = headerLength ?? body.byteLength;
  }

  /** The JSON header's bytes. */
  get json(): Uint8Array {
    return this.#body.subarray(0, this.#headerLength ?? this.#body.byteLength);
  }

  /**
   * Reads the next tensor's bytes: numeric data is viewed in place when aligned for its type,
   * BYTES elements are split at their lengths.
   *
   * @param what Names the tensor in errors, e.g. `input 'x'`.
   * @param header Its element type, dimensions and `binary_data_size`.
   * @returns The tensor.
   * @throws {InferenceError} (INVALID_ARG) When the body has no binary part, fewer bytes remain,
   *   or the bytes do not fit the shape.
   */
  tensor(what: string, header: BinaryTensorHeader): NDArray {
    const { dtype, shape, size } = header;
    if (this.#headerLength === undefined) {
      throw InferenceError.invalidArg(
        `${what[0]!.toUpperCase()}${
          what.slice(1)
        } has binary data but the ${this.#message} has no 'Inference-Header-Content-Length' header`,
      );
    }
    const remaining = this.#body.byteLength - this.#offset;
    if (size > remaining) {
      throw InferenceError.invalidArg(
        `Unexpected size for ${what}: expecting ${size} bytes but only ${remaining} remain in the ${this.#message} body${this.#of()}`,
      );
    }
    const bytes = this.#body.subarray(this.#offset, this.#offset + size);
    this.#offset += size;
    return binaryTensor(what, dtype, shape, bytes);
  }

  /**
   * Checks that the tensors read took the whole body.
   *
   * @throws {InferenceError} (INVALID_ARG) When bytes are left after the last tensor.
   */
  end(): void {
    const left = this.#body.byteLength - this.#offset;
    if (left === 0) return;
    const kind = this.#message === "request" ? "input" : "output";
    throw InferenceError.invalidArg(
      `Unexpected additional ${kind} data${this.#of()}: ${left} bytes after the last ${kind}`,
    );
  }

  #of(): string {
    return this.#model === undefined ? "" : ` for model '${this.#model}'`;
  }
}

/** A tensor from its binary data, checked against its shape. */
function binaryTensor(
  what: string,
  dtype: DType,
  shape: readonly number[],
  bytes: Uint8Array,
): NDArray {
  let count = 1;
  for (const dim of shape) count *= dim;
  if (dtype === "bytes") {
    try {
      return { dtype, shape, data: deserializeBytes(bytes, count) };
    } catch (error) {
      throw InferenceError.invalidArg(
        `Invalid binary data of ${what}: ${(error as Error).message}`,
        { cause: error },
      );
    }
  }
  const expected = count * elementSize(dtype);
  if (bytes.byteLength !== expected) {
    throw InferenceError.invalidArg(
      `Unexpected size for ${what}: shape [${shape}] of ${
        dtype === "bool" ? "BOOL" : dtype
      } needs ${expected} bytes, '${BINARY_DATA_SIZE}' is ${bytes.byteLength}`,
    );
  }
  return fromRawBytes(dtype, shape, bytes);
}

/** A body laid out by {@linkcode BinaryDataWriter.finish}. */
export interface BinaryDataBody {
  /** The JSON header's bytes. */
  readonly json: Uint8Array<ArrayBuffer>;
  /** The tensors' bytes, in the order they follow the JSON. */
  readonly tensors: readonly Uint8Array[];
  /** The whole body's length. */
  readonly byteLength: number;
  /**
   * The headers the body goes with: `inference-header-content-length` when tensors follow the
   * JSON, none otherwise.
   */
  readonly headers: Readonly<Record<string, string>>;
}

/**
 * Lays a body out: each tensor added gets the parameters its JSON entry carries, and its bytes
 * follow the JSON in the order they were added.
 *
 * @example One INT32 input
 * ```ts
 * import { BinaryDataWriter } from "./binary_data.ts";
 * import assert from "node:assert/strict";
 *
 * const writer = new BinaryDataWriter();
 * const parameters = writer.add(new Uint8Array(new Int32Array([1, 2]).buffer));
 * const body = writer.finish({ inputs: [{ name: "x", datatype: "INT32", shape: [2], parameters }] });
 * assert.equal(
 *   new TextDecoder().decode(body.json),
 *   '{"inputs":[{"name":"x","datatype":"INT32","shape":[2],"parameters":{"binary_data_size":8}}]}',
 * );
 * assert.deepEqual(body.headers, { "inference-header-content-length": String(body.json.byteLength) });
 * assert.equal(body.byteLength, body.json.byteLength + 8);
 * ```
 */
export class BinaryDataWriter {
  readonly #tensors: Uint8Array[] = [];
  #size = 0;

  /**
   * Adds a tensor's bytes after those added before.
   *
   * @param bytes The tensor's binary data (raw little-endian; BYTES elements length-prefixed).
   * @returns The parameters its JSON entry carries.
   */
  add(bytes: Uint8Array): { binary_data_size: number } {
    this.#tensors.push(bytes);
    this.#size += bytes.byteLength;
    return { [BINARY_DATA_SIZE]: bytes.byteLength };
  }

  /** Whether no tensor was added: the body is then the JSON header alone. */
  get empty(): boolean {
    return this.#tensors.length === 0;
  }

  /**
   * Encodes the JSON header, which must carry the parameters {@linkcode BinaryDataWriter.add}
   * returned.
   *
   * @param header The JSON header's object.
   * @returns The body's pieces and headers.
   */
  finish(header: unknown): BinaryDataBody {
    const json = encoder.encode(JSON.stringify(header));
    return {
      json,
      tensors: this.#tensors,
      byteLength: json.byteLength + this.#size,
      headers: this.#tensors.length === 0
        ? {}
        : { [HEADER_LENGTH_HEADER]: String(json.byteLength) },
    };
  }
}
