/**
 * Ensembles as the user declares them: `ensemble()` builds what `bind()` takes for a model made
 * of steps, and `ensembleStep()` types a step by the model it runs (the options that model was
 * bound with), so a misspelled input or output of that model, or a required input left unmapped,
 * fails to compile. The server shows the ensemble as Triton shows one (platform `ensemble`,
 * `ensemble_scheduling` in its config); the Triton engine loads it into the core, whose ensemble
 * scheduler runs it, and the built-in engine runs it by the same rules.
 *
 * @module
 */

import type { EnsembleStepSpec } from "./config/ensemble.ts";
import type { ModelConfig } from "./config/model_config.ts";
import type { TensorSpec } from "./config/tensor_spec.ts";
import type { ModelRef, SpecName } from "./callable/types.ts";
import type { InstanceProvider, ModelInstance } from "./instances/instance.ts";

export type { EnsembleStepSpec } from "./config/ensemble.ts";

/**
 * The steps of an ensemble, where `bind()` takes a callable: an instance provider with no
 * instances (an ensemble runs its steps' models), which `bind()` recognizes.
 */
export class EnsembleSteps implements InstanceProvider {
  /** The steps, as declared. */
  readonly steps: readonly EnsembleStepSpec[];
  /** An ensemble has no instances. */
  readonly count = 0;
  /** No instances, no devices. */
  readonly devices: readonly string[] = [];

  /**
   * Wraps the steps.
   *
   * @param steps The steps.
   */
  constructor(steps: readonly EnsembleStepSpec[]) {
    this.steps = steps;
  }

  /**
   * Starts nothing.
   *
   * @returns No instances.
   */
  start(): Promise<ModelInstance[]> {
    return Promise.resolve([]);
  }
}

/**
 * Options of {@linkcode ensemble}.
 *
 * @typeParam I The ensemble's input specs.
 * @typeParam O The ensemble's output specs.
 */
export interface EnsembleOptions<
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
  /** The ensemble's inputs: the tensors its steps start from. */
  inputs: I;
  /** The ensemble's outputs: tensors its steps write. */
  outputs: O;
  /**
   * The steps (see {@linkcode ensembleStep}); each runs once every tensor it reads is there.
   */
  steps: readonly EnsembleStepSpec[];
  /**
   * The largest batch a request may carry (Triton's `max_batch_size`; at most that of each step's
   * model); 0: requests carry no batch axis, and steps whose model batches get a batch of one.
   *
   * @default {0}
   */
  maxBatchSize?: number;
}

/**
 * What {@linkcode ensemble} returns: the options `bind()`, `replace()` and `Triton.start()` take.
 *
 * @typeParam I The ensemble's input specs.
 * @typeParam O The ensemble's output specs.
 */
export interface EnsembleBindOptions<
  I extends readonly TensorSpec[],
  O extends readonly TensorSpec[],
> {
  /** Model name. */
  modelName: string;
  /** Model version. */
  modelVersion?: number;
  /** The steps. */
  inferFunc: EnsembleSteps;
  /** Inputs. */
  inputs: I;
  /** Outputs. */
  outputs: O;
  /** Batching, from `maxBatchSize`. */
  config: ModelConfig;
}

/**
 * Declares an ensemble (Triton's `ensemble_scheduling`): a model made of steps, each mapping
 * tensors of the ensemble to the inputs of a bound model and that model's outputs to tensors of
 * the ensemble. Bind it like any model, after the models its steps run.
 *
 * @typeParam I The ensemble's input specs, declared inline or `as const`.
 * @typeParam O The ensemble's output specs.
 * @param options Name, version, tensors, steps and batching.
 * @returns What `bind()` takes.
 *
 * @example Scale then shift, as one model
 * ```ts
 * import { type BindOptions, ensemble, ensembleStep, ndarray, Triton } from "../mod.ts";
 * import assert from "node:assert/strict";
 *
 * const vector = [{ name: "v", dtype: "float32", shape: [-1] }] as const;
 * const scale = {
 *   modelName: "Scale",
 *   inferFunc: (requests) => requests.map(({ v }) => ({ v: ndarray(v.data.map((x) => x * 10), v.shape) })),
 *   inputs: vector, outputs: vector, config: { batching: false },
 * } satisfies BindOptions<typeof vector, typeof vector>;
 * const shift = { ...scale, modelName: "Shift",
 *   inferFunc: (requests) => requests.map(({ v }) => ({ v: ndarray(v.data.map((x) => x + 1), v.shape) })),
 * } satisfies BindOptions<typeof vector, typeof vector>;
 * await using triton = await Triton.start({
 *   engine: "builtin",
 *   config: { httpPort: 0, allowGrpc: false, allowMetrics: false },
 *   models: [scale, shift],
 * });
 * await triton.bind(ensemble({
 *   modelName: "ScaleShift",
 *   inputs: [{ name: "x", dtype: "float32", shape: [-1] }],
 *   outputs: [{ name: "y", dtype: "float32", shape: [-1] }],
 *   steps: [
 *     ensembleStep(scale, { inputMap: { v: "x" }, outputMap: { v: "scaled" } }),
 *     ensembleStep(shift, { inputMap: { v: "scaled" }, outputMap: { v: "y" } }),
 *   ],
 * }));
 * const response = await fetch(`${triton.urls.http}/v2/models/ScaleShift/infer`, {
 *   method: "POST",
 *   body: JSON.stringify({ inputs: [{ name: "x", datatype: "FP32", shape: [2], data: [1, 2] }] }),
 * });
 * assert.deepEqual((await response.json()).outputs[0].data, [11, 21]);
 * ```
 */
