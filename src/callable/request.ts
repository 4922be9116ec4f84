/**
 * Building requests as callables see them: with each input also a property of its own
 * (`request.x` beside `request.data.x`), and telling a request apart from a result.
 *
 * @module
 */

import { isNDArray } from "../tensor/ndarray.ts";
import type {
  AnyTensors,
  CallParent,
  InferRequest,
  InferRequestFields,
  ParameterValue,
  Sequence,
  Tensors,
} from "./types.ts";

/** Options of {@linkcode inferRequest}. */
export interface InferRequestOptions {
  /**
   * KServe request parameters (and forwarded headers).
   *
   * @default {{}}
   */
  parameters?: Record<string, ParameterValue>;
  /**
   * The outputs the client asked for.
   *
   * @default {[]}
   */
  requestedOutputNames?: readonly string[];
  /**
   * The request's abort signal.
   *
   * @default {a signal that never aborts}
   */
  signal?: AbortSignal;
  /**
   * The call the request serves, when another model made it.
   *
   * @default {undefined}
   */
  parent?: CallParent;
  /**
   * The request's sequence (a model with sequence batching).
   *
   * @default {undefined}
   */
  sequence?: Sequence;
}

/**
 * Builds a request as a callable receives it, e.g. to unit-test a callable: the inputs are in
 * `data` and, except those named `data`, `parameters`, `requestedOutputNames`, `signal` or
 * `sequence`, also properties of the request itself.
 *
 * @typeParam I The inputs.
 * @param data The input tensors by name (with batching, axis 0 is the request's batch); host
 *   `NDArray`s, or `DeviceTensor`s for inputs declared `deviceTensor: true`.
 * @param options Parameters, requested outputs and signal.
 * @returns The request.
 *
 * @example A request with one input
 * ```ts
 * import { inferRequest, ndarray } from "../../mod.ts";
 * import assert from "node:assert/strict";
 *
 * const request = inferRequest({ x: ndarray(new Float32Array([1, 2]), [1, 2]) }, {
 *   parameters: { scale: 2 },
 * });
 * assert.equal(request.x, request.data.x);
 * assert.deepEqual([...request.x.data], [1, 2]);
 * assert.equal(request.parameters.scale, 2);
 * assert.equal(request.signal.aborted, false);
 * ```
 */
export function inferRequest<I extends AnyTensors>(
  data: I,
  options: InferRequestOptions = {},
): InferRequest<I> {
  // The fields come last so that an input named like one of them stays only in `data`.
  const request: Record<string, unknown> = {
    ...data,
    data,
    parameters: options.parameters ?? {},
    requestedOutputNames: options.requestedOutputNames ?? [],
    signal: options.signal ?? new AbortController().signal,
    // Always set, so that an input named `sequence` is only in `data`, as the type says.
    sequence: options.sequence,
  };
  if (options.parent !== undefined) request["parent"] = options.parent;
  else delete request["parent"]; // an input named `parent` stays only in `data` too
  return request as InferRequest<I>;
}

/**
 * Whether a value is a request (rather than outputs by name): it has an `AbortSignal` as
 * `signal` and an object that is not a tensor as `data`. An output can be neither, since outputs
 * are tensors.
 *
 * @param value A request, or outputs by name.
 * @returns `true` for a request.
 *
 * @example Requests and outputs
 * ```ts
 * import { isInferRequest } from "./request.ts";
 * import { inferRequest, ndarray } from "../../mod.ts";
 * import assert from "node:assert/strict";
 *
 * const x = ndarray([1]);
 * assert.ok(isInferRequest(inferRequest({ x })));
 * assert.ok(!isInferRequest({ x }));
 * assert.ok(!isInferRequest({ data: x }));
 * ```
 */
export function isInferRequest(value: unknown): value is InferRequestFields<Tensors> {
  if (typeof value !== "object" || value === null) return false;
  const candidate = value as { data?: unknown; signal?: unknown };
  return candidate.signal instanceof AbortSignal && typeof candidate.data === "object" &&
    candidate.data !== null && !isNDArray(candidate.data);
}
