/**
 * Model instances in Deno Workers: one Worker per instance, pinned to a device, loading the
 * user's instance module once and running one batch at a time. Tensors cross without
 * structured-clone copies (see `worker_protocol.ts`); a Worker that crashes or exits fails its
 * in-flight batch and is restarted a bounded number of times.
 *
 * @module
 */

import { BatchGate } from "./_batch_gate.ts";
import type { InferRequest, InferResult, ModelInfo } from "../callable/types.ts";
import { MessageChannel as WatchChannel, type MessagePort as WatchPort } from "node:worker_threads";
import { InferenceError, TritonValidationError } from "../errors.ts";
import { executionTimeoutError, withDeadline } from "./_deadline.ts";
import { Logger } from "../log.ts";
import { type GpuDevice, parseDevice, parseDevices, placeInstances } from "../gpu/devices.ts";
import type {
  InstanceProvider,
  InstanceStartOptions,
  ModelInstance,
  NativeLocations,
} from "./instance.ts";
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
   * One instance per device: `"cpu"`, `"cuda:N"`, `"cuda"` (`"cuda:0"`), `"gpu"` or `"gpu:N"`.
   * A Worker pinned to a GPU has that GPU current on its thread before the factory runs (see
   * `WorkerContext.gpu`); on a host without GPUs it runs on the CPU. Takes precedence over
   * `count`.
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

/** Steps of one batch as an async queue. */
class StepQueue {
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