export function ensemble<
  const I extends readonly TensorSpec[],
  const O extends readonly TensorSpec[],
>(options: EnsembleOptions<I, O>): EnsembleBindOptions<I, O> {
  const maxBatchSize = options.maxBatchSize ?? 0;
  return {
    modelName: options.modelName,
    ...(options.modelVersion === undefined ? {} : { modelVersion: options.modelVersion }),
    inferFunc: new EnsembleSteps(options.steps),
    inputs: options.inputs,
    outputs: options.outputs,
    config: maxBatchSize === 0 ? { batching: false } : { maxBatchSize },
  };
}

/**
 * A step's `inputMap` for a model with input specs `S`: each required input of the model maps to
 * an ensemble tensor, each optional one may.
 *
 * @typeParam S The model's input specs.
 */
export type StepInputMap<S extends readonly TensorSpec[]> = string extends SpecName<S[number]>
  ? Readonly<Record<string, string>>
  : (
    & {
      readonly [P in S[number] as P extends { readonly optional: true } ? never : SpecName<P>]:
        string;
    }
    & {
      readonly [P in S[number] as P extends { readonly optional: true } ? SpecName<P> : never]?:
        string;
    }
  );

/**
 * A step's `outputMap` for a model with output specs `S`: the outputs it keeps, each to an
 * ensemble tensor.
 *
 * @typeParam S The model's output specs.
 */
export type StepOutputMap<S extends readonly TensorSpec[]> = string extends SpecName<S[number]>
  ? Readonly<Record<string, string>>
  : { readonly [P in S[number] as SpecName<P>]?: string };

/**
 * One step of an ensemble, typed by the model it runs.
 *
 * @typeParam I The model's input specs.
 * @typeParam O The model's output specs.
 * @param model The model: the options it was bound with (or just its name and specs).
 * @param maps Which ensemble tensor each of its inputs reads and each output it keeps writes,
 *   and the model's version (the served one by default).
 * @returns The step.
 *
 * @example A required input left out fails to compile
 * ```ts
 * import { ensembleStep } from "../mod.ts";
 * import assert from "node:assert/strict";
 *
 * const detector = {
 *   modelName: "Detector",
 *   inputs: [{ name: "image", dtype: "uint8", shape: [-1, -1, 3] }],
 *   outputs: [{ name: "boxes", dtype: "float32", shape: [-1, 4] }],
 * } as const;
 * const step = ensembleStep(detector, { inputMap: { image: "photo" }, outputMap: { boxes: "boxes" } });
 * assert.deepEqual(step, { model: "Detector", inputMap: { image: "photo" }, outputMap: { boxes: "boxes" } });
 * ensembleStep(detector, {
 *   // @ts-expect-error: 'image' is required
 *   inputMap: {},
 *   outputMap: { boxes: "boxes" },
 * });
 * ```
 */
export function ensembleStep<
  const I extends readonly TensorSpec[],
  const O extends readonly TensorSpec[],
>(
  model: ModelRef<I, O>,
  maps: { inputMap: StepInputMap<I>; outputMap: StepOutputMap<O>; version?: number },
): EnsembleStepSpec {
  return {
    model: model.modelName,
    ...(maps.version === undefined ? {} : { version: maps.version }),
    inputMap: maps.inputMap as Readonly<Record<string, string>>,
    outputMap: maps.outputMap as Readonly<Record<string, string>>,
  };
}
