/**
 * Model instances that run the user's callables on the main thread: one instance per callable,
 * each running one batch at a time.
 *
 * @module
 */

import { BatchGate } from "./_batch_gate.ts";
import { runCoupled, runDecoupled } from "../callable/invoke.ts";
import type {
  InferCallable,
  InferContext,
  InferRequest,
  InferResult,
  ModelInfo,
} from "../callable/types.ts";
import { validateResults } from "../callable/validate.ts";
import { TritonValidationError } from "../errors.ts";
import type { InstanceProvider, ModelInstance } from "./instance.ts";

/** Options of {@linkcode MainThreadInstances}. */
export interface MainThreadInstancesOptions {
  /**
   * Device of each instance, by index.
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
  #context: InferContext;
  #model: ModelInfo;
  #alive = true;
  #gate = new BatchGate();

  constructor(callable: InferCallable, model: ModelInfo, index: number, device: string) {
    this.index = index;
    this.device = device;
    this.#callable = callable;
    this.#model = model;
    this.#context = { model, instanceIndex: index, device };
  }

  get alive(): boolean {
    return this.#alive;
  }

  async execute(requests: InferRequest[]): Promise<InferResult[]> {
    const release = await this.#gate.acquire();
    try {
      const value = await runCoupled(this.#callable, requests, this.#context);
      return validateResults(value, requests, this.#model);
    } finally {
      release();
    }
  }

  async *stream(requests: InferRequest[]): AsyncIterable<InferResult[]> {
    const release = await this.#gate.acquire();
    try {
      for await (const step of runDecoupled(this.#callable, requests, this.#context)) {
        yield validateResults(step, requests, this.#model);
      }
    } finally {
      release();
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
 * assert.deepEqual([...(result!.y!.data as Float64Array)], [2]);
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
    this.#devices = [...(options.devices ?? callables.map(() => "cpu"))];
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
   * @returns The instances, by index.
   */
  start(model: ModelInfo): Promise<ModelInstance[]> {
    return Promise.resolve(
      this.#callables.map((callable, index) =>
        new MainThreadInstance(callable, model, index, this.#devices[index]!)
      ),
    );
  }
}
