/**
 * The engine contract. An engine owns loaded models, schedules requests into batches, runs them
 * on model instances and keeps statistics. The front ends (HTTP, gRPC, metrics) speak only to
 * this interface, so the built-in TypeScript engine and the Triton-core engine are
 * interchangeable. Failures are {@linkcode InferenceError}s whose `code` the front ends map.
 *
 * @module
 */

import type { CallParent, ParameterValue, SequenceRequest } from "../callable/types.ts";
import type { TritonUnrecoverableError } from "../errors.ts";
import type { Logger } from "../log.ts";
import type { ResolvedTensorSpec } from "../config/tensor_spec.ts";
import type { InstanceProvider } from "../instances/instance.ts";
import type { DeviceBuffer, Tensor } from "../tensor/device_tensor.ts";
import type { TritonModelConfigJson } from "../config/triton_model_config.ts";
import type { CacheConfig } from "../config/cache_config.ts";
import type { GpuInventory } from "../gpu/devices.ts";
import type { ModelInfo, OpenAIServing } from "../config/model_info.ts";
import type { TraceCarrier } from "../telemetry/otel.ts";
import type { Tracer } from "../telemetry/tracer.ts";

export type { CacheConfig, TritonModelConfigJson };

/**
 * The options both engines take. Where an engine cannot honour a setting, it refuses it when it
 * is created (the built-in engine's limits are noted here).
 */
export interface CommonEngineOptions {
  /**
   * Server id, the `name` of the server metadata.
   *
   * @default {"triton"}
   */
  id?: string;
  /**
   * Whether the server is not ready while any loaded model is not ready.
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
   * Response cache size in bytes for the `local` cache; 0 disables it (models with
   * `responseCache` need more).
   *
   * @default {0}
   */
  responseCacheByteSize?: number;
  /**
   * The response cache as Triton's `--cache-config` names it; overrides
   * `responseCacheByteSize`. The built-in engine has only the `local` cache and its `size`
   * setting: anything else is refused there.
   *
   * @default {undefined}
   */
  cacheConfig?: CacheConfig;
  /**
   * Whether the engine keeps Prometheus metrics at all (Triton's `--allow-metrics`; the facade
   * passes `allowMetrics`). Off, no CPU or GPU metrics are read and no model's metrics are kept,
   * so `metrics()` reports none; on the Triton engine, unless another core in this process turned
   * metrics on (the core's metrics are process-wide, and then it reports those).
   *
   * @default {true}
   */
  metrics?: boolean;
  /**
   * Report CPU utilization and memory (`nv_cpu_*`), read again every `metricsIntervalMs`.
   *
   * @default {false}
   */
  cpuMetrics?: boolean;
  /**
   * Report GPU metrics (`nv_gpu_*`, through DCGM in the core). The built-in engine has none, so
   * it refuses `true`.
   *
   * @default {true on the Triton engine where there are GPUs, else false}
   */
  gpuMetrics?: boolean;
  /**
   * The core's pinned host memory pool in bytes (`--pinned-memory-pool-byte-size`). The
   * built-in engine copies no tensors to or from GPUs, so it refuses a size above 0.
   *
   * @default {268435456 (256 MiB) on the Triton engine where there are GPUs, else 0}
   */
  pinnedMemoryPoolByteSize?: number;
  /**
   * The GPUs: instances pinned to `cuda:N` become `KIND_GPU` groups on GPU N.
   *
   * @default {discoverGpus(), when the Triton engine starts or (built-in) a model pinned to a GPU loads}
   */
  gpus?: GpuInventory;
  /**
   * How often CPU and GPU metrics are read, in milliseconds.
   *
   * @default {2000}
   */
  metricsIntervalMs?: number;
  /**
   * Triton `--metrics-config` entries (`<setting>=<value>`). The core takes them as they are.
   * The built-in engine reports latency counters only: `counter_latencies=<bool>` is honoured,
   * `histogram_latencies=false` and `summary_latencies=false` change nothing, and it refuses
   * the rest.
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
  /**
   * The server's tracer (trace settings, trace file or OpenTelemetry export), which the engine
   * asks once per request whether to trace it. The engine does not close it.
   *
   * @default {undefined (nothing is traced)}
   */
  tracer?: Tracer;
}

/** A model handed to an engine for loading. */
export interface ModelDefinition extends ModelInfo {
  /** Starts the model's instances. */
  readonly instances: InstanceProvider;
}

/**
 * One loaded model version, as {@linkcode Engine.model} resolves it for a request: the front end
 * looks the model up once, reads what decoding needs from the handle, and passes the handle on
 * to {@linkcode Engine.infer} or {@linkcode Engine.inferStream}, which do not look it up again.
 */
