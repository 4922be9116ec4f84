/**
 * The Triton-core engine: Triton 2.51's in-process server (`libtritonserver`) driven through
 * Deno FFI, with models served by DenoTriton's C forwarding backend. Triton's core does the
 * scheduling (dynamic batching, queue policies, priorities), response cache, statistics and
 * metrics; the batches it forms run on the model's {@linkcode ModelInstance}s in this isolate.
 *
 * This file is the facade: server options (`server_options.ts`), log settings
 * (`log_bridge.ts`), loading (`model_loader.ts`), the queries (`queries.ts`), requests
 * (`request.ts`, `response.ts`, `response_stream.ts`), the backend half (`backend_bridge.ts`)
 * and stopping (`shutdown.ts`) live beside it. It stays a little over 500 lines: each method of
 * the engine contract, documented.
 *
 * @module
 */

import { toTritonModelConfig } from "../../config/triton_model_config.ts";
import { discoverGpus } from "../../gpu/cuda.ts";
import { describeGpus, type GpuInventory } from "../../gpu/devices.ts";
import { InferenceError, TritonError } from "../../errors.ts";
import {
  type Engine,
  ENGINE_EXTENSIONS,
  type EngineKind,
  type EngineShare,
  type InferenceRequest,
  type InferenceResponse,
  type LoadOptions,
  type ModelDefinition,
  type ModelHandle,
  type ModelMetadata,
  type ModelStatistics,
  type RepositoryIndexEntry,
  type ServerMetadata,
  type ShareEnd,
  type StreamResponse,
  type TritonModelConfigJson,
  type UnloadOptions,
} from "../engine.ts";
import { lookupVersion } from "../model_lookup.ts";
import {
  encodeParent,
  engineCaller,
  ensembleParent,
  PARENT_PARAMETER,
  refuseDeadlock,
  refuseDecoupledSteps,
} from "../calls.ts";
import type { CallParent } from "../../callable/types.ts";
import { checkSequenceRequest } from "../sequences.ts";
import { CompletionPump } from "./events.ts";
import { type NativeLibraries, openNative } from "../../native/ffi.ts";
import { findTritonInstall, setupCommand } from "../../setup/install.ts";
import { bridgeLogSettings } from "./log_bridge.ts";
import { CoreLog, withCoreReasons } from "./core_log.ts";
import { Logger } from "../../log.ts";
import {
  disposeInstances,
  type LoadedModel,
  loadEnsemble,
  type LoaderContext,
  loadModel,
  retire,
  unloadFromCore,
} from "./model_loader.ts";
import * as queries from "./queries.ts";
import { type CoreHandles, inferCoupled, type NativeTraceHooks, submitRequest } from "./request.ts";
import { CoreMetrics } from "./custom_metrics.ts";
import {
  closeQueueSignal,
  openQueueSignal,
  type QueueSignal,
  ringQueueSignals,
} from "./queue_signals.ts";
import { monotonicNs, type RequestTrace } from "../../telemetry/request_trace.ts";
import { readResponse } from "./response.ts";
import { returnLent } from "./tensors.ts";
import { ENSEMBLE_SIGNAL_PARAMETER, ResponseStream, STREAM_PARAMETER } from "./response_stream.ts";
import { createServer, type NativeEngineOptions } from "./server_options.ts";
import { deleteServer, releaseServer } from "./shutdown.ts";

