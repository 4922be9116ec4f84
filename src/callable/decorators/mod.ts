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
 * The decorators are generic: inside `bind()`, or under an `InferFunc<I, O>` annotation, the
 * innermost function's inputs are typed by the model's specs (`fillOptionals` makes its inputs
 * present, `tritonContext` adds the context) and its outputs are checked against them.
 *
 * @example A stacked callable
 * ```ts
 * import {
 *   batch,
 *   fillOptionals,
 *   firstValue,
 *   groupByKeys,
 *   groupByValues,
 *   inferContext,
 *   type InferFunc,
 *   inferRequest,
 *   type InferResult,
 *   map,
 *   ndarray,
 *   type TensorsOf,
 *   tritonContext,
 * } from "../../../mod.ts";
 * import assert from "node:assert/strict";
 *
 * const model = {
 *   modelName: "Scale",
 *   inputs: [
 *     { name: "x", dtype: "float32", shape: [1] },
 *     { name: "scale", dtype: "float32", shape: [1], optional: true },
 *   ],
 *   outputs: [{ name: "y", dtype: "float32", shape: [1] }],
 * } as const;
 * type ScaleInputs = TensorsOf<typeof model.inputs>;
 * type ScaleOutputs = TensorsOf<typeof model.outputs>;
 *
 * const scales: number[] = [];
 * const infer: InferFunc<ScaleInputs, ScaleOutputs> = fillOptionals(
 *   { scale: new Float32Array([1]) },
 *   groupByKeys(batch(groupByValues(
 *     ["scale"],
 *     firstValue(["scale"], tritonContext(({ x, scale, tritonContext }) => {
 *       assert.equal(tritonContext.model.name, "Scale");
 *       const factor = scale.data[0] ?? 1; // present: fillOptionals gave it a default
 *       scales.push(factor);
 *       return { y: map(x, (v) => v * factor) };
 *     })),
 *   ))),
 * );
 * const results = infer([
 *   inferRequest({ x: ndarray(new Float32Array([1, 2]), [2, 1]) }),
 *   inferRequest({
 *     x: ndarray(new Float32Array([3]), [1, 1]),
 *     scale: ndarray(new Float32Array([10]), [1, 1]),
 *   }),
 * ], inferContext(model)) as InferResult<ScaleOutputs>[];
 * assert.deepEqual(results.map((result) => [...result.y.data]), [[1, 2], [30]]);
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
export { type DefaultValue, fillOptionals, type WithDefaults } from "./fill_optionals.ts";
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
