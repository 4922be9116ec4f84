/**
 * `ModelInferRequest` → protocol-neutral {@linkcode InferenceRequest}, and
 * {@linkcode InferenceResponse} → `ModelInferResponse`, with Triton 2.51's rules for request
 * parameters, raw versus typed contents and output order.
 *
 * @module
 */

import type { ParameterValue } from "../../callable/types.ts";
import type { InferenceRequest, InferenceResponse } from "../../engine/engine.ts";
import { InferenceError } from "../../errors.ts";
import { kserveName } from "../../tensor/dtype.ts";
import { type NDArray, toRawBytes } from "../../tensor/ndarray.ts";
import type { InferParameter, ModelInferRequest, ModelInferResponse } from "../../protocol/grpc_codec.ts";
import { parseDatatype, parseShape, tensorFromContents, tensorFromRaw } from "../../protocol/tensor_contents.ts";

/** The request parameter that asks for a flags-only final response on the stream. */
export const EMPTY_FINAL_PARAMETER = "triton_enable_empty_final_response";

/** The response parameter marking the last response of a request on the stream. */
export const FINAL_RESPONSE_PARAMETER = "triton_final_response";

// Sequence control belongs to sequence batching, which DenoTriton's models do not use; Triton
// ignores it for other models, so it is accepted and dropped.
const SEQUENCE_PARAMETERS = new Set(["sequence_id", "sequence_start", "sequence_end"]);

const SHARED_MEMORY_PARAMETERS = [
  "shared_memory_region",
  "shared_memory_offset",
  "shared_memory_byte_size",
];

function invalid(message: string): InferenceError {
  return new InferenceError(message, { code: "INVALID_ARG" });
}

/**
 * Parses a model version string: empty (or `-1`) is the default version.
 *
 * @param version The version field of a request.
 * @returns The version number, or `undefined` for the default.
 * @throws {InferenceError} (INVALID_ARG) When it is not an integer.
 *
 * @example
 * ```ts
 * import { parseModelVersion } from "./infer_messages.ts";
 * import assert from "node:assert/strict";
 *
 * assert.equal(parseModelVersion(""), undefined);
 * assert.equal(parseModelVersion("2"), 2);
 * assert.throws(() => parseModelVersion("v2"), /Invalid model version: 'v2'/);
 * ```
 */
export function parseModelVersion(version: string | undefined): number | undefined {
  if (version === undefined || version === "" || version === "-1") return undefined;
  if (!/^[0-9]+$/.test(version)) {
    throw invalid(`Invalid model version: '${version}' is not a non-negative integer`);
  }
  return Number(version);
}

/**
 * The value of a decoded `InferParameter` (64-bit integers become numbers).
 *
 * @param parameter The parameter.
 * @returns Its value, or `undefined` when no field is set.
 *
 * @example
 * ```ts
 * import { parameterValue } from "./infer_messages.ts";
 * import assert from "node:assert/strict";
 *
 * assert.equal(parameterValue({ int64_param: "7", parameter_choice: "int64_param" }), 7);
 * ```
 */
export function parameterValue(parameter: InferParameter): ParameterValue | undefined {
  const choice = parameter.parameter_choice ??
    (["bool_param", "int64_param", "string_param", "double_param", "uint64_param"] as const)
      .find((key) => parameter[key] !== undefined);
  switch (choice) {
    case "bool_param":
      return Boolean(parameter.bool_param);
    case "string_param":
      return String(parameter.string_param);
    case "double_param":
      return Number(parameter.double_param);
    case "int64_param":
      return Number(parameter.int64_param);
    case "uint64_param":
      return Number(parameter.uint64_param);
    default:
      return undefined;
  }
}

/**
 * Encodes a parameter value as an `InferParameter` (integers as `int64_param`).
 *
 * @param value The value.
 * @returns The parameter.
 *
 * @example
 * ```ts
 * import { toInferParameter } from "./infer_messages.ts";
 * import assert from "node:assert/strict";
 *
 * assert.deepEqual(toInferParameter(1.5), { double_param: 1.5 });
 * assert.deepEqual(toInferParameter(3), { int64_param: 3 });
 * ```
 */
