/**
 * The built-in engine's sequence batcher, modelled on Triton's (`sequence_batch_scheduler.cc`):
 * each sequence (correlation ID) gets a slot of one instance for its life, in the order slots
 * free up (a sequence without a free slot waits in the backlog); its requests run one at a time,
 * in order; a sequence idle for `maxSequenceIdleMicroseconds` is ended and its slot given to the
 * next sequence of the backlog. Requests get the control inputs the model asks for
 * (START/END/READY/CORRID), the implicit states, and `request.sequence`.
 *
 * Each instance has a {@linkcode ModelScheduler} of its own (the one queue type) that runs what
 * the slots release: with the `oldest` strategy it batches the next requests of its sequences as
 * the dynamic batcher does (preferred sizes, queue delay); with `direct` the slots form the batch
 * themselves, one request per slot in slot order, the slots without a ready request padded with a
 * not-ready request, and the next batch forms once that one is done.
 *
 * Over 500 lines for a reason: the slots, the backlog, the idle clock and the two strategies share
 * one state (which sequence holds which slot, what waits where), and every change to it runs the
 * same dispatch.
 *
 * @module
 */

import type {
  AnyTensors,
  InferRequest,
  InferResult,
  SequenceRequest,
} from "../../callable/types.ts";
import type { ModelInfo } from "../../config/model_info.ts";
import type { ResolvedModelConfig } from "../../config/model_config.ts";
import type {
  ResolvedSequenceBatching,
  ResolvedSequenceControl,
  SequenceId,
} from "../../config/sequence_batching.ts";
import { InferenceError } from "../../errors.ts";
import type { ModelInstance } from "../../instances/instance.ts";
import { newTypedArray, type NumericDType } from "../../tensor/dtype.ts";
import { type NDArray, shapeSize } from "../../tensor/ndarray.ts";
import { showSequenceId } from "../../instances/sequence_states.ts";
import { SequenceClock, unknownSequenceError } from "../sequences.ts";
import {
  ModelScheduler,
  type ModelSchedulerOptions,
  type ScheduledRequest,
  type Scheduler,
  type SchedulerSink,
} from "./scheduler.ts";

/** Options of {@linkcode SequenceBatcher}. */
export interface SequenceBatcherOptions extends ModelSchedulerOptions {
  /**
   * Where Triton's warning about a sequence started again while it ran goes.
   *
   * @default {undefined}
   */
  warn?: (message: string) => void;
}

/** A request of a sequence waiting in a slot or in the backlog. */
interface Pending {
  readonly item: ScheduledRequest;
  readonly sequence: SequenceRequest;
  readonly queuedAt: number;
  /** Removes its cancellation listener. */
  forget(): void;
}

/** A slot's queue holds requests, and the reaper's mark that its sequence timed out. */
type Queued = Pending | typeof TIMED_OUT;
const TIMED_OUT = Symbol("timed out");

interface Slot {
  readonly lane: Lane;
  readonly index: number;
  /** The sequence it holds. */
  id: SequenceId | undefined;
  readonly queue: Queued[];
  /** `oldest`: a request of it is in the lane's scheduler. */
  inFlight: boolean;
  /** The implicit states of its sequence, by input name. */
  readonly states: Map<string, NDArray>;
}

/** One instance: its scheduler and slots. */
interface Lane {
  readonly index: number;
  readonly instance: ModelInstance;
  readonly scheduler: ModelScheduler;
  readonly slots: Slot[];
  /** `direct`: requests of the batch it runs that are not done. */
  running: number;
  /** `direct`: waiting for the queue delay. */
  timer: ReturnType<typeof setTimeout> | undefined;
}

/** A sequence waiting for a slot. */
interface Backlog {
  readonly id: SequenceId;
  readonly queue: Pending[];
  /** When its requests' timeouts expire (`performance.now()`), if they have one. */
  expires: number;
  /** Its idle timeout passed while it waited: it ends once its requests ran. */
  idle: boolean;
}

