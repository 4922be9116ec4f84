/**
 * How `ModelClient` turns its calls into transport requests: inputs by position or name, the
 * batch axis added for a sample and stripped from its outputs, parameter and header values
 * checked, and the model's declared tensors attached for the generate extension.
 *
 * @module
 */

import { isNDArray, type NDArray } from "../tensor/ndarray.ts";
import { ClientValueError } from "./errors.ts";
import type { ClientModelConfig, ClientTensorSpec } from "./model_config.ts";
import type { ClientInputs, ClientOutputs, InferOptions } from "./options.ts";
import type {
  ClientParameterValue,
  GenerateTensorSpec,
  TransportInferRequest,
  TransportInferResponse,
} from "./transport.ts";

/**
 * Checks parameter or header values: strings, finite numbers and booleans, non-empty keys.
 *
 * @param values The values (`undefined` for none).
 * @param what Names them in errors: `"parameter"` or `"header"`.
 * @returns The values.
 * @throws {ClientValueError} For a value of another type, or an empty key.
 *
 * @example Accept a number, refuse NaN
 * ```ts
 * import { checkValues } from "./request.ts";
 * import assert from "node:assert/strict";
 *
 * assert.deepEqual(checkValues({ a: 1 }, "parameter"), { a: 1 });
 * assert.throws(() => checkValues({ a: NaN }, "parameter"), /Invalid parameter 'a'/);
 * ```
 */
export function checkValues(
  values: Readonly<Record<string, unknown>> | undefined,
  what: string,
): Record<string, ClientParameterValue> {
  if (values === undefined) return {};
  if (typeof values !== "object" || values === null || Array.isArray(values)) {
    throw new ClientValueError(`Invalid ${what}: expected an object`);
  }
  for (const [key, value] of Object.entries(values)) {
    if (key === "") throw new ClientValueError(`Invalid ${what}: a key is empty`);
    const type = typeof value;
    if (type !== "string" && type !== "boolean" && !(type === "number" && Number.isFinite(value))) {
      throw new ClientValueError(
        `Invalid ${what} '${key}': expected a string, finite number or boolean, got ${
          value === null ? "null" : type
        }`,
      );
    }
  }
  return values as Record<string, ClientParameterValue>;
}

/**
 * Header values as strings.
 *
 * @param values Checked values.
 * @returns The same keys with string values.
 *
 * @example Stringify a number and a boolean
 * ```ts
 * import { stringHeaders } from "./request.ts";
 * import assert from "node:assert/strict";
 *
 * assert.deepEqual(stringHeaders({ n: 1, b: true }), { n: "1", b: "true" });
 * ```
 */
export function stringHeaders(
  values: Readonly<Record<string, ClientParameterValue>>,
): Record<string, string> {
  return Object.fromEntries(Object.entries(values).map(([key, value]) => [key, String(value)]));
}

function declaredSpec(spec: ClientTensorSpec, batching: boolean): GenerateTensorSpec {
  return {
    name: spec.name,
    dtype: spec.dtype,
    shape: batching ? [-1, ...spec.shape] : spec.shape,
  };
}

/** What {@linkcode buildRequest} needs besides the call's inputs and options. */
export interface RequestContext {
  /** The model's config (its inputs' order and its outputs). */
  readonly config: ClientModelConfig;
  /** The model name. */
  readonly modelName: string;
  /** The model version, or `undefined` for the server's choice. */
  readonly modelVersion: string | undefined;
  /** The request id. */
  readonly id: string;
  /** Whether to add a batch axis of 1 to every input (a sample for a batching model). */
  readonly addBatchAxis: boolean;
  /** Names the model in errors, e.g. `model 'AddSub'`. */
  readonly label: string;
}