export type { NativeEngineOptions } from "./server_options.ts";

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
  #queue: CompletionPump | undefined;
  #logSubscription: Disposable | undefined;
  /** Forwards the core's log lines through the logger. */
  #coreLog: CoreLog | undefined;
  #ownLogger: Logger | undefined;
  #server: Deno.PointerValue = null;
  #repository: string | undefined;
  #models = new Map<string, LoadedModel>();
  /** The model behind each handle this engine gave out, while it is loaded. */
  #loaded = new WeakMap<ModelHandle, LoadedModel>();
  #loading = new Set<string>();
  /** Models unloaded but not forgotten (the repository API's unload): name → version. */
  #unloaded = new Map<string, number>();
  /** Decoupled requests' streams, by the number in their stream parameter. */
  #streams = new Map<number, ResponseStream>();
  #nextStream = 1;
  #stopping: Promise<void> | undefined;
  #stopped = false;
  /** Aborted once the exit timeout passed at stop: running batches are given up. */
  #abandon = new AbortController();
  #metadata: ServerMetadata | undefined;
  #gpus: GpuInventory = { devices: [] };
  /** How each share ends (see `share`). */
  #shares = new Set<ShareEnd>();
  /** The signals of the shares' completion queues, closed when the engine stops. */
  #signals: QueueSignal[] = [];
  /** The signals of ensemble requests running, by the token their steps carry. */
  #ensembleSignals = new Map<number, AbortSignal>();
  #nextEnsembleSignal = 0;
  /** Runs the calls of the instances' callables to other models, through the core. */
  #caller = engineCaller(this);
  /** Requests the core traces, by the core's trace id (the backend half finds them by it). */
  #traces = new Map<bigint, RequestTrace>();
  /** The models' own metrics, in the core's registry. */
  #customMetrics: CoreMetrics | undefined;

  /**
   * Creates the engine; `start()` loads the core.
   *
   * @param options Server options, logging, cache and install.
   */
  constructor(options: NativeEngineOptions = {}) {
    this.#options = options;
  }

  /** Where the core's lines go: the logger, else one of the engine's own (`logFile`). */
  get #coreLogger(): Logger {
    if (this.#options.logger !== undefined) return this.#options.logger;
    this.#ownLogger ??= new Logger(
      this.#options.logFile === undefined ? {} : { file: this.#options.logFile },
    );
    return this.#ownLogger;
  }

  get #core(): NativeLibraries["core"] {
    if (this.#libraries === undefined || this.#server === null) {
      throw InferenceError.unavailable("The Triton engine is not started");
    }
    return this.#libraries.core;
  }

  get #context(): LoaderContext {
    const { logger, onUnrecoverable } = this.#options;
    return {
      libraries: this.#libraries!,
      server: this.#server,
      repository: this.#repository!,
      gpus: this.#gpus,
      stopping: this.#abandon.signal,
      logTarget: this.#coreLog?.target ?? 0n,
      streamOf: (token) => this.#streams.get(token),
      signalOf: (token) => this.#ensembleSignals.get(token),
      caller: this.#caller,
      delivered: () => {
        this.#queue?.drain();
        // Only a shared core has other isolates' queues to wake: one bridge call less per batch
        // without.
        if (this.#signals.length > 0) ringQueueSignals(this.#libraries!.bridge);
      },
      traceOf: (id) => this.#traces.get(id),
      ...(this.#customMetrics === undefined ? {} : { metrics: this.#customMetrics }),
      ...(this.#options.tracer?.opentelemetry === undefined
        ? {}
        : { opentelemetry: this.#options.tracer.opentelemetry }),
      ...(logger ? { logger } : {}),
      // As the built-in engine: the hook reports the error; without one, the log does.
      onUnrecoverable: onUnrecoverable ??
        ((error) => logger?.error(`Unrecoverable error in a model: ${error.message}`)),
    };
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
    this.#gpus = this.#options.gpus ?? discoverGpus();
    if (this.#gpus.devices.length > 0) {
      this.#options.logger?.info(`GPUs: ${describeGpus(this.#gpus.devices)}`);
    }
    const repository = await Deno.makeTempDir({ prefix: "denotriton-repository-" });
    let coreLog: CoreLog | undefined;
    try {
      coreLog = await CoreLog.open(libraries, this.#coreLogger);
      this.#server = await createServer(libraries, this.#options, {
        install,
        repository,
        gpus: this.#gpus,
        logTarget: coreLog.target,
      });
      coreLog.drain();
    } catch (error) {
      coreLog?.[Symbol.dispose]();
      await Deno.remove(repository, { recursive: true }).catch(() => {});
      throw error;
    }
    this.#coreLog = coreLog;
    this.#repository = repository;
    this.#libraries = libraries;
    this.#queue = new CompletionPump(libraries.bridge);
    this.#customMetrics = new CoreMetrics(libraries.core);
    const logger = this.#options.logger;
    if (logger !== undefined) this.#logSubscription = bridgeLogSettings(libraries.core, logger);
    logger?.info(`Started Triton ${install.version} in-process (${install.coreLibrary})`);
  }

  /** Whether the core reports the server live. */
  isLive(): boolean {
    if (this.#server === null || this.#stopped) return false;
    return queries.serverIsLive(this.#core, this.#server);
  }

  /**
   * Whether the core reports the server ready.
   *
   * @returns False while stopping, or (strict readiness) while a model is not ready.
   */
  isReady(): boolean {
    if (this.#server === null || this.#stopping !== undefined) return false;
    return queries.serverIsReady(this.#core, this.#server);
  }

  /**
   * Server metadata from the core (name and version), with the extensions DenoTriton serves.
   *
   * @returns `{name, version, extensions}`.
   */
  serverMetadata(): ServerMetadata {
    if (this.#metadata !== undefined) return this.#metadata;
    const json = queries.serverMetadata(this.#core, this.#server);
    this.#metadata = {
      name: json.name,
      version: json.version,
      extensions: ENGINE_EXTENSIONS.filter((e) => json.extensions.includes(e)),
    };
    return this.#metadata;
  }

  /**
   * Starts the model's instances, warms them up and loads the model into the core with a
   * generated config. With `replace`, the core reloads the model: the loaded one serves until
   * the new one is ready, then the core swaps them and unloads the old one once its in-flight
   * requests are done, and its instances stop.
   *
   * @param model The model.
   * @param options Whether it replaces the loaded model of its name.
   * @throws {InferenceError} ALREADY_EXISTS for a loaded name and version, UNSUPPORTED for a
   *   second version of a loaded model (both without `replace`), UNAVAILABLE when stopping,
   *   INTERNAL when an instance fails to start or a strict model's warm-up fails, or the core's
   *   load error.
   */
  async loadModel(model: ModelDefinition, options: LoadOptions = {}): Promise<void> {
    this.#core; // throws when not started
    if (this.#stopping !== undefined) {
      throw InferenceError.unavailable(`Cannot load model '${model.name}': the server is stopping`);
    }
    const existing = this.#models.get(model.name);
    if (existing !== undefined && options.replace !== true) {
      if (existing.definition.version === model.version) {
        throw new InferenceError(
          `Cannot load model '${model.name}': version ${model.version} is loaded already`,
          { code: "ALREADY_EXISTS" },
        );
      }
      throw InferenceError.unsupported(
        `Cannot load model '${model.name}' version ${model.version}: the Triton engine serves one version per model and version ${existing.definition.version} is loaded (replace the model to serve another version)`,
      );
    }
    if (this.#loading.has(model.name)) {
      throw new InferenceError(`Cannot load model '${model.name}': it is being loaded`, {
        code: "ALREADY_EXISTS",
      });
    }
    this.#loading.add(model.name);
    using watch = this.#coreLog?.watch();
    try {
      // The core's own checks of an ensemble run at its load; this one it does not make.
      refuseDecoupledSteps(model, (name) => this.#models.get(name)?.definition);
      const load = model.ensemble === undefined ? loadModel : loadEnsemble;
      const loaded = await load(this.#context, model).catch((error) => {
        this.#coreLog?.drain();
        throw withCoreReasons(error, model.name, watch?.records ?? []);
      });
      this.#coreLog?.drain();
      // With `replace`, the core serves the new model already and has let the old one go.
      const replaced = this.#models.get(model.name);
      this.#models.set(model.name, loaded);
      this.#loaded.set(loaded.handle, loaded);
      this.#unloaded.delete(model.name);
      this.#options.logger?.info(`Successfully loaded '${model.name}' version ${model.version}`);
      if (replaced !== undefined) {
        // A request holding the old handle looks the new model up again.
        this.#loaded.delete(replaced.handle);
        await retire(this.#context, replaced);
        this.#options.logger?.info(
          `Successfully unloaded '${model.name}' version ${replaced.definition.version}`,
        );
      }
    } finally {
      this.#loading.delete(model.name);
    }
  }

  /**
   * Unloads a model from the core (waiting for its in-flight requests) and stops its instances.
   *
   * @param name Model name.
   * @param version Model version; the loaded one when undefined.
   * @param options Whether the engine forgets the model.
   * @throws {InferenceError} NOT_FOUND for unknown models or versions.
   */
  async unloadModel(name: string, version?: number, options: UnloadOptions = {}): Promise<void> {
    this.#core; // throws when not started
    // Any known version will do: this throws only for an unknown name or version.
    lookupVersion({ name, version }, this.#versionsOf(name), () => true);
    const loaded = this.#models.get(name);
    if (loaded !== undefined) {
      const context = this.#context;
      await unloadFromCore(context, loaded).finally(() => this.#coreLog?.drain());
      this.#models.delete(name);
      this.#loaded.delete(loaded.handle);
      this.#unloaded.set(name, loaded.definition.version);
      await disposeInstances(context, name, loaded);
      this.#options.logger?.info(
        `Successfully unloaded '${name}' version ${loaded.definition.version}`,
      );
    }
    if (options.forget === true) {
      this.#unloaded.delete(name);
      // The core lists every model directory of its repository in its index. (bind() refuses
      // names that are not one plain path segment; this checks again before removing.)
      if (/^[^/\\]+$/.test(name) && name !== "." && name !== "..") {
        await Deno.remove(`${this.#repository}/${name}`, { recursive: true }).catch(() => {});
      }
    }
  }

  /** The versions of a model this engine knows (one), with its loaded model while loaded. */
  #versionsOf(name: string): Map<number, LoadedModel | undefined> | undefined {
    const loaded = this.#models.get(name);
    if (loaded !== undefined) return new Map([[loaded.definition.version, loaded]]);
    const unloaded = this.#unloaded.get(name);
    return unloaded === undefined ? undefined : new Map([[unloaded, undefined]]);
  }

  /**
   * Resolves the model a request targets: the one lookup of a request.
   *
   * @param name Model name.
   * @param version Model version; the loaded one when undefined or -1.
   * @returns Its handle.
   * @throws {InferenceError} NOT_FOUND / UNAVAILABLE with Triton's messages (`../model_lookup.ts`).
   */
  model(name: string, version?: number): ModelHandle {
    const loaded = this.#models.get(name);
    if (
      loaded !== undefined &&
      (version === undefined || version === -1 || version === loaded.definition.version)
    ) {
      return loaded.handle;
    }
    return lookupVersion({ name, version }, this.#versionsOf(name), (model) => model !== undefined)!
      .handle;
  }

  /**
   * Whether a model version is ready in the core.
   *
   * @param name Model name.
   * @param version Model version; chosen by the version policy when undefined.
   * @returns False for unknown models.
   */
  modelReady(name: string, version?: number): boolean {
    if (this.#server === null || this.#stopped) return false;
    const loaded = this.#models.get(name);
    // Not ready while every instance is down (a crashed Worker restarting or given up); an
    // ensemble has none, and is ready when the core says so.
    const alive = loaded?.definition.ensemble !== undefined ||
      (loaded?.instances.some((instance) => instance.alive) ?? false);
    return alive && queries.modelIsReady(this.#core, this.#server, { name, version });
  }

  /**
   * Model metadata from the core.
   *
   * @param name Model name.
   * @param version Model version.
   * @returns `{name, versions, platform, inputs, outputs}`.
   */
  modelMetadata(name: string, version?: number): ModelMetadata {
    this.#core; // throws when not started
    this.model(name, version); // the lookup rule both engines share, before the core's
    return queries.modelMetadata(this.#core, this.#server, { name, version });
  }

  /**
   * The core's normalised model config (without DenoTriton's internal parameter), with the
   * model's warm-up, which DenoTriton runs itself.
   *
   * @param name Model name.
   * @param version Model version.
   * @returns The config JSON.
   */
  modelConfig(name: string, version?: number): TritonModelConfigJson {
    this.#core; // throws when not started
    this.model(name, version); // the lookup rule both engines share, before the core's
    const config = queries.modelConfig(this.#core, this.#server, { name, version });
    const definition = this.#models.get(name)?.definition;
    if (definition !== undefined && definition.config.warmup.length > 0) {
      config["model_warmup"] = toTritonModelConfig(definition)["model_warmup"];
    }
    return config;
  }

  /**
   * Statistics from the core.
   *
   * @param name Model name; all models when undefined.
   * @param version Model version.
   * @returns `{model_stats: [...]}`.
   */
  modelStatistics(name?: string, version?: number): { model_stats: ModelStatistics[] } {
    return queries.modelStatistics(this.#core, this.#server, { name, version });
  }

  /**
   * The core's repository index.
   *
   * @param readyOnly Only ready versions.
   * @returns The entries.
   */
  repositoryIndex(readyOnly: boolean): RepositoryIndexEntry[] {
    return queries.repositoryIndex(this.#core, this.#server, readyOnly);
  }

  /**
   * The model a request runs on: its handle's (looked up when the caller passed none), checked
   * once for a running engine.
   */
  #loadedOf(request: InferenceRequest, handle: ModelHandle | undefined): LoadedModel {
    if (this.#stopping !== undefined || this.#server === null) {
      throw InferenceError.unavailable(
        `Cannot infer with model '${request.modelName}': the server is stopping`,
      );
    }
    handle ??= this.model(request.modelName, request.modelVersion);
    // A handle outlives its model's unload (the front end read a body meanwhile): look again.
    return this.#loaded.get(handle) ??
      this.#loaded.get(this.model(request.modelName, request.modelVersion))!;
  }

  /**
   * The request as the core gets it: a call of another model carries its parent in a parameter
   * (which the backend half reads back), and so does a request of an ensemble, whose steps the
   * core sends on with the ensemble's parameters: they learn the ensemble is their parent. A call
   * every instance of its model waits for is refused here.
   */
  /** The core a request goes to (the engine is started). */
  #handles(): CoreHandles {
    return { libraries: this.#libraries!, queue: this.#queue!, server: this.#server };
  }

  #withParent(request: InferenceRequest, loaded: LoadedModel): InferenceRequest {
    const { name, version, ensemble } = loaded.definition;
    refuseDeadlock(request.parent, { name, version, instances: loaded.instances.length });
    const parent: CallParent | undefined = ensemble === undefined
      ? request.parent
      : ensembleParent(request, name, version);
    if (parent === undefined) return request;
    return {
      ...request,
      parameters: { ...request.parameters, [PARENT_PARAMETER]: encodeParent(parent) },
    };
  }

  /**
   * For a model with sequence batching: checks the request's sequence (the rules the built-in
   * engine applies too, which the core does not all apply itself) and restarts its idle clock,
   * or stops it at the sequence's end. The core schedules the sequence.
   */
  #sequence(loaded: LoadedModel, request: InferenceRequest): void {
    const clock = loaded.sequences;
    if (clock === undefined) return;
    const sequence = checkSequenceRequest(loaded.definition, request);
    if (sequence.end) clock.end(sequence.id);
    else clock.touch(sequence.id);
  }

  /**
   * Runs one request of a coupled model through the core.
   *
   * @param request The request.
   * @param model Its model, as {@linkcode NativeEngine.model} resolved it; looked up when
   *   omitted.
   * @returns Its response.
   * @throws {InferenceError} With the core's code (NOT_FOUND, INVALID_ARG, UNAVAILABLE,
   *   CANCELLED, INTERNAL for callable failures) or UNSUPPORTED for decoupled models.
   */
  infer(request: InferenceRequest, model?: ModelHandle): Promise<InferenceResponse> {
    try {
      const loaded = this.#loadedOf(request, model);
      if (loaded.handle.decoupled) {
        throw InferenceError.unsupported(
          `Cannot infer with model '${request.modelName}': infer doesn't support models with decoupled transaction policy`,
        );
      }
      this.#sequence(loaded, request);
      const sent = this.#withParent(request, loaded);
      const trace = this.#traced(request, loaded);
      if (loaded.definition.ensemble === undefined || request.signal === undefined) {
        return inferCoupled(this.#handles(), sent, { order: loaded.order, traced: trace });
      }
      // The steps' callables learn of the ensemble request's cancellation through this token.
      const token = this.#nextEnsembleSignal++;
      this.#ensembleSignals.set(token, request.signal);
      return inferCoupled(
        this.#handles(),
        { ...sent, parameters: { ...sent.parameters, [ENSEMBLE_SIGNAL_PARAMETER]: token } },
        { order: loaded.order, traced: trace },
      ).finally(() => this.#ensembleSignals.delete(token));
    } catch (error) {
      return Promise.reject(error);
    }
  }

  /**
   * Runs one request of a decoupled model: each response as it arrives (`final: false`), then
   * one `final: true` response without outputs (Triton's flags-only final), like the built-in
   * engine. The responses wait in a bounded queue: while it is full, the backend half does not
   * pull the callable's next step.
   *
   * @param request The request.
   * @param model Its model, as {@linkcode NativeEngine.model} resolved it; looked up when
   *   omitted.
   * @returns The responses.
   */
  async *inferStream(
    request: InferenceRequest,
    model?: ModelHandle,
  ): AsyncGenerator<StreamResponse, void, undefined> {
    const loaded = this.#loadedOf(request, model);
    if (!loaded.handle.decoupled) {
      throw InferenceError.unsupported(
        `Cannot stream with model '${request.modelName}': streaming needs a model with decoupled transaction policy`,
      );
    }
    this.#sequence(loaded, request);
    const libraries = this.#libraries!;
    const controller = new AbortController();
    const signal = request.signal === undefined
      ? controller.signal
      : AbortSignal.any([request.signal, controller.signal]);
    // A consumer that stops reading cancels the queue, which cancels the request in the core.
    const stream = new ResponseStream({ cancel: (reason) => controller.abort(reason) });
    const token = this.#nextStream++;
    this.#streams.set(token, stream);
    try {
      const sent = this.#withParent(request, loaded);
      submitRequest(this.#handles(), {
        ...sent,
        signal,
        parameters: { ...sent.parameters, [STREAM_PARAMETER]: token },
      }, {
        response: (response, final) => {
          if (response !== null) {
            try {
              stream.deliver(readResponse(libraries.bridge, response, { order: loaded.order }));
            } catch (error) {
              stream.fail(error);
              return;
            }
          }
          if (final) stream.end();
        },
        traced: this.#traced(request, loaded),
      });
      // Sent at once (streaming latency), and never merged with the final flag: clients such
      // as PyTriton's DecoupledModelClient drop the outputs of a response marked final.
      for await (const response of stream.readable) yield { ...response, final: false };
    } finally {
      this.#streams.delete(token);
    }
    yield {
      modelName: loaded.definition.name,
      modelVersion: String(loaded.definition.version),
      ...(request.id === undefined || request.id === "" ? {} : { id: request.id }),
      outputs: new Map(),
      final: true,
    };
  }

  /**
   * The core's Prometheus metrics.
   *
   * @returns The text exposition.
   */
  metrics(): string {
    return queries.metricsText(this.#core, this.#server);
  }

  /**
   * Lets another thread submit requests straight into the core (see `Engine.share`): it opens
   * the same libraries and a completion queue of its own, and reports back the results this
   * isolate lent to its responses.
   *
   * @param end How the sharing ends when the engine stops.
   * @returns The share, or `undefined` when the engine is not running.
   */
  share(end: ShareEnd): EngineShare | undefined {
    if (this.#server === null || this.#libraries === undefined || this.#stopping !== undefined) {
      return undefined;
    }
    this.#shares.add(end);
    const install = this.#libraries.install;
    const server = BigInt(Deno.UnsafePointer.value(this.#server));
    return {
      client: () => {
        const signal = openQueueSignal();
        this.#signals.push(signal);
        return { kind: "triton", install, server, signal };
      },
      // The addresses of results this isolate lent that the other thread's responses released.
      settle: (report) => {
        for (const address of report as bigint[]) returnLent(address);
      },
    };
  }

  /**
   * Stops the core (it waits for in-flight requests up to the exit timeout and unloads every
   * model), stops the instances, deletes the server and removes the repository. Threads sharing
   * the core stop submitting first, and their requests are awaited like this isolate's.
   * Idempotent.
   */
  stop(): Promise<void> {
    this.#stopping ??= this.#stop();
    return this.#stopping;
  }

  async #stop(): Promise<void> {
    // Other threads submit nothing more; their requests in flight end like this isolate's, and
    // hold the core's models like them: the server is deleted only once they are released too.
    const shares = [...this.#shares];
    this.#shares.clear();
    await Promise.all(shares.map((share) => share.stop()));
    if (this.#server === null || this.#libraries === undefined) {
      this.#stopped = true;
      return;
    }
    const server = this.#server;
    this.#logSubscription?.[Symbol.dispose]();
    this.#logSubscription = undefined;
    const clean = await releaseServer(this.#context, [...this.#models.values()], {
      abandon: this.#abandon,
      pending: () =>
        Promise.all([
          this.#queue?.idle(),
          ...shares.map((share) => share.released()),
        ]).then(() => {}),
    });
    this.#server = null;
    this.#stopped = true;
    this.#models.clear();
    for (const signal of this.#signals.splice(0)) closeQueueSignal(signal);
    // Every model is unloaded: no callable changes a metric any more.
    this.#customMetrics?.close();
    this.#customMetrics = undefined;
    this.#unloaded.clear();
    if (!clean) {
      this.#closeCoreLog();
      return;
    }
    await deleteServer(this.#libraries, server, this.#options.logger);
    this.#closeCoreLog();
    await this.#queue?.idle();
    this.#queue?.[Symbol.dispose]();
    this.#queue = undefined;
    if (this.#repository !== undefined) {
      await Deno.remove(this.#repository, { recursive: true }).catch(() => {});
      this.#repository = undefined;
    }
  }

  #closeCoreLog(): void {
    this.#coreLog?.[Symbol.dispose]();
    this.#coreLog = undefined;
    this.#ownLogger?.close();
    this.#ownLogger = undefined;
  }

  /**
   * Starts a request's trace when the tracer samples it: the core then traces it (its
   * activities come from the core's trace callbacks, through the bridge's event queue), and
   * the trace is written once the core releases it.
   */
  #traced(request: InferenceRequest, loaded: LoadedModel): NativeTraceHooks | undefined {
    const tracer = this.#options.tracer;
    if (tracer === undefined) return undefined;
    const trace = tracer.start({
      model: loaded.definition.name,
      version: loaded.definition.version,
      id: request.id,
      traceContext: request.traceContext,
    });
    if (trace === undefined) return undefined;
    const bridge = this.#libraries!.bridge;
    return {
      trace,
      started: (started) => this.#traces.set(started.id, started),
      ended: (ended) => {
        this.#traces.delete(ended.id);
        // The core's timestamps are CLOCK_MONOTONIC; spans need the time since the epoch.
        ended.end(monotonicNs() - BigInt(bridge.dt_now_ns()));
      },
    };
  }

  /** Stops the engine. */
  [Symbol.asyncDispose](): Promise<void> {
    return this.stop();
  }
}
