/**
 * A server's model repository: the models bound to it. The repository extension loads and
 * unloads them, as Triton's explicit model control does with the models of its repository
 * directories: an unloaded model stays bound and can be loaded again; a name never bound (or
 * unbound) is not in the repository. The index shows each bound version's state the way Triton
 * does, the same on both engines: `LOADING`, `READY`, `UNLOADING`, or `UNAVAILABLE` with the
 * reason (`unloaded`, or the error of its last load).
 *
 * @module
 */

import type {
  Engine,
  LoadOptions,
  ModelDefinition,
  RepositoryIndexEntry,
} from "./engine/engine.ts";
import { type ModelRepository, notInRepository } from "./engine/repository.ts";
import { InferenceError, messageOf } from "./errors.ts";

/** What the repository needs from the facade. */
export interface BoundModelRepositoryOptions {
  /** The bound models (the facade's own map, read live). */
  readonly models: ReadonlyMap<string, ModelDefinition>;
  /** The running engine; `undefined` while the server is not running. */
  readonly engine: () => Engine | undefined;
  /** Loads a model into the running engine (and says it is ready). */
  readonly load: (model: ModelDefinition, options?: LoadOptions) => Promise<void>;
}

interface VersionStatus {
  state: "LOADING" | "READY" | "UNLOADING" | "UNAVAILABLE";
  reason: string;
}

/**
 * The repository of the bound models, with each version's state.
 *
 * @example Load, unload and load again
 * ```ts
 * import { BoundModelRepository } from "./model_repository.ts";
 * import type { ModelDefinition } from "./engine/engine.ts";
 * import assert from "node:assert/strict";
 *
 * const model = { name: "m", version: 1 } as ModelDefinition;
 * const loaded = new Set<string>();
 * const engine = {
 *   unloadModel: (name: string) => Promise.resolve(void loaded.delete(name)),
 * } as unknown as import("./engine/engine.ts").Engine;
 * const repository = new BoundModelRepository({
 *   models: new Map([["m/1", model]]),
 *   engine: () => engine,
 *   load: (m) => Promise.resolve(void loaded.add(m.name)),
 * });
 * await repository.loadVersion(model);
 * assert.deepEqual(repository.index(false), [{ name: "m", version: "1", state: "READY" }]);
 * await repository.unload("m");
 * assert.deepEqual(repository.index(false), [
 *   { name: "m", version: "1", state: "UNAVAILABLE", reason: "unloaded" },
 * ]);
 * await repository.load("m");
 * assert.deepEqual([...loaded], ["m"]);
 * await assert.rejects(repository.load("other"), /failed to poll from model repository/);
 * ```
 */
export class BoundModelRepository implements ModelRepository {
  #options: BoundModelRepositoryOptions;
  #status = new WeakMap<ModelDefinition, VersionStatus>();
  /** The last action on each model (by lower-case name): actions on one model run in turn. */
  #turns = new Map<string, Promise<unknown>>();

  /**
   * Creates the repository over the facade's bound models.
   *
   * @param options The bound models, the engine and how to load a model.
   */
  constructor(options: BoundModelRepositoryOptions) {
    this.#options = options;
  }

