/**
 * The built-in engine's per-model scheduler, modelled on Triton's dynamic batcher: priority
 * levels with queue policies, batches of equal-shaped requests up to `maxBatchSize` (preferring
 * the preferred sizes, waiting up to the queue delay), one batch per idle instance, optional
 * in-order delivery, cancellation and draining.
 *
 * Over 500 lines for a reason: the queues, the batch former and the dispatcher share one state
 * (what is queued, delayed, running and held for ordering), and every change to it must
 * re-run the same pump; split up, each part would reach into the others' state.
 *
 * @module
 */

import type {
  AnyTensors,
  InferRequest,
  InferResult,
  SequenceRequest,
} from "../../callable/types.ts";
import type { ResolvedQueuePolicy } from "../../config/model_config.ts";
import type { ModelInfo } from "../../config/model_info.ts";
import { InferenceError, QUEUE_FULL_MESSAGE, toInferenceError } from "../../errors.ts";
import { SlotSet } from "../../slot_set.ts";
import type { ModelInstance } from "../../instances/instance.ts";
import { type ModelStatsRecorder, nsBetween } from "./statistics.ts";
import type { RequestTrace } from "../../telemetry/request_trace.ts";
import { runInContext } from "../../telemetry/otel.ts";
import { traceTensors } from "./trace_points.ts";
import type { DeviceBuffer } from "../../tensor/device_tensor.ts";
import { settleDeviceOutputs } from "./device_outputs.ts";

/** Where the scheduler delivers a request's outcome. */
export interface SchedulerSink {
  /**
   * A validated result: the only one of a coupled request, one step of a decoupled one. For a
   * step, a returned promise holds the callable's next step back until it settles (the
   * consumer's backpressure).
   */
  result(result: InferResult<AnyTensors>): void | Promise<void>;
  /** The decoupled request is done (after its last step); not called for coupled requests. */
  end(): void;
  /** The request failed; nothing follows. */
  error(error: InferenceError): void;
}

/** One request handed to the scheduler. */
export interface ScheduledRequest {
  /** What the callable sees; its `signal` must be `controller.signal`. */
  readonly request: InferRequest<AnyTensors>;
  /**
   * Where requested outputs go (the request's `outputBuffers`): a callable's device-tensor output
   * is copied into its CUDA region here, else to the host, before the instance runs again.
   */
  readonly outputBuffers?: ReadonlyMap<string, Uint8Array | DeviceBuffer>;
  /** Aborts the request as the callable sees it. */
  readonly controller: AbortController;
  /** The request's batch size (1 without batching). */
  readonly batchSize: number;
  /** Requests batch together only when their keys are equal. */
  readonly shapeKey: string;
  /** Priority level; 0 or out of range means the default level. */
  readonly priority?: number;
  /** Requested queue timeout in microseconds (only shortens an allowed default). */
  readonly timeoutMicroseconds?: number;
  /** The client's signal: aborting it cancels the request. */
  readonly signal?: AbortSignal;
  /** `performance.now()` when the request arrived. */
  readonly arrival: number;
  /** Receives the outcome. */
  readonly sink: SchedulerSink;
  /** The request's trace, when it is traced. */
  readonly trace?: RequestTrace | undefined;
  /** Its sequence (a model with sequence batching: the sequence batcher reads it). */
  readonly sequence?: SequenceRequest;
  /**
   * When it started waiting, if before it reached this scheduler (the sequence batcher's slot
   * queues): its queue time counts from there.
   */
  readonly queuedSince?: number;
  /**
   * A padding request of the direct sequence batcher: it runs in the batch, but is no request of
   * a client, so it counts in no request statistic (Triton's null requests).
   */
  readonly padding?: boolean;
}

/** What the engine queues a model's requests on: {@linkcode ModelScheduler}, or the sequence batcher. */
export interface Scheduler {
  /** Requests waiting. */
  readonly queued: number;
  /**
   * Queues a request.
   *
   * @param item The request and where its outcome goes.
   * @throws {InferenceError} When the request cannot be queued.
   */
  submit(item: ScheduledRequest): void;
  /** Refuses new requests from now on. */
  close(): void;
  /** Resolves once no request is queued or running. */
  drain(): Promise<void>;
  /**
   * Fails every queued and running request with `error` and stops timers.
   *
   * @param error What the requests fail with.
   */
  abort(error: InferenceError): void;
}

