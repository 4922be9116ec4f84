/**
 * The messages between a {@linkcode WorkerInstances} instance (main isolate) and its Worker
 * (`worker_main.ts`). Their tensors and errors cross by the cross-isolate codec
 * (`isolate/codec.ts`), which the HTTP threads use too.
 *
 * @module
 */

import type { CallParent, ParameterValue, SequenceRequest } from "../callable/types.ts";
import type { SequenceId } from "../config/sequence_batching.ts";
import type { GpuDevice } from "../gpu/devices.ts";
import type { WireCounts, WireError, WireTensor } from "../isolate/codec.ts";
import type { ModelInfo } from "../config/model_info.ts";
import type { MetricChange } from "../callable/metrics.ts";
import type { OpenTelemetryTraceConfig } from "../config/trace_config.ts";

/** What the instance module's factory receives: the instance's identity and device. */
export interface WorkerContext {
  /** The device the instance is pinned to: `"cpu"` or `"cuda:N"` (`"cuda"` is `"cuda:0"`). */
  readonly device: string;
  /** `"cpu"` or `"gpu"`: the kind the instance is pinned to. */
  readonly deviceKind: "cpu" | "gpu";
  /** The GPU index for `"cuda:N"`, -1 for `"cpu"`. */
  readonly deviceId: number;
  /**
   * The GPU the instance runs on, already current on this Worker's thread when the factory runs
   * (its primary context, which cuBLAS, cuDNN, TensorRT and ONNX Runtime use); `undefined` for a
   * CPU instance, and for one pinned to a GPU on a host without GPUs, which runs on the CPU.
   */
  readonly gpu: GpuDevice | undefined;
  /** Index of the instance within the model, from 0. */
  readonly instanceIndex: number;
  /** Model name. */
  readonly modelName: string;
  /** Model version. */
  readonly modelVersion: number;
  /** The bound model (tensors, config), as callables see it in `InferContext.model`. */
  readonly model: ModelInfo;
  /** 0 for the first start, then how many times this instance was restarted. */
  readonly attempt: number;
  /** The `data` option of `workers()`, structured-cloned (a `SharedArrayBuffer` stays shared). */
  readonly data: unknown;
}

/** One request on the wire. */
export interface WireRequest {
  /** Input tensors by name. */
  readonly data: Record<string, WireTensor>;
  /** Request parameters. */
  readonly parameters: Record<string, ParameterValue>;
  /** Requested outputs. */
  readonly requestedOutputNames: readonly string[];
  /** Whether the request was cancelled before the batch was sent. */
  readonly cancelled: boolean;
  /** Its sequence (a model with sequence batching); its state lives in the Worker. */
  readonly sequence?: SequenceRequest & { readonly ready: boolean };
  /** Who made the request, when another model called (see `InferRequest.parent`). */
  readonly parent?: CallParent;
}

/** A call of the Worker's callable to another model of the server (`context.infer`). */
export interface CallMessage {
  readonly type: "call";
  /** The batch whose callable calls. */
  readonly batch: number;
  /** The call's id, which the answers name. */
  readonly call: number;
  /** Whether it streams (`inferStream`). */
  readonly stream: boolean;
  /** The model. */
  readonly model: string;
  /** Its version. */
  readonly version?: number;
  /** The inputs. */
  readonly inputs: Record<string, WireTensor>;
  /** Requested outputs. */
  readonly outputs?: readonly string[];
  /** Request parameters. */
  readonly parameters: Record<string, ParameterValue>;
  /** Priority level. */
  readonly priority?: number;
  /** Queue timeout in microseconds. */
  readonly timeoutMicroseconds?: number;
  /** Request id. */
  readonly id?: string;
  /** Who calls. */
  readonly parent: CallParent;
}

/** Main → Worker. */
export type ToWorker =
  | {
    readonly type: "init";
    readonly module: string;
    readonly context: WorkerContext;
    /**
     * The Worker's end of a `node:worker_threads` MessageChannel, kept open for the Worker's
     * whole life: its other end emits `close` once the Worker's thread has ended (`Deno.exit()`,
     * `self.close()`, a crash), which Web Workers do not report otherwise.
     */
    readonly watch: unknown;
    /** The rings of coupled batches and their results (`worker_lane.ts`). */
    readonly lanes?: { readonly toWorker: SharedArrayBuffer; readonly toMain: SharedArrayBuffer };
    /** The CUDA driver to make `context.gpu` current through, when it is set. */
    readonly cudaDriver?: string;
    /** The server's OpenTelemetry export, which the Worker's callable's spans go to. */
    readonly opentelemetry?: OpenTelemetryTraceConfig;
  }
  | {
    readonly type: "batch";
    readonly id: number;
    readonly decoupled: boolean;
    readonly requests: readonly WireRequest[];
    /**
     * How many steps of a decoupled batch the Worker may post before it waits for a "credit"
     * message: its consumer's room, so that a slow consumer pauses the generator.
     */
    readonly credit: number;
    /**
     * The span the callable runs under (its request's compute span, W3C `traceparent`), when
     * the batch is traced in mode `opentelemetry`.
     */
    readonly traceparent?: string;
  }
  /** The consumer of a decoupled batch made room for `steps` more steps. */
  | { readonly type: "credit"; readonly id: number; readonly steps: number }
  | { readonly type: "cancel"; readonly id: number; readonly request: number }
  /** Ends a decoupled batch after its current step (the consumer stopped reading). */
  | { readonly type: "stop"; readonly id: number }
  /** Drops the states of sequences that timed out. */
  | { readonly type: "drop-sequences"; readonly ids: readonly SequenceId[] }
  /** Closes the Worker at its next turn of the event loop. */
  | { readonly type: "exit" }
  /** A call's outputs. */
  | {
    readonly type: "call-result";
    readonly call: number;
    readonly outputs: Record<string, WireTensor>;
  }
  /** One step of a streaming call. */
  | {
    readonly type: "call-step";
    readonly call: number;
    readonly outputs: Record<string, WireTensor>;
  }
  /** A streaming call is done. */
  | { readonly type: "call-end"; readonly call: number }
  /** A call failed. */
  | { readonly type: "call-failed"; readonly call: number; readonly error: WireError };

/** Worker → main. */
export type FromWorker =
  | { readonly type: "ready" }
  | { readonly type: "load-failed"; readonly error: WireError }
  | {
    readonly type: "results";
    readonly id: number;
    readonly results: readonly Record<string, WireTensor>[];
    readonly counts: WireCounts;
  }
  | { readonly type: "done"; readonly id: number }
  /** A change of one of the model's own metrics (posted before the results it belongs with). */
  | { readonly type: "metric"; readonly change: MetricChange }
  | { readonly type: "failed"; readonly id: number; readonly error: WireError }
  | CallMessage
  /** The callable gave a call up (its signal aborted, or it left a stream's loop). */
  | { readonly type: "call-cancel"; readonly call: number }
  /** The callable took `steps` steps of a streaming call. */
  | { readonly type: "call-credit"; readonly call: number; readonly steps: number };
