/**
 * Names of the KServe v2 protocol as Triton 2.51 speaks it, which the front ends send and the
 * client recognises. (The message of a full queue, which the engines throw, is in `errors.ts`.)
 *
 * @module
 */

/**
 * The response parameter that marks the last response of a request on a gRPC stream.
 *
 * @example The final-response parameter's name
 * ```ts
 * import { FINAL_RESPONSE_PARAMETER } from "./constants.ts";
 * import assert from "node:assert/strict";
 *
 * assert.equal(FINAL_RESPONSE_PARAMETER, "triton_final_response");
 * ```
 */
export const FINAL_RESPONSE_PARAMETER = "triton_final_response";

/**
 * The request parameter that asks for a flags-only final response on a gRPC stream: the only
 * `triton_` request parameter a client may send.
 *
 * @example The empty-final-response parameter's name
 * ```ts
 * import { EMPTY_FINAL_PARAMETER } from "./constants.ts";
 * import assert from "node:assert/strict";
 *
 * assert.equal(EMPTY_FINAL_PARAMETER, "triton_enable_empty_final_response");
 * ```
 */
export const EMPTY_FINAL_PARAMETER = "triton_enable_empty_final_response";
