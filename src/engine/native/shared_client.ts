/**
 * A client of a Triton core that another isolate of this process runs (see
 * `NativeEngine.share`): it opens the same libraries (already loaded: `dlopen` hands out the same
 * ones), a completion queue of its own, and submits each request straight into the server. The
 * responses reach this thread through its queue. Results the engine's isolate lent to them are
 * copied out here, and their addresses reported back so that isolate can let go of them.
 *
 * @module
 */

import { InferenceError } from "../../errors.ts";
import type {
  InferenceRequest,
  InferenceResponse,
  SharedEngineClient,
  SharedEngineData,
} from "../engine.ts";
import { CompletionPump } from "./events.ts";
import { type NativeLibraries, openNative } from "../../native/ffi.ts";
import type { TritonInstall } from "../../setup/install.ts";
import { inferCoupled } from "./request.ts";

/** The Triton core's client in a thread that shares it. */
export class SharedCoreClient implements SharedEngineClient {
  #libraries: NativeLibraries;
  #queue: CompletionPump;
  #server: Deno.PointerValue;
  #report: (report: unknown) => void;
  #closing: Promise<void> | undefined;

  /**
   * Opens the client.
   *
   * @param data The share's data (the install and the server's address).
   * @param report Posts lent addresses back to the engine's isolate.
   */
  constructor(data: SharedEngineData, report: (report: unknown) => void) {
    this.#libraries = openNative(data.install as TritonInstall);
    this.#queue = new CompletionPump(this.#libraries.bridge, data.signal);
    this.#server = Deno.UnsafePointer.create(data.server);
    this.#report = report;
  }

  /**
   * Runs one request.
   *
   * @param request The request.
   * @param outputOrder The model's output names in declared order.
   * @returns The response.
   */
  infer(request: InferenceRequest, outputOrder: readonly string[]): Promise<InferenceResponse> {
    if (this.#closing !== undefined) {
      return Promise.reject(InferenceError.unavailable("The shared Triton core is closed"));
    }
    return inferCoupled(
      { libraries: this.#libraries, queue: this.#queue, server: this.#server },
      request,
      { order: outputOrder, foreignLent: (addresses) => this.#report(addresses) },
    );
  }

  /** Waits until every request's release, then closes the queue. Idempotent. */
  close(): Promise<void> {
    this.#closing ??= (async () => {
      await this.#queue.idle();
      this.#queue[Symbol.dispose]();
    })();
    return this.#closing;
  }
}