/** Options of {@linkcode ModelScheduler}. */
export interface ModelSchedulerOptions {
  /** Where to record statistics. */
  stats: ModelStatsRecorder;
  /**
   * Called after a batch failed with a `TritonUnrecoverableError`.
   *
   * @default {undefined}
   */
  onUnrecoverable?: (error: Error) => void;
}

type State = "queued" | "running" | "done";

interface Entry {
  readonly item: ScheduledRequest;
  readonly level: number;
  readonly enqueued: number;
  delayed: boolean;
  state: State;
  dispatched: number;
  timer: ReturnType<typeof setTimeout> | undefined;
  held: (() => void) | undefined;
  onAbort: (() => void) | undefined;
  /** Its slot in the scheduler's active set. */
  slot: number;
}

interface Level {
  readonly policy: ResolvedQueuePolicy;
  readonly queue: Entry[];
  readonly delayed: Entry[];
}

/** How late a Deno timer fires at best, in ms (measured: `setTimeout(f, 0)` takes ~2.2 ms). */
const TIMER_RESOLUTION_MS = 2.5;

const NO_POLICY: ResolvedQueuePolicy = {
  timeoutAction: "REJECT",
  defaultTimeoutMicroseconds: 0,
  allowTimeoutOverride: false,
  maxQueueSize: 0,
};

// The traces of a batch's traced requests; `undefined` (no array) when none is traced.
function tracesOf(batch: readonly Entry[]): RequestTrace[] | undefined {
  let traces: RequestTrace[] | undefined;
  for (const entry of batch) {
    if (entry.item.trace !== undefined) (traces ??= []).push(entry.item.trace);
  }
  return traces;
}

const RESOLVED = Promise.resolve();

/** A batch being formed from the queues, in order (see `#formBatch`). */
interface BatchForm {
  batch: Entry[];
  /** The batch's size: its requests' batch sizes summed. */
  size: number;
  /** The batch's length at its largest preferred size so far (0: none). */
  best: number;
  /** Whether the next queued entry did not fit, or the batch reached the largest size. */
  full: boolean;
}

function isUnrecoverable(error: unknown): error is Error {
  return error instanceof Error && error.name === "TritonUnrecoverableError";
}

function isAlive(instance: ModelInstance): boolean {
  return instance.alive;
}

function isRestarting(instance: ModelInstance): boolean {
  return !instance.alive && !isDown(instance);
}

/**
 * Whether an instance gave up for good (instances without `down` are down when not alive).
 *
 * @param instance The instance.
 * @returns True when no batch will ever run on it again.
 */
export function isDown(instance: ModelInstance): boolean {
  return instance.down ?? !instance.alive;
}

/** The requests of clients in a batch, by their batch sizes (padding is none). */
function inferencesOf(batch: readonly Entry[]): number {
  let count = 0;
  for (const entry of batch) if (!entry.item.padding) count += entry.item.batchSize;
  return count;
}

function remove<T>(list: T[], value: T): boolean {
  const index = list.indexOf(value);
  if (index < 0) return false;
  list.splice(index, 1);
  return true;
}

/**
 * Queues, batches and runs the requests of one model version on its instances.
 *
 * @example Run one request
 * ```ts
 * import { ModelScheduler } from "./scheduler.ts";
 * import { ModelStatsRecorder } from "./statistics.ts";
 * import { MainThreadInstances } from "../../instances/main_thread.ts";
 * import { resolveModelConfig } from "../../config/model_config.ts";
 * import { ndarray } from "../../tensor/ndarray.ts";
 * import assert from "node:assert/strict";
 *
 * const model = {
 *   name: "m", version: 1, strict: false, inputs: [],
 *   outputs: [{ name: "y", dtype: "float64" as const, shape: [1], optional: false }],
 *   config: resolveModelConfig({ batching: false }),
 * };
 * const instances = await new MainThreadInstances([(rs) => rs.map(() => ({ y: ndarray([7]) }))])
 *   .start(model);
 * const scheduler = new ModelScheduler(model, instances, { stats: new ModelStatsRecorder("m", 1) });
 * const controller = new AbortController();
 * const result = await new Promise((resolve, reject) => {
 *   scheduler.submit({
 *     request: { data: {}, parameters: {}, requestedOutputNames: ["y"], signal: controller.signal },
 *     controller, batchSize: 1, shapeKey: "", arrival: performance.now(),
 *     sink: { result: resolve, end() {}, error: reject },
 *   });
 * });
 * assert.deepEqual(Object.keys(result as object), ["y"]);
 * ```
 */
