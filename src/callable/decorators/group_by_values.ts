/**
 * `groupByValues` (split a batch into sub-batches of equal parameter values) and
 * `ConstantPadder` (equalise output shapes across those sub-batches).
 *
 * @module
 */

import { compareBytes } from "../../tensor/bytes.ts";
import { TritonRuntimeError } from "../../errors.ts";
import {
  arrayConstructorOf,
  isBigIntDType,
  type NumericDType,
  type TypedArray,
} from "../../tensor/dtype.ts";
import { isNDArray, type NDArray, type NumericNDArray, shapeSize } from "../../tensor/ndarray.ts";
import type { InferContext } from "../types.ts";
import { convertOutput, getInferenceRequestBatchSize } from "./helpers.ts";
import type { BatchCallable, BatchFunc, BatchOutput, BatchReturn, Inputs } from "./types.ts";
import {
  CONTEXT_KEY,
  isStream,
  requireInputs,
  rowKey,
  runSequentially,
  toFunction,
} from "./_util.ts";

/** Outputs of one group, by name. */
export type GroupOutputs = Record<string, NDArray>;

/** A function that equalises the outputs of the groups before they are merged into one batch. */
export type PadFn = (groups: readonly GroupOutputs[]) => GroupOutputs[];

/** An object that equalises the outputs of the groups, like {@linkcode ConstantPadder}. */
export interface Padder {
  /** Returns the groups' outputs with equal trailing shapes, in the same order. */
  pad(groups: readonly GroupOutputs[]): GroupOutputs[];
}

/** Options of {@linkcode groupByValues}. */
export interface GroupByValuesOptions {
  /**
   * Equalises the groups' outputs (e.g. `new ConstantPadder(0)`) before they are scattered back
   * into one batch; needed when groups return different trailing shapes.
   *
   * @default {undefined}
   */
  padFn?: PadFn | Padder;
}

/** Rows `indices` of axis 0, in that order, as a new tensor. */
function takeRows(array: NDArray, indices: readonly number[]): NDArray {
  const rowSize = shapeSize(array.shape.slice(1));
  const shape = [indices.length, ...array.shape.slice(1)];
  if (array.dtype === "bytes") {
    const data = indices.flatMap((row) => array.data.slice(row * rowSize, (row + 1) * rowSize));
    return { dtype: "bytes", shape, data };
  }
  // deno-lint-ignore no-explicit-any
  const data = new (arrayConstructorOf(array.dtype) as any)(indices.length * rowSize) as TypedArray;
  indices.forEach((row, position) => {
    // deno-lint-ignore no-explicit-any
    (data as any).set(array.data.subarray(row * rowSize, (row + 1) * rowSize), position * rowSize);
  });
  return { dtype: array.dtype, shape, data } as NumericNDArray;
}

/** An empty tensor of `rows` rows to scatter groups into. */
function emptyLike(template: NDArray, rows: number): NDArray {
  const shape = [rows, ...template.shape.slice(1)];
  const size = shapeSize(shape);
  if (template.dtype === "bytes") {
    return { dtype: "bytes", shape, data: Array.from({ length: size }, () => new Uint8Array()) };
  }
  // deno-lint-ignore no-explicit-any
  const data = new (arrayConstructorOf(template.dtype) as any)(size) as TypedArray;
  return { dtype: template.dtype, shape, data } as NumericNDArray;
}

function sameShape(a: readonly number[], b: readonly number[]): boolean {
  return a.length === b.length && a.every((dim, index) => dim === b[index]);
}

