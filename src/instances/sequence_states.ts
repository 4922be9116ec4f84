/**
 * The sequences an instance runs, for models with sequence batching. {@linkcode SequenceStates}
 * keeps each sequence's state where the callable runs (the main thread, or the instance's Worker)
 * and hands it to the callable as `request.sequence.state`; {@linkcode SequenceLedger} keeps,
 * beside the engine, which sequences the instance holds, so that a request of a sequence whose
 * state is gone (its Worker crashed, or it timed out) fails alone with the reason instead of
 * running on a state that is not there.
 *
 * @module
 */

import type { Sequence, SequenceRequest } from "../callable/types.ts";
import type { SequenceId } from "../config/sequence_batching.ts";
import type { ModelInfo } from "../config/model_info.ts";
import { InferenceError } from "../errors.ts";

/** What the states read of a request: its sequence (any request type has it). */
interface InSequence {
  readonly sequence?: Sequence | undefined;
}

/** How a correlation ID reads in messages: Triton writes integers bare and strings as they are. */
export function showSequenceId(id: SequenceId): string {
  return typeof id === "bigint" ? id.toString() : id;
}

/**
 * Each sequence's state on one instance.
 *
 * @example A state kept from one batch to the next
 * ```ts
 * import { SequenceStates } from "./sequence_states.ts";
 * import { inferRequest } from "../callable/request.ts";
 * import assert from "node:assert/strict";
 *
 * const states = new SequenceStates();
 * const request = (start: boolean, end: boolean) =>
 *   inferRequest({}, { sequence: { id: 3n, start, end, ready: true, state: undefined } });
 * const [first] = states.attach([request(true, false)]);
 * first!.sequence!.state = 10;
 * states.finish([first!]);
 * const [last] = states.attach([request(false, true)]);
 * assert.equal(last!.sequence!.state, 10);
 * states.finish([last!]);
 * assert.equal(states.size, 0);
 * ```
 */
export class SequenceStates {
  #states = new Map<SequenceId, { value: unknown }>();

  /** How many sequences have a state here. */
  get size(): number {
    return this.#states.size;
  }

  /**
   * The requests as the callable sees them: each `sequence` reads and writes its sequence's
   * state, which a `start` resets.
   *
   * @param requests The batch, as the engine built it.
   * @returns The batch with live sequences.
   */
  attach<R extends InSequence>(requests: readonly R[]): R[] {
    return requests.map((request) => {
      const given = request.sequence;
      return given === undefined ? request : { ...request, sequence: this.#live(given) };
    });
  }

  #live(given: Sequence): Sequence {
    const { id, start, end, ready } = given;
    if (!ready) {
      // Padding of the direct strategy: no sequence's data, so nothing to keep.
      return {
        id,
        start,
        end,
        ready,
        get state(): unknown {
          return undefined;
        },
        set state(_value: unknown) {
          // Nothing to keep for padding.
        },
      };
    }
    let holder = this.#states.get(id);
    if (start || holder === undefined) {
      holder = { value: undefined };
      this.#states.set(id, holder);
    }
    const kept = holder;
    return {
      id,
      start,
      end,
      ready,
      get state(): unknown {
        return kept.value;
      },
      set state(value: unknown) {
        kept.value = value;
      },
    };
  }

  /**
   * After a batch ran (or failed): the states of the sequences it ended are dropped.
   *
   * @param requests The batch.
   */
  finish(requests: readonly InSequence[]): void {
    for (const { sequence } of requests) {
      if (sequence?.ready && sequence.end) this.#states.delete(sequence.id);
    }
  }

  /**
   * Drops the states of sequences that ended without an `end` (idle timeout).
   *
   * @param ids Their correlation IDs.
   */
  drop(ids: readonly SequenceId[]): void {
    for (const id of ids) this.#states.delete(id);
  }
}

/** How many gone sequences a ledger remembers the reason for. */
const REMEMBERED = 1024;

