/**
 * Validation of what an inference callable returned, with PyTriton's rules: always one plain
 * object of NDArrays per request (bytes elements as `Uint8Array`), or a request whose `data` is
 * read as its outputs (the identity `requests => requests`), and with `strict` the declared
 * names, dtypes and shapes. Without `strict`, undeclared or unrequested outputs are dropped and
 * numeric outputs are converted to the declared dtype. A `DeviceTensor` is an output only where
 * its spec says `deviceTensor: true`, and always of the declared dtype (nothing converts it).
 *
 * @module
 */

import { InferenceError } from "../errors.ts";
import {
  arrayConstructorOf,
  type DType,
  DTYPES,
  isBigIntDType,
  newTypedArray,
  type NumericDType,
} from "../tensor/dtype.ts";
import { isNDArray, type NDArray, type NumericNDArray, shapeSize } from "../tensor/ndarray.ts";
import { isDeviceTensor, type Tensor } from "../tensor/device_tensor.ts";
import { isInferRequest } from "./request.ts";
import type { AnyTensors, InferRequest, InferResult } from "./types.ts";
import type { ModelInfo } from "../config/model_info.ts";

const KNOWN_DTYPES = new Set<string>(DTYPES);

function fail(model: ModelInfo, detail: string): InferenceError {
  return new InferenceError(`Invalid output of model '${model.name}': ${detail}`, {
    code: "INTERNAL",
  });
}

function describe(value: unknown): string {
  if (value === null) return "null";
  if (value === undefined) return "undefined";
  if (Array.isArray(value)) return `an array of length ${value.length}`;
  if (typeof value === "object") return (value as object).constructor?.name ?? "an object";
  return typeof value;
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  if (typeof value !== "object" || value === null || Array.isArray(value)) return false;
  const proto = Object.getPrototypeOf(value);
  return proto === Object.prototype || proto === null;
}

function batchSizeOf(request: InferRequest<AnyTensors>): number | undefined {
  for (const array of Object.values(request.data)) return array.shape[0];
  return undefined;
}

function bf16ToFloat(bits: number): number {
  const view = new DataView(new ArrayBuffer(4));
  view.setUint32(0, bits << 16);
  return view.getFloat32(0);
}

function floatToBf16(value: number): number {
  const view = new DataView(new ArrayBuffer(4));
  view.setFloat32(0, value);
  const bits = view.getUint32(0);
  if (Number.isNaN(value)) return 0x7fc0;
  // Round to nearest even, as numpy/ml_dtypes do.
  return ((bits + 0x7fff + ((bits >>> 16) & 1)) >>> 16) & 0xffff;
}

/** Reads element values of a numeric array as numbers or bigints (bf16 decoded). */
function readValues(array: NumericNDArray): (number | bigint)[] {
  if (array.dtype === "bfloat16") return Array.from(array.data as Uint16Array, bf16ToFloat);
  return Array.from(array.data as ArrayLike<number | bigint>);
}

function convertNumeric(
  model: ModelInfo,
  name: string,
  array: NumericNDArray,
  dtype: NumericDType,
): NumericNDArray {
  const values = readValues(array);
  const count = values.length;
  const data = newTypedArray(dtype, count);
  const big = isBigIntDType(dtype);
  for (let i = 0; i < count; i++) {
    const value = values[i]!;
    if (dtype === "bool") {
      (data as Uint8Array)[i] = value ? 1 : 0;
    } else if (dtype === "bfloat16") {
      (data as Uint16Array)[i] = floatToBf16(Number(value));
    } else if (big) {
      if (typeof value === "bigint") {
        (data as BigInt64Array)[i] = value;
      } else {
        if (!Number.isFinite(value)) {
          throw fail(
            model,
            `output '${name}' holds ${value}, which cannot be converted to the declared dtype ${dtype}`,
          );
        }
        (data as BigInt64Array)[i] = BigInt(Math.trunc(value));
      }
    } else {
      (data as Float64Array)[i] = Number(value);
    }
  }
  return { dtype, shape: array.shape, data } as NumericNDArray;
}