/**
 * Wraps a batch-level function so it is called once per group of samples whose values of the
 * given inputs are equal (PyTriton's `@group_by_values`). Place it below `batch`:
 * `batch(groupByValues(["temperature"], infer))`.
 *
 * Samples are compared by the bytes of their rows (numeric inputs by raw bytes, bytes inputs by
 * content). The function receives each group's rows of every input (and any non-tensor entry,
 * such as `tritonContext`, unchanged); groups run one after another, sorted by their values'
 * bytes. Their outputs are scattered back into full-batch tensors in the original sample order,
 * taking each output's dtype and trailing shape from the first group; when groups return
 * different trailing shapes, pass `padFn` (e.g. {@linkcode ConstantPadder}).
 *
 * @param keys The names of the inputs whose values form the groups.
 * @param fn The batch-level function, or an object with an `infer` method.
 * @param options A padding function.
 * @returns A batch-level function.
 * @throws {TritonRuntimeError} (at call time) When used above `batch` (it then receives a list of
 *   requests), when a key input is missing, when the wrapped function returns a stream, or when
 *   groups' outputs differ in names, dtypes or trailing shapes.
 *
 * @example Run each temperature separately
 * ```ts
 * import { groupByValues, inferContext, map, type NDArray, ndarray, type Tensors } from "../../../mod.ts";
 * import assert from "node:assert/strict";
 *
 * const calls: number[][] = [];
 * const infer = groupByValues(["t"], ({ x, t }: { x: NDArray<"float32">; t: NDArray<"float32"> }) => {
 *   calls.push([...x.data]);
 *   const scale = t.data[0] ?? 1;
 *   return { y: map(x, (v) => v * scale) };
 * });
 * const inputs = {
 *   x: ndarray(new Float32Array([1, 2, 3]), [3, 1]),
 *   t: ndarray(new Float32Array([2, 10, 2]), [3, 1]),
 * };
 * const context = inferContext({
 *   modelName: "Scale",
 *   inputs: [{ name: "x", dtype: "float32", shape: [1] }, { name: "t", dtype: "float32", shape: [1] }],
 *   outputs: [{ name: "y", dtype: "float32", shape: [1] }],
 * });
 * const { y } = infer(inputs, context) as Tensors;
 * assert.deepEqual(calls, [[1, 3], [2]]);
 * assert.deepEqual([...y?.data ?? []], [2, 20, 6]);
 * ```
 */
export function groupByValues<I extends Inputs, O extends BatchOutput>(
  keys: readonly NoInfer<keyof I & string>[],
  fn: BatchCallable<I, O>,
  options?: GroupByValuesOptions,
): BatchFunc<I, O>;
export function groupByValues(
  keys: readonly string[],
  fn: BatchCallable,
  options: GroupByValuesOptions = {},
): BatchFunc {
  const inner = toFunction(fn, "groupByValues");
  const { padFn } = options;
  const pad: PadFn | undefined = padFn === undefined
    ? undefined
    : typeof padFn === "function"
    ? padFn
    : (groups) => padFn.pad(groups);
  return (inputs: Inputs, context: InferContext): BatchReturn => {
    requireInputs(inputs, "groupByValues");
    const tensors: Record<string, NDArray> = {};
    const others: Record<string, unknown> = {};
    for (const [name, value] of Object.entries(inputs as Record<string, unknown>)) {
      if (name !== CONTEXT_KEY && isNDArray(value)) tensors[name] = value;
      else others[name] = value;
    }
    for (const key of keys) {
      if (tensors[key] === undefined) {
        throw new TritonRuntimeError(
          `Cannot group samples by values: input '${key}' is missing (inputs: ${
            Object.keys(tensors).join(", ")
          })`,
        );
      }
    }
    const size = getInferenceRequestBatchSize(tensors);
    if (size === 0) return inner(inputs, context);

    const sampleKeys = Array.from(
      { length: size },
      (_, row) => keys.map((key) => rowKey(tensors[key]!, row)),
    );
    const compare = (a: number, b: number): number => {
      const left = sampleKeys[a]!;
      const right = sampleKeys[b]!;
      for (let index = 0; index < left.length; index++) {
        const order = compareBytes(left[index]!, right[index]!);
        if (order !== 0) return order;
      }
      return 0;
    };
    // A stable sort keeps each group's samples in their original order, like PyTriton's.
    const sorted = Array.from({ length: size }, (_, row) => row).sort((a, b) =>
      compare(a, b) || a - b
    );
    const groups: number[][] = [];
    for (const row of sorted) {
      const last = groups.at(-1);
      if (last !== undefined && compare(last[0]!, row) === 0) last.push(row);
      else groups.push([row]);
    }

    const results: GroupOutputs[] = new Array(groups.length);
    return runSequentially<BatchOutput, GroupOutputs>(
      groups.length,
      {
        call: (index) => {
          const sub: Record<string, unknown> = {};
          for (const [name, tensor] of Object.entries(tensors)) {
            sub[name] = takeRows(tensor, groups[index]!);
          }
          const output = inner({ ...sub, ...others } as Inputs, context);
          if (isStream(output)) {
            throw new TritonRuntimeError(
              "Cannot group samples by values: the wrapped function returned a stream; groupByValues supports coupled models only",
            );
          }
          return output as BatchOutput | Promise<BatchOutput>;
        },
        collect: (index, output) => {
          results[index] = convertOutput(output, context?.model);
        },
        finish: () => scatter(pad === undefined ? results : pad(results), groups, size),
      },
    ) as BatchReturn;
  };
}

