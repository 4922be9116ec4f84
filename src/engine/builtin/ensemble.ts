/**
 * The built-in engine's ensembles, by the rules of Triton's ensemble scheduler: a load checks each
 * step against its model (with the core's messages), and a request runs each step as soon as the
 * tensors it reads are there (independent steps at once), as an ordinary request of the step's
 * model (its scheduler, batching, statistics) with the ensemble as its parent and the
 * ensemble's parameters and priority. A step's outputs become the tensors its `outputMap` names;
 * once every step is done, the ensemble answers its requested outputs. When the ensemble does
 * not batch but a step's model does, the step's inputs get a batch axis of 1 and its outputs
 * lose it, as the core does. A failing step fails the request (naming the ensemble and the
 * step's model) and cancels the steps still running.
 *
 * @module
 */

import { configName } from "../../tensor/dtype.ts";
import { InferenceError, toInferenceError } from "../../errors.ts";
import type { NDArray } from "../../tensor/ndarray.ts";
import { hostTensor, type Tensor } from "../../tensor/device_tensor.ts";
import type { ModelInfo } from "../../config/model_info.ts";
import type { ResolvedEnsembleStep } from "../../config/ensemble.ts";
import { ensembleParent } from "../calls.ts";
import type { InferenceRequest, InferenceResponse, ModelDefinition } from "../engine.ts";
import { type ModelStatsRecorder, nsBetween } from "./statistics.ts";
import type { ValidatedRequest } from "./request_validation.ts";

/**
 * Checks an ensemble against the models of its steps as the core does when it loads one, with
 * its messages (the Triton engine's, whose load error wraps the core's `load failed for model`).
 *
 * @param ensemble The ensemble.
 * @param modelOf The loaded model a step names (its version; -1 for the served one), if any.
 * @throws {InferenceError} INVALID_ARG naming the ensemble, the tensor and the model.
 */
export function checkEnsemble(
  ensemble: ModelInfo,
  modelOf: (name: string, version: number) => ModelInfo | undefined,
): void {
  const name = ensemble.name;
  const fail = (why: string): never => {
    throw InferenceError.invalidArg(
      `Failed to load model '${name}' version ${ensemble.version}: load failed for model '${name}': ${why}`,
    );
  };
  const steps = ensemble.ensemble!.steps;
  const missing = steps.filter((step) => modelOf(step.model, step.version) === undefined);
  if (missing.length > 0) {
    fail(
      `ensemble ${name} contains models that are not available or ambiguous: ${
        [...new Set(missing.map((step) => step.model))].join(", ")
      }`,
    );
  }
  // The data type of each ensemble tensor, and the model it was inferred from.
  const types = new Map<string, { dtype: string; from: string }>();
  const infer = (tensor: string, dtype: string, from: string): void => {
    const known = types.get(tensor);
    if (known === undefined) types.set(tensor, { dtype, from });
    else if (known.dtype !== dtype) {
      fail(
        `in ensemble ${name}, ensemble tensor ${tensor}: inconsistent data type: ${known.dtype} is inferred from model ${known.from} while ${dtype} is inferred from model ${from}`,
      );
    }
  };
  for (const spec of [...ensemble.inputs, ...ensemble.outputs]) {
    infer(spec.name, configName(spec.dtype), name);
  }
  for (const step of steps) {
    const model = modelOf(step.model, step.version)!;
    if (ensemble.config.maxBatchSize > model.config.maxBatchSize) {
      fail(
        `ensemble ${name} allows maximum batch size ${ensemble.config.maxBatchSize}, but it contains model ${model.name} which only allows maximum batch size to be ${model.config.maxBatchSize}`,
      );
    }
    for (const [input, tensor] of step.inputMap) {
      const spec = model.inputs.find((candidate) => candidate.name === input);
      if (spec === undefined) {
        fail(
          `in ensemble ${name}, ensemble tensor ${tensor} is mapping to non-existing input ${input} in model ${model.name}`,
        );
      }
      infer(tensor, configName(spec!.dtype), model.name);
    }
    for (const [output, tensor] of step.outputMap) {
      const spec = model.outputs.find((candidate) => candidate.name === output);
      if (spec === undefined) {
        fail(
          `in ensemble ${name}, ensemble tensor ${tensor} is mapped from non-existing output ${output} in model ${model.name}`,
        );
      }
      infer(tensor, configName(spec!.dtype), model.name);
    }
  }
}

/**
 * A host tensor with another shape (the batch axis an ensemble adds or removes for a step); a
 * tensor in GPU memory is refused, naming it.
 */
function reshaped(tensor: Tensor, shape: readonly number[], what: string): NDArray {
  return { ...hostTensor(tensor, `ensemble tensor ${what}`), shape } as NDArray;
}

/** One request of an ensemble as it runs: its tensors, and its steps started and done. */
interface Run {
  readonly request: InferenceRequest;
  readonly tensors: Map<string, Tensor>;
  readonly started: Set<number>;
  done: number;
  failed: boolean;
  readonly controller: AbortController;
}

/** Options of {@linkcode EnsembleScheduler}. */
export interface EnsembleSchedulerOptions {
  /** The ensemble. */
  readonly definition: ModelDefinition;
  /** Its statistics. */
  readonly stats: ModelStatsRecorder;
  /** Runs a step's request on its model (the engine's `infer`). */
  readonly infer: (request: InferenceRequest) => Promise<InferenceResponse>;
  /** Whether a step's model batches (read when the step runs: the model may be replaced). */
  readonly batches: (step: ResolvedEnsembleStep) => boolean;
}

