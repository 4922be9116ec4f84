/**
 * Model instances in Deno Workers: one Worker per instance, pinned to a device, loading the
 * user's instance module once and running one batch at a time. Tensors cross without
 * structured-clone copies (see `isolate/codec.ts`); a Worker that crashes or exits fails its
 * in-flight batch and is restarted a bounded number of times (`worker_instance.ts`). This file is
 * the provider; its options are in `workers_options.ts`.
 *
 * @module
 */

import { TritonValidationError } from "../errors.ts";
import { Logger } from "../log.ts";
import { parseDevices, placeInstances } from "../gpu/devices.ts";
import type { InstanceProvider, InstanceStartOptions, ModelInstance } from "./instance.ts";
import { type Shared, WorkerInstance } from "./worker_instance.ts";
import type { WorkersOptions, WorkerTransferStats } from "./workers_options.ts";

export type { WorkerContext } from "./worker_protocol.ts";
import type { ModelInfo } from "../config/model_info.ts";

/**
 * The instances {@linkcode workers} creates: one Deno Worker per device.
 *
 * @example Two CPU instances
 * ```ts ignore
 * import { workers } from "../../mod.ts";
 *
 * triton.bind({ modelName: "Linear", inferFunc: workers(new URL("./instance.ts", import.meta.url), { count: 2 }), ... });
 * ```
 */
export class WorkerInstances implements InstanceProvider {
  #shared: Shared;
  #devices: readonly string[];
  #instances: WorkerInstance[] = [];

  /**
   * Creates the provider; nothing starts before the model loads.
   *
   * @param module The instance module.
   * @param options Devices or count, permissions, restarts, data.
   * @throws {TritonValidationError} For a bad device string or count.
   */
  constructor(module: URL | string, options: WorkersOptions = {}) {
    const devices = options.devices ?? Array.from({ length: options.count ?? 1 }, () => "cpu");
    if (options.devices === undefined) {
      const count = options.count ?? 1;
      if (!Number.isInteger(count) || count < 1) {
        throw new TritonValidationError(
          `Cannot create Worker instances: count must be a positive integer, got ${count}`,
        );
      }
    }
    if (devices.length === 0) {
      throw new TritonValidationError("Cannot create Worker instances: no device given");
    }
    const names = parseDevices(devices, "Worker instances");
    const maxRestarts = options.maxRestarts ?? 3;
    if (!Number.isInteger(maxRestarts) || maxRestarts < 0) {
      throw new TritonValidationError(
        `Cannot create Worker instances: maxRestarts must be a non-negative integer, got ${maxRestarts}`,
      );
    }
    this.#devices = names;
    this.#shared = {
      module: module instanceof URL ? module.href : new URL(module, `file://${Deno.cwd()}/`).href,
      options,
      logger: options.logger ?? new Logger(),
      stats: {
        batches: 0,
        requests: 0,
        inputCopiedBytes: 0,
        inputMovedBytes: 0,
        inputNativeBytes: 0,
        outputCopiedBytes: 0,
        outputMovedBytes: 0,
      },
    };
  }

  /** How many instances the model has. */
  get count(): number {
    return this.#devices.length;
  }

  /** Devices of the instances, by index. */
  get devices(): readonly string[] {
    return this.#devices;
  }

  /** Bytes copied and moved for tensors so far (a live object). */
  get stats(): Readonly<WorkerTransferStats> {
    return this.#shared.stats;
  }

  /** The running instances, by index (empty before the model loads). */
  get instances(): readonly (ModelInstance & { kill(): void })[] {
    return this.#instances;
  }

  /**
   * Starts every Worker and loads the instance module in each.
   *
   * @param model The model the instances serve.
   * @param options The host's GPUs, which the Workers pinned to one make current.
   * @returns The instances, by index.
   * @throws {InferenceError} The first load failure; every Worker is terminated then.
   * @throws {TritonValidationError} For a GPU beyond those of `options.gpus`.
   */
  async start(model: ModelInfo, options: InstanceStartOptions = {}): Promise<ModelInstance[]> {
    const gpus = options.gpus ?? { devices: [] };
    const placed = placeInstances(this.#devices, gpus.devices.length);
    const instances = this.#devices.map((device, index) => {
      const gpu = placed[index] === undefined ? undefined : gpus.devices[placed[index]];
      return new WorkerInstance(this.#shared, model, {
        index,
        device,
        gpu,
        cudaDriver: gpus.driverLibrary,
        telemetry: {
          ...(options.metrics === undefined ? {} : { metrics: options.metrics }),
          ...(options.opentelemetry === undefined ? {} : { opentelemetry: options.opentelemetry }),
        },
        caller: options.caller,
      });
    });
    const loads = await Promise.allSettled(instances.map((instance) => instance.load()));
    const failure = loads.find((load) => load.status === "rejected");
    if (failure !== undefined) {
      await Promise.all(instances.map((instance) => instance[Symbol.asyncDispose]()));
      throw (failure as PromiseRejectedResult).reason;
    }
    this.#instances = instances;
    return instances;
  }
}

/**
 * Runs a model's instances in Deno Workers: one per device, each loading `module` once. The
 * module's default export is a factory `(ctx: WorkerContext) => InferFunc | Promise<InferFunc>`
 * (load weights there; decorators work inside it).
 *
 * Tensors are moved, not copied: inputs whose buffer they span alone are transferred to the
 * Worker (the caller's view is detached), and outputs likewise come back by transfer, so a
 * callable must not keep using an array it returned (return `constant.slice()` for constants).
 * With the Triton engine the Worker reads inputs in place from the core's memory.
 *
 * GPUs: a Worker pinned to `cuda:N` on a host with GPUs has GPU N's primary context current on its
 * thread before the factory runs (`ctx.gpu` describes the GPU), so CUDA libraries it calls through
 * FFI run there; on a host without GPUs it runs on the CPU (`ctx.gpu` is `undefined`).
 *
 * Faults: a Worker that throws an uncaught error, calls `Deno.exit()` or `self.close()` fails its
 * batch with UNAVAILABLE and is restarted (`maxRestarts` times in a row); batches sent meanwhile
 * wait for the restart. A batch that outlives the model's `executionTimeoutS` fails at once, and
 * the Worker is asked to exit and then restarted. Limits of Deno 2.9: a Worker that runs out of
 * memory aborts the whole process (Web Workers take no heap limit, and `--v8-flags` limits apply
 * to every isolate without making the failure survivable); and a Worker stuck in synchronous code
 * cannot be stopped (`Worker.terminate()` waits for it to return to its event loop), so its
 * instance stays busy until then.
 *
 * @param module The instance module (URL, or a path relative to the working directory).
 * @param options Devices or count, permissions, restarts, data.
 * @returns The instance provider to pass as `inferFunc`.
 *
 * @example Devices and counts
 * ```ts
 * import { workers } from "../../mod.ts";
 * import assert from "node:assert/strict";
 *
 * const gpus = workers(new URL("./model.ts", import.meta.url), { devices: ["cuda", "cuda:1"] });
 * assert.deepEqual(gpus.devices, ["cuda:0", "cuda:1"]);
 * assert.equal(workers("./model.ts", { count: 4 }).count, 4);
 * assert.throws(() => workers("./model.ts", { devices: ["gpu0"] }), /invalid device/);
 * ```
 */
export function workers(module: URL | string, options: WorkersOptions = {}): WorkerInstances {
  return new WorkerInstances(module, options);
}
