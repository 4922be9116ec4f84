/**
 * The option types of `ModelClient`: what its constructor and calls accept, and what inference
 * takes and returns.
 *
 * @module
 */

import type { NDArray } from "../tensor/ndarray.ts";
import type { ClientModelConfig } from "./model_config.ts";
import type { ClientParameterValue } from "./transport.ts";

/** Inputs of an inference: positional (declared input order) or by name. */
export type ClientInputs = readonly NDArray[] | Readonly<Record<string, NDArray>>;

/** Outputs of an inference, by name. */
export type ClientOutputs = Record<string, NDArray>;

/** Options of the `ModelClient` constructor. */
export interface ModelClientOptions {
  /**
   * The model version; the server's choice (latest) when omitted.
   *
   * @default {undefined}
   */
  modelVersion?: string | number;
  /**
   * Wait for readiness and fetch the config on first use; `false` starts at once (errors surface
   * on the first call).
   *
   * @default {true}
   */
  lazyInit?: boolean;
  /**
   * How long initialisation (readiness wait + config fetch) may take, in seconds.
   *
   * @default {300}
   */
  initTimeoutS?: number;
  /**
   * How long each call (inference, readiness probe, config fetch, each streamed message) may take,
   * in seconds.
   *
   * @default {60}
   */
  inferenceTimeoutS?: number;
  /**
   * A token sent on every call: HTTP header `triton-access-token`, gRPC metadata
   * `triton-grpc-protocol-triton-access-token`.
   *
   * @default {undefined}
   */
  accessToken?: string;
  /**
   * Headers (HTTP) or metadata (gRPC) sent on every call.
   *
   * @default {{}}
   */
  headers?: Readonly<Record<string, string>>;
  /**
   * The model config, parsed or as Triton's JSON; skips the config fetch.
   *
   * @default {undefined}
   */
  modelConfig?: ClientModelConfig | Readonly<Record<string, unknown>>;
  /**
   * Wait until the server and the model are ready before the first call.
   *
   * @default {true}
   */
  ensureModelIsReady?: boolean;
  /**
   * How many inferences (`inferSample`, `inferBatch`, and `inferStream` until its last response)
   * may be in flight at once; the others wait in the client's queue, in order. PyTriton's
   * `FuturesModelClient(max_workers=...)`. The wait does not count towards `inferenceTimeoutS`.
   *
   * @default {Infinity}
   */
  maxConcurrency?: number;
  /**
   * How many inferences may wait for one of the `maxConcurrency` slots; one more is refused at
   * once with `ClientQueueFullError` (PyTriton's `max_queue_size` with `non_blocking=True`). 0
   * refuses every call beyond `maxConcurrency`.
   *
   * @default {Infinity}
   */
  maxQueueSize?: number;
}

/** Options of `ModelClient.inferSample` and `ModelClient.inferBatch`. */
export interface InferOptions {
  /**
   * Request parameters (KServe `parameters`), string, number or boolean values.
   *
   * @default {{}}
   */
  parameters?: Readonly<Record<string, ClientParameterValue>>;
  /**
   * Headers (HTTP) or metadata (gRPC) for this call; reach the model when they match the
   * server's header forward pattern.
   *
   * @default {{}}
   */
  headers?: Readonly<Record<string, ClientParameterValue>>;
  /**
   * The outputs to ask for.
   *
   * @default {all outputs of the model config}
   */
  outputs?: readonly string[];
  /**
   * Aborts the call (the waiting for readiness included); the call rejects with the signal's
   * reason.
   *
   * @default {undefined}
   */
  signal?: AbortSignal;
}

/** Options of `ModelClient.inferStream`. */
export interface InferStreamOptions extends InferOptions {
  /**
   * Send the inputs as a batch (like `inferBatch`) instead of one sample (like `inferSample`,
   * which adds and strips the batch axis when the model batches).
   *
   * @default {false}
   */
  batch?: boolean;
}

/** Options of `ModelClient.loadModel`. */
export interface LoadModelOptions {
  /**
   * A model config to load the model with: Triton's JSON as an object or a string.
   *
   * @default {undefined}
   */
  config?: string | Readonly<Record<string, unknown>>;
  /**
   * Model files keyed `file:<version>/<name>`.
   *
   * @default {{}}
   */
  files?: Readonly<Record<string, Uint8Array>>;
  /**
   * Aborts the call.
   *
   * @default {undefined}
   */
  signal?: AbortSignal;
}
