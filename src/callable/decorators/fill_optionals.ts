/**
 * `fillOptionals`: inserts default values for optional inputs a request left out.
 *
 * @module
 */

import { TritonBadParameterError } from "../../errors.ts";
import { newTypedArray } from "../../tensor/dtype.ts";
import {
  isNDArray,
  type NDArray,
  ndarray,
  type NDArrayData,
  type NumericNDArray,
} from "../../tensor/ndarray.ts";
import type {
  CallableResult,
  InferContext,
  InferFunc,
  InferRequest,
  InferReturn,
} from "../types.ts";
import { getInferenceRequestBatchSize } from "./helpers.ts";
import type { RequestCallable } from "./types.ts";
import { requireModel, requireRequests, toFunction, withData } from "./_util.ts";
import type { ModelInfo } from "../../config/model_info.ts";

/**
 * A default value, given without the batch axis: an `NDArray`, a TypedArray (a 1-D tensor of
 * its own dtype) or a (nested) array of numbers, bigints, booleans or strings, converted to the
 * declared dtype.
 */
export type DefaultValue = NDArray | NDArrayData;

/**
 * Inputs `I` with the inputs named `K` no longer optional: what the callable below
 * {@linkcode fillOptionals} receives.
 *
 * @typeParam I The inputs.
 * @typeParam K The names of the inputs that have defaults.
 */
export type WithDefaults<I, K extends PropertyKey> =
  & { [P in keyof I as P extends K ? never : P]: I[P] }
  & { [P in keyof I as P extends K ? P : never]-?: Exclude<I[P], undefined> };

function describe(value: unknown): string {
  if (value === null) return "null";
  if (typeof value === "object") return value.constructor?.name ?? "object";
  return typeof value;
}

function shapeMatches(have: readonly number[], expected: readonly number[]): boolean {
  return have.length === expected.length &&
    expected.every((dim, index) => dim === -1 || dim === have[index]);
}

/** Converts and checks the defaults against the model's declared inputs (PyTriton's `_verify_defaults`). */
function resolveDefaults(
  defaults: Readonly<Record<string, DefaultValue>>,
  model: ModelInfo,
): Map<string, NDArray> {
  const specs = new Map(model.inputs.map((spec) => [spec.name, spec]));
  const unknown = Object.keys(defaults).filter((name) => !specs.has(name)).sort();
  if (unknown.length > 0) {
    throw new TritonBadParameterError(
      `Cannot fill optional inputs: model '${model.name}' has no inputs named ${
        unknown.join(", ")
      } (declared: ${[...specs.keys()].join(", ")})`,
    );
  }
  const resolved = new Map<string, NDArray>();
  const badDTypes: string[] = [];
  const badShapes: string[] = [];
  for (const [name, value] of Object.entries(defaults)) {
    const spec = specs.get(name)!;
    let array: NDArray;
    try {
      array = isNDArray(value)
        ? value
        : ArrayBuffer.isView(value)
        ? ndarray(value)
        : ndarray(value, undefined, { dtype: spec.dtype });
    } catch (error) {
      throw new TritonBadParameterError(
        `Cannot use the default of input '${name}': ${(error as Error).message}`,
        { cause: error },
      );
    }
    if (array.dtype !== spec.dtype) {
      badDTypes.push(`${name}: dtype=${array.dtype} expected_dtype=${spec.dtype}`);
    } else if (!shapeMatches(array.shape, spec.shape)) {
      badShapes.push(`${name}: shape=[${array.shape}] expected_shape=[${spec.shape}]`);
    }
    resolved.set(name, array);
  }
  if (badDTypes.length > 0) {
    throw new TritonBadParameterError(
      `Cannot use defaults whose dtypes differ from the declared inputs: ${badDTypes.join(", ")}`,
    );
  }
  if (badShapes.length > 0) {
    throw new TritonBadParameterError(
      `Cannot use defaults whose shapes differ from the declared inputs: ${badShapes.join(", ")}`,
    );
  }
  return resolved;
}

/** The default repeated `rows` times along a new batch axis (PyTriton's `np.tile`). */
function tile(value: NDArray, rows: number): NDArray {
  const shape = [rows, ...value.shape];
  if (value.dtype === "bytes") {
    return { dtype: "bytes", shape, data: Array.from({ length: rows }, () => value.data).flat() };
  }
  const size = value.data.length;
  const data = newTypedArray(value.dtype, rows * size);
  // The union's `set` takes no argument of the union; both arrays have the same dtype.
  const target = data as { set(source: ArrayLike<unknown>, offset: number): void };
  for (let row = 0; row < rows; row++) target.set(value.data, row * size);
  return { dtype: value.dtype, shape, data } as NumericNDArray;
}

