/**
 * The inference-callable contract: what a user's function receives and returns.
 *
 * @module
 */

import type { ModelInfo } from "../config/model_info.ts";
import type { ModelMetrics } from "./metrics.ts";
import type { SequenceId } from "../config/sequence_batching.ts";
import type { TensorSpec } from "../config/tensor_spec.ts";
import type { DTypeOf, NumericDType } from "../tensor/dtype.ts";
import type { NDArray } from "../tensor/ndarray.ts";
import type { DeviceTensor } from "../tensor/device_tensor.ts";

/** A request parameter value (KServe body parameters and forwarded headers). */
export type ParameterValue = string | number | boolean;

/** Tensors by name: the inputs of a request, or the outputs of a result. */
export type Tensors = Record<string, NDArray>;

/**
 * Tensors by name, each in host memory or on a GPU: what engines and instances pass around
 * before a callable's inputs are placed (`deviceTensor` specs keep device tensors, the others get
 * host copies) and after its outputs came back.
 */
export type AnyTensors = Record<string, NDArray | DeviceTensor>;

/**
 * The tensor a spec declares: `NDArray<dtype>`, or for a spec with `deviceTensor: true` also a
 * {@linkcode DeviceTensor} of that dtype.
 *
 * @typeParam P A tensor spec type.
 */
export type TensorOf<P extends TensorSpec> = P extends { readonly deviceTensor: true }
  // A device tensor of each numeric dtype (BYTES is never on a device); inline, since `deno doc
  // --lint` refuses a public type that names a private one.
  ?
    | NDArray<DTypeOf<P["dtype"]>>
    | (DTypeOf<P["dtype"]> extends infer D ? D extends NumericDType ? DeviceTensor<D> : never
      : never)
  : NDArray<DTypeOf<P["dtype"]>>;

/**
 * The tensors a list of specs declares, by name, typed by dtype: `[{ name: "a", dtype: "float32",
 * shape: [-1] }]` gives `{ a: NDArray<"float32"> }`, an `optional: true` spec an optional
 * property, and a `deviceTensor: true` spec `NDArray<"float32"> | DeviceTensor<"float32">`.
 * Specs whose names are not literal types (built at run time, or declared without `as const`)
 * give the wide {@linkcode Tensors}.
 *
 * @typeParam S The specs, declared inline or `as const`.
 *
 * @example Type a callable declared apart from `bind()`
 * ```ts
 * import { batch, type InferFunc, map, type TensorsOf } from "../../mod.ts";
 * import assert from "node:assert/strict";
 *
 * const inputs = [
 *   { name: "a", dtype: "float32", shape: [-1] },
 *   { name: "mask", dtype: "bool", shape: [-1], optional: true },
 * ] as const;
 * const outputs = [{ name: "twice", dtype: "float32", shape: [-1] }] as const;
 * const twice: InferFunc<TensorsOf<typeof inputs>, TensorsOf<typeof outputs>> = batch(
 *   ({ a, mask }) => ({ twice: map(a, (v, i) => (mask?.data[i] ?? 1) ? v * 2 : v) }),
 * );
 * assert.equal(typeof twice, "function");
 * type Mask = TensorsOf<typeof inputs>["mask"]; // optional: NDArray<"bool"> | undefined
 * const none: Mask = undefined;
 * assert.equal(none, undefined);
 * ```
 */
export type TensorsOf<S extends readonly TensorSpec[]> = string extends SpecName<S[number]>
  ? Tensors
  // One object type, not an intersection, so that types read well in errors and hovers.
  : (
    & {
      [P in S[number] as P extends { readonly optional: true } ? never : SpecName<P>]: TensorOf<
        P
      >;
    }
    & {
      [P in S[number] as P extends { readonly optional: true } ? SpecName<P> : never]?: TensorOf<
        P
      >;
    }
  ) extends infer T ? { [K in keyof T]: T[K] }
  : never;

/**
 * The name a tensor spec gives, at the type level: its literal `name`, or `string` when the name
 * is not a literal type or the spec has none.
 *
 * @typeParam P A tensor spec type.
 */
export type SpecName<P> = P extends { readonly name: infer N extends string } ? N : string;

/**
 * What a request says of its sequence: the KServe parameters `sequence_id`, `sequence_start` and
 * `sequence_end` (tritonclient's `infer(..., sequence_id=, sequence_start=, sequence_end=)`).
 */
