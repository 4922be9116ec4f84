/**
 * Model instances in Deno Workers: one Worker per instance, pinned to a device, loading the
 * user's instance module once and running one batch at a time. Tensors cross without
 * structured-clone copies (see `worker_protocol.ts`); a Worker that crashes fails its in-flight
 * batch and is restarted a bounded number of times.
 *
 * @module
 */

import { BatchGate } from "./_batch_gate.ts";
import type { InferRequest, InferResult, ModelInfo } from "../callable/types.ts";
import { InferenceError, TritonValidationError } from "../errors.ts";
import { Logger } from "../log.ts";
import type { InstanceProvider, ModelInstance, NativeLocations } from "./instance.ts";
import {
  fromWireError,
  fromWireTensor,
  type FromWorker,
  toNativeWireTensor,
  toWireTensor,
  type ToWorker,
  type WireCounts,
  type WireRequest,
  type WireTensor,
  type WorkerContext,
  zeroCounts,
} from "./worker_protocol.ts";

export type { WorkerContext } from "./worker_protocol.ts";

/** Where {@linkcode workers} logs crashes and restarts (a `Logger` fits). */
export interface WorkersLogger {
  /** Logs a restart. */
  info(message: string): void;
  /** Logs a crash or a failed restart. */
  error(message: string): void;
}

/** Options of {@linkcode workers}. */
export interface WorkersOptions {
  /**
   * One instance per device: `"cpu"` or `"cuda:N"`. Takes precedence over `count`.
   *
   * @default {undefined}
   */
  devices?: readonly string[];
  /**
   * How many CPU instances, when `devices` is not given.
   *
   * @default {1}
   */
  count?: number;
  /**
   * The Workers' Deno permissions. Anything but `"inherit"` needs `--unstable-worker-options`.
   * With the Triton engine the Workers read inputs in place through FFI, so they need
   * `ffi: true`.
   *
   * @default {"inherit"}
   */
  permissions?: Deno.PermissionOptions;
  /**
   * How many times a crashed instance is restarted in a row before it stays down.
   *
   * @default {3}
   */
  maxRestarts?: number;
  /**
   * Passed to every factory as `ctx.data` (structured-cloned; a `SharedArrayBuffer` is shared).
   *
   * @default {undefined}
   */
  data?: unknown;
  /**
   * Where restarts are logged.
   *
   * @default {a stderr Logger}
   */
  logger?: WorkersLogger;
}

/** Bytes the tensors of all batches cost on their way to and from the Workers. */
export interface WorkerTransferStats {
  /** Batches sent. */
  batches: number;
  /** Requests sent. */
  requests: number;
  /** Input bytes copied (views into larger buffers, BYTES packing). */
  inputCopiedBytes: number;
  /** Input bytes moved by transfer or shared (no copy). */
  inputMovedBytes: number;
  /** Input bytes passed as native addresses and read in place (Triton engine). */
  inputNativeBytes: number;
  /** Output bytes the Workers copied (views into larger buffers, BYTES packing). */
  outputCopiedBytes: number;
  /** Output bytes moved by transfer (no copy). */
  outputMovedBytes: number;
}

const ENTRY = new URL("./worker_main.ts", import.meta.url).href;
const DEVICE = /^(cpu|cuda:(\d+))$/;

interface Pending {
  step(results: InferResult[]): void;
  done(): void;
  fail(error: Error): void;
}

/** Steps of one batch as an async queue. */
class StepQueue implements Pending {
  #steps: InferResult[][] = [];
  #ended = false;
  #error: Error | undefined;
  #wake: (() => void) | undefined;

  step(results: InferResult[]): void {
    this.#steps.push(results);
    this.#notify();
  }

  done(): void {
    this.#ended = true;
    this.#notify();
  }

  fail(error: Error): void {
    this.#error ??= error;
    this.#ended = true;
    this.#notify();
  }