/**
 * Builds a transport request from a call's inputs and options.
 *
 * @param inputs Positional (declared input order) or named tensors.
 * @param options Parameters and outputs.
 * @param context The model's config, name and version, the id, the batch axis and the model's
 *   label.
 * @returns The request.
 * @throws {ClientValueError} For inputs that are not NDArrays, too many positional inputs, or
 *   bad parameter values.
 *
 * @example A sample for a batching model
 * ```ts
 * import { buildRequest } from "./request.ts";
 * import { parseModelConfig } from "./model_config.ts";
 * import { ndarray } from "../tensor/ndarray.ts";
 * import assert from "node:assert/strict";
 *
 * const config = parseModelConfig({
 *   max_batch_size: 8,
 *   input: [{ name: "x", data_type: "TYPE_FP32", dims: [2] }],
 *   output: [{ name: "y", data_type: "TYPE_FP32", dims: [2] }],
 * });
 * const request = buildRequest([ndarray(new Float32Array([1, 2]))], {}, {
 *   config,
 *   modelName: "m",
 *   modelVersion: undefined,
 *   id: "1",
 *   addBatchAxis: true,
 *   label: "model 'm'",
 * });
 * assert.deepEqual(request.inputs[0]![1].shape, [1, 2]);
 * assert.deepEqual(request.outputs, ["y"]);
 * ```
 */
export function buildRequest(
  inputs: ClientInputs,
  options: InferOptions,
  context: RequestContext,
): TransportInferRequest {
  const { config } = context;
  const pairs: [string, NDArray][] = [];
  if (Array.isArray(inputs)) {
    const positional = inputs as readonly NDArray[];
    if (positional.length > config.inputs.length) {
      throw new ClientValueError(
        `Cannot infer: ${positional.length} positional inputs given but ${context.label} declares ${config.inputs.length}`,
      );
    }
    positional.forEach((tensor, i) => pairs.push([config.inputs[i]!.name, tensor]));
  } else if (typeof inputs === "object" && inputs !== null && !isNDArray(inputs)) {
    pairs.push(...Object.entries(inputs as Readonly<Record<string, NDArray>>));
  } else {
    throw new ClientValueError(
      "Cannot infer: inputs must be an array of NDArrays (declared order) or an object of them by name",
    );
  }
  for (const [name, tensor] of pairs) {
    if (!isNDArray(tensor)) {
      throw new ClientValueError(`Cannot infer: input '${name}' is not an NDArray`);
    }
  }
  const parameters = checkValues(options.parameters, "parameter");
  const wire = pairs.map(([name, tensor]) =>
    [
      name,
      context.addBatchAxis ? { ...tensor, shape: [1, ...tensor.shape] } as NDArray : tensor,
    ] as const
  );
  return {
    modelName: context.modelName,
    modelVersion: context.modelVersion,
    id: context.id,
    inputs: wire,
    outputs: options.outputs ?? config.outputs.map((spec) => spec.name),
    parameters,
    declared: {
      inputs: config.inputs.map((spec) => declaredSpec(spec, config.batching)),
      outputs: config.outputs.map((spec) => declaredSpec(spec, config.batching)),
    },
  };
}

/**
 * The outputs of a response, without the batch axis when the request added one.
 *
 * @param response The response.
 * @param stripBatchAxis Whether to drop each output's first dimension.
 * @returns The outputs by name.
 *
 * @example Drop the batch axis the request added
 * ```ts
 * import { outputsOf } from "./request.ts";
 * import { ndarray } from "../tensor/ndarray.ts";
 * import assert from "node:assert/strict";
 *
 * const response = {
 *   modelName: "m", modelVersion: "1", id: "1", parameters: {},
 *   outputs: { y: ndarray(new Float32Array([1, 2]), [1, 2]) },
 * };
 * assert.deepEqual(outputsOf(response, true).y!.shape, [2]);
 * ```
 */
export function outputsOf(
  response: TransportInferResponse,
  stripBatchAxis: boolean,
): ClientOutputs {
  if (!stripBatchAxis) return response.outputs;
  const outputs: ClientOutputs = {};
  for (const [name, tensor] of Object.entries(response.outputs)) {
    outputs[name] = tensor.shape.length === 0
      ? tensor
      : { ...tensor, shape: tensor.shape.slice(1) } as NDArray;
  }
  return outputs;
}
