/**
 * Client-side conversions between protocol-neutral requests/responses and the gRPC
 * `ModelInferRequest` / `ModelInferResponse` messages (raw tensor contents both ways).
 *
 * @module
 */

import type {
  InferParameter,
  InferTensorContents,
  ModelInferRequest,
  ModelInferResponse,
} from "../protocol/grpc_codec.ts";
import { fromKServe, kserveName } from "../tensor/dtype.ts";
import { fromRawBytes, type NDArray, ndarray, toRawBytes } from "../tensor/ndarray.ts";
import { ClientInferenceServerError, ClientValueError } from "./errors.ts";
import type {
  ClientParameterValue,
  TransportInferRequest,
  TransportInferResponse,
} from "./transport.ts";

/** The response parameter marking the last response of a request on the stream. */
export const FINAL_RESPONSE_PARAMETER = "triton_final_response";

/** The request parameter asking for a flags-only final response on the stream. */
export const EMPTY_FINAL_PARAMETER = "triton_enable_empty_final_response";

/**
 * Turns a parameter value into an `InferParameter`: strings, booleans, integers (int64) and
 * other numbers (double).
 *
 * @param key The parameter name, for errors.
 * @param value The value.
 * @returns The message.
 * @throws {ClientValueError} For other values.
 *
 * @example
 * ```ts
 * import { toInferParameter } from "./grpc_messages.ts";
 * import assert from "node:assert/strict";
 *
 * assert.deepEqual(toInferParameter("k", 3), { int64_param: 3 });
 * assert.deepEqual(toInferParameter("k", 0.5), { double_param: 0.5 });
 * assert.deepEqual(toInferParameter("k", "x"), { string_param: "x" });
 * ```
 */
export function toInferParameter(key: string, value: ClientParameterValue): InferParameter {
  switch (typeof value) {
    case "string":
      return { string_param: value };
    case "boolean":
      return { bool_param: value };
    case "number":
      return Number.isSafeInteger(value) ? { int64_param: value } : { double_param: value };
    default:
      throw new ClientValueError(
        `Invalid parameter '${key}': expected a string, number or boolean`,
      );
  }
}

/**
 * Reads an `InferParameter` as decoded by the codec (64-bit integers arrive as strings).
 *
 * @param parameter The decoded message.
 * @returns Its value.
 *
 * @example
 * ```ts
 * import { fromInferParameter } from "./grpc_messages.ts";
 * import assert from "node:assert/strict";
 *
 * assert.equal(fromInferParameter({ int64_param: "7", parameter_choice: "int64_param" }), 7);
 * assert.equal(fromInferParameter({ bool_param: true, parameter_choice: "bool_param" }), true);
 * ```
 */
export function fromInferParameter(parameter: InferParameter): ClientParameterValue {
  switch (parameter.parameter_choice) {
    case "bool_param":
      return parameter.bool_param ?? false;
    case "int64_param":
      return Number(parameter.int64_param ?? 0);
    case "uint64_param":
      return Number(parameter.uint64_param ?? 0);
    case "double_param":
      return parameter.double_param ?? 0;
    default:
      return parameter.string_param ?? "";
  }
}

/**
 * Builds a `ModelInferRequest` with every input in `raw_input_contents`.
 *
 * @param request The request.
 * @param extra Extra request parameters (e.g. for streaming).
 * @returns The message.
 *
 * @example
 * ```ts
 * import { toModelInferRequest } from "./grpc_messages.ts";
 * import { ndarray } from "../tensor/ndarray.ts";
 * import assert from "node:assert/strict";
 *
 * const message = toModelInferRequest({
 *   modelName: "m", modelVersion: "2", id: "1", parameters: { k: "v" },
 *   inputs: [["x", ndarray(new Int16Array([1, 256]), [1, 2])]], outputs: ["y"],
 * });
 * assert.deepEqual(message.inputs, [{ name: "x", datatype: "INT16", shape: [1, 2] }]);
 * assert.deepEqual([...message.raw_input_contents![0]!], [1, 0, 0, 1]);
 * assert.deepEqual(message.outputs, [{ name: "y" }]);
 * assert.deepEqual(message.parameters, { k: { string_param: "v" } });
 * ```
 */
