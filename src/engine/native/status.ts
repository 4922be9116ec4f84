/**
 * Turning what the core hands back into JavaScript values: `TRITONSERVER_Error*` into
 * {@linkcode InferenceError}s (and back into codes), `TRITONSERVER_Message*` into JSON, C strings
 * in both directions.
 *
 * @module
 */

import { type ErrorCode, InferenceError } from "../../errors.ts";
import type { CoreLibrary } from "../../native/ffi.ts";

/** `TRITONSERVER_Error_Code` values in enum order. */
export const ERROR_CODES: readonly ErrorCode[] = [
  "UNKNOWN",
  "INTERNAL",
  "NOT_FOUND",
  "INVALID_ARG",
  "UNAVAILABLE",
  "UNSUPPORTED",
  "ALREADY_EXISTS",
  "CANCELLED",
];

/**
 * The name of a numeric Triton error code.
 *
 * @param code A `TRITONSERVER_Error_Code` value.
 * @returns Its name; `UNKNOWN` for values out of range.
 *
 * @example Code 2 is NOT_FOUND
 * ```ts
 * import { errorCodeName } from "./status.ts";
 * import assert from "node:assert/strict";
 *
 * assert.equal(errorCodeName(2), "NOT_FOUND");
 * ```
 */
export function errorCodeName(code: number): ErrorCode {
  return ERROR_CODES[code] ?? "UNKNOWN";
}

/**
 * The numeric Triton error code of a name.
 *
 * @param code An error code name.
 * @returns Its `TRITONSERVER_Error_Code` value.
 *
 * @example CANCELLED is code 7
 * ```ts
 * import { errorCodeValue } from "./status.ts";
 * import assert from "node:assert/strict";
 *
 * assert.equal(errorCodeValue("CANCELLED"), 7);
 * ```
 */
export function errorCodeValue(code: ErrorCode): number {
  const index = ERROR_CODES.indexOf(code);
  return index < 0 ? 0 : index;
}

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/**
 * A NUL-terminated UTF-8 copy of a string, for `const char*` parameters.
 *
 * @param text The string.
 * @returns Its bytes plus a trailing 0.
 *
 * @example Encode a string with its NUL terminator
 * ```ts
 * import { cString } from "./status.ts";
 * import assert from "node:assert/strict";
 *
 * assert.deepEqual([...cString("ab")], [97, 98, 0]);
 * ```
 */
export function cString(text: string): Uint8Array<ArrayBuffer> {
  const bytes = encoder.encode(text);
  const out = new Uint8Array(new ArrayBuffer(bytes.byteLength + 1));
  out.set(bytes);
  return out;
}

/**
 * Reads a NUL-terminated C string.
 *
 * @param pointer The string, or null.
 * @returns The string ("" for null).
 */
export function readCString(pointer: Deno.PointerValue): string {
  return pointer === null ? "" : Deno.UnsafePointerView.getCString(pointer);
}

/**
 * Consumes a `TRITONSERVER_Error*`: returns it as an {@linkcode InferenceError} and deletes it.
 *
 * @param core The core library.
 * @param error The error, or null for success.
 * @param context A prefix for the message, e.g. "Cannot load model 'm'".
 * @returns The error, or `undefined` for success.
 */
export function takeError(
  core: CoreLibrary,
  error: Deno.PointerValue,
  context?: string,
): InferenceError | undefined {
  if (error === null) return undefined;
  const code = errorCodeName(core.TRITONSERVER_ErrorCode(error));
  const message = readCString(core.TRITONSERVER_ErrorMessage(error));
  core.TRITONSERVER_ErrorDelete(error);
  return new InferenceError(context === undefined ? message : `${context}: ${message}`, { code });
}

/**
 * Throws the error a core call returned, if any.
 *
 * @param core The core library.
 * @param error The returned `TRITONSERVER_Error*`.
 * @param context A prefix for the message.
 * @throws {InferenceError} When `error` is not null.
 */
export function check(core: CoreLibrary, error: Deno.PointerValue, context?: string): void {
  const failure = takeError(core, error, context);
  if (failure !== undefined) throw failure;
}

/**
 * A pointer from an out-parameter slot.
 *
 * @param slot A one-element `BigUint64Array` the core wrote to.
 * @returns The pointer, or null.
 */
export function pointerOf(slot: BigUint64Array): Deno.PointerValue {
  return Deno.UnsafePointer.create(slot[0]!);
}

/**
 * Reads and deletes a `TRITONSERVER_Message*` as JSON.
 *
 * @param core The core library.
 * @param message The message.
 * @returns The parsed JSON.
 */
export function takeMessageJson(core: CoreLibrary, message: Deno.PointerValue): unknown {
  const base = new BigUint64Array(1);
  const size = new BigUint64Array(1);
  try {
    check(core, core.TRITONSERVER_MessageSerializeToJson(message, base, size));
    const length = Number(size[0]);
    const text = length === 0 ? "" : decoder.decode(
      new Uint8Array(Deno.UnsafePointerView.getArrayBuffer(pointerOf(base)!, length)),
    );
    return JSON.parse(text);
  } finally {
    const failure = core.TRITONSERVER_MessageDelete(message);
    if (failure !== null) core.TRITONSERVER_ErrorDelete(failure);
  }
}