function checkArray(model: ModelInfo, name: string, value: unknown, index: number): NDArray {
  if (!isNDArray(value)) {
    throw fail(
      model,
      `output '${name}' of request ${index} is ${
        describe(value)
      }, expected an NDArray (use ndarray() to build one)`,
    );
  }
  if (!KNOWN_DTYPES.has(value.dtype)) {
    throw fail(model, `output '${name}' has unknown dtype ${JSON.stringify(value.dtype)}`);
  }
  for (const dim of value.shape) {
    if (!Number.isInteger(dim) || dim < 0) {
      throw fail(model, `output '${name}' has an invalid shape [${value.shape}]`);
    }
  }
  if (value.dtype === "bytes") {
    value.data.forEach((element: unknown, at) => {
      if (element instanceof Uint8Array) return;
      throw fail(
        model,
        typeof element === "string"
          ? `output '${name}' holds a string at element ${at}; bytes outputs must hold Uint8Array elements (encode strings with TextEncoder, or build the tensor with ndarray())`
          : `output '${name}' holds ${
            describe(element)
          } at element ${at}; bytes outputs must hold Uint8Array elements`,
      );
    });
  } else if (value.data.constructor !== arrayConstructorOf(value.dtype)) {
    throw fail(
      model,
      `output '${name}' has dtype ${value.dtype} but its data is a ${value.data.constructor.name}`,
    );
  }
  if (shapeSize(value.shape) !== value.data.length) {
    throw fail(
      model,
      `output '${name}' has shape [${value.shape}] (${
        shapeSize(value.shape)
      } elements) but ${value.data.length} data elements`,
    );
  }
  return value;
}

function checkShape(
  model: ModelInfo,
  name: string,
  shape: readonly number[],
  declared: readonly number[],
  batching: boolean,
): void {
  const dims = batching ? shape.slice(1) : shape;
  const wanted = `[${batching ? "-1," : ""}${declared}]`.replace(",]", "]");
  if (
    dims.length !== declared.length ||
    dims.some((dim, i) => declared[i] !== -1 && declared[i] !== dim)
  ) {
    throw fail(model, `output '${name}' has shape [${shape}], expected ${wanted}`);
  }
}

/** A model's outputs by name, with its implicit states' outputs, and the states' names. */
interface OutputSpecs {
  readonly declared: ReadonlyMap<string, ModelInfo["outputs"][number]>;
  readonly states: ReadonlySet<string>;
}

// Built once per model, not per batch: a loaded model's outputs do not change.
const outputSpecs = new WeakMap<ModelInfo, OutputSpecs>();

function outputSpecsOf(model: ModelInfo): OutputSpecs {
  let specs = outputSpecs.get(model);
  if (specs !== undefined) return specs;
  const declared = new Map(model.outputs.map((spec) => [spec.name, spec]));
  // Implicit states (sequence batching) come back as outputs of their own, checked like declared
  // outputs and always kept: the engine takes them as the sequences' next states.
  const states = new Set<string>();
  for (const state of model.config.sequenceBatching?.states ?? []) {
    states.add(state.outputName);
    declared.set(state.outputName, {
      name: state.outputName,
      dtype: state.dtype,
      shape: state.shape,
      optional: false,
    });
  }
  specs = { declared, states };
  outputSpecs.set(model, specs);
  return specs;
}

function dtypeMismatch(name: string, got: DType, wanted: DType): string {
  return `output '${name}' has dtype ${got}, expected ${wanted}`;
}

/**
 * Validates the results of one call (or one step of a decoupled model) against the batch and the
 * model, returning one cleaned result per request.
 *
 * @param results What the callable returned.
 * @param requests The batch it was called with.
 * @param model The model.
 * @returns The validated results (non-strict: dropped and converted outputs applied).
 * @throws {InferenceError} (INTERNAL) Naming the output and the problem.
 *
 * @example Non-strict conversion and dropping
 * ```ts
 * import { validateResults } from "./validate.ts";
 * import { resolveModelConfig } from "../config/model_config.ts";
 * import { ndarray } from "../tensor/ndarray.ts";
 * import assert from "node:assert/strict";
 *
 * const model = {
 *   name: "m", version: 1, strict: false, inputs: [],
 *   outputs: [{ name: "y", dtype: "float32" as const, shape: [1], optional: false }],
 *   config: resolveModelConfig({ batching: false }),
 * };
 * const request = { data: {}, parameters: {}, requestedOutputNames: ["y"], signal: new AbortController().signal };
 * const [result] = validateResults([{ y: ndarray([2]), extra: ndarray([1]) }], [request], model);
 * assert.deepEqual(Object.keys(result!), ["y"]);
 * assert.equal(result!.y!.dtype, "float32");
 * ```
 */
