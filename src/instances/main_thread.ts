/**
 * Model instances that run the user's callables on the main thread: one instance per callable,
 * each running one batch at a time.
 *
 * @module
 */

import { BatchGate } from "./_batch_gate.ts";
import { batchCalls, type InstanceContext, settleThen } from "../callable/calls.ts";
import { runCoupled, runDecoupled } from "../callable/invoke.ts";
import type {
  AnyTensors,
  InferCallable,
  InferRequest,
  InferResult,
  ModelCaller,
  SequenceRequest,
} from "../callable/types.ts";
import type { SequenceId } from "../config/sequence_batching.ts";
import type { InferenceError } from "../errors.ts";
import { SequenceLedger, SequenceStates } from "./sequence_states.ts";
import { validateResults } from "../callable/validate.ts";
import { TritonValidationError } from "../errors.ts";
import { executionTimeoutError, withDeadline } from "./_deadline.ts";
import { parseDevices, placeInstances } from "../gpu/devices.ts";
import { placeInputs } from "./device_inputs.ts";
import type { InstanceProvider, InstanceStartOptions, ModelInstance } from "./instance.ts";
import type { ModelInfo } from "../config/model_info.ts";
import { DISCARDED_METRICS, type MetricsBackend, ModelMetrics } from "../callable/metrics.ts";

/** Options of {@linkcode MainThreadInstances}. */
export interface MainThreadInstancesOptions {
  /**
   * Device of each instance, by index (see `parseDevice`; `"cuda"` is `"cuda:0"`). Main-thread
   * instances share one thread, so no GPU is made current for them (Workers do that); an
   * instance placed on a GPU still gets a client's CUDA shared-memory inputs on that GPU as
   * device tensors (where their specs say `deviceTensor: true`).
   *
   * @default {"cpu" for every instance}
   */
  devices?: readonly string[];
}

/** One main-thread instance: runs its callable one batch at a time. */
class MainThreadInstance implements ModelInstance {
  readonly index: number;
  readonly device: string;
  #callable: InferCallable;
  #context: InstanceContext;
  #caller: ModelCaller | undefined;
  #model: ModelInfo;
  #alive = true;
  #gate = new BatchGate();
  /** The GPU it is placed on, which keeps device-tensor inputs on that GPU. */
  #gpu: number | undefined;
  /** The states of its sequences (a model with sequence batching), and which it holds. */
  #states = new SequenceStates();
  #ledger: SequenceLedger;

  constructor(
    callable: InferCallable,
    model: ModelInfo,
    index: number,
    device: string,
    gpu: number | undefined,
    metrics: MetricsBackend,
    caller: ModelCaller | undefined,
  ) {
    this.index = index;
    this.device = device;
    this.#gpu = gpu;
    this.#callable = callable;
    this.#model = model;
    this.#context = { model, instanceIndex: index, device, metrics: new ModelMetrics(metrics) };
    this.#caller = caller;
    this.#ledger = SequenceLedger.of(model);
  }

  sequenceError(sequence: SequenceRequest): InferenceError | undefined {
    return this.#ledger.check(sequence);
  }

  dropSequences(ids: readonly SequenceId[]): void {
    this.#ledger.drop(ids);
    this.#states.drop(ids);
  }

  get alive(): boolean {
    return this.#alive;
  }

  get down(): boolean {
    return !this.#alive;
  }

  idle(): Promise<void> {
    return this.#gate.idle();
  }

  #timedOut = (): Error => executionTimeoutError(this.#model, this.index);