  async next(): Promise<IteratorResult<InferResult[], undefined>> {
    while (true) {
      const value = this.#steps.shift();
      if (value !== undefined) return { done: false, value };
      if (this.#error !== undefined) throw this.#error;
      if (this.#ended) return { done: true, value: undefined };
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

/** One Worker of an instance, from its start until its thread has ended. */
interface Life {
  readonly worker: Worker;
  /** The main end of the watch channel (see `ToWorker` "init"). */
  readonly watch: WatchPort;
  /** Batches sent to this Worker and not finished by it yet. */
  readonly batches: Set<Batch>;
  /** Whether its thread has ended (or it was terminated). */
  ended: boolean;
  /** Whether it was asked to exit (a timeout, `kill()`), so its end is expected. */
  retiring: boolean;
  /** Settles, once it has ended, like the start of the Worker that replaces it. */
  readonly next: PromiseWithResolvers<void>;
}

/** One batch in a Worker. */
interface Batch {
  readonly id: number;
  readonly life: Life;
  readonly queue: StepQueue;
  /** Resolves once the Worker is done with the batch: it answered it in full, or it ended. */
  readonly settled: PromiseWithResolvers<void>;
}

/** One Worker-backed instance. */
class WorkerInstance implements ModelInstance {
  readonly index: number;
  readonly device: string;
  readonly isolated = true;
  #shared: Shared;
  #model: ModelInfo;
  #life: Life | undefined;
  #alive = false;
  #down = false;
  #disposed = false;
  #attempt = 0;
  #loading: PromiseWithResolvers<void> | undefined;
  /** The next Worker: its predecessor's end, then the restart. */
  #replacing: Promise<void> | undefined;
  #batches = new Map<number, Batch>();
  /** Workers whose thread may still run: the current one and those retiring. */
  #lives = new Set<Life>();
  #nextId = 0;
  #gate = new BatchGate();
  /** The GPU it runs on, and the driver that makes it current in the Worker. */
  #gpu: GpuDevice | undefined;
  #cudaDriver: string | undefined;

  constructor(
    shared: Shared,
    model: ModelInfo,
    index: number,
    device: string,
    gpu: GpuDevice | undefined,
    cudaDriver: string | undefined,
  ) {
    this.#shared = shared;
    this.#model = model;
    this.index = index;
    this.device = device;
    this.#gpu = gpu;
    this.#cudaDriver = cudaDriver;
  }

  get alive(): boolean {
    return this.#alive;
  }

  get down(): boolean {
    return this.#down;
  }

  idle(): Promise<void> {
    return this.#gate.idle();
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
    const channel = new WatchChannel();
    const life: Life = {
      worker,
      watch: channel.port1,
      batches: new Set(),
      ended: false,
      retiring: false,
      next: Promise.withResolvers<void>(),
    };
    this.#life = life;
    this.#lives.add(life);
    this.#loading = Promise.withResolvers<void>();
    worker.onmessage = (event: MessageEvent<FromWorker>) => this.#receive(life, event.data);
    worker.onerror = (event: ErrorEvent) => {
      // Handled here: unhandled, a Worker's error would end the whole process.
      event.preventDefault();
      this.#crashed(life, event.message || "the Worker threw an uncaught error");
    };
    worker.onmessageerror = () => this.#crashed(life, "a message could not be deserialized");
    // Deno reports neither `Deno.exit()` nor `self.close()` in a Worker; the Worker's end of the
    // watch channel closes when its thread ends. An error event, if one comes, names the cause
    // better, so it is given a moment to arrive first.
    life.watch.on("close", () => {
      if (life.ended) return; // closed by #end itself
      setTimeout(() => this.#crashed(life, "it exited (Deno.exit() or close() in the Worker)"), 10);
    });
    // Started (only a started port learns that its other end closed) but not keeping the
    // process alive.
    life.watch.start();
    life.watch.unref();
    const { model } = this;
    const parsed = parseDevice(this.device)!;
    const context: WorkerContext = {
      device: this.device,
      deviceKind: parsed.kind,
      deviceId: parsed.id,
      gpu: this.#gpu,
      instanceIndex: this.index,
      modelName: model.name,
      modelVersion: model.version,
      model,
      attempt: this.#attempt,
      data: options.data,
    };
    const init: ToWorker = {
      type: "init",
      module,
      context,
      watch: channel.port2,
      ...(this.#cudaDriver === undefined ? {} : { cudaDriver: this.#cudaDriver }),
    };
    worker.postMessage(
      init,
      [channel.port2 as unknown as Transferable],
    );
    return this.#loading.promise;
  }

  /** The model as the Worker receives it: plain data only. */
  get model(): ModelInfo {
    const { name, version, inputs, outputs, config, strict } = this.#model;
    return { name, version, inputs, outputs, config, strict };
  }

  #receive(life: Life, message: FromWorker): void {
    if (life !== this.#life) return;
    switch (message.type) {
      case "ready":
        this.#alive = true;
        this.#loading?.resolve();
        this.#loading = undefined;
        break;
      case "load-failed": {
        const error = fromWireError(message.error);
        const loading = this.#loading;
        this.#loading = undefined;
        this.#end(life, false);
        loading?.reject(
          new InferenceError(
            `${this.#label} failed to load ${this.#shared.module}: ${error.name}: ${error.message}`,
            { code: "INTERNAL", cause: error },
          ),
        );
        break;
      }
      case "results": {
        const batch = this.#batches.get(message.id);
        if (batch === undefined) break;
        const { stats } = this.#shared;
        stats.outputCopiedBytes += message.counts.copied;
        stats.outputMovedBytes += message.counts.moved;
        const results = message.results.map((result) =>
          Object.fromEntries(
            Object.entries(result).map(([name, wire]) => [name, fromWireTensor(wire)]),
          )
        );
        batch.queue.step(results);
        if (!this.#model.config.decoupled) this.#finish(batch);
        break;
      }
      case "done": {
        const batch = this.#batches.get(message.id);
        if (batch !== undefined) this.#finish(batch);
        break;
      }
      case "failed": {
        const batch = this.#batches.get(message.id);
        if (batch !== undefined) this.#finish(batch, fromWireError(message.error));
        break;
      }
    }
  }

  /** The Worker is done with a batch. */
  #finish(batch: Batch, error?: Error): void {
    this.#batches.delete(batch.id);
    batch.life.batches.delete(batch);
    if (error === undefined) batch.queue.done();
    else batch.queue.fail(error);
    batch.settled.resolve();
  }

  /**
   * A Worker's thread has ended (or it was terminated): its batches fail with `failure` and
   * settle, and, when `restart` is set, the next Worker starts.
   */
  #end(life: Life, restart: boolean, failure?: Error): void {
    if (life.ended) return;
    life.ended = true;
    this.#lives.delete(life);
    life.worker.terminate();
    life.watch.close();
    if (life === this.#life) {
      this.#life = undefined;
      this.#alive = false;
    }
    let next: Promise<void> | undefined;
    if (restart && !this.#disposed) next = this.#replacing = this.#restart();
    life.next.resolve(next);
    const error = failure ??
      new InferenceError(`${this.#label} was stopped`, { code: "UNAVAILABLE" });
    for (const batch of [...life.batches]) this.#finish(batch, error);
  }

  #crashed(life: Life, reason: string): void {
    if (life.ended) return;
    if (life.retiring) {
      // Its end was asked for: the batch failed already, and the next Worker may start now.
      this.#end(life, true);
      return;
    }
    const loading = life === this.#life ? this.#loading : undefined;
    if (loading !== undefined) {
      this.#loading = undefined;
      this.#end(life, false);
      loading.reject(
        new InferenceError(`${this.#label} failed to load ${this.#shared.module}: ${reason}`, {
          code: "INTERNAL",
        }),
      );
      return;
    }
    const message = `${this.#label} crashed: ${reason}`;
    this.#shared.logger.error(message);
    this.#end(life, life === this.#life, new InferenceError(message, { code: "UNAVAILABLE" }));
  }

  /**
   * Asks the current Worker to exit and starts the next one once it has: until then the
   * Worker may still be reading a batch's inputs in place, so its batches settle only then.
   * `error` fails its batches at once.
   */
  #retire(reason: string, error: Error): void {
    const life = this.#life;
    if (life === undefined || life.retiring || life.ended) return;
    life.retiring = true;
    this.#life = undefined;
    this.#alive = false;
    this.#shared.logger.error(`${this.#label} ${reason}: restarting it`);
    for (const batch of life.batches) batch.queue.fail(error);
    // Not terminate(): only an exit the Worker carries out itself shows when its thread ends
    // (Deno's terminate() does not interrupt synchronous code either).
    life.worker.postMessage({ type: "exit" } satisfies ToWorker);
    this.#replacing = life.next.promise;
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
    this.#down = true;
    if (!this.#disposed) this.#shared.logger.error(`${this.#label} stays down`);
  }

  /** Sends a batch to the Worker (waiting for a pending restart). */
  async #send(requests: InferRequest[], native: NativeLocations | undefined): Promise<Batch> {
    while (!this.#alive && this.#replacing !== undefined && !this.#down) {
      const replacing = this.#replacing;
      await replacing;
      if (this.#replacing === replacing) break;
    }
    const life = this.#life;
    if (!this.#alive || life === undefined) {
      throw new InferenceError(
        `${this.#label} is not available: ${
          this.#disposed ? "it was stopped" : "its Worker crashed and could not be restarted"
        }`,
        { code: "UNAVAILABLE" },
      );
    }
    const { worker } = life;
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
        () => {
          if (!life.ended) {
            worker.postMessage({ type: "cancel", id, request: index } satisfies ToWorker);
          }
        },
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
    const batch: Batch = {
      id,
      life,
      queue: new StepQueue(),
      settled: Promise.withResolvers<void>(),
    };
    this.#batches.set(id, batch);
    life.batches.add(batch);
    worker.postMessage(
      {
        type: "batch",
        id,
        decoupled: this.#model.config.decoupled,
        requests: wire,
      } satisfies ToWorker,
      transfer,
    );
    return batch;
  }

  /** Fails a batch that outlived the execution timeout and replaces its Worker. */
  #timedOut(batch: Batch): Error {
    const error = executionTimeoutError(this.#model, this.index);
    if (batch.life === this.#life) {
      this.#retire(
        `did not finish a batch within its execution timeout of ${this.#model.config.executionTimeoutS} s`,
        error,
      );
    }
    return error;
  }

  async execute(requests: InferRequest[], native?: NativeLocations): Promise<InferResult[]> {
    const release = await this.#gate.acquire();
    let batch: Batch | undefined;
    try {
      batch = await this.#send(requests, native);
      const sent = batch;
      const step = await withDeadline(
        sent.queue.next(),
        this.#model.config.executionTimeoutS,
        () => this.#timedOut(sent),
      );
      if (step.done) {
        throw new InferenceError(`${this.#label} returned no result`, { code: "INTERNAL" });
      }
      return step.value;
    } finally {
      // The gate opens once the Worker is done with the batch, not when its caller gave up.
      if (batch === undefined) release();
      else void batch.settled.promise.then(release);
    }
  }

  async *stream(requests: InferRequest[], native?: NativeLocations): AsyncIterable<InferResult[]> {
    const release = await this.#gate.acquire();
    let batch: Batch | undefined;
    let failed = false;
    const seconds = this.#model.config.executionTimeoutS;
    try {
      batch = await this.#send(requests, native);
      const sent = batch;
      while (true) {
        const step = await withDeadline(sent.queue.next(), seconds, () => this.#timedOut(sent));
        if (step.done) return;
        yield step.value;
      }
    } catch (error) {
      failed = true;
      throw error;
    } finally {
      if (batch === undefined) {
        release();
      } else {
        const sent = batch;
        void sent.settled.promise.then(release);
        if (!failed && this.#batches.has(sent.id)) {
          // The consumer stopped reading early: the Worker ends the stream after its current step,
          // and the batch (whose inputs it may read in place) stays ours until it has.
          if (!sent.life.ended) sent.life.worker.postMessage({ type: "stop", id: sent.id });
          await withDeadline(sent.settled.promise, seconds, () => this.#timedOut(sent)).catch(
            () => {},
          );
        }
      }
    }
  }

  /**
   * Stops the Worker as if it had crashed: fails its running batch and restarts it once its
   * thread has ended. For tests and operators that need to recycle an instance.
   */
  kill(): void {
    this.#retire(
      "was killed",
      new InferenceError(`${this.#label} crashed: it was killed`, { code: "UNAVAILABLE" }),
    );
  }

  async [Symbol.asyncDispose](): Promise<void> {
    this.#disposed = true;
    this.#down = true;
    this.#alive = false;
    this.#life = undefined;
    const stopped = new InferenceError(`${this.#label} was stopped`, { code: "UNAVAILABLE" });
    const lives = [...this.#lives];
    // A Worker that exits by itself shows that its thread has ended, which lets the engine free
    // memory it may read in place; one that has not within a second is terminated, and its
    // batches never settle.
    await Promise.all(lives.map(async (life) => {
      for (const batch of life.batches) batch.queue.fail(stopped);
      if (!life.retiring) {
        life.retiring = true;
        life.worker.postMessage({ type: "exit" } satisfies ToWorker);
      }
      let timer: ReturnType<typeof setTimeout> | undefined;
      const grace = new Promise<void>((resolve) => timer = setTimeout(resolve, 1000));
      await Promise.race([life.next.promise, grace]);
      clearTimeout(timer);
      if (life.ended) return;
      life.ended = true;
      this.#lives.delete(life);
      life.worker.terminate();
      life.watch.close();
      life.next.resolve();
    }));
    this.#loading?.reject(stopped);
    this.#loading = undefined;
    await this.#replacing;
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
      return new WorkerInstance(this.#shared, model, index, device, gpu, gpus.driverLibrary);
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
