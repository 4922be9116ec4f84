/**
 * The HTTP inference wire format on the client side: the JSON header plus binary tensor data
 * (KServe's binary data extension) for requests, and the JSON-or-binary response.
 *
 * @module
 */

import { fromKServe, kserveName } from "../tensor/dtype.ts";
import { fromRawBytes, type NDArray, ndarray, rawByteSize, toRawBytes } from "../tensor/ndarray.ts";
import { serializeBytes } from "../tensor/bytes_codec.ts";
import { ClientInferenceServerError } from "./errors.ts";
import type {
  ClientParameterValue,
  TransportInferRequest,
  TransportInferResponse,
} from "./transport.ts";

/** An encoded HTTP inference request. */
export interface EncodedHttpRequest {
  /** The JSON header followed by every input's bytes. */
  readonly body: Uint8Array<ArrayBuffer>;
  /** The byte length of the JSON header (`Inference-Header-Content-Length`). */
  readonly headerLength: number;
}

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/**
 * Encodes an inference request with every input as binary data and every output requested as
 * binary.
 *
 * @param request The request.
 * @returns The body and the JSON header's length.
 *
 * @example One INT32 input
 * ```ts
 * import { encodeHttpInferRequest } from "./http_codec.ts";
 * import { ndarray } from "../tensor/ndarray.ts";
 * import assert from "node:assert/strict";
 *
 * const { body, headerLength } = encodeHttpInferRequest({
 *   modelName: "m", modelVersion: undefined, id: "1", parameters: {},
 *   inputs: [["x", ndarray(new Int32Array([1, 2]), [1, 2])]], outputs: ["y"],
 * });
 * const json = JSON.parse(new TextDecoder().decode(body.subarray(0, headerLength)));
 * assert.deepEqual(json.inputs, [
 *   { name: "x", datatype: "INT32", shape: [1, 2], parameters: { binary_data_size: 8 } },
 * ]);
 * assert.deepEqual([...body.subarray(headerLength)], [1, 0, 0, 0, 2, 0, 0, 0]);
 * ```
 */
export function encodeHttpInferRequest(request: TransportInferRequest): EncodedHttpRequest {
  const sizes = request.inputs.map(([, tensor]) => rawByteSize(tensor));
  const header: Record<string, unknown> = { id: request.id };
  const parameters: Record<string, ClientParameterValue> = { ...request.parameters };
  if (request.outputs.length === 0) parameters["binary_data_output"] = true;
  if (Object.keys(parameters).length > 0) header["parameters"] = parameters;
  header["inputs"] = request.inputs.map(([name, tensor], i) => ({
    name,
    datatype: kserveName(tensor.dtype),
    shape: [...tensor.shape],
    parameters: { binary_data_size: sizes[i] },
  }));
  if (request.outputs.length > 0) {
    header["outputs"] = request.outputs.map((name) => ({
      name,
      parameters: { binary_data: true },
    }));
  }
  const json = encoder.encode(JSON.stringify(header));
  const total = json.byteLength + sizes.reduce((sum, size) => sum + size, 0);
  const body = new Uint8Array(total);
  body.set(json, 0);
  let offset = json.byteLength;
  request.inputs.forEach(([, tensor], i) => {
    const size = sizes[i]!;
    if (tensor.dtype === "bytes") {
      serializeBytes(tensor.data, body.subarray(offset, offset + size));
    } else {
      body.set(toRawBytes(tensor), offset);
    }
    offset += size;
  });
  return { body, headerLength: json.byteLength };
}

