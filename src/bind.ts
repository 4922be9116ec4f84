/**
 * What {@linkcode Triton.bind} accepts, and how it becomes a {@linkcode ModelDefinition}: the
 * name and version checked, tensor specs and the model config resolved, and the callable (or
 * list of callables) wrapped in main-thread instances unless it is an instance provider already.
 *
 * @module
 */

import type {
  CallableResult,
  InferCallable,
  InferContext,
  InferRequest,
  InferReturn,
  TensorsOf,
} from "./callable/types.ts";
import { type ModelConfig, resolveModelConfig } from "./config/model_config.ts";
import { resolveTensorSpecs, type TensorSpec } from "./config/tensor_spec.ts";
import { checkSequenceTensors } from "./config/sequence_batching.ts";
import type { ModelDefinition } from "./engine/engine.ts";
import { TritonBadParameterError, TritonValidationError } from "./errors.ts";
import type { InstanceProvider } from "./instances/instance.ts";
import { MainThreadInstances } from "./instances/main_thread.ts";
import type { FacadePlan } from "./wiring.ts";
import { type OpenAIOptions, openAIServingOf } from "./protocol/openai.ts";
import { EnsembleSteps } from "./ensemble.ts";
import { resolveEnsemble } from "./config/ensemble.ts";

/**
 * The callable `bind()` accepts for inputs `I` and outputs `O`: an {@linkcode InferCallable} of
 * exactly those types when the specs are typed; when they are not (`I` is the wide `Tensors`),
 * also a callable typed for particular inputs, since only the server can check those.
 *
 * @typeParam I The inputs.
 * @typeParam O The outputs.
 */
export type BindCallable<I, O> = string extends keyof I ?
    | {
      bivariant(requests: InferRequest<I>[], context: InferContext): InferReturn<CallableResult<O>>;
    }["bivariant"]
    | { infer(requests: InferRequest<I>[], context: InferContext): InferReturn<CallableResult<O>> }
  : InferCallable<I, O>;

/**
 * Options of {@linkcode Triton.bind}. The tensor specs type the callable: declared inline (or
 * `as const`), `inputs` give the callable's inputs by name and dtype, and `outputs` what it must
 * return, so a misspelled name or a wrong dtype fails to compile. Specs built at run time
 * (`TensorSpec[]`) give the untyped {@linkcode Tensors}.
 *
 * @typeParam I The input specs.
 * @typeParam O The output specs.
 */
export interface BindOptions<
  I extends readonly TensorSpec[] = readonly TensorSpec[],
  O extends readonly TensorSpec[] = readonly TensorSpec[],
> {
  /** Model name: letters, digits, `.`, `_`, `-`. */
  modelName: string;
  /**
   * Model version.
   *
   * @default {1}
   */
  modelVersion?: number;
  /**
   * The inference callable, a list of them (one instance each, served round-robin over idle
   * instances), or an instance provider such as Workers.
   */
  inferFunc:
    | BindCallable<TensorsOf<I>, TensorsOf<O>>
    | readonly BindCallable<TensorsOf<I>, TensorsOf<O>>[]
    | InstanceProvider;
  /** Input tensor specs. */
  inputs: I;
  /** Output tensor specs. */
  outputs: O;
  /**
   * Serving configuration of the model.
   *
   * @default {{}}
   */
  config?: ModelConfig;
  /**
   * Validate output names, dtypes, ranks and fixed dims strictly instead of converting.
   *
   * @default {false}
   */
  strict?: boolean;
  /**
   * Serve the model on the OpenAI API too (`/v1/chat/completions`, `/v1/completions`,
   * `/v1/embeddings`, `/v1/models`). Its tensors must follow the contract of those endpoints:
   * `chatModel()` and `embeddingModel()` build such models.
   *
   * @default {undefined: KServe only}
   */
  openai?: OpenAIOptions;
}

const MODEL_NAME = /^[a-zA-Z0-9._-]+$/;

function isInstanceProvider(value: unknown): value is InstanceProvider {
  return typeof value === "object" && value !== null && "start" in value && "count" in value &&
    typeof (value as InstanceProvider).start === "function";
}

function instancesOf(
  name: string,
  inferFunc: InferCallable | readonly InferCallable[] | InstanceProvider,
): InstanceProvider {
  if (isInstanceProvider(inferFunc)) return inferFunc;
  const callables = Array.isArray(inferFunc) ? inferFunc : [inferFunc as InferCallable];
  if (callables.length === 0) {
    throw new TritonValidationError(`Cannot bind model '${name}': inferFunc is an empty list`);
  }
  callables.forEach((callable, index) => {
    const ok = typeof callable === "function" ||
      (typeof callable === "object" && callable !== null &&
        typeof (callable as { infer?: unknown }).infer === "function");
    if (!ok) {
      throw new TritonValidationError(
        `Cannot bind model '${name}': inferFunc${
          Array.isArray(inferFunc) ? `[${index}]` : ""
        } must be a function or an object with an infer method`,
      );
    }
  });
  return new MainThreadInstances(callables);
}