export interface ModelHandle {
  /** Model name. */
  readonly name: string;
  /** The version the request resolved to. */
  readonly version: number;
  /** Whether the model is decoupled (served by `inferStream`, not `infer`). */
  readonly decoupled: boolean;
  /** Whether the model has sequence batching (its requests name their sequence). */
  readonly sequenceBatching: boolean;
  /** The largest batch a request may carry; 0 when the model does not batch. */
  readonly maxBatchSize: number;
  /** Declared inputs, without the batch axis. */
  readonly inputs: readonly ResolvedTensorSpec[];
  /** Declared outputs, without the batch axis. */
  readonly outputs: readonly ResolvedTensorSpec[];
  /** This version's metadata (`versions` names this version only). */
  readonly metadata: ModelMetadata;
  /** How the model is served on the OpenAI API; `undefined` when it is not. */
  readonly openai?: OpenAIServing;
}

/**
 * An output buffer in a mapped object its client may shrink (a system shared-memory region): a
 * write to a mapped page past the object's end raises SIGBUS, which would end the server. The
 * Triton engine checks the object's size right before the core writes there.
 */
export interface OutputGuard {
  /** The object's descriptor (the region keeps it open while the request holds it). */
  readonly fd: number;
  /** The size in bytes the object must have for the buffer to be backed. */
  readonly minimumSize: number;
  /** The INVALID_ARG error's message when it has less (it names the region). */
  readonly refusal: string;
}

/** A protocol-neutral inference request, as the front ends decode it. */
export interface InferenceRequest {
  /** Target model. */
  readonly modelName: string;
  /** Target version; `undefined` means the latest loaded one. */
  readonly modelVersion?: number;
  /** Request id, echoed in the response. */
  readonly id?: string;
  /**
   * Input tensors by name, in request order. With batching, axis 0 is the batch. An input in a
   * client's CUDA shared-memory region is a `DeviceTensor` over that region.
   */
  readonly inputs: ReadonlyMap<string, Tensor>;
  /** Requested outputs; `undefined` means every declared output. */
  readonly outputs?: readonly string[];
  /**
   * Memory that requested outputs go to (a client's shared-memory region), by output name: host
   * bytes (system shared memory) or device memory (CUDA shared memory). The Triton engine has
   * the core write those outputs there and answers them as views of that memory, so the front
   * end's copy into the region finds nothing to do; the built-in engine copies a callable's
   * device tensor into a CUDA region itself (device to device) and answers other outputs as
   * usual. The memory must stay valid until the response is written.
   */
  readonly outputBuffers?: ReadonlyMap<string, Uint8Array | DeviceBuffer>;
  /**
   * For outputs in {@linkcode InferenceRequest.outputBuffers} that lie in a client's mapped
   * object: what to check right before writing there (see {@linkcode OutputGuard}).
   */
  readonly outputGuards?: ReadonlyMap<string, OutputGuard>;
  /** Request parameters (body parameters and forwarded headers). */
  readonly parameters: Readonly<Record<string, ParameterValue>>;
  /** Priority level (0 = the model's default). */
  readonly priority?: number;
  /** Queue timeout override in microseconds (honoured only where the queue policy allows). */
  readonly timeoutMicroseconds?: number;
  /**
   * The request's sequence (`sequence_id`, `sequence_start`, `sequence_end`): what a model with
   * sequence batching needs; other models ignore it.
   */
  readonly sequence?: SequenceRequest;
  /** Aborts the request (client gone). */
  readonly signal?: AbortSignal;
  /**
   * Who made the request when it is a call of another model of the server (a callable's
   * `context.infer`, an ensemble's step): the callable sees it as `request.parent`, the engine
   * refuses a call that the target's every instance waits for, and tracing links the request to
   * its caller's. `undefined` for a client's request.
   */
  readonly parent?: CallParent;
  /**
   * The client's W3C trace context (HTTP headers or gRPC metadata `traceparent`, `tracestate`):
   * in trace mode `opentelemetry` the request's spans continue the client's trace.
   */
  readonly traceContext?: TraceCarrier;
}

/** A protocol-neutral inference response. */
export interface InferenceResponse {
  /** Model name. */
  readonly modelName: string;
  /** Model version, as a string like Triton's responses. */
  readonly modelVersion: string;
  /** The request id, when it had one. */
  readonly id?: string;
  /**
   * Output tensors by name, in the order of the model's declared outputs. Only an output that
   * went to a client's CUDA region (`outputBuffers`) is a `DeviceTensor`, over that region.
   */
  readonly outputs: ReadonlyMap<string, Tensor>;
  /** Response parameters (decoupled final flags and the like). */
  readonly parameters?: Readonly<Record<string, ParameterValue>>;
}

/** One step of a decoupled stream. */
export interface StreamResponse extends InferenceResponse {
  /** Whether this is the last response of the request. */
  readonly final: boolean;
}

