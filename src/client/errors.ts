/**
 * The client's error hierarchy, independent of the server's (`src/errors.ts`) so the client
 * loads without server code. {@linkcode ClientError} is the base of everything the client throws
 * on purpose.
 *
 * @module
 */

/**
 * Base class of every error the client throws on purpose.
 *
 * @example Catch any client error
 * ```ts
 * import { ClientError, ClientTimeoutError } from "./mod.ts";
 * import assert from "node:assert/strict";
 *
 * const error: unknown = new ClientTimeoutError("Timed out after 1 s waiting for server");
 * assert.ok(error instanceof ClientError);
 * assert.equal((error as Error).name, "ClientTimeoutError");
 * ```
 */
export class ClientError extends Error {
  /**
   * Creates an error.
   *
   * @param message What went wrong, starting with a capital letter and without a final period.
   * @param options Standard error options, e.g. a `cause`.
   */
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = new.target.name;
  }
}

/**
 * Deno refused a permission a call needs (`--allow-net` for the server, `--allow-env` for
 * grpc-js). The message is one line naming the flag, and the error prints as that line alone; a
 * call that fails on it is not retried.
 *
 * @example Prints as one line
 * ```ts
 * import { ClientPermissionError } from "./mod.ts";
 * import assert from "node:assert/strict";
 *
 * const error = new ClientPermissionError(
 *   "DenoTriton needs --allow-net=127.0.0.1:8000 for the client",
 * );
 * assert.equal(
 *   error.stack,
 *   "ClientPermissionError: DenoTriton needs --allow-net=127.0.0.1:8000 for the client",
 * );
 * ```
 */
export class ClientPermissionError extends ClientError {
  /**
   * Creates the error.
   *
   * @param message `DenoTriton needs <flag> for <what>`.
   */
  constructor(message: string) {
    // No `cause`: Deno prints a cause with its stack trace, and the fix is all the message says.
    super(message);
    this.stack = `${this.name}: ${message}`;
  }
}

/**
 * An argument given to the client is invalid (inputs, parameters, options).
 *
 * @example An input that is not an NDArray is a value error
 * ```ts
 * import { ClientValueError } from "./mod.ts";
 * import assert from "node:assert/strict";
 *
 * const error = new ClientValueError("Cannot infer: input 'a' is not an NDArray");
 * assert.equal(error.name, "ClientValueError");
 * ```
 */
export class ClientValueError extends ClientError {}

/**
 * A server URL cannot be parsed or uses an unsupported scheme.
 *
 * @example An unsupported URL scheme is a value error
 * ```ts
 * import { ClientInvalidUrlError, ClientValueError } from "./mod.ts";
 * import assert from "node:assert/strict";
 *
 * const error = new ClientInvalidUrlError("Invalid URL 'ftp://x': scheme must be http or grpc");
 * assert.ok(error instanceof ClientValueError);
 * ```
 */
export class ClientInvalidUrlError extends ClientValueError {}

/**
 * A call did not finish in time: readiness was not reached within the init timeout, an
 * inference took longer than the inference timeout, or the server could not be reached.
 *
 * @example A timeout error carries its class name
 * ```ts
 * import { ClientTimeoutError } from "./mod.ts";
 * import assert from "node:assert/strict";
 *
 * assert.equal(new ClientTimeoutError("Timed out").name, "ClientTimeoutError");
 * ```
 */
export class ClientTimeoutError extends ClientError {}

/**
 * The model is not available on the server (unknown, or not loaded).
 *
 * @example An unavailable model's error carries its class name
 * ```ts
 * import { ClientModelUnavailableError } from "./mod.ts";
 * import assert from "node:assert/strict";
 *
 * assert.equal(new ClientModelUnavailableError("Model 'm' is unavailable").name, "ClientModelUnavailableError");
 * ```
 */
export class ClientModelUnavailableError extends ClientError {}

/**
 * The client was used after `close()`.
 *
 * @example A closed client's error carries its class name
 * ```ts
 * import { ClientClosedError } from "./mod.ts";
 * import assert from "node:assert/strict";
 *
 * assert.equal(new ClientClosedError("Client is closed").name, "ClientClosedError");
 * ```
 */
export class ClientClosedError extends ClientError {}

/**
 * `inferBatch` was called for a model that does not batch (`max_batch_size` 0).
 *
 * @example Refuse batching for a model whose max_batch_size is 0
 * ```ts
 * import { ClientModelDoesntSupportBatchingError } from "./mod.ts";
 * import assert from "node:assert/strict";
 *
 * const error = new ClientModelDoesntSupportBatchingError("Model 'm' does not support batching");
 * assert.equal(error.name, "ClientModelDoesntSupportBatchingError");
 * ```
 */
export class ClientModelDoesntSupportBatchingError extends ClientError {}

/** Options of {@linkcode ClientInferenceServerError}. */
export interface ClientInferenceServerErrorOptions extends ErrorOptions {
  /**
   * The HTTP status or the gRPC status code of the answer, when the server answered one.
   *
   * @default {undefined}
   */
  status?: number;
  /**
   * The message the server sent, without the client's prefix.
   *
   * @default {undefined}
   */
  serverMessage?: string;
}

/**
 * The server answered with an error (or the model's kind does not fit the call); carries the
 * server's message and status.
 *
 * @example HTTP 400
 * ```ts
 * import { ClientInferenceServerError } from "./mod.ts";
 * import assert from "node:assert/strict";
 *
 * const error = new ClientInferenceServerError("Inference failed: bad input", {
 *   status: 400,
 *   serverMessage: "bad input",
 * });
 * assert.equal(error.status, 400);
 * assert.equal(error.serverMessage, "bad input");
 * ```
 */
export class ClientInferenceServerError extends ClientError {
  /** The HTTP status or gRPC status code, when the server answered. */
  readonly status: number | undefined;
  /** The server's own message, when it sent one. */
  readonly serverMessage: string | undefined;

  /**
   * Creates an error.
   *
   * @param message What went wrong, including the server's message.
   * @param options The status, the server's message and a cause.
   */
  constructor(message: string, options: ClientInferenceServerErrorOptions = {}) {
    super(message, options);
    this.status = options.status;
    this.serverMessage = options.serverMessage;
  }
}

/**
 * A queue is full: the model's on the server, which refused the request (HTTP 503 / gRPC
 * UNAVAILABLE "Exceeds maximum queue size", with its `status`), or the client's own, which
 * refused the call before sending it (`maxQueueSize`; no `status`). Either way the call may be
 * tried again later.
 *
 * @example A full queue is a server error with status 503
 * ```ts
 * import { ClientInferenceServerError, ClientQueueFullError } from "./mod.ts";
 * import assert from "node:assert/strict";
 *
 * const error = new ClientQueueFullError("Inference failed: Exceeds maximum queue size", { status: 503 });
 * assert.ok(error instanceof ClientInferenceServerError);
 * ```
 */
export class ClientQueueFullError extends ClientInferenceServerError {}
