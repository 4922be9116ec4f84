/**
 * The built-in engine's model registry: every version of every model it was asked to load, with
 * Triton's version states (`LOADING`, `READY`, `UNLOADING`, `UNAVAILABLE`), the lookup a request
 * makes (with Triton's messages for unknown and unavailable versions), readiness and the
 * repository index.
 *
 * @module
 */

import { InferenceError } from "../../errors.ts";
import type { ModelInstance } from "../../instances/instance.ts";
import type { ModelDefinition, ModelHandle, RepositoryIndexEntry } from "../engine.ts";
import { modelHandle } from "../model_handle.ts";
import { lookupVersion } from "../model_lookup.ts";
import type { EnsembleScheduler } from "./ensemble.ts";
import type { Scheduler } from "./scheduler.ts";
import { ModelStatsRecorder } from "./statistics.ts";

/** Triton's states of a model version. */
export type ModelState = "LOADING" | "READY" | "UNLOADING" | "UNAVAILABLE";

/** One model version. */
export interface ModelEntry {
  /** What was bound. */
  readonly definition: ModelDefinition;
  /** The handle requests receive, built once. */
  readonly handle: ModelHandle;
  /** Its state. */
  state: ModelState;
  /** Why it is unavailable (`"unloaded"` after an unload). */
  reason: string;
  /** Its started instances. */
  instances: ModelInstance[];
  /** Its scheduler, while it is ready or unloading (an ensemble's runs its steps). */
  scheduler: Scheduler | EnsembleScheduler | undefined;
  /** Its statistics. */
  readonly stats: ModelStatsRecorder;
}

function isReady(entry: ModelEntry): boolean {
  return entry.state === "READY";
}

function entryOf(model: ModelDefinition): ModelEntry {
  return {
    definition: model,
    handle: modelHandle(model),
    state: "LOADING",
    reason: "",
    instances: [],
    scheduler: undefined,
    stats: new ModelStatsRecorder(model.name, model.version),
  };
}

/**
 * The versions of every model, by name then version.
 *
 * @example Register, then look up the latest ready version
 * ```ts
 * import { ModelRegistry } from "./registry.ts";
 * import { resolveModelConfig } from "../../config/model_config.ts";
 * import { MainThreadInstances } from "../../instances/main_thread.ts";
 * import assert from "node:assert/strict";
 *
 * const registry = new ModelRegistry();
 * const definition = {
 *   name: "m", version: 1, strict: false, config: resolveModelConfig({}),
 *   inputs: [], outputs: [], instances: new MainThreadInstances([() => []]),
 * };
 * const entry = registry.begin(definition);
 * assert.throws(() => registry.lookup("m"), /'m' has no available versions/);
 * entry.state = "READY";
 * assert.equal(registry.lookup("m"), entry);
 * assert.deepEqual(registry.index(false), [{ name: "m", version: "1", state: "READY" }]);
 * ```
 */
export class ModelRegistry {
  #models = new Map<string, Map<number, ModelEntry>>();
  /** What a loading entry replaced, to put back when it never started. */
  #previous = new WeakMap<ModelEntry, ModelEntry | undefined>();
  /** The candidates loading in the background, by model name (one per name). */
  #candidates = new Map<string, ModelEntry>();

  /**
   * Registers a version that starts loading.
   *
   * @param model The model.
   * @returns Its entry, `LOADING`.
   * @throws {InferenceError} ALREADY_EXISTS when that version is loaded or loading, or a
   *   replacement of the model is loading.
   */
  begin(model: ModelDefinition): ModelEntry {
    this.#refuseWhileReplacing(model.name);
    let versions = this.#models.get(model.name);
    if (versions === undefined) {
      versions = new Map();
      this.#models.set(model.name, versions);
    }
    const existing = versions.get(model.version);
    if (existing !== undefined && existing.state !== "UNAVAILABLE") {
      throw new InferenceError(
        `Cannot load model '${model.name}': version ${model.version} is loaded already`,
        { code: "ALREADY_EXISTS" },
      );
    }
    const entry = entryOf(model);
    versions.set(model.version, entry);
    this.#previous.set(entry, existing);
    return entry;
  }

