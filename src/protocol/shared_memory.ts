/**
 * The shared-memory tensor parameters of the KServe v2 shared-memory extension, one rule for
 * both front ends: an input or requested output with `shared_memory_region` (string) and
 * `shared_memory_byte_size` (integer), plus an optional `shared_memory_offset` (integer,
 * default 0), has its bytes in a registered region instead of the request or response; and
 * the byte counts of a register request. What a server does with them (holding the regions a
 * request uses) is `src/frontend/shared_memory.ts`'s.
 *
 * @module
 */

import { InferenceError } from "../errors.ts";

/** Where one tensor lies in shared memory. */
export interface SharedMemoryRef {
  /** The registered region's name. */
  readonly region: string;
  /** The tensor's size in bytes. */
  readonly byteSize: number;
  /** Its offset in the region, in bytes. */
  readonly offset: number;
}

/** Names a register request in {@linkcode byteCount}'s errors. */
export const REGISTER_REQUEST = "the shared memory register request";

/**
 * Reads a byte count or offset of the shared-memory extension, one rule for both front ends
 * and for tensor parameters and register requests alike: a non-negative safe integer.
 *
 * @param value The value (a JSON number or bigint, or a decoded gRPC integer as a bigint).
 * @param key Its name, e.g. `offset`.
 * @param what Names where it came from in errors, e.g. `the shared memory register request`.
 * @returns The count.
 * @throws {InferenceError} (INVALID_ARG) For anything else.
 *
 * @example A bigint offset, and one too large refused
 * ```ts
 * import { byteCount } from "./shared_memory.ts";
 * import assert from "node:assert/strict";
 *
 * assert.equal(byteCount(16n, "offset", "the shared memory register request"), 16);
 * assert.throws(
 *   () => byteCount(2n ** 64n - 1n, "offset", "the shared memory register request"),
 *   /Unable to parse 'offset' of the shared memory register request: expected a non-negative integer/,
 * );
 * ```
 */
export function byteCount(value: unknown, key: string, what: string): number {
  const number = typeof value === "bigint" ? Number(value) : value;
  if (typeof number !== "number" || !Number.isSafeInteger(number) || number < 0) {
    throw InferenceError.invalidArg(
      `Unable to parse '${key}' of ${what}: expected a non-negative integer`,
    );
  }
  return number;
}

/**
 * Reads the shared-memory parameters of one tensor.
 *
 * @param parameters The tensor's parameters (plain values: JSON's, or gRPC's decoded).
 * @param what Names the tensor in errors, e.g. `input 'x'`.
 * @returns Where the tensor lies, or `undefined` when it sets none of the parameters.
 * @throws {InferenceError} (INVALID_ARG) When a value has the wrong type, or the region or the
 *   byte size is given without the other.
 *
 * @example A region reference, none, and a missing size refused
 * ```ts
 * import { sharedMemoryRef } from "./shared_memory.ts";
 * import assert from "node:assert/strict";
 *
 * assert.deepEqual(
 *   sharedMemoryRef({ shared_memory_region: "r", shared_memory_byte_size: 16 }, "input 'x'"),
 *   { region: "r", byteSize: 16, offset: 0 },
 * );
 * assert.equal(sharedMemoryRef({ binary_data_size: 4 }, "input 'x'"), undefined);
 * assert.throws(
 *   () => sharedMemoryRef({ shared_memory_region: "r" }, "input 'x'"),
 *   /'shared_memory_byte_size' is required/,
 * );
 * ```
 */
export function sharedMemoryRef(
  parameters: Readonly<Record<string, unknown>> | undefined,
  what: string,
): SharedMemoryRef | undefined {
  if (parameters === undefined) return undefined;
  const region = parameters["shared_memory_region"];
  const size = parameters["shared_memory_byte_size"];
  const offset = parameters["shared_memory_offset"];
  if (region === undefined && size === undefined && offset === undefined) return undefined;
  if (region === undefined) {
    throw InferenceError.invalidArg(
      `Invalid shared memory parameters of ${what}: 'shared_memory_region' is required with '${
        size !== undefined ? "shared_memory_byte_size" : "shared_memory_offset"
      }'`,
    );
  }
  if (typeof region !== "string") {
    throw InferenceError.invalidArg(
      `Unable to parse 'shared_memory_region' of ${what}: expected a string`,
    );
  }
  if (size === undefined) {
    throw InferenceError.invalidArg(
      `Invalid shared memory parameters of ${what}: 'shared_memory_byte_size' is required with 'shared_memory_region'`,
    );
  }
  return {
    region,
    byteSize: byteCount(size, "shared_memory_byte_size", what),
    offset: offset === undefined ? 0 : byteCount(offset, "shared_memory_offset", what),
  };
}
