/**
 * Building an {@linkcode InferContext} outside a server, to unit-test a (decorated) callable.
 *
 * @module
 */

import { type ModelConfig, resolveModelConfig } from "../config/model_config.ts";
import { resolveTensorSpecs, type TensorSpec } from "../config/tensor_spec.ts";
import type { InferContext } from "./types.ts";

/**
 * Options of {@linkcode inferContext}: the fields of `bind()`'s options that describe the model,
 * so the object given to `bind()` can be passed as it is, and the instance.
 */
export interface InferContextOptions {
  /**
   * Model name.
   *
   * @default {"model"}
   */
  modelName?: string;
  /**
   * Model version.
   *
   * @default {1}
   */
  modelVersion?: number;
  /**
   * Input tensor specs.
   *
   * @default {[]}
   */
  inputs?: readonly TensorSpec[];
  /**
   * Output tensor specs.
   *
   * @default {[]}
   */
  outputs?: readonly TensorSpec[];
  /**
   * Serving configuration of the model.
   *
   * @default {{}}
   */
  config?: ModelConfig;
  /**
   * Whether outputs are validated strictly.
   *
   * @default {false}
   */
  strict?: boolean;
  /**
   * Index of the instance.
   *
   * @default {0}
   */
  instanceIndex?: number;
  /**
   * Device of the instance.
   *
   * @default {"cpu"}
   */
  device?: string;
}

/**
 * Builds the context a bound callable receives as its second argument, with the specs and
 * configuration resolved as `bind()` resolves them, so decorators that read the model
 * (`fillOptionals`, `padBatch`, positional outputs, ...) can run in a unit test.
 *
 * @param options The model's name, specs and configuration (the object given to `bind()` will
 *   do), and the instance.
 * @returns The context.
 * @throws {TritonValidationError} For an invalid tensor spec.
 * @throws {TritonBadParameterError} For an invalid model configuration.
 *
 * @example Unit-test a batched callable
 * ```ts
 * import { batch, inferContext, inferRequest, type InferResult, ndarray } from "../../mod.ts";
 * import assert from "node:assert/strict";
 *
 * const context = inferContext({
 *   modelName: "Sum",
 *   inputs: [{ name: "x", dtype: "float32", shape: [2] }],
 *   outputs: [{ name: "sum", dtype: "float32", shape: [1] }],
 *   config: { maxBatchSize: 4 },
 * });
 * assert.equal(context.model.config.maxBatchSize, 4);
 * const infer = batch(() => [ndarray(new Float32Array([3, 7]), [2, 1])]); // positional outputs
 * const results = infer([inferRequest({ x: ndarray(new Float32Array(4), [2, 2]) })], context);
 * assert.deepEqual(Object.keys((results as InferResult[])[0] ?? {}), ["sum"]);
 * ```
 */
export function inferContext(options: InferContextOptions = {}): InferContext {
  return {
    model: {
      name: options.modelName ?? "model",
      version: options.modelVersion ?? 1,
      inputs: resolveTensorSpecs(options.inputs ?? [], "input"),
      outputs: resolveTensorSpecs(options.outputs ?? [], "output"),
      config: resolveModelConfig(options.config),
      strict: options.strict ?? false,
    },
    instanceIndex: options.instanceIndex ?? 0,
    device: options.device ?? "cpu",
  };
}
