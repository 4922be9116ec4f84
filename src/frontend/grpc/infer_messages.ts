/**
 * `ModelInferRequest` → protocol-neutral {@linkcode InferenceRequest}, and
 * {@linkcode InferenceResponse} → `ModelInferResponse`, with Triton 2.51's rules for raw versus
 * typed contents and output order; request parameters follow the rules both front ends share
 * (`protocol/request_parameters.ts`).
 *
 * @module
 */

import type { ParameterValue } from "../../callable/types.ts";
import type { InferenceRequest, InferenceResponse } from "../../engine/engine.ts";
import { InferenceError } from "../../errors.ts";
import type { ModelInferRequest, ModelInferResponse } from "../../protocol/grpc_codec.ts";
import { fromInferParameters, toInferParameters } from "../../protocol/infer_parameter.ts";
import { sharedMemoryRef } from "../../protocol/shared_memory.ts";
import { SharedMemoryBinding } from "../shared_memory.ts";
import type { SharedMemoryRegistry } from "../../shm/registry.ts";
import { grpcRequestParameters, type HeaderForwarding } from "../../protocol/request_parameters.ts";
import {
  parseDatatype,
  parseShape,
  tensorFromContents,
  tensorFromRaw,
} from "../../protocol/tensor_contents.ts";
import { kserveName } from "../../tensor/dtype.ts";
import { toRawBytes } from "../../tensor/ndarray.ts";
import { traceContextOf } from "../../protocol/trace_context.ts";
import type { TraceCarrier } from "../../telemetry/otel.ts";
import { hostTensor, type Tensor } from "../../tensor/device_tensor.ts";

/**
 * Parses a model version string: empty (or `-1`) is the default version.
 *
 * @param version The version field of a request.
 * @returns The version number, or `undefined` for the default.
 * @throws {InferenceError} (INVALID_ARG) When it is not an integer.
 *
 * @example The default version, a number, and a bad version
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
    throw InferenceError.invalidArg(
      `Invalid model version: '${version}' is not a non-negative integer`,
    );
  }
  return Number(version);
}

/** Where the request comes from, besides its message. */
export interface InferRequestContext extends HeaderForwarding {
  /**
   * Aborted when the client cancels.
   *
   * @default {undefined}
   */
  signal?: AbortSignal;
  /**
   * The server's system shared-memory regions; without it, tensors in shared memory are
   * refused.
   *
   * @default {undefined}
   */
  sharedMemory?: SharedMemoryRegistry;
}

/** A gRPC inference request: the engine's request plus what only the stream uses. */
export interface GrpcInferRequest {
  /** The protocol-neutral request. */
  readonly request: InferenceRequest;
  /** Whether the client asked for a flags-only final response on the stream. */
  readonly enableEmptyFinalResponse: boolean;
  /** The shared-memory regions the request uses; release them once it is answered. */
  readonly sharedMemory: SharedMemoryBinding;
}

/**
 * Turns a decoded `ModelInferRequest` into an {@linkcode InferenceRequest}.
 *
 * - Request parameters and forwarded metadata follow {@linkcode grpcRequestParameters}.
 * - Tensor data comes from `raw_input_contents` (one entry per input) or typed `contents`.
 *
 * @param message The decoded message.
 * @param context Metadata to forward, the forward pattern and the cancellation signal.
 * @returns The request and the stream-only flags.
 * @throws {InferenceError} (INVALID_ARG) For malformed requests or shared-memory parameters,
 *   (NOT_FOUND) for unknown regions, (UNSUPPORTED) for classification.
 *
 * @example Raw FP32 input
 * ```ts
 * import { toInferenceRequest } from "./infer_messages.ts";
 * import { hostTensor } from "../../tensor/device_tensor.ts";
 * import assert from "node:assert/strict";
 *
 * const { request } = toInferenceRequest({
 *   model_name: "m",
 *   inputs: [{ name: "x", datatype: "FP32", shape: ["1", "1"] }],
 *   raw_input_contents: [new Uint8Array(new Float32Array([2.5]).buffer)],
 *   parameters: { priority: { int64_param: "1", parameter_choice: "int64_param" } },
 * });
 * assert.equal(request.priority, 1);
 * assert.deepEqual([...(hostTensor(request.inputs.get("x")!, "x").data as Float32Array)], [2.5]);
 * ```
 */
export function toInferenceRequest(
  message: ModelInferRequest,
  context: InferRequestContext = {},
): GrpcInferRequest {
  const modelName = message.model_name ?? "";
  const modelVersion = parseModelVersion(message.model_version);
  const { parameters, priority, timeoutMicroseconds, enableEmptyFinalResponse, sequence } =
    grpcRequestParameters(message.parameters, context);

  const inputsMessage = message.inputs ?? [];
  const raw = message.raw_input_contents ?? [];
  // Each input's parameters, decoded once: a parameter with no value set is no parameter, here
  // and for sharedMemoryRef() below. Inputs in shared memory take no raw entry (Triton counts only
  // the others).
  const inputParameters = inputsMessage.map((input) =>
    input.parameters === undefined ? undefined : fromInferParameters(input.parameters)
  );
  const rawInputs = inputParameters.filter((p) => p?.["shared_memory_region"] === undefined).length;
  if (raw.length > 0 && raw.length !== rawInputs) {
    throw InferenceError.invalidArg(
      `Invalid request for model '${modelName}': expected ${rawInputs} raw_input_contents (one per input${
        rawInputs === inputsMessage.length ? "" : " not in shared memory"
      }), got ${raw.length}`,
    );
  }
  const sharedMemory = new SharedMemoryBinding(context.sharedMemory);
  try {
    return decodeTensors(message, inputParameters, context, sharedMemory, raw, modelName, {
      modelVersion,
      parameters,
      priority,
      timeoutMicroseconds,
      enableEmptyFinalResponse,
      sequence,
    });
  } catch (error) {
    sharedMemory.release();
    throw error;
  }
}

