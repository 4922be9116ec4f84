/**
 * The built-in engine: a pure-TypeScript implementation of the {@linkcode Engine} contract with
 * Triton's model registry semantics, request validation, dynamic batching, statistics, metrics
 * and response cache.
 *
 * @module
 */

import type { InferRequest, InferResult, ModelInfo } from "../../callable/types.ts";
import { toTritonModelConfig } from "../../config/triton_model_config.ts";
import {
  InferenceError,
  type TritonUnrecoverableError,
  TritonValidationError,
} from "../../errors.ts";
import { describeGpus, type GpuInventory, parseDevice, planPlacement } from "../../gpu/devices.ts";
import { discoverGpus } from "../../gpu/cuda.ts";
import type { ModelInstance } from "../../instances/instance.ts";
import type { Logger } from "../../log.ts";
import { BoundedQueue } from "../../streams/bounded_queue.ts";
import { kserveName } from "../../tensor/dtype.ts";
import type { NDArray } from "../../tensor/ndarray.ts";
import {
  type CacheConfig,
  type Engine,
  ENGINE_EXTENSIONS,
  type EngineKind,
  type InferenceRequest,
  type InferenceResponse,
  type ModelDefinition,
  type ModelMetadata,
  type ModelStatistics,
  type RepositoryIndexEntry,
  type ServerMetadata,
  type StreamResponse,
  type TritonModelConfigJson,
} from "../engine.ts";
import { CpuMetrics } from "./cpu_metrics.ts";
import { renderMetrics } from "./metrics.ts";
import { type ValidatedRequest, validateInferenceRequest } from "./request_validation.ts";
import { cacheKey, ResponseCache } from "./response_cache.ts";
import { isDown, ModelScheduler, type SchedulerSink } from "./scheduler.ts";
import { ModelStatsRecorder, nsBetween } from "./statistics.ts";
import { warmupRequests } from "../warmup.ts";

/** Triton's version, reported in server metadata. */
export const SERVER_VERSION = "2.51.0";

/** Options of {@linkcode BuiltinEngine}. */
export interface BuiltinEngineOptions {
  /**
   * Server id, the `name` of the server metadata.
   *
   * @default {"triton"}
   */
  id?: string;
  /**
   * Whether `isReady()` is false while any loaded model is not ready.
   *
   * @default {true}
   */
  strictReadiness?: boolean;
  /**
   * How long `stop()` waits for in-flight requests, in seconds.
   *
   * @default {30}
   */
  exitTimeoutSecs?: number;
  /**
   * Logger for load/unload and failures.
   *
   * @default {undefined}
   */
  logger?: Logger;
  /**
   * Response cache size in bytes; 0 disables the cache (models with `responseCache` need > 0).
   *
   * @default {0}
   */
  responseCacheByteSize?: number;
  /**
   * The response cache as Triton's `--cache-config` names it; overrides
   * `responseCacheByteSize`. The built-in engine has only the `local` cache and its `size`
   * setting: anything else is refused.
   *
   * @default {undefined}
   */
  cacheConfig?: CacheConfig;
  /**
   * Report CPU utilization and memory (`nv_cpu_*`, read from `/proc` like the Triton core).
   *
   * @default {false}
   */
  cpuMetrics?: boolean;
  /**
   * Report GPU metrics. The built-in engine has none, so `true` is refused.
   *
   * @default {false}
   */
  gpuMetrics?: boolean;
  /**
   * The core's pinned memory pool. The built-in engine copies nothing to GPUs, so a size above
   * 0 is refused.
   *
   * @default {0}
   */
  pinnedMemoryPoolByteSize?: number;
  /**
   * The GPUs to place instances pinned to `cuda:N` on (see `placeInstances`).
   *
   * @default {discoverGpus(), when a model pinned to a GPU loads}
   */
  gpus?: GpuInventory;
  /**
   * How old the CPU metrics may get before a scrape reads them again, in milliseconds.
   *
   * @default {2000}
   */
  metricsIntervalMs?: number;
  /**
   * Triton `--metrics-config` entries. The built-in engine reports latency counters only:
   * `counter_latencies=<bool>` is honoured, `histogram_latencies=false` and
   * `summary_latencies=false` change nothing, and the rest is refused.
   *
   * @default {[]}
   */
  metricsConfig?: readonly string[];
  /**
   * Called when a callable throws a `TritonUnrecoverableError` (after its batch failed).
   *
   * @default {undefined}
   */
  onUnrecoverable?: (error: TritonUnrecoverableError) => void;
}

