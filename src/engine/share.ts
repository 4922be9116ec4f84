/**
 * The other thread's side of an `EngineShare` (`engine.ts`): a client that submits requests to an
 * engine another isolate of this process runs, without passing through that isolate. Only the
 * Triton core can be shared (it is thread-safe); its client is loaded on demand, so a thread that
 * never opens one loads no FFI code.
 *
 * @module
 */

import type { InferenceRequest, InferenceResponse, SharedEngineData } from "./engine.ts";

/** Submits requests to a shared engine from this thread. */
export interface SharedEngineClient {
  /**
   * Runs one request of a coupled model the engine's isolate resolved.
   *
   * @param request The request (its model and version as the engine's isolate resolved them).
   * @param outputOrder The model's output names in declared order.
   * @returns The response.
   */
  infer(request: InferenceRequest, outputOrder: readonly string[]): Promise<InferenceResponse>;
  /** Waits for the requests in flight, then frees the client; submit nothing after calling it. */
  close(): Promise<void>;
}

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
