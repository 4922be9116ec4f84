/**
 * Decorators for inference callables, as higher-order functions (PyTriton's `pytriton.decorators`).
 *
 * Each takes a callable (a function or an object with an `infer` method) and returns a new one.
 * Request-level decorators (`fillOptionals`, `groupByKeys`, `batch`, `sample`) receive the list
 * of requests; batch-level ones (`groupByValues`, `padBatch`) sit below `batch` and receive the
 * batched inputs by name; `firstValue` and `tritonContext` work at either level. Every function
 * receives the call's context as its second argument. Stack them in PyTriton's recommended order,
 * outermost first: `fillOptionals` → `groupByKeys` → `batch` → `groupByValues` → `firstValue` →
 * `tritonContext`.
 *
 * Request parameters and abort signals reach only request-level functions: a function below
 * `batch` sees the batched tensors and the context, as in PyTriton.
 *
 * @example A stacked callable
 * ```ts
 * import {
 *   batch,
 *   fillOptionals,
 *   firstValue,
 *   groupByKeys,
 *   groupByValues,
 *   tritonContext,
 * } from "./mod.ts";
 * import { ndarray } from "../../tensor/ndarray.ts";
 * import { resolveModelConfig } from "../../config/model_config.ts";
 * import { resolveTensorSpecs } from "../../config/tensor_spec.ts";
 * import type { InferResult, Request } from "../types.ts";
 * import assert from "node:assert/strict";
 *
 * const scales: number[] = [];
 * const infer = fillOptionals(
 *   { scale: new Float32Array([1]) },
 *   groupByKeys(batch(groupByValues(
 *     ["scale"],
 *     firstValue(["scale"], tritonContext(({ x, scale, tritonContext }) => {
 *       assert.equal(tritonContext.model.name, "Scale");
 *       const factor = (scale!.data as Float32Array)[0]!;
 *       scales.push(factor);
 *       return [ndarray((x!.data as Float32Array).map((v) => v * factor), x!.shape)];
 *     })),
 *   ))),
 * );
 * const context = {
 *   model: {
 *     name: "Scale",
 *     version: 1,
 *     inputs: resolveTensorSpecs([
 *       { name: "x", dtype: "float32", shape: [1] },
 *       { name: "scale", dtype: "float32", shape: [1], optional: true },
 *     ], "input"),
 *     outputs: resolveTensorSpecs([{ name: "y", dtype: "float32", shape: [1] }], "output"),
 *     config: resolveModelConfig({}),
 *     strict: false,
 *   },
 *   instanceIndex: 0,
 *   device: "cpu",
 * };
 * const request = (data: Request["data"]): Request => ({
 *   data,
 *   parameters: {},
 *   requestedOutputNames: ["y"],
 *   signal: new AbortController().signal,
 * });
 * const results = infer([
 *   request({ x: ndarray(new Float32Array([1, 2]), [2, 1]) }),
 *   request({ x: ndarray(new Float32Array([3]), [1, 1]), scale: ndarray(new Float32Array([10]), [1, 1]) }),
 * ], context) as InferResult[];
 * assert.deepEqual([...results[0]!.y!.data], [1, 2]);
 * assert.deepEqual([...results[1]!.y!.data], [30]);
 * assert.deepEqual(scales.sort(), [1, 10]); // one call per scale
 * ```
 *
 * @module
 */

export { batch } from "./batch.ts";
export { sample } from "./sample.ts";
export { groupByKeys } from "./group_by_keys.ts";
export {
  ConstantPadder,
  groupByValues,
  type GroupByValuesOptions,
  type GroupOutputs,
  type Padder,
  type PadFn,
} from "./group_by_values.ts";
export { type DefaultValue, fillOptionals } from "./fill_optionals.ts";
export { padBatch } from "./pad_batch.ts";
export { firstValue, type FirstValueOptions } from "./first_value.ts";
export { tritonContext } from "./triton_context.ts";
export { convertOutput, getInferenceRequestBatchSize } from "./helpers.ts";
export type {
  BatchCallable,
  BatchFunc,
  BatchOutput,
  BatchReturn,
  Callable,
  ContextInputs,
  Inputs,
  RequestCallable,
} from "./types.ts";
