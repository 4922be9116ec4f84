/**
 * The one rule both engines follow to resolve the model version a request names, with Triton's
 * messages and codes: a name the engine does not know (never loaded, or unbound) is NOT_FOUND;
 * a known model with no ready version (unloaded through the repository API, or failed) is
 * UNAVAILABLE; a version it does not know is NOT_FOUND, and one that is not ready UNAVAILABLE.
 *
 * @module
 */

import { InferenceError } from "../errors.ts";

/**
 * Resolves a version of a model: the given one, or the latest ready one.
 *
 * @param model The model name, as the request gave it, and the version: the latest ready one
 *   when undefined or -1.
 * @param versions The engine's versions of that model, by number; `undefined` when the engine
 *   does not know the name.
 * @param ready Whether a version is ready.
 * @returns The resolved version's value.
 * @throws {InferenceError} NOT_FOUND / UNAVAILABLE with Triton's messages.
 *
 * @example Unknown, unloaded and ready models
 * ```ts
 * import { lookupVersion } from "./model_lookup.ts";
 * import assert from "node:assert/strict";
 *
 * const ready = (state: string): boolean => state === "READY";
 * assert.throws(() => lookupVersion({ name: "m" }, undefined, ready), {
 *   code: "NOT_FOUND",
 *   message: "Request for unknown model: 'm' is not found",
 * });
 * const versions = new Map([[1, "UNAVAILABLE"]]);
 * assert.throws(() => lookupVersion({ name: "m" }, versions, ready), {
 *   code: "UNAVAILABLE",
 *   message: "Request for unknown model: 'm' has no available versions",
 * });
 * versions.set(2, "READY");
 * assert.equal(lookupVersion({ name: "m" }, versions, ready), "READY");
 * assert.throws(() => lookupVersion({ name: "m", version: 3 }, versions, ready), {
 *   code: "NOT_FOUND",
 *   message: "Request for unknown model: 'm' version 3 is not found",
 * });
 * ```
 */
export function lookupVersion<T>(
  model: { readonly name: string; readonly version?: number | undefined },
  versions: ReadonlyMap<number, T> | undefined,
  ready: (value: T) => boolean,
): T {
  const { name, version } = model;
  if (versions === undefined || versions.size === 0) {
    throw InferenceError.notFound(`Request for unknown model: '${name}' is not found`);
  }
  if (version === undefined || version === -1) {
    let best: [number, T] | undefined;
    for (const [number, value] of versions) {
      if (ready(value) && (best === undefined || number > best[0])) best = [number, value];
    }
    if (best === undefined) {
      throw InferenceError.unavailable(
        `Request for unknown model: '${name}' has no available versions`,
      );
    }
    return best[1];
  }
  if (!versions.has(version)) {
    throw InferenceError.notFound(
      `Request for unknown model: '${name}' version ${version} is not found`,
    );
  }
  const value = versions.get(version)!;
  if (!ready(value)) {
    throw InferenceError.unavailable(
      `Request for unknown model: '${name}' version ${version} is not at ready state`,
    );
  }
  return value;
}