/**
 * Which sequences an instance holds, kept beside the engine (for a Worker instance, in the main
 * isolate): a request that continues a sequence whose state the instance no longer has is refused
 * with the reason.
 *
 * @example A sequence lost in a crash
 * ```ts
 * import { SequenceLedger } from "./sequence_states.ts";
 * import { inferRequest } from "../callable/request.ts";
 * import assert from "node:assert/strict";
 *
 * const ledger = new SequenceLedger("Acc", 1_000_000);
 * const start = { id: 5n, start: true, end: false, ready: true, state: undefined };
 * ledger.ran([inferRequest({}, { sequence: start })]);
 * ledger.lose("instance 0 (cpu) crashed: boom");
 * assert.equal(
 *   ledger.check({ id: 5n, start: false, end: false })?.message,
 *   "Sequence 5 of model 'Acc' was lost: instance 0 (cpu) crashed: boom; start it again (sequence_start)",
 * );
 * assert.equal(ledger.check(start), undefined);
 * ```
 */
export class SequenceLedger {
  #model: string;
  #idleMicroseconds: number;
  #live = new Set<SequenceId>();
  /** Why each sequence that is gone went, the oldest first. */
  #gone = new Map<SequenceId, string>();

  /**
   * Creates an empty ledger.
   *
   * @param model The model's name, for messages.
   * @param idleMicroseconds Its `maxSequenceIdleMicroseconds`, for messages.
   */
  constructor(model: string, idleMicroseconds: number) {
    this.#model = model;
    this.#idleMicroseconds = idleMicroseconds;
  }

  /**
   * Creates an empty ledger for a bound model (its name and idle timeout).
   *
   * @param model The model.
   * @returns The ledger.
   */
  static of(model: ModelInfo): SequenceLedger {
    return new SequenceLedger(
      model.name,
      model.config.sequenceBatching?.maxSequenceIdleMicroseconds ?? 0,
    );
  }

  /**
   * Why a request of `sequence` cannot run here, or `undefined` when it can.
   *
   * @param sequence The request's sequence.
   * @returns The error to fail it with (UNAVAILABLE), or `undefined`.
   */
  check(sequence: SequenceRequest): InferenceError | undefined {
    const { id } = sequence;
    if (sequence.start || this.#live.has(id)) return undefined;
    const reason = this.#gone.get(id);
    // An end request closes the sequence for good: nothing more to tell about it.
    if (sequence.end) this.#gone.delete(id);
    const shown = showSequenceId(id);
    return InferenceError.unavailable(
      reason === undefined
        ? `Sequence ${shown} of model '${this.#model}' has no state on the instance that runs it; start it again (sequence_start)`
        : `Sequence ${shown} of model '${this.#model}' ${reason}; start it again (sequence_start)`,
    );
  }

  /**
   * A batch goes to the instance: its starts hold a sequence from now on.
   *
   * @param requests The batch.
   */
  ran(requests: readonly InSequence[]): void {
    for (const { sequence } of requests) {
      if (sequence?.ready && sequence.start) {
        this.#live.add(sequence.id);
        this.#gone.delete(sequence.id);
      }
    }
  }

  /**
   * A batch is over: the sequences it ended are not held any more.
   *
   * @param requests The batch.
   */
  ended(requests: readonly InSequence[]): void {
    for (const { sequence } of requests) {
      if (sequence?.ready && sequence.end) this.#live.delete(sequence.id);
    }
  }

  /**
   * Sequences that timed out.
   *
   * @param ids Their correlation IDs.
   */
  drop(ids: readonly SequenceId[]): void {
    for (const id of ids) {
      if (!this.#live.delete(id)) continue;
      this.#remember(
        id,
        `timed out: it had no request for ${this.#idleMicroseconds} µs (maxSequenceIdleMicroseconds)`,
      );
    }
  }

  /**
   * The instance lost every state it held (its Worker ended).
   *
   * @param reason What happened, e.g. `instance 0 (cpu) crashed: ...`.
   */
  lose(reason: string): void {
    for (const id of this.#live) this.#remember(id, `was lost: ${reason}`);
    this.#live.clear();
  }

  #remember(id: SequenceId, reason: string): void {
    this.#gone.delete(id);
    this.#gone.set(id, reason);
    if (this.#gone.size > REMEMBERED) this.#gone.delete(this.#gone.keys().next().value!);
  }
}
