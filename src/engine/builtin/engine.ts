/**
 * The built-in engine: a pure-TypeScript implementation of the {@linkcode Engine} contract with
 * Triton's model registry semantics (`registry.ts`), request validation
 * (`request_validation.ts`), dynamic batching (`scheduler.ts`), statistics, metrics and response
 * cache. It stays a little over 500 lines: each method of the engine contract, documented.
 *
 * @module
 */

import type { AnyTensors, InferResult } from "../../callable/types.ts";
import { isDeviceTensor, type Tensor } from "../../tensor/device_tensor.ts";
import type { NDArray } from "../../tensor/ndarray.ts";
import { toTritonModelConfig } from "../../config/triton_model_config.ts";
import { InferenceError, messageOf, type TritonUnrecoverableError } from "../../errors.ts";
import { discoverGpus } from "../../gpu/cuda.ts";
import { describeGpus, type GpuInventory, parseDevice, planPlacement } from "../../gpu/devices.ts";
import type { Logger } from "../../log.ts";
import { BoundedQueue } from "../../streams/bounded_queue.ts";
import {
  type Engine,
  ENGINE_EXTENSIONS,
  type EngineKind,
  type InferenceRequest,
  type InferenceResponse,
  type LoadOptions,
  type ModelDefinition,
  type ModelHandle,
  type ModelMetadata,
  type ModelStatistics,
  type RepositoryIndexEntry,
  type ServerMetadata,
  type StreamResponse,
  type TritonModelConfigJson,
  type UnloadOptions,
} from "../engine.ts";
import { modelMetadataOf } from "../model_handle.ts";
import { warmUp } from "../warmup.ts";
import { CpuMetrics } from "./cpu_metrics.ts";
import { renderMetrics } from "./metrics.ts";
import { type BuiltinEngineOptions, builtinSettings } from "./options.ts";
import { type ModelEntry, ModelRegistry } from "./registry.ts";
import { type ValidatedRequest, validateInferenceRequest } from "./request_validation.ts";
import { cacheKey, ResponseCache } from "./response_cache.ts";
import { isDown, ModelScheduler, type Scheduler, type SchedulerSink } from "./scheduler.ts";
import { SequenceBatcher } from "./sequence_batcher.ts";
import { checkSequenceRequest } from "../sequences.ts";
import { checkEnsemble, EnsembleScheduler } from "./ensemble.ts";
import { engineCaller, refuseDeadlock, refuseDecoupledSteps } from "../calls.ts";
import type { ModelCaller } from "../../callable/types.ts";
import { nsBetween } from "./statistics.ts";
import { outputsOf, responseOf, submit } from "./submit.ts";
import { endTrace, startTrace } from "./trace_points.ts";
import type { Tracer } from "../../telemetry/tracer.ts";
import { CustomMetricsRegistry } from "../../telemetry/custom_metrics.ts";

export type { BuiltinEngineOptions } from "./options.ts";

/** Triton's version, reported in server metadata. */
export const SERVER_VERSION = "2.51.0";

/**
 * The pure-TypeScript engine.
 *
 * @example Serve a model
 * ```ts
 * import { BuiltinEngine } from "./engine.ts";
 * import { MainThreadInstances } from "../../instances/main_thread.ts";
 * import { resolveModelConfig } from "../../config/model_config.ts";
 * import { ndarray } from "../../tensor/ndarray.ts";
 * import { hostTensor } from "../../tensor/device_tensor.ts";
 * import assert from "node:assert/strict";
 *
 * await using engine = new BuiltinEngine();
 * await engine.loadModel({
 *   name: "Double", version: 1, strict: false,
 *   inputs: [{ name: "x", dtype: "float32", shape: [-1], optional: false }],
 *   outputs: [{ name: "y", dtype: "float32", shape: [-1], optional: false }],
 *   config: resolveModelConfig({ maxBatchSize: 8 }),
 *   instances: new MainThreadInstances([(requests) =>
 *     requests.map((r) => ({
 *       y: ndarray((r.data.x!.data as Float32Array).map((v) => v * 2), r.data.x!.shape),
 *     }))
 *   ]),
 * });
 * const response = await engine.infer({
 *   modelName: "Double", parameters: {},
 *   inputs: new Map([["x", ndarray(new Float32Array([1, 2]), [1, 2])]]),
 * });
 * assert.equal(response.modelVersion, "1");
 * assert.deepEqual([...(hostTensor(response.outputs.get("y")!, "y").data as Float32Array)], [2, 4]);
 * ```
 */
