/**
 * Calls from a callable to other models of its server (`context.infer`, `context.inferStream`,
 * Triton's business-logic scripting): the context of one batch, which knows who calls (the
 * model's instance, and who waits on the batch's requests) and what cancels a call (the batch's
 * requests), and hands each call to the engine's {@linkcode ModelCaller}. A batch's calls do not
 * outlive it: when the callable is done, the calls it left running are cancelled, and the
 * instance takes no other batch until they have settled (they may read the batch's inputs).
 *
 * @module
 */

import { InferenceError, TritonValidationError } from "../errors.ts";
import type {
  CallFrame,
  CallParent,
  InferCallOptions,
  InferContext,
  InferRequestFields,
  ModelCall,
  ModelCaller,
  ModelRef,
  Tensors,
} from "./types.ts";

/** What an instance knows of itself (its model, index, device, metrics): its context without the calls. */
export type InstanceContext = Omit<InferContext, "infer" | "inferStream">;

/** A batch's context and how to end its calls. */
export interface BatchCalls {
  /** The context the callable receives for the batch. */
  readonly context: InferContext;
  /** Whether the callable made a call (most batches make none: their end needs no wait). */
  called(): boolean;
  /**
   * Cancels the calls still running (the callable is done with the batch) and resolves once
   * every call of the batch has settled.
   */
  settle(): Promise<void>;
}

/** A signal aborted once every one of `signals` is. */
function whenAllAborted(signals: readonly AbortSignal[]): AbortSignal {
  if (signals.length === 1) return signals[0]!;
  const controller = new AbortController();
  const check = (): void => {
    if (signals.every((signal) => signal.aborted)) {
      controller.abort(signals[0]!.reason);
    }
  };
  for (const signal of signals) signal.addEventListener("abort", check, { once: true });
  check();
  return controller.signal;
}

/**
 * The parent of a batch's calls: the instance, and every instance waiting on the batch's
 * requests (each once), outermost first.
 */
function parentOf(
  base: InstanceContext,
  requests: readonly InferRequestFields<unknown>[],
): CallParent {
  const frame: CallFrame = {
    model: base.model.name,
    version: base.model.version,
    instance: base.instanceIndex,
  };
  const waiting: CallFrame[] = [];
  const seen = new Set<string>();
  for (const request of requests) {
    for (const waiter of request.parent?.waiting ?? []) {
      const key = `${waiter.model}\0${waiter.version}\0${waiter.instance}`;
      if (seen.has(key)) continue;
      seen.add(key);
      waiting.push(waiter);
    }
  }
  const parent: CallParent = { ...frame, ensemble: false, waiting: [...waiting, frame] };
  return parent;
}

function notServed(model: string): never {
  throw new TritonValidationError(
    `Cannot call model '${model}': the callable runs outside a server (give inferContext() a caller to test calls)`,
  );
}

function modelNameOf(model: string | ModelRef): string {
  if (typeof model === "string") return model;
  if (typeof model === "object" && model !== null && typeof model.modelName === "string") {
    return model.modelName;
  }
  throw new TritonValidationError(
    "Cannot call a model: name it, or give the options it was bound with",
  );
}

/**
 * Builds the context of one batch: the instance's, with `infer` and `inferStream` calling
 * through `caller`.
 *
 * @param base The instance's model, index and device.
 * @param requests The batch (the requests the engine built: their signals and parents).
 * @param caller The engine's caller; without one (a unit test's context) calls throw.
 * @returns The context, and how to end the batch's calls.
 *
 * @example A call and its parent
 * ```ts
 * import { batchCalls } from "./calls.ts";
 * import { inferRequest } from "./request.ts";
 * import { resolveModelConfig } from "../config/model_config.ts";
 * import { ndarray } from "../tensor/ndarray.ts";
 * import { DISCARDED_METRICS, ModelMetrics } from "./metrics.ts";
 * import type { ModelCall } from "./types.ts";
 * import assert from "node:assert/strict";
 *
 * const seen: ModelCall[] = [];
 * const metrics = new ModelMetrics(DISCARDED_METRICS);
 * const model = { name: "A", version: 1, strict: false, inputs: [], outputs: [], config: resolveModelConfig({}) };
 * const { context, settle } = batchCalls({ model, instanceIndex: 0, device: "cpu", metrics }, [inferRequest({})], {
 *   infer: (call) => { seen.push(call); return Promise.resolve({ y: ndarray([2]) }); },
 *   inferStream: () => { throw new Error("unused"); },
 * });
 * const { y } = await context.infer("B", { x: ndarray([1]) });
 * assert.deepEqual([...y!.data], [2]);
 * assert.deepEqual(seen[0]!.parent.waiting, [{ model: "A", version: 1, instance: 0 }]);
 * await settle();
 * ```
 */
