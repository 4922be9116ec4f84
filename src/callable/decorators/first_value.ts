/**
 * `firstValue`: replaces per-sample parameters (equal across a batch) by a single value.
 *
 * @module
 */

import { equalBytes } from "../../tensor/bytes.ts";
import { TritonBadParameterError, TritonRuntimeError } from "../../errors.ts";
import { isNDArray, type NDArray, sliceBatch } from "../../tensor/ndarray.ts";
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
  Inputs,
  RequestCallable,
} from "./types.ts";
import { CONTEXT_KEY, requireModel, rowKey, toFunction, withData } from "./_util.ts";

/** Options of {@linkcode firstValue}. */
export interface FirstValueOptions {
  /**
   * Turn a first value whose every dimension is 1 into a 0-d tensor (shape `[]`).
   *
   * @default {true}
   */
  squeezeSingleValues?: boolean;
  /**
   * Require every value along axis 0 to be identical.
   *
   * @default {true}
   */
  strict?: boolean;
}

const decoder = new TextDecoder();

function preview(array: NDArray): string {
  const elements: readonly unknown[] = Array.from(array.data.slice(0, 8) as ArrayLike<unknown>);
  const shown = elements.map((element) =>
    element instanceof Uint8Array ? JSON.stringify(decoder.decode(element)) : String(element)
  );
  return `[${shown.join(", ")}${array.data.length > 8 ? ", ..." : ""}]`;
}

/**
 * Wraps a callable so each named input is replaced by its first element along axis 0
 * (PyTriton's `@first_value`): on batched inputs when placed below `batch`
 * (`batch(firstValue(["temperature"], infer))`), or on each request's inputs when placed above
 * it. With `squeezeSingleValues`, a first element whose dimensions are all 1 becomes a 0-d tensor
 * (shape `[]`, one element). Names that are absent are skipped. The model must support batching.
 *
 * TypeScript picks the batch-level form for an unannotated function; annotate the parameter
 * (`(requests: InferRequest[]) => ...`) for the request-level form. With typed specs, `keys` may
 * only name declared inputs.
 *
 * @param keys The names of the inputs to replace.
 * @param fn The function, or an object with an `infer` method.
 * @param options Squeezing and strictness.
 * @returns A function of the same level as `fn`.
 * @throws {TritonBadParameterError} When `keys` holds the reserved name `tritonContext` (at once).
 * @throws {TritonRuntimeError} (at call time) When the model does not batch, or, in strict mode,
 *   when an input's values differ along axis 0.
 * @throws {TritonValidationError} (at call time) When called without a context (not bound).
 *
 * @example One temperature per batch
 * ```ts
 * import { firstValue, inferContext, map, type NDArray, ndarray } from "../../../mod.ts";
 * import assert from "node:assert/strict";
 *
 * const seen: number[][] = [];
 * const infer = firstValue(["t"], ({ x, t }: { x: NDArray<"float32">; t: NDArray<"float32"> }) => {
 *   seen.push([...t.shape]);
 *   const scale = t.data[0] ?? 1;
 *   return { y: map(x, (v) => v * scale) };
 * });
 * const context = inferContext({
 *   modelName: "Scale",
 *   inputs: [{ name: "x", dtype: "float32", shape: [1] }, { name: "t", dtype: "float32", shape: [1] }],
 *   outputs: [{ name: "y", dtype: "float32", shape: [1] }],
 * });
 * const t = ndarray(new Float32Array([2, 2]), [2, 1]);
 * infer({ x: ndarray(new Float32Array([1, 2]), [2, 1]), t }, context);
 * assert.deepEqual(seen, [[]]);
 * const mixed = ndarray(new Float32Array([2, 3]), [2, 1]);
 * assert.throws(() => infer({ x: t, t: mixed }, context), /not equal/);
 * ```
 */
