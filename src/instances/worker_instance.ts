/**
 * One model instance in a Deno Worker (see `workers.ts`): the Worker's life from its start to the
 * end of its thread, restarts after a crash or an execution timeout, and the batches it runs. A
 * batch's results come back through a {@linkcode BoundedQueue}; a decoupled batch's Worker posts
 * at most a window of steps more than the consumer took, then waits for credit.
 *
 * Over 500 lines for a reason: a Worker's life and its batches share their state (a batch
 * belongs to a life, and the end of a life fails or settles its batches), so they stay one class.
 *
 * @module
 */

import { BatchGate } from "./_batch_gate.ts";
import type {
  AnyTensors,
  InferRequest,
  InferResult,
  ModelCaller,
  SequenceRequest,
} from "../callable/types.ts";
import { WorkerCallRunner } from "./worker_calls.ts";
import type { SequenceId } from "../config/sequence_batching.ts";
import { SequenceLedger } from "./sequence_states.ts";
import { MessageChannel as WatchChannel, type MessagePort as WatchPort } from "node:worker_threads";
import { InferenceError, messageOf } from "../errors.ts";
import { RingReader, RingWriter } from "../isolate/ring.ts";
import { recordRing } from "../isolate/records.ts";
import { asCopied, LANE_RESULTS, readResults, writeBatch } from "./worker_lane.ts";
import { BoundedQueue } from "../streams/bounded_queue.ts";
import { executionTimeoutError, withDeadline } from "./_deadline.ts";
import { type GpuDevice, parseDevice } from "../gpu/devices.ts";
import type { ModelInstance, NativeLocations } from "./instance.ts";
import { placeInputs } from "./device_inputs.ts";
import { isDeviceTensor } from "../tensor/device_tensor.ts";
import {
  fromWireError,
  fromWireTensor,
  toNativeWireTensor,
  toWireDeviceTensor,
  toWireTensor,
  type WireCounts,
  type WireTensor,
  zeroCounts,
} from "../isolate/codec.ts";
import type { FromWorker, ToWorker, WireRequest, WorkerContext } from "./worker_protocol.ts";
import type { WorkersLogger, WorkersOptions, WorkerTransferStats } from "./workers_options.ts";
import type { ModelInfo } from "../config/model_info.ts";
import type { MetricsBackend } from "../callable/metrics.ts";
import type { OpenTelemetryTraceConfig } from "../config/trace_config.ts";
import { activeTraceparent } from "../telemetry/otel.ts";

const ENTRY = new URL("./worker_main.ts", import.meta.url).href;

/**
 * How many steps of a decoupled batch may be on their way or waiting for the consumer: the
 * Worker pauses its generator once it has posted that many more than the consumer took.
 */
const STEP_WINDOW = 16;

/** What every instance of one provider shares. */
export interface Shared {
  /** The instance module's URL. */
  readonly module: string;
  /** The provider's options. */
  readonly options: WorkersOptions;
  /** Bytes copied and moved so far. */
  readonly stats: WorkerTransferStats;
  /** Where crashes and restarts are logged. */
  readonly logger: WorkersLogger;
}

/** One Worker of an instance, from its start until its thread has ended. */
interface Life {
  readonly worker: Worker;
  /** The main end of the watch channel (see `ToWorker` "init"). */
  readonly watch: WatchPort;
  /** Batches sent to this Worker and not finished by it yet. */
  readonly batches: Set<Batch>;
  /** Whether its thread has ended (or it was terminated). */
  ended: boolean;
  /** Whether it was asked to exit (a timeout, `kill()`), so its end is expected. */
  retiring: boolean;
  /** Settles, once it has ended, like the start of the Worker that replaces it. */
  readonly next: PromiseWithResolvers<void>;
  /** Runs the calls its callable makes to other models. */
  readonly calls: WorkerCallRunner;
  /** The rings' memory, for the Worker's "init" (`worker_lane.ts`). */
  readonly lanes: { readonly toWorker: SharedArrayBuffer; readonly toMain: SharedArrayBuffer };
  /** Its coupled batches, when they fit. */
  readonly batchLane: RingWriter;
  /** Their results. */
  readonly resultLane: RingReader;
}

