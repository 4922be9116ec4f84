/**
 * The sequence rules both engines apply to a request of a model with sequence batching, in
 * Triton's words where Triton has them: the request must name its sequence, with the kind of
 * correlation ID the model declares; and {@linkcode SequenceClock}, the idle timeout both engines
 * keep per sequence (the built-in engine's sequence batcher ends a sequence by it; the Triton
 * engine, whose core ends it by its own clock, drops its state on the instance by it).
 *
 * @module
 */

import type { SequenceRequest } from "../callable/types.ts";
import type { ModelInfo } from "../config/model_info.ts";
import {
  declaredIdKind,
  type ResolvedSequenceBatching,
  type SequenceId,
} from "../config/sequence_batching.ts";
import { InferenceError } from "../errors.ts";
import { configName, kserveName } from "../tensor/dtype.ts";

/**
 * Triton 2.51's core writes a string correlation ID into a CORRID control of 4 + 128 bytes
 * (`STRING_CORRELATION_ID_MAX_LENGTH_BYTES`) whatever its length, so a longer one would be written
 * past its end: such IDs are refused on both engines.
 */
export const MAX_STRING_ID_BYTES = 128;

const encoder = new TextEncoder();

/** Whether a correlation ID names a sequence (`0n` and `""` mean none, as in Triton). */
export function inSequence(id: SequenceId): boolean {
  return id !== 0n && id !== "";
}

/**
 * Checks what a request of a model with sequence batching says of its sequence, before either
 * engine queues it.
 *
 * @param model The model (its `config.sequenceBatching` is set).
 * @param request The request's id (for Triton's message prefix) and sequence.
 * @returns The request's sequence.
 * @throws {InferenceError} INVALID_ARG for a request without a correlation ID (Triton's words),
 *   with the other kind of ID than the model's CORRID control declares (the words of Triton
 *   versions that check it; 2.51's core does not), or with a string ID too long for the control.
 *
 * @example A string ID where the model declares integer IDs
 * ```ts
 * import { checkSequenceRequest } from "./sequences.ts";
 * import { resolveModelConfig } from "../config/model_config.ts";
 * import assert from "node:assert/strict";
 *
 * const model = {
 *   name: "Acc", version: 1, strict: false, inputs: [], outputs: [],
 *   config: resolveModelConfig({
 *     maxBatchSize: 1,
 *     sequenceBatching: { controls: { correlationId: { name: "CORRID", dtype: "uint64" } } },
 *   }),
 * };
 * const sequence = { id: "s1", start: true, end: false };
 * assert.throws(() => checkSequenceRequest(model, { sequence }), {
 *   message: "sequence batching control 'CORRID' data-type is 'BYTES', but model 'Acc' expects 'UINT64'",
 * });
 * assert.throws(() => checkSequenceRequest(model, {}), {
 *   message: "inference request to model 'Acc' must specify a non-zero or non-empty correlation ID",
 * });
 * ```
 */
export function checkSequenceRequest(
  model: ModelInfo,
  request: { readonly id?: string; readonly sequence?: SequenceRequest },
): SequenceRequest {
  const sequence = request.sequence;
  if (sequence === undefined || !inSequence(sequence.id)) {
    throw InferenceError.invalidArg(
      `inference request to model '${model.name}' must specify a non-zero or non-empty correlation ID`,
    );
  }
  const config = model.config.sequenceBatching as ResolvedSequenceBatching;
  const control = config.correlationId;
  const declared = declaredIdKind(config);
  const given = typeof sequence.id === "string" ? "string" : "uint64";
  if (control !== undefined && declared !== given) {
    const prefix = request.id ? `[request id: ${request.id}] ` : "";
    throw InferenceError.invalidArg(
      `${prefix}sequence batching control '${control.name}' data-type is '${
        given === "string" ? "BYTES" : "UINT64"
      }', but model '${model.name}' expects '${kserveName(control.dtype)}'`,
    );
  }
  if (typeof sequence.id === "string" && control !== undefined) {
    const bytes = encoder.encode(sequence.id).byteLength;
    if (bytes > MAX_STRING_ID_BYTES) {
      throw InferenceError.invalidArg(
        `Invalid correlation ID for model '${model.name}': its control '${control.name}' (${
          configName(control.dtype)
        }) holds at most ${MAX_STRING_ID_BYTES} bytes, the ID has ${bytes}`,
      );
    }
  }
  return sequence;
}

