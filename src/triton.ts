/**
 * The facade: `Triton` owns the configuration, the engine, the bound models and the front ends.
 * What `bind()` accepts, and how it becomes a model, is in `bind.ts`.
 *
 * Over 500 lines for a reason: this is the public API, and a third of the file is the
 * documentation of its methods, each with an example that runs.
 *
 * @module
 */

import { type BindOptions, modelDefinitionOf } from "./bind.ts";
import {
  type ResolvedSecurityConfig,
  resolveSecurityConfig,
  type SecurityConfig,
} from "./config/security_config.ts";
import type { TensorSpec } from "./config/tensor_spec.ts";
import { resolveTritonConfig } from "./config/triton_config.ts";
import type { ResolvedTritonConfig, TritonConfig } from "./config/triton_config_fields.ts";
import type { Engine, EngineKind, LoadOptions, ModelDefinition } from "./engine/engine.ts";
import { createEngine, type EngineChoice } from "./engine/select.ts";
import type { GpuInventory } from "./gpu/devices.ts";
import {
  InferenceError,
  messageOf,
  TritonInvalidOperationError,
  type TritonUnrecoverableError,
  TritonValidationError,
} from "./errors.ts";
import type { GrpcFrontend } from "./frontend/grpc/server.ts";
import { HttpFrontend } from "./frontend/http/server.ts";
import { Tracer } from "./telemetry/tracer.ts";
import { SharedMemoryRegistry } from "./shm/registry.ts";
import { MetricsFrontend } from "./frontend/metrics/server.ts";
import { inJupyterKernel } from "./jupyter.ts";
import { Logger, type LogSink } from "./log.ts";
import { BoundModelRepository } from "./model_repository.ts";
import type { DeniedPermission } from "./permissions.ts";
import { explainPermission, type PermissionUse, permissionUse } from "./server_permissions.ts";
import { defaultTritonHome } from "./setup/install.ts";
import {
  engineOptionsOf,
  facadeOptionsOf,
  grpcOptionsOf,
  httpOptionsOf,
  loggerOptionsOf,
  metricsOptionsOf,
  readGrpcTls,
} from "./wiring.ts";

export type { BindCallable, BindOptions } from "./bind.ts";

const SIGNAL_NUMBERS: Partial<Record<Deno.Signal, number>> = { SIGINT: 2, SIGTERM: 15 };

/** Options of the {@linkcode Triton} constructor. */
export interface TritonOptions {
  /**
   * Server configuration; overrides environment variables and the config file field by field.
   *
   * @default {{}}
   */
  config?: TritonConfig;
  /**
   * A YAML file with `TritonConfig` fields (else `DENOTRITON_CONFIG_FILE`).
   *
   * @default {undefined}
   */
  configFile?: string;
  /**
   * Which engine runs the models: the Triton core when installed (`"auto"`), the core only
   * (`"triton"`), or the TypeScript engine (`"builtin"`). `DENOTRITON_ENGINE` sets the same.
   *
   * @default {"auto"}
   */
  engine?: EngineChoice;
  /**
   * The GPUs that instances pinned to `cuda:N` run on. By default the engine asks the CUDA driver
   * (`discoverGpus()`; none without `--allow-ffi` or without the driver, and then those instances
   * run on the CPU). `{ devices: [] }` keeps every instance on the CPU. The Triton engine's core
   * looks for the GPUs itself too: a GPU it does not find fails the load of a model pinned to it.
   *
   * @default {discoverGpus()}
   */
  gpus?: GpuInventory;
  /**
   * Token-based access restriction of endpoint groups (like PyTriton's `TritonSecurityConfig`):
   * by default shared-memory, model-repository, statistics, trace and logging need the token
   * (generated when not given; read it with {@linkcode Triton.getAccessToken}); an empty
   * `restrictedEndpoints` list restricts nothing.
   *
   * @default {{}}
   */
  securityConfig?: SecurityConfig;
  /**
   * A logger of your own for the server's lines (its own, the Triton core's and the HTTP
   * threads'), instead of stderr: `console`, or any object with `error`, `warn`, `info` and
   * `debug` methods taking a message (see {@linkcode LogSink}). `logVerbose` and `/v2/logging`
   * still choose which lines it gets. Not with `logFile`.
   *
   * @default {undefined}
   */
  logger?: LogSink;
}