/** Runs an ensemble's requests: steps as their inputs become ready. */
export class EnsembleScheduler {
  #options: EnsembleSchedulerOptions;
  #runs = new Set<Run>();
  #closed = false;
  #idle: (() => void)[] = [];

  /**
   * Creates the scheduler of a loaded ensemble.
   *
   * @param options The ensemble, its statistics, and how steps run.
   */
  constructor(options: EnsembleSchedulerOptions) {
    this.#options = options;
  }

  /** Requests running. */
  get queued(): number {
    return 0;
  }

  /**
   * Runs one request (validated against the ensemble).
   *
   * @param request The request.
   * @param validated What validation learned of it: its batch size (1 when the ensemble does
   *   not batch) and the ensemble outputs to answer, in declared order.
   * @param arrival `performance.now()` when it arrived.
   * @returns The response.
   */
  run(
    request: InferenceRequest,
    validated: ValidatedRequest,
    arrival: number,
  ): Promise<InferenceResponse> {
    const { batchSize, outputs } = validated;
    const { definition } = this.#options;
    if (this.#closed) {
      return Promise.reject(
        InferenceError.unavailable(
          `Cannot infer with model '${definition.name}': the model is being unloaded`,
        ),
      );
    }
    const run: Run = {
      request,
      tensors: new Map(request.inputs),
      started: new Set(),
      done: 0,
      failed: false,
      controller: new AbortController(),
    };
    this.#runs.add(run);
    return new Promise<InferenceResponse>((resolve, reject) => {
      const finish = (error?: InferenceError): void => {
        this.#runs.delete(run);
        if (this.#runs.size === 0) { for (const wake of this.#idle.splice(0)) wake(); }
        const end = performance.now();
        if (error !== undefined) {
          this.#options.stats.recordFailure(nsBetween(arrival, end));
          reject(error);
          return;
        }
        const total = nsBetween(arrival, end);
        const timings = { computeInput: 0, computeInfer: total, computeOutput: 0 };
        this.#options.stats.recordExecution(batchSize, timings);
        this.#options.stats.recordSuccess({ total, queue: 0, ...timings });
        resolve({
          modelName: definition.name,
          modelVersion: String(definition.version),
          ...(request.id === undefined || request.id === "" ? {} : { id: request.id }),
          outputs: new Map(outputs.map((name) => [name, run.tensors.get(name)!])),
        });
      };
      this.#launch(run, finish);
    });
  }

  /** Starts every step whose inputs are all there. */
  #launch(run: Run, finish: (error?: InferenceError) => void): void {
    const { definition } = this.#options;
    const steps = definition.ensemble!.steps;
    steps.forEach((step, index) => {
      if (run.failed || run.started.has(index)) return;
      if (![...step.inputMap.values()].every((tensor) => run.tensors.has(tensor))) return;
      run.started.add(index);
      this.#step(run, step).then(() => {
        if (run.failed) return;
        if (++run.done === steps.length) finish();
        else this.#launch(run, finish);
      }, (error) => {
        if (run.failed) return;
        run.failed = true;
        const inner = toInferenceError(error);
        // The other steps are of no use any more.
        run.controller.abort(inner);
        finish(
          new InferenceError(
            `in ensemble '${definition.name}', model '${step.model}' failed: ${inner.message}`,
            { code: inner.code, cause: inner },
          ),
        );
      });
    });
  }

  async #step(run: Run, step: ResolvedEnsembleStep): Promise<void> {
    const { definition } = this.#options;
    const { request } = run;
    // Like the core: a step's model that batches gets a batch of one from an ensemble that does
    // not, and its outputs lose that axis.
    const addBatch = definition.config.maxBatchSize === 0 && this.#options.batches(step);
    const inputs = new Map<string, Tensor>();
    for (const [input, tensor] of step.inputMap) {
      const array = run.tensors.get(tensor)!;
      inputs.set(input, addBatch ? reshaped(array, [1, ...array.shape], `'${tensor}'`) : array);
    }
    const signal = request.signal === undefined
      ? run.controller.signal
      : AbortSignal.any([request.signal, run.controller.signal]);
    const response = await this.#options.infer({
      modelName: step.model,
      ...(step.version === -1 ? {} : { modelVersion: step.version }),
      inputs,
      outputs: [...step.outputMap.keys()],
      parameters: request.parameters,
      ...(request.priority === undefined ? {} : { priority: request.priority }),
      ...(request.timeoutMicroseconds === undefined
        ? {}
        : { timeoutMicroseconds: request.timeoutMicroseconds }),
      signal,
      parent: ensembleParent(request, definition.name, definition.version),
    });
    for (const [output, tensor] of step.outputMap) {
      const array = response.outputs.get(output);
      if (array === undefined) {
        throw InferenceError.internal(`model '${step.model}' did not answer output '${output}'`);
      }
      run.tensors.set(
        tensor,
        addBatch ? reshaped(array, array.shape.slice(1), `'${tensor}'`) : array,
      );
    }
  }

  /** Refuses new requests from now on. */
  close(): void {
    this.#closed = true;
  }

  /**
   * Resolves once no request runs.
   *
   * @returns A promise of the idle scheduler.
   */
  drain(): Promise<void> {
    if (this.#runs.size === 0) return Promise.resolve();
    return new Promise((resolve) => this.#idle.push(resolve));
  }

  /**
   * Cancels every running request's steps: they fail with `error`.
   *
   * @param error What they fail with.
   */
  abort(error: InferenceError): void {
    this.#closed = true;
    for (const run of this.#runs) run.controller.abort(error);
  }
}
