/**
 * A callable's context: PyTriton's names for it ({@linkcode TritonContext},
 * {@linkcode getModelConfig}), and building one outside a server to unit-test a (decorated)
 * callable.
 *
 * @module
 */

import { type ModelConfig, resolveModelConfig } from "../config/model_config.ts";
import { resolveTensorSpecs, type TensorSpec } from "../config/tensor_spec.ts";
import { TritonValidationError } from "../errors.ts";
import { batchCalls } from "./calls.ts";
import type { InferContext, ModelCaller } from "./types.ts";
import { DISCARDED_METRICS, type MetricsBackend, ModelMetrics } from "./metrics.ts";
import type { ModelInfo } from "../config/model_info.ts";

/**
 * PyTriton's `TritonContext`: what a callable knows of the model it serves. PyTriton keeps one
 * per server in a registry keyed by callable, and `@triton_context` hands it to the function; in
 * DenoTriton it is the {@linkcode InferContext} every callable receives as its second argument
 * (decorators pass it down, `tritonContext` adds it to a batch-level function's inputs), typed,
 * for the model and instance of that call.
 */
export type TritonContext = InferContext;

/**
 * PyTriton's `get_model_config`: the configuration of the model a callable serves, as `bind()`
 * resolved it: name, version, declared inputs and outputs, and the serving configuration
 * (`maxBatchSize`, the batcher, `decoupled`, the response cache, instances, ...).
 *
 * @param context The context the callable received (its second argument, or `tritonContext`).
 * @returns The model's configuration.
 * @throws {TritonValidationError} When there is no context: the callable was called directly,
 *   not by a server (build one with {@linkcode inferContext} in a test).
 *
 * @example Read the model's configuration in a callable
 * ```ts
 * import {
 *   getModelConfig,
 *   inferContext,
 *   type InferFunc,
 *   inferRequest,
 *   ndarray,
 *   type TritonContext,
 * } from "../../mod.ts";
 * import assert from "node:assert/strict";
 *
 * const seen: string[] = [];
 * const infer: InferFunc = (requests, context: TritonContext) => {
 *   const { name, config, outputs } = getModelConfig(context);
 *   seen.push(`${name}: maxBatchSize ${config.maxBatchSize}, outputs ${outputs.map((o) => o.name)}`);
 *   return requests.map(() => ({}));
 * };
 * const context = inferContext({
 *   modelName: "Echo",
 *   inputs: [{ name: "x", dtype: "int32", shape: [1] }],
 *   outputs: [{ name: "y", dtype: "int32", shape: [1] }],
 *   config: { maxBatchSize: 16 },
 * });
 * infer([inferRequest({ x: ndarray(new Int32Array([1]), [1, 1]) })], context);
 * assert.deepEqual(seen, ["Echo: maxBatchSize 16, outputs y"]);
 * ```
 *
 * @example Called without a server's context
 * ```ts
 * import { getModelConfig, type TritonContext } from "../../mod.ts";
 * import assert from "node:assert/strict";
 *
 * assert.throws(
 *   () => getModelConfig(undefined as unknown as TritonContext),
 *   {
 *     name: "TritonValidationError",
 *     message: "Cannot get the model config: the callable is not bound to a model (no context was given)",
 *   },
 * );
 * ```
 */
export function getModelConfig(context: TritonContext): ModelInfo {
  const model = (context as Partial<InferContext> | undefined)?.model;
  if (typeof model !== "object" || model === null) {
    throw new TritonValidationError(
      "Cannot get the model config: the callable is not bound to a model (no context was given)",
    );
  }
  return model;
}

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
  /**
   * What runs the callable's calls to other models (`context.infer`): a stand-in for the server's
   * models in a unit test. Without one, a call throws.
   *
   * @default {undefined}
   */
  caller?: ModelCaller;
  /**
   * Where the context's metric changes go.
   *
   * @default {DISCARDED_METRICS (kept nowhere)}
   */
  metrics?: MetricsBackend;
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
  const base = {
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
    metrics: new ModelMetrics(options.metrics ?? DISCARDED_METRICS),
  };
  // Outside a server there is no batch: calls work for none, and are cancelled by their signal.
  return batchCalls(base, [], options.caller).context;
}
