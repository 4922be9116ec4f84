/**
 * The client side of Triton's generate extension, which `ModelClient.inferStream` uses over HTTP:
 * a request becomes one JSON object, and each Server-Sent Event of `/generate_stream` one
 * response, by the extension's rules (`protocol/generate.ts`, the front end's too).
 *
 * The wire carries no shapes: the server shapes each input from the model metadata, and this
 * module shapes outputs from the model config by the same rule (`generateShape`).
 * A tensor whose shape that rule cannot reproduce (two variable dimensions above 1), and FP16/BF16
 * tensors (JSON cannot carry them) are refused with a {@linkcode ClientValueError}: use gRPC.
 *
 * @module
 */

import {
  GENERATE_ERROR_KEY,
  GENERATE_METADATA_KEYS,
  GENERATE_RESERVED_KEYS,
  generateElements,
  generateShape,
  generateValue,
} from "../protocol/generate.ts";
import { ndarrayToJson, parseJsonExact } from "../protocol/json_tensor.ts";
import { type NDArray, ndarray } from "../tensor/ndarray.ts";
import { ClientInferenceServerError, ClientValueError } from "./errors.ts";
import type {
  ClientParameterValue,
  GenerateSpecs,
  GenerateTensorSpec,
  TransportInferRequest,
  TransportInferResponse,
} from "./transport.ts";

const strictDecoder = new TextDecoder("utf-8", { fatal: true });

function sameShape(a: readonly number[], b: readonly number[] | undefined): boolean {
  return b !== undefined && a.length === b.length && a.every((dim, i) => dim === b[i]);
}

// The protocol's encoder writes every element; this refuses what JSON would carry wrongly.
function jsonValues(name: string, tensor: NDArray): unknown[] {
  const refuse = (why: string): never => {
    throw new ClientValueError(
      `Cannot stream over HTTP: input '${name}' ${why}; use a grpc:// URL`,
    );
  };
  switch (tensor.dtype) {
    case "float16":
    case "bfloat16":
      return refuse(`is ${tensor.dtype.toUpperCase()}, which JSON cannot carry`);
    case "bytes":
      for (const element of tensor.data) {
        try {
          strictDecoder.decode(element);
        } catch {
          refuse("has an element that is not UTF-8 text");
        }
      }
      break;
    case "float32":
    case "float64":
      for (const value of tensor.data as Float64Array) {
        if (!Number.isFinite(value)) refuse(`has ${value}, which JSON cannot carry`);
      }
  }
  return ndarrayToJson(name, tensor);
}

/**
 * Encodes a request as a generate request body.
 *
 * @param request The request.
 * @param specs The model's declared inputs.
 * @returns The JSON text.
 * @throws {ClientValueError} When a tensor cannot travel as generate JSON.
 *
 * @example Encode an input and a parameter as a generate body
 * ```ts
 * import { encodeGenerateRequest } from "./http_generate.ts";
 * import { ndarray } from "../tensor/ndarray.ts";
 * import assert from "node:assert/strict";
 *
 * const body = encodeGenerateRequest({
 *   modelName: "m", modelVersion: undefined, id: "7", outputs: [],
 *   inputs: [["n", ndarray([3], [1, 1], { dtype: "int32" })]], parameters: { t: 1 },
 * }, { inputs: [{ name: "n", dtype: "int32", shape: [-1, 1] }], outputs: [] });
 * assert.equal(body, '{"id":"7","parameters":{"t":1},"n":3}');
 * ```
 */
