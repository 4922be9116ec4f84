/**
 * Per-model statistics of the built-in engine, kept in Triton's JSON shape.
 *
 * @module
 */

import type { ModelStatistics, StatDuration } from "../engine.ts";

/**
 * Nanoseconds between two `performance.now()` readings, rounded and never negative.
 *
 * @param start The earlier reading, in milliseconds.
 * @param end The later reading, in milliseconds.
 * @returns The duration in nanoseconds.
 *
 * @example Half a millisecond in nanoseconds
 * ```ts
 * import { nsBetween } from "./statistics.ts";
 * import assert from "node:assert/strict";
 *
 * assert.equal(nsBetween(1, 1.5), 500_000);
 * ```
 */
export function nsBetween(start: number, end: number): number {
  return Math.max(0, Math.round((end - start) * 1e6));
}

function duration(): StatDuration {
  return { count: 0, ns: 0 };
}

function add(stat: StatDuration, ns: number): void {
  stat.count += 1;
  stat.ns += ns;
}

/** Per-request timings of a successful inference, in nanoseconds. */
export interface RequestTimings {
  /** Whole request: arrival to response. */
  total: number;
  /** Waiting in the queue. */
  queue: number;
  /** Preparing the inputs. */
  computeInput: number;
  /** Running the callable. */
  computeInfer: number;
  /** Preparing the outputs. */
  computeOutput: number;
}

type ResponseStats = ModelStatistics["response_stats"][string];

/**
 * Accumulates one model version's statistics.
 *
 * @example Count one success
 * ```ts
 * import { ModelStatsRecorder } from "./statistics.ts";
 * import assert from "node:assert/strict";
 *
 * const stats = new ModelStatsRecorder("m", 1);
 * stats.recordExecution(2, { computeInput: 1, computeInfer: 10, computeOutput: 1 });
 * stats.recordSuccess({ total: 20, queue: 8, computeInput: 1, computeInfer: 10, computeOutput: 1 });
 * const json = stats.snapshot();
 * assert.equal(json.inference_count, 2);
 * assert.equal(json.execution_count, 1);
 * assert.deepEqual(json.inference_stats.success, { count: 1, ns: 20 });
 * assert.equal(json.batch_stats[0]!.batch_size, 2);
 * ```
 */
export class ModelStatsRecorder {
  #name: string;
  #version: string;
  #lastInference = 0;
  #inferenceCount = 0;
  #executionCount = 0;
  #inference = {
    success: duration(),
    fail: duration(),
    queue: duration(),
    compute_input: duration(),
    compute_infer: duration(),
    compute_output: duration(),
    cache_hit: duration(),
    cache_miss: duration(),
  };
  #batches = new Map<number, {
    compute_input: StatDuration;
    compute_infer: StatDuration;
    compute_output: StatDuration;
  }>();
  #responses = new Map<number, ResponseStats>();

  /**
   * Creates an empty recorder.
   *
   * @param name Model name.
   * @param version Model version.
   */
  constructor(name: string, version: number) {
    this.#name = name;
    this.#version = String(version);
  }

  /**
   * Records a successful request.
   *
   * @param timings Its timings in nanoseconds.
   */
  recordSuccess(timings: RequestTimings): void {
    const s = this.#inference;
    add(s.success, timings.total);
    add(s.queue, timings.queue);
    add(s.compute_input, timings.computeInput);
    add(s.compute_infer, timings.computeInfer);
    add(s.compute_output, timings.computeOutput);
    this.#lastInference = Date.now();
  }

  /**
   * Records a failed request.
   *
   * @param totalNs Time from arrival to the failure.
   */
  recordFailure(totalNs: number): void {
    add(this.#inference.fail, totalNs);
    this.#lastInference = Date.now();
  }

  /**
   * Records one execution (batch) of the model.
   *
   * @param batchSize Sum of the batch sizes of its requests.
   * @param timings Its compute timings in nanoseconds.
   * @param inferences The part of `batchSize` that clients sent: Triton's `inference_count` leaves
   *   out the padding of the direct sequence batcher, which `batch_stats` counts.
   */
  recordExecution(
    batchSize: number,
    timings: Pick<RequestTimings, "computeInput" | "computeInfer" | "computeOutput">,
    inferences: number = batchSize,
  ): void {
    this.#executionCount += 1;
    this.#inferenceCount += inferences;
    let entry = this.#batches.get(batchSize);
    if (entry === undefined) {
      entry = { compute_input: duration(), compute_infer: duration(), compute_output: duration() };
      this.#batches.set(batchSize, entry);
    }
    add(entry.compute_input, timings.computeInput);
    add(entry.compute_infer, timings.computeInfer);
    add(entry.compute_output, timings.computeOutput);
  }

  /**
   * Records a response-cache hit, which also counts as a success.
   *
   * @param lookupNs Time of the lookup.
   * @param totalNs Time from arrival to the response.
   */
  recordCacheHit(lookupNs: number, totalNs: number): void {
    add(this.#inference.cache_hit, lookupNs);
    add(this.#inference.success, totalNs);
    add(this.#inference.queue, 0);
    this.#lastInference = Date.now();
  }

  /**
   * Records a response-cache miss.
   *
   * @param ns Time of the lookup and insertion.
   */
  recordCacheMiss(ns: number): void {
    add(this.#inference.cache_miss, ns);
  }

  /**
   * Records one successful response of a decoupled request. The scheduler records no other kind,
   * so the `fail`, `empty_response` and `cancel` counts keep Triton's shape at zero.
   *
   * @param index Response index within its request, from 0.
   * @param inferNs Time spent producing it.
   */
  recordResponse(index: number, inferNs: number): void {
    let entry = this.#responses.get(index);
    if (entry === undefined) {
      entry = {
        compute_infer: duration(),
        compute_output: duration(),
        success: duration(),
        fail: duration(),
        empty_response: duration(),
        cancel: duration(),
      };
      this.#responses.set(index, entry);
    }
    add(entry.compute_infer, inferNs);
    add(entry.compute_output, 0);
    add(entry.success, inferNs);
  }

  /**
   * The statistics in Triton's JSON shape (a copy).
   *
   * @returns One `model_stats` entry.
   */
  snapshot(): ModelStatistics {
    const copy = (stat: StatDuration): StatDuration => ({ ...stat });
    const s = this.#inference;
    return {
      name: this.#name,
      version: this.#version,
      last_inference: this.#lastInference,
      inference_count: this.#inferenceCount,
      execution_count: this.#executionCount,
      inference_stats: {
        success: copy(s.success),
        fail: copy(s.fail),
        queue: copy(s.queue),
        compute_input: copy(s.compute_input),
        compute_infer: copy(s.compute_infer),
        compute_output: copy(s.compute_output),
        cache_hit: copy(s.cache_hit),
        cache_miss: copy(s.cache_miss),
      },
      response_stats: Object.fromEntries(
        [...this.#responses].sort(([a], [b]) => a - b).map(([index, entry]) => [
          String(index),
          {
            compute_infer: copy(entry.compute_infer),
            compute_output: copy(entry.compute_output),
            success: copy(entry.success),
            fail: copy(entry.fail),
            empty_response: copy(entry.empty_response),
            cancel: copy(entry.cancel),
          },
        ]),
      ),
      batch_stats: [...this.#batches].sort(([a], [b]) => a - b).map(([batchSize, entry]) => ({
        batch_size: batchSize,
        compute_input: copy(entry.compute_input),
        compute_infer: copy(entry.compute_infer),
        compute_output: copy(entry.compute_output),
      })),
      memory_usage: [],
    };
  }
}