/** The metrics-config entries the built-in engine accepts: they match what it reports. */
const BUILTIN_METRICS_SETTINGS = new Set([
  "counter_latencies=true",
  "counter_latencies=false",
  "histogram_latencies=false",
  "summary_latencies=false",
]);

function refuse(what: string, reason: string): TritonValidationError {
  return new TritonValidationError(
    `Cannot start the built-in engine: ${what} is not supported: ${reason}`,
  );
}

/** The local cache size the options ask for, refusing what the built-in engine cannot do. */
function builtinCacheSize(options: BuiltinEngineOptions): number {
  const cache = options.cacheConfig;
  if (cache === undefined) return options.responseCacheByteSize ?? 0;
  if (cache.name !== "local") {
    throw refuse(
      `cacheConfig cache '${cache.name}'`,
      "the built-in engine has only the local cache",
    );
  }
  const others = Object.keys(cache.config).filter((key) => key !== "size");
  if (others.length > 0) {
    throw refuse(
      `cacheConfig setting local,${others[0]}`,
      "the local cache has only a size",
    );
  }
  const size = Number(cache.config.size ?? 0);
  if (!Number.isSafeInteger(size) || size < 0) {
    throw refuse(`cacheConfig local,size=${cache.config.size}`, "the size must be an integer >= 0");
  }
  return size;
}

type ModelState = "LOADING" | "READY" | "UNLOADING" | "UNAVAILABLE";

interface ModelEntry {
  readonly definition: ModelDefinition;
  state: ModelState;
  reason: string;
  instances: ModelInstance[];
  scheduler: ModelScheduler | undefined;
  stats: ModelStatsRecorder;
}