export function toModelInferRequest(
  request: TransportInferRequest,
  extra: Readonly<Record<string, ClientParameterValue>> = {},
): ModelInferRequest {
  const parameters: Record<string, InferParameter> = {};
  for (const [key, value] of Object.entries({ ...request.parameters, ...extra })) {
    parameters[key] = toInferParameter(key, value);
  }
  return {
    model_name: request.modelName,
    model_version: request.modelVersion ?? "",
    id: request.id,
    parameters,
    inputs: request.inputs.map(([name, tensor]) => ({
      name,
      datatype: kserveName(tensor.dtype),
      shape: [...tensor.shape],
    })),
    outputs: request.outputs.map((name) => ({ name })),
    raw_input_contents: request.inputs.map(([, tensor]) => toRawBytes(tensor)),
  };
}

function invalid(why: string, cause?: unknown): ClientInferenceServerError {
  return new ClientInferenceServerError(
    `Invalid inference response from server: ${why}`,
    cause === undefined ? {} : { cause },
  );
}

const CONTENT_FIELDS = [
  "bool_contents",
  "int_contents",
  "int64_contents",
  "uint_contents",
  "uint64_contents",
  "fp32_contents",
  "fp64_contents",
  "bytes_contents",
] as const;

function fromContents(
  name: string,
  dtype: NDArray["dtype"],
  shape: number[],
  contents: InferTensorContents,
): NDArray {
  for (const field of CONTENT_FIELDS) {
    const values = contents[field];
    if (values === undefined || values.length === 0) continue;
    const items = field === "int64_contents" || field === "uint64_contents"
      ? (values as (string | number | bigint)[]).map((v) => BigInt(v))
      : values;
    try {
      return ndarray(items as unknown[], shape, { dtype });
    } catch (error) {
      throw invalid(`output '${name}': ${(error as Error).message}`, error);
    }
  }
  return ndarray([], shape, { dtype });
}

/**
 * Reads a `ModelInferResponse`: raw output contents (views when aligned), or typed contents.
 *
 * @param message The decoded response.
 * @returns The response.
 * @throws {ClientInferenceServerError} When an output is malformed.
 *
 * @example
 * ```ts
 * import { fromModelInferResponse } from "./grpc_messages.ts";
 * import assert from "node:assert/strict";
 *
 * const response = fromModelInferResponse({
 *   model_name: "m", model_version: "1", id: "1",
 *   outputs: [{ name: "y", datatype: "FP32", shape: ["1"] }],
 *   raw_output_contents: [new Uint8Array([0, 0, 128, 63])],
 * });
 * assert.deepEqual(response.outputs.y?.shape, [1]);
 * assert.deepEqual([...(response.outputs.y!.data as Float32Array)], [1]);
 * ```
 */
export function fromModelInferResponse(message: ModelInferResponse): TransportInferResponse {
  const outputs: Record<string, NDArray> = {};
  const raw = message.raw_output_contents ?? [];
  (message.outputs ?? []).forEach((output, index) => {
    const dtype = fromKServe(output.datatype);
    if (dtype === undefined) {
      throw invalid(
        `output '${output.name}' has unknown datatype ${JSON.stringify(output.datatype)}`,
      );
    }
    const shape = output.shape.map(Number);
    if (shape.some((dim) => !Number.isInteger(dim) || dim < 0)) {
      throw invalid(`output '${output.name}' has a bad shape [${output.shape}]`);
    }
    const bytes = raw[index];
    if (raw.length > 0 && bytes !== undefined) {
      try {
        outputs[output.name] = fromRawBytes(dtype, shape, bytes);
      } catch (error) {
        throw invalid(`output '${output.name}': ${(error as Error).message}`, error);
      }
    } else {
      outputs[output.name] = fromContents(output.name, dtype, shape, output.contents ?? {});
    }
  });
  const parameters: Record<string, ClientParameterValue> = {};
  for (const [key, value] of Object.entries(message.parameters ?? {})) {
    parameters[key] = fromInferParameter(value);
  }
  return {
    modelName: message.model_name,
    modelVersion: message.model_version,
    id: message.id ?? "",
    parameters,
    outputs,
  };
}
