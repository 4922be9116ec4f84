/**
 * Per-model serving configuration: batching, the dynamic batcher and its queue policies,
 * response cache, decoupled (streaming) mode and warm-up. Mirrors PyTriton's `ModelConfig`,
 * `DynamicBatcher` and `QueuePolicy` with camelCase names.
 *
 * @module
 */

import { isNonNegativeInteger } from "../json_values.ts";
import { TritonBadParameterError } from "../errors.ts";
import type { DTypeLike } from "../tensor/dtype.ts";
import {
  type ResolvedSequenceBatching,
  resolveSequenceBatching,
  type SequenceBatching,
} from "./sequence_batching.ts";

/** What the queue does with a request whose queue timeout expired. */
export type TimeoutAction = "REJECT" | "DELAY";

/** Queue policy of the dynamic batcher (per model, or per priority level). */
export interface QueuePolicy {
  /**
   * What happens to a request that timed out in the queue.
   *
   * @default {"REJECT"}
   */
  timeoutAction?: TimeoutAction;
  /**
   * Queue timeout in microseconds; 0 means none.
   *
   * @default {0}
   */
  defaultTimeoutMicroseconds?: number;
  /**
   * Whether a request's `timeout` parameter may shorten the default timeout.
   *
   * @default {false}
   */
  allowTimeoutOverride?: boolean;
  /**
   * Maximum queued requests; 0 means unbounded. A full queue answers 503 / UNAVAILABLE.
   *
   * @default {0}
   */
  maxQueueSize?: number;
}

/** Dynamic batcher settings. */
export interface DynamicBatcher {
  /**
   * How long the batcher may wait for more requests to form a larger batch.
   *
   * @default {0}
   */
  maxQueueDelayMicroseconds?: number;
  /**
   * Batch sizes the batcher prefers to form; empty means `[maxBatchSize]`.
   *
   * @default {[]}
   */
  preferredBatchSize?: readonly number[];
  /**
   * Send responses in arrival order.
   *
   * @default {false}
   */
  preserveOrdering?: boolean;
  /**
   * Number of priority levels (1 is highest); 0 turns priorities off.
   *
   * @default {0}
   */
  priorityLevels?: number;
  /**
   * Priority of requests that give none; must be within `[1, priorityLevels]` when levels are on.
   *
   * @default {0}
   */
  defaultPriorityLevel?: number;
  /**
   * The queue policy of every level without its own.
   *
   * @default {undefined}
   */
  defaultQueuePolicy?: QueuePolicy;
  /**
   * Queue policies per priority level.
   *
   * @default {undefined}
   */
  priorityQueuePolicy?: Readonly<Record<number, QueuePolicy>>;
}

/** One warm-up input: its data is zeros, random values or read from a file. */
export interface WarmupInput {
  /** Element type. */
  dtype: DTypeLike;
  /** Shape without the batch axis. */
  shape: readonly number[];
  /**
   * Fill with zeros.
   *
   * @default {false}
   */
  zeroData?: boolean;
  /**
   * Fill with random values.
   *
   * @default {false}
   */
  randomData?: boolean;
  /**
   * Read the raw little-endian data (or length-prefixed BYTES) from this file.
   *
   * @default {undefined}
   */
  inputDataFile?: string;
}

/** One warm-up stage, run `count` times on every instance before the model reports ready. */
export interface ModelWarmup {
  /** Stage name, for logs. */
  name: string;
  /** Batch size of the synthetic request. */
  batchSize: number;
  /** Data for each input, by name. */
  inputs: Readonly<Record<string, WarmupInput>>;
  /**
   * How many times to run it.
   *
   * @default {1}
   */
  count?: number;
}