const NO_POLICY = {
  timeoutAction: "REJECT",
  defaultTimeoutMicroseconds: 0,
  allowTimeoutOverride: false,
  maxQueueSize: 0,
} as const;

/** The model as each instance's scheduler sees it: the strategy's batching, no queue policy. */
function laneModel(model: ModelInfo, sequence: ResolvedSequenceBatching): ModelInfo {
  const oldest = sequence.strategy === "oldest";
  const config: ResolvedModelConfig = {
    ...model.config,
    batcher: {
      // `direct` forms its batches itself: they run at once, as formed.
      maxQueueDelayMicroseconds: oldest ? sequence.maxQueueDelayMicroseconds : 0,
      preferredBatchSize: oldest ? sequence.preferredBatchSize : [],
      preserveOrdering: oldest && sequence.preserveOrdering,
      priorityLevels: 0,
      defaultPriorityLevel: 0,
      defaultQueuePolicy: NO_POLICY,
      hasDefaultQueuePolicy: false,
      priorityQueuePolicy: new Map(),
    },
  };
  return { ...model, config };
}

/** A control tensor of one request: shape `[1, 1]` for a batching model, else `[1]`. */
function controlTensor(
  control: ResolvedSequenceControl,
  value: boolean,
  shape: readonly number[],
): NDArray {
  const number = control.falseTrue[value ? 1 : 0];
  const dtype: NumericDType = control.dtype === "bool" ? "bool" : control.dtype;
  return { dtype, shape, data: newTypedArray(dtype, [number]) } as NDArray;
}

const encoder = new TextEncoder();

/** The CORRID control: the ID as the control's dtype holds it (Triton copies its low bytes). */
function correlationIdTensor(
  sequence: ResolvedSequenceBatching,
  id: SequenceId,
  shape: readonly number[],
): NDArray {
  const dtype = sequence.correlationId!.dtype;
  if (dtype === "bytes") {
    return { dtype, shape, data: [encoder.encode(typeof id === "string" ? id : "")] };
  }
  const value = typeof id === "bigint" ? id : 0n;
  switch (dtype) {
    case "uint64":
      return { dtype, shape, data: BigUint64Array.of(value) };
    case "int64":
      return { dtype, shape, data: BigInt64Array.of(BigInt.asIntN(64, value)) };
    case "uint32":
      return { dtype, shape, data: Uint32Array.of(Number(BigInt.asUintN(32, value))) };
    case "int32":
      return { dtype, shape, data: Int32Array.of(Number(BigInt.asIntN(32, value))) };
  }
}

/** A tensor of zeros (empty elements for bytes) of `dtype` and `shape`. */
function zeros(dtype: NDArray["dtype"], shape: readonly number[]): NDArray {
  const count = shapeSize(shape);
  if (dtype === "bytes") {
    return { dtype, shape, data: Array.from({ length: count }, () => new Uint8Array(0)) };
  }
  return { dtype, shape, data: newTypedArray(dtype, count) } as NDArray;
}