  async execute(requests: InferRequest<AnyTensors>[]): Promise<InferResult<AnyTensors>[]> {
    this.#ledger.ran(requests);
    // A free gate (the usual case: the scheduler runs one batch per instance) is entered
    // without waiting on a promise.
    const acquired = this.#gate.tryAcquire() ?? await this.#gate.acquire();
    const calls = batchCalls(this.#context, requests, this.#caller);
    // The calls the callable left running end before the instance takes another batch.
    const release = (): void => settleThen(calls, acquired);
    const work = (async () => {
      let live: InferRequest<AnyTensors>[] = [];
      try {
        const placed = placeInputs(requests, this.#model, this.#gpu);
        live = this.#states.attach(placed);
        const value = await runCoupled(this.#callable, live, calls.context);
        return validateResults(value, placed, this.#model);
      } finally {
        this.#states.finish(live);
        this.#ledger.ended(requests);
        // After a timeout too: a callable cannot be interrupted, so the instance stays busy
        // until it returns.
        release();
      }
    })();
    return await withDeadline(work, this.#model.config.executionTimeoutS, this.#timedOut);
  }

  async *stream(requests: InferRequest<AnyTensors>[]): AsyncIterable<InferResult<AnyTensors>[]> {
    this.#ledger.ran(requests);
    const acquired = await this.#gate.acquire();
    const calls = batchCalls(this.#context, requests, this.#caller);
    const release = (): void => settleThen(calls, acquired);
    let placed: InferRequest<AnyTensors>[];
    try {
      placed = placeInputs(requests, this.#model, this.#gpu);
    } catch (error) {
      this.#ledger.ended(requests);
      release();
      throw error;
    }
    const live = this.#states.attach(placed);
    const done = (): void => {
      this.#states.finish(live);
      this.#ledger.ended(requests);
      release();
    };
    const steps = runDecoupled(this.#callable, live, calls.context)[Symbol.asyncIterator]();
    const seconds = this.#model.config.executionTimeoutS;
    let pending: Promise<unknown> | undefined;
    try {
      while (true) {
        const next = steps.next();
        pending = next;
        const step = await withDeadline(next, seconds, this.#timedOut);
        pending = undefined;
        if (step.done) return;
        yield validateResults(step.value, placed, this.#model);
      }
    } finally {
      if (pending === undefined) {
        try {
          await steps.return(undefined);
        } finally {
          done();
        }
      } else {
        // Timed out (or failed) mid-step: the gate opens once the callable has finished that
        // step and closed, however long that takes.
        const close = (): Promise<unknown> => steps.return(undefined);
        void pending.then(close, close).catch(() => {}).finally(done);
      }
    }
  }

  [Symbol.asyncDispose](): Promise<void> {
    // The engine already waited for running batches up to its exit timeout; a callable still
    // running cannot be interrupted on the main thread, so it is left to finish on its own.
    this.#alive = false;
    return Promise.resolve();
  }
}

/**
 * Runs a model's callables on the main thread, one instance per callable.
 *
 * @example Two instances
 * ```ts
 * import { MainThreadInstances } from "./main_thread.ts";
 * import { resolveModelConfig } from "../config/model_config.ts";
 * import { ndarray } from "../tensor/ndarray.ts";
 * import { hostTensor } from "../tensor/device_tensor.ts";
 * import assert from "node:assert/strict";
 *
 * const provider = new MainThreadInstances([
 *   (requests) => requests.map(() => ({ y: ndarray([1]) })),
 *   (requests) => requests.map(() => ({ y: ndarray([2]) })),
 * ]);
 * const model = {
 *   name: "m", version: 1, strict: false, inputs: [],
 *   outputs: [{ name: "y", dtype: "float64" as const, shape: [1], optional: false }],
 *   config: resolveModelConfig({ batching: false }),
 * };
 * const [first, second] = await provider.start(model);
 * const request = { data: {}, parameters: {}, requestedOutputNames: ["y"], signal: new AbortController().signal };
 * const [result] = await second!.execute([request]);
 * assert.deepEqual([...(hostTensor(result!.y!, "y").data as Float64Array)], [2]);
 * assert.deepEqual(provider.devices, ["cpu", "cpu"]);
 * await first![Symbol.asyncDispose]();
 * await second![Symbol.asyncDispose]();
 * ```
 */
export class MainThreadInstances implements InstanceProvider {
  #callables: readonly InferCallable[];
  #devices: readonly string[];

  /**
   * Creates the provider.
   *
   * @param callables One callable per instance.
   * @param options Devices of the instances.
   * @throws {TritonValidationError} For no callable, a device count that differs, or a name that
   *   is not a device.
   */
  constructor(callables: readonly InferCallable[], options: MainThreadInstancesOptions = {}) {
    if (callables.length === 0) {
      throw new TritonValidationError("Cannot create instances: no callable given");
    }
    if (options.devices !== undefined && options.devices.length !== callables.length) {
      throw new TritonValidationError(
        `Cannot create instances: ${options.devices.length} devices given for ${callables.length} callables`,
      );
    }
    this.#callables = [...callables];
    this.#devices = parseDevices(options.devices ?? callables.map(() => "cpu"), "instances");
  }

  /** How many instances the model has. */
  get count(): number {
    return this.#callables.length;
  }

  /** Devices of the instances, by index. */
  get devices(): readonly string[] {
    return this.#devices;
  }

  /**
   * Starts every instance.
   *
   * @param model The model the instances serve.
   * @param options The host's GPUs, as the engine placed the instances on them, and where the
   *   callables' own metrics go, and the engine's caller for their calls to other models.
   * @returns The instances, by index.
   */
  start(model: ModelInfo, options: InstanceStartOptions = {}): Promise<ModelInstance[]> {
    const gpus = options.gpus?.devices ?? [];
    const placed = placeInstances(this.#devices, gpus.length);
    const metrics = options.metrics ?? DISCARDED_METRICS;
    return Promise.resolve(
      this.#callables.map((callable, index) => {
        const at = placed[index];
        const gpu = at === undefined ? undefined : gpus[at]!.index;
        return new MainThreadInstance(
          callable,
          model,
          index,
          this.#devices[index]!,
          gpu,
          metrics,
          options.caller,
        );
      }),
    );
  }
}
