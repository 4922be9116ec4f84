/**
 * Private helpers of the decorators: callable normalisation, context checks, request copies,
 * return-value dispatch (value, promise, stream) and per-sample byte keys.
 *
 * @module
 */

import { TritonRuntimeError, TritonValidationError } from "../../errors.ts";
import { serializeBytes } from "../../tensor/bytes_codec.ts";
import { type NDArray, shapeSize, toRawBytes } from "../../tensor/ndarray.ts";
import { inferRequest } from "../request.ts";
import type { InferContext, InferRequest } from "../types.ts";
import type { Callable } from "./types.ts";
import type { ModelInfo } from "../../config/model_info.ts";

/** The key {@linkcode tritonContext} injects into the inputs; never a tensor. */
export const CONTEXT_KEY = "tritonContext";

/** Turns a function or an object with an `infer` method into a function. */
// deno-lint-ignore no-explicit-any
export function toFunction<F extends (...args: any[]) => any>(
  callable: Callable<F>,
  decorator: string,
): F {
  if (typeof callable === "function") return callable;
  if (
    typeof callable === "object" && callable !== null &&
    typeof (callable as { infer?: unknown }).infer === "function"
  ) {
    const object = callable as { infer: F };
    return ((...args: Parameters<F>) => object.infer(...args)) as F;
  }
  throw new TritonValidationError(
    `Cannot decorate with ${decorator}: expected a function or an object with an infer method, got ${
      callable === null ? "null" : typeof callable
    }`,
  );
}

/** The bound model of a call; throws when the callable was called without a context. */
export function requireModel(context: InferContext | undefined, decorator: string): ModelInfo {
  const model = (context as { model?: ModelInfo } | undefined)?.model;
  if (model === undefined || model === null || typeof model !== "object") {
    throw new TritonValidationError(
      `Cannot run ${decorator}: the callable is not bound to a model (no context was given)`,
    );
  }
  return model;
}

/** Throws unless the first argument is a list of requests (the decorator sits above `batch`). */
export function requireRequests(
  value: unknown,
  decorator: string,
): asserts value is InferRequest[] {
  if (!Array.isArray(value)) {
    throw new TritonRuntimeError(
      `Cannot run ${decorator}: it must be used above batch, on the list of requests, but it received an inputs object`,
    );
  }
}

/** Throws unless the first argument is an inputs object (the decorator sits below `batch`). */
export function requireInputs(value: unknown, decorator: string): void {
  if (Array.isArray(value)) {
    throw new TritonRuntimeError(
      `Cannot run ${decorator}: it must be used below batch, on the batched inputs, but it received a list of requests`,
    );
  }
  if (typeof value !== "object" || value === null) {
    throw new TritonRuntimeError(
      `Cannot run ${decorator}: expected an inputs object, got ${
        value === null ? "null" : typeof value
      }`,
    );
  }
}

/** A copy of a request with other input tensors; parameters, requested outputs and signal are kept. */
export function withData(request: InferRequest, data: Record<string, NDArray>): InferRequest {
  return inferRequest(data, request);
}

/** Whether a value is a thenable. */
export function isPromiseLike<T>(value: unknown): value is PromiseLike<T> {
  return typeof value === "object" && value !== null &&
    typeof (value as { then?: unknown }).then === "function";
}

/** Whether a value is a stream: an async iterable, or a sync iterable that is not an array. */
export function isStream(value: unknown): value is Iterable<unknown> | AsyncIterable<unknown> {
  if (typeof value !== "object" || value === null || Array.isArray(value)) return false;
  const candidate = value as { [Symbol.iterator]?: unknown; [Symbol.asyncIterator]?: unknown };
  return typeof candidate[Symbol.asyncIterator] === "function" ||
    typeof candidate[Symbol.iterator] === "function";
}

/**
 * Applies `map` to what a callable returned, keeping its kind: a value stays a value, a promise a
 * promise, a generator a (lazy) generator of mapped steps.
 */
export function mapReturn<T, U>(
  result: unknown,
  map: (value: T) => U,
): U | Promise<U> | Iterable<U> | AsyncIterable<U> {
  if (Array.isArray(result)) return map(result as T);
  if (typeof result === "object" && result !== null) {
    if (typeof (result as AsyncIterable<T>)[Symbol.asyncIterator] === "function") {
      const source = result as AsyncIterable<T>;
      return (async function* (): AsyncGenerator<U> {
        for await (const step of source) yield map(step);
      })();
    }
    if (typeof (result as Iterable<T>)[Symbol.iterator] === "function") {
      const source = result as Iterable<T>;
      return (function* (): Generator<U> {
        for (const step of source) yield map(step);
      })();
    }
    if (isPromiseLike<T>(result)) return Promise.resolve(result).then(map);
  }
  return map(result as T);
}

/** The steps {@linkcode runSequentially} runs: each call, what takes its value, and the end. */
export interface SequentialSteps<T, R> {
  /** Call `index`: a value or a promise of one. */
  readonly call: (index: number) => T | PromiseLike<T>;
  /** Takes call `index`'s (resolved) value, before the next call. */
  readonly collect: (index: number, value: T) => void;
  /** Runs after the last call's value was collected; its value is the result. */
  readonly finish: () => R;
}

/**
 * Runs `count` calls in order, each of which may return a value or a promise; stays synchronous
 * until a call returns a promise, so synchronous callables keep synchronous decorators.
 *
 * @param count How many calls.
 * @param steps Each call, what collects its value, and what finishes.
 * @returns What `finish` returns, or a promise of it once a call returned a promise.
 */
export function runSequentially<T, R>(count: number, steps: SequentialSteps<T, R>): R | Promise<R> {
  const { call, collect, finish } = steps;
  const from = (start: number): R | Promise<R> => {
    for (let index = start; index < count; index++) {
      const value = call(index);
      if (isPromiseLike<T>(value)) {
        return Promise.resolve(value).then((resolved) => {
          collect(index, resolved);
          return from(index + 1);
        });
      }
      collect(index, value);
    }
    return finish();
  };
  return from(0);
}

/** The bytes that identify row `row` of a tensor: raw bytes for numerics, serialized elements for bytes. */
export function rowKey(array: NDArray, row: number): Uint8Array {
  const rowSize = shapeSize(array.shape.slice(1));
  if (array.dtype === "bytes") {
    return serializeBytes(array.data.slice(row * rowSize, (row + 1) * rowSize));
  }
  const raw = toRawBytes(array);
  const rowBytes = rowSize * (raw.byteLength / Math.max(array.data.length, 1));
  return raw.subarray(row * rowBytes, (row + 1) * rowBytes);
}
