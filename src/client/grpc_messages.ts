/**
 * Client-side conversions between protocol-neutral requests/responses and the gRPC
 * `ModelInferRequest` / `ModelInferResponse` messages (raw tensor contents both ways), over the
 * wire rules in `src/protocol/` that the gRPC front end uses too.
 *
 * @module
 */

import type { ModelInferRequest, ModelInferResponse } from "../protocol/grpc_codec.ts";
import { fromInferParameters, toInferParameters } from "../protocol/infer_parameter.ts";
import { tensorFromContents } from "../protocol/tensor_contents.ts";
import { fromKServe, kserveName } from "../tensor/dtype.ts";
import { fromRawBytes, type NDArray, toRawBytes } from "../tensor/ndarray.ts";
import { ClientInferenceServerError, ClientValueError } from "./errors.ts";
import type {
  ClientParameterValue,
  TransportInferRequest,
  TransportInferResponse,
} from "./transport.ts";

/**
 * Builds a `ModelInferRequest` with every input in `raw_input_contents`.
 *
 * @param request The request.
 * @param extra Extra request parameters (e.g. for streaming).
 * @returns The message.
 *
 * @example Inputs as raw contents, parameters as string_param
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
  let parameters;
  try {
    parameters = toInferParameters({ ...request.parameters, ...extra });
  } catch (error) {
    throw new ClientValueError((error as Error).message, { cause: error });
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

/**
 * Reads a `ModelInferResponse`: raw output contents (views when aligned), or typed contents.
 *
 * @param message The decoded response.
 * @returns The response.
 * @throws {ClientInferenceServerError} When an output is malformed.
 *
 * @example Read a raw FP32 output
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
      try {
        outputs[output.name] = tensorFromContents(
          { dtype, shape },
          output.contents ?? {},
          `output '${output.name}'`,
        );
      } catch (error) {
        // The protocol's message names the output already.
        throw invalid((error as Error).message, error);
      }
    }
  });
  const parameters: Record<string, ClientParameterValue> = fromInferParameters(
    message.parameters,
  );
  return {
    modelName: message.model_name,
    modelVersion: message.model_version,
    id: message.id ?? "",
    parameters,
    outputs,
  };
}