export function batchCalls(
  base: InstanceContext,
  requests: readonly InferRequestFields<unknown>[],
  caller: ModelCaller | undefined,
): BatchCalls {
  // Built at the first call: most batches make none.
  let parent: CallParent | undefined;
  let batchSignal: AbortSignal | undefined;
  // Aborted once the callable is done: calls it left running are cancelled.
  let done: AbortController | undefined;
  let ended = false;
  // Both built at the first call, like the rest: a batch that calls nothing allocates neither.
  let pending: Set<Promise<unknown>> | undefined;
  // Streams being read: closed when the batch is done (a callable may stop reading one).
  let open: Set<() => Promise<void>> | undefined;
  const track = <T>(work: Promise<T>): Promise<T> => {
    pending ??= new Set();
    const settled = work.then(() => {}, () => {});
    pending.add(settled);
    void settled.then(() => pending!.delete(settled));
    return work;
  };
  const callOf = (
    model: string | ModelRef,
    inputs: Tensors,
    options: InferCallOptions & { outputs?: readonly string[] } = {},
  ): ModelCall => {
    const name = modelNameOf(model);
    if (caller === undefined) notServed(name);
    if (ended) {
      throw InferenceError.unavailable(
        `Cannot call model '${name}': the batch of model '${base.model.name}' is done`,
      );
    }
    done ??= new AbortController();
    batchSignal ??= requests.length === 0
      ? new AbortController().signal
      : whenAllAborted(requests.map((request) => request.signal));
    parent ??= parentOf(base, requests);
    const signals = [options.request?.signal ?? batchSignal, done.signal];
    if (options.signal !== undefined) signals.push(options.signal);
    return {
      model: name,
      inputs,
      parameters: options.parameters ?? {},
      signal: AbortSignal.any(signals),
      parent: options.request === undefined ? parent : parentOf(base, [options.request]),
      ...(options.version === undefined ? {} : { version: options.version }),
      ...(options.outputs === undefined ? {} : { outputs: options.outputs }),
      ...(options.priority === undefined ? {} : { priority: options.priority }),
      ...(options.timeoutMicroseconds === undefined
        ? {}
        : { timeoutMicroseconds: options.timeoutMicroseconds }),
      ...(options.id === undefined ? {} : { id: options.id }),
    };
  };
  const infer = (
    model: string | ModelRef,
    inputs: Tensors,
    options?: InferCallOptions,
  ): Promise<Tensors> => {
    try {
      return track(caller!.infer(callOf(model, inputs, options)));
    } catch (error) {
      return Promise.reject(error);
    }
  };
  const inferStream = (
    model: string | ModelRef,
    inputs: Tensors,
    options?: InferCallOptions,
  ): AsyncIterable<Tensors> => ({
    [Symbol.asyncIterator]: () => {
      const steps = caller === undefined
        ? notServed(modelNameOf(model))
        : caller.inferStream(callOf(model, inputs, options))[Symbol.asyncIterator]();
      const ended = Promise.withResolvers<void>();
      open ??= new Set();
      const close = async (): Promise<void> => {
        open!.delete(close);
        try {
          await steps.return?.();
        } finally {
          ended.resolve();
        }
      };
      open.add(close);
      track(ended.promise);
      const finish = <T>(step: IteratorResult<T>): IteratorResult<T> => {
        if (step.done) {
          open!.delete(close);
          ended.resolve();
        }
        return step;
      };
      return {
        next: () =>
          steps.next().then(finish, (error) => {
            open!.delete(close);
            ended.resolve();
            throw error;
          }),
        return: async () => {
          await close();
          return { done: true, value: undefined };
        },
      };
    },
  });
  const context = { ...base, infer, inferStream } as InferContext;
  return {
    context,
    // A method, not a getter: a literal's getter closing over the batch would keep the batch's
    // requests alive until the next full collection (see RequestContext in the HTTP front end).
    called: () => done !== undefined,
    settle: async () => {
      ended = true;
      done?.abort(
        InferenceError.cancelled(
          `The batch of model '${base.model.name}' is done: its calls still running are cancelled`,
        ),
      );
      if (open !== undefined) await Promise.all([...open].map((close) => close().catch(() => {})));
      while (pending !== undefined && pending.size > 0) await Promise.all(pending);
    },
  };
}

/**
 * Ends a batch's calls, then releases the instance: at once when the callable made none (no
 * wait on the hot path), else once they have settled.
 *
 * @param calls The batch's calls.
 * @param release Releases the instance.
 */
export function settleThen(calls: BatchCalls, release: () => void): void {
  const called = calls.called();
  const settled = calls.settle();
  if (called) void settled.finally(release);
  else release();
}