  #notify(): void {
    const wake = this.#wake;
    this.#wake = undefined;
    wake?.();
  }

  async *[Symbol.asyncIterator](): AsyncGenerator<InferResult[]> {
    while (true) {
      const next = this.#steps.shift();
      if (next !== undefined) {
        yield next;
        continue;
      }
      if (this.#error !== undefined) throw this.#error;
      if (this.#ended) return;
      await new Promise<void>((resolve) => this.#wake = resolve);
    }
  }
}

interface Shared {
  readonly module: string;
  readonly options: WorkersOptions;
  readonly stats: WorkerTransferStats;
  readonly logger: WorkersLogger;
}

function deviceOf(device: string): { deviceKind: "cpu" | "gpu"; deviceId: number } {
  const match = DEVICE.exec(device)!;
  return match[2] === undefined
    ? { deviceKind: "cpu", deviceId: -1 }
    : { deviceKind: "gpu", deviceId: Number(match[2]) };
}

/** One Worker-backed instance. */
class WorkerInstance implements ModelInstance {
  readonly index: number;
  readonly device: string;
  #shared: Shared;
  #model: ModelInfo;
  #worker: Worker | undefined;
  #alive = false;
  #disposed = false;
  #attempt = 0;
  #loading: PromiseWithResolvers<void> | undefined;
  #restarting: Promise<void> | undefined;
  #pending = new Map<number, Pending>();
  #nextId = 0;
  #gate = new BatchGate();

  constructor(shared: Shared, model: ModelInfo, index: number, device: string) {
    this.#shared = shared;
    this.#model = model;
    this.index = index;
    this.device = device;
  }

  get alive(): boolean {
    return this.#alive;
  }

  get #label(): string {
    return `Instance ${this.index} (${this.device}) of model '${this.#model.name}'`;
  }

  /** Starts the Worker and loads the instance module; rejects with the load error. */
  load(): Promise<void> {
    const { options, module } = this.#shared;
    const permissions = options.permissions ?? "inherit";
    const worker = new Worker(ENTRY, {
      type: "module",
      name: `${this.#model.name}#${this.index}`,
      ...(permissions === "inherit" ? {} : { deno: { permissions } }),
    });
    this.#worker = worker;
    this.#loading = Promise.withResolvers<void>();
    worker.onmessage = (event: MessageEvent<FromWorker>) => this.#receive(worker, event.data);
    worker.onerror = (event: ErrorEvent) => {
      // Handled here: unhandled, a Worker's error would end the whole process.
      event.preventDefault();
      this.#crashed(worker, event.message || "the Worker threw an uncaught error");
    };
    worker.onmessageerror = () => this.#crashed(worker, "a message could not be deserialized");
    const { model } = this;
    const context: WorkerContext = {
      device: this.device,
      ...deviceOf(this.device),
      instanceIndex: this.index,
      modelName: model.name,
      modelVersion: model.version,
      model,
      attempt: this.#attempt,
      data: options.data,
    };
    worker.postMessage({ type: "init", module, context } satisfies ToWorker);
    return this.#loading.promise;
  }

  /** The model as the Worker receives it: plain data only. */
  get model(): ModelInfo {
    const { name, version, inputs, outputs, config, strict } = this.#model;
    return { name, version, inputs, outputs, config, strict };
  }

  #receive(worker: Worker, message: FromWorker): void {
    if (worker !== this.#worker) return;
    switch (message.type) {
      case "ready":
        this.#alive = true;
        this.#loading?.resolve();
        this.#loading = undefined;
        break;
      case "load-failed": {
        const error = fromWireError(message.error);
        this.#stopWorker();
        this.#loading?.reject(
          new InferenceError(
            `${this.#label} failed to load ${this.#shared.module}: ${error.name}: ${error.message}`,
            { code: "INTERNAL", cause: error },
          ),
        );
        this.#loading = undefined;
        break;
      }
      case "results": {
        const { stats } = this.#shared;
        stats.outputCopiedBytes += message.counts.copied;
        stats.outputMovedBytes += message.counts.moved;
        const results = message.results.map((result) =>
          Object.fromEntries(
            Object.entries(result).map(([name, wire]) => [name, fromWireTensor(wire)]),
          )
        );
        this.#pending.get(message.id)?.step(results);
        if (!this.#model.config.decoupled) this.#settle(message.id)?.done();
        break;
      }
      case "done":
        this.#settle(message.id)?.done();
        break;
      case "failed":
        this.#settle(message.id)?.fail(fromWireError(message.error));
        break;
    }
  }

  #settle(id: number): Pending | undefined {
    const pending = this.#pending.get(id);
    this.#pending.delete(id);
    return pending;
  }

  #stopWorker(): void {
    this.#alive = false;
    this.#worker?.terminate();
    this.#worker = undefined;
  }

  #failPending(message: string): void {
    const error = new InferenceError(message, { code: "UNAVAILABLE" });
    const pending = [...this.#pending.values()];
    this.#pending.clear();
    for (const entry of pending) entry.fail(error);
  }

  #crashed(worker: Worker, reason: string): void {
    if (worker !== this.#worker) return;
    this.#stopWorker();
    if (this.#loading !== undefined) {
      this.#loading.reject(
        new InferenceError(`${this.#label} failed to load ${this.#shared.module}: ${reason}`, {
          code: "INTERNAL",
        }),
      );
      this.#loading = undefined;
      return;
    }
    const message = `${this.#label} crashed: ${reason}`;
    this.#shared.logger.error(message);
    this.#failPending(message);
    if (!this.#disposed) this.#restarting = this.#restart();
  }

  async #restart(): Promise<void> {
    const max = this.#shared.options.maxRestarts ?? 3;
    for (let attempt = 1; attempt <= max && !this.#disposed; attempt++) {
      this.#attempt++;
      try {
        await this.load();
        this.#shared.logger.info(`${this.#label} restarted (attempt ${attempt} of ${max})`);
        return;
      } catch (error) {
        this.#shared.logger.error(
          `${this.#label} failed to restart (attempt ${attempt} of ${max}): ${
            (error as Error).message
          }`,
        );
      }
    }
    if (!this.#disposed) this.#shared.logger.error(`${this.#label} stays down`);
  }

  /** Sends a batch; returns its step queue. */
  async #send(requests: InferRequest[], native: NativeLocations | undefined): Promise<StepQueue> {
    if (!this.#alive && this.#restarting !== undefined) await this.#restarting;
    const worker = this.#worker;
    if (!this.#alive || worker === undefined) {
      throw new InferenceError(
        `${this.#label} is not available: ${
          this.#disposed ? "it was stopped" : "its Worker crashed and could not be restarted"
        }`,
        { code: "UNAVAILABLE" },
      );
    }
    const id = this.#nextId++;
    const transfer: Transferable[] = [];
    const counts: WireCounts = zeroCounts();
    const wire: WireRequest[] = requests.map((request, index) => {
      const data: Record<string, WireTensor> = {};
      const locations = native?.[index];
      for (const [name, array] of Object.entries(request.data)) {
        const location = locations?.[name];
        data[name] = location !== undefined
          ? toNativeWireTensor(array, location, counts)
          : toWireTensor(array, transfer, counts);
      }
      request.signal.addEventListener(
        "abort",
        () => worker.postMessage({ type: "cancel", id, request: index } satisfies ToWorker),
        { once: true },
      );
      return {
        data,
        parameters: request.parameters,
        requestedOutputNames: request.requestedOutputNames,
        cancelled: request.signal.aborted,
      };
    });
    const { stats } = this.#shared;
    stats.batches++;
    stats.requests += requests.length;
    stats.inputCopiedBytes += counts.copied;
    stats.inputMovedBytes += counts.moved;
    stats.inputNativeBytes += counts.native;
    const queue = new StepQueue();
    this.#pending.set(id, queue);
    worker.postMessage(
      {
        type: "batch",
        id,
        decoupled: this.#model.config.decoupled,
        requests: wire,
      } satisfies ToWorker,
      transfer,
    );
    return queue;
  }

  async execute(requests: InferRequest[], native?: NativeLocations): Promise<InferResult[]> {
    const release = await this.#gate.acquire();
    try {
      const queue = await this.#send(requests, native);
      let results: InferResult[] | undefined;
      for await (const step of queue) results = step;
      if (results === undefined) {
        throw new InferenceError(`${this.#label} returned no result`, { code: "INTERNAL" });
      }
      return results;
    } finally {
      release();
    }
  }

  async *stream(requests: InferRequest[], native?: NativeLocations): AsyncIterable<InferResult[]> {
    const release = await this.#gate.acquire();
    try {
      yield* await this.#send(requests, native);
    } finally {
      release();
    }
  }

  /**
   * Terminates the Worker as if it had crashed: fails the in-flight batch and restarts it. For
   * tests and operators that need to recycle an instance.
   */
  kill(): void {
    const worker = this.#worker;
    if (worker !== undefined) this.#crashed(worker, "it was terminated");
  }

  async [Symbol.asyncDispose](): Promise<void> {
    this.#disposed = true;
    this.#stopWorker();
    this.#failPending(`${this.#label} was stopped`);
    this.#loading?.reject(
      new InferenceError(`${this.#label} was stopped`, { code: "UNAVAILABLE" }),
    );
    this.#loading = undefined;
    await this.#restarting;
  }
}

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
    for (const device of devices) {
      if (!DEVICE.test(device)) {
        throw new TritonValidationError(
          `Cannot create Worker instances: invalid device ${
            JSON.stringify(device)
          }, expected "cpu" or "cuda:N"`,
        );
      }
    }
    const maxRestarts = options.maxRestarts ?? 3;
    if (!Number.isInteger(maxRestarts) || maxRestarts < 0) {
      throw new TritonValidationError(
        `Cannot create Worker instances: maxRestarts must be a non-negative integer, got ${maxRestarts}`,
      );
    }
    this.#devices = [...devices];
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
   * @returns The instances, by index.
   * @throws {InferenceError} The first load failure; every Worker is terminated then.
   */
  async start(model: ModelInfo): Promise<ModelInstance[]> {
    const instances = this.#devices.map((device, index) =>
      new WorkerInstance(this.#shared, model, index, device)
    );
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
 * @param module The instance module (URL, or a path relative to the working directory).
 * @param options Devices or count, permissions, restarts, data.
 * @returns The instance provider to pass as `inferFunc`.
 *
 * @example Devices and counts
 * ```ts
 * import { workers } from "../../mod.ts";
 * import assert from "node:assert/strict";
 *
 * const gpus = workers(new URL("./model.ts", import.meta.url), { devices: ["cuda:0", "cuda:1"] });
 * assert.deepEqual(gpus.devices, ["cuda:0", "cuda:1"]);
 * assert.equal(workers("./model.ts", { count: 4 }).count, 4);
 * assert.throws(() => workers("./model.ts", { devices: ["gpu0"] }), /invalid device/);
 * ```
 */
export function workers(module: URL | string, options: WorkersOptions = {}): WorkerInstances {
  return new WorkerInstances(module, options);
}