interface DecodedHead {
  modelVersion: number | undefined;
  parameters: InferenceRequest["parameters"];
  priority: number | undefined;
  timeoutMicroseconds: number | undefined;
  enableEmptyFinalResponse: boolean;
  sequence: InferenceRequest["sequence"];
}

function decodeTensors(
  message: ModelInferRequest,
  inputParameters: readonly (Readonly<Record<string, unknown>> | undefined)[],
  context: InferRequestContext,
  sharedMemory: SharedMemoryBinding,
  raw: readonly Uint8Array[],
  modelName: string,
  head: DecodedHead,
): GrpcInferRequest {
  const {
    modelVersion,
    parameters,
    priority,
    timeoutMicroseconds,
    enableEmptyFinalResponse,
    sequence,
  } = head;
  const inputsMessage = message.inputs ?? [];
  const inputs = new Map<string, Tensor>();
  let rawIndex = 0;
  inputsMessage.forEach((input, index) => {
    const what = `input '${input.name}'`;
    if (inputs.has(input.name)) {
      throw InferenceError.invalidArg(
        `Invalid request for model '${modelName}': ${what} is given twice`,
      );
    }
    const dtype = parseDatatype(input.datatype, what);
    const shape = parseShape(input.shape ?? [], what);
    const contents = input.contents;
    const shm = sharedMemoryRef(inputParameters[index], what);
    if (shm !== undefined) {
      if (contents && hasAnyContents(contents)) {
        throw InferenceError.invalidArg(
          `unexpected 'content' provided when using shared memory for input tensor '${input.name}' for model '${modelName}'`,
        );
      }
      inputs.set(input.name, sharedMemory.input(input.name, { dtype, shape }, shm));
      return;
    }
    const rawData = raw[rawIndex++];
    if (rawData !== undefined) {
      if (contents && hasAnyContents(contents)) {
        throw InferenceError.invalidArg(
          `Invalid data for ${what}: contents must be empty when raw_input_contents is used`,
        );
      }
      inputs.set(input.name, tensorFromRaw({ dtype, shape }, rawData, what));
    } else {
      inputs.set(input.name, tensorFromContents({ dtype, shape }, contents ?? {}, what));
    }
  });

  const outputs = message.outputs?.map((output) => {
    if (output.parameters?.["classification"] !== undefined) {
      throw InferenceError.unsupported(
        `Unsupported parameter 'classification' for output '${output.name}': DenoTriton does not support it`,
      );
    }
    const shm = sharedMemoryRef(
      output.parameters === undefined ? undefined : fromInferParameters(output.parameters),
      `output '${output.name}'`,
    );
    if (shm !== undefined) sharedMemory.output(output.name, shm);
    return output.name;
  });

  const request: InferenceRequest = {
    modelName,
    ...(modelVersion !== undefined ? { modelVersion } : {}),
    ...(message.id ? { id: message.id } : {}),
    inputs,
    ...(outputs !== undefined && outputs.length > 0 ? { outputs } : {}),
    ...sharedMemory.requestFields(),
    parameters,
    ...(priority !== undefined ? { priority } : {}),
    ...(timeoutMicroseconds !== undefined ? { timeoutMicroseconds } : {}),
    ...(sequence !== undefined ? { sequence } : {}),
    ...(context.signal !== undefined ? { signal: context.signal } : {}),
    ...traceContextField(context.headers),
  };
  return { request, enableEmptyFinalResponse, sharedMemory };
}

const EMPTY = new Uint8Array(0);

function hasAnyContents(contents: object): boolean {
  return Object.values(contents).some((list) => Array.isArray(list) && list.length > 0);
}

/**
 * Encodes an {@linkcode InferenceResponse} as a `ModelInferResponse`: every output's data goes
 * to `raw_output_contents`, one entry per output, in order; an output written into shared
 * memory gets an empty entry, as in Triton.
 *
 * @param response The engine's response.
 * @param extra Extra response parameters (e.g. `triton_final_response` on the stream).
 * @param inSharedMemory Outputs written into shared memory.
 * @returns The message.
 *
 * @example An INT32 output as raw contents
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
  inSharedMemory?: ReadonlySet<string>,
): ModelInferResponse {
  const outputs: NonNullable<ModelInferResponse["outputs"]> = [];
  const raw: Uint8Array[] = [];
  for (const [name, array] of response.outputs) {
    outputs.push({ name, datatype: kserveName(array.dtype), shape: [...array.shape] });
    raw.push(
      inSharedMemory?.has(name) ? EMPTY : toRawBytes(hostTensor(array, `output '${name}'`)),
    );
  }
  const parameters = toInferParameters({ ...response.parameters, ...extra });
  return {
    model_name: response.modelName,
    model_version: response.modelVersion,
    ...(response.id ? { id: response.id } : {}),
    ...(Object.keys(parameters).length > 0 ? { parameters } : {}),
    outputs,
    raw_output_contents: raw,
  };
}

// The client's W3C trace context, from its metadata (the first value of each key).
function traceContextField(
  metadata: Iterable<readonly [string, string]> | undefined,
): { traceContext?: TraceCarrier } {
  if (metadata === undefined) return {};
  let traceparent: string | undefined;
  let tracestate: string | undefined;
  for (const [key, value] of metadata) {
    if (key === "traceparent") traceparent ??= value;
    else if (key === "tracestate") tracestate ??= value;
  }
  const traceContext = traceContextOf((name) => name === "traceparent" ? traceparent : tracestate);
  return traceContext === undefined ? {} : { traceContext };
}