/** One batch in a Worker. */
interface Batch {
  readonly id: number;
  readonly life: Life;
  /** Its results: one step of a coupled batch, every step of a decoupled one. */
  readonly queue: BoundedQueue<InferResult<AnyTensors>[]>;
  /** Steps received from the Worker. */
  received: number;
  /** Steps the Worker may post in all: what the consumer took, plus the window. */
  granted: number;
  /** Resolves once the Worker is done with the batch: it answered it in full, or it ended. */
  readonly settled: PromiseWithResolvers<void>;
}

/** What a Worker instance passes on about telemetry. */
export interface WorkerTelemetry {
  /** Where the callable's own metrics go. */
  readonly metrics?: MetricsBackend;
  /** The server's OpenTelemetry export. */
  readonly opentelemetry?: OpenTelemetryTraceConfig;
}

/** Where a Worker instance runs and what it passes on. */
export interface WorkerInstanceOptions {
  /** The instance's index within its model. */
  readonly index: number;
  /** Its device name (`cpu`, `gpu0`, ...). */
  readonly device: string;
  /**
   * The GPU it is pinned to.
   *
   * @default {undefined}
   */
  readonly gpu?: GpuDevice | undefined;
  /**
   * The CUDA driver library the Worker makes the GPU current with.
   *
   * @default {undefined}
   */
  readonly cudaDriver?: string | undefined;
  /**
   * What it passes on about telemetry.
   *
   * @default {{}}
   */
  readonly telemetry?: WorkerTelemetry | undefined;
  /**
   * The engine's caller, for the calls of the Worker's callable to other models.
   *
   * @default {undefined}
   */
  readonly caller?: ModelCaller | undefined;
}

function traceparentField(): { traceparent?: string } {
  const traceparent = activeTraceparent();
  return traceparent === undefined ? {} : { traceparent };
}

/**
 * One Worker-backed instance: its Worker's life (start, crash, retire, restart), batches sent to
 * it, and their results on the way back.
 */
export class WorkerInstance implements ModelInstance {
  readonly index: number;
  readonly device: string;
  readonly isolated = true;
  #shared: Shared;
  #model: ModelInfo;
  #life: Life | undefined;
  #alive = false;
  #down = false;
  #disposed = false;
  #attempt = 0;
  #loading: PromiseWithResolvers<void> | undefined;
  /** The next Worker: its predecessor's end, then the restart. */
  #replacing: Promise<void> | undefined;
  #batches = new Map<number, Batch>();
  /** Workers whose thread may still run: the current one and those retiring. */
  #lives = new Set<Life>();
  #nextId = 0;
  #gate = new BatchGate();
  /** The GPU it runs on, and the driver that makes it current in the Worker. */
  #gpu: GpuDevice | undefined;
  #cudaDriver: string | undefined;
  /** The engine's caller, for the calls of the Worker's callable to other models. */
  #caller: ModelCaller | undefined;
  #telemetry: WorkerTelemetry;
  /** The sequences whose state the current Worker holds (a model with sequence batching). */
  #ledger: SequenceLedger;

  /**
   * Describes the instance; {@linkcode WorkerInstance.load} starts its Worker.
   *
   * @param shared What every instance of the provider shares (module, options, stats, logger).
   * @param model The model it serves.
   * @param options Its index and device, its GPU and CUDA driver, telemetry and caller.
   */
  constructor(shared: Shared, model: ModelInfo, options: WorkerInstanceOptions) {
    this.#telemetry = options.telemetry ?? {};
    this.#shared = shared;
    this.#model = model;
    this.index = options.index;
    this.device = options.device;
    this.#gpu = options.gpu;
    this.#cudaDriver = options.cudaDriver;
    this.#caller = options.caller;
    this.#ledger = SequenceLedger.of(model);
  }

  sequenceError(sequence: SequenceRequest): InferenceError | undefined {
    return this.#ledger.check(sequence);
  }

  dropSequences(ids: readonly SequenceId[]): void {
    this.#ledger.drop(ids);
    const life = this.#life;
    if (life !== undefined && !life.ended && !life.retiring) {
      life.worker.postMessage({ type: "drop-sequences", ids } satisfies ToWorker);
    }
  }

  get alive(): boolean {
    return this.#alive;
  }

  get down(): boolean {
    return this.#down;
  }

  idle(): Promise<void> {
    return this.#gate.idle();
  }

