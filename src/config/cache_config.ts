/**
 * Triton's `--cache-config` entries (`TritonConfig.cacheConfig`): `<cache>,<setting>=<value>`,
 * e.g. `local,size=1048576`. One grammar for every reader: config resolution (which reconciles
 * the local cache's size with `responseCacheByteSize`) and the engines' options (one cache
 * config: Triton allows a single cache per server).
 *
 * @module
 */

import { TritonValidationError } from "../errors.ts";

/** A response-cache implementation and its settings (Triton's `--cache-config`). */
export interface CacheConfig {
  /** Cache name; `"local"` is the only one the built-in engine and the Triton wheel ship. */
  name: string;
  /** The cache's settings, e.g. `{ size: "1048576" }`. */
  config: Record<string, unknown>;
}

/** One `cacheConfig` entry, split. */
export interface CacheSetting {
  /** The cache, e.g. `local`. */
  readonly cache: string;
  /** The setting's name, e.g. `size`; `undefined` for an entry without one. */
  readonly setting: string | undefined;
  /** The value as written. */
  readonly value: string;
}

const NON_NEGATIVE_INTEGER = /^\d+$/;

/**
 * Splits a `cacheConfig` entry.
 *
 * @param entry `<cache>,<setting>=<value>`.
 * @returns Its cache, setting and value.
 * @throws {TritonValidationError} For a setting without `=<value>`.
 *
 * @example Split a local cache size entry
 * ```ts
 * import { parseCacheSetting } from "./cache_config.ts";
 * import assert from "node:assert/strict";
 *
 * assert.deepEqual(parseCacheSetting("local,size=1024"), {
 *   cache: "local", setting: "size", value: "1024",
 * });
 * ```
 */
export function parseCacheSetting(entry: string): CacheSetting {
  const comma = entry.indexOf(",");
  if (comma < 0) return { cache: entry, setting: undefined, value: "" };
  const cache = entry.slice(0, comma);
  const rest = entry.slice(comma + 1);
  const equals = rest.indexOf("=");
  if (equals < 1) {
    throw new TritonValidationError(
      `Invalid cacheConfig entry '${entry}': expected <cache>,<setting>=<value>`,
    );
  }
  return { cache, setting: rest.slice(0, equals), value: rest.slice(equals + 1) };
}

/**
 * What is wrong with a `cacheConfig` entry the settings grammar accepts, if anything: a local
 * cache size that is not an integer >= 0.
 *
 * @param entry The entry.
 * @returns The problem, or `undefined`.
 *
 * @example An integer size passes, a word does not
 * ```ts
 * import { cacheSettingProblem } from "./cache_config.ts";
 * import assert from "node:assert/strict";
 *
 * assert.equal(cacheSettingProblem("local,size=8"), undefined);
 * assert.equal(cacheSettingProblem("local,size=big"), "the local cache size must be an integer >= 0");
 * ```
 */
export function cacheSettingProblem(entry: string): string | undefined {
  const { cache, setting, value } = parseCacheSetting(entry);
  if (cache === "local" && setting === "size" && !NON_NEGATIVE_INTEGER.test(value)) {
    return "the local cache size must be an integer >= 0";
  }
  return undefined;
}

/**
 * Whether an entry sets the local cache's size.
 *
 * @param entry The entry.
 * @returns The size, or `undefined` when the entry sets something else.
 *
 * @example The local size, and none for a redis entry
 * ```ts
 * import { localCacheSize } from "./cache_config.ts";
 * import assert from "node:assert/strict";
 *
 * assert.equal(localCacheSize("local,size=64"), 64);
 * assert.equal(localCacheSize("redis,host=h"), undefined);
 * ```
 */
export function localCacheSize(entry: string): number | undefined {
  const { cache, setting, value } = parseCacheSetting(entry);
  return cache === "local" && setting === "size" ? Number(value) : undefined;
}

/**
 * Turns `cacheConfig` entries into one cache config; Triton allows a single cache per server.
 *
 * @param entries The entries.
 * @returns The cache, or `undefined` for no entries.
 * @throws {TritonValidationError} For two different caches or an entry without a setting.
 *
 * @example One cache, none, and two refused
 * ```ts
 * import { parseCacheConfig } from "./cache_config.ts";
 * import assert from "node:assert/strict";
 *
 * assert.deepEqual(parseCacheConfig(["local,size=1024"]), {
 *   name: "local", config: { size: "1024" },
 * });
 * assert.equal(parseCacheConfig([]), undefined);
 * assert.throws(() => parseCacheConfig(["local,size=1", "redis,host=h"]), /only one cache/);
 * ```
 */
export function parseCacheConfig(entries: readonly string[]): CacheConfig | undefined {
  let cache: CacheConfig | undefined;
  for (const entry of entries) {
    const { cache: name, setting, value } = parseCacheSetting(entry);
    if (cache !== undefined && cache.name !== name) {
      throw new TritonValidationError(
        `Invalid cacheConfig: only one cache is allowed, got '${cache.name}' and '${name}'`,
      );
    }
    cache ??= { name, config: {} };
    if (setting !== undefined) cache.config[setting] = value;
  }
  return cache;
}