export interface SequenceRequest {
  /** The correlation ID: an unsigned 64-bit integer or a string; `0n` or `""` when none. */
  readonly id: SequenceId;
  /** The first request of the sequence (a running sequence with this ID starts over). */
  readonly start: boolean;
  /** The last request of the sequence. */
  readonly end: boolean;
}

/**
 * A request's place in its sequence, as the callable of a model with sequence batching sees it
 * (`request.sequence`; read it typed with `sequenceOf<S>(request)`), and the sequence's state.
 *
 * @typeParam S What the callable keeps per sequence.
 */
export interface Sequence<S = unknown> extends SequenceRequest {
  /**
   * False for a padding request of the direct strategy: it holds no sequence's data (its inputs
   * are zeros, its `id` is none) and its results are dropped. True for every other request.
   */
  readonly ready: boolean;
  /**
   * What the callable keeps for this sequence until its next request: `undefined` at its start,
   * then whatever the callable set. It lives on the instance that runs the sequence (in its
   * Worker for `workers()`), and is dropped when the sequence ends, times out, or its instance
   * restarts. Setting it on a padding request does nothing.
   */
  state: S | undefined;
}

/** The fields every request has, beside its inputs. */
export interface InferRequestFields<I = Tensors> {
  /**
   * Input tensors by name; optional inputs the client left out are absent. With batching, axis 0
   * is this request's batch.
   *
   * An input's `data` is often a view of memory the server owns and shares: the request body
   * (binary data), a shared-memory region, the Triton core's memory, or a chunk that holds other
   * requests' small tensors (JSON data). Read it between `byteOffset` and its end, never transfer
   * or detach its `buffer`, and copy it (`data.slice()`) to keep it past the call.
   */
  readonly data: I;
  /** KServe request parameters merged with forwarded headers (header values are strings). */
  readonly parameters: Record<string, ParameterValue>;
  /** The outputs the client asked for (all declared outputs when it named none). */
  readonly requestedOutputNames: readonly string[];
  /** Aborted when the client disconnects or the request is cancelled. */
  readonly signal: AbortSignal;
  /**
   * The call this request serves when another model of the server made it (`context.infer`, an
   * ensemble's step); `undefined` for a client's request.
   */
  readonly parent?: CallParent;
  /**
   * The request's sequence, for a model with sequence batching (`undefined` for other models and
   * during warm-up).
   */
  readonly sequence?: Sequence;
}

/**
 * The inputs of a typed request as its own properties (`request.x` beside `request.data.x`,
 * like PyTriton's `request["x"]`). Inputs named like a request field (`data`, `parameters`, `parent`,
 * `requestedOutputNames`, `signal`, `sequence`) are only in `data`; untyped requests have none.
 *
 * @typeParam I The inputs.
 */
export type InputProperties<I> = {
  readonly [
    K in keyof I as K extends keyof InferRequestFields ? never : string extends K ? never : K
  ]: I[K];
};

/**
 * One inference request as the callable sees it: {@linkcode InferRequestFields} and, for a model
 * whose specs are typed, each input as a property.
 *
 * @typeParam I The inputs by name, e.g. `TensorsOf<typeof inputs>`; {@linkcode Tensors} when
 *   not known.
 */
export type InferRequest<I = Tensors> = InferRequestFields<I> & InputProperties<I>;

/**
 * One inference request as the callable sees it.
 *
 * @deprecated Use {@linkcode InferRequest}: this name shadows the Fetch API's `Request`.
 * @typeParam I The inputs by name.
 */
export type Request<I = Tensors> = InferRequest<I>;

/**
 * The outputs of one request, by name. Returned arrays belong to the response from then on:
 * large ones are sent (or handed to the Triton core) as they are, not copied, so a callable must
 * not change an array after returning it (return a new one per call).
 *
 * @typeParam O The outputs, e.g. `TensorsOf<typeof outputs>`; {@linkcode Tensors} when not known.
 */
export type InferResult<O = Tensors> = O;

/**
 * What a callable gives back for one request: its outputs by name, or a request whose inputs are
 * the outputs (so PyTriton's identity `requests => requests` works: its `data` is read).
 *
 * @typeParam O The outputs.
 */
export type CallableResult<O = Tensors> = InferResult<O> | InferRequestFields<O>;