function scatter(
  results: readonly GroupOutputs[],
  groups: readonly (readonly number[])[],
  size: number,
): GroupOutputs {
  const first = results[0]!;
  const merged: GroupOutputs = {};
  for (const [name, tensor] of Object.entries(first)) merged[name] = emptyLike(tensor, size);
  results.forEach((outputs, index) => {
    const rows = groups[index]!;
    const missing = Object.keys(first).filter((name) => !(name in outputs));
    const extra = Object.keys(outputs).filter((name) => !(name in first));
    if (missing.length > 0 || extra.length > 0) {
      throw new TritonRuntimeError(
        `Cannot merge groups: outputs differ across groups: [${Object.keys(first)}] and [${
          Object.keys(outputs)
        }]`,
      );
    }
    for (const [name, tensor] of Object.entries(outputs)) {
      const target = merged[name]!;
      if (tensor.dtype !== target.dtype) {
        throw new TritonRuntimeError(
          `Cannot merge groups: output '${name}' has dtype ${target.dtype} in one group and ${tensor.dtype} in another`,
        );
      }
      if (!sameShape(tensor.shape.slice(1), target.shape.slice(1))) {
        throw new TritonRuntimeError(
          `Cannot merge groups: output '${name}' has trailing shape [${
            target.shape.slice(1)
          }] in one group and [${
            tensor.shape.slice(1)
          }] in another; pass padFn (e.g. new ConstantPadder()) to groupByValues`,
        );
      }
      if (tensor.shape[0] !== rows.length) {
        throw new TritonRuntimeError(
          `Cannot merge groups: output '${name}' has ${
            tensor.shape[0] ?? "no"
          } rows for a group of ${rows.length} samples`,
        );
      }
      const rowSize = shapeSize(tensor.shape.slice(1));
      rows.forEach((row, position) => {
        if (target.dtype === "bytes") {
          const data = target.data as Uint8Array[];
          for (let k = 0; k < rowSize; k++) {
            data[row * rowSize + k] = tensor.data[position * rowSize + k] as Uint8Array;
          }
        } else {
          const source = (tensor.data as TypedArray).subarray(
            position * rowSize,
            (position + 1) * rowSize,
          );
          // deno-lint-ignore no-explicit-any
          (target.data as any).set(source, row * rowSize);
        }
      });
    }
  });
  return merged;
}

/** The pad value in the representation of a dtype's TypedArray. */
function fillValue(dtype: NumericDType, value: number | bigint): number | bigint {
  if (isBigIntDType(dtype)) {
    if (typeof value === "bigint") return value;
    if (!Number.isInteger(value)) {
      throw new TritonRuntimeError(
        `Cannot pad ${dtype} output: pad value ${value} is not an integer`,
      );
    }
    return BigInt(value);
  }
  const number = Number(value);
  if (dtype === "bool") return number ? 1 : 0;
  if (dtype === "bfloat16") {
    // bfloat16 keeps raw bit patterns: the upper half of the float32, rounded to nearest even.
    const bits = new Uint32Array(new Float32Array([number]).buffer)[0]!;
    return Number.isNaN(number) ? 0x7fc0 : ((bits + 0x7fff + ((bits >>> 16) & 1)) >>> 16) & 0xffff;
  }
  return number;
}

