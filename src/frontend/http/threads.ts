/**
 * The main isolate's side of the HTTP threads: it starts the Workers (`thread_main.ts`), which
 * alone listen when there are several, so that the main isolate spends its time on the engine and
 * on what they hand over; it shares the engine with them where it can (the Triton core) and
 * detaches them when the engine stops, checks the models they ask about, runs the engine calls
 * they hand over, answers the requests they forward with the main isolate's own handler, keeps
 * their log settings in step, and stops them.
 *
 * @module
 */

import type { Engine, EngineShare, InferenceRequest } from "../../engine/engine.ts";
import { InferenceError, messageOf } from "../../errors.ts";
import { fromWireError, toWireError } from "../../isolate/codec.ts";
import type { Logger } from "../../log.ts";
import { inferModel } from "./routes.ts";
import { SlotMirror } from "../../slot_set.ts";
import { RingReader, RingWriter } from "../../isolate/ring.ts";
import { recordRing } from "../../isolate/records.ts";
import {
  LANE_INFER,
  readInferRequest,
  writeInferFailure,
  writeInferResponse,
} from "./thread_lane.ts";
import {
  type FromThread,
  fromWireInferRequest,
  type ModelRef,
  type ThreadSettings,
  type ToThread,
  toWireInferResponse,
} from "./thread_protocol.ts";

const ENTRY = new URL("./thread_main.ts", import.meta.url).href;

/** What the threads are started with. */
export interface HttpThreadsOptions {
  /** How many Workers. */
  readonly count: number;
  /** Their settings (the port the main isolate bound). */
  readonly settings: ThreadSettings;
  /** The engine the inference requests run on. */
  readonly engine: Engine;
  /** The main isolate's handler, for forwarded requests. */
  readonly handler: (request: Request) => Promise<Response>;
  /** The logger, whose changes reach the threads. */
  readonly logger: Logger;
}

type Step = "detach" | "stop";

/** One HTTP thread and the requests it handed over that are still running. */
class HttpThread {
  readonly index: number;
  readonly worker: Worker;
  // By the thread's ids, in the slots they name: not a Map, which one entry per request churns
  // (see slot_set.ts).
  readonly running = new SlotMirror<AbortController>();
  /** Each step's answer ("detached", "stopped"); a crash answers them all. */
  readonly done: Record<Step, PromiseWithResolvers<void>> = {
    detach: Promise.withResolvers<void>(),
    stop: Promise.withResolvers<void>(),
  };
  /** Resolved once every request the thread submitted to the shared engine is released. */
  readonly released = Promise.withResolvers<void>();
  /** The Worker ended on an uncaught error. */
  crashed = false;
  /** The rings' memory, for the thread's settings. */
  readonly lanes = { toMain: recordRing(), toThread: recordRing() };
  /** The inference requests the thread hands over (`thread_lane.ts`). */
  readonly requests = new RingReader(this.lanes.toMain);
  /** Their answers. */
  readonly answers = new RingWriter(this.lanes.toThread);
  #asked = new Set<Step>();

  constructor(index: number) {
    this.index = index;
    this.worker = new Worker(ENTRY, { type: "module", name: `http${index}` });
  }

  post(message: ToThread, transfer: Transferable[] = []): void {
    this.worker.postMessage(message, transfer);
  }

  /** Asks for a step once, and waits for its answer. */
  take(step: Step): Promise<void> {
    if (!this.#asked.has(step)) {
      this.#asked.add(step);
      this.post({ type: step });
    }
    return this.done[step].promise;
  }
}

/** The HTTP threads: the listeners of an HTTP front end with `threads` above 1. */
export class HttpThreads {
  #threads: HttpThread[] = [];
  #options: HttpThreadsOptions;
  #logSubscription: Disposable;
  #share: EngineShare | undefined;
  #port = 0;
  #stopping: Promise<void> | undefined;

