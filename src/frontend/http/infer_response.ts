/**
 * Encoding an `InferenceResponse` as Triton's HTTP reply: JSON only (`application/json`), or,
 * when any output is binary, the JSON followed by each binary output's bytes in order
 * (`application/octet-stream` + `Inference-Header-Content-Length`, laid out by
 * `protocol/binary_data.ts`, which the client reads by). Also the `classification` output
 * parameter (top-N as BYTES `"<value>:<index>"`).
 *
 * @module
 */

import type { InferenceResponse } from "../../engine/engine.ts";
import { InferenceError } from "../../errors.ts";
import { kserveName } from "../../tensor/dtype.ts";
import { type BytesNDArray, type NDArray, toRawBytes } from "../../tensor/ndarray.ts";
import { hostTensor } from "../../tensor/device_tensor.ts";
import type { OutputFormat } from "./infer_request.ts";
import { ndarrayToJson } from "../../protocol/json_tensor.ts";
import { isOwnMemory } from "../../tensor/foreign_memory.ts";
import type { BodyChunks, ReplyBody } from "./compression.ts";
import { BinaryDataWriter } from "../../protocol/binary_data.ts";

const encoder = new TextEncoder();

/** Options of {@linkcode encodeInferResponse}. */
export interface EncodeInferOptions {
  /**
   * Formats of the outputs the client named.
   *
   * @default {new Map()}
   */
  outputFormats?: ReadonlyMap<string, OutputFormat>;
  /**
   * Whether outputs the client did not name are binary.
   *
   * @default {false}
   */
  defaultBinary?: boolean;
  /**
   * Whether the model batches (axis 0 is the batch), for classification.
   *
   * @default {false}
   */
  batching?: boolean;
  /**
   * Outputs written into shared memory: listed without data, as Triton does.
   *
   * @default {new Set()}
   */
  sharedMemoryOutputs?: ReadonlySet<string>;
}

/** An encoded HTTP reply body and its headers. */
export interface EncodedInferResponse {
  /**
   * The body: JSON, then binary outputs; large outputs in JavaScript's own memory are their
   * tensors' bytes, not copies (see {@linkcode BY_REFERENCE_FROM_BYTES}). A body of JSON alone
   * is its text.
   */
  readonly body: ReplyBody;
  /** `content-type`, and `inference-header-content-length` when binary data follows. */
  readonly headers: Record<string, string>;
}

function formatClassValue(value: number | bigint, integral: boolean): string {
  // Triton formats with std::to_string: integers plainly, floats with six decimals.
  if (typeof value === "bigint" || integral) return value.toString();
  if (Number.isNaN(value)) return "nan";
  if (!Number.isFinite(value)) return value > 0 ? "inf" : "-inf";
  return value.toFixed(6);
}

/** Options of {@linkcode classify}. */
export interface ClassifyOptions {
  /** N: how many of the largest values each row gives. */
  readonly count: number;
  /**
   * Whether axis 0 is the batch (each batch row is then classified on its own).
   *
   * @default {false}
   */
  readonly batching?: boolean;
}

/**
 * Top-N classification of an output, as Triton computes it: per batch row (for batching models)
 * the N largest values, each `"<value>:<index>"`.
 *
 * @param name The output name, for messages.
 * @param array The output tensor.
 * @param options N, and whether axis 0 is the batch.
 * @returns A BYTES tensor of shape `[batch, min(N, row size)]` (or `[min(N, size)]`).
 * @throws {InferenceError} (INVALID_ARG) For BOOL, BYTES, FP16 and BF16 outputs.
 *
 * @example Top 2
 * ```ts
 * import { classify } from "./infer_response.ts";
 * import assert from "node:assert/strict";
 *
 * const out = classify(
 *   "p",
 *   { dtype: "float32", shape: [1, 3], data: new Float32Array([0.25, 0.5, 0.125]) },
 *   { count: 2, batching: true },
 * );
 * assert.deepEqual(out.shape, [1, 2]);
 * assert.deepEqual(out.data.map((b) => new TextDecoder().decode(b)), ["0.500000:1", "0.250000:0"]);
 * ```
 */
export function classify(
  name: string,
  array: NDArray,
  options: ClassifyOptions,
): BytesNDArray {
  const { count } = options;
  const batching = options.batching ?? false;
  const dtype = array.dtype;
  if (dtype === "bytes" || dtype === "bool" || dtype === "float16" || dtype === "bfloat16") {
    throw InferenceError.invalidArg(
      `Class result not available for output '${name}' due to unsupported type '${
        kserveName(dtype)
      }'`,
    );
  }
  const data = array.data as ArrayLike<number | bigint>;
  const rows = batching && array.shape.length > 0 ? array.shape[0]! : 1;
  const rowSize = rows === 0 ? 0 : data.length / rows;
  const k = Math.min(count, rowSize);
  const integral = dtype !== "float32" && dtype !== "float64";
  const out: Uint8Array[] = [];
  for (let row = 0; row < rows; row++) {
    const start = row * rowSize;
    const indices = Array.from({ length: rowSize }, (_, i) => i);
    indices.sort((a, b) => {
      const x = data[start + a]!;
      const y = data[start + b]!;
      return x > y ? -1 : x < y ? 1 : 0;
    });
    for (let i = 0; i < k; i++) {
      const index = indices[i]!;
      out.push(encoder.encode(`${formatClassValue(data[start + index]!, integral)}:${index}`));
    }
  }
  const shape = batching && array.shape.length > 0 ? [rows, k] : [k];
  return { dtype: "bytes", shape, data: out };
}