/** `GET /v2` body. */
export interface ServerMetadata {
  /** Server id. */
  readonly name: string;
  /** Server version. */
  readonly version: string;
  /** Supported protocol extensions. */
  readonly extensions: readonly string[];
}

/** One tensor in model metadata. */
export interface TensorMetadata {
  /** Tensor name. */
  readonly name: string;
  /** KServe datatype string. */
  readonly datatype: string;
  /** Shape, with a leading -1 for batching models. */
  readonly shape: readonly number[];
}

/** `GET /v2/models/{m}` body. */
export interface ModelMetadata {
  /** Model name. */
  readonly name: string;
  /** Versions, as strings. */
  readonly versions: readonly string[];
  /** Platform (the backend name). */
  readonly platform: string;
  /** Inputs. */
  readonly inputs: readonly TensorMetadata[];
  /** Outputs. */
  readonly outputs: readonly TensorMetadata[];
}

/** `{count, ns}` pair of Triton's statistics. */
export interface StatDuration {
  /** Number of events. */
  count: number;
  /** Total nanoseconds. */
  ns: number;
}

/** Triton's per-model statistics JSON entry. */
export interface ModelStatistics {
  /** Model name. */
  name: string;
  /** Version string. */
  version: string;
  /** Milliseconds since epoch of the last inference, 0 if none. */
  last_inference: number;
  /** Inferences performed (sum of batch sizes; cache hits excluded). */
  inference_count: number;
  /** Executions (batches) performed. */
  execution_count: number;
  /** Cumulative durations. */
  inference_stats: {
    success: StatDuration;
    fail: StatDuration;
    queue: StatDuration;
    compute_input: StatDuration;
    compute_infer: StatDuration;
    compute_output: StatDuration;
    cache_hit: StatDuration;
    cache_miss: StatDuration;
  };
  /** Per-response statistics (decoupled models), keyed by response index. */
  response_stats: Record<string, {
    compute_infer: StatDuration;
    compute_output: StatDuration;
    success: StatDuration;
    fail: StatDuration;
    empty_response: StatDuration;
    cancel: StatDuration;
  }>;
  /** Per batch size. */
  batch_stats: {
    batch_size: number;
    compute_input: StatDuration;
    compute_infer: StatDuration;
    compute_output: StatDuration;
  }[];
  /** Memory usage reports. */
  memory_usage: { type: string; id: number; byte_size: number }[];
}

/** Options of {@linkcode Engine.loadModel}. */
export interface LoadOptions {
  /**
   * Whether the model takes the place of the versions of its name the engine has, as Triton's
   * core does when a loaded model is loaded again: they go on serving while it loads; once it is
   * ready, new requests go to it, and they are unloaded (their in-flight requests finish) and
   * forgotten. When it fails to load, they go on serving and the load's error is thrown.
   *
   * @default {false}
   */
  replace?: boolean;
}

/** Options of {@linkcode Engine.unloadModel}. */
export interface UnloadOptions {
  /**
   * Whether the engine forgets the model: afterwards its name is unknown (NOT_FOUND), as if it
   * had never been loaded (an unbound model). Otherwise it stays known as unloaded
   * (UNAVAILABLE), like a model the repository API unloads.
   *
   * @default {false}
   */
  forget?: boolean;
}

/** One entry of the repository index. */
export interface RepositoryIndexEntry {
  /** Model name. */
  readonly name: string;
  /** Version string. */
  readonly version?: string;
  /** `READY`, `UNAVAILABLE`, `LOADING`, `UNLOADING` or `UNKNOWN`. */
  readonly state?: string;
  /** Why it is in that state. */
  readonly reason?: string;
}

/**
 * The KServe/Triton protocol extensions both engines implement. Front ends add the ones they
 * implement themselves (e.g. `logging`).
 */
export const ENGINE_EXTENSIONS: readonly string[] = [
  "binary_tensor_data",
  "parameters",
  "statistics",
  "model_configuration",
  "model_repository",
  "schedule_policy",
];

/** Which engine runs. */
export type EngineKind = "builtin" | "triton";

/**
 * What another thread of the process needs to submit requests to an engine itself, without
 * the main isolate: cloneable data for `openSharedEngine`'s client there, and how the
 * engine takes back what that client reports (posted back to the engine's isolate).
 */
export interface EngineShare {
  /**
   * The data of one more client, for one thread: structured-cloneable, opened by
   * `openSharedEngine` (`src/engine/share.ts`). Each client's completion queue has a signal of
   * its own, so each thread takes its own.
   *
   * @returns The data.
   */
  client(): SharedEngineData;
  /** Takes a report of the other thread's client. */
  settle(report: unknown): void;
}

