/**
 * Calls from a callable in a Worker to other models of the server (`context.infer`): the Worker
 * posts each call to its instance in the engine's isolate, which runs it on the engine and posts
 * the outputs back. Tensors cross without a copy where they can: the outputs, and inputs the
 * callable built, are moved (transferred: the callable gives them up), a `SharedArrayBuffer` is
 * shared, and an input of the batch that the Worker reads in place in the Triton core's memory
 * travels as that address. The batch's other inputs are copied: the callable keeps them. Steps of a stream are paced by
 * credit, one per step the Worker's consumer took, so a slow consumer slows the model. A Worker's
 * calls end with it: when its thread ends, its instance cancels them.
 *
 * @module
 */

import type { ModelCall, ModelCaller, Tensors } from "../callable/types.ts";
import { InferenceError } from "../errors.ts";
import {
  fromWireError,
  fromWireTensor,
  toNativeWireTensor,
  toWireError,
  toWireTensor,
  type WireTensor,
  zeroCounts,
} from "../isolate/codec.ts";
import { BoundedQueue } from "../streams/bounded_queue.ts";
import type { NDArray } from "../tensor/ndarray.ts";
import { hostTensor } from "../tensor/device_tensor.ts";
import type { CallMessage, FromWorker, ToWorker } from "./worker_protocol.ts";

/** Steps of a stream the engine's side posts before it waits for the Worker's credit. */
export const CALL_STEP_WINDOW = 16;

/** Where a buffer of the Worker lies in the Triton core's memory. */
const nativeBuffers = new WeakMap<ArrayBufferLike, bigint>();
/** Buffers of the batches' inputs, which a call copies rather than takes from the callable. */
const batchBuffers = new WeakSet<ArrayBufferLike>();

/**
 * Records an input of a batch: one at a native address (read in place) is passed on to a call as
 * that address; another is copied, so the callable keeps it.
 *
 * @param array The input.
 * @param address Its address, when it is read in place.
 */
export function rememberInput(array: NDArray, address: bigint | undefined): void {
  if (array.dtype === "bytes") return; // packed afresh for a call in any case
  if (address === undefined) batchBuffers.add(array.data.buffer);
  else nativeBuffers.set(array.data.buffer, address);
}

function packTensors(
  tensors: Tensors,
  transfer: Transferable[],
): Record<string, WireTensor> {
  const counts = zeroCounts();
  const wire: Record<string, WireTensor> = {};
  for (const [name, array] of Object.entries(tensors)) {
    const base = array.dtype === "bytes" ? undefined : nativeBuffers.get(array.data.buffer);
    if (base !== undefined && array.dtype !== "bytes") {
      wire[name] = toNativeWireTensor(array, {
        address: base + BigInt(array.data.byteOffset),
        byteLength: array.data.byteLength,
      }, counts);
    } else if (array.dtype !== "bytes" && batchBuffers.has(array.data.buffer)) {
      wire[name] = toWireTensor(
        { ...array, data: array.data.slice() } as NDArray,
        { transfer, counts },
      );
    } else {
      wire[name] = toWireTensor(array, { transfer, counts });
    }
  }
  return wire;
}

function unpackTensors(wire: Record<string, WireTensor>): Tensors {
  const tensors: Tensors = {};
  for (const [name, tensor] of Object.entries(wire)) {
    tensors[name] = hostTensor(fromWireTensor(tensor), `output '${name}'`);
  }
  return tensors;
}

/** A call the Worker made, waiting for its outcome. */
interface Pending {
  /** A coupled call's outcome. */
  readonly result?: PromiseWithResolvers<Tensors>;
  /** A stream's steps. */
  readonly steps?: BoundedQueue<Tensors>;
}

/**
 * The Worker's side: a {@linkcode ModelCaller} that posts calls to the instance, and what takes
 * the instance's answers.
 */
export class WorkerCaller {
  #post: (message: FromWorker, transfer: Transferable[]) => void;
  #pending = new Map<number, Pending>();
  #nextId = 0;