/**
 * Triton's error for a request that continues a sequence the scheduler does not know (it never
 * started, it ended, or it timed out).
 *
 * @param model The model's name.
 * @param id The request's correlation ID.
 * @returns The INVALID_ARG error.
 *
 * @example The error for a sequence that was never started
 * ```ts
 * import { unknownSequenceError } from "./sequences.ts";
 * import assert from "node:assert/strict";
 *
 * assert.equal(
 *   unknownSequenceError("Acc", 12n).message,
 *   "inference request for sequence 12 to model 'Acc' must specify the START flag on the first request of the sequence",
 * );
 * ```
 */
export function unknownSequenceError(model: string, id: SequenceId): InferenceError {
  return InferenceError.invalidArg(
    `inference request for sequence ${
      typeof id === "bigint" ? id.toString() : id
    } to model '${model}' must specify the START flag on the first request of the sequence`,
  );
}

/**
 * The idle clocks of a model's sequences: each request of a sequence restarts its clock, and a
 * sequence that goes without one for the idle timeout is reported once (and forgotten). One timer
 * serves every sequence, set for the earliest deadline.
 *
 * @example A sequence that went idle
 * ```ts
 * import { SequenceClock } from "./sequences.ts";
 * import assert from "node:assert/strict";
 *
 * const idle = Promise.withResolvers<readonly (bigint | string)[]>();
 * const clock = new SequenceClock(5, idle.resolve);
 * clock.touch(1n);
 * clock.touch("a");
 * clock.end("a");
 * assert.deepEqual(await idle.promise, [1n]);
 * assert.equal(clock.size, 0);
 * clock.close();
 * ```
 */
export class SequenceClock {
  #idleMs: number;
  #onIdle: (ids: readonly SequenceId[]) => void;
  /** Each running sequence's last request, as `performance.now()`; oldest first. */
  #last = new Map<SequenceId, number>();
  #timer: ReturnType<typeof setTimeout> | undefined;
  #closed = false;

  /**
   * Creates the clocks of one model.
   *
   * @param idleMs The idle timeout, in milliseconds.
   * @param onIdle Receives the sequences that went idle.
   */
  constructor(idleMs: number, onIdle: (ids: readonly SequenceId[]) => void) {
    this.#idleMs = idleMs;
    this.#onIdle = onIdle;
  }

  /** How many sequences have a running clock. */
  get size(): number {
    return this.#last.size;
  }

  /**
   * A request of the sequence arrived: its clock starts over.
   *
   * @param id The correlation ID.
   */
  touch(id: SequenceId): void {
    if (this.#closed) return;
    // Deleted first, so that the map stays in order of the last request.
    this.#last.delete(id);
    this.#last.set(id, performance.now());
    this.#timer ??= setTimeout(() => this.#check(), this.#idleMs);
  }

  /**
   * The sequence ended: its clock stops.
   *
   * @param id The correlation ID.
   */
  end(id: SequenceId): void {
    this.#last.delete(id);
  }

  /** Stops every clock (the model unloads). */
  close(): void {
    this.#closed = true;
    clearTimeout(this.#timer);
    this.#timer = undefined;
    this.#last.clear();
  }

  #check(): void {
    this.#timer = undefined;
    const now = performance.now();
    const idle: SequenceId[] = [];
    for (const [id, last] of this.#last) {
      if (now - last < this.#idleMs) break;
      idle.push(id);
    }
    for (const id of idle) this.#last.delete(id);
    const next = this.#last.values().next();
    if (!next.done) {
      this.#timer = setTimeout(() => this.#check(), Math.max(1, next.value + this.#idleMs - now));
    }
    if (idle.length > 0) this.#onIdle(idle);
  }
}