/** Options of {@linkcode Triton.start}: the server's, and the models to serve from the start. */
export interface TritonStartOptions extends TritonOptions {
  /**
   * Models bound before the server starts, so it listens only once they are ready. Each is what
   * {@linkcode Triton.bind} takes; to type a callable by its specs, declare the model with
   * `satisfies BindOptions<typeof inputs, typeof outputs>` (or bind it after the start).
   *
   * @default {[]}
   */
  models?: readonly BindOptions[];
}

/** Where the running server listens; a protocol that is off has no URL. */
export interface TritonUrls {
  /** HTTP/REST base URL, e.g. `http://127.0.0.1:8000`. */
  readonly http?: string;
  /** gRPC URL, e.g. `grpc://127.0.0.1:8001`. */
  readonly grpc?: string;
  /** Metrics base URL (scrape `${metrics}/metrics`). */
  readonly metrics?: string;
}

/** The servers of this process that are starting or running. */
const ACTIVE = new Set<Triton>();

/** The fixed (non-ephemeral) ports a config listens on, with the front end's name. */
function fixedPortsOf(config: ResolvedTritonConfig): [number, string][] {
  const ports: [number, string][] = [];
  if (config.allowHttp && config.httpPort !== 0) ports.push([config.httpPort, "HTTP"]);
  if (config.allowGrpc && config.grpcPort !== 0) ports.push([config.grpcPort, "gRPC"]);
  if (config.allowMetrics && config.metricsPort !== 0) ports.push([config.metricsPort, "metrics"]);
  return ports;
}

function tritonHomeOrUndefined(): string | undefined {
  try {
    return defaultTritonHome();
  } catch {
    return undefined;
  }
}

/**
 * Serves inference callables over KServe v2 (HTTP/REST and gRPC) with metrics.
 *
 * @example Serve AddSub and call it
 * ```ts
 * import { batch, Triton, zip } from "../mod.ts";
 * import assert from "node:assert/strict";
 *
 * await using triton = new Triton({
 *   engine: "builtin",
 *   config: { httpPort: 0, allowGrpc: false, allowMetrics: false },
 * });
 * triton.bind({
 *   modelName: "AddSub",
 *   inferFunc: batch(({ a, b }) => ({
 *     add: zip(a, b, (x, y) => x + y),
 *     sub: zip(a, b, (x, y) => x - y),
 *   })),
 *   inputs: [{ name: "a", dtype: "float32", shape: [-1] }, { name: "b", dtype: "float32", shape: [-1] }],
 *   outputs: [{ name: "add", dtype: "float32", shape: [-1] }, { name: "sub", dtype: "float32", shape: [-1] }],
 * });
 * await triton.run();
 * const response = await fetch(`${triton.urls.http}/v2/models/AddSub/infer`, {
 *   method: "POST",
 *   body: JSON.stringify({ inputs: [
 *     { name: "a", datatype: "FP32", shape: [1, 2], data: [3, 4] },
 *     { name: "b", datatype: "FP32", shape: [1, 2], data: [1, 1] },
 *   ] }),
 * });
 * const body = await response.json();
 * assert.deepEqual(body.outputs[0].data, [4, 5]);
 * ```
 */
