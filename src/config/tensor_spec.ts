/**
 * Tensor specifications of a bound model's inputs and outputs.
 *
 * @module
 */

import { TritonValidationError } from "../errors.ts";
import { type DType, type DTypeLike, toDType } from "../tensor/dtype.ts";

/** How the user declares an input or output of a model. */
export interface TensorSpec {
  /**
   * The tensor name; unnamed tensors become `INPUT_1`, `INPUT_2`, ... / `OUTPUT_1`, ...
   * by position.
   *
   * @default {undefined}
   */
  name?: string;
  /** The element type: `"float32"`, `"FP32"`, `Float32Array`, ... */
  dtype: DTypeLike;
  /** The dimensions without the batch axis; `-1` marks a dynamic dimension. */
  shape: readonly number[];
  /**
   * Whether a request may omit this input (inputs only).
   *
   * @default {false}
   */
  optional?: boolean;
  /**
   * Whether the tensor may be a `DeviceTensor` (GPU memory) instead of an `NDArray`. An input: a
   * client's CUDA shared-memory input reaches an instance on that GPU as a device tensor, with no
   * copy (elsewhere, and without this, the instance gets a host copy). An output: the callable
   * may return a device tensor, which goes into the client's CUDA region with a device-to-device
   * copy, or to the host with one copy. The callable's type then says `NDArray | DeviceTensor`.
   * Not for BYTES tensors.
   *
   * @default {false}
   */
  deviceTensor?: boolean;
}

/** A tensor spec after validation: named, with a normalised dtype. */
export interface ResolvedTensorSpec {
  /** The tensor name. */
  readonly name: string;
  /** The element type. */
  readonly dtype: DType;
  /** The dimensions without the batch axis; `-1` is dynamic. */
  readonly shape: readonly number[];
  /** Whether a request may omit it. */
  readonly optional: boolean;
  /** Present and `true` when the tensor may be a `DeviceTensor` (see `TensorSpec`). */
  readonly deviceTensor?: true;
}

const NAME = /^[a-zA-Z0-9_.\-:]+$/;

/**
 * Validates and names a list of tensor specs.
 *
 * @param specs The user's specs.
 * @param kind `"input"` or `"output"`; decides default names and whether `optional` is allowed.
 * @returns The resolved specs, in order.
 * @throws {TritonValidationError} For duplicate or bad names, bad dims, or optional outputs.
 *
 * @example Default names
 * ```ts
 * import { resolveTensorSpecs } from "./tensor_spec.ts";
 * import assert from "node:assert/strict";
 *
 * const [spec] = resolveTensorSpecs([{ dtype: "FP32", shape: [-1] }], "input");
 * assert.deepEqual(spec, { name: "INPUT_1", dtype: "float32", shape: [-1], optional: false });
 * ```
 */
export function resolveTensorSpecs(
  specs: readonly TensorSpec[],
  kind: "input" | "output",
): ResolvedTensorSpec[] {
  const seen = new Set<string>();
  return specs.map((spec, index) => {
    const name = spec.name ?? `${kind.toUpperCase()}_${index + 1}`;
    if (name.length === 0 || !NAME.test(name)) {
      throw new TritonValidationError(
        `Invalid ${kind} ${index + 1}: name ${JSON.stringify(name)} must match ${NAME}`,
      );
    }
    if (seen.has(name)) {
      throw new TritonValidationError(`Invalid ${kind} '${name}': the name is used twice`);
    }
    seen.add(name);
    if (!Array.isArray(spec.shape)) {
      throw new TritonValidationError(
        `Invalid ${kind} '${name}': shape must be an array of integers`,
      );
    }
    // The Triton core refuses a tensor without dimensions, and empty (0) dimensions: the
    // built-in engine follows, so a model binds on both engines or on neither.
    if (spec.shape.length === 0) {
      throw new TritonValidationError(
        `Invalid ${kind} '${name}': shape [] has no dimensions; give at least one ([1] for a single value)`,
      );
    }
    for (const dim of spec.shape) {
      if (!Number.isInteger(dim) || (dim < 1 && dim !== -1)) {
        throw new TritonValidationError(
          `Invalid ${kind} '${name}': dimension ${dim} in shape [${spec.shape}] must be -1 or an integer >= 1`,
        );
      }
    }
    if (kind === "output" && spec.optional) {
      throw new TritonValidationError(`Invalid output '${name}': outputs cannot be optional`);
    }
    let dtype: DType;
    try {
      dtype = toDType(spec.dtype);
    } catch (error) {
      throw new TritonValidationError(`Invalid ${kind} '${name}': ${(error as Error).message}`, {
        cause: error,
      });
    }
    if (spec.deviceTensor !== undefined && typeof spec.deviceTensor !== "boolean") {
      throw new TritonValidationError(`Invalid ${kind} '${name}': deviceTensor must be a boolean`);
    }
    if (spec.deviceTensor && dtype === "bytes") {
      throw new TritonValidationError(
        `Invalid ${kind} '${name}': a BYTES tensor cannot be a device tensor`,
      );
    }
    return {
      name,
      dtype,
      shape: [...spec.shape],
      optional: spec.optional ?? false,
      ...(spec.deviceTensor ? { deviceTensor: true as const } : {}),
    };
  });
}
