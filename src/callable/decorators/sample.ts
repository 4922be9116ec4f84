/**
 * `sample`: turns a function of one request's inputs into an inference callable.
 *
 * @module
 */

import type {
  InferContext,
  InferFunc,
  InferRequest,
  InferResult,
  InferReturn,
  Tensors,
} from "../types.ts";
import { convertOutput } from "./helpers.ts";
import type { BatchCallable, BatchOutput, Inputs } from "./types.ts";
import { mapReturn, requireRequests, toFunction } from "./_util.ts";

/**
 * Wraps a function of one request's inputs into an inference callable (PyTriton's `@sample`), for
 * models without batching: the function receives the inputs of the **first** request by name
 * and the context, and its result (outputs by name, or an array mapped onto the declared outputs;
 * possibly a promise or a generator) becomes a one-element result list. Further requests are
 * ignored, as in PyTriton; an engine hands non-batching models one request at a time.
 *
 * @param fn The function, or an object with an `infer` method.
 * @returns An inference callable over requests.
 * @throws {TritonValidationError} (at call time) When a positional output array does not match
 *   the declared outputs.
 *
 * @example Double one request's input
 * ```ts
 * import {
 *   inferContext,
 *   inferRequest,
 *   type InferResult,
 *   map,
 *   type NDArray,
 *   ndarray,
 *   sample,
 * } from "../../../mod.ts";
 * import assert from "node:assert/strict";
 *
 * const infer = sample(({ x }: { x: NDArray<"float64"> }) => [map(x, (v) => v * 2)]);
 * const context = inferContext({
 *   modelName: "Double",
 *   inputs: [{ name: "x", dtype: "float64", shape: [2] }],
 *   outputs: [{ name: "y", dtype: "float64", shape: [2] }],
 *   config: { batching: false },
 * });
 * const results = infer([inferRequest({ x: ndarray(new Float64Array([1, 2])) })], context);
 * assert.equal((results as InferResult[]).length, 1);
 * assert.deepEqual([...(results as InferResult[])[0]?.y?.data ?? []], [2, 4]);
 * ```
 */
export function sample<I extends Inputs, O extends Tensors>(
  fn: BatchCallable<I, O>,
): InferFunc<I, O, InferResult<O>>;
/**
 * Wraps a function of one request's inputs that returns positional outputs, or outputs of types
 * not known at compile time, into an inference callable; see the form above.
 *
 * @param fn The function, or an object with an `infer` method.
 * @returns An inference callable over requests.
 */
export function sample<I extends Inputs, O extends Tensors = Tensors>(
  fn: BatchCallable<I, BatchOutput>,
): InferFunc<I, O>;
export function sample(fn: BatchCallable): InferFunc {
  const inner = toFunction(fn, "sample");
  return (requests: InferRequest[], context: InferContext): InferReturn => {
    requireRequests(requests, "sample");
    const first = requests[0];
    if (first === undefined) return [];
    return mapReturn<BatchOutput, InferResult[]>(
      inner({ ...first.data }, context),
      (output) => [convertOutput(output, context?.model)],
    ) as InferReturn;
  };
}
