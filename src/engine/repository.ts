/**
 * The model repository the front ends' repository extension (`/v2/repository/...`, gRPC
 * `RepositoryIndex` / `RepositoryModelLoad` / `RepositoryModelUnload`) speaks to. A server's
 * repository is the set of models bound to it (`src/model_repository.ts`); a front end started
 * on a bare engine gets {@linkcode engineRepository}, whose repository is what the engine loaded.
 *
 * @module
 */

import { InferenceError } from "../errors.ts";
import type { Engine, RepositoryIndexEntry } from "./engine.ts";

/** Triton's repository extension over the models a server can serve. */
export interface ModelRepository {
  /**
   * The repository index: one entry per model version, by name then version.
   *
   * @param readyOnly Only ready versions.
   */
  index(readyOnly: boolean): RepositoryIndexEntry[];
  /**
   * Loads every version of a model of the repository that is not loaded; resolves once ready.
   *
   * @throws {InferenceError} INTERNAL for a name not in the repository (Triton's words), or the
   *   load's error.
   */
  load(name: string): Promise<void>;
  /**
   * Unloads every version of a model; it stays in the repository (loadable again). A name not
   * in the repository is unloaded already, as for Triton.
   */
  unload(name: string): Promise<void>;
}

/**
 * The answer to a load of a model the repository does not hold: Triton's message, as NOT_FOUND
 * (HTTP 404). Triton answers INTERNAL (500), but the name is the client's: a 5xx would say the
 * server failed.
 *
 * @param name The model name.
 * @returns NOT_FOUND `failed to load '<name>', failed to poll from model repository`.
 *
 * @example A missing model is NOT_FOUND
 * ```ts
 * import { notInRepository } from "./repository.ts";
 * import assert from "node:assert/strict";
 *
 * assert.equal(notInRepository("m").code, "NOT_FOUND");
 * ```
 */
export function notInRepository(name: string): InferenceError {
  return InferenceError.notFound(`failed to load '${name}', failed to poll from model repository`);
}

/**
 * The repository of a bare engine: the models it has loaded. Loading one that is ready is a
 * no-op; the engine keeps no definitions, so it cannot load others.
 *
 * @param engine The engine.
 * @returns The repository.
 *
 * @example An engine without models
 * ```ts
 * import { engineRepository } from "./repository.ts";
 * import { BuiltinEngine } from "./builtin/engine.ts";
 * import assert from "node:assert/strict";
 *
 * await using engine = new BuiltinEngine();
 * const repository = engineRepository(engine);
 * assert.deepEqual(repository.index(false), []);
 * await assert.rejects(repository.load("m"), /failed to poll from model repository/);
 * await repository.unload("m");
 * ```
 */
export function engineRepository(engine: Engine): ModelRepository {
  return {
    index: (readyOnly) => engine.repositoryIndex(readyOnly),
    load: (name) =>
      engine.modelReady(name) ? Promise.resolve() : Promise.reject(notInRepository(name)),
    async unload(name): Promise<void> {
      try {
        await engine.unloadModel(name);
      } catch (error) {
        if (!(error instanceof InferenceError && error.code === "NOT_FOUND")) throw error;
      }
    },
  };
}

/**
 * Refuses a load that brings a new configuration or files: bound models get theirs from
 * `bind()`. Both front ends apply it to their load requests' parameters.
 *
 * @param name The model name.
 * @param parameters The load's parameter names.
 * @throws {InferenceError} UNSUPPORTED when a `config` or `file:` parameter is among them.
 *
 * @example A load without parameters passes, a new config is refused
 * ```ts
 * import { refuseNewConfiguration } from "./repository.ts";
 * import assert from "node:assert/strict";
 *
 * refuseNewConfiguration("m", []);
 * assert.throws(() => refuseNewConfiguration("m", ["config"]), /with a new configuration/);
 * ```
 */
export function refuseNewConfiguration(name: string, parameters: readonly string[]): void {
  if (parameters.some((key) => key === "config" || key.startsWith("file:"))) {
    throw InferenceError.unsupported(
      `Cannot load model '${name}' with a new configuration: models are bound in code, not loaded from a repository`,
    );
  }
}