  get #label(): string {
    return `Instance ${this.index} (${this.device}) of model '${this.#model.name}'`;
  }

  /** Starts the Worker and loads the instance module; rejects with the load error. */
  load(): Promise<void> {
    const { options, module } = this.#shared;
    const permissions = options.permissions ?? "inherit";
    const worker = new Worker(ENTRY, {
      type: "module",
      name: `${this.#model.name}#${this.index}`,
      ...(permissions === "inherit" ? {} : { deno: { permissions } }),
    });
    const channel = new WatchChannel();
    const lanes = { toWorker: recordRing(), toMain: recordRing() };
    const life: Life = {
      worker,
      watch: channel.port1,
      batches: new Set(),
      ended: false,
      retiring: false,
      next: Promise.withResolvers<void>(),
      calls: new WorkerCallRunner(this.#caller, (message, transfer) => {
        if (!life.ended) worker.postMessage(message, transfer);
      }),
      lanes,
      batchLane: new RingWriter(lanes.toWorker),
      resultLane: new RingReader(lanes.toMain),
    };
    this.#life = life;
    this.#lives.add(life);
    this.#loading = Promise.withResolvers<void>();
    const onRecord = (kind: number, payload: Uint8Array): void => {
      if (kind !== LANE_RESULTS) throw new Error(`Unknown record kind ${kind}`);
      this.#receive(life, readResults(payload));
    };
    const onError = (error: unknown): void =>
      this.#shared.logger.error(`${this.#label}'s results: ${messageOf(error)}`);
    void life.resultLane.pump(onRecord, onError);
    worker.onmessage = (event: MessageEvent<FromWorker>) => {
      // What the Worker wrote to its ring before it posted this comes first.
      life.resultLane.drain(onRecord, onError);
      this.#receive(life, event.data);
    };
    worker.onerror = (event: ErrorEvent) => {
      // Handled here: unhandled, a Worker's error would end the whole process.
      event.preventDefault();
      this.#crashed(life, event.message || "the Worker threw an uncaught error");
    };
    worker.onmessageerror = () => this.#crashed(life, "a message could not be deserialized");
    // Deno reports neither `Deno.exit()` nor `self.close()` in a Worker; the Worker's end of the
    // watch channel closes when its thread ends. An error event, if one comes, names the cause
    // better, so it is given a moment to arrive first.
    life.watch.on("close", () => {
      if (life.ended) return; // closed by #end itself
      setTimeout(() => this.#crashed(life, "it exited (Deno.exit() or close() in the Worker)"), 10);
    });
    // Started (only a started port learns that its other end closed) but not keeping the
    // process alive.
    life.watch.start();
    life.watch.unref();
    const { model } = this;
    const parsed = parseDevice(this.device)!;
    const context: WorkerContext = {
      device: this.device,
      deviceKind: parsed.kind,
      deviceId: parsed.id,
      gpu: this.#gpu,
      instanceIndex: this.index,
      modelName: model.name,
      modelVersion: model.version,
      model,
      attempt: this.#attempt,
      data: options.data,
    };
    const init: ToWorker = {
      type: "init",
      module,
      context,
      watch: channel.port2,
      lanes,
      ...(this.#cudaDriver === undefined ? {} : { cudaDriver: this.#cudaDriver }),
      ...(this.#telemetry.opentelemetry === undefined
        ? {}
        : { opentelemetry: this.#telemetry.opentelemetry }),
    };
    worker.postMessage(init, [channel.port2 as unknown as Transferable]);
    return this.#loading.promise;
  }

  /** The model as the Worker receives it: plain data only. */
  get model(): ModelInfo {
    const { name, version, inputs, outputs, config, strict } = this.#model;
    return { name, version, inputs, outputs, config, strict };
  }

  #receive(life: Life, message: FromWorker): void {
    if (life !== this.#life) return;
    switch (message.type) {
      case "ready":
        this.#alive = true;
        this.#loading?.resolve();
        this.#loading = undefined;
        break;
      case "load-failed": {
        const error = fromWireError(message.error);
        const loading = this.#loading;
        this.#loading = undefined;
        this.#end(life, false);
        loading?.reject(
          InferenceError.internal(
            `${this.#label} failed to load ${this.#shared.module}: ${error.name}: ${error.message}`,
            { cause: error },
          ),
        );
        break;
      }
      case "results": {
        const batch = this.#batches.get(message.id);
        if (batch === undefined) break;
        const { stats } = this.#shared;
        stats.outputCopiedBytes += message.counts.copied;
        stats.outputMovedBytes += message.counts.moved;
        const results = message.results.map((result) =>
          Object.fromEntries(
            Object.entries(result).map(([name, wire]) => [name, fromWireTensor(wire)]),
          )
        );
        batch.received++;
        void batch.queue.push(results);
        if (!this.#model.config.decoupled) this.#finish(batch);
        break;
      }
      case "metric":
        try {
          this.#telemetry.metrics?.apply(message.change);
        } catch (error) {
          this.#shared.logger.error(
            `${this.#label}: cannot change metric '${message.change.family.name}': ${
              (error as Error).message
            }`,
          );
        }
        break;
      case "done": {
        const batch = this.#batches.get(message.id);
        if (batch !== undefined) this.#finish(batch);
        break;
      }
      case "failed": {
        const batch = this.#batches.get(message.id);
        if (batch !== undefined) this.#finish(batch, fromWireError(message.error));
        break;
      }
      case "call":
      case "call-cancel":
      case "call-credit":
        life.calls.receive(message);
        break;
    }
  }

  /**
   * The Worker is done with a batch; it settles once the calls its callable made have too (they
   * may read its inputs).
   */
  #finish(batch: Batch, error?: Error): void {
    this.#batches.delete(batch.id);
    batch.life.batches.delete(batch);
    if (error === undefined) batch.queue.end();
    else batch.queue.fail(error);
    void batch.life.calls.settled(batch.id).then(() => batch.settled.resolve());
  }

  /**
   * A Worker's thread has ended (or it was terminated): its batches fail with `failure` and
   * settle, and, when `restart` is set, the next Worker starts.
   */
  #end(life: Life, restart: boolean, failure?: Error): void {
    if (life.ended) return;
    life.ended = true;
    this.#lives.delete(life);
    life.worker.terminate();
    life.watch.close();
    life.resultLane.close();
    if (life === this.#life) {
      this.#life = undefined;
      this.#alive = false;
    }
    let next: Promise<void> | undefined;
    if (restart && !this.#disposed) next = this.#replacing = this.#restart();
    life.next.resolve(next);
    const error = failure ??
      InferenceError.unavailable(`${this.#label} was stopped`);
    life.calls.cancelAll(error);
    for (const batch of [...life.batches]) this.#finish(batch, error);
  }

  #crashed(life: Life, reason: string): void {
    if (life.ended) return;
    if (life.retiring) {
      // Its end was asked for: the batch failed already, and the next Worker may start now.
      this.#end(life, true);
      return;
    }
    const loading = life === this.#life ? this.#loading : undefined;
    if (loading !== undefined) {
      this.#loading = undefined;
      this.#end(life, false);
      loading.reject(
        InferenceError.internal(`${this.#label} failed to load ${this.#shared.module}: ${reason}`),
      );
      return;
    }
    const message = `${this.#label} crashed: ${reason}`;
    this.#shared.logger.error(message);
    // The Worker took its sequences' states with it.
    if (life === this.#life) {
      this.#ledger.lose(`instance ${this.index} (${this.device}) crashed: ${reason}`);
    }
    this.#end(life, life === this.#life, InferenceError.unavailable(message));
  }

  /**
   * Asks the current Worker to exit and starts the next one once it has: until then the
   * Worker may still be reading a batch's inputs in place, so its batches settle only then.
   * `error` fails its batches at once.
   */
  #retire(reason: string, error: Error): void {
    const life = this.#life;
    if (life === undefined || life.retiring || life.ended) return;
    life.retiring = true;
    this.#life = undefined;
    this.#alive = false;
    this.#shared.logger.error(`${this.#label} ${reason}: restarting it`);
    this.#ledger.lose(`instance ${this.index} (${this.device}) ${reason}`);
    for (const batch of life.batches) batch.queue.fail(error);
    // Not terminate(): only an exit the Worker carries out itself shows when its thread ends
    // (Deno's terminate() does not interrupt synchronous code either).
    life.worker.postMessage({ type: "exit" } satisfies ToWorker);
    this.#replacing = life.next.promise;
  }

  async #restart(): Promise<void> {
    const max = this.#shared.options.maxRestarts ?? 3;
    for (let attempt = 1; attempt <= max && !this.#disposed; attempt++) {
      this.#attempt++;
      try {
        await this.load();
        this.#shared.logger.info(`${this.#label} restarted (attempt ${attempt} of ${max})`);
        return;
      } catch (error) {
        this.#shared.logger.error(
          `${this.#label} failed to restart (attempt ${attempt} of ${max}): ${
            (error as Error).message
          }`,
        );
      }
    }
    this.#down = true;
    if (!this.#disposed) this.#shared.logger.error(`${this.#label} stays down`);
  }

  /** Sends a batch to the Worker (waiting for a pending restart). */
  async #send(
    given: InferRequest<AnyTensors>[],
    native: NativeLocations | undefined,
  ): Promise<Batch> {
    while (!this.#alive && this.#replacing !== undefined && !this.#down) {
      const replacing = this.#replacing;
      await replacing;
      if (this.#replacing === replacing) break;
    }
    const life = this.#life;
    if (!this.#alive || life === undefined) {
      throw InferenceError.unavailable(
        `${this.#label} is not available: ${
          this.#disposed ? "it was stopped" : "its Worker crashed and could not be restarted"
        }`,
      );
    }
    const { worker } = life;
    // Device tensors stay handles for a Worker on their GPU; the others are copied here.
    const requests = placeInputs(given, this.#model, this.#gpu?.index);
    const id = this.#nextId++;
    const transfer: Transferable[] = [];
    const counts: WireCounts = zeroCounts();
    const wire: WireRequest[] = requests.map((request, index) => {
      const data: Record<string, WireTensor> = {};
      const locations = native?.[index];
      for (const [name, array] of Object.entries(request.data)) {
        const location = locations?.[name];
        data[name] = isDeviceTensor(array)
          ? toWireDeviceTensor(array)
          : location !== undefined
          ? toNativeWireTensor(array, location, counts)
          : toWireTensor(array, { transfer, counts });
      }
      request.signal.addEventListener(
        "abort",
        () => {
          if (!life.ended) {
            worker.postMessage({ type: "cancel", id, request: index } satisfies ToWorker);
          }
        },
        { once: true },
      );
      const sequence = request.sequence;
      return {
        data,
        parameters: request.parameters,
        requestedOutputNames: request.requestedOutputNames,
        cancelled: request.signal.aborted,
        ...(request.parent === undefined ? {} : { parent: request.parent }),
        ...(sequence === undefined ? {} : {
          sequence: {
            id: sequence.id,
            start: sequence.start,
            end: sequence.end,
            ready: sequence.ready,
          },
        }),
      };
    });
    const { stats } = this.#shared;
    stats.batches++;
    stats.requests += requests.length;
    const batch: Batch = {
      id,
      life,
      queue: new BoundedQueue<InferResult<AnyTensors>[]>({
        highWaterMark: STEP_WINDOW,
        pull: () => this.#grant(batch),
        // The consumer stopped reading: the Worker ends the stream after its current step.
        cancel: () => {
          if (!life.ended) worker.postMessage({ type: "stop", id } satisfies ToWorker);
        },
      }),
      received: 0,
      granted: STEP_WINDOW,
      settled: Promise.withResolvers<void>(),
    };
    this.#batches.set(id, batch);
    life.batches.add(batch);
    this.#ledger.ran(requests);
    void batch.settled.promise.then(() => this.#ledger.ended(requests));
    const message: Extract<ToWorker, { type: "batch" }> = {
      type: "batch",
      id,
      decoupled: this.#model.config.decoupled,
      requests: wire,
      credit: STEP_WINDOW,
      // The engine runs a traced batch in its compute span's context: the Worker's callable
      // runs under the same span.
      ...(this.#telemetry.opentelemetry === undefined ? {} : traceparentField()),
    };
    const onRing = writeBatch(life.batchLane, message);
    if (!onRing) worker.postMessage(message, transfer);
    const sent = onRing ? asCopied(counts) : counts;
    stats.inputCopiedBytes += sent.copied;
    stats.inputMovedBytes += sent.moved;
    stats.inputNativeBytes += sent.native;
    return batch;
  }

  /**
   * Lets the Worker post as many steps as the consumer took since the last grant, once that is
   * half a window (fewer messages than one per step).
   */
  #grant(batch: Batch | undefined): void {
    if (batch === undefined || batch.life.ended || !this.#model.config.decoupled) return;
    const queued = STEP_WINDOW - batch.queue.desiredSize;
    const steps = batch.received - queued + STEP_WINDOW - batch.granted;
    if (steps < STEP_WINDOW / 2) return;
    batch.granted += steps;
    batch.life.worker.postMessage({ type: "credit", id: batch.id, steps } satisfies ToWorker);
  }

  /** Fails a batch that outlived the execution timeout and replaces its Worker. */
  #timedOut(batch: Batch): Error {
    const error = executionTimeoutError(this.#model, this.index);
    if (batch.life === this.#life) {
      this.#retire(
        `did not finish a batch within its execution timeout of ${this.#model.config.executionTimeoutS} s`,
        error,
      );
    }
    return error;
  }

  async execute(
    requests: InferRequest<AnyTensors>[],
    native?: NativeLocations,
  ): Promise<InferResult<AnyTensors>[]> {
    const release = await this.#gate.acquire();
    let batch: Batch | undefined;
    try {
      batch = await this.#send(requests, native);
      const sent = batch;
      const reader = sent.queue.readable.getReader();
      const step = await withDeadline(
        reader.read(),
        this.#model.config.executionTimeoutS,
        () => this.#timedOut(sent),
      );
      if (step.done) throw InferenceError.internal(`${this.#label} returned no result`);
      return step.value;
    } finally {
      // The gate opens once the Worker is done with the batch, not when its caller gave up.
      if (batch === undefined) release();
      else void batch.settled.promise.then(release);
    }
  }

  async *stream(
    requests: InferRequest<AnyTensors>[],
    native?: NativeLocations,
  ): AsyncIterable<InferResult<AnyTensors>[]> {
    const release = await this.#gate.acquire();
    let batch: Batch | undefined;
    let failed = false;
    const seconds = this.#model.config.executionTimeoutS;
    let reader: ReadableStreamDefaultReader<InferResult<AnyTensors>[]> | undefined;
    try {
      batch = await this.#send(requests, native);
      const sent = batch;
      reader = sent.queue.readable.getReader();
      while (true) {
        const step = await withDeadline(reader.read(), seconds, () => this.#timedOut(sent));
        if (step.done) return;
        yield step.value;
      }
    } catch (error) {
      failed = true;
      throw error;
    } finally {
      if (batch === undefined) {
        release();
      } else {
        const sent = batch;
        void sent.settled.promise.then(release);
        if (!failed && this.#batches.has(sent.id)) {
          // The consumer stopped reading early: cancelling the queue asks the Worker to end the
          // stream after its current step, and the batch (whose inputs it may read in place)
          // stays ours until it has.
          await reader?.cancel();
          await withDeadline(sent.settled.promise, seconds, () => this.#timedOut(sent)).catch(
            () => {},
          );
        }
      }
    }
  }

  /**
   * Stops the Worker as if it had crashed: fails its running batch and restarts it once its
   * thread has ended. For tests and operators that need to recycle an instance.
   */
  kill(): void {
    this.#retire(
      "was killed",
      InferenceError.unavailable(`${this.#label} crashed: it was killed`),
    );
  }

  async [Symbol.asyncDispose](): Promise<void> {
    this.#disposed = true;
    this.#down = true;
    this.#alive = false;
    this.#life = undefined;
    const stopped = InferenceError.unavailable(`${this.#label} was stopped`);
    const lives = [...this.#lives];
    // A Worker that exits by itself shows that its thread has ended, which lets the engine free
    // memory it may read in place; one that has not within a second is terminated, and its
    // batches never settle.
    await Promise.all(lives.map(async (life) => {
      for (const batch of life.batches) batch.queue.fail(stopped);
      life.calls.cancelAll(stopped);
      if (!life.retiring) {
        life.retiring = true;
        life.worker.postMessage({ type: "exit" } satisfies ToWorker);
      }
      let timer: ReturnType<typeof setTimeout> | undefined;
      const grace = new Promise<void>((resolve) => timer = setTimeout(resolve, 1000));
      await Promise.race([life.next.promise, grace]);
      clearTimeout(timer);
      if (life.ended) return;
      life.ended = true;
      this.#lives.delete(life);
      life.worker.terminate();
      life.watch.close();
      life.next.resolve();
    }));
    this.#loading?.reject(stopped);
    this.#loading = undefined;
    await this.#replacing;
  }
}
