/**
 * The sequence of a request, typed for the callable: {@linkcode sequenceOf} reads
 * `request.sequence` with the type of the state the callable keeps per sequence.
 *
 * @module
 */

import { TritonValidationError } from "../errors.ts";
import type { InferRequestFields, Sequence } from "./types.ts";

/**
 * The sequence a request belongs to, with its state typed as `S`: the callable of a model with
 * `sequenceBatching` reads the running value of its sequence and sets the next one, without a map
 * of its own. The state starts `undefined` (a request with `start`), lives on the instance that
 * runs the sequence, and is dropped when the sequence ends or times out.
 *
 * @typeParam S What the callable keeps per sequence.
 * @param request A request the callable received.
 * @returns Its sequence.
 * @throws {TritonValidationError} When the request has none: the model has no sequence batching,
 *   or the request is a warm-up request.
 *
 * @example A running sum per sequence
 * ```ts
 * import { inferRequest, ndarray, type Sequence, sequenceOf } from "../../mod.ts";
 * import assert from "node:assert/strict";
 *
 * const sequence: Sequence = { id: 7n, start: true, end: false, ready: true, state: undefined };
 * const request = inferRequest({ x: ndarray(new Int32Array([5]), [1, 1]) }, { sequence });
 * const running = sequenceOf<number>(request);
 * running.state = (running.state ?? 0) + (request.data.x!.data as Int32Array)[0]!;
 * assert.equal(sequence.state, 5);
 * assert.throws(() => sequenceOf(inferRequest({})), {
 *   message: "Cannot read the sequence of a request: it has none (the model has no sequenceBatching, or this is a warm-up request)",
 * });
 * ```
 */
export function sequenceOf<S>(request: InferRequestFields<unknown>): Sequence<S> {
  const sequence = request.sequence;
  if (sequence === undefined) {
    throw new TritonValidationError(
      "Cannot read the sequence of a request: it has none (the model has no sequenceBatching, or this is a warm-up request)",
    );
  }
  return sequence as Sequence<S>;
}
