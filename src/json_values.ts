/**
 * Checks of values parsed from JSON (or given by a user) that every layer makes: whether a value
 * is a plain object, and whether it is a non-negative integer that a `number` holds exactly.
 *
 * @module
 */

/**
 * Whether a value is an object with string keys: not `null`, not an array.
 *
 * @param value Any value, e.g. parsed JSON.
 * @returns Whether it is an object.
 *
 * @example Objects, arrays and null
 * ```ts
 * import { isObject } from "./json_values.ts";
 * import assert from "node:assert/strict";
 *
 * assert.ok(isObject({ a: 1 }));
 * assert.ok(!isObject([1]));
 * assert.ok(!isObject(null));
 * ```
 */
export function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/**
 * Whether a value is a `number` that is an integer, at least 0 and at most
 * `Number.MAX_SAFE_INTEGER` (so that it is exact).
 *
 * @param value Any value.
 * @returns Whether it is such a number.
 *
 * @example Integers, fractions and unsafe values
 * ```ts
 * import { isNonNegativeInteger } from "./json_values.ts";
 * import assert from "node:assert/strict";
 *
 * assert.ok(isNonNegativeInteger(0));
 * assert.ok(!isNonNegativeInteger(-1));
 * assert.ok(!isNonNegativeInteger(1.5));
 * assert.ok(!isNonNegativeInteger(2 ** 53));
 * assert.ok(!isNonNegativeInteger("1"));
 * ```
 */
export function isNonNegativeInteger(value: unknown): value is number {
  return typeof value === "number" && Number.isSafeInteger(value) && value >= 0;
}