/** A copy of `array` whose trailing shape is `tail`, new elements set to `value`. */
function padTo(array: NDArray, tail: readonly number[], value: number | bigint): NDArray {
  const from = array.shape.slice(1);
  if (sameShape(from, tail)) return array;
  const rows = array.shape[0]!;
  const shape = [rows, ...tail];
  const size = shapeSize(shape);
  let target: TypedArray | Uint8Array[];
  if (array.dtype === "bytes") {
    target = Array.from({ length: size }, () => new Uint8Array());
  } else {
    // deno-lint-ignore no-explicit-any
    target = new (arrayConstructorOf(array.dtype) as any)(size) as TypedArray;
    // deno-lint-ignore no-explicit-any
    (target as any).fill(fillValue(array.dtype, value));
  }
  // Walk every source element, carrying its index over from the source to the target strides.
  const full = array.shape;
  const targetStrides = shape.map((_, axis) => shapeSize(shape.slice(axis + 1)));
  const index = new Array<number>(full.length).fill(0);
  for (let source = 0; source < array.data.length; source++) {
    let offset = 0;
    for (let axis = 0; axis < full.length; axis++) offset += index[axis]! * targetStrides[axis]!;
    // deno-lint-ignore no-explicit-any
    (target as any)[offset] = array.data[source];
    for (let axis = full.length - 1; axis >= 0; axis--) {
      index[axis]! += 1;
      if (index[axis]! < full[axis]!) break;
      index[axis] = 0;
    }
  }
  return { dtype: array.dtype, shape, data: target } as NDArray;
}

/**
 * Pads every output across groups to the element-wise maximum trailing shape, with a constant
 * for numeric tensors and empty elements for bytes tensors (PyTriton's `ConstantPadder`). Pass it
 * as `padFn` to {@linkcode groupByValues}.
 *
 * @example Pad groups of different lengths with -1
 * ```ts
 * import { ConstantPadder, ndarray } from "../../../mod.ts";
 * import assert from "node:assert/strict";
 *
 * const padder = new ConstantPadder(-1);
 * const [a, b] = padder.pad([
 *   { y: ndarray(new Int32Array([1, 2]), [1, 2]) },
 *   { y: ndarray(new Int32Array([3, 4, 5]), [1, 3]) },
 * ]);
 * assert.deepEqual(a!.y!.shape, [1, 3]);
 * assert.deepEqual([...a!.y!.data], [1, 2, -1]);
 * assert.deepEqual([...b!.y!.data], [3, 4, 5]);
 * ```
 */
export class ConstantPadder implements Padder {
  #padValue: number | bigint;

  /**
   * Creates a padder.
   *
   * @param padValue The value of the new elements of numeric outputs (bytes get empty elements).
   */
  constructor(padValue: number | bigint = 0) {
    this.#padValue = padValue;
  }

  /** The value of the new elements of numeric outputs. */
  get padValue(): number | bigint {
    return this.#padValue;
  }

  /**
   * Pads the groups' outputs to equal trailing shapes.
   *
   * @param groups The outputs of each group, by name.
   * @returns The padded outputs, in the same order; outputs a group lacks stay absent.
   * @throws {TritonRuntimeError} When an output has different dtypes or ranks across groups.
   */
  pad(groups: readonly GroupOutputs[]): GroupOutputs[] {
    const names = [...new Set(groups.flatMap((outputs) => Object.keys(outputs)))];
    const padded = groups.map((outputs) => ({ ...outputs }));
    for (const name of names) {
      const present = groups.flatMap((outputs) =>
        outputs[name] === undefined ? [] : [outputs[name]!]
      );
      const dtypes = [...new Set(present.map((tensor) => tensor.dtype))];
      if (dtypes.length > 1) {
        throw new TritonRuntimeError(
          `Cannot pad output '${name}': all groups must return the same dtype, got ${
            dtypes.join(", ")
          }`,
        );
      }
      const ranks = [...new Set(present.map((tensor) => tensor.shape.length))];
      if (ranks.length > 1 || ranks[0] === 0) {
        throw new TritonRuntimeError(
          `Cannot pad output '${name}': all groups must return tensors of one rank with a batch axis, got shapes ${
            present.map((tensor) => `[${tensor.shape}]`).join(", ")
          }`,
        );
      }
      const tail = present[0]!.shape.slice(1).map((_, axis) =>
        Math.max(...present.map((tensor) => tensor.shape[axis + 1]!))
      );
      padded.forEach((outputs) => {
        const tensor = outputs[name];
        if (tensor !== undefined) outputs[name] = padTo(tensor, tail, this.#padValue);
      });
    }
    return padded;
  }
}
