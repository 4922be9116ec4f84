/**
 * The error hierarchy of DenoTriton's server side.
 *
 * `TritonError` is the base of everything the library throws on purpose. The subclasses say who
 * is at fault: the caller's arguments ({@linkcode TritonValidationError},
 * {@linkcode TritonBadParameterError}, {@linkcode TritonModelConfigError}), the order of calls
 * ({@linkcode TritonInvalidOperationError}), the running model ({@linkcode TritonRuntimeError}),
 * a fault that must stop the server ({@linkcode TritonUnrecoverableError}), or a Deno permission
 * that was not granted ({@linkcode TritonPermissionError}).
 * {@linkcode InferenceError} carries a Triton error code so every front end can map it to its
 * own status (HTTP status, gRPC code).
 *
 * @module
 */

/**
 * Base class of every error DenoTriton throws on purpose.
 *
 * @example Catch any DenoTriton error
 * ```ts
 * import { TritonError, TritonValidationError } from "../mod.ts";
 * import assert from "node:assert/strict";
 *
 * const error: unknown = new TritonValidationError("Cannot bind model: name is empty");
 * assert.ok(error instanceof TritonError);
 * ```
 */
export class TritonError extends Error {
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
 * A value given by the user (a model name, a tensor spec, a configuration field) is invalid.
 *
 * @example Invalid model name
 * ```ts
 * import { TritonValidationError } from "../mod.ts";
 * import assert from "node:assert/strict";
 *
 * const error = new TritonValidationError("Cannot bind model: name is empty");
 * assert.equal(error.name, "TritonValidationError");
 * ```
 */
export class TritonValidationError extends TritonError {}

/**
 * An operation is not allowed in the current state (e.g. binding the same model twice).
 *
 * @example Duplicate binding
 * ```ts
 * import { TritonInvalidOperationError } from "../mod.ts";
 * import assert from "node:assert/strict";
 *
 * const error = new TritonInvalidOperationError("Cannot bind model: AddSub version 1 is bound already");
 * assert.equal(error.name, "TritonInvalidOperationError");
 * ```
 */
export class TritonInvalidOperationError extends TritonError {}

/**
 * A parameter has a value out of its allowed range (e.g. a batch size below 1).
 *
 * @example Bad batch size
 * ```ts
 * import { TritonBadParameterError } from "../mod.ts";
 * import assert from "node:assert/strict";
 *
 * const error = new TritonBadParameterError("maxBatchSize must be >= 1 when batching is on: got 0");
 * assert.equal(error.name, "TritonBadParameterError");
 * ```
 */
export class TritonBadParameterError extends TritonError {}

/**
 * A model configuration cannot be built or parsed.
 *
 * @example A config error carries its class name
 * ```ts
 * import { TritonModelConfigError } from "../mod.ts";
 * import assert from "node:assert/strict";
 *
 * assert.equal(new TritonModelConfigError("Bad config").name, "TritonModelConfigError");
 * ```
 */
export class TritonModelConfigError extends TritonError {}

/**
 * A decorator or callable failed at run time in a way the user can fix (e.g. misuse of a
 * decorator).
 *
 * @example A run-time error carries its class name
 * ```ts
 * import { TritonRuntimeError } from "../mod.ts";
 * import assert from "node:assert/strict";
 *
 * assert.equal(new TritonRuntimeError("Bad use").name, "TritonRuntimeError");
 * ```
 */
export class TritonRuntimeError extends TritonError {}

/**
 * Thrown from an inference callable to stop the whole server: the clients of the failing batch
 * receive the message first, then `serve()` returns.
 *
 * @example Stop the server from a callable
 * ```ts
 * import { TritonUnrecoverableError } from "../mod.ts";
 * import assert from "node:assert/strict";
 *
 * const error = new TritonUnrecoverableError("GPU lost");
 * assert.equal(error.name, "TritonUnrecoverableError");
 * ```
 */
export class TritonUnrecoverableError extends TritonError {}

/**
 * DenoTriton lacks a Deno permission it needs. The message is one line naming the flag to add
 * and why, and the error prints as that line alone (no stack trace), so a script whose
 * `await triton.serve()` fails on it shows just the fix.
 *
 * @example Prints as one line
 * ```ts
 * import { TritonPermissionError } from "../mod.ts";
 * import assert from "node:assert/strict";
 *
 * const error = new TritonPermissionError(
 *   "DenoTriton needs --allow-net=0.0.0.0:8000 for the HTTP front end",
 * );
 * assert.equal(
 *   error.stack,
 *   "TritonPermissionError: DenoTriton needs --allow-net=0.0.0.0:8000 for the HTTP front end",
 * );
 * ```
 */
export class TritonPermissionError extends TritonError {
  /**
   * Creates the error.
   *
   * @param message `DenoTriton needs <flag> for <purpose>`.
   */
  constructor(message: string) {
    // No `cause`: Deno prints a cause with its stack trace, and the fix is all the message says.
    super(message);
    this.stack = `${this.name}: ${message}`;
  }
}

/**
 * Triton's error codes (`TRITONSERVER_Error_Code`), shared by both engines and all front ends.
 */
export type ErrorCode =
  | "UNKNOWN"
  | "INTERNAL"
  | "NOT_FOUND"
  | "INVALID_ARG"
  | "UNAVAILABLE"
  | "UNSUPPORTED"
  | "ALREADY_EXISTS"
  | "CANCELLED";

/**
 * The message of the UNAVAILABLE error (HTTP 503, gRPC UNAVAILABLE) a model answers when its
 * queue is full: the built-in engine throws it as the Triton core does, the OpenAI front end maps
 * it to 429, and clients recognise a full queue by it.
 *
 * @example The text a full queue answers with
 * ```ts
 * import { QUEUE_FULL_MESSAGE } from "./errors.ts";
 * import assert from "node:assert/strict";
 *
 * assert.ok("Exceeds maximum queue size".includes(QUEUE_FULL_MESSAGE));
 * ```
 */
export const QUEUE_FULL_MESSAGE = "Exceeds maximum queue size";

/** Options of {@linkcode InferenceError}. */
export interface InferenceErrorOptions extends ErrorOptions {
  /**
   * Triton's error code, which front ends map to an HTTP status or a gRPC code.
   *
   * @default {"INTERNAL"}
   */
  code?: ErrorCode;
}

/**
 * An error answered to a client: bad request, unknown model, full queue, failed model...
 * `code` decides the status each front end returns.
 *
 * @example Answer a client with a status
 * ```ts
 * import { InferenceError } from "../mod.ts";
 * import assert from "node:assert/strict";
 *
 * // Thrown by a callable, it reaches an HTTP client as 404 and a gRPC client as NOT_FOUND.
 * const error = new InferenceError("Unknown user: 'ann' is not found", { code: "NOT_FOUND" });
 * assert.equal(error.code, "NOT_FOUND");
 * assert.equal(new InferenceError("Model failed").code, "INTERNAL");
 * ```
 */
export class InferenceError extends TritonError {
  /** Triton's error code. */
  readonly code: ErrorCode;

