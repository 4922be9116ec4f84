/**
 * A few tensor operations that keep the dtype: elementwise {@linkcode map} and {@linkcode zip},
 * and {@linkcode rows} along the batch axis. Enough to write small models without index
 * arithmetic; not a NumPy.
 *
 * @module
 */

import { TritonValidationError } from "../errors.ts";
import { type DType, newTypedArray } from "./dtype.ts";
import { type ElementOf, type NDArray, shapeSize, sliceBatch } from "./ndarray.ts";

/** What an elementwise function may return for dtype `D`: an element, or a string for bytes. */
export type ElementResult<D extends DType> = ElementOf<D> | (D extends "bytes" ? string : never);

const encoder = new TextEncoder();

/** A tensor of `template`'s dtype and shape whose element `i` is `element(i)`. */
function build(template: NDArray, element: (index: number) => unknown): NDArray {
  const count = template.data.length;
  if (template.dtype === "bytes") {
    const data = Array.from({ length: count }, (_, index) => {
      const value = element(index);
      if (value instanceof Uint8Array) return value;
      if (typeof value === "string") return encoder.encode(value);
      throw new TritonValidationError(
        `Invalid element ${index} of a bytes tensor: expected a Uint8Array or a string, got ${typeof value}`,
      );
    });
    return { dtype: "bytes", shape: template.shape, data };
  }
  const data = newTypedArray(template.dtype, count);
  const target = data as unknown as { [index: number]: unknown };
  for (let index = 0; index < count; index++) target[index] = element(index);
  return { dtype: template.dtype, shape: template.shape, data } as NDArray;
}

/**
 * Applies `fn` to every element, giving a new tensor of the same dtype and shape (NumPy's
 * elementwise arithmetic, `a * 2`).
 *
 * @typeParam D The dtype, kept.
 * @param array A tensor.
 * @param fn Gets each element (`number`, `bigint` for 64-bit integers, `Uint8Array` for bytes)
 *   and its flat index; returns the new element (a string is UTF-8 encoded for bytes).
 * @returns The new tensor.
 *
 * @example Scale a tensor
 * ```ts
 * import { map, ndarray } from "../../mod.ts";
 * import assert from "node:assert/strict";
 *
 * const doubled = map(ndarray(new Float32Array([1, 2, 3]), [1, 3]), (v) => v * 2);
 * assert.deepEqual([...doubled.data], [2, 4, 6]);
 * assert.deepEqual(doubled.shape, [1, 3]);
 * ```
 */
export function map<D extends DType>(
  array: NDArray<D>,
  fn: (value: ElementOf<D>, index: number) => ElementResult<D>,
): NDArray<D> {
  const source = array as NDArray;
  const data = source.data as ArrayLike<unknown>;
  return build(source, (index) => fn(data[index] as ElementOf<D>, index)) as NDArray<D>;
}

/**
 * Combines two tensors of the same shape element by element (NumPy's `a + b` without
 * broadcasting); the result has `a`'s dtype and shape.
 *
 * @typeParam A The dtype of `a` and of the result.
 * @typeParam B The dtype of `b`.
 * @param a The first tensor.
 * @param b The second tensor, of the same shape.
 * @param fn Gets an element of each and the flat index; returns the new element.
 * @returns The new tensor.
 * @throws {TritonValidationError} When the shapes differ.
 *
 * @example Add and subtract
 * ```ts
 * import { ndarray, zip } from "../../mod.ts";
 * import assert from "node:assert/strict";
 *
 * const a = ndarray(new Float32Array([1, 2]), [2, 1]);
 * const b = ndarray(new Float32Array([10, 20]), [2, 1]);
 * assert.deepEqual([...zip(a, b, (x, y) => x + y).data], [11, 22]);
 * assert.deepEqual([...zip(a, b, (x, y) => x - y).data], [-9, -18]);
 * assert.throws(() => zip(a, ndarray(new Float32Array(3)), (x, y) => x + y), /shapes \[2,1\] and \[3\]/);
 * ```
 */
export function zip<A extends DType, B extends DType>(
  a: NDArray<A>,
  b: NDArray<B>,
  fn: (x: ElementOf<A>, y: ElementOf<B>, index: number) => ElementResult<A>,
): NDArray<A> {
  const first = a as NDArray;
  const second = b as NDArray;
  if (
    first.shape.length !== second.shape.length ||
    first.shape.some((dim, index) => dim !== second.shape[index])
  ) {
    throw new TritonValidationError(
      `Cannot zip tensors of shapes [${first.shape}] and [${second.shape}]: the shapes must be equal`,
    );
  }
  const x = first.data as ArrayLike<unknown>;
  const y = second.data as ArrayLike<unknown>;
  return build(
    first,
    (index) => fn(x[index] as ElementOf<A>, y[index] as ElementOf<B>, index),
  ) as NDArray<A>;
}

/**
 * The rows of a tensor along axis 0 (the batch axis), like iterating a NumPy array: row `i` of a
 * `[n, k]` tensor is a view of shape `[k]`.
 *
 * @typeParam D The dtype, kept.
 * @param array A tensor with at least one dimension.
 * @returns One tensor per row, in order (no copies).
 * @throws {TritonValidationError} For a scalar (shape `[]`).
 *
 * @example Per-sample work in a batch
 * ```ts
 * import { ndarray, rows } from "../../mod.ts";
 * import assert from "node:assert/strict";
 *
 * const batch = ndarray(new Int32Array([1, 2, 3, 4, 5, 6]), [3, 2]);
 * const sums = rows(batch).map((row) => row.data.reduce((sum, v) => sum + v, 0));
 * assert.deepEqual(sums, [3, 7, 11]);
 * const [first] = rows(batch);
 * assert.deepEqual(first?.shape, [2]);
 * ```
 */
export function rows<D extends DType>(array: NDArray<D>): NDArray<D>[] {
  const source = array as NDArray;
  const count = source.shape[0];
  if (count === undefined) {
    throw new TritonValidationError("Cannot split a scalar tensor into rows: it has no axis 0");
  }
  if (shapeSize(source.shape) !== source.data.length) {
    throw new TritonValidationError(
      `Cannot split a tensor into rows: shape [${source.shape}] does not fit its ${source.data.length} elements`,
    );
  }
  const shape = source.shape.slice(1);
  return Array.from({ length: count }, (_, row) => {
    const slice = sliceBatch(source, row, row + 1);
    return { ...slice, shape } as NDArray as NDArray<D>;
  });
}