/**
 * Wraps an inference callable so every request lacking one of the named inputs gets its default
 * (PyTriton's `@fill_optionals`). Defaults are given without the batch axis; for batching models
 * they are tiled to each request's batch size (axis 0 of its first input; 1 for a request
 * without inputs). Put it first (outermost), so grouping decorators below see uniform requests.
 * The requests passed on are copies: the originals are not changed.
 *
 * Defaults are checked on the first call against the bound model (names must be declared inputs,
 * dtypes equal to the declared ones, shapes matching with `-1` wildcards).
 *
 * @param defaults Default values by input name, without the batch axis.
 * @param fn The request-level callable, or an object with an `infer` method.
 * @returns An inference callable over requests.
 * @throws {TritonBadParameterError} When a default is not tensor-like (at once), or (at call time)
 *   names an undeclared input or differs from its declared dtype or shape.
 * @throws {TritonValidationError} (at call time) When called without a context (not bound).
 *
 * With typed specs, `defaults` may only name declared inputs, and the callable below sees those
 * inputs as always present.
 *
 * @example Default a missing threshold
 * ```ts
 * import {
 *   fillOptionals,
 *   inferContext,
 *   type InferRequest,
 *   inferRequest,
 *   ndarray,
 * } from "../../../mod.ts";
 * import assert from "node:assert/strict";
 *
 * let seen: InferRequest[] = [];
 * const infer = fillOptionals({ threshold: new Float32Array([0.5]) }, (requests: InferRequest[]) => {
 *   seen = requests;
 *   return requests.map(() => ({}));
 * });
 * const context = inferContext({
 *   modelName: "Classify",
 *   inputs: [
 *     { name: "x", dtype: "float32", shape: [2] },
 *     { name: "threshold", dtype: "float32", shape: [1], optional: true },
 *   ],
 *   outputs: [{ name: "label", dtype: "int32", shape: [1] }],
 * });
 * infer([inferRequest({ x: ndarray(new Float32Array(6), [3, 2]) })], context);
 * assert.deepEqual(seen[0]?.data.threshold?.shape, [3, 1]);
 * assert.deepEqual([...seen[0]?.data.threshold?.data ?? []], [0.5, 0.5, 0.5]);
 * ```
 */
export function fillOptionals<
  I,
  O,
  const K extends NoInfer<keyof I & string>,
  R extends CallableResult<O>,
>(
  defaults: { readonly [P in K]: DefaultValue },
  fn: RequestCallable<WithDefaults<I, K>, O, R>,
): InferFunc<I, O, R>;
export function fillOptionals(
  defaults: Readonly<Record<string, DefaultValue>>,
  fn: RequestCallable,
): InferFunc {
  for (const [name, value] of Object.entries(defaults)) {
    if (!isNDArray(value) && !ArrayBuffer.isView(value) && !Array.isArray(value)) {
      throw new TritonBadParameterError(
        `Cannot use the default of input '${name}': expected an NDArray, a TypedArray or an array, got ${
          describe(value)
        }`,
      );
    }
  }
  const inner = toFunction(fn, "fillOptionals");
  const checked = new WeakMap<ModelInfo, Map<string, NDArray>>();
  return (requests: InferRequest[], context: InferContext): InferReturn => {
    requireRequests(requests, "fillOptionals");
    const model = requireModel(context, "fillOptionals");
    let resolved = checked.get(model);
    if (resolved === undefined) {
      resolved = resolveDefaults(defaults, model);
      checked.set(model, resolved);
    }
    const batching = model.config.batching;
    const filled = requests.map((request) => {
      const missing = [...resolved.keys()].filter((name) => request.data[name] === undefined);
      if (missing.length === 0) return request;
      const rows = !batching
        ? 0
        : Object.keys(request.data).length === 0
        ? 1
        : getInferenceRequestBatchSize(request);
      const data = { ...request.data };
      for (const name of missing) {
        const value = resolved.get(name)!;
        data[name] = batching ? tile(value, rows) : value;
      }
      return withData(request, data);
    });
    return inner(filled, context);
  };
}