/** Serving configuration of one model. */
export interface ModelConfig {
  /**
   * Whether the model batches: with it off, tensors carry exactly their declared shape.
   *
   * @default {true}
   */
  batching?: boolean;
  /**
   * Largest batch a request or a formed batch may have; must be at least 1 when batching.
   *
   * @default {4}
   */
  maxBatchSize?: number;
  /**
   * Dynamic batcher settings; dynamic batching is on whenever batching is.
   *
   * @default {{}}
   */
  batcher?: DynamicBatcher;
  /**
   * Sequence batching for a stateful model (Triton's `sequence_batching`): the requests of one
   * sequence (`sequence_id`) run in order on one instance, and the callable learns from
   * `request.sequence` and the control inputs which request starts, ends or is ready. It takes
   * the place of the dynamic batcher, so `batcher` must be left out.
   *
   * @default {undefined}
   */
  sequenceBatching?: SequenceBatching;
  /**
   * Cache responses of identical requests (needs a server cache size).
   *
   * @default {false}
   */
  responseCache?: boolean;
  /**
   * Streaming model: the callable yields 0..N responses per request.
   *
   * @default {false}
   */
  decoupled?: boolean;
  /**
   * Warm-up stages run before the model reports ready.
   *
   * @default {[]}
   */
  warmup?: readonly ModelWarmup[];
  /**
   * How long one batch may run, in seconds (for a decoupled model: how long the callable may take
   * for each step and for its end); 0 means no limit. A batch that runs longer fails with
   * UNAVAILABLE, naming the model and the timeout. A Worker instance (`workers()`) is then stopped
   * and restarted; a main-thread callable cannot be interrupted, so its instance takes no other
   * batch until the callable returns. Both engines behave the same.
   *
   * @default {0}
   */
  executionTimeoutS?: number;
}

/** A queue policy with every default filled in. */
export interface ResolvedQueuePolicy {
  /** See {@linkcode QueuePolicy.timeoutAction}. */
  readonly timeoutAction: TimeoutAction;
  /** See {@linkcode QueuePolicy.defaultTimeoutMicroseconds}. */
  readonly defaultTimeoutMicroseconds: number;
  /** See {@linkcode QueuePolicy.allowTimeoutOverride}. */
  readonly allowTimeoutOverride: boolean;
  /** See {@linkcode QueuePolicy.maxQueueSize}. */
  readonly maxQueueSize: number;
}

/** A dynamic batcher with every default filled in. */
export interface ResolvedDynamicBatcher {
  /** See {@linkcode DynamicBatcher.maxQueueDelayMicroseconds}. */
  readonly maxQueueDelayMicroseconds: number;
  /** Preferred sizes as given (Triton's `[maxBatchSize]` default is applied by the schedulers). */
  readonly preferredBatchSize: readonly number[];
  /** See {@linkcode DynamicBatcher.preserveOrdering}. */
  readonly preserveOrdering: boolean;
  /** See {@linkcode DynamicBatcher.priorityLevels}. */
  readonly priorityLevels: number;
  /** See {@linkcode DynamicBatcher.defaultPriorityLevel}. */
  readonly defaultPriorityLevel: number;
  /** See {@linkcode DynamicBatcher.defaultQueuePolicy}. */
  readonly defaultQueuePolicy: ResolvedQueuePolicy;
  /** Whether the user gave a default queue policy (only then is it written to Triton's config). */
  readonly hasDefaultQueuePolicy: boolean;
  /** See {@linkcode DynamicBatcher.priorityQueuePolicy}. */
  readonly priorityQueuePolicy: ReadonlyMap<number, ResolvedQueuePolicy>;
}

/** A model configuration with every default filled in and validated. */
export interface ResolvedModelConfig {
  /** See {@linkcode ModelConfig.batching}. */
  readonly batching: boolean;
  /** 0 when batching is off. */
  readonly maxBatchSize: number;
  /** See {@linkcode ModelConfig.batcher}. */
  readonly batcher: ResolvedDynamicBatcher;
  /** See {@linkcode ModelConfig.sequenceBatching}; `undefined` for a model without it. */
  readonly sequenceBatching: ResolvedSequenceBatching | undefined;
  /** See {@linkcode ModelConfig.responseCache}. */
  readonly responseCache: boolean;
  /** See {@linkcode ModelConfig.decoupled}. */
  readonly decoupled: boolean;
  /** See {@linkcode ModelConfig.warmup}. */
  readonly warmup: readonly ModelWarmup[];
  /** See {@linkcode ModelConfig.executionTimeoutS}; 0 when there is no limit. */
  readonly executionTimeoutS: number;
}