  /**
   * Runs `action` once the actions already asked for on the same model have settled, so a load,
   * an unload and an unbind of one model never overlap.
   *
   * @param name The model name.
   * @param action What to do.
   * @returns The action's outcome.
   */
  exclusive<T>(name: string, action: () => Promise<T>): Promise<T> {
    const key = name.toLowerCase();
    const previous = this.#turns.get(key) ?? Promise.resolve();
    const turn = previous.catch(() => {}).then(action);
    const settled = turn.catch(() => {});
    this.#turns.set(key, settled);
    void settled.then(() => {
      if (this.#turns.get(key) === settled) this.#turns.delete(key);
    });
    return turn;
  }

  /**
   * Loads one bound version into the running engine, recording its state: `LOADING`, then
   * `READY`, or `UNAVAILABLE` with the load's error as the reason. With `replace`, the model is
   * not bound yet: the versions it replaces stay bound and serving (the index shows them) until
   * it is ready, and the caller binds it in their place then.
   *
   * @param model The bound model.
   * @param options Whether it replaces the versions of its name (the engine's `replace`).
   * @returns When it is ready.
   * @throws {Error} The load's error.
   */
  async loadVersion(model: ModelDefinition, options: LoadOptions = {}): Promise<void> {
    const status: VersionStatus = { state: "LOADING", reason: "" };
    this.#status.set(model, status);
    try {
      await this.#options.load(model, options);
      status.state = "READY";
    } catch (error) {
      status.state = "UNAVAILABLE";
      status.reason = messageOf(error);
      throw error;
    }
  }

  /**
   * Unloads one bound version from the running engine, which keeps knowing it (requests get
   * UNAVAILABLE), recording `UNAVAILABLE` with the reason `unloaded`.
   *
   * @param model The bound model.
   * @returns When it is unloaded.
   */
  async unloadVersion(model: ModelDefinition): Promise<void> {
    const status = this.#status.get(model);
    const engine = this.#options.engine();
    if (status === undefined || status.state === "UNAVAILABLE" || engine === undefined) return;
    status.state = "UNLOADING";
    try {
      await engine.unloadModel(model.name, model.version);
    } catch (error) {
      // Unloaded already: the engine stopped meanwhile.
      if (!(error instanceof InferenceError && error.code === "NOT_FOUND")) {
        status.state = "READY";
        throw error;
      }
    }
    status.state = "UNAVAILABLE";
    status.reason = "unloaded";
  }

  #versions(name: string): ModelDefinition[] {
    return [...this.#options.models.values()]
      .filter((model) => model.name === name)
      .sort((a, b) => a.version - b.version);
  }

  #running(name: string, action: string): void {
    if (this.#options.engine() === undefined) {
      throw InferenceError.unavailable(
        `Cannot ${action} model '${name}': the server is not running`,
      );
    }
  }

  /**
   * Loads every bound version of the model that is not ready.
   *
   * @param name The model name.
   * @returns When every version is ready.
   * @throws {InferenceError} NOT_FOUND `failed to load '<name>', failed to poll from model
   *   repository` (Triton's message) for a name not bound; the load's error otherwise.
   */
  load(name: string): Promise<void> {
    return this.exclusive(name, async () => {
      const versions = this.#versions(name);
      if (versions.length === 0) throw notInRepository(name);
      this.#running(name, "load");
      for (const model of versions) {
        if (this.#status.get(model)?.state !== "READY") await this.loadVersion(model);
      }
    });
  }

  /**
   * Unloads every bound version of the model; it stays bound. Like Triton, unloading a name
   * that is not in the repository succeeds.
   *
   * @param name The model name.
   * @returns When every version is unloaded.
   */
  unload(name: string): Promise<void> {
    return this.exclusive(name, async () => {
      const versions = this.#versions(name);
      if (versions.length === 0) return;
      this.#running(name, "unload");
      for (const model of versions) await this.unloadVersion(model);
    });
  }

  /**
   * The index of the bound models: by name then version, each version with its state (and the
   * reason when it is unavailable); a model not loaded since the server started is listed by
   * name only, as Triton lists a model it never loaded.
   *
   * @param readyOnly Only ready versions.
   * @returns The entries.
   */
  index(readyOnly: boolean): RepositoryIndexEntry[] {
    const models = [...this.#options.models.values()].sort((a, b) =>
      a.name < b.name ? -1 : a.name > b.name ? 1 : a.version - b.version
    );
    const entries: RepositoryIndexEntry[] = [];
    for (const model of models) {
      const status = this.#status.get(model);
      if (status === undefined) {
        if (!readyOnly && entries.at(-1)?.name !== model.name) entries.push({ name: model.name });
        continue;
      }
      if (readyOnly && status.state !== "READY") continue;
      entries.push({
        name: model.name,
        version: String(model.version),
        state: status.state,
        ...(status.reason === "" || status.state !== "UNAVAILABLE"
          ? {}
          : { reason: status.reason }),
      });
    }
    return entries;
  }
}
