/**
 * The inference-callable contract: what a user's function receives and returns.
 *
 * @module
 */

import type { ResolvedModelConfig } from "../config/model_config.ts";
import type { ResolvedTensorSpec } from "../config/tensor_spec.ts";
import type { NDArray } from "../tensor/ndarray.ts";

/** A request parameter value (KServe body parameters and forwarded headers). */
export type ParameterValue = string | number | boolean;

/** One inference request as the callable sees it. */
export interface Request {
  /** Input tensors by name; optional inputs the client left out are absent. With batching, axis 0 is this request's batch. */
  readonly data: Record<string, NDArray>;
  /** KServe request parameters merged with forwarded headers (header values are strings). */
  readonly parameters: Record<string, ParameterValue>;
  /** The outputs the client asked for (all declared outputs when it named none). */
  readonly requestedOutputNames: readonly string[];
  /** Aborted when the client disconnects or the request is cancelled. */
  readonly signal: AbortSignal;
}

/** The outputs of one request, by name. */
export type InferResult = Record<string, NDArray>;

/** What the model sees of itself: the bound configuration, given to every call. */
export interface ModelInfo {
  /** Model name. */
  readonly name: string;
  /** Model version. */
  readonly version: number;
  /** Declared inputs. */
  readonly inputs: readonly ResolvedTensorSpec[];
  /** Declared outputs. */
  readonly outputs: readonly ResolvedTensorSpec[];
  /** Resolved serving configuration. */
  readonly config: ResolvedModelConfig;
  /** Whether outputs are validated strictly. */
  readonly strict: boolean;
}

/** The context passed as second argument to every inference callable (and through decorators). */
export interface InferContext {
  /** The model this call belongs to. */
  readonly model: ModelInfo;
  /** Index of the instance running the call. */
  readonly instanceIndex: number;
  /** Device of the instance: `"cpu"` or `"cuda:N"`. */
  readonly device: string;
}

/** What an inference callable may return: one result per request, or a stream of them (decoupled). */
export type InferReturn =
  | InferResult[]
  | Promise<InferResult[]>
  | Iterable<InferResult[]>
  | AsyncIterable<InferResult[]>;

/**
 * An inference callable: receives the batch of requests (and the context) and returns one result
 * per request, in order. Generators yield steps of results (decoupled models).
 */
export type InferFunc = (requests: Request[], context: InferContext) => InferReturn;

/** A class instance serving as a callable through its `infer` method. */
export interface InferCallableObject {
  /** Runs one batch. */
  infer(requests: Request[], context: InferContext): InferReturn;
}

/** What `bind()` accepts as one instance's callable. */
export type InferCallable = InferFunc | InferCallableObject;
