/**
 * `sample`: turns a function of one request's inputs into an inference callable.
 *
 * @module
 */

import type { InferContext, InferFunc, InferResult, InferReturn, Request } from "../types.ts";
import { convertOutput } from "./helpers.ts";
import type { BatchCallable, BatchOutput } from "./types.ts";
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
 * import { sample } from "./sample.ts";
 * import { ndarray } from "../../tensor/ndarray.ts";
 * import { resolveModelConfig } from "../../config/model_config.ts";
 * import { resolveTensorSpecs } from "../../config/tensor_spec.ts";
 * import type { InferResult } from "../types.ts";
 * import assert from "node:assert/strict";
 *
 * const infer = sample(({ x }) => [ndarray((x!.data as Float64Array).map((v) => v * 2), x!.shape)]);
 * const context = {
 *   model: {
 *     name: "Double",
 *     version: 1,
 *     inputs: resolveTensorSpecs([{ name: "x", dtype: "float64", shape: [2] }], "input"),
 *     outputs: resolveTensorSpecs([{ name: "y", dtype: "float64", shape: [2] }], "output"),
 *     config: resolveModelConfig({ batching: false }),
 *     strict: false,
 *   },
 *   instanceIndex: 0,
 *   device: "cpu",
 * };
 * const request = {
 *   data: { x: ndarray(new Float64Array([1, 2])) },
 *   parameters: {},
 *   requestedOutputNames: ["y"],
 *   signal: new AbortController().signal,
 * };
 * const results = infer([request], context) as InferResult[];
 * assert.equal(results.length, 1);
 * assert.deepEqual([...results[0]!.y!.data], [2, 4]);
 * ```
 */
export function sample(fn: BatchCallable): InferFunc {
  const inner = toFunction(fn, "sample");
  return (requests: Request[], context: InferContext): InferReturn => {
    requireRequests(requests, "sample");
    const first = requests[0];
    if (first === undefined) return [];
    return mapReturn<BatchOutput, InferResult[]>(
      inner({ ...first.data }, context),
      (output) => [convertOutput(output, context?.model)],
    ) as InferReturn;
  };
}