/** How an engine ends an {@linkcode EngineShare} when it stops. */
export interface ShareEnd {
  /** Makes the other thread submit nothing more; awaited before the engine stops. */
  stop(): Promise<void>;
  /**
   * Resolves once every request the other thread submitted is released and deleted; awaited
   * (as long as the engine's own requests) before the engine frees what they hold.
   */
  released(): Promise<void>;
}

/** The cloneable half of an {@linkcode EngineShare}: the Triton core's install and server. */
export interface SharedEngineData {
  /** The engine that shares. */
  readonly kind: "triton";
  /** Paths of the core and the bridge (a `TritonInstall`). */
  readonly install: unknown;
  /** The `TRITONSERVER_Server*`. */
  readonly server: bigint;
  /**
   * The signal the client's completion queue listens on: the engine's isolate rings it when
   * its batches complete the client's requests (`src/engine/native/queue_signals.ts`).
   */
  readonly signal: { readonly buffer: SharedArrayBuffer; readonly token: number };
}

/** Submits requests to a shared engine from this thread. */
export interface SharedEngineClient {
  /**
   * Runs one request of a coupled model the engine's isolate resolved.
   *
   * @param request The request (its model and version as the engine's isolate resolved them).
   * @param outputOrder The model's output names in declared order.
   * @returns The response.
   */
  infer(request: InferenceRequest, outputOrder: readonly string[]): Promise<InferenceResponse>;
  /** Waits for the requests in flight, then frees the client; submit nothing after calling it. */
  close(): Promise<void>;
}

/**
 * The engine contract shared by the built-in and the Triton-core engines. The queries are
 * synchronous: both engines answer them from memory (the core through synchronous C calls).
 */
export interface Engine extends AsyncDisposable {
  /** Which engine this is. */
  readonly kind: EngineKind;
  /** Starts the engine (loads the core, etc.). */
  start(): Promise<void>;
  /** Drains in-flight requests (up to the exit timeout), unloads models and stops. Idempotent. */
  stop(): Promise<void>;
  /** Whether the engine is live. */
  isLive(): boolean;
  /** Whether the engine is ready (with strict readiness: every model ready). */
  isReady(): boolean;
  /** Server metadata. */
  serverMetadata(): ServerMetadata;
  /**
   * Loads a model and starts its instances; resolves when it is ready (with `replace`, once it
   * serves in place of the versions it replaced).
   *
   * @throws {InferenceError} ALREADY_EXISTS for a loaded name and version (without `replace`).
   */
  loadModel(model: ModelDefinition, options?: LoadOptions): Promise<void>;
  /**
   * Unloads a model version (every version when `version` is undefined) and stops its
   * instances. The model stays known as unloaded (requests get UNAVAILABLE) unless
   * `options.forget` is set.
   *
   * @throws {InferenceError} NOT_FOUND for unknown models or versions.
   */
  unloadModel(name: string, version?: number, options?: UnloadOptions): Promise<void>;
  /**
   * Resolves the model version a request targets: the one lookup of a request.
   *
   * @throws {InferenceError} NOT_FOUND for unknown models, UNAVAILABLE for versions not ready.
   */
  model(name: string, version?: number): ModelHandle;
  /** Whether a model version is ready (false for unknown models). */
  modelReady(name: string, version?: number): boolean;
  /** Model metadata; NOT_FOUND for unknown models. */
  modelMetadata(name: string, version?: number): ModelMetadata;
  /** Triton's model-config JSON; NOT_FOUND for unknown models. */
  modelConfig(name: string, version?: number): TritonModelConfigJson;
  /** Statistics of one model, or of all when `name` is undefined. */
  modelStatistics(name?: string, version?: number): { model_stats: ModelStatistics[] };
  /** The repository index. */
  repositoryIndex(readyOnly: boolean): RepositoryIndexEntry[];
  /**
   * Runs one request of a coupled model.
   *
   * @param request The request.
   * @param model Its model, as {@linkcode Engine.model} resolved it; looked up when omitted.
   */
  infer(request: InferenceRequest, model?: ModelHandle): Promise<InferenceResponse>;
  /**
   * Runs one request of a decoupled model: 0..N responses, the last marked final. A consumer
   * that reads slowly slows the model's generator down; one that stops reading cancels it.
   *
   * @param request The request.
   * @param model Its model, as {@linkcode Engine.model} resolved it; looked up when omitted.
   */
  inferStream(request: InferenceRequest, model?: ModelHandle): AsyncIterable<StreamResponse>;
  /** Prometheus text exposition of the engine's metrics. */
  metrics(): string;
  /**
   * Lets another thread submit requests itself (the Triton core is thread-safe; the built-in
   * engine lives in its isolate and has no such method).
   *
   * @param end How the engine ends the sharing when it stops.
   * @returns The share, or `undefined` when the engine is not running.
   */
  share?(end: ShareEnd): EngineShare | undefined;
}