function invalid(why: string, cause?: unknown): ClientInferenceServerError {
  return new ClientInferenceServerError(
    `Invalid inference response from server: ${why}`,
    cause === undefined ? {} : { cause },
  );
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function jsonTensor(
  name: string,
  dtype: NDArray["dtype"],
  shape: number[],
  data: unknown,
): NDArray {
  if (!Array.isArray(data)) throw invalid(`output '${name}' has neither data nor binary data`);
  const flat = data.flat(Infinity);
  try {
    return ndarray(flat, shape, { dtype });
  } catch (error) {
    throw invalid(`output '${name}' has bad JSON data: ${(error as Error).message}`, error);
  }
}

/**
 * Decodes an inference response body.
 *
 * @param body The whole response body.
 * @param headerLength The `Inference-Header-Content-Length` header; `undefined` for a JSON-only
 *   body.
 * @returns The response, numeric outputs as views into `body` when aligned.
 * @throws {ClientInferenceServerError} When the body is malformed.
 *
 * @example A binary FP32 output after a JSON header
 * ```ts
 * import { decodeHttpInferResponse } from "./http_codec.ts";
 * import assert from "node:assert/strict";
 *
 * const json = new TextEncoder().encode(JSON.stringify({
 *   model_name: "m", model_version: "1",
 *   outputs: [{ name: "y", datatype: "FP32", shape: [1], parameters: { binary_data_size: 4 } }],
 * }));
 * const body = new Uint8Array([...json, 0, 0, 128, 63]);
 * const response = decodeHttpInferResponse(body, json.byteLength);
 * assert.deepEqual([...(response.outputs.y!.data as Float32Array)], [1]);
 * ```
 */
export function decodeHttpInferResponse(
  body: Uint8Array,
  headerLength: number | undefined,
): TransportInferResponse {
  const jsonLength = headerLength ?? body.byteLength;
  if (!Number.isInteger(jsonLength) || jsonLength < 0 || jsonLength > body.byteLength) {
    throw invalid(
      `Inference-Header-Content-Length ${headerLength} is outside the body of ${body.byteLength} bytes`,
    );
  }
  let header: unknown;
  try {
    header = JSON.parse(decoder.decode(body.subarray(0, jsonLength)));
  } catch (error) {
    throw invalid(`the JSON header does not parse: ${(error as Error).message}`, error);
  }
  if (!isObject(header)) throw invalid("the JSON header is not an object");
  const outputs: Record<string, NDArray> = {};
  let offset = jsonLength;
  const list = Array.isArray(header["outputs"]) ? header["outputs"] : [];
  for (const output of list) {
    if (!isObject(output) || typeof output["name"] !== "string") {
      throw invalid("an output has no name");
    }
    const name = output["name"];
    const dtype = typeof output["datatype"] === "string"
      ? fromKServe(output["datatype"])
      : undefined;
    if (dtype === undefined) {
      throw invalid(`output '${name}' has unknown datatype ${JSON.stringify(output["datatype"])}`);
    }
    const shape = Array.isArray(output["shape"]) ? output["shape"].map(Number) : [];
    if (shape.some((dim) => !Number.isInteger(dim) || dim < 0)) {
      throw invalid(`output '${name}' has a bad shape ${JSON.stringify(output["shape"])}`);
    }
    const parameters = isObject(output["parameters"]) ? output["parameters"] : {};
    const size = parameters["binary_data_size"];
    if (size === undefined) {
      outputs[name] = jsonTensor(name, dtype, shape, output["data"]);
      continue;
    }
    if (typeof size !== "number" || !Number.isInteger(size) || size < 0) {
      throw invalid(`output '${name}' has a bad binary_data_size ${JSON.stringify(size)}`);
    }
    if (offset + size > body.byteLength) {
      throw invalid(
        `output '${name}' claims ${size} bytes at byte ${offset} but the body has ${body.byteLength}`,
      );
    }
    try {
      outputs[name] = fromRawBytes(dtype, shape, body.subarray(offset, offset + size));
    } catch (error) {
      throw invalid(`output '${name}': ${(error as Error).message}`, error);
    }
    offset += size;
  }
  return {
    modelName: typeof header["model_name"] === "string" ? header["model_name"] : "",
    modelVersion: header["model_version"] === undefined ? "" : String(header["model_version"]),
    id: typeof header["id"] === "string" ? header["id"] : "",
    parameters: isObject(header["parameters"])
      ? header["parameters"] as Record<string, ClientParameterValue>
      : {},
    outputs,
  };
}