export function firstValue<I extends Inputs, O extends BatchOutput>(
  keys: readonly NoInfer<keyof I & string>[],
  fn: BatchCallable<I, O>,
  options?: FirstValueOptions,
): BatchFunc<I, O>;
/**
 * Wraps a request-level callable so each named input of every request is replaced by its first
 * element along axis 0 (see the batch-level form above for the rules).
 *
 * @param keys The names of the inputs to replace.
 * @param fn The request-level callable, or an object with an `infer` method.
 * @param options Squeezing and strictness.
 * @returns An inference callable over requests.
 *
 * @example One temperature per request
 * ```ts
 * import { firstValue, inferContext, type InferRequest, inferRequest, ndarray } from "../../../mod.ts";
 * import assert from "node:assert/strict";
 *
 * const shapes: number[][] = [];
 * const infer = firstValue(["t"], (requests: InferRequest[]) => {
 *   for (const request of requests) shapes.push([...request.data.t?.shape ?? []]);
 *   return requests.map(() => ({}));
 * });
 * const context = inferContext({
 *   modelName: "Scale",
 *   inputs: [{ name: "t", dtype: "float32", shape: [1] }],
 *   outputs: [{ name: "y", dtype: "float32", shape: [1] }],
 * });
 * infer([inferRequest({ t: ndarray(new Float32Array([2, 2]), [2, 1]) })], context);
 * assert.deepEqual(shapes, [[]]);
 * ```
 */
export function firstValue<I, O, R extends CallableResult<O>>(
  keys: readonly NoInfer<keyof I & string>[],
  fn: RequestCallable<I, O, R>,
  options?: FirstValueOptions,
): InferFunc<I, O, R>;
export function firstValue(
  keys: readonly string[],
  fn: BatchCallable | RequestCallable,
  options: FirstValueOptions = {},
): BatchFunc | InferFunc {
  const reserved = keys.filter((key) => key === CONTEXT_KEY);
  if (reserved.length > 0) {
    throw new TritonBadParameterError(
      `Cannot use firstValue with key '${CONTEXT_KEY}': the name is reserved for the context tritonContext injects`,
    );
  }
  const { squeezeSingleValues = true, strict = true } = options;
  // deno-lint-ignore no-explicit-any
  const inner = toFunction<(first: any, context: InferContext) => BatchReturn | InferReturn>(
    fn,
    "firstValue",
  );

  const replace = <T extends Record<string, unknown>>(inputs: T): T => {
    const replaced: Record<string, unknown> = { ...inputs };
    for (const key of keys) {
      const values = inputs[key];
      if (!isNDArray(values) || values.shape.length === 0) continue;
      const rows = values.shape[0]!;
      if (rows === 0) {
        throw new TritonRuntimeError(
          `Cannot take the first value of input '${key}': it has no rows`,
        );
      }
      if (strict) {
        const first = rowKey(values, 0);
        for (let row = 1; row < rows; row++) {
          if (!equalBytes(first, rowKey(values, row))) {
            throw new TritonRuntimeError(
              `The values of input '${key}' are not equal: ${
                preview(values)
              }; disable strict mode in firstValue ({ strict: false }) or send equal values`,
            );
          }
        }
      }
      const tail = values.shape.slice(1);
      const shape = squeezeSingleValues && tail.every((dim) => dim === 1) ? [] : tail;
      replaced[key] = { ...sliceBatch(values, 0, 1), shape };
    }
    return replaced as T;
  };

  return ((first: Inputs | InferRequest[], context: InferContext): BatchReturn | InferReturn => {
    const model = requireModel(context, "firstValue");
    if (!model.config.batching) {
      throw new TritonRuntimeError(
        `Cannot use firstValue: model '${model.name}' does not support batching`,
      );
    }
    if (Array.isArray(first)) {
      return inner(first.map((request) => withData(request, replace(request.data))), context);
    }
    return inner(replace(first), context);
  }) as BatchFunc | InferFunc;
}