export class Triton implements AsyncDisposable {
  #options: TritonOptions;
  #models = new Map<string, ModelDefinition>();
  /** The repository extension's view of the bound models: load, unload, index. */
  #repository = new BoundModelRepository({
    models: this.#models,
    engine: () => this.#state === "running" ? this.#engine : undefined,
    load: (model, options) => this.#load(model, options),
  });
  /** The load each bound model got from the start that loaded it (a bind waits for that one). */
  #startLoads = new WeakMap<ModelDefinition, Promise<void>>();
  #config: ResolvedTritonConfig | undefined;
  #security: ResolvedSecurityConfig;
  #logger: Logger | undefined;
  #engine: Engine | undefined;
  #http: HttpFrontend | undefined;
  #grpc: GrpcFrontend | undefined;
  // One set of system shared-memory regions for both front ends (and so both engines).
  #sharedMemory: SharedMemoryRegistry | undefined;
  #metrics: MetricsFrontend | undefined;
  #tracer: Tracer | undefined;
  #state: "idle" | "starting" | "running" | "stopping" = "idle";
  #starting: Promise<void> | undefined;
  #stopping: Promise<boolean> | undefined;
  #stopped = Promise.withResolvers<void>();
  #fatal: TritonUnrecoverableError | undefined;
  /** Configuration warnings, logged once the logger exists (the first start). */
  #warnings: string[] = [];

  /**
   * Creates a server; nothing starts until {@linkcode Triton.run} or {@linkcode Triton.serve}.
   * The configuration is resolved (and validated) here.
   *
   * @param options Configuration, config file and engine choice.
   * @throws {TritonValidationError} For an invalid configuration from any source.
   */
  constructor(options: TritonOptions = {}) {
    this.#options = options;
    const resolveOptions: Parameters<typeof resolveTritonConfig>[0] = {
      onWarning: (message) => this.#warnings.push(message),
    };
    if (options.config !== undefined) resolveOptions.config = options.config;
    if (options.configFile !== undefined) resolveOptions.configFile = options.configFile;
    this.#config = resolveTritonConfig(resolveOptions);
    if (options.logger !== undefined && this.#config.logFile !== undefined) {
      throw new TritonValidationError(
        `Invalid options: logFile (${this.#config.logFile}) and logger both say where the log goes; give one`,
      );
    }
    this.#security = resolveSecurityConfig(options.securityConfig);
    // A traceConfig entry that does not parse fails here, naming it, not at the start.
    facadeOptionsOf(this.#config);
  }

  /**
   * Creates a server, binds `models` and starts it: what PyTriton's `with Triton() as triton:`
   * does on entering the block, for `await using`. The server listens once the models are
   * ready; a model bound later loads at once, as inside PyTriton's block, and the end of the
   * scope stops the server (draining in-flight requests).
   *
   * @param options The server's options, and the models to serve from the start.
   * @returns The running server.
   * @throws {TritonValidationError} For an invalid configuration or model.
   * @throws {TritonError} When the engine, a model or a port fails to start (nothing is left
   *   running), as {@linkcode Triton.run}.
   *
   * @example Start, bind, call, stop at the end of the scope
   * ```ts
   * import { type BindOptions, ndarray, Triton } from "../mod.ts";
   * import assert from "node:assert/strict";
   *
   * const inputs = [{ name: "x", dtype: "float32", shape: [-1] }] as const;
   * const outputs = [{ name: "y", dtype: "float32", shape: [-1] }] as const;
   * const double = {
   *   modelName: "Double",
   *   inferFunc: (requests) =>
   *     requests.map(({ data: { x } }) => ({ y: ndarray(x.data.map((v) => v * 2), x.shape) })),
   *   inputs,
   *   outputs,
   * } satisfies BindOptions<typeof inputs, typeof outputs>;
   * let url: string;
   * {
   *   await using triton = await Triton.start({
   *     engine: "builtin",
   *     config: { httpPort: 0, allowGrpc: false, allowMetrics: false },
   *     models: [double],
   *   });
   *   assert.ok(triton.isAlive());
   *   url = `${triton.urls.http}/v2/models/Double/infer`;
   *   const response = await fetch(url, {
   *     method: "POST",
   *     body: JSON.stringify({ inputs: [{ name: "x", datatype: "FP32", shape: [1, 2], data: [1, 2] }] }),
   *   });
   *   assert.deepEqual((await response.json()).outputs[0].data, [2, 4]);
   * }
   * await assert.rejects(fetch(url)); // stopped at the end of the block
   * ```
   */
  static async start(options: TritonStartOptions = {}): Promise<Triton> {
    const { models = [], ...serverOptions } = options;
    const triton = new Triton(serverOptions);
    for (const model of models) await triton.bind(model);
    await triton.run();
    return triton;
  }

  /**
   * The access token clients send to reach restricted endpoints (the `triton-access-token` HTTP
   * header, the `triton-grpc-protocol-triton-access-token` gRPC metadata key).
   *
   * @returns The given or generated token; `undefined` when nothing is restricted and no token
   *   was given.
   */
  getAccessToken(): string | undefined {
    return this.#security.accessToken;
  }

  /** The resolved server configuration. */
  get config(): ResolvedTritonConfig {
    return this.#config!;
  }

  /** Which engine runs the models, once running. */
  get engineKind(): EngineKind | undefined {
    return this.#engine?.kind;
  }

  /** URLs of the running front ends (ephemeral ports resolved). */
  get urls(): TritonUrls {
    const urls: { http?: string; grpc?: string; metrics?: string } = {};
    if (this.#http) urls.http = this.#http.url;
    if (this.#grpc) urls.grpc = this.#grpc.url;
    if (this.#metrics) urls.metrics = this.#metrics.url;
    return urls;
  }

  /**
   * Binds an inference callable as a model. Before {@linkcode Triton.run} the model is loaded
   * at start; while running it is loaded at once, and the returned promise settles when it is
   * ready; while starting, once the start loaded it (once). To serve a new model in the place of
   * a bound one, use {@linkcode Triton.replace}.
   *
   * @param options The model: name, version, callable(s), tensors, config, strictness.
   * @returns A promise that settles when the model is loaded (at once when not running).
   * @throws {TritonValidationError} For an invalid name, tensor spec or callable.
   * @throws {TritonInvalidOperationError} When the name and version are bound already.
   * @throws {TritonBadParameterError} For an invalid model config, or `responseCache` on a
   *   server without a response cache (`responseCacheByteSize` or `cacheConfig`).
   */
  bind<const I extends readonly TensorSpec[], const O extends readonly TensorSpec[]>(
    options: BindOptions<I, O>,
  ): Promise<void> {
    const model = modelDefinitionOf(options as BindOptions, facadeOptionsOf(this.#config!));
    const { name, version } = model;
    const key = `${name.toLowerCase()}/${version}`;
    if (this.#models.has(key)) {
      throw new TritonInvalidOperationError(
        `Cannot bind model '${name}': version ${version} is bound already (replace() serves a new model in its place)`,
      );
    }
    if (this.#state === "stopping") {
      throw new TritonInvalidOperationError(`Cannot bind model '${name}': the server is stopping`);
    }
    this.#models.set(key, model);
    if (this.#state === "running" || this.#state === "starting") {
      return this.#loadBound(model).then(
        () => this.#logger?.flush(),
        (error) => {
          if (this.#models.get(key) === model) this.#models.delete(key);
          throw error;
        },
      );
    }
    return Promise.resolve();
  }

  /**
   * Loads a model bound while the server starts or runs. The start loads every model bound
   * before its loop ends, this one too when it was bound in time: then that load is the one, and
   * it is not loaded again.
   */
  async #loadBound(model: ModelDefinition): Promise<void> {
    await this.#starting;
    const started = this.#startLoads.get(model);
    if (started !== undefined) return await started;
    await this.#repository.exclusive(model.name, () => this.#repository.loadVersion(model));
  }

  /**
   * Binds an inference callable in the place of the model bound under its name (every bound
   * version), or binds it when none is. While the server runs, the bound model goes on serving
   * while the new one loads and warms up, as Triton serves a model it reloads; once the new one
   * is ready, requests go to it in one step (none finds no model), and the old one is unloaded
   * after its in-flight requests finish (up to `exitTimeoutSecs`). When the new one fails to
   * load, the old one goes on serving and the promise rejects with the load's error. The new
   * model may have another version, config or signature; requests naming a replaced version
   * then get 404/NOT_FOUND. Before {@linkcode Triton.run} it swaps the definitions.
   *
   * @param options The new model: name, version, callable(s), tensors, config, strictness.
   * @returns A promise that settles once the new model serves and the old one has stopped (at
   *   once when not running).
   * @throws {TritonValidationError} For an invalid name, tensor spec or callable.
   * @throws {TritonInvalidOperationError} When the server is stopping, or the name is bound with
   *   other letter cases.
   * @throws {TritonBadParameterError} As {@linkcode Triton.bind}.
   *
   * @example Serve a new version while the model serves
   * ```ts
   * import { type BindOptions, ndarray, Triton } from "../mod.ts";
   * import assert from "node:assert/strict";
   *
   * await using triton = new Triton({
   *   engine: "builtin",
   *   config: { httpPort: 0, allowGrpc: false, allowMetrics: false },
   * });
   * const model = (factor: number, version: number): BindOptions => ({
   *   modelName: "Scale",
   *   modelVersion: version,
   *   inferFunc: (requests) =>
   *     requests.map(({ data: { x } }) => ({
   *       y: ndarray((x!.data as Float32Array).map((v) => v * factor), x!.shape),
   *     })),
   *   inputs: [{ name: "x", dtype: "float32", shape: [-1] }],
   *   outputs: [{ name: "y", dtype: "float32", shape: [-1] }],
   * });
   * await triton.bind(model(2, 1));
   * await triton.run();
   * await triton.replace(model(10, 2)); // version 1 serves until version 2 is ready
   * const response = await fetch(`${triton.urls.http}/v2/models/Scale/infer`, {
   *   method: "POST",
   *   body: JSON.stringify({ inputs: [{ name: "x", datatype: "FP32", shape: [1, 1], data: [3] }] }),
   * });
   * const body = await response.json();
   * assert.equal(body.model_version, "2");
   * assert.deepEqual(body.outputs[0].data, [30]);
   * ```
   */
  replace<const I extends readonly TensorSpec[], const O extends readonly TensorSpec[]>(
    options: BindOptions<I, O>,
  ): Promise<void> {
    const model = modelDefinitionOf(options as BindOptions, facadeOptionsOf(this.#config!));
    const { name } = model;
    if (this.#state === "stopping") {
      throw new TritonInvalidOperationError(
        `Cannot replace model '${name}': the server is stopping`,
      );
    }
    const other = [...this.#models.values()].find((bound) =>
      bound.name !== name && bound.name.toLowerCase() === name.toLowerCase()
    );
    if (other !== undefined) {
      throw new TritonInvalidOperationError(
        `Cannot replace model '${name}': it is bound as '${other.name}' (replace it under that name)`,
      );
    }
    if (this.#state === "idle") {
      this.#swapBound(model);
      return Promise.resolve();
    }
    return (this.#starting ?? Promise.resolve()).then(() =>
      this.#repository.exclusive(name, async () => {
        // The state may have changed while earlier actions on the model ran.
        if (this.#state === "idle") return this.#swapBound(model);
        if (this.#state !== "running") {
          throw new TritonInvalidOperationError(
            `Cannot replace model '${name}': the server is stopping`,
          );
        }
        await this.#repository.loadVersion(model, { replace: true });
        this.#swapBound(model);
      })
    ).then(() => this.#logger?.flush());
  }

  /** Binds `model` in the place of the versions bound under its name. */
  #swapBound(model: ModelDefinition): void {
    for (const [key] of this.#bound(model.name)) this.#models.delete(key);
    this.#models.set(`${model.name.toLowerCase()}/${model.version}`, model);
  }

  /** The bound versions of a model (names match case-insensitively), with their keys. */
  #bound(name: string, version?: number): [string, ModelDefinition][] {
    const wanted = name.toLowerCase();
    return [...this.#models].filter(([, model]) =>
      model.name.toLowerCase() === wanted && (version === undefined || model.version === version)
    );
  }

  /**
   * Unbinds a model so its name can be bound again: every version, or only `version`. While the
   * server runs, the model is unloaded first (its in-flight requests finish, up to
   * `exitTimeoutSecs`) and its instances stop; requests for it then get 404/NOT_FOUND.
   *
   * @param name The bound model's name.
   * @param version The version to unbind; every bound version when undefined.
   * @returns A promise that settles once the model is unloaded (at once when not running).
   * @throws {TritonInvalidOperationError} When the model (version) is not bound, or the server
   *   is stopping.
   *
   * @example Replace a model under the same name
   * ```ts
   * import { type BindOptions, ndarray, Triton } from "../mod.ts";
   * import assert from "node:assert/strict";
   *
   * await using triton = new Triton({
   *   engine: "builtin",
   *   config: { httpPort: 0, allowGrpc: false, allowMetrics: false },
   * });
   * const model = (factor: number): BindOptions => ({
   *   modelName: "Scale",
   *   inferFunc: (requests) =>
   *     requests.map(({ data: { x } }) => ({
   *       y: ndarray((x!.data as Float32Array).map((v) => v * factor), x!.shape),
   *     })),
   *   inputs: [{ name: "x", dtype: "float32", shape: [-1] }],
   *   outputs: [{ name: "y", dtype: "float32", shape: [-1] }],
   * });
   * await triton.bind(model(2));
   * await triton.run();
   * await triton.unbind("Scale");
   * await triton.bind(model(10));
   * const response = await fetch(`${triton.urls.http}/v2/models/Scale/infer`, {
   *   method: "POST",
   *   body: JSON.stringify({ inputs: [{ name: "x", datatype: "FP32", shape: [1, 1], data: [3] }] }),
   * });
   * assert.deepEqual((await response.json()).outputs[0].data, [30]);
   * ```
   */
  async unbind(name: string, version?: number): Promise<void> {
    if (this.#bound(name, version).length === 0) {
      throw new TritonInvalidOperationError(
        `Cannot unbind model '${name}': ${
          version === undefined ? "it is not bound" : `version ${version} is not bound`
        }`,
      );
    }
    if (this.#state === "stopping") {
      throw new TritonInvalidOperationError(
        `Cannot unbind model '${name}': the server is stopping`,
      );
    }
    await this.#starting?.catch(() => {});
    await this.#repository.exclusive(name, async () => {
      // What is bound by now: a replace() that ran before this turn may have bound a new model.
      for (const [key, model] of this.#bound(name, version)) {
        if (this.#state === "running") await this.#forget(model);
        this.#models.delete(key);
      }
    });
    await this.#logger?.flush();
  }

  /** Unloads a model from the running engine, which forgets its name. */
  async #forget(model: ModelDefinition): Promise<void> {
    try {
      await this.#engine!.unloadModel(model.name, model.version, { forget: true });
    } catch (error) {
      // Never loaded, or its last load failed: the engine does not know it.
      if (!(error instanceof InferenceError && error.code === "NOT_FOUND")) throw error;
    }
  }

  async #load(model: ModelDefinition, options?: LoadOptions): Promise<void> {
    await this.#engine!.loadModel(model, options);
    this.#logger?.info(
      `Model '${model.name}' version ${model.version} is ready` +
        (this.#http ? ` at ${this.#http.url}/v2/models/${model.name}` : ""),
    );
  }

  /**
   * Starts the engine, loads the bound models and opens the front ends; returns when serving.
   * Calling it again while running does nothing; after {@linkcode Triton.stop} it starts afresh
   * with the models bound so far.
   *
   * @returns A promise that resolves once every model is ready and every port listens.
   * @throws {TritonError} When the engine, a model or a port fails to start (everything started
   *   is stopped again).
   * @throws {TritonPermissionError} When Deno refuses a permission a part needs: one line naming
   *   the flag to add.
   * @throws {TritonInvalidOperationError} When another server of this process holds one of its
   *   fixed ports (in a Jupyter kernel that server is stopped instead).
   */
  run(): Promise<void> {
    if (this.#state === "running") return Promise.resolve();
    if (this.#state === "starting") return this.#starting!;
    if (this.#state === "stopping") {
      return Promise.reject(
        new TritonInvalidOperationError("Cannot run the server: it is stopping"),
      );
    }
    this.#state = "starting";
    this.#stopping = undefined;
    this.#fatal = undefined;
    this.#stopped = Promise.withResolvers<void>();
    this.#starting = this.#start().then(
      () => {
        this.#state = "running";
        return this.#logger?.flush();
      },
      async (error) => {
        await this.#shutdown();
        this.#state = "idle";
        this.#starting = undefined;
        this.#stopped.resolve();
        await this.#logger?.flush();
        throw error;
      },
    );
    return this.#starting;
  }

  async #start(): Promise<void> {
    const config = this.#config!;
    const plan = facadeOptionsOf(config);
    const sink = this.#options.logger;
    const logger = this.#logger = await explainPermission(
      () => new Logger({ ...loggerOptionsOf(config), ...(sink === undefined ? {} : { sink }) }),
      (denied) => ({ grant: denied.flag, why: "the log file (logFile)" }),
    );
    for (const warning of this.#warnings.splice(0)) logger.warn(warning);
    if (Deno.permissions.querySync({ name: "env" }).state !== "granted") {
      // resolveTritonConfig skipped the variables it may not read, without prompting.
      logger.info(
        "Configuration: environment variables are read only where --allow-env grants them (DENOTRITON_*, PYTRITON_*)",
      );
    }
    await this.#takePorts(logger);
    ACTIVE.add(this);
    void this.#stopped.promise.then(() => ACTIVE.delete(this));
    if (config.logVerbose > 0) {
      logger.warn(
        `Verbose logging is on (logVerbose=${config.logVerbose}): it costs inference throughput`,
      );
    }
    // One tracer for the engine (which samples by its settings) and both front ends (which
    // read and change them).
    const tracer = this.#tracer = new Tracer(plan.trace);
    tracer.open();
    let engineKind: "builtin" | "triton" = "triton";
    const engineNeeds = (denied: DeniedPermission): PermissionUse =>
      permissionUse(engineKind, denied, tritonHomeOrUndefined());
    this.#engine = await explainPermission(() =>
      createEngine(this.#options.engine ?? "auto", {
        ...engineOptionsOf(config),
        ...(this.#options.gpus === undefined ? {} : { gpus: this.#options.gpus }),
        logger,
        tracer,
        onUnrecoverable: (error) => this.#onUnrecoverable(error),
      }), engineNeeds);
    engineKind = this.#engine.kind;
    await explainPermission(() => this.#engine!.start(), engineNeeds);
    // A model bound while this loop runs is loaded by it too (a Map's iteration reaches entries
    // added meanwhile); its bind() waits for this load instead of loading it again. Ensembles
    // load after the other models, which their steps run.
    for (const [key, model] of this.#startOrder()) {
      const load = explainPermission(
        () => this.#repository.loadVersion(model),
        (denied) => ({ grant: denied.flag, why: `model '${model.name}'` }),
      );
      this.#startLoads.set(model, load);
      try {
        await load;
      } catch (error) {
        if (plan.exitOnError) throw error;
        this.#models.delete(key);
        logger.error(
          `Model '${model.name}' version ${model.version} failed to load; serving the other models (exitOnError is false): ${
            messageOf(error)
          }`,
        );
      }
    }
    // CUDA regions are opened through the driver the GPUs are found through (the stand-in one
    // in tests); the engine's default inventory names libcuda.so.1, the registry's default.
    const cudaDriverLibrary = this.#options.gpus?.driverLibrary;
    const sharedMemory = this.#sharedMemory = new SharedMemoryRegistry(
      cudaDriverLibrary === undefined ? {} : { cudaDriverLibrary },
    );
    if (plan.http) {
      const engine = this.#engine;
      this.#http = await explainPermission(
        () =>
          HttpFrontend.start(engine, {
            ...httpOptionsOf(config),
            logger,
            repository: this.#repository,
            security: this.#security,
            sharedMemory,
            tracer,
          }),
        (denied) => permissionUse("http", denied),
      );
      logger.info(`HTTP/REST (KServe v2) listening at ${this.#http.url}`);
    }
    if (plan.grpc) {
      const { tlsFiles, ...grpcOptions } = grpcOptionsOf(config);
      const engine = this.#engine;
      this.#grpc = await explainPermission(async () => {
        // Loaded only when gRPC is on: a server without it loads none of its code.
        const { GrpcFrontend } = await import("./frontend/grpc/server.ts");
        return await GrpcFrontend.start(engine, {
          ...grpcOptions,
          logger,
          repository: this.#repository,
          security: this.#security,
          sharedMemory,
          tracer,
          ...(tlsFiles === undefined ? {} : { tls: await readGrpcTls(tlsFiles) }),
        });
      }, (denied) => permissionUse("grpc", denied));
      logger.info(
        `gRPC (KServe v2) listening at ${this.#grpc.url}${
          tlsFiles === undefined ? "" : tlsFiles.checkClientCertificate ? " (mutual TLS)" : " (TLS)"
        }`,
      );
    }
    if (plan.metrics) {
      const engine = this.#engine;
      this.#metrics = await explainPermission(
        () => MetricsFrontend.start(engine, { ...metricsOptionsOf(config), logger }),
        (denied) => permissionUse("metrics", denied),
      );
      logger.info(`Metrics at ${this.#metrics.url}/metrics`);
    }
  }

  /** The bound models for the start: every other model first, then the ensembles. */
  *#startOrder(): Generator<[string, ModelDefinition]> {
    for (const ensembles of [false, true]) {
      for (const entry of this.#models) {
        if ((entry[1].ensemble !== undefined) === ensembles) yield entry;
      }
    }
  }

  /**
   * Frees the fixed ports this server needs from another server of this process. A notebook cell
   * that creates a server, run again, leaves the old one running and out of reach: in a Jupyter
   * kernel it is stopped; elsewhere the error says which one to stop.
   */
  async #takePorts(logger: Logger): Promise<void> {
    const mine = fixedPortsOf(this.#config!);
    for (const other of ACTIVE) {
      const shared = fixedPortsOf(other.#config!).filter(([port]) =>
        mine.some(([taken]) => taken === port)
      );
      if (shared.length === 0) continue;
      const ports = shared.map(([port, use]) => `${port} (${use})`).join(", ");
      if (!inJupyterKernel()) {
        throw new TritonInvalidOperationError(
          `Cannot run the server: another Triton of this process uses port ${ports}; stop it first (await triton.stop())`,
        );
      }
      logger.warn(
        `Stopping the server this kernel started earlier on port ${ports}: a new one takes its place`,
      );
      await other.stop();
    }
  }

  #onUnrecoverable(error: TritonUnrecoverableError): void {
    if (this.#fatal) return;
    this.#fatal = error;
    this.#logger?.error(`Unrecoverable error in a model, stopping the server: ${error.message}`);
    // Let the failing batch's responses go out before the front ends close.
    setTimeout(() => void this.stop(), 0);
  }

  /**
   * Runs the server and blocks until SIGINT/SIGTERM, an unrecoverable model error or
   * {@linkcode Triton.stop}; in-flight requests drain (up to `exitTimeoutSecs`, then those left
   * fail with UNAVAILABLE) before it returns. A second signal while stopping exits the process
   * at once (exit code 128 + the signal number). From a script, `await triton.serve()` thus exits
   * 0 after a signal or `stop()`, and non-zero (the rejection) after a fatal error or a refused
   * permission.
   *
   * @returns A promise that resolves once the server has stopped cleanly.
   * @throws {TritonUnrecoverableError} The error a callable threw to stop the server, once the
   *   server has stopped (the clients of the failing batch received its message first).
   * @throws {TritonError} When the server cannot start, as {@linkcode Triton.run}.
   */
  async serve(): Promise<void> {
    await this.run();
    const signals: Deno.Signal[] = Deno.build.os === "windows" ? ["SIGINT"] : ["SIGINT", "SIGTERM"];
    const listeners = signals.map((signal) => {
      const listener = (): void => {
        if (this.#state === "stopping") {
          // Like most servers: the first signal drains, a second one exits at once.
          this.#logger?.error(`${signal} received again while stopping: exiting now`);
          Deno.exit(128 + SIGNAL_NUMBERS[signal]!);
        }
        this.#logger?.info("Signal received: draining in-flight requests and stopping");
        void this.stop();
      };
      Deno.addSignalListener(signal, listener);
      return [signal, listener] as const;
    });
    try {
      await this.#stopped.promise;
    } finally {
      for (const [signal, listener] of listeners) Deno.removeSignalListener(signal, listener);
    }
    // A supervisor tells a crash from a clean stop by the exit code: the script's await rejects.
    if (this.#fatal !== undefined) throw this.#fatal;
  }

  /**
   * Whether the server is running and its engine is live.
   *
   * @returns `false` before {@linkcode Triton.run} and after {@linkcode Triton.stop}.
   */
  isAlive(): boolean {
    return this.#state === "running" && (this.#engine?.isLive() ?? false);
  }

  /**
   * Stops the front ends and the engine (draining in-flight requests up to `exitTimeoutSecs`).
   * Idempotent.
   *
   * @returns `true` if this call stopped the server, `false` if it was stopped already.
   */
  stop(): Promise<boolean> {
    if (this.#stopping) return this.#stopping.then(() => false);
    if (this.#state === "idle") return Promise.resolve(false);
    this.#stopping = (async () => {
      await this.#starting?.catch(() => {});
      if (this.#state !== "running") return false;
      this.#state = "stopping";
      await this.#shutdown();
      this.#state = "idle";
      this.#starting = undefined;
      this.#stopped.resolve();
      // In a notebook the cell that stops the server shows its last lines.
      await this.#logger?.flush();
      return true;
    })();
    return this.#stopping;
  }

  async #shutdown(): Promise<void> {
    const errors: unknown[] = [];
    const attempt = async (step: () => Promise<unknown> | undefined): Promise<void> => {
      try {
        await step();
      } catch (error) {
        errors.push(error);
      }
    };
    // Engine first: it drains in-flight requests while the front ends can still answer them.
    await attempt(() => this.#engine?.stop());
    await attempt(() => this.#http?.shutdown());
    await attempt(() => this.#grpc?.shutdown());
    await attempt(() => this.#metrics?.shutdown());
    // Last: the trace file gets every request's records, the collector every span.
    await attempt(() => this.#tracer?.close());
    this.#tracer = undefined;
    // In-flight requests are answered by now; a request still holding a region unmaps it last.
    this.#sharedMemory?.close();
    this.#sharedMemory = undefined;
    this.#engine =
      this.#http =
      this.#grpc =
      this.#metrics =
        undefined;
    for (const error of errors) this.#logger?.error(`Error while stopping: ${error}`);
    // A start that failed reports its error instead: "Server stopped" would mislead.
    if (this.#state !== "starting") this.#logger?.info("Server stopped");
    this.#logger?.close();
  }

  /** Same as {@linkcode Triton.stop}. */
  async [Symbol.asyncDispose](): Promise<void> {
    await this.stop();
  }
}