export function validateResults(
  results: unknown,
  requests: readonly InferRequest<AnyTensors>[],
  model: ModelInfo,
): InferResult<AnyTensors>[] {
  if (!Array.isArray(results)) {
    throw fail(
      model,
      `the callable returned ${
        describe(results)
      }, expected an array with one result per request (${requests.length})`,
    );
  }
  if (results.length !== requests.length) {
    throw fail(
      model,
      `the callable returned ${results.length} results for ${requests.length} requests, expected one per request`,
    );
  }
  const batching = model.config.batching;
  const { declared, states } = outputSpecsOf(model);
  return results.map((entry: unknown, index) => {
    // A request given back as its result (PyTriton's identity, `requests => requests`): its inputs
    // are the outputs.
    const result = isInferRequest(entry) ? entry.data : entry;
    if (!isPlainObject(result)) {
      throw fail(
        model,
        `result ${index} is ${
          describe(result)
        }, expected a plain object of NDArrays by output name`,
      );
    }
    const request = requests[index]!;
    // A few names: a scan costs less than building a Set per result.
    const requested = request.requestedOutputNames;
    const batchSize = batching ? batchSizeOf(request) : undefined;
    const cleaned: InferResult<AnyTensors> = {};
    const checkBatch = (name: string, tensor: Tensor): void => {
      if (!batching) return;
      if (tensor.shape.length === 0) {
        throw fail(model, `output '${name}' is a scalar but the model batches: axis 0 is missing`);
      }
      if (batchSize !== undefined && tensor.shape[0] !== batchSize) {
        throw fail(
          model,
          `output '${name}' has batch size ${
            tensor.shape[0]
          } (axis 0 of shape [${tensor.shape}]) but request ${index} has batch size ${batchSize}`,
        );
      }
    };
    for (const name in result) {
      if (!Object.hasOwn(result, name)) continue;
      const value = (result as Record<string, unknown>)[name];
      const spec = declared.get(name);
      if (isDeviceTensor(value) && spec !== undefined) {
        if (!spec.deviceTensor) {
          throw fail(
            model,
            `output '${name}' of request ${index} is a DeviceTensor, but the model does not declare it with deviceTensor: true`,
          );
        }
        if (value.dtype !== spec.dtype) {
          throw fail(model, dtypeMismatch(name, value.dtype, spec.dtype));
        }
        checkBatch(name, value);
        if (model.strict) checkShape(model, name, value.shape, spec.shape, batching);
        if (requested.includes(name)) cleaned[name] = value;
        continue;
      }
      // An undeclared device tensor is dropped, or refused (strict), like any undeclared output.
      const checked = isDeviceTensor(value) ? undefined : checkArray(model, name, value, index);
      if (spec === undefined || checked === undefined) {
        if (model.strict) {
          throw fail(
            model,
            `output '${name}' is not declared (declared outputs: ${
              [...declared.keys()].join(", ") || "none"
            })`,
          );
        }
        continue;
      }
      let array = checked;
      checkBatch(name, array);
      if (model.strict) {
        if (array.dtype !== spec.dtype) {
          throw fail(model, dtypeMismatch(name, array.dtype, spec.dtype));
        }
        checkShape(model, name, array.shape, spec.shape, batching);
      } else if (array.dtype !== spec.dtype) {
        if (array.dtype === "bytes" || spec.dtype === "bytes") {
          throw fail(model, dtypeMismatch(name, array.dtype, spec.dtype));
        }
        array = convertNumeric(model, name, array, spec.dtype);
      }
      if (!requested.includes(name) && !states.has(name)) continue;
      cleaned[name] = array;
    }
    return cleaned;
  });
}
