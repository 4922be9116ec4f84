/**
 * The Triton-core engine: Triton 2.51's in-process server (`libtritonserver`) driven through
 * Deno FFI, with models served by DenoTriton's C forwarding backend. Triton's core does the
 * scheduling (dynamic batching, queue policies, priorities), response cache, statistics and
 * metrics; the batches it forms run on the model's {@linkcode ModelInstance}s in this isolate.
 *
 * @module
 */

import { parseMetricsSetting } from "../../config/metrics_config.ts";
import { toTritonModelConfig } from "../../config/triton_model_config.ts";
import { InferenceError, TritonError, type TritonUnrecoverableError } from "../../errors.ts";
import { describeGpus, type GpuInventory, planPlacement } from "../../gpu/devices.ts";
import { discoverGpus } from "../../gpu/cuda.ts";
import type { ModelInstance } from "../../instances/instance.ts";
import type { LogFormat, Logger, LogSettingsChange } from "../../log.ts";
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
import { checkWarmupStage } from "../warmup.ts";
import { consumeInstance } from "./backend_bridge.ts";
import { CompletionQueue } from "./events.ts";
import { type NativeLibraries, openNative } from "./ffi.ts";
import { BACKEND_NAME, findTritonInstall, setupCommand, type TritonInstall } from "./install.ts";
import { submitRequest } from "./request.ts";
import { readResponse } from "./response.ts";
import { check, cString, pointerOf, takeError, takeMessageJson } from "./status.ts";

const MODEL_CONTROL_EXPLICIT = 2;
/** `TRITONSERVER_LogFormat` values. */
const LOG_FORMAT_CODES: Readonly<Record<LogFormat, number>> = { default: 0, ISO8601: 1 };
const PARAMETER_STRING = 0;
const CHANNEL_PARAMETER = "denotriton_channel";
/** How long stop waits for given-up batches to be released after the exit timeout. */
const STUCK_GRACE_MS = 5000;
/** `tritonserver`'s `--pinned-memory-pool-byte-size` default. */
const DEFAULT_PINNED_POOL_BYTES = 268435456;

/** Options of {@linkcode NativeEngine}. */
export interface NativeEngineOptions {
  /**
   * Server id, the `name` of the server metadata.
   *
   * @default {"triton"}
   */
  id?: string;
  /**
   * Whether the server is not ready while any model is not ready.
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
   * Response cache size in bytes for the `local` cache; 0 disables it.
   *
   * @default {0}
   */
  responseCacheByteSize?: number;
  /**
   * A cache config; overrides `responseCacheByteSize`.
   *
   * @default {undefined}
   */
  cacheConfig?: CacheConfig;
  /**
   * Whether the core reports CPU utilization and memory (`nv_cpu_*`), polled every
   * `metricsIntervalMs`.
   *
   * @default {false}
   */
  cpuMetrics?: boolean;
  /**
   * Whether the core reports GPU metrics (`nv_gpu_*`, through DCGM).
   *
   * @default {true when there are GPUs}
   */
  gpuMetrics?: boolean;
  /**
   * The core's pinned host memory pool in bytes (`--pinned-memory-pool-byte-size`).
   *
   * @default {268435456 (256 MiB) when there are GPUs, else 0}
   */
  pinnedMemoryPoolByteSize?: number;
  /**
   * The GPUs: instances pinned to `cuda:N` become `KIND_GPU` groups on GPU N.
   *
   * @default {discoverGpus() when the engine starts}
   */
  gpus?: GpuInventory;
  /**
   * How often the core polls CPU and GPU metrics, in milliseconds.
   *
   * @default {2000}
   */
  metricsIntervalMs?: number;
  /**
   * Triton `--metrics-config` entries (`<setting>=<value>`), handed to the core as they are.
   *
   * @default {[]}
   */
  metricsConfig?: readonly string[];
  /**
   * Whether the core exits when a model fails to load while it starts.
   *
   * @default {true}
   */
  exitOnError?: boolean;
  /**
   * Triton's own log file; its logs go to stderr otherwise.
   *
   * @default {undefined}
   */
  logFile?: string;
  /**
   * Triton's verbose log level.
   *
   * @default {0}
   */
  logVerbose?: number;
  /**
   * Whether Triton logs info messages (its start-up tables and load/unload lines).
   *
   * @default {false}
   */
  logInfo?: boolean;
  /**
   * Called when a callable throws a `TritonUnrecoverableError` (after its batch failed).
   *
   * @default {undefined}
   */
  onUnrecoverable?: (error: TritonUnrecoverableError) => void;
  /**
   * The install to use.
   *
   * @default {the install found in the default home}
   */
  install?: TritonInstall;
}

