/**
 * The one error mapper of the OpenAI routes: whatever a route throws (its own
 * {@linkcode OpenAIError}s, the engine's `InferenceError`s, the HTTP front end's body errors)
 * becomes OpenAI's error body with OpenAI's status for it.
 *
 * @module
 */

import { describeError, httpStatusOf, InferenceError, QUEUE_FULL_MESSAGE } from "../../errors.ts";
import { HttpError } from "../http/errors.ts";
import { OpenAIError } from "./wire.ts";

/**
 * The OpenAI error for anything thrown while answering.
 *
 * @param error What was thrown.
 * @returns The error to answer: 400 for bad input, 404 for an unknown model, 429 for a full
 *   queue, 503 for an unavailable model, 500 for the rest.
 *
 * @example A full queue is a rate limit
 * ```ts
 * import { openAIErrorOf } from "./errors.ts";
 * import { InferenceError } from "../../errors.ts";
 * import assert from "node:assert/strict";
 *
 * const error = openAIErrorOf(InferenceError.unavailable("Exceeds maximum queue size"));
 * assert.equal(error.status, 429);
 * assert.equal(error.body.error.code, "rate_limit_exceeded");
 * ```
 */
export function openAIErrorOf(error: unknown): OpenAIError {
  if (error instanceof OpenAIError) return error;
  if (error instanceof HttpError) {
    return new OpenAIError(error.status, error.message, { headers: error.headers, cause: error });
  }
  if (error instanceof InferenceError) {
    const options = { cause: error };
    switch (error.code) {
      case "INVALID_ARG":
      case "UNSUPPORTED":
        return new OpenAIError(400, error.message, options);
      case "NOT_FOUND":
        return new OpenAIError(404, error.message, { ...options, code: "model_not_found" });
      case "UNAVAILABLE":
        return error.message.includes(QUEUE_FULL_MESSAGE)
          ? new OpenAIError(429, error.message, {
            ...options,
            type: "requests",
            code: "rate_limit_exceeded",
          })
          : new OpenAIError(503, error.message, { ...options, type: "server_error" });
      default:
        return new OpenAIError(httpStatusOf(error.code), error.message, {
          ...options,
          type: "server_error",
        });
    }
  }
  const message = describeError(error);
  return new OpenAIError(500, message, { type: "server_error", cause: error });
}

/**
 * The HTTP response of an OpenAI error.
 *
 * @param error The error.
 * @returns The JSON response with its status.
 */
export function openAIErrorResponse(error: OpenAIError): Response {
  return new Response(JSON.stringify(error.body), {
    status: error.status,
    headers: { "content-type": "application/json", ...error.headers },
  });
}