  /**
   * Creates an error.
   *
   * @param message The message sent to the client.
   * @param options The code and a cause.
   */
  constructor(message: string, options: InferenceErrorOptions = {}) {
    super(message, options);
    this.code = options.code ?? "INTERNAL";
  }

  /**
   * An INVALID_ARG error: the request is malformed (HTTP 400, gRPC INVALID_ARGUMENT).
   *
   * @param message What is wrong, naming the field or value.
   * @param options A cause.
   * @returns The error.
   *
   * @example A malformed parameter
   * ```ts
   * import { InferenceError } from "../mod.ts";
   * import assert from "node:assert/strict";
   *
   * const error = InferenceError.invalidArg("Invalid request parameter 'priority': expected an integer");
   * assert.equal(error.code, "INVALID_ARG");
   * ```
   */
  static invalidArg(message: string, options?: ErrorOptions): InferenceError {
    return new InferenceError(message, { ...options, code: "INVALID_ARG" });
  }

  /**
   * A NOT_FOUND error: an unknown model or version (HTTP 404, gRPC NOT_FOUND).
   *
   * @param message What was not found.
   * @param options A cause.
   * @returns The error.
   *
   * @example An unknown model is NOT_FOUND
   * ```ts
   * import { InferenceError } from "../mod.ts";
   * import assert from "node:assert/strict";
   *
   * assert.equal(InferenceError.notFound("Request for unknown model: 'm' is not found").code, "NOT_FOUND");
   * ```
   */
  static notFound(message: string, options?: ErrorOptions): InferenceError {
    return new InferenceError(message, { ...options, code: "NOT_FOUND" });
  }

