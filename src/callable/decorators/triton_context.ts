/**
 * `tritonContext`: hands the call's context to a function as the `tritonContext` input.
 *
 * @module
 */

import type { InferContext, InferFunc, InferReturn, Request } from "../types.ts";
import type {
  BatchCallable,
  BatchFunc,
  BatchReturn,
  ContextInputs,
  Inputs,
  RequestCallable,
} from "./types.ts";
import { CONTEXT_KEY, requireModel, toFunction } from "./_util.ts";

/**
 * Wraps a batch-level function so its inputs object also carries `tritonContext`: the call's
 * {@linkcode InferContext} (model name, declared tensors, resolved configuration), like
 * PyTriton's `@triton_context`. Place it last (innermost). On a list of requests the context is
 * already the second argument, so the function is called unchanged.
 *
 * TypeScript picks the batch-level form for an unannotated function; annotate the parameter
 * (`(requests: Request[]) => ...`) for the request-level form.
 *
 * @param fn The function, or an object with an `infer` method.
 * @returns A function of the same level as `fn`.
 * @throws {TritonValidationError} (at call time) When called without a context (not bound).
 *
 * @example Read the model configuration
 * ```ts
 * import { tritonContext } from "./triton_context.ts";
 * import { ndarray } from "../../tensor/ndarray.ts";
 * import { resolveModelConfig } from "../../config/model_config.ts";
 * import { resolveTensorSpecs } from "../../config/tensor_spec.ts";
 * import assert from "node:assert/strict";
 *
 * let maxBatchSize = 0;
 * const infer = tritonContext(({ x, tritonContext }) => {
 *   maxBatchSize = tritonContext.model.config.maxBatchSize;
 *   return { y: x! };
 * });
 * const context = {
 *   model: {
 *     name: "Echo",
 *     version: 1,
 *     inputs: resolveTensorSpecs([{ name: "x", dtype: "int32", shape: [1] }], "input"),
 *     outputs: resolveTensorSpecs([{ name: "y", dtype: "int32", shape: [1] }], "output"),
 *     config: resolveModelConfig({ maxBatchSize: 32 }),
 *     strict: false,
 *   },
 *   instanceIndex: 0,
 *   device: "cpu",
 * };
 * infer({ x: ndarray(new Int32Array([7]), [1, 1]) }, context);
 * assert.equal(maxBatchSize, 32);
 * ```
 */
export function tritonContext(fn: BatchCallable<ContextInputs>): BatchFunc;
/**
 * Passes a request-level callable through unchanged, after checking that a context is given: on a
 * list of requests the context is already the second argument.
 *
 * @param fn The request-level callable, or an object with an `infer` method.
 * @returns An inference callable over requests.
 *
 * @example Read the context beside the requests
 * ```ts
 * import { tritonContext } from "./triton_context.ts";
 * import { resolveModelConfig } from "../../config/model_config.ts";
 * import type { InferContext, Request } from "../types.ts";
 * import assert from "node:assert/strict";
 *
 * let name = "";
 * const infer = tritonContext((requests: Request[], context: InferContext) => {
 *   name = context.model.name;
 *   return requests.map(() => ({}));
 * });
 * const model = { name: "M", version: 1, inputs: [], outputs: [], config: resolveModelConfig({}), strict: false };
 * infer([], { model, instanceIndex: 0, device: "cpu" });
 * assert.equal(name, "M");
 * assert.throws(() => infer([], undefined!), /not bound to a model/);
 * ```
 */
export function tritonContext(fn: RequestCallable): InferFunc;
export function tritonContext(
  fn: BatchCallable<ContextInputs> | RequestCallable,
): BatchFunc | InferFunc {
  // deno-lint-ignore no-explicit-any
  const inner = toFunction<(first: any, context: InferContext) => BatchReturn | InferReturn>(
    fn,
    "tritonContext",
  );
  return ((first: Inputs | Request[], context: InferContext): BatchReturn | InferReturn => {
    requireModel(context, "tritonContext");
    if (Array.isArray(first)) return inner(first, context);
    return inner({ ...first, [CONTEXT_KEY]: context }, context);
  }) as BatchFunc | InferFunc;
}