/**
 * Binary outputs at least this large go into the body as their tensors' own bytes, when those
 * are JavaScript's own memory (a shared-memory mapping or the core's memory could go away before
 * the body is sent): a new body of megabytes costs several times its copy (fresh pages, and
 * external memory that sets the garbage collector off).
 */
export const BY_REFERENCE_FROM_BYTES = 64 * 1024;

// The header, then the binary outputs: large ones as they are, the others copied together.
function bodyOf(
  header: Uint8Array<ArrayBuffer>,
  binaries: readonly Uint8Array[],
  size: number,
): BodyChunks {
  const chunks: Uint8Array<ArrayBuffer>[] = [];
  let run: Uint8Array[] = [header];
  let runSize = header.byteLength;
  const flush = (): void => {
    if (run.length === 1 && run[0] === header) chunks.push(header);
    else if (run.length > 0) {
      const joined = new Uint8Array(runSize);
      let offset = 0;
      for (const bytes of run) {
        joined.set(bytes, offset);
        offset += bytes.byteLength;
      }
      chunks.push(joined);
    }
    run = [];
    runSize = 0;
  };
  for (const bytes of binaries) {
    if (bytes.byteLength >= BY_REFERENCE_FROM_BYTES && isOwnMemory(bytes)) {
      flush();
      chunks.push(bytes);
    } else {
      run.push(bytes);
      runSize += bytes.byteLength;
    }
  }
  flush();
  return { chunks, byteLength: size };
}

/**
 * Encodes an inference response for HTTP.
 *
 * @param response The engine's response.
 * @param options Output formats and whether the model batches.
 * @returns The body and headers.
 * @throws {InferenceError} (INVALID_ARG) For FP16/BF16 outputs requested as JSON, or a bad classification.
 *
 * @example Mixed JSON and binary outputs
 * ```ts
 * import { encodeInferResponse } from "./infer_response.ts";
 * import { joinChunks } from "./compression.ts";
 * import assert from "node:assert/strict";
 *
 * const encoded = encodeInferResponse({
 *   modelName: "m", modelVersion: "1",
 *   outputs: new Map([
 *     ["a", { dtype: "int32", shape: [1], data: new Int32Array([7]) }],
 *     ["b", { dtype: "uint8", shape: [2], data: new Uint8Array([1, 2]) }],
 *   ]),
 * }, { outputFormats: new Map([["b", { binary: true, classification: 0 }]]) });
 * const json = '{"model_name":"m","model_version":"1","outputs":[' +
 *   '{"name":"a","datatype":"INT32","shape":[1],"data":[7]},' +
 *   '{"name":"b","datatype":"UINT8","shape":[2],"parameters":{"binary_data_size":2}}]}';
 * const body = joinChunks(encoded.body);
 * assert.equal(encoded.headers["inference-header-content-length"], String(json.length));
 * assert.equal(new TextDecoder().decode(body.subarray(0, json.length)), json);
 * assert.deepEqual([...body.subarray(json.length)], [1, 2]);
 * ```
 */
export function encodeInferResponse(
  response: InferenceResponse,
  options: EncodeInferOptions = {},
): EncodedInferResponse {
  const formats = options.outputFormats ?? new Map<string, OutputFormat>();
  const defaultBinary = options.defaultBinary ?? false;
  const outputs: Record<string, unknown>[] = [];
  const binary = new BinaryDataWriter();
  for (const [name, tensor] of response.outputs) {
    const format = formats.get(name);
    const asBinary = format?.binary ?? defaultBinary;
    if (options.sharedMemoryOutputs?.has(name)) {
      // In its region (a CUDA region's output is a device tensor over it): described, not sent.
      outputs.push({ name, datatype: kserveName(tensor.dtype), shape: [...tensor.shape] });
      continue;
    }
    const value = hostTensor(tensor, `output '${name}'`);
    const array = format !== undefined && format.classification > 0
      ? classify(name, value, {
        count: format.classification,
        batching: options.batching ?? false,
      })
      : value;
    const entry: Record<string, unknown> = {
      name,
      datatype: kserveName(array.dtype),
      shape: [...array.shape],
    };
    if (asBinary) {
      entry["parameters"] = binary.add(toRawBytes(array));
    } else {
      entry["data"] = ndarrayToJson(name, array);
    }
    outputs.push(entry);
  }
  const json: Record<string, unknown> = {
    model_name: response.modelName,
    model_version: response.modelVersion,
  };
  if (response.id !== undefined && response.id !== "") json["id"] = response.id;
  if (response.parameters !== undefined && Object.keys(response.parameters).length > 0) {
    json["parameters"] = response.parameters;
  }
  json["outputs"] = outputs;
  if (binary.empty) {
    // Text: Deno encodes a string body as it sends it, where bytes would be encoded here and
    // then copied by `Response`.
    return { body: JSON.stringify(json), headers: { "content-type": "application/json" } };
  }
  const body = binary.finish(json);
  return {
    body: bodyOf(body.json, body.tensors, body.byteLength),
    headers: { "content-type": "application/octet-stream", ...body.headers },
  };
}
