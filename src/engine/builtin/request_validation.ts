/**
 * Validation of an inference request against its model before it is queued: input names,
 * dtypes, shapes, batch size and requested outputs.
 *
 * @module
 */

import { InferenceError } from "../../errors.ts";
import { kserveName } from "../../tensor/dtype.ts";
import { isDeviceTensor } from "../../tensor/device_tensor.ts";
import { shapeSize } from "../../tensor/ndarray.ts";
import type { InferenceRequest } from "../engine.ts";
import { refuseMissingInputs } from "../required_inputs.ts";
import type { ModelInfo } from "../../config/model_info.ts";

/** What validation learned about a request. */
export interface ValidatedRequest {
  /** The request's batch size (1 for non-batching models). */
  readonly batchSize: number;
  /** The outputs to answer, in declared order. */
  readonly outputs: readonly string[];
  /** Equal for requests whose inputs may share a batch (names, dtypes, non-batch dims). */
  readonly shapeKey: string;
}

function invalid(model: ModelInfo, detail: string): InferenceError {
  return InferenceError.invalidArg(`Invalid request for model '${model.name}': ${detail}`);
}

function shown(shape: readonly number[]): string {
  return `[${shape.join(",")}]`;
}

/** What validation looks up in a model, built once per model. */
interface ModelLookups {
  /** Its inputs by name, with their declared position. */
  readonly inputs: ReadonlyMap<
    string,
    { readonly spec: ModelInfo["inputs"][number]; readonly at: number }
  >;
  /** Its output names in declared order: the outputs of a request that names none. */
  readonly outputNames: readonly string[];
}

// Per model, not per request: a loaded model's inputs and outputs do not change.
const lookups = new WeakMap<ModelInfo, ModelLookups>();

function lookupsOf(model: ModelInfo): ModelLookups {
  let found = lookups.get(model);
  if (found === undefined) {
    found = {
      inputs: new Map(model.inputs.map((spec, at) => [spec.name, { spec, at }])),
      outputNames: Object.freeze(model.outputs.map((spec) => spec.name)),
    };
    lookups.set(model, found);
  }
  return found;
}

/** Whether `shape` fits the declared `dims` (after the batch dimension when `from` is 1). */
function fits(shape: readonly number[], dims: readonly number[], from: number): boolean {
  if (shape.length !== dims.length + from) return false;
  for (let i = 0; i < dims.length; i++) {
    const dim = dims[i]!;
    if (dim !== -1 && dim !== shape[i + from]) return false;
  }
  return true;
}

/**
 * Checks a request against a model.
 *
 * @param model The model.
 * @param request The request.
 * @returns Its batch size, the outputs to answer and its batching key.
 * @throws {InferenceError} (INVALID_ARG) Naming the model, the tensor and the problem.
 *
 * @example A dtype mismatch
 * ```ts
 * import { validateInferenceRequest } from "./request_validation.ts";
 * import { resolveModelConfig } from "../../config/model_config.ts";
 * import { ndarray } from "../../tensor/ndarray.ts";
 * import assert from "node:assert/strict";
 *
 * const model = {
 *   name: "m", version: 1, strict: false,
 *   inputs: [{ name: "a", dtype: "float32" as const, shape: [-1], optional: false }],
 *   outputs: [{ name: "y", dtype: "float32" as const, shape: [-1], optional: false }],
 *   config: resolveModelConfig({ maxBatchSize: 4 }),
 * };
 * const ok = validateInferenceRequest(model, {
 *   modelName: "m", parameters: {},
 *   inputs: new Map([["a", ndarray(new Float32Array(6), [2, 3])]]),
 * });
 * assert.equal(ok.batchSize, 2);
 * assert.throws(() => validateInferenceRequest(model, {
 *   modelName: "m", parameters: {},
 *   inputs: new Map([["a", ndarray(new Float64Array(3), [1, 3])]]),
 * }), /unexpected datatype FP64 for input 'a', expecting FP32/);
 * ```
 */
export function validateInferenceRequest(
  model: ModelInfo,
  request: InferenceRequest,
): ValidatedRequest {
  const batching = model.config.maxBatchSize > 0;
  const { inputs: declared, outputNames } = lookupsOf(model);
  let batchSize: number | undefined;
  let batchFrom = "";
  // One part per declared input, in declared order: the key is the same whatever order the
  // request named its inputs in, without sorting.
  const keyParts: string[] = new Array(model.inputs.length).fill("");
  for (const [name, array] of request.inputs) {
    const { spec, at } = declared.get(name) ?? {};
    if (spec === undefined || at === undefined) {
      throw invalid(
        model,
        `unexpected input '${name}' (model inputs: ${[...declared.keys()].join(", ") || "none"})`,
      );
    }
    if (array.dtype !== spec.dtype) {
      throw invalid(
        model,
        `unexpected datatype ${kserveName(array.dtype)} for input '${name}', expecting ${
          kserveName(spec.dtype)
        }`,
      );
    }
    const shape = array.shape;
    for (const dim of shape) {
      if (!Number.isInteger(dim) || dim < 0) {
        throw invalid(model, `input '${name}' has an invalid shape ${shown(shape)}`);
      }
    }
    // A device tensor's size follows from its shape (the front end checked its region's bytes).
    if (!isDeviceTensor(array) && shapeSize(shape) !== array.data.length) {
      throw invalid(
        model,
        `input '${name}' has shape ${shown(shape)} (${
          shapeSize(shape)
        } elements) but ${array.data.length} data elements`,
      );
    }
    if (!fits(shape, spec.shape, batching ? 1 : 0)) {
      const expected = batching ? [-1, ...spec.shape] : spec.shape;
      throw invalid(
        model,
        `unexpected shape for input '${name}': expected ${shown(expected)}, got ${shown(shape)}${
          batching && shape.length === spec.shape.length
            ? " (the first dimension is the batch size)"
            : ""
        }`,
      );
    }
    if (batching) {
      const rows = shape[0]!;
      if (rows < 1 || rows > model.config.maxBatchSize) {
        throw invalid(
          model,
          `batch size ${rows} of input '${name}' must be within [1, ${model.config.maxBatchSize}]`,
        );
      }
      if (batchSize === undefined) {
        batchSize = rows;
        batchFrom = name;
      } else if (rows !== batchSize) {
        throw invalid(
          model,
          `inputs '${batchFrom}' and '${name}' have different batch sizes (${batchSize} and ${rows})`,
        );
      }
    }
    // The name and dtype are the declared input's (checked above): only the dims vary. "+"
    // marks a present input, so an absent optional one differs from a present scalar.
    keyParts[at] = "+" + (batching ? shape.slice(1).join(",") : shape.join(","));
  }
  // Each input was found among the declared ones above: as many as declared means all of them.
  if (request.inputs.size < model.inputs.length) {
    refuseMissingInputs(model, (name) => request.inputs.has(name));
  }
  let outputs: readonly string[];
  if (request.outputs === undefined || request.outputs.length === 0) {
    outputs = outputNames;
  } else {
    const asked = new Set(request.outputs);
    for (const name of asked) {
      if (!model.outputs.some((spec) => spec.name === name)) {
        throw invalid(
          model,
          `unexpected requested output '${name}' (model outputs: ${
            model.outputs.map((spec) => spec.name).join(", ") || "none"
          })`,
        );
      }
    }
    outputs = model.outputs.filter((spec) => asked.has(spec.name)).map((spec) => spec.name);
  }
  return { batchSize: batchSize ?? 1, outputs, shapeKey: keyParts.join(";") };
}
