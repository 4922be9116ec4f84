/**
 * The HTTP inference wire format on the client side: requests with every input as binary data
 * after the JSON header, and the JSON-or-binary response. The binary data extension's layout and
 * checks are `protocol/binary_data.ts`'s, the front end's too.
 *
 * @module
 */

import { isObject } from "../json_values.ts";
import { fromKServe, kserveName } from "../tensor/dtype.ts";
import { type NDArray, ndarray, toRawBytes } from "../tensor/ndarray.ts";
import {
  BINARY_DATA,
  BINARY_DATA_OUTPUT,
  BinaryDataReader,
  binaryDataSize,
  BinaryDataWriter,
} from "../protocol/binary_data.ts";
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
  const binary = new BinaryDataWriter();
  const header: Record<string, unknown> = { id: request.id };
  const parameters: Record<string, ClientParameterValue> = { ...request.parameters };
  if (request.outputs.length === 0) parameters[BINARY_DATA_OUTPUT] = true;
  if (Object.keys(parameters).length > 0) header["parameters"] = parameters;
  header["inputs"] = request.inputs.map(([name, tensor]) => ({
    name,
    datatype: kserveName(tensor.dtype),
    shape: [...tensor.shape],
    parameters: binary.add(toRawBytes(tensor)),
  }));
  if (request.outputs.length > 0) {
    header["outputs"] = request.outputs.map((name) => ({
      name,
      parameters: { [BINARY_DATA]: true },
    }));
  }
  const { json, tensors, byteLength } = binary.finish(header);
  // One buffer: fetch sends it as it is.
  const body = new Uint8Array(byteLength);
  body.set(json, 0);
  let offset = json.byteLength;
  for (const bytes of tensors) {
    body.set(bytes, offset);
    offset += bytes.byteLength;
  }
  return { body, headerLength: json.byteLength };
}

function invalid(why: string, cause?: unknown): ClientInferenceServerError {
  return new ClientInferenceServerError(
    `Invalid inference response from server: ${why}`,
    cause === undefined ? {} : { cause },
  );
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
  let reader: BinaryDataReader;
  try {
    reader = new BinaryDataReader(body, headerLength, { message: "response" });
  } catch (error) {
    throw invalid((error as Error).message, error);
  }
  let header: unknown;
  try {
    header = JSON.parse(decoder.decode(reader.json));
  } catch (error) {
    throw invalid(`the JSON header does not parse: ${(error as Error).message}`, error);
  }
  if (!isObject(header)) throw invalid("the JSON header is not an object");
  const outputs: Record<string, NDArray> = {};
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
    const what = `output '${name}'`;
    let size: number | undefined;
    try {
      size = binaryDataSize(parameters, what);
      if (size !== undefined) outputs[name] = reader.tensor(what, { dtype, shape, size });
    } catch (error) {
      // The extension's rules answer in the front end's words; the client's error says whose.
      throw invalid((error as Error).message, error);
    }
    if (size === undefined) outputs[name] = jsonTensor(name, dtype, shape, output["data"]);
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
