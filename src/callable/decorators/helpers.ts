/**
 * Helpers for writing decorators: the batch size of a request and the mapping of positional
 * outputs onto the model's declared outputs.
 *
 * @module
 */

import { TritonRuntimeError, TritonValidationError } from "../../errors.ts";
import { isNDArray, type NDArray } from "../../tensor/ndarray.ts";
import { isInferRequest } from "../request.ts";
import type { InferRequestFields } from "../types.ts";
import type { Inputs } from "./types.ts";
import type { ModelInfo } from "../../config/model_info.ts";

/**
 * The batch size of a request: the axis-0 length of its first input.
 *
 * @param request A request, or its inputs by name.
 * @returns The length of axis 0 of the first input.
 * @throws {TritonRuntimeError} When the request has no inputs, or its first input has no axis.
 *
 * @example Batch size of a request
 * ```ts
 * import { getInferenceRequestBatchSize, inferRequest, ndarray } from "../../../mod.ts";
 * import assert from "node:assert/strict";
 *
 * const request = inferRequest({ x: ndarray(new Float32Array(6), [3, 2]) });
 * assert.equal(getInferenceRequestBatchSize(request), 3);
 * assert.equal(getInferenceRequestBatchSize({ x: ndarray(new Int32Array(2), [2, 1]) }), 2);
 * ```
 */
export function getInferenceRequestBatchSize(
  request: InferRequestFields | Readonly<Inputs>,
): number {
  const inputs: Readonly<Record<string, unknown>> = isInferRequest(request)
    ? request.data
    : request;
  for (const value of Object.values(inputs)) {
    if (!isNDArray(value)) continue;
    const size = value.shape[0];
    if (size === undefined) {
      throw new TritonRuntimeError(
        "Cannot get the batch size of a request: its first input is a scalar without a batch axis",
      );
    }
    return size;
  }
  throw new TritonRuntimeError("Cannot get the batch size of a request: it has no inputs");
}

/**
 * Converts what a batch-level function returned into outputs by name: an object passes through, an
 * array is mapped positionally onto the model's declared outputs (PyTriton's `convert_output`).
 *
 * @param outputs Outputs by name, or an array of tensors in the order of the declared outputs.
 * @param model The bound model, whose declared outputs name positional results.
 * @returns The outputs by name.
 * @throws {TritonValidationError} When an array's length differs from the number of declared
 *   outputs, the value is neither an object nor an array (or is a promise or an iterable), or an
 *   output is not an `NDArray`.
 *
 * @example Positional outputs
 * ```ts
 * import { convertOutput, inferContext, ndarray } from "../../../mod.ts";
 * import assert from "node:assert/strict";
 *
 * const { model } = inferContext({
 *   modelName: "AddSub",
 *   inputs: [{ name: "a", dtype: "float32", shape: [1] }],
 *   outputs: [{ name: "add", dtype: "float32", shape: [1] }, { name: "sub", dtype: "float32", shape: [1] }],
 * });
 * const add = ndarray(new Float32Array([3]), [1, 1]);
 * const sub = ndarray(new Float32Array([1]), [1, 1]);
 * assert.deepEqual(Object.keys(convertOutput([add, sub], model)), ["add", "sub"]);
 * assert.throws(() => convertOutput([add], model), /2 outputs/);
 * ```
 */
export function convertOutput(
  outputs: unknown,
  model: Pick<ModelInfo, "outputs"> | undefined,
): Record<string, NDArray> {
  if (Array.isArray(outputs)) {
    if (model === undefined) {
      throw new TritonValidationError(
        "Cannot map positional outputs: the callable is not bound to a model (no context was given)",
      );
    }
    if (outputs.length !== model.outputs.length) {
      throw new TritonValidationError(
        `Cannot map positional outputs: got ${outputs.length} tensors but the model declares ${model.outputs.length} outputs (${
          model.outputs.map((spec) => spec.name).join(", ")
        })`,
      );
    }
    const named: Record<string, unknown> = {};
    model.outputs.forEach((spec, index) => {
      named[spec.name] = outputs[index];
    });
    checkTensors(named);
    return named as Record<string, NDArray>;
  }
  if (isNDArray(outputs)) {
    throw new TritonValidationError(
      "Unsupported output type: a single NDArray; return outputs by name ({ name: array }) or an array of them",
    );
  }
  if (typeof outputs !== "object" || outputs === null) {
    throw new TritonValidationError(
      `Unsupported output type: ${
        outputs === null ? "null" : typeof outputs
      }; return outputs by name ({ name: array }) or an array of them`,
    );
  }
  const kind = describeNonPlain(outputs);
  if (kind !== undefined) {
    throw new TritonValidationError(
      `Unsupported output type: ${kind}; return outputs by name ({ name: array }) or an array of them`,
    );
  }
  checkTensors(outputs as Record<string, unknown>);
  return outputs as Record<string, NDArray>;
}

/** Names objects that cannot be outputs by name (streams and promises nested where they do not belong). */
function describeNonPlain(value: object): string | undefined {
  const candidate = value as {
    then?: unknown;
    [Symbol.iterator]?: unknown;
    [Symbol.asyncIterator]?: unknown;
  };
  if (typeof candidate.then === "function") return "a promise";
  if (
    typeof candidate[Symbol.iterator] === "function" ||
    typeof candidate[Symbol.asyncIterator] === "function"
  ) {
    return `an iterable (${value.constructor?.name ?? "object"})`;
  }
  return undefined;
}

function checkTensors(outputs: Record<string, unknown>): void {
  for (const [name, value] of Object.entries(outputs)) {
    if (!isNDArray(value)) {
      throw new TritonValidationError(
        `Invalid output '${name}': expected an NDArray, got ${
          value === null
            ? "null"
            : typeof value === "object"
            ? (value.constructor?.name ?? "object")
            : typeof value
        }`,
      );
    }
  }
}