/**
 * Runs the requests of a model with sequence batching on its instances (see the module).
 *
 * @example Two sequences on one instance
 * ```ts
 * import { SequenceBatcher } from "./sequence_batcher.ts";
 * import { ModelStatsRecorder } from "./statistics.ts";
 * import { MainThreadInstances } from "../../instances/main_thread.ts";
 * import { resolveModelConfig } from "../../config/model_config.ts";
 * import { ndarray } from "../../tensor/ndarray.ts";
 * import { hostTensor } from "../../tensor/device_tensor.ts";
 * import assert from "node:assert/strict";
 *
 * const model = {
 *   name: "Acc", version: 1, strict: false,
 *   inputs: [{ name: "x", dtype: "int32" as const, shape: [1], optional: false }],
 *   outputs: [{ name: "y", dtype: "int32" as const, shape: [1], optional: false }],
 *   config: resolveModelConfig({ maxBatchSize: 2, sequenceBatching: {} }),
 * };
 * const instances = await new MainThreadInstances([(requests) =>
 *   requests.map((r) => {
 *     const sequence = r.sequence!;
 *     const total = ((sequence.state as number) ?? 0) + ((r.data.x?.data[0] as number) ?? 0);
 *     sequence.state = total;
 *     return { y: ndarray(Int32Array.of(total), [1, 1]) };
 *   })
 * ]).start(model);
 * const batcher = new SequenceBatcher(model, instances, { stats: new ModelStatsRecorder("Acc", 1) });
 * const send = (id: bigint, x: number, start = false, end = false) =>
 *   new Promise<number>((resolve, reject) => {
 *     const controller = new AbortController();
 *     batcher.submit({
 *       request: {
 *         data: { x: ndarray(Int32Array.of(x), [1, 1]) }, parameters: {},
 *         requestedOutputNames: ["y"], signal: controller.signal,
 *       },
 *       sequence: { id, start, end },
 *       controller, batchSize: 1, shapeKey: "x", arrival: performance.now(),
 *       sink: { result: (r) => resolve(hostTensor(r.y!, "y").data[0] as number), end() {}, error: reject },
 *     });
 *   });
 * assert.deepEqual(await Promise.all([send(1n, 1, true), send(2n, 10, true)]), [1, 10]);
 * assert.deepEqual(await Promise.all([send(1n, 2, false, true), send(2n, 20, false, true)]), [3, 30]);
 * await assert.rejects(send(1n, 3), /must specify the START flag/);
 * batcher.abort(new (await import("../../errors.ts")).InferenceError("stopped", { code: "UNAVAILABLE" }));
 * ```
 */
export class SequenceBatcher implements Scheduler {
  #model: ModelInfo;
  #sequence: ResolvedSequenceBatching;
  #options: SequenceBatcherOptions;
  #lanes: Lane[];
  /** Free slots, the lowest slot index first (so sequences spread over the instances). */
  #free: Slot[] = [];
  #assigned = new Map<SequenceId, Slot>();
  #backlog: Backlog[] = [];
  #backlogById = new Map<SequenceId, Backlog>();
  #clock: SequenceClock;
  #expiry: ReturnType<typeof setTimeout> | undefined;
  #closed = false;
  /** Requests of clients submitted and not finished. */
  #active = 0;
  #idleWaiters: (() => void)[] = [];
  #controlShape: readonly number[];
  /** The ID of padding requests: none, of the kind the model's IDs are. */
  #noId: SequenceId;