export function toInferParameter(value: ParameterValue): InferParameter {
  if (typeof value === "boolean") return { bool_param: value };
  if (typeof value === "string") return { string_param: value };
  return Number.isSafeInteger(value) ? { int64_param: value } : { double_param: value };
}

function nonNegativeInteger(
  parameter: InferParameter,
  name: string,
): number {
  const value = parameterValue(parameter);
  const integral = parameter.parameter_choice === "int64_param" ||
    parameter.parameter_choice === "uint64_param";
  if (!integral || typeof value !== "number" || value < 0) {
    throw invalid(
      `Invalid request parameter '${name}': expected a non-negative int64_param or uint64_param`,
    );
  }
  return value;
}

/** Where the request comes from, besides its message. */
export interface InferRequestContext {
  /** String parameters from forwarded headers (gRPC metadata). */
  readonly headers?: Readonly<Record<string, string>>;
  /** Aborted when the client cancels. */
  readonly signal?: AbortSignal;
}

/** The decoded request plus what only the gRPC front end uses. */
export interface DecodedInferRequest {
  /** The protocol-neutral request. */
  readonly request: InferenceRequest;
  /** Whether the client asked for a flags-only final response on the stream. */
  readonly enableEmptyFinalResponse: boolean;
}

/**
 * Turns a decoded `ModelInferRequest` into an {@linkcode InferenceRequest}.
 *
 * - `priority` and `timeout` become request fields; `sequence_*` are dropped.
 * - `triton_*` keys other than `triton_enable_empty_final_response` are rejected.
 * - Everything else (and forwarded headers) becomes a request parameter.
 * - Tensor data comes from `raw_input_contents` (one entry per input) or typed `contents`.
 *
 * @param message The decoded message.
 * @param context Forwarded headers and the cancellation signal.
 * @returns The request and the stream-only flags.
 * @throws {InferenceError} (INVALID_ARG) For malformed requests, (UNSUPPORTED) for shared
 *   memory and classification.
 *
 * @example Raw FP32 input
 * ```ts
 * import { toInferenceRequest } from "./infer_messages.ts";
 * import assert from "node:assert/strict";
 *
 * const { request } = toInferenceRequest({
 *   model_name: "m",
 *   inputs: [{ name: "x", datatype: "FP32", shape: ["1", "1"] }],
 *   raw_input_contents: [new Uint8Array(new Float32Array([2.5]).buffer)],
 *   parameters: { priority: { int64_param: "1", parameter_choice: "int64_param" } },
 * });
 * assert.equal(request.priority, 1);
 * assert.deepEqual([...(request.inputs.get("x")!.data as Float32Array)], [2.5]);
 * ```
 */