/**
 * The pure-TypeScript engine.
 *
 * @example Serve a model
 * ```ts
 * import { BuiltinEngine } from "./engine.ts";
 * import { MainThreadInstances } from "../../instances/main_thread.ts";
 * import { resolveModelConfig } from "../../config/model_config.ts";
 * import { ndarray } from "../../tensor/ndarray.ts";
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
 * assert.deepEqual([...(response.outputs.get("y")!.data as Float32Array)], [2, 4]);
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
  #cpuMetrics: CpuMetrics | undefined;
  #latencyCounters: boolean;
  #onUnrecoverable: ((error: TritonUnrecoverableError) => void) | undefined;
  /** The GPUs, found when a model pinned to one first loads. */
  #gpus: GpuInventory | undefined;
  #models = new Map<string, Map<number, ModelEntry>>();
  #stopping: Promise<void> | undefined;
  #stopped = false;

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
    if (options.gpuMetrics === true) {
      throw refuse("allowGpuMetrics", "the built-in engine has no GPU metrics");
    }
    if ((options.pinnedMemoryPoolByteSize ?? 0) > 0) {
      throw refuse(
        "pinnedMemoryPoolByteSize",
        "the built-in engine copies no tensors to or from GPUs (set 0 or leave it unset)",
      );
    }
    this.#gpus = options.gpus;
    for (const entry of options.metricsConfig ?? []) {
      if (!BUILTIN_METRICS_SETTINGS.has(entry)) {
        throw refuse(
          `metricsConfig entry '${entry}'`,
          "the built-in engine reports latency counters only (counter_latencies=<bool>)",
        );
      }
    }
    this.#latencyCounters = !(options.metricsConfig ?? []).includes("counter_latencies=false");
    const cacheSize = builtinCacheSize(options);
    this.#cache = cacheSize > 0 ? new ResponseCache(cacheSize) : undefined;
    if (options.cpuMetrics === true) {
      this.#cpuMetrics = new CpuMetrics({ intervalMs: options.metricsIntervalMs ?? 2000 });
    }
    this.#onUnrecoverable = options.onUnrecoverable;
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
  isReady(): Promise<boolean> {
    if (this.#stopping !== undefined) return Promise.resolve(false);
    if (!this.#strictReadiness) return Promise.resolve(true);
    for (const versions of this.#models.values()) {
      for (const entry of versions.values()) {
        if (entry.state === "LOADING" || entry.state === "UNLOADING") {
          return Promise.resolve(false);
        }
        if (entry.state === "UNAVAILABLE" && entry.reason !== "unloaded") {
          return Promise.resolve(false);
        }
      }
    }
    return Promise.resolve(true);
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
   * Loads a model version and starts its instances.
   *
   * @param model The model.
   * @throws {InferenceError} ALREADY_EXISTS for a loaded name and version, UNAVAILABLE when
   *   stopping, INTERNAL when an instance fails to start.
   */
  async loadModel(model: ModelDefinition): Promise<void> {
    if (this.#stopping !== undefined) {
      throw new InferenceError(`Cannot load model '${model.name}': the server is stopping`, {
        code: "UNAVAILABLE",
      });
    }
    const gpus = this.#gpusFor(model);
    planPlacement(model.name, model.instances.devices, gpus, this.#logger);
    let versions = this.#models.get(model.name);
    if (versions === undefined) {
      versions = new Map();
      this.#models.set(model.name, versions);
    }
    const existing = versions.get(model.version);
    if (existing !== undefined && existing.state !== "UNAVAILABLE") {
      throw new InferenceError(
        `Cannot load model '${model.name}': version ${model.version} is loaded already`,
        { code: "ALREADY_EXISTS" },
      );
    }
    const entry: ModelEntry = {
      definition: model,
      state: "LOADING",
      reason: "",
      instances: [],
      scheduler: undefined,
      stats: new ModelStatsRecorder(model.name, model.version),
    };
    versions.set(model.version, entry);
    try {
      entry.instances = await model.instances.start(model, { gpus });
    } catch (error) {
      // Like the Triton engine, where such a model never reaches the core's repository: no
      // trace is left (readiness and the repository index are as before the attempt).
      if (existing === undefined) versions.delete(model.version);
      else versions.set(model.version, existing);
      if (versions.size === 0) this.#models.delete(model.name);
      const reason = error instanceof Error ? error.message : String(error);
      throw new InferenceError(
        `Failed to load model '${model.name}' version ${model.version}: ${reason}`,
        { code: "INTERNAL", cause: error },
      );
    }
    try {
      await this.#warmUp(model, entry.instances);
    } catch (error) {
      entry.state = "UNAVAILABLE";
      entry.reason = error instanceof Error ? error.message : String(error);
      await Promise.all(
        entry.instances.map((i) => Promise.resolve(i[Symbol.asyncDispose]()).catch(() => {})),
      );
      throw new InferenceError(
        `Failed to load model '${model.name}' version ${model.version}: ${entry.reason}`,
        { code: "INTERNAL", cause: error },
      );
    }
    entry.scheduler = new ModelScheduler(model, entry.instances, entry.stats, {
      onUnrecoverable: (error) => this.#unrecoverable(error),
    });
    entry.state = "READY";
    this.#logger?.info(`Successfully loaded '${model.name}' version ${model.version}`);
  }

  /**
   * Runs every warm-up stage `count` times on every instance, through the same instance calls
   * as inference. A failure is logged and ignored unless the model is strict.
   */
  async #warmUp(model: ModelDefinition, instances: readonly ModelInstance[]): Promise<void> {
    const signal = new AbortController().signal;
    for (const stage of model.config.warmup) {
      try {
        const requests = await warmupRequests(model, stage, signal);
        await Promise.all(instances.map(async (instance) => {
          for (let i = 0; i < (stage.count ?? 1); i++) {
            if (model.config.decoupled) {
              for await (const _ of instance.stream(requests)) { /* drain */ }
            } else {
              await instance.execute(requests);
            }
          }
        }));
        this.#logger?.debug(1, () => `Warm-up '${stage.name}' of '${model.name}' done`);
      } catch (error) {
        const message = `Warm-up '${stage.name}' of model '${model.name}' failed: ${
          error instanceof Error ? error.message : String(error)
        }`;
        if (model.strict) throw new Error(message, { cause: error });
        this.#logger?.warn(message);
      }
    }
  }

  #unrecoverable(error: Error): void {
    this.#logger?.error(`Unrecoverable error in a model: ${error.message}`);
    this.#onUnrecoverable?.(error as TritonUnrecoverableError);
  }

  /**
   * Unloads a model version (every version when `version` is undefined), waiting for its
   * in-flight requests up to the exit timeout.
   *
   * @param name Model name.
   * @param version Model version.
   */
  async unloadModel(name: string, version?: number): Promise<void> {
    const versions = this.#models.get(name);
    if (versions === undefined) {
      throw InferenceError.notFound(`Request for unknown model: '${name}' is not found`);
    }
    let entries: ModelEntry[];
    if (version === undefined) {
      entries = [...versions.values()];
    } else {
      const entry = versions.get(version);
      if (entry === undefined) {
        throw InferenceError.notFound(
          `Request for unknown model: '${name}' version ${version} is not found`,
        );
      }
      entries = [entry];
    }
    await Promise.all(entries.map((entry) => this.#unloadEntry(entry)));
  }

  async #unloadEntry(entry: ModelEntry): Promise<void> {
    if (entry.state !== "READY") return;
    entry.state = "UNLOADING";
    const scheduler = entry.scheduler!;
    scheduler.close();
    await this.#drainWithin([scheduler]);
    const { name, version } = entry.definition;
    scheduler.abort(
      new InferenceError(`Model '${name}' version ${version} was unloaded before responding`, {
        code: "UNAVAILABLE",
      }),
    );
    await this.#dispose(entry);
    entry.state = "UNAVAILABLE";
    entry.reason = "unloaded";
    entry.scheduler = undefined;
    this.#logger?.info(`Successfully unloaded '${name}' version ${version}`);
  }

  async #drainWithin(schedulers: readonly ModelScheduler[]): Promise<void> {
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
            error instanceof Error ? error.message : String(error)
          }`,
        );
      }
    }));
  }

  /**
   * Finds a ready model version.
   *
   * @throws {InferenceError} NOT_FOUND / UNAVAILABLE with Triton's messages.
   */
  #lookup(name: string, version?: number): ModelEntry {
    const versions = this.#models.get(name);
    if (versions === undefined) {
      throw InferenceError.notFound(`Request for unknown model: '${name}' is not found`);
    }
    if (version === undefined || version === -1) {
      let best: ModelEntry | undefined;
      for (const [number, entry] of versions) {
        if (entry.state === "READY" && (best === undefined || number > best.definition.version)) {
          best = entry;
        }
      }
      if (best === undefined) {
        throw new InferenceError(`Request for unknown model: '${name}' has no available versions`, {
          code: "UNAVAILABLE",
        });
      }
      return best;
    }
    const entry = versions.get(version);
    if (entry === undefined) {
      throw InferenceError.notFound(
        `Request for unknown model: '${name}' version ${version} is not found`,
      );
    }
    if (entry.state !== "READY") {
      throw new InferenceError(
        `Request for unknown model: '${name}' version ${version} is not at ready state`,
        { code: "UNAVAILABLE" },
      );
    }
    return entry;
  }

  /**
   * Whether a model version is ready.
   *
   * @param name Model name.
   * @param version Model version; the latest when undefined.
   * @returns False for unknown or unloaded models.
   */
  modelReady(name: string, version?: number): Promise<boolean> {
    try {
      const entry = this.#lookup(name, version);
      // Not ready while every instance is down (a crashed Worker restarting or given up).
      return Promise.resolve(entry.instances.some((instance) => instance.alive));
    } catch {
      return Promise.resolve(false);
    }
  }

  /**
   * Model metadata like Triton's.
   *
   * @param name Model name.
   * @param version Model version; every ready version when undefined.
   * @returns `{name, versions, platform, inputs, outputs}`.
   */
  modelMetadata(name: string, version?: number): Promise<ModelMetadata> {
    try {
      const entry = this.#lookup(name, version);
      const model = entry.definition;
      const versions = version === undefined
        ? [...this.#models.get(name)!.values()]
          .filter((e) => e.state === "READY")
          .map((e) => e.definition.version)
          .sort((a, b) => a - b)
        : [version];
      const batching = model.config.maxBatchSize > 0;
      const tensor = (spec: ModelInfo["inputs"][number]) => ({
        name: spec.name,
        datatype: kserveName(spec.dtype),
        shape: batching ? [-1, ...spec.shape] : [...spec.shape],
      });
      return Promise.resolve({
        name: model.name,
        versions: versions.map(String),
        platform: "denotriton",
        inputs: model.inputs.map(tensor),
        outputs: model.outputs.map(tensor),
      });
    } catch (error) {
      return Promise.reject(error);
    }
  }

  /**
   * Triton's normalised model-config JSON.
   *
   * @param name Model name.
   * @param version Model version.
   * @returns The config JSON.
   */
  modelConfig(name: string, version?: number): Promise<TritonModelConfigJson> {
    try {
      const model = this.#lookup(name, version).definition;
      return Promise.resolve(
        toTritonModelConfig(model, {
          normalized: true,
          devices: model.instances.devices,
          gpuCount: this.#gpusFor(model).devices.length,
        }),
      );
    } catch (error) {
      return Promise.reject(error);
    }
  }

  /**
   * Statistics of one model (every ready version when `version` is undefined) or of all models.
   *
   * @param name Model name; all models when undefined.
   * @param version Model version.
   * @returns `{model_stats: [...]}`.
   */
  modelStatistics(name?: string, version?: number): Promise<{ model_stats: ModelStatistics[] }> {
    try {
      let entries: ModelEntry[];
      if (name === undefined || name === "") {
        entries = this.#loadedEntries();
      } else {
        // Triton answers INVALID_ARG here (not NOT_FOUND as for metadata), with its own wording.
        entries = this.#loadedEntries().filter((entry) => entry.definition.name === name);
        if (entries.length === 0) {
          throw new InferenceError(`requested model '${name}' is not available`, {
            code: "INVALID_ARG",
          });
        }
        if (version !== undefined && version !== -1) {
          entries = entries.filter((entry) => entry.definition.version === version);
          if (entries.length === 0) {
            throw new InferenceError(
              `requested model version is not available for model '${name}'`,
              { code: "INVALID_ARG" },
            );
          }
        }
      }
      return Promise.resolve({ model_stats: entries.map((entry) => entry.stats.snapshot()) });
    } catch (error) {
      return Promise.reject(error);
    }
  }

  #loadedEntries(): ModelEntry[] {
    const entries: ModelEntry[] = [];
    for (const name of [...this.#models.keys()].sort()) {
      const versions = this.#models.get(name)!;
      for (const number of [...versions.keys()].sort((a, b) => a - b)) {
        const entry = versions.get(number)!;
        if (entry.state === "READY" || entry.state === "UNLOADING") entries.push(entry);
      }
    }
    return entries;
  }

  /**
   * The repository index.
   *
   * @param readyOnly Only ready versions.
   * @returns One entry per known model version.
   */
  repositoryIndex(readyOnly: boolean): Promise<RepositoryIndexEntry[]> {
    const index: RepositoryIndexEntry[] = [];
    for (const name of [...this.#models.keys()].sort()) {
      const versions = this.#models.get(name)!;
      for (const number of [...versions.keys()].sort((a, b) => a - b)) {
        const entry = versions.get(number)!;
        if (readyOnly && entry.state !== "READY") continue;
        index.push({
          name,
          version: String(number),
          state: entry.state,
          ...(entry.reason === "" ? {} : { reason: entry.reason }),
        });
      }
    }
    return Promise.resolve(index);
  }

  /**
   * Whether a model is decoupled.
   *
   * @param name Model name.
   * @param version Model version.
   * @returns Its `decoupled` setting.
   */
  isDecoupled(name: string, version?: number): Promise<boolean> {
    try {
      return Promise.resolve(this.#lookup(name, version).definition.config.decoupled);
    } catch (error) {
      return Promise.reject(error);
    }
  }

  #checkRunning(name: string): void {
    if (this.#stopping !== undefined) {
      throw new InferenceError(`Cannot infer with model '${name}': the server is stopping`, {
        code: "UNAVAILABLE",
      });
    }
  }

  /** Looks the model up and validates the request, counting validation failures. */
  #prepare(
    request: InferenceRequest,
    arrival: number,
  ): { entry: ModelEntry; validated: ValidatedRequest } {
    this.#checkRunning(request.modelName);
    const entry = this.#lookup(request.modelName, request.modelVersion);
    if (entry.instances.every(isDown)) {
      // Queued requests wait for a restarting instance, never for one that gave up.
      throw new InferenceError(
        `Model '${entry.definition.name}' version ${entry.definition.version} is not ready: no instance is alive`,
        { code: "UNAVAILABLE" },
      );
    }
    try {
      return { entry, validated: validateInferenceRequest(entry.definition, request) };
    } catch (error) {
      entry.stats.recordFailure(nsBetween(arrival, performance.now()));
      throw error;
    }
  }

  #response(
    entry: ModelEntry,
    request: InferenceRequest,
    outputs: ReadonlyMap<string, NDArray>,
  ): InferenceResponse {
    return {
      modelName: entry.definition.name,
      modelVersion: String(entry.definition.version),
      ...(request.id === undefined || request.id === "" ? {} : { id: request.id }),
      outputs,
    };
  }

  #outputsOf(result: InferResult, validated: ValidatedRequest): Map<string, NDArray> {
    const outputs = new Map<string, NDArray>();
    for (const name of validated.outputs) {
      const array = result[name];
      if (array !== undefined) outputs.set(name, array);
    }
    return outputs;
  }

  /**
   * Queues a validated request on its model's scheduler and returns the controller that aborts
   * the signal its callable sees.
   */
  #submit(
    entry: ModelEntry,
    request: InferenceRequest,
    validated: ValidatedRequest,
    arrival: number,
    sink: SchedulerSink,
  ): AbortController {
    const controller = new AbortController();
    entry.scheduler!.submit({
      request: this.#coreRequest(request, validated, controller),
      controller,
      batchSize: validated.batchSize,
      shapeKey: validated.shapeKey,
      arrival,
      sink,
      ...(request.priority === undefined ? {} : { priority: request.priority }),
      ...(request.timeoutMicroseconds === undefined
        ? {}
        : { timeoutMicroseconds: request.timeoutMicroseconds }),
      ...(request.signal === undefined ? {} : { signal: request.signal }),
    });
    return controller;
  }

  #coreRequest(
    request: InferenceRequest,
    validated: ValidatedRequest,
    controller: AbortController,
  ): InferRequest {
    return {
      data: Object.fromEntries(request.inputs),
      parameters: { ...request.parameters },
      requestedOutputNames: validated.outputs,
      signal: controller.signal,
    };
  }

  /**
   * Runs one request of a coupled model.
   *
   * @param request The request.
   * @returns Its response: requested outputs in declared order.
   * @throws {InferenceError} NOT_FOUND, INVALID_ARG, UNSUPPORTED (decoupled model), UNAVAILABLE,
   *   CANCELLED or INTERNAL (the callable failed).
   */
  infer(request: InferenceRequest): Promise<InferenceResponse> {
    // Everything up to submit runs synchronously so concurrent callers share a batch.
    const arrival = performance.now();
    try {
      this.#checkRunning(request.modelName);
      const found = this.#lookup(request.modelName, request.modelVersion);
      if (found.definition.config.decoupled) {
        throw new InferenceError(
          `Cannot infer with model '${request.modelName}': infer doesn't support models with decoupled transaction policy`,
          { code: "UNSUPPORTED" },
        );
      }
      const { entry, validated } = this.#prepare(request, arrival);
      const model = entry.definition;
      let key: ReturnType<typeof cacheKey> | undefined;
      const cache = model.config.responseCache ? this.#cache : undefined;
      if (cache !== undefined) {
        const lookupStart = performance.now();
        key = cacheKey(model.name, model.version, request.inputs, validated.outputs);
        const hit = cache.lookup(key);
        const lookupEnd = performance.now();
        if (hit !== undefined) {
          entry.stats.recordCacheHit(
            nsBetween(lookupStart, lookupEnd),
            nsBetween(arrival, lookupEnd),
          );
          return Promise.resolve(this.#response(entry, request, hit));
        }
        entry.stats.recordCacheMiss(nsBetween(lookupStart, lookupEnd));
      }
      return new Promise<InferenceResponse>((resolve, reject) => {
        const sink: SchedulerSink = {
          result: (result) => {
            const outputs = this.#outputsOf(result, validated);
            if (cache !== undefined && key !== undefined) cache.insert(key, outputs);
            resolve(this.#response(entry, request, outputs));
          },
          end: () => {},
          error: reject,
        };
        this.#submit(entry, request, validated, arrival, sink);
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
   * @returns The responses.
   */
  async *inferStream(request: InferenceRequest): AsyncGenerator<StreamResponse, void, undefined> {
    const arrival = performance.now();
    this.#checkRunning(request.modelName);
    const found = this.#lookup(request.modelName, request.modelVersion);
    if (!found.definition.config.decoupled) {
      throw new InferenceError(
        `Cannot stream with model '${request.modelName}': streaming needs a model with decoupled transaction policy`,
        { code: "UNSUPPORTED" },
      );
    }
    const { entry, validated } = this.#prepare(request, arrival);
    // Bounded: the scheduler waits for room before pulling the callable's next step, so a slow
    // consumer slows the model instead of queueing its steps; a consumer that stops early
    // cancels the queue, which aborts the request.
    const queue = new BoundedQueue<InferResult>({
      cancel: () =>
        controller.abort(
          InferenceError.cancelled(`Request for model '${request.modelName}' was cancelled`),
        ),
    });
    const controller = this.#submit(entry, request, validated, arrival, {
      result: (result) => queue.push(result),
      end: () => queue.end(),
      error: (error) => queue.fail(error),
    });
    const step = (result: InferResult | undefined, final: boolean): StreamResponse => ({
      ...this.#response(
        entry,
        request,
        result === undefined ? new Map() : this.#outputsOf(result, validated),
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
   * @returns The text exposition.
   */
  metrics(): Promise<string> {
    const models = renderMetrics(
      this.#loadedEntries().map((entry) => ({
        stats: entry.stats.snapshot(),
        pending: entry.scheduler?.queued ?? 0,
        cached: entry.definition.config.responseCache && this.#cache !== undefined,
      })),
      { latencyCounters: this.#latencyCounters },
    );
    return Promise.resolve(models + (this.#cpuMetrics?.render() ?? ""));
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
    const entries = this.#loadedEntries();
    const schedulers = entries.flatMap((entry) => entry.scheduler ? [entry.scheduler] : []);
    for (const scheduler of schedulers) scheduler.close();
    await this.#drainWithin(schedulers);
    const error = new InferenceError("Server stopped before the request completed", {
      code: "UNAVAILABLE",
    });
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