export class ModelScheduler implements Scheduler {
  #model: ModelInfo;
  #instances: readonly ModelInstance[];
  #stats: ModelStatsRecorder;
  #options: ModelSchedulerOptions;
  #levels = new Map<number, Level>();
  #levelOrder: number[];
  #defaultLevel: number;
  #maxBatchSize: number;
  #preferred: Set<number>;
  #maxPreferred: number;
  #delayMs: number;
  #preserveOrdering: boolean;
  // Which instances run a batch, by their place in #instances: a flag, not a Set, as instances
  // come and go with every batch (see slot_set.ts).
  #busy: boolean[];
  #cursor = 0;
  #pumpQueued = false;
  #delayTimer: ReturnType<typeof setTimeout> | undefined;
  #delayImmediate: ReturnType<typeof setImmediate> | undefined;
  // Slots, not a Set: every request comes and goes (see slot_set.ts).
  #active = new SlotSet<Entry>();
  #order: Entry[] = [];
  #closed = false;
  #idleWaiters: (() => void)[] = [];

  /**
   * Creates the scheduler of a loaded model.
   *
   * @param model The model.
   * @param instances Its started instances.
   * @param options Where to record statistics, and the unrecoverable-error hook.
   */
  constructor(
    model: ModelInfo,
    instances: readonly ModelInstance[],
    options: ModelSchedulerOptions,
  ) {
    this.#model = model;
    this.#instances = instances;
    this.#busy = instances.map(() => false);
    this.#stats = options.stats;
    this.#options = options;
    const { config } = model;
    const batcher = config.batcher;
    // Without batching Triton uses its default scheduler: no queue policy, no delay.
    const batching = config.batching && config.maxBatchSize > 0;
    this.#maxBatchSize = batching ? config.maxBatchSize : 1;
    const preferred = batching && batcher.preferredBatchSize.length > 0
      ? batcher.preferredBatchSize
      : [this.#maxBatchSize];
    this.#preferred = new Set(preferred);
    this.#maxPreferred = Math.max(...preferred);
    this.#delayMs = batching ? batcher.maxQueueDelayMicroseconds / 1000 : 0;
    this.#preserveOrdering = batching && batcher.preserveOrdering && !config.decoupled;
    const levels = batching ? batcher.priorityLevels : 0;
    if (levels === 0) {
      this.#levels.set(0, {
        policy: batching ? batcher.defaultQueuePolicy : NO_POLICY,
        queue: [],
        delayed: [],
      });
      this.#defaultLevel = 0;
    } else {
      for (let level = 1; level <= levels; level++) {
        this.#levels.set(level, {
          policy: batcher.priorityQueuePolicy.get(level) ?? batcher.defaultQueuePolicy,
          queue: [],
          delayed: [],
        });
      }
      this.#defaultLevel = batcher.defaultPriorityLevel;
    }
    this.#levelOrder = [...this.#levels.keys()].sort((a, b) => a - b);
  }

  /** Requests waiting in the queues. */
  get queued(): number {
    let count = 0;
    for (const level of this.#levels.values()) count += level.queue.length + level.delayed.length;
    return count;
  }

  /**
   * Queues a request.
   *
   * @param item The request and where its outcome goes.
   * @throws {InferenceError} UNAVAILABLE when closed or the queue is full, CANCELLED when its
   *   signal is already aborted.
   */
  submit(item: ScheduledRequest): void {
    const name = this.#model.name;
    if (this.#closed) {
      throw InferenceError.unavailable(
        `Cannot infer with model '${name}': the model is being unloaded`,
      );
    }
    if (item.signal?.aborted) throw this.#cancelled();
    const priority = item.priority ?? 0;
    const levelNumber = this.#levels.has(priority) && priority > 0 ? priority : this.#defaultLevel;
    const level = this.#levels.get(levelNumber)!;
    const policy = level.policy;
    if (
      policy.maxQueueSize > 0 && level.queue.length + level.delayed.length >= policy.maxQueueSize
    ) {
      throw InferenceError.unavailable(QUEUE_FULL_MESSAGE);
    }
    const entry: Entry = {
      item,
      level: levelNumber,
      enqueued: item.queuedSince ?? performance.now(),
      delayed: false,
      state: "queued",
      dispatched: 0,
      timer: undefined,
      held: undefined,
      onAbort: undefined,
      slot: 0,
    };
    let timeoutUs = policy.defaultTimeoutMicroseconds;
    const asked = item.timeoutMicroseconds ?? 0;
    if (timeoutUs > 0 && policy.allowTimeoutOverride && asked > 0 && asked < timeoutUs) {
      timeoutUs = asked;
    }
    if (timeoutUs > 0) {
      entry.timer = setTimeout(() => this.#expire(entry), timeoutUs / 1000);
    }
    if (item.signal !== undefined) {
      const onAbort = (): void => this.#cancel(entry);
      entry.onAbort = onAbort;
      item.signal.addEventListener("abort", onAbort, { once: true });
    }
    item.trace?.activity("QUEUE_START");
    level.queue.push(entry);
    entry.slot = this.#active.add(entry);
    if (this.#preserveOrdering) this.#order.push(entry);
    this.#schedulePump();
  }

  /** Refuses new requests from now on. */
  close(): void {
    this.#closed = true;
  }

  /**
   * Resolves once no request is queued or running.
   *
   * @returns A promise of the idle scheduler.
   */
  drain(): Promise<void> {
    if (this.#active.size === 0) return Promise.resolve();
    return new Promise((resolve) => this.#idleWaiters.push(resolve));
  }

  /**
   * Fails every queued and running request with `error` and stops timers.
   *
   * @param error What the requests fail with.
   */
  abort(error: InferenceError): void {
    this.#closed = true;
    this.#clearDelay();
    for (const entry of this.#active.values()) {
      if (entry.state === "queued") this.#dequeue(entry);
      entry.item.controller.abort(error);
      this.#finish(entry, false, () => entry.item.sink.error(error));
      this.#recordFailure(entry);
    }
    // Held (ordered) results of finished requests still go out, in order.
    for (const entry of this.#order.splice(0)) entry.held?.();
  }

  /** Every instance gave up: nothing queued will ever run. */
  #failQueued(): void {
    const { name, version } = this.#model;
    const error = InferenceError.unavailable(
      `Model '${name}' version ${version} is not ready: no instance is alive`,
    );
    for (const entry of [...this.#queuedInOrder()]) {
      this.#dequeue(entry);
      this.#recordFailure(entry);
      this.#finish(entry, false, () => entry.item.sink.error(error));
    }
  }

  /** Counts a failed request (padding is no request of a client). */
  #recordFailure(entry: Entry): void {
    if (entry.item.padding) return;
    this.#stats.recordFailure(nsBetween(entry.item.arrival, performance.now()));
  }

  #cancelled(): InferenceError {
    return InferenceError.cancelled(`Request for model '${this.#model.name}' was cancelled`);
  }

  #cancel(entry: Entry): void {
    if (entry.state === "queued") {
      this.#dequeue(entry);
      const error = this.#cancelled();
      entry.item.controller.abort(error);
      this.#recordFailure(entry);
      this.#finish(entry, false, () => entry.item.sink.error(error));
      this.#schedulePump();
    } else if (entry.state === "running") {
      entry.item.controller.abort(this.#cancelled());
    }
  }

  #expire(entry: Entry): void {
    entry.timer = undefined;
    if (entry.state !== "queued" || entry.delayed) return;
    const level = this.#levels.get(entry.level)!;
    if (level.policy.timeoutAction === "DELAY") {
      remove(level.queue, entry);
      entry.delayed = true;
      level.delayed.push(entry);
      return;
    }
    this.#dequeue(entry);
    this.#recordFailure(entry);
    const error = InferenceError.unavailable("Request timeout expired");
    this.#finish(entry, false, () => entry.item.sink.error(error));
    this.#schedulePump();
  }

  #dequeue(entry: Entry): void {
    const level = this.#levels.get(entry.level)!;
    if (!remove(level.queue, entry)) remove(level.delayed, entry);
  }

  /**
   * Marks an entry done and delivers its outcome, in arrival order when ordering is preserved.
   */
  #finish(entry: Entry, ordered: boolean, deliver: () => void): void {
    if (entry.state === "done") return;
    entry.state = "done";
    if (entry.timer !== undefined) clearTimeout(entry.timer);
    entry.timer = undefined;
    if (entry.onAbort !== undefined) {
      entry.item.signal?.removeEventListener("abort", entry.onAbort);
      entry.onAbort = undefined;
    }
    this.#active.delete(entry.slot, entry);
    if (this.#preserveOrdering && ordered) {
      entry.held = deliver;
      while (this.#order.length > 0 && this.#order[0]!.held !== undefined) {
        this.#order.shift()!.held!();
      }
    } else {
      if (this.#preserveOrdering) {
        remove(this.#order, entry);
        while (this.#order.length > 0 && this.#order[0]!.held !== undefined) {
          this.#order.shift()!.held!();
        }
      }
      deliver();
    }
    if (this.#active.size === 0) {
      for (const resolve of this.#idleWaiters.splice(0)) resolve();
    }
  }

  #schedulePump(): void {
    if (this.#pumpQueued) return;
    this.#pumpQueued = true;
    // A microtask lets requests submitted in the same tick join one batch (a promise reaction:
    // `queueMicrotask` costs an op call in Deno).
    RESOLVED.then(this.#pumpTask);
  }

  #pumpTask = (): void => {
    this.#pumpQueued = false;
    this.#pump();
  };

  /** The place in #instances of the instance to run the next batch; -1 when none is free. */
  #idleInstance(): number {
    const count = this.#instances.length;
    // A live instance first; else one that is restarting (its batch waits for the restart,
    // as the core's instance threads do), never one that gave up.
    for (const usable of [isAlive, isRestarting]) {
      for (let step = 0; step < count; step++) {
        const index = (this.#cursor + step) % count;
        const instance = this.#instances[index]!;
        if (usable(instance) && !this.#busy[index]) {
          this.#cursor = (index + 1) % count;
          return index;
        }
      }
    }
    return -1;
  }

  *#queuedInOrder(): Generator<Entry> {
    for (const number of this.#levelOrder) {
      const level = this.#levels.get(number)!;
      yield* level.queue;
      yield* level.delayed;
    }
  }

  /** Picks the next batch, or how long to wait for a better one. */
  #formBatch(now: number): { batch: Entry[]; wait?: number } {
    const form: BatchForm = { batch: [], size: 0, best: 0, full: false };
    for (const number of this.#levelOrder) {
      const level = this.#levels.get(number)!;
      if (this.#fill(form, level.queue) || this.#fill(form, level.delayed)) break;
    }
    const { batch, size, best, full } = form;
    if (batch.length === 0) return { batch };
    let oldest = batch[0]!.enqueued;
    for (const entry of batch) if (entry.enqueued < oldest) oldest = entry.enqueued;
    const waited = now - oldest;
    const delayExceeded = waited >= this.#delayMs;
    if (best > 0 && !delayExceeded) return { batch: batch.slice(0, best) };
    if (full || delayExceeded || size >= this.#maxPreferred) return { batch };
    return { batch: [], wait: this.#delayMs - waited };
  }

  /**
   * Adds a queue's entries, in order, to the batch being formed while they fit.
   *
   * @returns Whether the batch is full (an entry did not fit, or it reached the largest size).
   */
  #fill(form: BatchForm, queue: readonly Entry[]): boolean {
    for (const entry of queue) {
      if (
        form.batch.length > 0 &&
        (entry.item.shapeKey !== form.batch[0]!.item.shapeKey ||
          form.size + entry.item.batchSize > this.#maxBatchSize)
      ) {
        form.full = true;
        return true;
      }
      form.batch.push(entry);
      form.size += entry.item.batchSize;
      if (this.#preferred.has(form.size)) form.best = form.batch.length;
      if (form.size >= this.#maxBatchSize) {
        form.full = true;
        return true;
      }
    }
    return false;
  }

  #clearDelay(): void {
    clearTimeout(this.#delayTimer);
    this.#delayTimer = undefined;
    if (this.#delayImmediate !== undefined) clearImmediate(this.#delayImmediate);
    this.#delayImmediate = undefined;
  }

  /**
   * Re-runs the pump after `wait` ms. Deno timers fire no sooner than ~2 ms (even `setTimeout(f,
   * 0)`), so a sub-millisecond queue delay would cost 2 ms per request: short waits re-check on
   * `setImmediate` instead, which runs after each I/O poll, so requests arriving meanwhile still
   * join the batch. Longer waits sleep until one timer resolution before the deadline, then poll.
   */
  #delayPump(wait: number): void {
    if (wait > TIMER_RESOLUTION_MS) {
      this.#delayTimer = setTimeout(() => this.#pump(), wait - TIMER_RESOLUTION_MS);
    } else {
      this.#delayImmediate = setImmediate(() => this.#pump());
    }
  }

  #pump(): void {
    this.#clearDelay();
    while (true) {
      if (this.queued === 0) return;
      const place = this.#idleInstance();
      if (place < 0) {
        if (this.#instances.every(isDown)) this.#failQueued();
        return;
      }
      // One clock reading per batch formed: it decides the wait, and dates the dispatch and the
      // start of the run (a reading costs as much as a small request's share of a batch).
      const now = performance.now();
      const { batch, wait } = this.#formBatch(now);
      if (wait !== undefined) {
        this.#delayPump(wait);
        return;
      }
      for (const entry of batch) {
        this.#dequeue(entry);
        if (entry.timer !== undefined) clearTimeout(entry.timer);
        entry.timer = undefined;
        entry.state = "running";
        entry.dispatched = now;
      }
      this.#busy[place] = true;
      void this.#dispatch(place, batch, now);
    }
  }

  /** Runs a batch on an instance, which takes the next batch once it is idle. */
  async #dispatch(place: number, batch: Entry[], started: number): Promise<void> {
    const instance = this.#instances[place]!;
    try {
      await this.#run(instance, batch, started);
    } catch {
      // #run delivered the failure to each request.
    }
    try {
      // After a failed batch too, the instance takes no other one until it is idle (a timed-out
      // callable still runs).
      if (instance.idle !== undefined) await instance.idle();
    } finally {
      this.#busy[place] = false;
      this.#schedulePump();
    }
  }

  async #run(instance: ModelInstance, given: Entry[], started: number): Promise<void> {
    // A request of a sequence whose state the instance no longer holds (its Worker crashed)
    // fails alone, as on the core.
    const batch = given.filter((entry) => {
      const sequence = entry.item.request.sequence;
      const refused = sequence?.ready ? instance.sequenceError?.(sequence) : undefined;
      if (refused === undefined) return true;
      this.#recordFailure(entry);
      this.#finish(entry, true, () => entry.item.sink.error(refused));
      return false;
    });
    if (batch.length === 0) return;
    const requests = batch.map((entry) => entry.item.request);
    const batchSize = batch.reduce((sum, entry) => sum + entry.item.batchSize, 0);
    const traces = tracesOf(batch);
    if (traces !== undefined) {
      const place = { instance: instance.index, device: instance.device, batchSize };
      for (const trace of traces) {
        trace.computedOn(place);
        trace.activity("COMPUTE_START");
      }
    }
    // A traced batch runs in its first traced request's compute span (mode opentelemetry), so
    // the callable's own spans are that span's children.
    const span = traces === undefined ? undefined : traces[0]!.callableContext();
    try {
      if (this.#model.config.decoupled) {
        await runInContext(
          span,
          () => this.#runStream(instance, batch, requests, batchSize, started),
        );
        if (traces !== undefined) { for (const trace of traces) trace.activity("COMPUTE_END"); }
        return;
      }
      const inferStart = performance.now();
      if (traces !== undefined) { for (const trace of traces) trace.activity("COMPUTE_INPUT_END"); }
      const results = await runInContext(span, () => instance.execute(requests));
      const inferEnd = performance.now();
      if (traces !== undefined) {
        for (const trace of traces) trace.activity("COMPUTE_OUTPUT_START");
        batch.forEach((entry, index) => {
          const trace = entry.item.trace;
          if (trace?.tensors) traceTensors(trace, "TENSOR_BACKEND_OUTPUT", results[index] ?? {});
          trace?.activity("COMPUTE_END");
        });
      }
      const timings = {
        computeInput: nsBetween(started, inferStart),
        computeInfer: nsBetween(inferStart, inferEnd),
        computeOutput: 0,
      };
      this.#stats.recordExecution(batchSize, timings, inferencesOf(batch));
      // The batch's requests end together, when the callable returned (a clock read per request
      // was a measurable share of a small request's cost).
      const ended = inferEnd;
      batch.forEach((entry, index) => {
        if (entry.state === "done") return;
        if (entry.item.signal?.aborted) {
          const error = this.#cancelled();
          this.#recordFailure(entry);
          this.#finish(entry, true, () => entry.item.sink.error(error));
          return;
        }
        let result: InferResult<AnyTensors>;
        try {
          // Now: the instance is still busy, so a callable's device memory is still valid.
          result = settleDeviceOutputs(results[index]!, entry.item.outputBuffers);
        } catch (error) {
          const failure = toInferenceError(error);
          this.#recordFailure(entry);
          this.#finish(entry, true, () => entry.item.sink.error(failure));
          return;
        }
        if (!entry.item.padding) {
          this.#stats.recordSuccess({
            total: nsBetween(entry.item.arrival, ended),
            queue: nsBetween(entry.enqueued, entry.dispatched),
            computeInput: timings.computeInput,
            computeInfer: timings.computeInfer,
            computeOutput: timings.computeOutput,
          });
        }
        this.#finish(entry, true, () => entry.item.sink.result(result));
      });
    } catch (error) {
      const failure = toInferenceError(error);
      if (traces !== undefined) { for (const trace of traces) trace.activity("COMPUTE_END"); }
      for (const entry of batch) {
        if (entry.state === "done") continue;
        this.#recordFailure(entry);
        this.#finish(entry, true, () => entry.item.sink.error(failure));
      }
      if (isUnrecoverable(error)) this.#options.onUnrecoverable?.(error);
    }
  }

  async #runStream(
    instance: ModelInstance,
    batch: Entry[],
    requests: InferRequest<AnyTensors>[],
    batchSize: number,
    started: number,
  ): Promise<void> {
    let index = 0;
    let last = started;
    for await (const step of instance.stream(requests)) {
      const now = performance.now();
      const delivered: Promise<void>[] = [];
      batch.forEach((entry, at) => {
        if (entry.state === "done") return;
        let result: InferResult<AnyTensors>;
        try {
          // Before the next step is pulled: until then a step's device memory is valid.
          result = settleDeviceOutputs(step[at]!, entry.item.outputBuffers);
        } catch (error) {
          const failure = toInferenceError(error);
          this.#stats.recordFailure(nsBetween(entry.item.arrival, performance.now()));
          this.#finish(entry, false, () => entry.item.sink.error(failure));
          return;
        }
        const room = entry.item.sink.result(result);
        if (room !== undefined) delivered.push(room);
      });
      this.#stats.recordResponse(index++, nsBetween(last, now));
      // The next step waits until every consumer of this batch has room for it.
      if (delivered.length > 0) await Promise.all(delivered);
      last = performance.now();
      // Like the core: once every request is cancelled the stream is not pulled any further
      // (the instance then closes it).
      if (batch.every((entry) => entry.item.controller.signal.aborted)) break;
    }
    const end = performance.now();
    const timings = { computeInput: 0, computeInfer: nsBetween(started, end), computeOutput: 0 };
    this.#stats.recordExecution(batchSize, timings, inferencesOf(batch));
    for (const entry of batch) {
      if (entry.state === "done") continue;
      if (!entry.item.padding) {
        this.#stats.recordSuccess({
          total: nsBetween(entry.item.arrival, end),
          queue: nsBetween(entry.enqueued, entry.dispatched),
          ...timings,
        });
      }
      this.#finish(entry, false, () => entry.item.sink.end());
    }
  }
}