interface ModelEntry {
  readonly definition: ModelDefinition;
  readonly channel: bigint;
  readonly instances: ModelInstance[];
  readonly consumers: Promise<void>;
  readonly order: readonly string[];
}

/** Whether `work` settles within `ms`. */
async function within(work: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const expired = new Promise<boolean>((resolve) => timer = setTimeout(resolve, ms, false));
  try {
    return await Promise.race([work.then(() => true, () => true), expired]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * The engine backed by Triton's in-process core.
 *
 * @example Serve a model through the core (needs `deno task setup:triton`)
 * ```ts ignore
 * import { NativeEngine } from "./engine.ts";
 * import { MainThreadInstances } from "../../instances/main_thread.ts";
 * import { resolveModelConfig } from "../../config/model_config.ts";
 * import { ndarray } from "../../tensor/ndarray.ts";
 * import assert from "node:assert/strict";
 *
 * await using engine = new NativeEngine();
 * await engine.start();
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
 * assert.deepEqual([...(response.outputs.get("y")!.data as Float32Array)], [2, 4]);
 * ```
 */
export class NativeEngine implements Engine {
  /** Which engine this is. */
  readonly kind: EngineKind = "triton";
  #options: NativeEngineOptions;
  #libraries: NativeLibraries | undefined;
  #queue: CompletionQueue | undefined;
  #logSubscription: Disposable | undefined;
  #server: Deno.PointerValue = null;
  #repository: string | undefined;
  #models = new Map<string, ModelEntry>();
  #loading = new Set<string>();
  #stopping: Promise<void> | undefined;
  #stopped = false;
  /** Aborted once the exit timeout passed at stop: running batches are given up. */
  #abandon = new AbortController();
  #metadata: ServerMetadata | undefined;
  #gpus: GpuInventory = { devices: [] };

  /**
   * Creates the engine; `start()` loads the core.
   *
   * @param options Server options, logging, cache and install.
   */
  constructor(options: NativeEngineOptions = {}) {
    this.#options = options;
  }

  get #core(): NativeLibraries["core"] {
    if (this.#libraries === undefined || this.#server === null) {
      throw InferenceError.unavailable("The Triton engine is not started");
    }
    return this.#libraries.core;
  }

  /**
   * Loads the core and creates the in-process server.
   *
   * @throws {TritonError} When the core is not installed or cannot start.
   */
  async start(): Promise<void> {
    if (this.#server !== null) return;
    if (this.#stopping !== undefined) {
      throw new TritonError("Cannot start the Triton engine: it was stopped");
    }
    const install = this.#options.install ?? await findTritonInstall();
    if (install === undefined) {
      throw new TritonError(
        `Cannot start the Triton engine: the Triton core is not installed (run: ${setupCommand()})`,
      );
    }
    const libraries = openNative(install);
    const { core } = libraries;
    this.#gpus = this.#options.gpus ?? discoverGpus();
    if (this.#gpus.devices.length > 0) {
      this.#options.logger?.info(`GPUs: ${describeGpus(this.#gpus.devices)}`);
    }
    this.#repository = await Deno.makeTempDir({ prefix: "denotriton-repository-" });
    const slot = new BigUint64Array(1);
    check(core, core.TRITONSERVER_ServerOptionsNew(slot));
    const options = pointerOf(slot);
    try {
      const o = this.#options;
      const set = (error: Deno.PointerValue): void =>
        check(core, error, "Cannot set a Triton server option");
      set(core.TRITONSERVER_ServerOptionsSetServerId(options, cString(o.id ?? "triton")));
      set(
        core.TRITONSERVER_ServerOptionsSetModelRepositoryPath(options, cString(this.#repository)),
      );
      set(core.TRITONSERVER_ServerOptionsSetModelControlMode(options, MODEL_CONTROL_EXPLICIT));
      set(core.TRITONSERVER_ServerOptionsSetStrictModelConfig(options, true));
      set(
        core.TRITONSERVER_ServerOptionsSetBackendDirectory(
          options,
          cString(install.backendDirectory),
        ),
      );
      set(core.TRITONSERVER_ServerOptionsSetRepoAgentDirectory(options, cString(this.#repository)));
      // tritonserver's defaults where there are GPUs; without them a pinned pool would only make
      // the core try cudaHostAlloc, and GPU metrics start DCGM, which only warns.
      const hasGpus = this.#gpus.devices.length > 0;
      set(core.TRITONSERVER_ServerOptionsSetPinnedMemoryPoolByteSize(
        options,
        BigInt(o.pinnedMemoryPoolByteSize ?? (hasGpus ? DEFAULT_PINNED_POOL_BYTES : 0)),
      ));
      set(core.TRITONSERVER_ServerOptionsSetMetrics(options, true));
      set(core.TRITONSERVER_ServerOptionsSetGpuMetrics(options, o.gpuMetrics ?? hasGpus));
      set(core.TRITONSERVER_ServerOptionsSetCpuMetrics(options, o.cpuMetrics ?? false));
      set(core.TRITONSERVER_ServerOptionsSetMetricsInterval(
        options,
        BigInt(o.metricsIntervalMs ?? 2000),
      ));
      for (const entry of o.metricsConfig ?? []) {
        const { group, setting, value } = parseMetricsSetting(entry);
        set(core.TRITONSERVER_ServerOptionsSetMetricsConfig(
          options,
          cString(group),
          cString(setting),
          cString(value),
        ));
      }
      set(core.TRITONSERVER_ServerOptionsSetStrictReadiness(options, o.strictReadiness ?? true));
      set(core.TRITONSERVER_ServerOptionsSetExitTimeout(options, o.exitTimeoutSecs ?? 30));
      set(core.TRITONSERVER_ServerOptionsSetExitOnError(options, o.exitOnError ?? true));
      // A failed load (e.g. a failing warm-up) must fail at once: a retry finds no free slots.
      set(core.TRITONSERVER_ServerOptionsSetModelLoadRetryCount(options, 0));
      set(core.TRITONSERVER_ServerOptionsSetLogInfo(options, o.logInfo ?? false));
      set(core.TRITONSERVER_ServerOptionsSetLogWarn(options, true));
      set(core.TRITONSERVER_ServerOptionsSetLogError(options, true));
      set(core.TRITONSERVER_ServerOptionsSetLogVerbose(options, o.logVerbose ?? 0));
      // The format is process-wide: an earlier server in this process may have changed it.
      set(core.TRITONSERVER_ServerOptionsSetLogFormat(
        options,
        LOG_FORMAT_CODES[o.logger?.settings.format ?? "default"],
      ));
      if (o.logFile !== undefined) {
        set(core.TRITONSERVER_ServerOptionsSetLogFile(options, cString(o.logFile)));
      }
      const cache = o.cacheConfig ??
        ((o.responseCacheByteSize ?? 0) > 0
          ? { name: "local", config: { size: String(o.responseCacheByteSize) } }
          : undefined);
      if (cache !== undefined) {
        set(
          core.TRITONSERVER_ServerOptionsSetCacheDirectory(
            options,
            cString(install.cacheDirectory),
          ),
        );
        set(core.TRITONSERVER_ServerOptionsSetCacheConfig(
          options,
          cString(cache.name),
          cString(JSON.stringify(cache.config)),
        ));
      }
      check(
        core,
        await core.TRITONSERVER_ServerNew(slot, options),
        "Cannot start the Triton server",
      );
      this.#server = pointerOf(slot);
    } catch (error) {
      await Deno.remove(this.#repository, { recursive: true }).catch(() => {});
      this.#repository = undefined;
      throw error;
    } finally {
      const failure = core.TRITONSERVER_ServerOptionsDelete(options);
      if (failure !== null) core.TRITONSERVER_ErrorDelete(failure);
    }
    this.#libraries = libraries;
    this.#queue = new CompletionQueue(libraries.bridge);
    this.#logSubscription = this.#options.logger?.onChange((change) =>
      this.#applyLogChange(change)
    );
    this.#options.logger?.info(
      `Started Triton ${install.version} in-process (${install.coreLibrary})`,
    );
  }

  // The core's log settings are process-wide and only settable through server options (Triton's
  // own /v2/logging handler calls the same setters), so a throwaway options object carries them.
  // Only what changed is applied: the core's info logging stays off until asked for.
  #applyLogChange(change: LogSettingsChange): void {
    if (this.#libraries === undefined) return;
    const { core } = this.#libraries;
    const slot = new BigUint64Array(1);
    check(core, core.TRITONSERVER_ServerOptionsNew(slot));
    const options = pointerOf(slot);
    try {
      const set = (error: Deno.PointerValue): void =>
        check(core, error, "Cannot change the Triton core's log settings");
      if (change.info !== undefined) {
        set(core.TRITONSERVER_ServerOptionsSetLogInfo(options, change.info));
      }
      if (change.warning !== undefined) {
        set(core.TRITONSERVER_ServerOptionsSetLogWarn(options, change.warning));
      }
      if (change.error !== undefined) {
        set(core.TRITONSERVER_ServerOptionsSetLogError(options, change.error));
      }
      if (change.verbose !== undefined) {
        set(core.TRITONSERVER_ServerOptionsSetLogVerbose(options, change.verbose));
      }
      if (change.format !== undefined) {
        set(core.TRITONSERVER_ServerOptionsSetLogFormat(options, LOG_FORMAT_CODES[change.format]));
      }
    } finally {
      const failure = core.TRITONSERVER_ServerOptionsDelete(options);
      if (failure !== null) core.TRITONSERVER_ErrorDelete(failure);
    }
  }

  /** Whether the core reports the server live. */
  isLive(): boolean {
    if (this.#server === null || this.#stopped) return false;
    const live = new Uint8Array(1);
    const failure = takeError(this.#core, this.#core.TRITONSERVER_ServerIsLive(this.#server, live));
    return failure === undefined && live[0] === 1;
  }

  /**
   * Whether the core reports the server ready.
   *
   * @returns False while stopping, or (strict readiness) while a model is not ready.
   */
  isReady(): Promise<boolean> {
    if (this.#server === null || this.#stopping !== undefined) return Promise.resolve(false);
    const ready = new Uint8Array(1);
    const failure = takeError(
      this.#core,
      this.#core.TRITONSERVER_ServerIsReady(this.#server, ready),
    );
    return Promise.resolve(failure === undefined && ready[0] === 1);
  }

  /**
   * Server metadata from the core (name and version), with the extensions DenoTriton serves.
   *
   * @returns `{name, version, extensions}`.
   */
  serverMetadata(): ServerMetadata {
    if (this.#metadata !== undefined) return this.#metadata;
    const slot = new BigUint64Array(1);
    check(this.#core, this.#core.TRITONSERVER_ServerMetadata(this.#server, slot));
    const json = takeMessageJson(this.#core, pointerOf(slot)) as ServerMetadata;
    this.#metadata = {
      name: json.name,
      version: json.version,
      extensions: ENGINE_EXTENSIONS.filter((e) => json.extensions.includes(e)),
    };
    return this.#metadata;
  }

  /**
   * Starts the model's instances and loads it into the core with a generated config.
   *
   * @param model The model.
   * @throws {InferenceError} ALREADY_EXISTS for a loaded name and version, UNSUPPORTED for a
   *   second version of a loaded model, UNAVAILABLE when stopping, or the core's load error.
   */
  async loadModel(model: ModelDefinition): Promise<void> {
    this.#core; // throws when not started
    const { bridge } = this.#libraries!;
    if (this.#stopping !== undefined) {
      throw InferenceError.unavailable(`Cannot load model '${model.name}': the server is stopping`);
    }
    const existing = this.#models.get(model.name);
    if (existing !== undefined) {
      if (existing.definition.version === model.version) {
        throw new InferenceError(
          `Cannot load model '${model.name}': version ${model.version} is loaded already`,
          { code: "ALREADY_EXISTS" },
        );
      }
      throw new InferenceError(
        `Cannot load model '${model.name}' version ${model.version}: the Triton engine serves one version per model and version ${existing.definition.version} is loaded`,
        { code: "UNSUPPORTED" },
      );
    }
    if (this.#loading.has(model.name)) {
      throw new InferenceError(`Cannot load model '${model.name}': it is being loaded`, {
        code: "ALREADY_EXISTS",
      });
    }
    this.#loading.add(model.name);
    try {
      const gpus = this.#gpus;
      planPlacement(model.name, model.instances.devices, gpus, this.#options.logger);
      let instances: ModelInstance[];
      try {
        instances = await model.instances.start(model, { gpus });
      } catch (error) {
        const reason = error instanceof Error ? error.message : String(error);
        throw new InferenceError(
          `Failed to load model '${model.name}' version ${model.version}: ${reason}`,
          { code: "INTERNAL", cause: error },
        );
      }
      const attach = (): { channel: bigint; consumers: Promise<void> } => {
        const channel = bridge.dt_channel_open(instances.length, model.config.decoupled ? 1 : 0);
        const consumers = Promise.all(instances.map((instance, slot) =>
          consumeInstance({
            bridge,
            channel,
            slot,
            instance,
            model,
            stopping: this.#abandon.signal,
            ...(this.#options.logger ? { logger: this.#options.logger } : {}),
            ...(this.#options.onUnrecoverable
              ? { onUnrecoverable: this.#options.onUnrecoverable }
              : {}),
          }).catch((error) => {
            this.#options.logger?.error(
              `Instance ${slot} of '${model.name}' stopped serving: ${String(error)}`,
            );
          })
        )).then(() => {});
        return { channel, consumers };
      };
      let attached = attach();
      const detach = async (): Promise<void> => {
        bridge.dt_channel_close(attached.channel);
        await attached.consumers;
      };
      let warmup = model.config.warmup.length > 0;
      if (warmup) {
        try {
          for (const stage of model.config.warmup) checkWarmupStage(model, stage);
        } catch (error) {
          if (model.strict) {
            await detach();
            await this.#disposeInstances(model, instances);
            throw new InferenceError(
              `Failed to load model '${model.name}' version ${model.version}: ${
                (error as Error).message
              }`,
              { code: "INVALID_ARG", cause: error },
            );
          }
          this.#options.logger?.warn(`${(error as Error).message}: loading without warm-up`);
          warmup = false;
        }
      }
      try {
        await this.#loadIntoCore(model, attached.channel, instances.length, warmup);
      } catch (error) {
        await detach();
        if (!warmup || model.strict) {
          await this.#disposeInstances(model, instances);
          throw error;
        }
        // Triton fails the load when a warm-up sample fails; without strict, log it and load
        // again without warm-up (a new channel: the failed load finalized the old slots).
        this.#options.logger?.warn(
          `Warm-up of model '${model.name}' failed: ${
            (error as Error).message
          }: loading without warm-up`,
        );
        attached = attach();
        try {
          await this.#loadIntoCore(model, attached.channel, instances.length, false);
        } catch (retryError) {
          await detach();
          await this.#disposeInstances(model, instances);
          throw retryError;
        }
      }
      const entry: ModelEntry = {
        definition: model,
        channel: attached.channel,
        instances,
        consumers: attached.consumers,
        order: model.outputs.map((o) => o.name),
      };
      this.#models.set(model.name, entry);
      this.#options.logger?.info(`Successfully loaded '${model.name}' version ${model.version}`);
    } finally {
      this.#loading.delete(model.name);
    }
  }

  async #disposeInstances(model: ModelDefinition, instances: ModelInstance[]): Promise<void> {
    await this.#dispose({
      definition: model,
      channel: 0n,
      instances,
      consumers: Promise.resolve(),
      order: [],
    });
  }

  async #loadIntoCore(
    model: ModelDefinition,
    channel: bigint,
    count: number,
    warmup: boolean,
  ): Promise<void> {
    const core = this.#core;
    const modelDirectory = `${this.#repository}/${model.name}`;
    await Deno.mkdir(`${modelDirectory}/${model.version}`, { recursive: true });
    const devices = Array.from({ length: count }, (_, i) => model.instances.devices[i] ?? "cpu");
    // One group per instance: Triton initializes them in order, so instance thread i attaches
    // to slot i and feeds our instance i (and its Worker).
    const config = toTritonModelConfig(model, {
      backend: BACKEND_NAME,
      devices,
      gpuCount: this.#gpus.devices.length,
      parameters: { [CHANNEL_PARAMETER]: String(channel) },
    });
    config.version_policy = { specific: { versions: [model.version] } };
    if (!warmup) delete config.model_warmup;
    else await this.#placeWarmupFiles(modelDirectory, config);
    const parameter = core.TRITONSERVER_ParameterNew(
      cString("config"),
      PARAMETER_STRING,
      cString(JSON.stringify(config)),
    );
    if (parameter === null) {
      throw new InferenceError(`Cannot load model '${model.name}': cannot create its config`);
    }
    try {
      const list = new BigUint64Array([BigInt(Deno.UnsafePointer.value(parameter))]);
      check(
        core,
        await core.TRITONSERVER_ServerLoadModelWithParameters(
          this.#server,
          cString(model.name),
          list,
          1n,
        ),
        `Failed to load model '${model.name}' version ${model.version}`,
      );
    } finally {
      core.TRITONSERVER_ParameterDelete(parameter);
    }
  }

  /** Copies warm-up data files into `<model dir>/warmup/`, where Triton reads them. */
  async #placeWarmupFiles(modelDirectory: string, config: Record<string, unknown>): Promise<void> {
    const stages = config.model_warmup as { inputs: Record<string, Record<string, unknown>> }[];
    let index = 0;
    for (const stage of stages) {
      for (const input of Object.values(stage.inputs)) {
        const source = input.input_data_file;
        if (typeof source !== "string") continue;
        const name = `input_${index++}`;
        await Deno.mkdir(`${modelDirectory}/warmup`, { recursive: true });
        await Deno.copyFile(source, `${modelDirectory}/warmup/${name}`);
        input.input_data_file = name;
      }
    }
  }

  async #dispose(entry: ModelEntry): Promise<void> {
    await Promise.all(entry.instances.map(async (instance) => {
      try {
        await instance[Symbol.asyncDispose]();
      } catch (error) {
        this.#options.logger?.warn(
          `Failed to stop instance ${instance.index} of '${entry.definition.name}': ${
            error instanceof Error ? error.message : String(error)
          }`,
        );
      }
    }));
  }

  /**
   * Unloads a model from the core (waiting for its in-flight requests) and stops its instances.
   *
   * @param name Model name.
   * @param version Model version; the loaded one when undefined.
   * @throws {InferenceError} NOT_FOUND for unknown models or versions.
   */
  async unloadModel(name: string, version?: number): Promise<void> {
    const core = this.#core;
    const entry = this.#models.get(name);
    if (entry === undefined) {
      throw new InferenceError(`Request for unknown model: '${name}' is not found`, {
        code: "NOT_FOUND",
      });
    }
    if (version !== undefined && version !== -1 && version !== entry.definition.version) {
      throw new InferenceError(
        `Request for unknown model: '${name}' version ${version} is not found`,
        { code: "NOT_FOUND" },
      );
    }
    check(
      core,
      await core.TRITONSERVER_ServerUnloadModel(this.#server, cString(name)),
      `Failed to unload model '${name}'`,
    );
    // Triton finalizes the instances once in-flight batches are done; the consumers then end.
    await entry.consumers;
    this.#libraries!.bridge.dt_channel_close(entry.channel);
    this.#models.delete(name);
    await this.#dispose(entry);
    this.#options.logger?.info(
      `Successfully unloaded '${name}' version ${entry.definition.version}`,
    );
  }

  /**
   * Whether a model version is ready in the core.
   *
   * @param name Model name.
   * @param version Model version; chosen by the version policy when undefined.
   * @returns False for unknown models.
   */
  modelReady(name: string, version?: number): Promise<boolean> {
    if (this.#server === null || this.#stopped) return Promise.resolve(false);
    const ready = new Uint8Array(1);
    const failure = takeError(
      this.#core,
      this.#core.TRITONSERVER_ServerModelIsReady(
        this.#server,
        cString(name),
        BigInt(version ?? -1),
        ready,
      ),
    );
    // Not ready while every instance is down (a crashed Worker restarting or given up).
    const alive = this.#models.get(name)?.instances.some((instance) => instance.alive) ?? false;
    return Promise.resolve(failure === undefined && ready[0] === 1 && alive);
  }

  #message(call: (slot: BigUint64Array) => Deno.PointerValue): unknown {
    const slot = new BigUint64Array(1);
    check(this.#core, call(slot));
    return takeMessageJson(this.#core, pointerOf(slot));
  }

  /**
   * Model metadata from the core.
   *
   * @param name Model name.
   * @param version Model version.
   * @returns `{name, versions, platform, inputs, outputs}`.
   */
  modelMetadata(name: string, version?: number): Promise<ModelMetadata> {
    try {
      return Promise.resolve(this.#message((slot) =>
        this.#core.TRITONSERVER_ServerModelMetadata(
          this.#server,
          cString(name),
          BigInt(version ?? -1),
          slot,
        )
      ) as ModelMetadata);
    } catch (error) {
      return Promise.reject(error);
    }
  }

  /**
   * The core's normalised model config (without DenoTriton's internal parameter).
   *
   * @param name Model name.
   * @param version Model version.
   * @returns The config JSON.
   */
  modelConfig(name: string, version?: number): Promise<TritonModelConfigJson> {
    try {
      const config = this.#message((slot) =>
        this.#core.TRITONSERVER_ServerModelConfig(
          this.#server,
          cString(name),
          BigInt(version ?? -1),
          1,
          slot,
        )
      ) as TritonModelConfigJson;
      const parameters = config.parameters as Record<string, unknown> | undefined;
      if (parameters !== undefined) delete parameters[CHANNEL_PARAMETER];
      return Promise.resolve(config);
    } catch (error) {
      return Promise.reject(error);
    }
  }

  /**
   * Statistics from the core.
   *
   * @param name Model name; all models when undefined.
   * @param version Model version.
   * @returns `{model_stats: [...]}`.
   */
  modelStatistics(name?: string, version?: number): Promise<{ model_stats: ModelStatistics[] }> {
    try {
      return Promise.resolve(this.#message((slot) =>
        this.#core.TRITONSERVER_ServerModelStatistics(
          this.#server,
          cString(name ?? ""),
          BigInt(version ?? -1),
          slot,
        )
      ) as { model_stats: ModelStatistics[] });
    } catch (error) {
      return Promise.reject(error);
    }
  }

  /**
   * The core's repository index.
   *
   * @param readyOnly Only ready versions.
   * @returns The entries.
   */
  repositoryIndex(readyOnly: boolean): Promise<RepositoryIndexEntry[]> {
    try {
      return Promise.resolve(
        this.#message((slot) =>
          this.#core.TRITONSERVER_ServerModelIndex(this.#server, readyOnly ? 1 : 0, slot)
        ) as RepositoryIndexEntry[],
      );
    } catch (error) {
      return Promise.reject(error);
    }
  }

  /**
   * Whether a model is decoupled.
   *
   * @param name Model name.
   * @param version Model version.
   * @returns Its transaction policy.
   */
  isDecoupled(name: string, version?: number): Promise<boolean> {
    const entry = this.#models.get(name);
    if (
      entry === undefined ||
      (version !== undefined && version !== -1 && version !== entry.definition.version)
    ) {
      return Promise.reject(
        new InferenceError(`Request for unknown model: '${name}' is not found`, {
          code: "NOT_FOUND",
        }),
      );
    }
    return Promise.resolve(entry.definition.config.decoupled);
  }

  #checkRunning(name: string): void {
    if (this.#stopping !== undefined || this.#server === null) {
      throw InferenceError.unavailable(`Cannot infer with model '${name}': the server is stopping`);
    }
  }

  /**
   * Runs one request of a coupled model through the core.
   *
   * @param request The request.
   * @returns Its response.
   * @throws {InferenceError} With the core's code (NOT_FOUND, INVALID_ARG, UNAVAILABLE,
   *   CANCELLED, INTERNAL for callable failures) or UNSUPPORTED for decoupled models.
   */
  infer(request: InferenceRequest): Promise<InferenceResponse> {
    try {
      this.#checkRunning(request.modelName);
      const entry = this.#models.get(request.modelName);
      if (entry?.definition.config.decoupled) {
        throw new InferenceError(
          `Cannot infer with model '${request.modelName}': infer doesn't support models with decoupled transaction policy`,
          { code: "UNSUPPORTED" },
        );
      }
      const order = entry?.order ?? [];
      const libraries = this.#libraries!;
      return new Promise<InferenceResponse>((resolve, reject) => {
        submitRequest(libraries, this.#queue!, this.#server, request, {
          response: (response, final) => {
            if (response === null) {
              if (final) {
                reject(new InferenceError("The model sent no response", { code: "INTERNAL" }));
              }
              return;
            }
            try {
              resolve(readResponse(libraries.bridge, response, order));
            } catch (error) {
              reject(error);
            }
          },
        });
      });
    } catch (error) {
      return Promise.reject(error);
    }
  }

  /**
   * Runs one request of a decoupled model: each response as it arrives (`final: false`), then
   * one `final: true` response without outputs (Triton's flags-only final), like the built-in
   * engine.
   *
   * @param request The request.
   * @returns The responses.
   */
  async *inferStream(request: InferenceRequest): AsyncGenerator<StreamResponse, void, undefined> {
    this.#checkRunning(request.modelName);
    const entry = this.#models.get(request.modelName);
    if (entry === undefined) {
      throw new InferenceError(`Request for unknown model: '${request.modelName}' is not found`, {
        code: "NOT_FOUND",
      });
    }
    if (!entry.definition.config.decoupled) {
      throw new InferenceError(
        `Cannot stream with model '${request.modelName}': streaming needs a model with decoupled transaction policy`,
        { code: "UNSUPPORTED" },
      );
    }
    type Event =
      | { kind: "value"; value: InferenceResponse }
      | { kind: "end" }
      | { kind: "error"; error: unknown };
    const events: Event[] = [];
    let wake: (() => void) | undefined;
    const push = (event: Event): void => {
      events.push(event);
      wake?.();
    };
    const libraries = this.#libraries!;
    const controller = new AbortController();
    const signal = request.signal === undefined
      ? controller.signal
      : AbortSignal.any([request.signal, controller.signal]);
    submitRequest(libraries, this.#queue!, this.#server, { ...request, signal }, {
      response: (response, final) => {
        if (response !== null) {
          try {
            push({ kind: "value", value: readResponse(libraries.bridge, response, entry.order) });
          } catch (error) {
            push({ kind: "error", error });
            return;
          }
        }
        if (final) push({ kind: "end" });
      },
    });
    let finished = false;
    try {
      while (true) {
        if (events.length === 0) {
          await new Promise<void>((resolve) => wake = resolve);
          wake = undefined;
          continue;
        }
        const event = events.shift()!;
        if (event.kind === "value") {
          // Sent at once (streaming latency), and never merged with the final flag: clients such
          // as PyTriton's DecoupledModelClient drop the outputs of a response marked final.
          yield { ...event.value, final: false };
          continue;
        }
        finished = true;
        if (event.kind === "end") {
          yield {
            modelName: entry.definition.name,
            modelVersion: String(entry.definition.version),
            ...(request.id === undefined || request.id === "" ? {} : { id: request.id }),
            outputs: new Map(),
            final: true,
          };
          return;
        }
        throw event.error;
      }
    } finally {
      if (!finished) controller.abort();
    }
  }

  /**
   * The core's Prometheus metrics.
   *
   * @returns The text exposition.
   */
  metrics(): Promise<string> {
    try {
      const core = this.#core;
      const slot = new BigUint64Array(1);
      check(core, core.TRITONSERVER_ServerMetrics(this.#server, slot));
      const metrics = pointerOf(slot);
      try {
        const base = new BigUint64Array(1);
        const size = new BigUint64Array(1);
        check(core, core.TRITONSERVER_MetricsFormatted(metrics, 0, base, size));
        const length = Number(size[0]);
        return Promise.resolve(
          length === 0 ? "" : new TextDecoder().decode(
            new Uint8Array(Deno.UnsafePointerView.getArrayBuffer(pointerOf(base)!, length)),
          ),
        );
      } finally {
        const failure = core.TRITONSERVER_MetricsDelete(metrics);
        if (failure !== null) core.TRITONSERVER_ErrorDelete(failure);
      }
    } catch (error) {
      return Promise.reject(error);
    }
  }

  /**
   * Stops the core (it waits for in-flight requests up to the exit timeout and unloads every
   * model), stops the instances, deletes the server and removes the repository. Idempotent.
   */
  stop(): Promise<void> {
    this.#stopping ??= this.#stop();
    return this.#stopping;
  }

  async #stop(): Promise<void> {
    if (this.#server === null || this.#libraries === undefined) {
      this.#stopped = true;
      return;
    }
    const { core, bridge } = this.#libraries;
    const server = this.#server;
    this.#logSubscription?.[Symbol.dispose]();
    this.#logSubscription = undefined;
    const stopError = takeError(core, await core.TRITONSERVER_ServerStop(server));
    if (stopError !== undefined) this.#options.logger?.warn(`Triton stop: ${stopError.message}`);
    const entries = [...this.#models.values()];
    // The core waited for in-flight requests up to the exit timeout: batches still running fail
    // with UNAVAILABLE now, idle consumers end with their channels, and the instances stop (a
    // Worker must have ended before the core may free the inputs it reads in place).
    this.#abandon.abort();
    for (const entry of entries) bridge.dt_channel_close(entry.channel);
    const disposed = Promise.all(entries.map((entry) => this.#dispose(entry)));
    let clean = await within(Promise.all(entries.map((entry) => entry.consumers)), STUCK_GRACE_MS);
    await disposed;
    // Requests hold the core's models: each must be released and deleted first. After an exit
    // timeout the core also stopped waiting for its unloads, which go on (each model is deleted
    // on a thread of its own); deleting the server under them corrupts the heap.
    if (clean) clean = await within(this.#queue?.idle() ?? Promise.resolve(), STUCK_GRACE_MS);
    if (clean && stopError !== undefined) clean = await this.#untilUnloaded(server);
    this.#server = null;
    this.#stopped = true;
    this.#models.clear();
    if (!clean) {
      // A Worker stuck in synchronous code cannot be stopped, and its batch cannot be released:
      // the core is left as it is, to the process's exit.
      this.#options.logger?.error(
        "Triton stop: a batch was never released (a Worker instance stuck in synchronous code?): the core is not deleted",
      );
      return;
    }
    const deleteError = takeError(core, await core.TRITONSERVER_ServerDelete(server));
    if (deleteError !== undefined) {
      this.#options.logger?.warn(`Triton delete: ${deleteError.message}`);
    }
    await this.#queue?.idle();
    this.#queue?.[Symbol.dispose]();
    this.#queue = undefined;
    if (this.#repository !== undefined) {
      await Deno.remove(this.#repository, { recursive: true }).catch(() => {});
      this.#repository = undefined;
    }
  }

  /** Polls the repository index until no model is loaded or unloading (bounded). */
  async #untilUnloaded(server: Deno.PointerValue): Promise<boolean> {
    const core = this.#libraries!.core;
    const deadline = performance.now() + STUCK_GRACE_MS;
    while (performance.now() < deadline) {
      const slot = new BigUint64Array(1);
      const failure = takeError(core, core.TRITONSERVER_ServerModelIndex(server, 0, slot));
      if (failure !== undefined) return false;
      const index = takeMessageJson(core, pointerOf(slot)) as RepositoryIndexEntry[];
      const unloaded = index.every((entry) => entry.state === "UNAVAILABLE");
      // After the state changes, the model's deleter thread still has a few steps to take.
      await new Promise((resolve) => setTimeout(resolve, 50));
      if (unloaded) return true;
    }
    return false;
  }

  /** Stops the engine. */
  [Symbol.asyncDispose](): Promise<void> {
    return this.stop();
  }
}