/**
 * Checks and resolves what `bind()` was given.
 *
 * @param options The model: name, version, callable(s), tensors, config, strictness.
 * @param server What the server offers (whether it has a response cache).
 * @returns The model for the engine.
 * @throws {TritonValidationError} For an invalid name, version, tensor spec or callable.
 * @throws {TritonBadParameterError} For an invalid model config, or `responseCache` on a server
 *   without a response cache.
 *
 * @example Resolve a model definition and refuse a bad model name
 * ```ts
 * import { type BindOptions, modelDefinitionOf } from "./bind.ts";
 * import assert from "node:assert/strict";
 *
 * const server = { http: true, grpc: true, metrics: true, exitOnError: true, responseCache: false };
 * const echo = {
 *   modelName: "Echo",
 *   inferFunc: (requests) => requests.map((r) => ({ y: r.data.x! })),
 *   inputs: [{ name: "x", dtype: "float32", shape: [-1] }],
 *   outputs: [{ name: "y", dtype: "float32", shape: [-1] }],
 * } satisfies BindOptions;
 * const model = modelDefinitionOf(echo, server);
 * assert.equal(model.version, 1);
 * assert.throws(
 *   () => modelDefinitionOf({ ...echo, modelName: "no spaces" }, server),
 *   /the name must match/,
 * );
 * ```
 */
export function modelDefinitionOf(
  options: BindOptions,
  server: Pick<FacadePlan, "responseCache">,
): ModelDefinition {
  const name = options.modelName;
  if (typeof name !== "string" || name.length === 0) {
    throw new TritonValidationError("Cannot bind model: name is empty");
  }
  // "." and ".." would name the repository's own directories in the Triton engine.
  if (!MODEL_NAME.test(name) || name === "." || name === "..") {
    throw new TritonValidationError(
      `Cannot bind model '${name}': the name must match ${MODEL_NAME}`,
    );
  }
  const version = options.modelVersion ?? 1;
  if (!Number.isInteger(version) || version < 1) {
    throw new TritonValidationError(
      `Cannot bind model '${name}': modelVersion must be an integer >= 1, got ${version}`,
    );
  }
  const config = resolveModelConfig(options.config);
  if (config.responseCache && !server.responseCache) {
    throw new TritonBadParameterError(
      `Cannot bind model '${name}': responseCache is on but the server has no response cache (set responseCacheByteSize or a cacheConfig entry)`,
    );
  }
  const inputs = resolveTensorSpecs(options.inputs, "input");
  const outputs = resolveTensorSpecs(options.outputs, "output");
  if (options.inferFunc instanceof EnsembleSteps) {
    return ensembleDefinitionOf(options, options.inferFunc, { name, version, inputs, outputs });
  }
  if (config.sequenceBatching !== undefined) {
    checkSequenceTensors(name, config.sequenceBatching, { inputs, outputs });
  }
  const openai = options.openai === undefined
    ? undefined
    : openAIServingOf(name, options.openai, { inputs, outputs, config });
  return {
    name,
    version,
    inputs,
    outputs,
    config,
    ...(openai === undefined ? {} : { openai }),
    strict: options.strict ?? false,
    // The typed callable meets the engine's untyped requests here; the engine validates the wire.
    instances: instancesOf(name, options.inferFunc as BindOptions["inferFunc"]),
  };
}

/** The config fields an ensemble takes: it has no batcher, cache or instances of its own. */
const ENSEMBLE_CONFIG_FIELDS: ReadonlySet<string> = new Set(["batching", "maxBatchSize"]);

/** The definition of an ensemble (`ensemble()`'s options): its steps checked, no instances. */
function ensembleDefinitionOf(
  options: BindOptions,
  steps: EnsembleSteps,
  model: Pick<ModelDefinition, "name" | "version" | "inputs" | "outputs">,
): ModelDefinition {
  const refused = Object.keys(options.config ?? {}).filter((key) =>
    !ENSEMBLE_CONFIG_FIELDS.has(key)
  );
  if (refused.length > 0) {
    throw new TritonBadParameterError(
      `Cannot bind ensemble '${model.name}': config.${
        refused[0]
      } does not apply to an ensemble (its steps' models have their own)`,
    );
  }
  if (options.openai !== undefined) {
    throw new TritonValidationError(
      `Cannot bind ensemble '${model.name}': it cannot be served on the OpenAI API`,
    );
  }
  return {
    ...model,
    config: resolveModelConfig(options.config),
    strict: false,
    ensemble: resolveEnsemble(model.name, steps.steps, model),
    instances: steps,
  };
}
