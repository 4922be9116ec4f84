/**
 * A model instance: the thing an engine hands a batch to. Main-thread callables and Worker-backed
 * instances both implement it, and both engines drive it the same way.
 *
 * @module
 */

import type { InferResult, ModelInfo, Request } from "../callable/types.ts";

/** One running instance of a model's callable. */
export interface ModelInstance extends AsyncDisposable {
  /** Instance index within the model, from 0. */
  readonly index: number;
  /** Device string: `"cpu"` or `"cuda:N"`. */
  readonly device: string;
  /** Whether the instance can take batches (false after a crash until restarted). */
  readonly alive: boolean;
  /**
   * Runs one batch of a coupled model. Resolves to exactly one validated result per request, in
   * order; rejects with the error that fails the whole batch.
   */
  execute(requests: Request[]): Promise<InferResult[]>;
  /**
   * Runs one batch of a decoupled model: each step holds one validated result per request. The
   * iterable ends when the callable is done and throws the error that ends every stream.
   */
  stream(requests: Request[]): AsyncIterable<InferResult[]>;
}

/** Creates the instances of a model when it is loaded. */
export interface InstanceProvider {
  /** How many instances the model has. */
  readonly count: number;
  /** Devices of the instances, by index. */
  readonly devices: readonly string[];
  /** Starts every instance; rejects with the first load failure. */
  start(model: ModelInfo): Promise<ModelInstance[]>;
}