  private constructor(options: HttpThreadsOptions) {
    this.#options = options;
    this.#logSubscription = options.logger.onChange((change) => {
      for (const thread of this.#threads) thread.post({ type: "log-settings", change });
    });
  }

  /**
   * Starts the threads and waits until each listens: the first binds the port (0 picks one), the
   * others then join it.
   *
   * @param options Count, settings, engine, handler and logger.
   * @returns The running threads.
   * @throws {InferenceError} (UNAVAILABLE) When a thread cannot listen; the others are stopped.
   */
  static async start(options: HttpThreadsOptions): Promise<HttpThreads> {
    const running = new HttpThreads(options);
    // The Triton core is shared: the threads submit to it themselves. When it stops, they stop
    // submitting first, and it is deleted only once their requests are released.
    const share = running.#share = options.engine.share?.({
      stop: () => running.#detach(),
      released: () =>
        Promise.all(running.#threads.map((thread) => thread.released.promise)).then(() => {}),
    });
    // Each thread's client of the shared engine is its own (its queue has a signal of its own).
    const settings = (port?: number): ThreadSettings => ({
      ...options.settings,
      ...(share === undefined ? {} : { engine: share.client() }),
      ...(port === undefined ? {} : { port }),
    });
    try {
      running.#port = await running.#startThread(1, settings());
      const others = Array.from(
        { length: options.count - 1 },
        (_, i) => running.#startThread(i + 2, settings(running.#port)),
      );
      const failure = (await Promise.allSettled(others)).find((result) =>
        result.status === "rejected"
      );
      if (failure !== undefined) throw (failure as PromiseRejectedResult).reason;
    } catch (reason) {
      for (const thread of running.#threads) {
        thread.requests.close();
        thread.worker.terminate();
      }
      // Nothing is left to detach or wait for when the engine stops.
      running.#threads = [];
      running.#logSubscription[Symbol.dispose]();
      if (reason instanceof InferenceError) throw reason;
      throw InferenceError.unavailable(
        `Cannot start the HTTP front end's threads: ${messageOf(reason)}`,
        { cause: reason },
      );
    }
    for (const thread of running.#threads) running.#serve(thread);
    return running;
  }

  /** The port the threads listen on. */
  get port(): number {
    return this.#port;
  }

  /** Starts one thread; resolves with the port it listens on. */
  #startThread(index: number, settings: ThreadSettings): Promise<number> {
    const thread = new HttpThread(index);
    this.#threads.push(thread);
    const listening = new Promise<number>((resolve, reject) => {
      thread.worker.onmessage = (event: MessageEvent<FromThread>) => {
        const message = event.data;
        if (message.type === "listening") resolve(message.port);
        else if (message.type === "start-failed") reject(fromWireError(message.error));
        else if (message.type === "log") this.#options.logger.relay(message.level, message.message);
      };
      thread.worker.onerror = (event) => {
        event.preventDefault();
        reject(new Error(`HTTP thread ${index} failed to start: ${event.message}`));
      };
    });
    thread.post({ type: "start", index, settings: { ...settings, lanes: thread.lanes } });
    return listening;
  }

  #serve(thread: HttpThread): void {
    const { logger } = this.#options;
    const onRecord = (kind: number, payload: Uint8Array): void => {
      if (kind !== LANE_INFER) throw new Error(`Unknown record kind ${kind}`);
      const abort = new AbortController();
      const { id, model, request } = readInferRequest(payload, abort.signal);
      this.#infer(thread, id, model, request, abort);
    };
    const onError = (error: unknown): void =>
      logger.error(`HTTP thread ${thread.index}'s requests: ${messageOf(error)}`);
    void thread.requests.pump(onRecord, onError);
    thread.worker.onmessage = (event: MessageEvent<FromThread>) => {
      const message = event.data;
      // What the thread wrote to its ring before it posted this comes first: a "cancel" finds
      // its request running.
      thread.requests.drain(onRecord, onError);
      switch (message.type) {
        case "infer": {
          const abort = new AbortController();
          let request: InferenceRequest;
          try {
            request = fromWireInferRequest(message.request, message.model, abort.signal);
          } catch (error) {
            thread.post({ type: "failed", id: message.id, error: toWireError(error) });
            break;
          }
          this.#infer(thread, message.id, message.model, request, abort);
          break;
        }
        case "check":
          this.#check(thread, message.id, message.model);
          break;
        case "forward":
          this.#forward(thread, message);
          break;
        case "cancel":
          thread.running.get(message.id)?.abort(
            InferenceError.cancelled("The client disconnected"),
          );
          break;
        case "settle":
          this.#share?.settle(message.report);
          break;
        case "detached":
          thread.done.detach.resolve();
          break;
        case "released":
          thread.released.resolve();
          break;
        case "stopped":
          thread.done.stop.resolve();
          break;
        case "log":
          logger.relay(message.level, message.message);
          break;
      }
    };
    thread.worker.onerror = (event) => {
      // The thread logs and survives its own uncaught errors (thread_main.ts); one that still
      // reaches here (its module failed to load, or its error listener threw) ended the Worker:
      // its connections are gone, and the other listeners go on serving the port.
      event.preventDefault();
      logger.error(`HTTP thread ${thread.index} failed and stopped: ${event.message}`);
      for (const abort of thread.running.values()) {
        abort.abort(InferenceError.cancelled("The HTTP thread stopped"));
      }
      // Its requests in the core are never released now: the engine then leaves the core
      // undeleted, as for a batch that never ends.
      thread.crashed = true;
      thread.requests.close();
      thread.done.detach.resolve();
      thread.done.stop.resolve();
    };
  }

  #check(thread: HttpThread, id: number, model: ModelRef): void {
    try {
      const handle = inferModel(this.#options.engine, model.modelName, model.modelVersion);
      thread.post({
        type: "checked",
        id,
        model: {
          outputs: handle.outputs.map((output) => output.name),
          batching: handle.maxBatchSize > 0,
          sequenceBatching: handle.sequenceBatching,
        },
      });
    } catch (error) {
      thread.post({ type: "failed", id, error: toWireError(error) });
    }
  }

  /** Runs a request a thread handed over, and answers it on the ring, or else by a message. */
  async #infer(
    thread: HttpThread,
    id: number,
    model: ModelRef,
    request: InferenceRequest,
    abort: AbortController,
  ): Promise<void> {
    const { engine } = this.#options;
    thread.running.put(id, abort);
    try {
      const handle = inferModel(engine, model.modelName, model.modelVersion);
      const response = await engine.infer(request, handle);
      const batching = handle.maxBatchSize > 0;
      if (!writeInferResponse(thread.answers, id, response, batching)) {
        thread.post({ type: "inferred", id, response: toWireInferResponse(response), batching });
      }
    } catch (error) {
      const wire = toWireError(error);
      if (!writeInferFailure(thread.answers, id, wire)) {
        thread.post({ type: "failed", id, error: wire });
      }
    } finally {
      thread.running.delete(id);
    }
  }

  async #forward(
    thread: HttpThread,
    message: Extract<FromThread, { type: "forward" }>,
  ): Promise<void> {
    const abort = new AbortController();
    thread.running.put(message.id, abort);
    try {
      const request = new Request(message.url, {
        method: message.method,
        headers: message.headers as [string, string][],
        body: message.body,
        signal: abort.signal,
      });
      const response = await this.#options.handler(request);
      const body = response.body;
      thread.post({
        type: "answer",
        id: message.id,
        status: response.status,
        headers: [...response.headers],
        body,
      }, body === null ? [] : [body]);
    } catch (error) {
      // The handler maps its own errors to responses; this is the request failing to build.
      thread.post({ type: "failed", id: message.id, error: toWireError(error) });
    } finally {
      thread.running.delete(message.id);
    }
  }

  /** Makes every thread stop submitting to the shared engine (see `ShareEnd`). */
  #detach(): Promise<void> {
    return Promise.all(this.#threads.map((thread) => thread.take("detach"))).then(() => {});
  }

  /**
   * Stops the threads: each stops listening, finishes its requests in flight (the main isolate
   * keeps running their engine calls meanwhile) and ends. Idempotent.
   */
  stop(): Promise<void> {
    this.#stopping ??= (async () => {
      // A thread that still shares the engine closes its client first.
      await this.#detach();
      await Promise.all(
        this.#threads.filter((thread) => !thread.crashed).map((thread) => thread.released.promise),
      );
      await Promise.all(this.#threads.map((thread) => thread.take("stop")));
      for (const thread of this.#threads) {
        thread.requests.close();
        thread.worker.terminate();
      }
      this.#logSubscription[Symbol.dispose]();
    })();
    return this.#stopping;
  }
}