/** One model instance that waits for a call it made (see {@linkcode CallParent}). */
export interface CallFrame {
  /** Its model's name. */
  readonly model: string;
  /** Its model's version. */
  readonly version: number;
  /** The instance's index; -1 for an ensemble, which has no instances. */
  readonly instance: number;
}

/**
 * Who made a call to a model of the same server: the calling model's instance, and every
 * instance waiting for the call (its callers' callers too), outermost first, the caller last.
 * The engines refuse a call that every instance of its model waits for, which would never run
 * (A calls B calls A, A with one instance); tracing links the call to the caller's request.
 */
export interface CallParent extends CallFrame {
  /** Whether the caller is an ensemble (the call is one of its steps). */
  readonly ensemble: boolean;
  /** The instances waiting for the call, outermost first; the caller is the last. */
  readonly waiting: readonly CallFrame[];
}

/** Options of {@linkcode InferContext.infer} and {@linkcode InferContext.inferStream}. */
export interface InferCallOptions {
  /**
   * The model's version.
   *
   * @default {the version the server serves}
   */
  version?: number;
  /**
   * Request parameters for the model.
   *
   * @default {{}}
   */
  parameters?: Record<string, ParameterValue>;
  /**
   * Priority level in the model's queue (0: its default).
   *
   * @default {0}
   */
  priority?: number;
  /**
   * Queue timeout in microseconds, where the model's queue policy allows one.
   *
   * @default {0}
   */
  timeoutMicroseconds?: number;
  /**
   * Request id, echoed by the model.
   *
   * @default {""}
   */
  id?: string;
  /**
   * The request of this batch the call works for: cancelling it cancels the call. By default
   * the call works for the whole batch, and is cancelled once every request of it is.
   *
   * @default {undefined}
   */
  request?: InferRequestFields<unknown>;
  /**
   * Aborts the call (`AbortSignal.timeout(ms)` bounds it).
   *
   * @default {undefined}
   */
  signal?: AbortSignal;
}

/**
 * A model a callable calls, typed by its specs: the options given to `bind()` will do.
 *
 * @typeParam I The model's input specs.
 * @typeParam O The model's output specs.
 */
export interface ModelRef<
  I extends readonly TensorSpec[] = readonly TensorSpec[],
  O extends readonly TensorSpec[] = readonly TensorSpec[],
> {
  /** Model name. */
  readonly modelName: string;
  /** Input specs. */
  readonly inputs: I;
  /** Output specs. */
  readonly outputs: O;
}

/**
 * One call of a callable to a model of the same server, as the engine takes it (what
 * {@linkcode InferContext.infer} builds).
 */
export interface ModelCall {
  /** The model's name. */
  readonly model: string;
  /** Its version; the served one when undefined. */
  readonly version?: number;
  /** Input tensors by name. */
  readonly inputs: Tensors;
  /** Requested outputs; every output when undefined. */
  readonly outputs?: readonly string[];
  /** Request parameters. */
  readonly parameters: Record<string, ParameterValue>;
  /** Priority level. */
  readonly priority?: number;
  /** Queue timeout in microseconds. */
  readonly timeoutMicroseconds?: number;
  /** Request id. */
  readonly id?: string;
  /** Cancels the call. */
  readonly signal?: AbortSignal;
  /** Who calls. */
  readonly parent: CallParent;
}

/**
 * Runs the calls of callables on their server's engine. Engines hand one to the instances they
 * start; a unit test may hand one of its own to `inferContext()`.
 */
export interface ModelCaller {
  /** Runs a call to a coupled model: its outputs by name. */
  infer(call: ModelCall): Promise<Tensors>;
  /** Runs a call to a decoupled model: the outputs of each response, as they come. */
  inferStream(call: ModelCall): AsyncIterable<Tensors>;
}