  /**
   * Creates the Worker's caller.
   *
   * @param post Posts a message to the instance.
   */
  constructor(post: (message: FromWorker, transfer: Transferable[]) => void) {
    this.#post = post;
  }

  /**
   * The caller of one batch's callable.
   *
   * @param batch The batch's id.
   * @returns Its caller.
   */
  forBatch(batch: number): ModelCaller {
    return {
      infer: (call) => this.#infer(batch, call),
      inferStream: (call) => this.#stream(batch, call),
    };
  }

  #send(batch: number, call: ModelCall, stream: boolean, pending: Pending): number {
    const id = this.#nextId++;
    const transfer: Transferable[] = [];
    const { signal, inputs, ...rest } = call;
    const message: CallMessage = {
      type: "call",
      batch,
      call: id,
      stream,
      ...rest,
      inputs: packTensors(inputs, transfer),
    };
    this.#pending.set(id, pending);
    this.#post(message, transfer);
    if (signal !== undefined) {
      const cancel = (): void => {
        if (this.#pending.has(id)) this.#post({ type: "call-cancel", call: id }, []);
      };
      if (signal.aborted) cancel();
      else signal.addEventListener("abort", cancel, { once: true });
    }
    return id;
  }

  #infer(batch: number, call: ModelCall): Promise<Tensors> {
    const result = Promise.withResolvers<Tensors>();
    this.#send(batch, call, false, { result });
    return result.promise;
  }

  #stream(batch: number, call: ModelCall): AsyncIterable<Tensors> {
    let id = -1;
    const steps = new BoundedQueue<Tensors>({
      highWaterMark: CALL_STEP_WINDOW,
      // Leaving the loop early cancels the call.
      cancel: () => {
        if (this.#pending.delete(id)) this.#post({ type: "call-cancel", call: id }, []);
      },
    });
    id = this.#send(batch, call, true, { steps });
    const post = this.#post;
    return {
      async *[Symbol.asyncIterator](): AsyncGenerator<Tensors, void, undefined> {
        for await (const step of steps.readable) {
          // The step is taken: the engine's side may post one more.
          post({ type: "call-credit", call: id, steps: 1 }, []);
          yield step;
        }
      },
    };
  }

  /**
   * Takes the instance's answer to a call.
   *
   * @param message The answer.
   */
  receive(message: Extract<ToWorker, { call: number }>): void {
    const pending = this.#pending.get(message.call);
    if (pending === undefined) return;
    switch (message.type) {
      case "call-result":
        this.#pending.delete(message.call);
        pending.result?.resolve(unpackTensors(message.outputs));
        break;
      case "call-step":
        void pending.steps?.push(unpackTensors(message.outputs));
        break;
      case "call-end":
        this.#pending.delete(message.call);
        pending.steps?.end();
        break;
      case "call-failed": {
        this.#pending.delete(message.call);
        const error = fromWireError(message.error);
        pending.result?.reject(error);
        pending.steps?.fail(error);
        break;
      }
    }
  }
}

/** One call of a Worker, as the engine's side runs it. */
interface Running {
  /** The called model. */
  readonly model: string;
  readonly controller: AbortController;
  /** Steps the Worker may still take. */
  credit: number;
  /** Wakes a stream waiting for credit. */
  wake?: (() => void) | undefined;
  /** Settles with the call. */
  readonly settled: Promise<void>;
}

/**
 * The engine's side, one per Worker: runs the Worker's calls on the engine's caller and posts
 * their outcome, and tells which calls of a batch still run.
 */
export class WorkerCallRunner {
  #caller: ModelCaller | undefined;
  #post: (message: ToWorker, transfer: Transferable[]) => void;
  #running = new Map<number, Running>();
  #byBatch = new Map<number, Set<Running>>();

  /**
   * Creates the runner of one Worker's calls.
   *
   * @param caller The engine's caller; without one, calls fail.
   * @param post Posts a message to the Worker.
   */
  constructor(
    caller: ModelCaller | undefined,
    post: (message: ToWorker, transfer: Transferable[]) => void,
  ) {
    this.#caller = caller;
    this.#post = post;
  }

