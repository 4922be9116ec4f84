/**
 * The Accumulator: a stateful model that keeps a running total per sequence. Each request of a
 * sequence (`sequence_id`) adds its `x` to that sequence's total and answers the total so far;
 * a request with `sequence_start` starts from 0, one with `sequence_end` ends the sequence.
 * The total lives in `request.sequence.state`, on the instance that runs the sequence (in its
 * Worker with `workers()`), and is dropped when the sequence ends or goes idle.
 *
 * @module
 */

import {
  type InferFunc,
  ndarray,
  type SequenceBatching,
  sequenceOf,
  type TensorsOf,
  type Triton,
  workers,
} from "../../mod.ts";

/** The input: the number to add. */
export const INPUTS = [{ name: "x", dtype: "int32", shape: [1] }] as const;

/** The output: the sequence's running total. */
export const OUTPUTS = [{ name: "total", dtype: "int32", shape: [1] }] as const;

/** The Accumulator's callable: one running total per sequence. */
export const accumulate: InferFunc<TensorsOf<typeof INPUTS>, TensorsOf<typeof OUTPUTS>> = (
  requests,
) =>
  requests.map((request) => {
    const sequence = sequenceOf<number>(request);
    // The direct strategy pads a batch with not-ready requests: nothing of a sequence to add.
    const total = sequence.ready ? (sequence.state ?? 0) + request.x.data[0]! : 0;
    sequence.state = total;
    return { total: ndarray(Int32Array.of(total), [1, 1]) };
  });

/** Options of {@linkcode bindAccumulator}. */
export interface AccumulatorOptions {
  /**
   * How the sequence batcher batches: see `SequenceBatching.strategy`.
   *
   * @default {"direct"}
   */
  strategy?: "direct" | "oldest";
  /**
   * How long a sequence may go without a request before it is ended, in microseconds.
   *
   * @default {5000000}
   */
  maxSequenceIdleMicroseconds?: number;
  /**
   * Run the callable in this many Deno Workers (`instance.ts`) instead of on the main thread.
   *
   * @default {0}
   */
  workers?: number;
  /**
   * Main-thread instances (when `workers` is 0).
   *
   * @default {1}
   */
  instances?: number;
  /**
   * The largest batch: with `direct`, the slots (sequences running at once) per instance.
   *
   * @default {4}
   */
  maxBatchSize?: number;
}

/**
 * The Accumulator's sequence batching: the given strategy, the idle timeout, and a CORRID
 * control that declares integer correlation IDs (a string ID is refused).
 *
 * @param options The strategy and idle timeout.
 * @returns The `sequenceBatching` config.
 */
export function accumulatorBatching(options: AccumulatorOptions = {}): SequenceBatching {
  return {
    strategy: options.strategy ?? "direct",
    maxSequenceIdleMicroseconds: options.maxSequenceIdleMicroseconds ?? 5_000_000,
    ...(options.strategy === "oldest" ? { maxQueueDelayMicroseconds: 100 } : {}),
    controls: {
      start: { name: "START" },
      ready: { name: "READY" },
      correlationId: { name: "CORRID", dtype: "uint64" },
    },
  };
}

/**
 * Binds the Accumulator on a server.
 *
 * @param triton The server.
 * @param options Strategy, idle timeout, instances.
 * @returns A promise that settles when the model is loaded.
 */
export function bindAccumulator(triton: Triton, options: AccumulatorOptions = {}): Promise<void> {
  const count = options.workers ?? 0;
  return triton.bind({
    modelName: "Accumulator",
    inferFunc: count > 0
      ? workers(new URL("./instance.ts", import.meta.url), { count })
      : Array.from({ length: options.instances ?? 1 }, () => accumulate),
    inputs: INPUTS,
    outputs: OUTPUTS,
    config: {
      maxBatchSize: options.maxBatchSize ?? 4,
      sequenceBatching: accumulatorBatching(options),
    },
    strict: true,
  });
}