export class BuiltinEngine implements Engine {
  /** Which engine this is. */
  readonly kind: EngineKind = "builtin";
  #id: string;
  #strictReadiness: boolean;
  #exitTimeoutMs: number;
  #logger: Logger | undefined;
  #cache: ResponseCache | undefined;
  #metrics: boolean;
  #cpuMetrics: CpuMetrics | undefined;
  #latencyCounters: boolean;
  #onUnrecoverable: ((error: TritonUnrecoverableError) => void) | undefined;
  #tracer: Tracer | undefined;
  /** The models' own metrics (`context.metrics`), exported beside the engine's. */
  #customMetrics = new CustomMetricsRegistry();
  /** The GPUs, found when a model pinned to one first loads. */
  #gpus: GpuInventory | undefined;
  #registry = new ModelRegistry();
  /** The entry behind each handle this engine gave out. */
  #entries = new WeakMap<ModelHandle, ModelEntry>();
  #stopping: Promise<void> | undefined;
  #stopped = false;
  /** Runs the calls of the instances' callables to other models, on this engine. */
  #caller: ModelCaller = engineCaller(this);

  /**
   * Creates the engine.
   *
   * @param options Server id, readiness, exit timeout, logger, cache, metrics, unrecoverable
   *   hook.
   * @throws {TritonValidationError} For a cache or metrics setting the built-in engine cannot
   *   honour (the message names it), or CPU metrics without access to `/proc`.
   */
  constructor(options: BuiltinEngineOptions = {}) {
    this.#id = options.id ?? "triton";
    this.#strictReadiness = options.strictReadiness ?? true;
    this.#exitTimeoutMs = (options.exitTimeoutSecs ?? 30) * 1000;
    this.#logger = options.logger;
    const settings = builtinSettings(options);
    this.#gpus = options.gpus;
    this.#latencyCounters = settings.latencyCounters;
    this.#cache = settings.cacheBytes > 0 ? new ResponseCache(settings.cacheBytes) : undefined;
    this.#metrics = options.metrics ?? true;
    if (this.#metrics && options.cpuMetrics === true) {
      this.#cpuMetrics = new CpuMetrics({ intervalMs: options.metricsIntervalMs ?? 2000 });
    }
    this.#onUnrecoverable = options.onUnrecoverable;
    this.#tracer = options.tracer;
  }

  /** Starts the engine (nothing to do for the built-in engine). */
  start(): Promise<void> {
    return Promise.resolve();
  }

  /** Whether the engine is live: true until it stopped. */
  isLive(): boolean {
    return !this.#stopped;
  }