export function toInferenceRequest(
  message: ModelInferRequest,
  context: InferRequestContext = {},
): DecodedInferRequest {
  const modelName = message.model_name ?? "";
  const modelVersion = parseModelVersion(message.model_version);
  const parameters: Record<string, ParameterValue> = {};
  let priority: number | undefined;
  let timeoutMicroseconds: number | undefined;
  let enableEmptyFinalResponse = false;
  for (const [name, parameter] of Object.entries(message.parameters ?? {})) {
    if (name === "priority") {
      priority = nonNegativeInteger(parameter, name);
    } else if (name === "timeout") {
      timeoutMicroseconds = nonNegativeInteger(parameter, name);
    } else if (name === EMPTY_FINAL_PARAMETER) {
      const value = parameterValue(parameter);
      if (typeof value !== "boolean") {
        throw invalid(`Invalid request parameter '${name}': expected a bool_param`);
      }
      enableEmptyFinalResponse = value;
    } else if (name.startsWith("triton_")) {
      throw invalid(
        `Invalid request parameter '${name}': parameters starting with 'triton_' are reserved`,
      );
    } else if (!SEQUENCE_PARAMETERS.has(name)) {
      const value = parameterValue(parameter);
      if (value === undefined) {
        throw invalid(`Invalid request parameter '${name}': no value is set`);
      }
      parameters[name] = value;
    }
  }
  for (const [name, value] of Object.entries(context.headers ?? {})) parameters[name] = value;

  const inputsMessage = message.inputs ?? [];
  const raw = message.raw_input_contents ?? [];
  if (raw.length > 0 && raw.length !== inputsMessage.length) {
    throw invalid(
      `Invalid request for model '${modelName}': expected ${inputsMessage.length} raw_input_contents (one per input), got ${raw.length}`,
    );
  }
  const inputs = new Map<string, NDArray>();
  inputsMessage.forEach((input, index) => {
    const what = `input '${input.name}'`;
    if (inputs.has(input.name)) {
      throw invalid(`Invalid request for model '${modelName}': ${what} is given twice`);
    }
    for (const key of SHARED_MEMORY_PARAMETERS) {
      if (input.parameters?.[key] !== undefined) {
        throw new InferenceError(
          `Unsupported parameter '${key}' for ${what}: DenoTriton does not support shared memory`,
          { code: "UNSUPPORTED" },
        );
      }
    }
    const dtype = parseDatatype(input.datatype, what);
    const shape = parseShape(input.shape ?? [], what);
    const contents = input.contents;
    const rawData = raw[index];
    if (rawData !== undefined) {
      if (contents && hasAnyContents(contents)) {
        throw invalid(
          `Invalid data for ${what}: contents must be empty when raw_input_contents is used`,
        );
      }
      inputs.set(input.name, tensorFromRaw(dtype, shape, rawData, what));
    } else {
      inputs.set(input.name, tensorFromContents(dtype, shape, contents ?? {}, what));
    }
  });

  const outputs = message.outputs?.map((output) => {
    for (const key of ["classification", ...SHARED_MEMORY_PARAMETERS]) {
      if (output.parameters?.[key] !== undefined) {
        throw new InferenceError(
          `Unsupported parameter '${key}' for output '${output.name}': DenoTriton does not support it`,
          { code: "UNSUPPORTED" },
        );
      }
    }
    return output.name;
  });

  const request: InferenceRequest = {
    modelName,
    ...(modelVersion !== undefined ? { modelVersion } : {}),
    ...(message.id ? { id: message.id } : {}),
    inputs,
    ...(outputs !== undefined && outputs.length > 0 ? { outputs } : {}),
    parameters,
    ...(priority !== undefined ? { priority } : {}),
    ...(timeoutMicroseconds !== undefined ? { timeoutMicroseconds } : {}),
    ...(context.signal !== undefined ? { signal: context.signal } : {}),
  };
  return { request, enableEmptyFinalResponse };
}

function hasAnyContents(contents: object): boolean {
  return Object.values(contents).some((list) => Array.isArray(list) && list.length > 0);
}

/**
 * Encodes an {@linkcode InferenceResponse} as a `ModelInferResponse`: every output's data goes
 * to `raw_output_contents`, one entry per output, in order.
 *
 * @param response The engine's response.
 * @param extra Extra response parameters (e.g. `triton_final_response` on the stream).
 * @returns The message.
 *
 * @example
 * ```ts
 * import { toInferResponseMessage } from "./infer_messages.ts";
 * import { ndarray } from "../../tensor/ndarray.ts";
 * import assert from "node:assert/strict";
 *
 * const message = toInferResponseMessage({
 *   modelName: "m", modelVersion: "1",
 *   outputs: new Map([["y", ndarray(new Int32Array([1]), [1])]]),
 * });
 * assert.deepEqual(message.outputs, [{ name: "y", datatype: "INT32", shape: [1] }]);
 * assert.deepEqual([...message.raw_output_contents![0]!], [1, 0, 0, 0]);
 * ```
 */
export function toInferResponseMessage(
  response: InferenceResponse,
  extra: Readonly<Record<string, ParameterValue>> = {},
): ModelInferResponse {
  const outputs: NonNullable<ModelInferResponse["outputs"]> = [];
  const raw: Uint8Array[] = [];
  for (const [name, array] of response.outputs) {
    outputs.push({ name, datatype: kserveName(array.dtype), shape: [...array.shape] });
    raw.push(toRawBytes(array));
  }
  const parameters: Record<string, InferParameter> = {};
  for (const [name, value] of Object.entries({ ...response.parameters, ...extra })) {
    parameters[name] = toInferParameter(value);
  }
  return {
    model_name: response.modelName,
    model_version: response.modelVersion,
    ...(response.id ? { id: response.id } : {}),
    ...(Object.keys(parameters).length > 0 ? { parameters } : {}),
    outputs,
    raw_output_contents: raw,
  };
}