  /**
   * An UNAVAILABLE error: the server or model cannot take the request now, e.g. a full queue
   * (HTTP 503, gRPC UNAVAILABLE).
   *
   * @param message Why.
   * @param options A cause.
   * @returns The error.
   *
   * @example A stopping server is UNAVAILABLE
   * ```ts
   * import { InferenceError } from "../mod.ts";
   * import assert from "node:assert/strict";
   *
   * assert.equal(InferenceError.unavailable("Server is stopping").code, "UNAVAILABLE");
   * ```
   */
  static unavailable(message: string, options?: ErrorOptions): InferenceError {
    return new InferenceError(message, { ...options, code: "UNAVAILABLE" });
  }

  /**
   * An UNSUPPORTED error: a feature this server does not offer (HTTP 501, gRPC UNIMPLEMENTED).
   *
   * @param message What is not supported, and what to do instead.
   * @param options A cause.
   * @returns The error.
   *
   * @example An unoffered feature is UNSUPPORTED
   * ```ts
   * import { InferenceError } from "../mod.ts";
   * import assert from "node:assert/strict";
   *
   * assert.equal(InferenceError.unsupported("Tracing is not supported").code, "UNSUPPORTED");
   * ```
   */
  static unsupported(message: string, options?: ErrorOptions): InferenceError {
    return new InferenceError(message, { ...options, code: "UNSUPPORTED" });
  }

  /**
   * An INTERNAL error: the server or the model failed (HTTP 500, gRPC INTERNAL).
   *
   * @param message What failed.
   * @param options A cause.
   * @returns The error.
   *
   * @example A model failure is INTERNAL and keeps its cause
   * ```ts
   * import { InferenceError } from "../mod.ts";
   * import assert from "node:assert/strict";
   *
   * const cause = new RangeError("out of memory");
   * const error = InferenceError.internal("Model failed: out of memory", { cause });
   * assert.equal(error.code, "INTERNAL");
   * assert.equal(error.cause, cause);
   * ```
   */
  static internal(message: string, options?: ErrorOptions): InferenceError {
    return new InferenceError(message, { ...options, code: "INTERNAL" });
  }

