/**
 * A model instance: the thing an engine hands a batch to. Main-thread callables and Worker-backed
 * instances both implement it, and both engines drive it the same way.
 *
 * @module
 */

import type {
  AnyTensors,
  InferRequest,
  InferResult,
  ModelCaller,
  SequenceRequest,
} from "../callable/types.ts";
import type { SequenceId } from "../config/sequence_batching.ts";
import type { InferenceError } from "../errors.ts";
import type { GpuInventory } from "../gpu/devices.ts";
import type { ModelInfo } from "../config/model_info.ts";
import type { MetricsBackend } from "../callable/metrics.ts";
import type { OpenTelemetryTraceConfig } from "../config/trace_config.ts";

/** Where one input tensor lives in memory the Triton core owns (valid while its batch runs). */
export interface NativeTensorLocation {
  /** The address, as `Deno.UnsafePointer.value` gives it. */
  readonly address: bigint;
  /** The byte count (length-prefixed elements for BYTES tensors). */
  readonly byteLength: number;
}

/**
 * The native location of each request's inputs, by input name, in request order. The Triton
 * engine passes it so that instances in other isolates can read the inputs in place.
 */
export type NativeLocations = readonly Readonly<Record<string, NativeTensorLocation>>[];

/** One running instance of a model's callable. */
export interface ModelInstance extends AsyncDisposable {
  /** Instance index within the model, from 0. */
  readonly index: number;
  /** Device string: `"cpu"` or `"cuda:N"`. */
  readonly device: string;
  /** Whether the instance can take batches (false after a crash until restarted). */
  readonly alive: boolean;
  /**
   * Whether the instance gave up for good: it was stopped, or it crashed and could not be
   * restarted. A batch given to an instance that is not alive but not down waits for its restart.
   * Instances without it are down whenever they are not alive.
   */
  readonly down?: boolean;
  /**
   * Whether the instance runs in another isolate (a Worker) and reads a batch's inputs there. The
   * engine cannot revoke such reads, so before it frees a batch's memory it waits for
   * {@linkcode ModelInstance.idle}; inputs read on the main thread it can revoke itself.
   */
  readonly isolated?: boolean;
  /**
   * Resolves once the instance runs no batch any more. `execute` and `stream` can fail before that
   * (an execution timeout fails the batch at once, but a callable cannot be interrupted), so
   * engines wait for it before giving the instance another batch or freeing a batch's inputs.
   * Instances without it are idle as soon as `execute` or `stream` settles.
   */
  idle?(): Promise<void>;
  /**
   * Runs one batch of a coupled model. Resolves to exactly one validated result per request, in
   * order; rejects with the error that fails the whole batch. `native`, when given, locates the
   * inputs in the Triton core's memory (instances may ignore it). Inputs may be device tensors
   * (a client's CUDA region): the instance places them (`device_inputs.ts`) before its callable
   * runs. Outputs declared `deviceTensor` may be device tensors, valid until the instance's next
   * batch: the engine copies them out before it hands the instance another one.
   */
  execute(
    requests: InferRequest<AnyTensors>[],
    native?: NativeLocations,
  ): Promise<InferResult<AnyTensors>[]>;
  /**
   * Runs one batch of a decoupled model: each step holds one validated result per request. The
   * iterable ends when the callable is done and throws the error that ends every stream.
   * `native` and device tensors are as for {@linkcode ModelInstance.execute} (a step's device
   * tensors are valid until the next step is pulled).
   */
  stream(
    requests: InferRequest<AnyTensors>[],
    native?: NativeLocations,
  ): AsyncIterable<InferResult<AnyTensors>[]>;
  /**
   * For a model with sequence batching: why a request of `sequence` cannot run on this instance,
   * or `undefined` when it can. A request that continues a sequence (no `start`) needs the
   * sequence's state, which the instance lost when its Worker crashed or let go when the
   * sequence timed out. Engines ask before they put a request in a batch, and fail it alone.
   * Instances without it run every request.
   */
  sequenceError?(sequence: SequenceRequest): InferenceError | undefined;
  /**
   * Drops the state of sequences that ended without an `end` request (they were idle longer
   * than `maxSequenceIdleMicroseconds`). Instances without it keep no state.
   */
  dropSequences?(ids: readonly SequenceId[]): void;
}

/** What the engine tells instances when it starts them. */
export interface InstanceStartOptions {
  /**
   * The host's GPUs, as the engine placed the instances on them: an instance pinned to `cuda:N`
   * runs on GPU N when there are GPUs, on the CPU when there are none.
   *
   * @default {{ devices: [] }}
   */
  gpus?: GpuInventory;
  /**
   * Runs the calls the instances' callables make to other models of the server
   * (`context.infer`): the engine's. Without it, such calls fail.
   *
   * @default {undefined}
   */
  caller?: ModelCaller;
  /**
   * Where the callables' own metrics go (`context.metrics`): the engine's registry.
   *
   * @default {undefined (kept nowhere)}
   */
  metrics?: MetricsBackend;
  /**
   * The server's OpenTelemetry export (trace mode `opentelemetry`): instances in other
   * isolates export their callables' spans with the same settings.
   *
   * @default {undefined}
   */
  opentelemetry?: OpenTelemetryTraceConfig;
}

/** Creates the instances of a model when it is loaded. */
export interface InstanceProvider {
  /** How many instances the model has. */
  readonly count: number;
  /** Devices of the instances, by index (`"cpu"` or `"cuda:N"`). */
  readonly devices: readonly string[];
  /** Starts every instance; rejects with the first load failure. */
  start(model: ModelInfo, options?: InstanceStartOptions): Promise<ModelInstance[]>;
}
