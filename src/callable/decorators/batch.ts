/**
 * `batch`: turns a function of batched inputs into an inference callable over requests.
 *
 * @module
 */

import { TritonRuntimeError, TritonValidationError } from "../../errors.ts";
import { concatBatch, type NDArray, sliceBatch } from "../../tensor/ndarray.ts";
import type { InferContext, InferFunc, InferResult, InferReturn, Request } from "../types.ts";
import { convertOutput, getInferenceRequestBatchSize } from "./helpers.ts";
import type { BatchCallable, BatchOutput } from "./types.ts";
import { mapReturn, requireRequests, toFunction } from "./_util.ts";

function sortedNames(request: Request): string[] {
  return Object.keys(request.data).sort();
}

function splitOutputs(
  output: BatchOutput,
  requests: readonly Request[],
  sizes: readonly number[],
  total: number,
  context: InferContext | undefined,
): InferResult[] {
  const outputs = convertOutput(output, context?.model);
  const mismatched = Object.entries(outputs).filter(([, tensor]) => tensor.shape[0] !== total);
  if (mismatched.length > 0) {
    throw new TritonRuntimeError(
      `Received output tensors with different batch sizes: ${
        mismatched.map(([name, tensor]) => `${name}: [${tensor.shape}]`).join(", ")
      }; expected batch size: ${total}`,
    );
  }
  const results: InferResult[] = [];
  let start = 0;
  for (let index = 0; index < requests.length; index++) {
    const size = sizes[index]!;
    const result: Record<string, NDArray> = {};
    for (const [name, tensor] of Object.entries(outputs)) {
      result[name] = sliceBatch(tensor, start, start + size);
    }
    results.push(result);
    start += size;
  }
  return results;
}

/**
 * Wraps a function of batched inputs into an inference callable (PyTriton's `@batch`).
 *
 * Every request must carry the same set of inputs (put `groupByKeys` above when some are
 * optional). Each input is concatenated along axis 0 and the function receives them by name, with
 * the context as second argument. It returns outputs by name, or an array mapped positionally
 * onto the model's declared outputs; a promise of either; or a (async) generator of either for
 * decoupled models, each step split separately. Every output's axis 0 must equal the total batch
 * size; results are split back by each request's batch size (axis 0 of its first input).
 *
 * Request parameters and abort signals do not reach the wrapped function (as in PyTriton): read
 * them in an undecorated callable or a request-level wrapper above `batch`.
 *
 * @param fn The batch-level function, or an object with an `infer` method.
 * @returns An inference callable over requests.
 * @throws {TritonValidationError} (at call time) When requests carry different sets of inputs, or
 *   a positional output array does not match the declared outputs.
 * @throws {TritonRuntimeError} (at call time) When outputs' axis 0 differs from the total batch
 *   size, naming the offending outputs.
 *
 * @example Add two inputs over a batch of requests
 * ```ts
 * import { batch } from "./batch.ts";
 * import { ndarray } from "../../tensor/ndarray.ts";
 * import { resolveModelConfig } from "../../config/model_config.ts";
 * import { resolveTensorSpecs } from "../../config/tensor_spec.ts";
 * import type { InferResult, Request } from "../types.ts";
 * import assert from "node:assert/strict";
 *
 * const infer = batch(({ a, b }) => {
 *   const x = a!.data as Float32Array;
 *   const y = b!.data as Float32Array;
 *   return { sum: { dtype: "float32", shape: a!.shape, data: x.map((v, i) => v + y[i]!) } };
 * });
 * const request = (a: number[], b: number[]): Request => ({
 *   data: {
 *     a: ndarray(new Float32Array(a), [a.length, 1]),
 *     b: ndarray(new Float32Array(b), [b.length, 1]),
 *   },
 *   parameters: {},
 *   requestedOutputNames: ["sum"],
 *   signal: new AbortController().signal,
 * });
 * const context = {
 *   model: {
 *     name: "Add",
 *     version: 1,
 *     inputs: resolveTensorSpecs([
 *       { name: "a", dtype: "float32", shape: [1] },
 *       { name: "b", dtype: "float32", shape: [1] },
 *     ], "input"),
 *     outputs: resolveTensorSpecs([{ name: "sum", dtype: "float32", shape: [1] }], "output"),
 *     config: resolveModelConfig({ maxBatchSize: 8 }),
 *     strict: false,
 *   },
 *   instanceIndex: 0,
 *   device: "cpu",
 * };
 * const results = infer([request([1, 2], [10, 20]), request([3], [30])], context) as InferResult[];
 * assert.deepEqual([...results[0]!.sum!.data], [11, 22]);
 * assert.deepEqual(results[1]!.sum!.shape, [1, 1]);
 * assert.deepEqual([...results[1]!.sum!.data], [33]);
 * ```
 */
export function batch(fn: BatchCallable): InferFunc {
  const inner = toFunction(fn, "batch");
  return (requests: Request[], context: InferContext): InferReturn => {
    requireRequests(requests, "batch");
    if (requests.length === 0) return [];
    const names = sortedNames(requests[0]!);
    requests.forEach((request, index) => {
      const other = sortedNames(request);
      if (other.length !== names.length || other.some((name, i) => name !== names[i])) {
        throw new TritonValidationError(
          `Cannot batch requests with different sets of inputs: request 0 has [${names}], request ${index} has [${other}]`,
        );
      }
    });
    const inputs: Record<string, NDArray> = {};
    for (const name of Object.keys(requests[0]!.data)) {
      inputs[name] = concatBatch(requests.map((request) => request.data[name]!));
    }
    const sizes = requests.map((request) => getInferenceRequestBatchSize(request));
    const total = sizes.reduce((sum, size) => sum + size, 0);
    return mapReturn<BatchOutput, InferResult[]>(
      inner(inputs, context),
      (output) => splitOutputs(output, requests, sizes, total, context),
    ) as InferReturn;
  };
}