/** The context passed as second argument to every inference callable (and through decorators). */
export interface InferContext {
  /** The model this call belongs to. */
  readonly model: ModelInfo;
  /** Index of the instance running the call. */
  readonly instanceIndex: number;
  /** Device of the instance: `"cpu"` or `"cuda:N"`. */
  readonly device: string;
  /**
   * Runs a request on another model of the same server, through that model's scheduler
   * (batching, queue policy, priorities, statistics) like a client's, without the network:
   * tensors cross as they are (in a Worker, moved to the engine's isolate: pass a copy of an
   * array you use afterwards). The call works for this batch: cancelling its requests cancels
   * it. Its failure is an `InferenceError` that names the model.
   *
   * @param model The model: its name, or the options it was bound with (which type the call).
   * @param inputs Its inputs by name.
   * @param options Version, parameters, priority, the request it works for, a signal.
   * @returns Its outputs by name.
   */
  infer<const I extends readonly TensorSpec[], const O extends readonly TensorSpec[]>(
    model: ModelRef<I, O>,
    inputs: TensorsOf<I>,
    options?: InferCallOptions,
  ): Promise<TensorsOf<O>>;
  /**
   * Runs a request on another model of the same server by its name (see the typed form).
   *
   * @param model The model's name.
   * @param inputs Its inputs by name.
   * @param options As for the typed form, and the outputs to return (all by default).
   * @returns Its outputs by name.
   */
  infer(
    model: string,
    inputs: Tensors,
    options?: InferCallOptions & { outputs?: readonly string[] },
  ): Promise<Tensors>;
  /**
   * Runs a request on a decoupled model of the same server: the outputs of each of its
   * responses, as they come. Reading slowly slows the model down; leaving the loop cancels it.
   *
   * @param model The model: its name, or the options it was bound with (which type the call).
   * @param inputs Its inputs by name.
   * @param options As for {@linkcode InferContext.infer}.
   * @returns The responses' outputs.
   */
  inferStream<const I extends readonly TensorSpec[], const O extends readonly TensorSpec[]>(
    model: ModelRef<I, O>,
    inputs: TensorsOf<I>,
    options?: InferCallOptions,
  ): AsyncIterable<TensorsOf<O>>;
  /**
   * Runs a request on a decoupled model of the same server by its name (see the typed form).
   *
   * @param model The model's name.
   * @param inputs Its inputs by name.
   * @param options As for the typed form, and the outputs to return (all by default).
   * @returns The responses' outputs.
   */
  inferStream(
    model: string,
    inputs: Tensors,
    options?: InferCallOptions & { outputs?: readonly string[] },
  ): AsyncIterable<Tensors>;
  /**
   * The model's own metrics (Triton's custom-metrics API: a family, then metrics with labels),
   * exported on `/metrics` beside the server's.
   */
  readonly metrics: ModelMetrics;
}

/**
 * What an inference callable may return: one result per request, or a stream of them (decoupled).
 *
 * @typeParam R What it gives back per request: {@linkcode CallableResult} (outputs, or a
 *   request), or just {@linkcode InferResult} for decorators that always build outputs.
 */
export type InferReturn<R = CallableResult> =
  | R[]
  | Promise<R[]>
  | Iterable<R[]>
  | AsyncIterable<R[]>;

/**
 * An inference callable: receives the batch of requests (and the context) and returns one result
 * per request, in order. Generators yield steps of results (decoupled models).
 *
 * @typeParam I The inputs, e.g. `TensorsOf<typeof inputs>`.
 * @typeParam O The outputs, e.g. `TensorsOf<typeof outputs>`.
 * @typeParam R What it gives back per request (see {@linkcode InferReturn}).
 */
export type InferFunc<I = Tensors, O = Tensors, R extends CallableResult<O> = CallableResult<O>> = (
  requests: InferRequest<I>[],
  context: InferContext,
) => InferReturn<R>;

/**
 * A class instance serving as a callable through its `infer` method.
 *
 * @typeParam I The inputs.
 * @typeParam O The outputs.
 * @typeParam R What it gives back per request (see {@linkcode InferReturn}).
 */
export interface InferCallableObject<
  I = Tensors,
  O = Tensors,
  R extends CallableResult<O> = CallableResult<O>,
> {
  /** Runs one batch. */
  infer(requests: InferRequest<I>[], context: InferContext): InferReturn<R>;
}

/**
 * What `bind()` accepts as one instance's callable.
 *
 * @typeParam I The inputs.
 * @typeParam O The outputs.
 * @typeParam R What it gives back per request (see {@linkcode InferReturn}).
 */
export type InferCallable<
  I = Tensors,
  O = Tensors,
  R extends CallableResult<O> = CallableResult<O>,
> = InferFunc<I, O, R> | InferCallableObject<I, O, R>;