  /**
   * Whether the engine is ready.
   *
   * @returns With strict readiness, false while any loaded model is not ready.
   */
  isReady(): boolean {
    if (this.#stopping !== undefined) return false;
    return !this.#strictReadiness || this.#registry.allReady();
  }

  /**
   * Server metadata.
   *
   * @returns `{name, version, extensions}`.
   */
  serverMetadata(): ServerMetadata {
    return { name: this.#id, version: SERVER_VERSION, extensions: [...ENGINE_EXTENSIONS] };
  }

  /** The GPUs, looked for only once a model pinned to one loads (discovery needs FFI). */
  #gpusFor(model: ModelDefinition): GpuInventory {
    if (this.#gpus !== undefined) return this.#gpus;
    if (!model.instances.devices.some((device) => parseDevice(device)?.kind === "gpu")) {
      return { devices: [] };
    }
    this.#gpus = discoverGpus();
    if (this.#gpus.devices.length > 0) {
      this.#logger?.info(`GPUs: ${describeGpus(this.#gpus.devices)}`);
    }
    return this.#gpus;
  }

  /**
   * Loads a model version, starts its instances and warms them up. With `replace`, the model's
   * versions serve until it is ready; then the registry swaps it in at once (no request finds no
   * version), and they drain and stop.
   *
   * @param model The model.
   * @param options Whether it replaces the model's versions.
   * @throws {InferenceError} ALREADY_EXISTS for a loaded name and version (without `replace`),
   *   UNAVAILABLE when stopping, INTERNAL when an instance fails to start or a strict model's
   *   warm-up fails.
   */
  async loadModel(model: ModelDefinition, options: LoadOptions = {}): Promise<void> {
    const stopping = (): InferenceError =>
      InferenceError.unavailable(`Cannot load model '${model.name}': the server is stopping`);
    if (this.#stopping !== undefined) throw stopping();
    const gpus = this.#gpusFor(model);
    planPlacement(model.name, model.instances.devices, { gpus, logger: this.#logger });
    const replace = options.replace === true;
    if (model.ensemble !== undefined) {
      const modelOf = (name: string, version: number) => this.#stepModel(name, version);
      checkEnsemble(model, modelOf);
      refuseDecoupledSteps(model, modelOf);
    }
    const entry = replace ? this.#registry.candidate(model) : this.#registry.begin(model);
    try {
      entry.instances = await model.instances.start(model, {
        gpus,
        caller: this.#caller,
        metrics: this.#customMetrics,
        ...(this.#tracer?.opentelemetry === undefined
          ? {}
          : { opentelemetry: this.#tracer.opentelemetry }),
      });
    } catch (error) {
      this.#registry.forget(entry);
      throw InferenceError.internal(
        `Failed to load model '${model.name}' version ${model.version}: ${messageOf(error)}`,
        { cause: error },
      );
    }
    try {
      await warmUp(model, entry.instances, this.#logger);
    } catch (error) {
      await this.#dispose(entry);
      // As when the instances fail to start: the engine knows the version as it did before.
      this.#registry.forget(entry);
      throw InferenceError.internal(
        `Failed to load model '${model.name}' version ${model.version}: ${messageOf(error)}`,
        { cause: error },
      );
    }
    if (replace && this.#stopping !== undefined) {
      // The engine stopped while the candidate loaded: its stop never saw it.
      await this.#dispose(entry);
      this.#registry.forget(entry);
      throw stopping();
    }
    const onUnrecoverable = (error: Error): void => this.#unrecoverable(error);
    entry.scheduler = model.ensemble !== undefined
      ? new EnsembleScheduler({
        definition: model,
        stats: entry.stats,
        infer: (request) => this.infer(request),
        batches: (step) =>
          (this.#stepModel(step.model, step.version)?.config.maxBatchSize ?? 0) > 0,
      })
      : model.config.sequenceBatching === undefined
      ? new ModelScheduler(model, entry.instances, { stats: entry.stats, onUnrecoverable })
      : new SequenceBatcher(model, entry.instances, {
        stats: entry.stats,
        onUnrecoverable,
        warn: (message) => this.#logger?.warn(message),
      });
    this.#entries.set(entry.handle, entry);
    entry.state = "READY";
    const replaced = replace ? this.#registry.promote(entry) : [];
    this.#logger?.info(`Successfully loaded '${model.name}' version ${model.version}`);
    // Requests that found a replaced version before the swap finish on it.
    await Promise.all(replaced.map((old) => this.#unload(old)));
  }

  /** The ready model an ensemble's step names (-1: the latest), if any. */
  #stepModel(name: string, version: number): ModelDefinition | undefined {
    try {
      return this.#registry.lookup(name, version === -1 ? undefined : version).definition;
    } catch {
      return undefined;
    }
  }

  /** Hands the error to the hook, which reports it; logs it only when there is no hook. */
  #unrecoverable(error: Error): void {
    if (this.#onUnrecoverable !== undefined) {
      this.#onUnrecoverable(error as TritonUnrecoverableError);
    } else {
      this.#logger?.error(`Unrecoverable error in a model: ${error.message}`);
    }
  }

  /**
   * Unloads a model version (every version when `version` is undefined), waiting for its
   * in-flight requests up to the exit timeout.
   *
   * @param name Model name.
   * @param version Model version.
   * @param options Whether the engine forgets the model.
   * @throws {InferenceError} NOT_FOUND for an unknown model or version.
   */
  async unloadModel(name: string, version?: number, options: UnloadOptions = {}): Promise<void> {
    await Promise.all(this.#registry.named(name, version).map((entry) => this.#unload(entry)));
    if (options.forget === true) this.#registry.remove(name, version);
  }

  async #unload(entry: ModelEntry): Promise<void> {
    if (entry.state !== "READY") return;
    entry.state = "UNLOADING";
    const scheduler = entry.scheduler!;
    scheduler.close();
    await this.#drainWithin([scheduler]);
    const { name, version } = entry.definition;
    scheduler.abort(
      InferenceError.unavailable(
        `Model '${name}' version ${version} was unloaded before responding`,
      ),
    );
    await this.#dispose(entry);
    entry.state = "UNAVAILABLE";
    entry.reason = "unloaded";
    entry.scheduler = undefined;
    this.#logger?.info(`Successfully unloaded '${name}' version ${version}`);
  }

  async #drainWithin(schedulers: readonly (Scheduler | EnsembleScheduler)[]): Promise<void> {
    let timer: ReturnType<typeof setTimeout> | undefined;
    const timeout = new Promise<void>((resolve) =>
      timer = setTimeout(resolve, this.#exitTimeoutMs)
    );
    try {
      await Promise.race([Promise.all(schedulers.map((s) => s.drain())), timeout]);
    } finally {
      clearTimeout(timer);
    }
  }

  async #dispose(entry: ModelEntry): Promise<void> {
    const instances = entry.instances;
    entry.instances = [];
    await Promise.all(instances.map(async (instance) => {
      try {
        await instance[Symbol.asyncDispose]();
      } catch (error) {
        this.#logger?.warn(
          `Failed to stop instance ${instance.index} of '${entry.definition.name}': ${
            messageOf(error)
          }`,
        );
      }
    }));
  }

  /**
   * Resolves a ready model version: the one lookup of a request.
   *
   * @param name Model name.
   * @param version Model version; the latest ready one when undefined.
   * @returns Its handle.
   * @throws {InferenceError} NOT_FOUND / UNAVAILABLE with Triton's messages.
   */
  model(name: string, version?: number): ModelHandle {
    return this.#registry.lookup(name, version).handle;
  }

  /**
   * Whether a model version is ready.
   *
   * @param name Model name.
   * @param version Model version; the latest when undefined.
   * @returns False for unknown or unloaded models.
   */
  modelReady(name: string, version?: number): boolean {
    try {
      const entry = this.#registry.lookup(name, version);
      // An ensemble has no instances: it is ready while it is loaded.
      if (entry.definition.ensemble !== undefined) return true;
      // Not ready while every instance is down (a crashed Worker restarting or given up).
      return entry.instances.some((instance) => instance.alive);
    } catch {
      return false;
    }
  }

  /**
   * Model metadata like Triton's.
   *
   * @param name Model name.
   * @param version Model version; every ready version when undefined.
   * @returns `{name, versions, platform, inputs, outputs}`.
   * @throws {InferenceError} NOT_FOUND / UNAVAILABLE for unknown or unavailable models.
   */
  modelMetadata(name: string, version?: number): ModelMetadata {
    const model = this.#registry.lookup(name, version).definition;
    return modelMetadataOf(
      model,
      version === undefined ? this.#registry.readyVersions(name) : [version],
    );
  }

  /**
   * Triton's normalised model-config JSON.
   *
   * @param name Model name.
   * @param version Model version.
   * @returns The config JSON.
   * @throws {InferenceError} NOT_FOUND / UNAVAILABLE for unknown or unavailable models.
   */
  modelConfig(name: string, version?: number): TritonModelConfigJson {
    const model = this.#registry.lookup(name, version).definition;
    return toTritonModelConfig(model, {
      normalized: true,
      devices: model.instances.devices,
      gpuCount: this.#gpusFor(model).devices.length,
    });
  }

  /**
   * Statistics of one model (every ready version when `version` is undefined) or of all models.
   *
   * @param name Model name; all models when undefined.
   * @param version Model version.
   * @returns `{model_stats: [...]}`.
   * @throws {InferenceError} INVALID_ARG for a model or version not loaded (Triton's words).
   */
  modelStatistics(name?: string, version?: number): { model_stats: ModelStatistics[] } {
    let entries = this.#registry.loaded();
    if (name !== undefined && name !== "") {
      // Triton answers INVALID_ARG here (not NOT_FOUND as for metadata), with its own wording.
      entries = entries.filter((entry) => entry.definition.name === name);
      if (entries.length === 0) {
        throw InferenceError.invalidArg(`requested model '${name}' is not available`);
      }
      if (version !== undefined && version !== -1) {
        entries = entries.filter((entry) => entry.definition.version === version);
        if (entries.length === 0) {
          throw InferenceError.invalidArg(
            `requested model version is not available for model '${name}'`,
          );
        }
      }
    }
    return { model_stats: entries.map((entry) => entry.stats.snapshot()) };
  }

  /**
   * The repository index.
   *
   * @param readyOnly Only ready versions.
   * @returns One entry per known model version.
   */
  repositoryIndex(readyOnly: boolean): RepositoryIndexEntry[] {
    return this.#registry.index(readyOnly);
  }

  /**
   * The entry a request runs on: its handle's (looked up when the caller passed none), checked
   * once for a running engine and a live instance.
   */
  #entryOf(request: InferenceRequest, handle: ModelHandle | undefined): ModelEntry {
    if (this.#stopping !== undefined) {
      throw InferenceError.unavailable(
        `Cannot infer with model '${request.modelName}': the server is stopping`,
      );
    }
    handle ??= this.model(request.modelName, request.modelVersion);
    let entry = this.#entries.get(handle);
    // A handle outlives its version's unload (the front end read a body meanwhile): the lookup
    // finds a version loaded since, or fails with Triton's words.
    if (entry === undefined || entry.state !== "READY") {
      entry = this.#registry.lookup(handle.name, request.modelVersion);
    }
    if (entry.definition.ensemble === undefined && entry.instances.every(isDown)) {
      // Queued requests wait for a restarting instance, never for one that gave up.
      throw InferenceError.unavailable(
        `Model '${entry.definition.name}' version ${entry.definition.version} is not ready: no instance is alive`,
      );
    }
    return entry;
  }

  /**
   * Validates a request against its model, counting a failure in its statistics; then, with
   * sequence batching, its sequence, by the rules both engines share. Like the core's sequence
   * batcher, which refuses such requests before it queues them, those failures are not counted.
   */
  #validate(entry: ModelEntry, request: InferenceRequest, arrival: number): ValidatedRequest {
    const validated = this.#validateInputs(entry, request, arrival);
    if (entry.definition.config.sequenceBatching !== undefined) {
      // The core's own check, in its words, comes first there.
      if (validated.batchSize > 1) {
        throw InferenceError.invalidArg(
          `inference request to model '${request.modelName}' must specify batch-size 1 due to requirements of sequence batcher`,
        );
      }
      checkSequenceRequest(entry.definition, request);
    }
    return validated;
  }

  #validateInputs(entry: ModelEntry, request: InferenceRequest, arrival: number): ValidatedRequest {
    try {
      return validateInferenceRequest(entry.definition, request);
    } catch (error) {
      entry.stats.recordFailure(nsBetween(arrival, performance.now()));
      throw error;
    }
  }

  /** Refuses a call every instance of its model waits for, counting it as a failure. */
  #refuseDeadlock(entry: ModelEntry, request: InferenceRequest, arrival: number): void {
    try {
      const { name, version } = entry.definition;
      refuseDeadlock(request.parent, { name, version, instances: entry.instances.length });
    } catch (error) {
      entry.stats.recordFailure(nsBetween(arrival, performance.now()));
      throw error;
    }
  }

  /**
   * Runs one request of a coupled model.
   *
   * @param request The request.
   * @param model Its model, as {@linkcode BuiltinEngine.model} resolved it; looked up when
   *   omitted.
   * @returns Its response: requested outputs in declared order.
   * @throws {InferenceError} NOT_FOUND, INVALID_ARG, UNSUPPORTED (decoupled model), UNAVAILABLE,
   *   CANCELLED or INTERNAL (the callable failed).
   */
  infer(request: InferenceRequest, model?: ModelHandle): Promise<InferenceResponse> {
    // Everything up to submit runs synchronously so concurrent callers share a batch.
    const arrival = performance.now();
    try {
      const entry = this.#entryOf(request, model);
      const definition = entry.definition;
      if (definition.config.decoupled) {
        throw InferenceError.unsupported(
          `Cannot infer with model '${request.modelName}': infer doesn't support models with decoupled transaction policy`,
        );
      }
      const validated = this.#validate(entry, request, arrival);
      this.#refuseDeadlock(entry, request, arrival);
      if (entry.scheduler instanceof EnsembleScheduler) {
        return entry.scheduler.run(request, validated, arrival);
      }
      const trace = startTrace(this.#tracer, request, definition);
      let key: ReturnType<typeof cacheKey> | undefined;
      // Device memory is not hashed or kept (the core's cache refuses it too, and serves on
      // uncached): a request with an input in a CUDA region bypasses the cache.
      const hostInputs = hostTensors(request.inputs);
      const cache = definition.config.responseCache && hostInputs !== undefined
        ? this.#cache
        : undefined;
      if (cache !== undefined) {
        const lookupStart = performance.now();
        key = cacheKey(definition, hostInputs!, validated.outputs);
        const hit = cache.lookup(key);
        const lookupEnd = performance.now();
        if (hit !== undefined) {
          entry.stats.recordCacheHit(
            nsBetween(lookupStart, lookupEnd),
            nsBetween(arrival, lookupEnd),
          );
          endTrace(trace);
          return Promise.resolve(responseOf(entry, request, hit));
        }
        entry.stats.recordCacheMiss(nsBetween(lookupStart, lookupEnd));
      }
      return new Promise<InferenceResponse>((resolve, reject) => {
        const sink: SchedulerSink = {
          result: (result) => {
            const outputs = outputsOf(result, validated);
            const hostOutputs = hostTensors(outputs);
            if (cache !== undefined && key !== undefined && hostOutputs !== undefined) {
              cache.insert(key, hostOutputs);
            }
            resolve(responseOf(entry, request, outputs));
            endTrace(trace);
          },
          end: () => {},
          error: (error) => {
            reject(error);
            endTrace(trace);
          },
        };
        try {
          submit(entry, request, { validated, arrival, sink, trace });
        } catch (error) {
          endTrace(trace);
          throw error;
        }
      });
    } catch (error) {
      return Promise.reject(error);
    }
  }

  /**
   * Runs one request of a decoupled model: one response (`final: false`) per step the callable
   * yields, as soon as it is yielded, then one `final: true` response without outputs, like
   * Triton's flags-only FINAL response (front ends send it only when the client asked for empty
   * final responses). A failure after some responses is thrown after them.
   *
   * @param request The request.
   * @param model Its model, as {@linkcode BuiltinEngine.model} resolved it; looked up when
   *   omitted.
   * @returns The responses.
   */
  async *inferStream(
    request: InferenceRequest,
    model?: ModelHandle,
  ): AsyncGenerator<StreamResponse, void, undefined> {
    const arrival = performance.now();
    const entry = this.#entryOf(request, model);
    if (!entry.definition.config.decoupled) {
      throw InferenceError.unsupported(
        `Cannot stream with model '${request.modelName}': streaming needs a model with decoupled transaction policy`,
      );
    }
    const validated = this.#validate(entry, request, arrival);
    this.#refuseDeadlock(entry, request, arrival);
    const trace = startTrace(this.#tracer, request, entry.definition);
    // Bounded: the scheduler waits for room before pulling the callable's next step, so a slow
    // consumer slows the model instead of queueing its steps; a consumer that stops early
    // cancels the queue, which aborts the request.
    const queue = new BoundedQueue<InferResult<AnyTensors>>({
      cancel: () =>
        controller.abort(
          InferenceError.cancelled(`Request for model '${request.modelName}' was cancelled`),
        ),
    });
    let controller: AbortController;
    try {
      controller = submit(entry, request, {
        validated,
        arrival,
        sink: {
          result: (result) => queue.push(result),
          end: () => {
            queue.end();
            endTrace(trace);
          },
          error: (error) => {
            queue.fail(error);
            endTrace(trace);
          },
        },
        trace,
      });
    } catch (error) {
      endTrace(trace);
      throw error;
    }
    const step = (result: InferResult<AnyTensors> | undefined, final: boolean): StreamResponse => ({
      ...responseOf(
        entry,
        request,
        result === undefined ? new Map() : outputsOf(result, validated),
      ),
      final,
    });
    // Sent at once (streaming latency matters); the end is its own final response.
    for await (const result of queue.readable) yield step(result, false);
    yield step(undefined, true);
  }

  /**
   * Prometheus text of every loaded model's metrics.
   *
   * @returns The text exposition; empty when the engine keeps no metrics.
   */
  metrics(): string {
    if (!this.#metrics) return "";
    const models = renderMetrics(
      this.#registry.loaded().map((entry) => ({
        stats: entry.stats.snapshot(),
        pending: entry.scheduler?.queued ?? 0,
        cached: entry.definition.config.responseCache && this.#cache !== undefined,
      })),
      { latencyCounters: this.#latencyCounters },
    );
    return models + (this.#cpuMetrics?.render() ?? "") + this.#customMetrics.render();
  }

  /**
   * Refuses new requests, waits for in-flight ones up to the exit timeout, fails the rest with
   * UNAVAILABLE and disposes every instance. Idempotent.
   */
  stop(): Promise<void> {
    this.#stopping ??= this.#stop();
    return this.#stopping;
  }

  async #stop(): Promise<void> {
    const entries = this.#registry.loaded();
    const schedulers = entries.flatMap((entry) => entry.scheduler ? [entry.scheduler] : []);
    for (const scheduler of schedulers) scheduler.close();
    await this.#drainWithin(schedulers);
    const error = InferenceError.unavailable("Server stopped before the request completed");
    for (const scheduler of schedulers) scheduler.abort(error);
    await Promise.all(entries.map(async (entry) => {
      entry.state = "UNLOADING";
      await this.#dispose(entry);
      entry.state = "UNAVAILABLE";
      entry.reason = "unloaded";
      entry.scheduler = undefined;
    }));
    this.#stopped = true;
  }

  /** Stops the engine. */
  [Symbol.asyncDispose](): Promise<void> {
    return this.stop();
  }
}

/** The tensors, when every one of them is in host memory; `undefined` when one is on a device. */
function hostTensors(
  tensors: ReadonlyMap<string, Tensor>,
): ReadonlyMap<string, NDArray> | undefined {
  for (const tensor of tensors.values()) if (isDeviceTensor(tensor)) return undefined;
  return tensors as ReadonlyMap<string, NDArray>;
}
