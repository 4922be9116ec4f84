/**
 * Building a {@linkcode ModelHandle} and model metadata from a bound model, the same way for both
 * engines. An engine builds each loaded version's handle once, when it loads, and hands that
 * handle out for every request.
 *
 * @module
 */

import type { ResolvedTensorSpec } from "../config/tensor_spec.ts";
import { kserveName } from "../tensor/dtype.ts";
import type { ModelHandle, ModelMetadata, TensorMetadata } from "./engine.ts";
import type { ModelInfo } from "../config/model_info.ts";

/** The platform both engines report: the backend's name. */
export const MODEL_PLATFORM = "denotriton";

function tensorMetadata(spec: ResolvedTensorSpec, batching: boolean): TensorMetadata {
  return {
    name: spec.name,
    datatype: kserveName(spec.dtype),
    shape: batching ? [-1, ...spec.shape] : [...spec.shape],
  };
}

/**
 * Triton's model metadata of a bound model: KServe datatypes, and a leading -1 on each shape
 * when the model batches.
 *
 * @param model The bound model.
 * @param versions The versions to list.
 * @returns `{name, versions, platform, inputs, outputs}`.
 *
 * @example A batching model
 * ```ts
 * import { modelMetadataOf } from "./model_handle.ts";
 * import { resolveModelConfig } from "../config/model_config.ts";
 * import assert from "node:assert/strict";
 *
 * const metadata = modelMetadataOf({
 *   name: "m", version: 2, strict: false, config: resolveModelConfig({ maxBatchSize: 4 }),
 *   inputs: [{ name: "x", dtype: "float32", shape: [3], optional: false }],
 *   outputs: [],
 * }, [2]);
 * assert.deepEqual(metadata.inputs, [{ name: "x", datatype: "FP32", shape: [-1, 3] }]);
 * assert.deepEqual(metadata.versions, ["2"]);
 * ```
 */
export function modelMetadataOf(model: ModelInfo, versions: readonly number[]): ModelMetadata {
  const batching = model.config.maxBatchSize > 0;
  return {
    name: model.name,
    versions: versions.map(String),
    // An ensemble shows as Triton shows one; every other model by its backend's name.
    platform: model.ensemble === undefined ? MODEL_PLATFORM : "ensemble",
    inputs: model.inputs.map((spec) => tensorMetadata(spec, batching)),
    outputs: model.outputs.map((spec) => tensorMetadata(spec, batching)),
  };
}

/**
 * The handle of a loaded model version.
 *
 * @param model The bound model.
 * @returns Its handle (frozen: requests share it).
 *
 * @example A decoupled model's handle, batch size and versions
 * ```ts
 * import { modelHandle } from "./model_handle.ts";
 * import { resolveModelConfig } from "../config/model_config.ts";
 * import assert from "node:assert/strict";
 *
 * const handle = modelHandle({
 *   name: "m", version: 1, strict: false,
 *   config: resolveModelConfig({ maxBatchSize: 8, decoupled: true }),
 *   inputs: [], outputs: [],
 * });
 * assert.equal(handle.decoupled, true);
 * assert.equal(handle.maxBatchSize, 8);
 * assert.deepEqual(handle.metadata.versions, ["1"]);
 * ```
 */
export function modelHandle(model: ModelInfo): ModelHandle {
  return Object.freeze({
    name: model.name,
    version: model.version,
    decoupled: model.config.decoupled,
    sequenceBatching: model.config.sequenceBatching !== undefined,
    maxBatchSize: model.config.maxBatchSize,
    inputs: model.inputs,
    outputs: model.outputs,
    metadata: modelMetadataOf(model, [model.version]),
    ...(model.openai === undefined ? {} : { openai: model.openai }),
  });
}
