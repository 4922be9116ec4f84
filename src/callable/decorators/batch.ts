/**
 * `batch`: turns a function of batched inputs into an inference callable over requests.
 *
 * @module
 */

import { TritonRuntimeError, TritonValidationError } from "../../errors.ts";
import { concatBatch, type NDArray, sliceBatch } from "../../tensor/ndarray.ts";
import type {
  InferContext,
  InferFunc,
  InferRequest,
  InferResult,
  InferReturn,
  Tensors,
} from "../types.ts";
import { convertOutput, getInferenceRequestBatchSize } from "./helpers.ts";
import type { BatchCallable, BatchOutput, Inputs } from "./types.ts";
import { mapReturn, requireRequests, toFunction } from "./_util.ts";

function sortedNames(request: InferRequest): string[] {
  return Object.keys(request.data).sort();
}

/** Whether a request carries exactly the inputs named (no sorting: this runs per request). */
function hasInputs(request: InferRequest, names: readonly string[]): boolean {
  const data = request.data;
  let count = 0;
  for (const name in data) {
    if (!Object.hasOwn(data, name)) continue;
    count++;
  }
  if (count !== names.length) return false;
  for (const name of names) if (!Object.hasOwn(data, name)) return false;
  return true;
}

function splitOutputs(
  output: BatchOutput,
  requests: readonly InferRequest[],
  sizes: readonly number[],
  total: number,
  context: InferContext | undefined,
): InferResult[] {
  const named = convertOutput(output, context?.model);
  const outputs = Object.entries(named);
  const mismatched = outputs.filter(([, tensor]) => tensor.shape[0] !== total);
  if (mismatched.length > 0) {
    throw new TritonRuntimeError(
      `Received output tensors with different batch sizes: ${
        mismatched.map(([name, tensor]) => `${name}: [${tensor.shape}]`).join(", ")
      }; expected batch size: ${total}`,
    );
  }
  // A batch of one request is that request's result: nothing to split (a copy of the object, so
  // that the result is not the function's own).
  if (requests.length === 1) return [{ ...named }];
  const results: InferResult[] = new Array(requests.length);
  let start = 0;
  for (let index = 0; index < requests.length; index++) {
    const size = sizes[index]!;
    const result: Record<string, NDArray> = {};
    for (const [name, tensor] of outputs) result[name] = sliceBatch(tensor, start, start + size);
    results[index] = result;
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
 * Typed by the model: inside `bind()` (or with an `InferFunc<I, O>` annotation) the function's
 * inputs are the declared inputs with their dtypes, and its outputs are checked against the
 * declared outputs. Positional outputs are checked at run time only.
 *
 * @example Add two inputs over a batch of requests
 * ```ts
 * import {
 *   batch,
 *   inferContext,
 *   type InferFunc,
 *   inferRequest,
 *   type InferResult,
 *   ndarray,
 *   type TensorsOf,
 *   zip,
 * } from "../../../mod.ts";
 * import assert from "node:assert/strict";
 *
 * const model = {
 *   modelName: "Add",
 *   inputs: [{ name: "a", dtype: "float32", shape: [1] }, { name: "b", dtype: "float32", shape: [1] }],
 *   outputs: [{ name: "sum", dtype: "float32", shape: [1] }],
 *   config: { maxBatchSize: 8 },
 * } as const;
 * type Inputs = TensorsOf<typeof model.inputs>;
 * type Outputs = TensorsOf<typeof model.outputs>;
 * const infer: InferFunc<Inputs, Outputs> = batch(({ a, b }) => ({ sum: zip(a, b, (x, y) => x + y) }));
 * const request = (a: number[], b: number[]) =>
 *   inferRequest({
 *     a: ndarray(new Float32Array(a), [a.length, 1]),
 *     b: ndarray(new Float32Array(b), [b.length, 1]),
 *   });
 * const results = infer([request([1, 2], [10, 20]), request([3], [30])], inferContext(model));
 * const [first, second] = results as InferResult[];
 * assert.deepEqual([...first?.sum?.data ?? []], [11, 22]);
 * assert.deepEqual(second?.sum?.shape, [1, 1]);
 * assert.deepEqual([...second?.sum?.data ?? []], [33]);
 * ```
 */
export function batch<I extends Inputs, O extends Tensors>(
  fn: BatchCallable<I, O>,
): InferFunc<I, O, InferResult<O>>;
/**
 * Wraps a function of batched inputs that returns positional outputs (an array of tensors in the
 * order of the declared outputs, possibly in a promise or a generator), or outputs of types not
 * known at compile time, into an inference callable; see the form above.
 *
 * @param fn The batch-level function, or an object with an `infer` method.
 * @returns An inference callable over requests.
 */
export function batch<I extends Inputs, O extends Tensors = Tensors>(
  fn: BatchCallable<I, BatchOutput>,
): InferFunc<I, O>;
export function batch(fn: BatchCallable): InferFunc {
  const inner = toFunction(fn, "batch");
  return (requests: InferRequest[], context: InferContext): InferReturn => {
    requireRequests(requests, "batch");
    if (requests.length === 0) return [];
    const names = Object.keys(requests[0]!.data);
    for (let index = 1; index < requests.length; index++) {
      const request = requests[index]!;
      if (!hasInputs(request, names)) {
        throw new TritonValidationError(
          `Cannot batch requests with different sets of inputs: request 0 has [${
            sortedNames(requests[0]!)
          }], request ${index} has [${sortedNames(request)}]`,
        );
      }
    }
    const inputs: Record<string, NDArray> = {};
    const column: NDArray[] = new Array(requests.length);
    for (const name of names) {
      for (let index = 0; index < requests.length; index++) {
        column[index] = requests[index]!.data[name]!;
      }
      inputs[name] = concatBatch(column);
    }
    const sizes: number[] = new Array(requests.length);
    let total = 0;
    for (let index = 0; index < requests.length; index++) {
      total += sizes[index] = getInferenceRequestBatchSize(requests[index]!);
    }
    return mapReturn<BatchOutput, InferResult[]>(
      inner(inputs, context),
      (output) => splitOutputs(output, requests, sizes, total, context),
    ) as InferReturn;
  };
}
