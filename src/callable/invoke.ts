/**
 * Calling an inference callable in any of its forms: a function or an object with an `infer`
 * method, returning an array, a Promise, or a (async) generator of steps.
 *
 * @module
 */

import { InferenceError, TritonValidationError } from "../errors.ts";
import { inferRequest } from "./request.ts";
import type {
  AnyTensors,
  InferCallable,
  InferContext,
  InferRequest,
  InferReturn,
} from "./types.ts";

/**
 * Calls a callable once: a function directly, an object through its `infer` method (bound). The
 * callable gets copies of the requests with each input also a property (`request.x`).
 *
 * @param callable A function or an object with an `infer` method.
 * @param requests The batch.
 * @param context The context passed as second argument.
 * @returns Whatever the callable returned.
 * @throws {TritonValidationError} When `callable` is neither form.
 *
 * @example Object form
 * ```ts
 * import { callInfer } from "./invoke.ts";
 * import assert from "node:assert/strict";
 *
 * class Model {
 *   #offset = 1;
 *   infer(requests: unknown[]) {
 *     return requests.map(() => ({ offset: this.#offset }));
 *   }
 * }
 * // deno-lint-ignore no-explicit-any
 * const result = callInfer(new Model() as any, [], {} as any);
 * assert.deepEqual(result, []);
 * ```
 */
export function callInfer(
  callable: InferCallable,
  requests: readonly InferRequest<AnyTensors>[],
  context: InferContext,
): InferReturn {
  if (typeof callable === "function") return callable(withInputProperties(requests), context);
  if (
    typeof callable === "object" && callable !== null &&
    typeof (callable as { infer?: unknown }).infer === "function"
  ) {
    return callable.infer(withInputProperties(requests), context);
  }
  throw new TritonValidationError(
    `Invalid inference callable: expected a function or an object with an infer method, got ${
      describe(callable)
    }`,
  );
}

// Engines build plain requests; the callable's view adds the inputs as properties. The typed
// callable meets the engine's tensors here: an input is a device tensor only where its spec says
// `deviceTensor: true` (the instance placed the others on the host), and such a spec types the
// input `NDArray | DeviceTensor`.
function withInputProperties(requests: readonly InferRequest<AnyTensors>[]): InferRequest[] {
  return requests.map((request) => inferRequest(request.data, request) as InferRequest);
}

function describe(value: unknown): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return "an array";
  return typeof value;
}

function isAsyncIterable(value: unknown): value is AsyncIterable<unknown> {
  return typeof value === "object" && value !== null &&
    typeof (value as { [Symbol.asyncIterator]?: unknown })[Symbol.asyncIterator] === "function";
}

/** A sync iterator that is not a plain array: a generator or a hand-written iterator. */
function isStepIterable(value: unknown): value is Iterable<unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value) &&
    !ArrayBuffer.isView(value) &&
    typeof (value as { [Symbol.iterator]?: unknown })[Symbol.iterator] === "function" &&
    typeof (value as { next?: unknown }).next === "function";
}

function isThenable(value: unknown): value is PromiseLike<unknown> {
  return typeof value === "object" && value !== null &&
    typeof (value as { then?: unknown }).then === "function";
}

/**
 * Runs a callable of a coupled model and returns its single result (not yet validated). A
 * generator must produce exactly one step.
 *
 * @param callable The callable.
 * @param requests The batch.
 * @param context The context.
 * @returns The one result the callable produced.
 * @throws {InferenceError} (INTERNAL) When a generator yields no step or more than one.
 *
 * @example Async function
 * ```ts
 * import { runCoupled } from "./invoke.ts";
 * import assert from "node:assert/strict";
 *
 * import { ndarray } from "../tensor/ndarray.ts";
 *
 * const y = ndarray([1]);
 * // deno-lint-ignore no-explicit-any
 * const result = await runCoupled(async () => [{ y }], [], {} as any);
 * assert.deepEqual(result, [{ y }]);
 * ```
 */
export async function runCoupled(
  callable: InferCallable,
  requests: readonly InferRequest<AnyTensors>[],
  context: InferContext,
): Promise<unknown> {
  let value: unknown = callInfer(callable, requests, context);
  if (isThenable(value)) value = await value;
  if (!isAsyncIterable(value) && !isStepIterable(value)) return value;
  const steps: unknown[] = [];
  const name = context.model?.name;
  const iterator = isAsyncIterable(value)
    ? value[Symbol.asyncIterator]()
    : (value as Iterable<unknown>)[Symbol.iterator]();
  while (true) {
    const next = await iterator.next();
    if (next.done) break;
    steps.push(next.value);
    if (steps.length > 1) {
      await iterator.return?.();
      break;
    }
  }
  if (steps.length !== 1) {
    throw new InferenceError(
      `Invalid result of model '${name}': a coupled model's callable must produce exactly one result, its generator yielded ${
        steps.length === 0 ? "nothing" : "more than one step"
      } (set decoupled: true to stream)`,
      { code: "INTERNAL" },
    );
  }
  return steps[0];
}

/**
 * Runs a callable of a decoupled model, yielding each step (not yet validated). A plain return
 * is one step.
 *
 * @param callable The callable.
 * @param requests The batch.
 * @param context The context.
 * @returns The steps.
 *
 * @example Generator
 * ```ts
 * import { runDecoupled } from "./invoke.ts";
 * import assert from "node:assert/strict";
 *
 * function* gen() {
 *   yield [{ step: 1 }];
 *   yield [{ step: 2 }];
 * }
 * const steps = [];
 * // deno-lint-ignore no-explicit-any
 * for await (const step of runDecoupled(gen as any, [], {} as any)) steps.push(step);
 * assert.equal(steps.length, 2);
 * ```
 */
export async function* runDecoupled(
  callable: InferCallable,
  requests: readonly InferRequest<AnyTensors>[],
  context: InferContext,
): AsyncGenerator<unknown, void, undefined> {
  let value: unknown = callInfer(callable, requests, context);
  if (isThenable(value)) value = await value;
  if (isAsyncIterable(value)) {
    yield* value;
  } else if (isStepIterable(value)) {
    yield* value;
  } else {
    yield value;
  }
}
