/**
 * The other thread's side of an `EngineShare` (`engine.ts`, which holds the client's contract,
 * `SharedEngineClient`): a client that submits requests to an engine another isolate of this
 * process runs, without passing through that isolate. Only the
 * Triton core can be shared (it is thread-safe); its client is loaded on demand, so a thread that
 * never opens one loads no FFI code.
 *
 * @module
 */

import type { SharedEngineClient, SharedEngineData } from "./engine.ts";

/**
 * Opens a client of a shared engine.
 *
 * @param data The share's cloneable data.
 * @param report Posts a report back to the engine's isolate, for `EngineShare.settle`.
 * @returns The client.
 */
export async function openSharedEngine(
  data: SharedEngineData,
  report: (report: unknown) => void,
): Promise<SharedEngineClient> {
  const { SharedCoreClient } = await import("./native/shared_client.ts");
  return new SharedCoreClient(data, report);
}