export function encodeGenerateRequest(
  request: TransportInferRequest,
  specs: GenerateSpecs,
): string {
  const body: Record<string, unknown> = { id: request.id, parameters: request.parameters };
  for (const [name, tensor] of request.inputs) {
    if (GENERATE_RESERVED_KEYS.has(name)) {
      throw new ClientValueError(
        `Cannot stream over HTTP: input '${name}' has a name the generate extension reserves`,
      );
    }
    const spec = specs.inputs.find((input) => input.name === name);
    const values = jsonValues(name, tensor);
    if (
      spec !== undefined && !sameShape(tensor.shape, generateShape(spec.shape, values.length))
    ) {
      throw new ClientValueError(
        `Cannot stream over HTTP: input '${name}' has shape [${tensor.shape}], which the generate extension cannot convey for declared shape [${spec.shape}]; use a grpc:// URL`,
      );
    }
    body[name] = generateValue(values);
  }
  return JSON.stringify(body);
}

function outputOf(spec: GenerateTensorSpec, value: unknown): NDArray {
  const values = generateElements(value);
  const shape = generateShape(spec.shape, values.length);
  const fail = (why: string): never => {
    throw new ClientInferenceServerError(
      `Inference failed: output '${spec.name}' in the generate response ${why}`,
    );
  };
  if (shape === undefined) {
    fail(`has ${values.length} elements, which do not fit declared shape [${spec.shape}]`);
  }
  try {
    if (spec.dtype === "int64" || spec.dtype === "uint64") {
      const big = values.map((element) => BigInt(element as number | bigint));
      return ndarray(
        spec.dtype === "int64" ? BigInt64Array.from(big) : BigUint64Array.from(big),
        shape,
      );
    }
    return ndarray(values as never, shape, { dtype: spec.dtype });
  } catch (error) {
    return fail(`cannot be read as ${spec.dtype}: ${(error as Error).message}`);
  }
}

/**
 * Decodes one generate response object (the `data` of an event, or the `/generate` body).
 *
 * @param text The JSON text.
 * @param specs The model's declared outputs.
 * @param status The HTTP status, for errors.
 * @returns The response.
 * @throws {ClientInferenceServerError} For an `error` object or an unreadable response.
 *
 * @example Decode a generate response's output and version
 * ```ts
 * import { decodeGenerateResponse } from "./http_generate.ts";
 * import assert from "node:assert/strict";
 *
 * const response = decodeGenerateResponse(
 *   '{"i":[1,2],"model_name":"m","model_version":"1"}',
 *   { inputs: [], outputs: [{ name: "i", dtype: "int32", shape: [-1] }] },
 * );
 * assert.deepEqual(response.outputs.i?.shape, [2]);
 * assert.equal(response.modelVersion, "1");
 * ```
 */
export function decodeGenerateResponse(
  text: string,
  specs: GenerateSpecs,
  status = 200,
): TransportInferResponse {
  let json: unknown;
  try {
    json = parseJsonExact(text);
  } catch (error) {
    throw new ClientInferenceServerError(
      `Inference failed: the generate response is not JSON: ${(error as Error).message}`,
      { status },
    );
  }
  if (typeof json !== "object" || json === null || Array.isArray(json)) {
    throw new ClientInferenceServerError(
      "Inference failed: the generate response is not a JSON object",
      { status },
    );
  }
  const object = json as Record<string, unknown>;
  const error = object[GENERATE_ERROR_KEY];
  if (typeof error === "string") {
    throw new ClientInferenceServerError(`Inference failed: ${error}`, {
      status,
      serverMessage: error,
    });
  }
  const outputs: Record<string, NDArray> = {};
  const parameters: Record<string, ClientParameterValue> = {};
  for (const [key, value] of Object.entries(object)) {
    if (GENERATE_METADATA_KEYS.has(key)) continue;
    const spec = specs.outputs.find((output) => output.name === key);
    if (spec !== undefined) outputs[key] = outputOf(spec, value);
    else if (typeof value === "string" || typeof value === "boolean") parameters[key] = value;
    else if (typeof value === "number") parameters[key] = value;
    else if (typeof value === "bigint") parameters[key] = Number(value);
  }
  return {
    modelName: String(object["model_name"] ?? ""),
    modelVersion: String(object["model_version"] ?? ""),
    id: typeof object["id"] === "string" ? object["id"] : "",
    parameters,
    outputs,
  };
}