  #refuseWhileReplacing(name: string): void {
    if (this.#candidates.has(name)) {
      throw new InferenceError(`Cannot load model '${name}': it is being replaced`, {
        code: "ALREADY_EXISTS",
      });
    }
  }

  /**
   * Makes the entry of a version that loads in the background to replace the model's versions
   * ({@linkcode ModelRegistry.promote}): requests do not find it, and find the versions it
   * replaces, until it is promoted.
   *
   * @param model The model.
   * @returns Its entry, `LOADING`, outside the registry.
   * @throws {InferenceError} ALREADY_EXISTS while a version of the model loads.
   */
  candidate(model: ModelDefinition): ModelEntry {
    this.#refuseWhileReplacing(model.name);
    const loading = [...this.#models.get(model.name)?.values() ?? []]
      .find((entry) => entry.state === "LOADING");
    if (loading !== undefined) {
      throw new InferenceError(
        `Cannot replace model '${model.name}': version ${loading.definition.version} is being loaded`,
        { code: "ALREADY_EXISTS" },
      );
    }
    const entry = entryOf(model);
    this.#candidates.set(model.name, entry);
    return entry;
  }

  /**
   * Puts a ready candidate in the place of every version of its model, in one step: the next
   * lookup finds it, and no lookup finds those versions again.
   *
   * @param entry The entry {@linkcode ModelRegistry.candidate} returned, `READY`.
   * @returns The versions it replaced, no longer in the registry (to unload).
   */
  promote(entry: ModelEntry): ModelEntry[] {
    const { name, version } = entry.definition;
    this.#candidates.delete(name);
    const replaced = [...this.#models.get(name)?.values() ?? []];
    this.#models.set(name, new Map([[version, entry]]));
    return replaced;
  }

  /**
   * Forgets a version whose instances never started, as if it had never been asked for (like the
   * Triton engine, where such a model never reaches the core's repository).
   *
   * @param entry The entry {@linkcode ModelRegistry.begin} or
   *   {@linkcode ModelRegistry.candidate} returned.
   */
  forget(entry: ModelEntry): void {
    const { name, version } = entry.definition;
    if (this.#candidates.get(name) === entry) {
      this.#candidates.delete(name);
      return;
    }
    const versions = this.#models.get(name);
    if (versions === undefined || versions.get(version) !== entry) return;
    const existing = this.#previous.get(entry);
    if (existing === undefined) versions.delete(version);
    else versions.set(version, existing);
    if (versions.size === 0) this.#models.delete(name);
  }

  /**
   * The entries an unload names: one version, or all when `version` is undefined.
   *
   * @param name Model name.
   * @param version Model version.
   * @returns The entries.
   * @throws {InferenceError} NOT_FOUND for an unknown model or version.
   */
  named(name: string, version?: number): ModelEntry[] {
    const versions = this.#models.get(name);
    // Any version will do: this throws only for an unknown name or version.
    const entry = lookupVersion({ name, version }, versions, () => true);
    return version === undefined ? [...versions!.values()] : [entry];
  }

  /**
   * Finds a ready model version: the given one, or the latest ready one.
   *
   * @param name Model name.
   * @param version Model version; the latest ready one when undefined or -1.
   * @returns The entry.
   * @throws {InferenceError} NOT_FOUND / UNAVAILABLE with Triton's messages.
   */
  lookup(name: string, version?: number): ModelEntry {
    return lookupVersion({ name, version }, this.#models.get(name), isReady);
  }

  /**
   * Forgets every version of a model that is not ready or loading (an unbound model): its name
   * is unknown afterwards, as if it had never been loaded.
   *
   * @param name Model name.
   * @param version Model version; every version when undefined.
   */
  remove(name: string, version?: number): void {
    const versions = this.#models.get(name);
    if (versions === undefined) return;
    for (const [number, entry] of versions) {
      if (version !== undefined && number !== version) continue;
      if (entry.state === "UNAVAILABLE") versions.delete(number);
    }
    if (versions.size === 0) this.#models.delete(name);
  }

  /**
   * The ready versions of a model, ascending.
   *
   * @param name Model name.
   * @returns The version numbers.
   */
  readyVersions(name: string): number[] {
    return [...this.#models.get(name)?.values() ?? []]
      .filter((entry) => entry.state === "READY")
      .map((entry) => entry.definition.version)
      .sort((a, b) => a - b);
  }

  /**
   * Every version that is ready or unloading (still has statistics and a scheduler), by name
   * then version.
   *
   * @returns The entries.
   */
  loaded(): ModelEntry[] {
    return this.#sorted().filter((entry) => entry.state === "READY" || entry.state === "UNLOADING");
  }

  /**
   * Whether every version is ready or was unloaded on purpose (strict readiness).
   *
   * @returns False while any version loads, unloads or failed.
   */
  allReady(): boolean {
    return this.#sorted().every((entry) =>
      entry.state === "READY" || (entry.state === "UNAVAILABLE" && entry.reason === "unloaded")
    );
  }

  /**
   * The repository index.
   *
   * @param readyOnly Only ready versions.
   * @returns One entry per known model version, by name then version.
   */
  index(readyOnly: boolean): RepositoryIndexEntry[] {
    return this.#sorted()
      .filter((entry) => !readyOnly || entry.state === "READY")
      .map((entry) => ({
        name: entry.definition.name,
        version: String(entry.definition.version),
        state: entry.state,
        ...(entry.reason === "" ? {} : { reason: entry.reason }),
      }));
  }

  #sorted(): ModelEntry[] {
    const entries: ModelEntry[] = [];
    for (const name of [...this.#models.keys()].sort()) {
      const versions = this.#models.get(name)!;
      for (const number of [...versions.keys()].sort((a, b) => a - b)) {
        entries.push(versions.get(number)!);
      }
    }
    return entries;
  }
}
