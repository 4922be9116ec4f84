/**
 * `tritonContext`: hands the call's context to a function as the `tritonContext` input.
 *
 * @module
 */

import type {
  CallableResult,
  InferContext,
  InferFunc,
  InferRequest,
  InferReturn,
} from "../types.ts";
import type {
  BatchCallable,
  BatchFunc,
  BatchOutput,
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
 * (`(requests: InferRequest[]) => ...`) for the request-level form.
 *
 * @param fn The function, or an object with an `infer` method.
 * @returns A function of the same level as `fn`.
 * @throws {TritonValidationError} (at call time) When called without a context (not bound).
 *
 * @example Read the model configuration
 * ```ts
 * import {
 *   type ContextInputs,
 *   inferContext,
 *   type NDArray,
 *   ndarray,
 *   tritonContext,
 * } from "../../../mod.ts";
 * import assert from "node:assert/strict";
 *
 * let maxBatchSize = 0;
 * const infer = tritonContext(({ x, tritonContext }: ContextInputs<{ x: NDArray<"int32"> }>) => {
 *   maxBatchSize = tritonContext.model.config.maxBatchSize;
 *   return { y: x };
 * });
 * const context = inferContext({
 *   modelName: "Echo",
 *   inputs: [{ name: "x", dtype: "int32", shape: [1] }],
 *   outputs: [{ name: "y", dtype: "int32", shape: [1] }],
 *   config: { maxBatchSize: 32 },
 * });
 * infer({ x: ndarray(new Int32Array([7]), [1, 1]) }, context);
 * assert.equal(maxBatchSize, 32);
 * ```
 */
export function tritonContext<I extends Inputs, O extends BatchOutput>(
  fn: BatchCallable<ContextInputs<I>, O>,
): BatchFunc<I, O>;
/**
 * Passes a request-level callable through unchanged, after checking that a context is given: on a
 * list of requests the context is already the second argument.
 *
 * @param fn The request-level callable, or an object with an `infer` method.
 * @returns An inference callable over requests.
 *
 * @example Read the context beside the requests
 * ```ts
 * import { type InferContext, inferContext, type InferRequest, tritonContext } from "../../../mod.ts";
 * import assert from "node:assert/strict";
 *
 * let name = "";
 * const infer = tritonContext((requests: InferRequest[], context: InferContext) => {
 *   name = context.model.name;
 *   return requests.map(() => ({}));
 * });
 * infer([], inferContext({ modelName: "M" }));
 * assert.equal(name, "M");
 * // @ts-expect-error: called without a context
 * assert.throws(() => infer([]), /not bound to a model/);
 * ```
 */
export function tritonContext<I, O, R extends CallableResult<O>>(
  fn: RequestCallable<I, O, R>,
): InferFunc<I, O, R>;
export function tritonContext(
  fn: BatchCallable<ContextInputs> | RequestCallable,
): BatchFunc | InferFunc {
  // deno-lint-ignore no-explicit-any
  const inner = toFunction<(first: any, context: InferContext) => BatchReturn | InferReturn>(
    fn,
    "tritonContext",
  );
  return ((first: Inputs | InferRequest[], context: InferContext): BatchReturn | InferReturn => {
    requireModel(context, "tritonContext");
    if (Array.isArray(first)) return inner(first, context);
    return inner({ ...first, [CONTEXT_KEY]: context }, context);
  }) as BatchFunc | InferFunc;
}
