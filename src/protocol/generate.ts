/**
 * Wire rules of Triton's generate extension, whose JSON carries no shapes: a value of `count`
 * elements fills a declared shape with the fixed dimensions first, the innermost `-1` takes the
 * remaining elements and every other `-1` is 1. The front end shapes request inputs with it; the
 * client shapes response outputs with it, and refuses inputs it cannot reproduce.
 *
 * @module
 */

/**
 * The shape `count` elements take for a declared `shape`, as Triton 2.51's generate endpoint
 * computes it.
 *
 * @param shape The declared shape, batch axis included (`-1` for variable dimensions).
 * @param count The number of elements given.
 * @returns The concrete shape, or `undefined` when the elements cannot fill it.
 *
 * @example
 * ```ts
 * import { generateShape } from "./generate.ts";
 * import assert from "node:assert/strict";
 *
 * assert.deepEqual(generateShape([-1, -1], 3), [1, 3]);
 * assert.deepEqual(generateShape([-1, 2], 6), [3, 2]);
 * assert.equal(generateShape([4], 3), undefined);
 * ```
 */
export function generateShape(shape: readonly number[], count: number): number[] | undefined {
  const result = [...shape];
  let remaining = count;
  for (const dim of result) {
    if (dim === -1) continue;
    if (dim === 0 ? remaining !== 0 : remaining % dim !== 0) return undefined;
    remaining = dim === 0 ? 0 : remaining / dim;
  }
  for (let i = result.length - 1; i >= 0; i--) {
    if (result[i] === -1) {
      result[i] = remaining;
      remaining = 1;
    }
  }
  return remaining === 1 || (remaining === 0 && count === 0) ? result : undefined;
}

/**
 * The keys of a generate response object that are not outputs or response parameters.
 *
 * @example
 * ```ts
 * import { GENERATE_METADATA_KEYS } from "./generate.ts";
 * import assert from "node:assert/strict";
 *
 * assert.ok(GENERATE_METADATA_KEYS.has("model_version"));
 * ```
 */
export const GENERATE_METADATA_KEYS: ReadonlySet<string> = new Set([
  "model_name",
  "model_version",
  "id",
]);