  /**
   * A CANCELLED error: the client went away or cancelled the request.
   *
   * @param message Which request, and who cancelled it.
   * @param options A cause.
   * @returns The error.
   *
   * @example A cancelled request is CANCELLED
   * ```ts
   * import { InferenceError } from "../mod.ts";
   * import assert from "node:assert/strict";
   *
   * assert.equal(InferenceError.cancelled("Request cancelled").code, "CANCELLED");
   * ```
   */
  static cancelled(message: string, options?: ErrorOptions): InferenceError {
    return new InferenceError(message, { ...options, code: "CANCELLED" });
  }
}

/**
 * Maps a Triton error code to the HTTP status Triton's HTTP front end answers.
 *
 * @param code Triton's error code.
 * @returns The HTTP status.
 *
 * @example UNAVAILABLE is 503, INVALID_ARG is 400
 * ```ts
 * import { httpStatusOf } from "./errors.ts";
 * import assert from "node:assert/strict";
 *
 * assert.equal(httpStatusOf("UNAVAILABLE"), 503);
 * assert.equal(httpStatusOf("INVALID_ARG"), 400);
 * ```
 */
export function httpStatusOf(code: ErrorCode): number {
  switch (code) {
    case "INTERNAL":
      return 500;
    case "NOT_FOUND":
      return 404;
    case "UNAVAILABLE":
      return 503;
    case "UNSUPPORTED":
      return 501;
    default:
      return 400;
  }
}

/**
 * Maps a Triton error code to the gRPC status code Triton's gRPC front end answers.
 *
 * @param code Triton's error code.
 * @returns The numeric gRPC status code.
 *
 * @example NOT_FOUND is gRPC status 5
 * ```ts
 * import { grpcStatusOf } from "./errors.ts";
 * import assert from "node:assert/strict";
 *
 * assert.equal(grpcStatusOf("NOT_FOUND"), 5);
 * ```
 */
export function grpcStatusOf(code: ErrorCode): number {
  switch (code) {
    case "UNKNOWN":
      return 2;
    case "INTERNAL":
      return 13;
    case "NOT_FOUND":
      return 5;
    case "INVALID_ARG":
      return 3;
    case "UNAVAILABLE":
      return 14;
    case "UNSUPPORTED":
      return 12;
    case "ALREADY_EXISTS":
      return 6;
    case "CANCELLED":
      return 1;
  }
}

/**
 * Turns anything thrown into an {@linkcode InferenceError}, keeping an existing code. A
 * {@linkcode TritonValidationError} is INVALID_ARG: thrown while a request runs, it is
 * DenoTriton's own check (a tensor helper such as `zip` in a model's code) refusing the
 * request's values, which are the client's, not a failure of the server.
 *
 * @param error What was thrown.
 * @param code The code to use when `error` has none.
 * @returns An `InferenceError`.
 *
 * @example A RangeError is INTERNAL, a validation error INVALID_ARG
 * ```ts
 * import { toInferenceError } from "./errors.ts";
 * import { TritonValidationError } from "../mod.ts";
 * import assert from "node:assert/strict";
 *
 * const error = toInferenceError(new RangeError("division by zero"));
 * assert.equal(error.code, "INTERNAL");
 * assert.match(error.message, /division by zero/);
 * const refused = toInferenceError(new TritonValidationError("Cannot zip tensors"));
 * assert.equal(refused.code, "INVALID_ARG");
 * ```
 */
export function toInferenceError(error: unknown, code: ErrorCode = "INTERNAL"): InferenceError {
  if (error instanceof InferenceError) return error;
  const message = describeError(error);
  return new InferenceError(message, {
    code: error instanceof TritonValidationError ? "INVALID_ARG" : code,
    cause: error,
  });
}

/**
 * The message of anything thrown: an `Error`'s message, or the value as a string.
 *
 * @param error What was thrown.
 * @returns Its message.
 *
 * @example An Error and a thrown string
 * ```ts
 * import { messageOf } from "./errors.ts";
 * import assert from "node:assert/strict";
 *
 * assert.equal(messageOf(new TypeError("bad")), "bad");
 * assert.equal(messageOf("plain"), "plain");
 * ```
 */
export function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/**
 * Anything thrown as one line that names its kind: `Name: message` for an `Error`, the value as
 * a string otherwise.
 *
 * @param error What was thrown.
 * @returns The line.
 *
 * @example An Error and a thrown string
 * ```ts
 * import { describeError } from "./errors.ts";
 * import assert from "node:assert/strict";
 *
 * assert.equal(describeError(new RangeError("too big")), "RangeError: too big");
 * assert.equal(describeError("plain"), "plain");
 * ```
 */
export function describeError(error: unknown): string {
  return error instanceof Error ? `${error.name}: ${error.message}` : String(error);
}