  /**
   * Takes a message of the Worker about its calls.
   *
   * @param message The message.
   */
  receive(message: Extract<FromWorker, { call: number }>): void {
    switch (message.type) {
      case "call":
        this.#start(message);
        break;
      case "call-cancel": {
        const running = this.#running.get(message.call);
        running?.controller.abort(
          InferenceError.cancelled(`Request for model '${running.model}' was cancelled`),
        );
        break;
      }
      case "call-credit": {
        const running = this.#running.get(message.call);
        if (running === undefined) break;
        running.credit += message.steps;
        running.wake?.();
        break;
      }
    }
  }

  #start(message: CallMessage): void {
    const { type: _, batch, call: id, stream, inputs, ...rest } = message;
    const controller = new AbortController();
    const call: ModelCall = {
      ...rest,
      inputs: unpackTensors(inputs),
      signal: controller.signal,
    };
    const done = Promise.withResolvers<void>();
    const running: Running = {
      model: call.model,
      controller,
      credit: CALL_STEP_WINDOW,
      settled: done.promise,
    };
    // A stream waiting for credit stops waiting.
    controller.signal.addEventListener("abort", () => running.wake?.(), { once: true });
    this.#running.set(id, running);
    let batchCalls = this.#byBatch.get(batch);
    if (batchCalls === undefined) this.#byBatch.set(batch, batchCalls = new Set());
    batchCalls.add(running);
    const work = this.#caller === undefined
      ? Promise.reject(
        InferenceError.unavailable(
          `Cannot call model '${call.model}': the instance's engine runs no calls`,
        ),
      )
      : stream
      ? this.#runStream(id, running, call)
      : this.#caller.infer(call).then((outputs) => {
        const transfer: Transferable[] = [];
        const counts = zeroCounts();
        const wire: Record<string, WireTensor> = {};
        for (const [name, array] of Object.entries(outputs)) {
          // The outputs are the caller's (see `Engine.infer`): moved, not copied.
          wire[name] = toWireTensor(array, { transfer, counts });
        }
        this.#post({ type: "call-result", call: id, outputs: wire }, transfer);
      });
    void work.catch((error) => {
      this.#post({ type: "call-failed", call: id, error: toWireError(error) }, []);
    }).finally(() => {
      this.#running.delete(id);
      batchCalls.delete(running);
      if (batchCalls.size === 0 && this.#byBatch.get(batch) === batchCalls) {
        this.#byBatch.delete(batch);
      }
      done.resolve();
    });
  }

  async #runStream(id: number, running: Running, call: ModelCall): Promise<void> {
    for await (const outputs of this.#caller!.inferStream(call)) {
      while (running.credit <= 0 && !running.controller.signal.aborted) {
        await new Promise<void>((resolve) => running.wake = resolve);
      }
      running.wake = undefined;
      if (running.controller.signal.aborted) break;
      running.credit--;
      const transfer: Transferable[] = [];
      const counts = zeroCounts();
      const wire: Record<string, WireTensor> = {};
      for (const [name, array] of Object.entries(outputs)) {
        wire[name] = toWireTensor(array, { transfer, counts });
      }
      this.#post({ type: "call-step", call: id, outputs: wire }, transfer);
    }
    this.#post({ type: "call-end", call: id }, []);
  }

  /**
   * Resolves once the calls a batch made have settled (they may read its inputs).
   *
   * @param batch The batch's id.
   * @returns A promise of the batch's settled calls.
   */
  async settled(batch: number): Promise<void> {
    const calls = this.#byBatch.get(batch);
    if (calls !== undefined) await Promise.all([...calls].map((call) => call.settled));
  }

  /**
   * Cancels every call (the Worker's thread ended).
   *
   * @param reason Why.
   */
  cancelAll(reason: Error): void {
    for (const running of this.#running.values()) running.controller.abort(reason);
  }
}