function nonNegativeInteger(value: number, field: string): number {
  if (!isNonNegativeInteger(value)) {
    throw new TritonBadParameterError(
      `Invalid model config: ${field} must be a non-negative integer, got ${value}`,
    );
  }
  return value;
}

function resolveQueuePolicy(policy: QueuePolicy | undefined, field: string): ResolvedQueuePolicy {
  const timeoutAction = policy?.timeoutAction ?? "REJECT";
  if (timeoutAction !== "REJECT" && timeoutAction !== "DELAY") {
    throw new TritonBadParameterError(
      `Invalid model config: ${field}.timeoutAction must be "REJECT" or "DELAY", got ${
        JSON.stringify(timeoutAction)
      }`,
    );
  }
  return {
    timeoutAction,
    defaultTimeoutMicroseconds: nonNegativeInteger(
      policy?.defaultTimeoutMicroseconds ?? 0,
      `${field}.defaultTimeoutMicroseconds`,
    ),
    allowTimeoutOverride: policy?.allowTimeoutOverride ?? false,
    maxQueueSize: nonNegativeInteger(policy?.maxQueueSize ?? 0, `${field}.maxQueueSize`),
  };
}

/**
 * Fills in defaults and validates a model configuration like PyTriton does.
 *
 * @param config The user's configuration.
 * @returns The resolved configuration.
 * @throws {TritonBadParameterError} For out-of-range values, e.g. `maxBatchSize < 1` with batching on.
 *
 * @example Defaults
 * ```ts
 * import { resolveModelConfig } from "./model_config.ts";
 * import assert from "node:assert/strict";
 *
 * const config = resolveModelConfig({});
 * assert.equal(config.maxBatchSize, 4);
 * assert.equal(config.batching, true);
 * assert.throws(() => resolveModelConfig({ maxBatchSize: 0 }), /maxBatchSize/);
 * ```
 */