  /**
   * Creates the sequence batcher of a loaded model.
   *
   * @param model The model (its `config.sequenceBatching` is set).
   * @param instances Its started instances.
   * @param options Where to record statistics, the unrecoverable-error hook and where warnings
   *   go.
   */
  constructor(
    model: ModelInfo,
    instances: readonly ModelInstance[],
    options: SequenceBatcherOptions,
  ) {
    this.#model = model;
    this.#sequence = model.config.sequenceBatching!;
    this.#options = options;
    const lane = laneModel(model, this.#sequence);
    this.#lanes = instances.map((instance, index) => {
      const created: Lane = {
        index,
        instance,
        scheduler: new ModelScheduler(lane, [instance], options),
        slots: [],
        running: 0,
        timer: undefined,
      };
      for (let slot = 0; slot < this.#sequence.slots; slot++) {
        created.slots.push({
          lane: created,
          index: slot,
          id: undefined,
          queue: [],
          inFlight: false,
          states: new Map(),
        });
      }
      return created;
    });
    for (let slot = 0; slot < this.#sequence.slots; slot++) {
      for (const lane of this.#lanes) this.#free.push(lane.slots[slot]!);
    }
    this.#clock = new SequenceClock(
      this.#sequence.maxSequenceIdleMicroseconds / 1000,
      (ids) => this.#reap(ids),
    );
    this.#controlShape = model.config.maxBatchSize > 0 ? [1, 1] : [1];
    this.#noId = this.#sequence.correlationId?.dtype === "bytes" ? "" : 0n;
  }

  /** Requests waiting: in the backlog, in the slots, and in the instances' schedulers. */
  get queued(): number {
    let count = 0;
    for (const backlog of this.#backlog) count += backlog.queue.length;
    for (const lane of this.#lanes) {
      count += lane.scheduler.queued;
      for (const slot of lane.slots) {
        for (const queued of slot.queue) if (queued !== TIMED_OUT) count++;
      }
    }
    return count;
  }

  /**
   * Queues a request of a sequence: in its sequence's slot, in the backlog, or (a new sequence)
   * in a free slot.
   *
   * @param item The request (with its `sequence`, checked by `checkSequenceRequest`).
   * @throws {InferenceError} UNAVAILABLE when closed, CANCELLED when already aborted,
   *   INVALID_ARG for a request that continues a sequence that is not running (Triton's words).
   */
  submit(item: ScheduledRequest): void {
    const { name } = this.#model;
    const sequence = item.sequence!;
    const { id } = sequence;
    if (this.#closed) {
      throw InferenceError.unavailable(
        `Cannot infer with model '${name}': the model is being unloaded`,
      );
    }
    if (item.signal?.aborted) {
      throw InferenceError.cancelled(`Request for model '${name}' was cancelled`);
    }
    let slot = this.#assigned.get(id);
    const backlog = this.#backlogById.get(id);
    if (!sequence.start && slot === undefined && backlog === undefined) {
      throw unknownSequenceError(name, id);
    }
    if (sequence.start && (slot !== undefined || backlog !== undefined)) {
      this.#options.warn?.(
        `sequence ${
          showSequenceId(id)
        } for model '${name}' has a conflict. The previous sequence did not end before this sequence start. Previous sequence will be terminated early.`,
      );
    }
    this.#clock.touch(id);
    const pending = this.#pending(item, sequence);
    this.#active++;
    if (slot !== undefined) {
      slot.queue.push(pending);
      if (sequence.end) this.#assigned.delete(id);
      this.#dispatch(slot.lane);
    } else if (backlog !== undefined) {
      backlog.queue.push(pending);
      this.#expireAt(backlog, item);
      if (sequence.end) this.#backlogById.delete(id);
    } else if ((slot = this.#free.shift()) !== undefined) {
      slot.id = id;
      slot.queue.push(pending);
      if (!sequence.end) this.#assigned.set(id, slot);
      this.#dispatch(slot.lane);
    } else {
      const waiting: Backlog = { id, queue: [pending], expires: Infinity, idle: false };
      this.#expireAt(waiting, item);
      this.#backlog.push(waiting);
      if (!sequence.end) this.#backlogById.set(id, waiting);
    }
  }

  /** Refuses new requests from now on. */
  close(): void {
    this.#closed = true;
  }

  /**
   * Resolves once no request is queued or running.
   *
   * @returns A promise of the idle batcher.
   */
  drain(): Promise<void> {
    if (this.#active === 0) return Promise.resolve();
    return new Promise((resolve) => this.#idleWaiters.push(resolve));
  }

  /**
   * Fails every queued and running request with `error`, and stops the clocks.
   *
   * @param error What the requests fail with.
   */
  abort(error: InferenceError): void {
    this.#closed = true;
    this.#clock.close();
    clearTimeout(this.#expiry);
    for (const backlog of this.#backlog.splice(0)) {
      for (const pending of backlog.queue) this.#fail(pending, error);
    }
    this.#backlogById.clear();
    for (const lane of this.#lanes) {
      clearTimeout(lane.timer);
      for (const slot of lane.slots) {
        for (const queued of slot.queue.splice(0)) {
          if (queued !== TIMED_OUT) this.#fail(queued, error);
        }
      }
      lane.scheduler.abort(error);
    }
  }

  #pending(item: ScheduledRequest, sequence: SequenceRequest): Pending {
    const signal = item.signal;
    const onAbort = (): void => this.#cancel(pending);
    const pending: Pending = {
      item,
      sequence,
      queuedAt: performance.now(),
      forget: () => signal?.removeEventListener("abort", onAbort),
    };
    signal?.addEventListener("abort", onAbort, { once: true });
    return pending;
  }

  /** A request is done: the batcher may be idle now. */
  #settled(): void {
    this.#active--;
    if (this.#active === 0) {
      for (const resolve of this.#idleWaiters.splice(0)) resolve();
    }
  }

  #fail(pending: Pending, error: InferenceError): void {
    pending.forget();
    pending.item.controller.abort(error);
    this.#settled();
    pending.item.sink.error(error);
  }

  /**
   * A request cancelled while it waited: like the core, its whole sequence ends (its slot is
   * freed) and its waiting requests are cancelled.
   */
  #cancel(pending: Pending): void {
    const cancelled = InferenceError.cancelled(
      `Request for model '${this.#model.name}' was cancelled`,
    );
    const backlog = this.#backlog.find((waiting) => waiting.queue.includes(pending));
    if (backlog !== undefined) {
      this.#backlog.splice(this.#backlog.indexOf(backlog), 1);
      if (this.#backlogById.get(backlog.id) === backlog) this.#backlogById.delete(backlog.id);
      for (const waiting of backlog.queue) this.#fail(waiting, cancelled);
      return;
    }
    for (const lane of this.#lanes) {
      for (const slot of lane.slots) {
        if (!slot.queue.includes(pending)) continue;
        for (const queued of slot.queue.splice(0)) {
          if (queued !== TIMED_OUT) this.#fail(queued, cancelled);
        }
        const id = slot.id;
        if (id !== undefined && this.#assigned.get(id) === slot) this.#assigned.delete(id);
        // The instance may hold its state already.
        this.#release(slot, true);
        this.#dispatch(lane);
        return;
      }
    }
  }

  /** The earliest request timeout of a backlogged sequence (Triton rejects it all then). */
  #expireAt(backlog: Backlog, item: ScheduledRequest): void {
    const timeout = item.timeoutMicroseconds ?? 0;
    if (timeout <= 0) return;
    backlog.expires = Math.min(backlog.expires, performance.now() + timeout / 1000);
    this.#scheduleExpiry();
  }

  #scheduleExpiry(): void {
    clearTimeout(this.#expiry);
    this.#expiry = undefined;
    const next = Math.min(...this.#backlog.map((backlog) => backlog.expires));
    if (!Number.isFinite(next)) return;
    this.#expiry = setTimeout(() => {
      this.#expiry = undefined;
      const now = performance.now();
      const expired = this.#backlog.filter((backlog) => backlog.expires <= now);
      const error = InferenceError.unavailable(
        "timeout of the corresponding sequence has been expired",
      );
      for (const backlog of expired) {
        this.#backlog.splice(this.#backlog.indexOf(backlog), 1);
        if (this.#backlogById.get(backlog.id) === backlog) this.#backlogById.delete(backlog.id);
        for (const pending of backlog.queue) this.#fail(pending, error);
      }
      this.#scheduleExpiry();
    }, Math.max(0, next - performance.now()));
  }

  /** Sequences idle for the timeout: their slots are freed once their queued requests ran. */
  #reap(ids: readonly SequenceId[]): void {
    for (const id of ids) {
      const slot = this.#assigned.get(id);
      if (slot !== undefined) {
        this.#assigned.delete(id);
        slot.queue.push(TIMED_OUT);
        this.#dispatch(slot.lane);
        continue;
      }
      // Like the core's reaper: a sequence idle in the backlog is not ended there; it ends once
      // it got a slot and its waiting requests ran.
      const backlog = this.#backlogById.get(id);
      if (backlog !== undefined) backlog.idle = true;
    }
  }

  /**
   * Frees a slot (its sequence ended, timed out or was cancelled) and gives it to the first
   * sequence of the backlog, if one waits.
   */
  #release(slot: Slot, dropState: boolean): void {
    const id = slot.id;
    slot.id = undefined;
    slot.states.clear();
    if (id !== undefined) {
      this.#clock.end(id);
      // An end request drops the instance's state itself; a sequence that ends otherwise does not.
      if (dropState) slot.lane.instance.dropSequences?.([id]);
    }
    const next = this.#backlog.shift();
    if (next === undefined) {
      this.#free.push(slot);
      this.#free.sort((a, b) => a.index - b.index || a.lane.index - b.lane.index);
      return;
    }
    slot.id = next.id;
    slot.queue.push(...next.queue);
    const last = next.queue[next.queue.length - 1]!;
    // The backlog held the sequence's end already, or it keeps sending: then it is this slot's.
    if (!last.sequence.end && this.#backlogById.get(next.id) === next) {
      this.#backlogById.delete(next.id);
      this.#assigned.set(next.id, slot);
    }
    if (next.idle) {
      this.#assigned.delete(next.id);
      slot.queue.push(TIMED_OUT);
    }
    this.#scheduleExpiry();
  }

  /** Hands the lane's instance what its slots have ready, as the strategy says. */
  #dispatch(lane: Lane): void {
    if (this.#sequence.strategy === "oldest") this.#dispatchOldest(lane);
    else this.#dispatchDirect(lane);
  }

  /** `oldest`: the next request of each slot with none in flight joins the lane's scheduler. */
  #dispatchOldest(lane: Lane): void {
    for (const slot of lane.slots) {
      while (!slot.inFlight && slot.queue.length > 0) {
        const next = slot.queue.shift()!;
        if (next === TIMED_OUT) {
          this.#release(slot, true);
          continue;
        }
        slot.inFlight = true;
        this.#run(lane, slot, next, () => {
          slot.inFlight = false;
          this.#dispatch(lane);
        });
        // Once its last request is on its way, the slot may take the next sequence (whose first
        // request waits until this one is done).
        if (next.sequence.end) this.#release(slot, false);
      }
    }
  }

  /**
   * `direct`: once the lane's last batch is done, the slots form the next one: slot order up to
   * the last slot with a request, one request per slot, padding where a slot has none ready (or
   * one whose shapes differ from the first request's).
   */
  #dispatchDirect(lane: Lane): void {
    if (lane.running > 0) return;
    clearTimeout(lane.timer);
    lane.timer = undefined;
    let last = -1;
    let ready = 0;
    let oldest = Infinity;
    for (const slot of lane.slots) {
      while (slot.queue[0] === TIMED_OUT) {
        slot.queue.shift();
        this.#release(slot, true);
      }
      const head = slot.queue[0];
      if (head === undefined) continue;
      last = slot.index;
      ready++;
      oldest = Math.min(oldest, head.queuedAt);
    }
    if (last < 0) return;
    const { maxQueueDelayMicroseconds, minimumSlotUtilization } = this.#sequence;
    if (maxQueueDelayMicroseconds > 0 && minimumSlotUtilization > 0) {
      const waited = performance.now() - oldest;
      const delayMs = maxQueueDelayMicroseconds / 1000;
      if (waited < delayMs && ready / lane.slots.length < minimumSlotUtilization) {
        lane.timer = setTimeout(() => this.#dispatch(lane), delayMs - waited);
        return;
      }
    }
    const representative = lane.slots.find((slot) => slot.queue.length > 0)!
      .queue[0] as Pending;
    const taken: { slot: Slot; pending: Pending | undefined }[] = [];
    for (const slot of lane.slots.slice(0, last + 1)) {
      const head = slot.queue[0];
      const fits = head !== undefined && head !== TIMED_OUT &&
        head.item.shapeKey === representative.item.shapeKey;
      taken.push({ slot, pending: fits ? slot.queue.shift() as Pending : undefined });
    }
    lane.running = taken.length;
    const done = (): void => {
      if (--lane.running === 0) this.#dispatch(lane);
    };
    for (const { slot, pending } of taken) {
      if (pending === undefined) {
        this.#runPadding(lane, representative, done);
        continue;
      }
      this.#run(lane, slot, pending, done);
      if (pending.sequence.end) this.#release(slot, false);
    }
  }

  /** The request as the callable sees it: control inputs, implicit states and its sequence. */
  #callableRequest(
    base: InferRequest<AnyTensors>,
    slot: Slot | undefined,
    sequence: SequenceRequest,
    ready: boolean,
  ): InferRequest<AnyTensors> {
    const config = this.#sequence;
    const shape = this.#controlShape;
    const data = { ...base.data };
    if (config.start) data[config.start.name] = controlTensor(config.start, sequence.start, shape);
    if (config.end) data[config.end.name] = controlTensor(config.end, sequence.end, shape);
    if (config.ready) data[config.ready.name] = controlTensor(config.ready, ready, shape);
    if (config.correlationId) {
      data[config.correlationId.name] = correlationIdTensor(config, sequence.id, shape);
    }
    if (slot !== undefined && sequence.start) slot.states.clear();
    for (const state of config.states) {
      // Variable dims start at 1, as the core's states do.
      const dims = state.shape.map((dim) => dim === -1 ? 1 : dim);
      data[state.inputName] = slot?.states.get(state.inputName) ??
        zeros(state.dtype, this.#model.config.maxBatchSize > 0 ? [1, ...dims] : dims);
    }
    return {
      ...base,
      data,
      sequence: { ...sequence, ready, state: undefined },
    };
  }

  /** Runs one request of a slot on the lane's scheduler; `done` follows its outcome. */
  #run(lane: Lane, slot: Slot, pending: Pending, done: () => void): void {
    pending.forget();
    const { item, sequence } = pending;
    const id = sequence.id;
    const request = this.#callableRequest(item.request, slot, sequence, true);
    const finish = (): void => {
      this.#settled();
      done();
    };
    const sink: SchedulerSink = {
      result: (result: InferResult) => {
        // The next request of the sequence gets the states this one returned.
        if (!sequence.end && slot.id === id) {
          for (const state of this.#sequence.states) {
            const next = result[state.outputName];
            if (next !== undefined) slot.states.set(state.inputName, next);
          }
        }
        const room = item.sink.result(result);
        if (!this.#model.config.decoupled) finish();
        return room;
      },
      end: () => {
        item.sink.end();
        finish();
      },
      error: (error) => {
        item.sink.error(error);
        finish();
      },
    };
    try {
      lane.scheduler.submit({ ...item, request, queuedSince: pending.queuedAt, sink });
    } catch (error) {
      sink.error(error as InferenceError);
    }
  }

  /** A not-ready request for a slot without one ready: the first request's shapes, zeros. */
  #runPadding(lane: Lane, like: Pending, done: () => void): void {
    const data: Record<string, NDArray> = {};
    for (const spec of this.#model.inputs) {
      const array = like.item.request.data[spec.name];
      if (array !== undefined) data[spec.name] = zeros(array.dtype, array.shape);
    }
    const controller = new AbortController();
    const request = this.#callableRequest(
      { data, parameters: {}, requestedOutputNames: [], signal: controller.signal },
      undefined,
      { id: this.#noId, start: false, end: false },
      false,
    );
    const ignore = (): void => done();
    const item: ScheduledRequest = {
      request,
      controller,
      batchSize: like.item.batchSize,
      shapeKey: like.item.shapeKey,
      arrival: performance.now(),
      padding: true,
      sink: {
        result: () => {
          if (!this.#model.config.decoupled) done();
        },
        end: ignore,
        error: ignore,
      },
    };
    try {
      lane.scheduler.submit(item);
    } catch {
      done();
    }
  }
}
