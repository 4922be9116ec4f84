/**
 * `padBatch`: pads a batch up to the next preferred (or maximum) batch size.
 *
 * @module
 */

import { TritonRuntimeError } from "../../errors.ts";
import { concatBatch, isNDArray, type NDArray, sliceBatch } from "../../tensor/ndarray.ts";
import type { InferContext } from "../types.ts";
import { getInferenceRequestBatchSize } from "./helpers.ts";
import type { BatchCallable, BatchFunc, BatchOutput, BatchReturn, Inputs } from "./types.ts";
import { CONTEXT_KEY, requireInputs, requireModel, toFunction } from "./_util.ts";

/** `array` with its last row repeated until it has `rows` rows (PyTriton's `np.repeat`). */
function padRows(array: NDArray, rows: number): NDArray {
  const have = array.shape[0] ?? 0;
  if (have === 0 || have >= rows) return array;
  const last = sliceBatch(array, have - 1, have);
  return concatBatch([array, ...Array.from({ length: rows - have }, () => last)]);
}

/**
 * Wraps a batch-level function so its inputs are padded, by repeating their last row, up to the
 * smallest of the model's preferred batch sizes and `maxBatchSize` that is at least the current
 * batch size (PyTriton's `@pad_batch`). Place it below `batch`: `batch(padBatch(infer))`.
 *
 * As in PyTriton, outputs are not trimmed afterwards: the function must return outputs for the
 * original batch size (it can read `context` or remember the size), or `batch` will reject them.
 *
 * @param fn The batch-level function, or an object with an `infer` method.
 * @returns A batch-level function.
 * @throws {TritonRuntimeError} (at call time) When used above `batch`, when the model does not
 *   batch, or when the batch exceeds `maxBatchSize`.
 * @throws {TritonValidationError} (at call time) When called without a context (not bound).
 *
 * @example Pad a batch of 3 up to the preferred size 4
 * ```ts
 * import { inferContext, type NDArray, ndarray, padBatch, rows } from "../../../mod.ts";
 * import assert from "node:assert/strict";
 *
 * const seen: number[][] = [];
 * const infer = padBatch(({ x }: { x: NDArray<"int32"> }) => {
 *   seen.push([...x.data]);
 *   return { y: ndarray(new Int32Array(rows(x).slice(0, 3).map((row) => row.data[0] ?? 0)), [3, 1]) };
 * });
 * const context = inferContext({
 *   modelName: "Padded",
 *   inputs: [{ name: "x", dtype: "int32", shape: [1] }],
 *   outputs: [{ name: "y", dtype: "int32", shape: [1] }],
 *   config: { maxBatchSize: 16, batcher: { preferredBatchSize: [4, 8] } },
 * });
 * infer({ x: ndarray(new Int32Array([1, 2, 3]), [3, 1]) }, context);
 * assert.deepEqual(seen, [[1, 2, 3, 3]]);
 * ```
 */
export function padBatch<I extends Inputs, O extends BatchOutput>(
  fn: BatchCallable<I, O>,
): BatchFunc<I, O>;
export function padBatch(fn: BatchCallable): BatchFunc {
  const inner = toFunction(fn, "padBatch");
  return (inputs: Inputs, context: InferContext): BatchReturn => {
    requireInputs(inputs, "padBatch");
    const model = requireModel(context, "padBatch");
    if (!model.config.batching) {
      throw new TritonRuntimeError(
        `Cannot pad the batch: model '${model.name}' does not support batching`,
      );
    }
    const tensors: Record<string, NDArray> = {};
    for (const [name, value] of Object.entries(inputs as Record<string, unknown>)) {
      if (name !== CONTEXT_KEY && isNDArray(value)) tensors[name] = value;
    }
    const current = getInferenceRequestBatchSize(tensors);
    const sizes = [...model.config.batcher.preferredBatchSize].sort((a, b) => a - b);
    sizes.push(model.config.maxBatchSize);
    const target = sizes.find((size) => size >= current);
    if (target === undefined) {
      throw new TritonRuntimeError(
        `Cannot pad the batch: its size ${current} exceeds maxBatchSize ${model.config.maxBatchSize}`,
      );
    }
    const padded: Record<string, unknown> = { ...inputs };
    for (const [name, tensor] of Object.entries(tensors)) padded[name] = padRows(tensor, target);
    return inner(padded as Inputs, context);
  };
}