export function resolveModelConfig(config: ModelConfig = {}): ResolvedModelConfig {
  const batching = config.batching ?? true;
  let maxBatchSize = 0;
  if (batching) {
    maxBatchSize = config.maxBatchSize ?? 4;
    // The core keeps it in an int32.
    if (!Number.isInteger(maxBatchSize) || maxBatchSize < 1 || maxBatchSize > 2 ** 31 - 1) {
      throw new TritonBadParameterError(
        `Invalid model config: maxBatchSize must be an integer within [1, 2147483647] when batching is on, got ${maxBatchSize}`,
      );
    }
  }
  const batcher = config.batcher ?? {};
  const priorityLevels = nonNegativeInteger(batcher.priorityLevels ?? 0, "batcher.priorityLevels");
  const defaultPriorityLevel = nonNegativeInteger(
    batcher.defaultPriorityLevel ?? 0,
    "batcher.defaultPriorityLevel",
  );
  if (defaultPriorityLevel > priorityLevels) {
    throw new TritonBadParameterError(
      `Invalid model config: batcher.defaultPriorityLevel (${defaultPriorityLevel}) must be <= priorityLevels (${priorityLevels})`,
    );
  }
  if (priorityLevels > 0 && defaultPriorityLevel < 1) {
    throw new TritonBadParameterError(
      `Invalid model config: batcher.defaultPriorityLevel must be within [1, ${priorityLevels}] when priorityLevels is set, got ${defaultPriorityLevel}`,
    );
  }
  const priorityQueuePolicy = new Map<number, ResolvedQueuePolicy>();
  for (const [key, policy] of Object.entries(batcher.priorityQueuePolicy ?? {})) {
    const level = Number(key);
    if (priorityLevels === 0) {
      throw new TritonBadParameterError(
        "Invalid model config: batcher.priorityQueuePolicy needs batcher.priorityLevels",
      );
    }
    if (!Number.isInteger(level) || level < 1 || level > priorityLevels) {
      throw new TritonBadParameterError(
        `Invalid model config: batcher.priorityQueuePolicy key ${key} must be within [1, ${priorityLevels}]`,
      );
    }
    priorityQueuePolicy.set(
      level,
      resolveQueuePolicy(policy, `batcher.priorityQueuePolicy[${key}]`),
    );
  }
  const preferredBatchSize = [...(batcher.preferredBatchSize ?? [])];
  for (const size of preferredBatchSize) {
    if (!Number.isInteger(size) || size < 1 || (batching && size > maxBatchSize)) {
      throw new TritonBadParameterError(
        `Invalid model config: batcher.preferredBatchSize ${size} must be within [1, ${maxBatchSize}]`,
      );
    }
  }
  const defaultQueuePolicy = resolveQueuePolicy(
    batcher.defaultQueuePolicy,
    "batcher.defaultQueuePolicy",
  );
  const preserveOrdering = batcher.preserveOrdering ?? false;
  // The core refuses the combination (a queue per level cannot keep one order).
  if (preserveOrdering && priorityLevels > 1) {
    throw new TritonBadParameterError(
      `Invalid model config: batcher.preserveOrdering allows one priority level at most, got priorityLevels ${priorityLevels}`,
    );
  }
  const decoupled = config.decoupled ?? false;
  const responseCache = config.responseCache ?? false;
  if (responseCache && decoupled) {
    throw new TritonBadParameterError(
      "Invalid model config: responseCache cannot be enabled for a decoupled model",
    );
  }
  const sequenceBatching = config.sequenceBatching === undefined
    ? undefined
    : resolveSequenceBatching(config.sequenceBatching, { maxBatchSize });
  if (sequenceBatching !== undefined) {
    // One scheduler per model in Triton: dynamic_batching and sequence_batching are a oneof.
    if (config.batcher !== undefined) {
      throw new TritonBadParameterError(
        "Invalid model config: batcher and sequenceBatching cannot both be set (a model has one scheduler: the sequence batcher takes the place of the dynamic batcher)",
      );
    }
    if (responseCache) {
      throw new TritonBadParameterError(
        "Invalid model config: responseCache cannot be enabled with sequenceBatching",
      );
    }
  }
  const warmup = [...(config.warmup ?? [])];
  for (const stage of warmup) {
    if (!Number.isInteger(stage.batchSize) || stage.batchSize < 1) {
      throw new TritonBadParameterError(
        `Invalid warm-up '${stage.name}': batchSize must be an integer >= 1, got ${stage.batchSize}`,
      );
    }
    if (batching && stage.batchSize > maxBatchSize) {
      throw new TritonBadParameterError(
        `Invalid warm-up '${stage.name}': batchSize ${stage.batchSize} exceeds maxBatchSize ${maxBatchSize}`,
      );
    }
    for (const [name, input] of Object.entries(stage.inputs)) {
      const sources = [input.zeroData, input.randomData, input.inputDataFile !== undefined]
        .filter(Boolean).length;
      if (sources !== 1) {
        throw new TritonBadParameterError(
          `Invalid warm-up '${stage.name}' input '${name}': set exactly one of zeroData, randomData, inputDataFile`,
        );
      }
    }
  }
  const executionTimeoutS = config.executionTimeoutS ?? 0;
  // Timers take at most 2^31 - 1 ms.
  if (
    typeof executionTimeoutS !== "number" || !(executionTimeoutS >= 0) ||
    executionTimeoutS * 1000 > 2 ** 31 - 1
  ) {
    throw new TritonBadParameterError(
      `Invalid model config: executionTimeoutS must be a number of seconds within [0, 2147483], got ${executionTimeoutS}`,
    );
  }
  return {
    batching,
    maxBatchSize,
    batcher: {
      maxQueueDelayMicroseconds: nonNegativeInteger(
        batcher.maxQueueDelayMicroseconds ?? 0,
        "batcher.maxQueueDelayMicroseconds",
      ),
      preferredBatchSize,
      preserveOrdering,
      priorityLevels,
      defaultPriorityLevel,
      defaultQueuePolicy,
      hasDefaultQueuePolicy: batcher.defaultQueuePolicy !== undefined,
      priorityQueuePolicy,
    },
    sequenceBatching,
    responseCache,
    decoupled,
    warmup,
    executionTimeoutS,
  };
}
