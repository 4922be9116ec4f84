/**
 * Error answers of the HTTP front end: Triton's `{"error": "<message>"}` JSON body with the
 * status `httpStatusOf` maps from the error code, plus {@linkcode HttpError} for the few statuses
 * that no Triton code maps to (404 for unknown paths, 405, 413).
 *
 * @module
 */

import {
  describeError,
  httpStatusOf,
  InferenceError,
  type InferenceErrorOptions,
} from "../../errors.ts";

/** Options of {@linkcode HttpError}. */
export interface HttpErrorOptions extends InferenceErrorOptions {
  /**
   * Extra response headers, e.g. `Allow` for a 405.
   *
   * @default {{}}
   */
  headers?: Readonly<Record<string, string>>;
}

/**
 * An error answered with an explicit HTTP status instead of the one its code maps to.
 *
 * @example Payload too large
 * ```ts
 * import { HttpError } from "./errors.ts";
 * import assert from "node:assert/strict";
 *
 * const error = new HttpError(413, "Request body too large: limit is 10 bytes");
 * assert.equal(error.status, 413);
 * assert.equal(error.code, "INVALID_ARG");
 * ```
 */
export class HttpError extends InferenceError {
  /** The HTTP status to answer. */
  readonly status: number;
  /** Extra response headers. */
  readonly headers: Readonly<Record<string, string>>;

  /**
   * Creates an error.
   *
   * @param status The HTTP status.
   * @param message The message sent to the client.
   * @param options The Triton code (for logs; defaults to INVALID_ARG), headers and a cause.
   */
  constructor(status: number, message: string, options: HttpErrorOptions = {}) {
    super(message, { code: "INVALID_ARG", ...options });
    this.status = status;
    this.headers = options.headers ?? {};
  }
}

/**
 * A JSON response with a status.
 *
 * @param body Anything `JSON.stringify` accepts.
 * @param status The HTTP status.
 * @param headers Extra headers.
 * @returns The response, `Content-Type: application/json`.
 *
 * @example A JSON body with its content type
 * ```ts
 * import { jsonResponse } from "./errors.ts";
 * import assert from "node:assert/strict";
 *
 * const response = jsonResponse({ a: 1 });
 * assert.equal(response.headers.get("content-type"), "application/json");
 * assert.deepEqual(await response.json(), { a: 1 });
 * ```
 */
export function jsonResponse(
  body: unknown,
  status = 200,
  headers: Readonly<Record<string, string>> = {},
): Response {
  return new Response(JSON.stringify(body), {
    status,
    headers: { "content-type": "application/json", ...headers },
  });
}

/**
 * Triton's error body `{"error": "<message>"}` with a status.
 *
 * @param status The HTTP status.
 * @param message The message.
 * @param headers Extra headers.
 * @returns The response.
 *
 * @example A 404 with Triton's error body
 * ```ts
 * import { errorResponse } from "./errors.ts";
 * import assert from "node:assert/strict";
 *
 * const response = errorResponse(404, "Not Found");
 * assert.equal(response.status, 404);
 * assert.equal(await response.text(), '{"error":"Not Found"}');
 * ```
 */
export function errorResponse(
  status: number,
  message: string,
  headers: Readonly<Record<string, string>> = {},
): Response {
  return jsonResponse({ error: message }, status, headers);
}

/**
 * Turns anything thrown while handling a request into Triton's error response.
 *
 * @param error What was thrown.
 * @returns The response: the mapped status of an `InferenceError`, 500 for anything else.
 *
 * @example Mapped codes
 * ```ts
 * import { errorToResponse } from "./errors.ts";
 * import { InferenceError } from "../../errors.ts";
 * import assert from "node:assert/strict";
 *
 * const response = errorToResponse(InferenceError.unavailable("Queue full"));
 * assert.equal(response.status, 503);
 * assert.deepEqual(await response.json(), { error: "Queue full" });
 * ```
 */
export function errorToResponse(error: unknown): Response {
  if (error instanceof HttpError) return errorResponse(error.status, error.message, error.headers);
  if (error instanceof InferenceError) {
    return errorResponse(httpStatusOf(error.code), error.message);
  }
  const message = describeError(error);
  return errorResponse(500, message);
}
