/**
 * Stopping the Triton core without corrupting its heap. `ServerStop` waits for in-flight
 * requests up to the exit timeout and unloads every model; batches still running are then given
 * up (UNAVAILABLE) and released once their instances are done with them; the server may be
 * deleted only after every request was released and deleted (requests hold the core's models)
 * and, after an exit timeout, every model's unload finished (the core deletes each model on a
 * thread of its own). A batch that can never be released (a Worker stuck in synchronous code)
 * leaves the core undeleted rather than hanging `stop()`.
 *
 * @module
 */

import type { Logger } from "../../log.ts";
import type { RepositoryIndexEntry } from "../engine.ts";
import type { CoreLibrary, NativeLibraries } from "../../native/ffi.ts";
import { disposeInstances, type LoadedModel, type LoaderContext } from "./model_loader.ts";
import { repositoryIndex } from "./queries.ts";
import { takeError } from "./status.ts";

/** How long stop waits for given-up batches to be released after the exit timeout. */
const STUCK_GRACE_MS = 5000;

/** Whether `work` settles within `ms`. */
async function within(work: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const expired = new Promise<boolean>((resolve) => timer = setTimeout(resolve, ms, false));
  try {
    return await Promise.race([work.then(() => true, () => true), expired]);
  } finally {
    clearTimeout(timer);
  }
}

/** Polls the repository index until no model is loaded or unloading (bounded). */
async function untilUnloaded(core: CoreLibrary, server: Deno.PointerValue): Promise<boolean> {
  const deadline = performance.now() + STUCK_GRACE_MS;
  while (performance.now() < deadline) {
    let index: RepositoryIndexEntry[];
    try {
      index = repositoryIndex(core, server, false);
    } catch {
      return false;
    }
    const unloaded = index.every((entry) => entry.state === "UNAVAILABLE");
    // After the state changes, the model's deleter thread still has a few steps to take.
    await new Promise((resolve) => setTimeout(resolve, 50));
    if (unloaded) return true;
  }
  return false;
}

/** What {@linkcode releaseServer} aborts, and what it waits for. */
export interface ServerRelease {
  /** Aborted here: running batches fail with UNAVAILABLE. */
  readonly abandon: AbortController;
  /** Settles once every pending request was released and deleted. */
  readonly pending: () => Promise<void>;
}

/**
 * Stops the core's server and releases everything it holds of ours: the running batches (given
 * up), the channels, the instances, and the requests still pending.
 *
 * @param context The engine's context (libraries, server, logger).
 * @param models The loaded models.
 * @param release What is aborted for the running batches, and what waits for pending requests.
 * @returns Whether the server may be deleted now.
 */
export async function releaseServer(
  context: LoaderContext,
  models: readonly LoadedModel[],
  release: ServerRelease,
): Promise<boolean> {
  const { abandon, pending } = release;
  const { core, bridge } = context.libraries;
  const stopError = takeError(core, await core.TRITONSERVER_ServerStop(context.server));
  if (stopError !== undefined) context.logger?.warn(`Triton stop: ${stopError.message}`);
  // The core waited for in-flight requests up to the exit timeout: batches still running fail
  // with UNAVAILABLE now, idle consumers end with their channels, and the instances stop (a
  // Worker must have ended before the core may free the inputs it reads in place).
  abandon.abort();
  for (const model of models) bridge.dt_channel_close(model.channel);
  const disposed = Promise.all(
    models.map((model) => disposeInstances(context, model.definition.name, model)),
  );
  let clean = await within(Promise.all(models.map((model) => model.consumers)), STUCK_GRACE_MS);
  await disposed;
  if (clean) clean = await within(pending(), STUCK_GRACE_MS);
  if (clean && stopError !== undefined) clean = await untilUnloaded(core, context.server);
  if (!clean) {
    // A Worker stuck in synchronous code cannot be stopped, and its batch cannot be released:
    // the core is left as it is, to the process's exit.
    context.logger?.error(
      "Triton stop: a batch was never released (a Worker instance stuck in synchronous code?): the core is not deleted",
    );
  }
  return clean;
}

/**
 * Deletes the core's server (after {@linkcode releaseServer} said it may), through the bridge:
 * the delete resets process-wide state in the core that another server's start sets, so the
 * two are serialized (`ffi/dt_server.c`).
 *
 * @param libraries The core and the bridge.
 * @param server The server.
 * @param logger Where a failure is logged.
 */
export async function deleteServer(
  libraries: NativeLibraries,
  server: Deno.PointerValue,
  logger: Logger | undefined,
): Promise<void> {
  const { core, bridge } = libraries;
  const failure = takeError(core, await bridge.dt_server_delete(server));
  if (failure !== undefined) logger?.warn(`Triton delete: ${failure.message}`);
}
