/**
 * A request body read as one JSON object, for the routes whose body is a small JSON document
 * (repository, trace, logging, shared-memory registration): read within the body limit
 * (decompressed when it is compressed) and refused with 400 unless it is an object.
 *
 * @module
 */

import { InferenceError } from "../../errors.ts";
import { parseJsonBytes } from "../../protocol/json_tensor.ts";
import { readRequestBody } from "./compression.ts";

/**
 * Reads a request's body as a JSON object.
 *
 * @param request The request.
 * @param maxRequestBytes The body limit (after decompression too).
 * @returns The object, or `undefined` for an empty body.
 * @throws {InferenceError} (INVALID_ARG) When the body is not JSON or not an object; the body
 *   reader's errors (too large, an unknown Content-Encoding).
 *
 * @example A JSON object body
 * ```ts
 * import { readJsonBody } from "./json_body.ts";
 * import assert from "node:assert/strict";
 *
 * const body = await readJsonBody(new Request("http://x/", { method: "POST", body: '{"a":1}' }), 1024);
 * assert.deepEqual(body, { a: 1 });
 * await assert.rejects(
 *   readJsonBody(new Request("http://x/", { method: "POST", body: "[1]" }), 1024),
 *   /Unable to parse the request JSON: expected an object/,
 * );
 * ```
 */
export async function readJsonBody(
  request: Request,
  maxRequestBytes: number,
): Promise<Record<string, unknown> | undefined> {
  const body = await readRequestBody(request, maxRequestBytes);
  if (body.byteLength === 0) return undefined;
  let parsed: unknown;
  try {
    parsed = parseJsonBytes(body);
  } catch (error) {
    throw InferenceError.invalidArg(
      `Unable to parse the request JSON: ${(error as Error).message}`,
    );
  }
  if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) {
    throw InferenceError.invalidArg("Unable to parse the request JSON: expected an object");
  }
  return parsed as Record<string, unknown>;
}
