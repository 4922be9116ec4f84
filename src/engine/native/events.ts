/**
 * The client-side completion pump. The C bridge's response-complete and request-release
 * callbacks (which run on Triton threads, or inside `ServerInferAsync` on a cache hit) push
 * `(tag, kind, flags, pointer)` events onto the engine's queue in C (`ffi/dt_client.c`); this
 * pump drains them with a nonblocking FFI wait and dispatches them to the request that owns the
 * tag (it holds no queue of its own). It runs only while requests are pending,
 * so an idle engine leaves no wait in flight.
 *
 * @module
 */

import type { BridgeLibrary } from "./ffi.ts";

/** What a pending request does with its events. */
export interface CompletionHandlers {
  /** A response (null for a flags-only final) with its complete flags. */
  response(response: Deno.PointerValue, flags: number): void;
  /** The request is back in our hands (`RELEASE_ALL`). */
  release(request: Deno.PointerValue, flags: number): void;
}

const EVENT_RESPONSE = 1;
const EVENT_RELEASE = 2;
const BATCH = 64;

// The bridge routes each event by the queue id in a tag's top 16 bits.
const QUEUE_SHIFT = 48n;

/**
 * Dispatches bridge events to pending requests, pumping only while any are pending. Each pump
 * has its own C-side queue, so engines sharing a process never see each other's events.
 */
export class CompletionPump implements Disposable {
  #bridge: BridgeLibrary;
  #id: bigint;
  #handlers = new Map<bigint, CompletionHandlers>();
  #nextTag: bigint;
  #closed = false;
  #pump: Promise<void> | undefined;
  #events = new BigUint64Array(BATCH * 3);

  /**
   * Creates the queue.
   *
   * @param bridge The bridge library.
   */
  constructor(bridge: BridgeLibrary) {
    this.#bridge = bridge;
    this.#id = bridge.dt_events_open();
    if (this.#id === 0n) throw new Error("Cannot open a DenoTriton event queue: out of memory");
    this.#nextTag = (this.#id << QUEUE_SHIFT) | 1n;
  }

  /** Closes the C-side queue; call once the pump is idle (see {@linkcode CompletionPump.idle}). */
  [Symbol.dispose](): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#bridge.dt_events_close(this.#id);
  }

  /** How many requests wait for events. */
  get pending(): number {
    return this.#handlers.size;
  }

  /**
   * Registers a request's handlers and returns its tag (the callbacks' userp).
   *
   * @param handlers The handlers.
   * @returns The tag.
   */
  register(handlers: CompletionHandlers): bigint {
    const tag = this.#nextTag++;
    this.#handlers.set(tag, handlers);
    this.#pump ??= this.#run();
    return tag;
  }

  /**
   * Forgets a tag (after its release, or when submitting failed).
   *
   * @param tag The tag.
   */
  unregister(tag: bigint): void {
    this.#handlers.delete(tag);
    if (this.#handlers.size === 0) this.#bridge.dt_wake_events(this.#id);
  }

  /** Resolves when the pump has stopped (nothing pending). */
  async idle(): Promise<void> {
    while (this.#pump !== undefined) await this.#pump;
  }

  async #run(): Promise<void> {
    try {
      while (this.#handlers.size > 0) {
        const count = await this.#bridge.dt_wait_events(this.#id, this.#events, BATCH, 1000);
        if (count < 0) break; // closed
        for (let i = 0; i < count; i++) {
          const tag = this.#events[i * 3]!;
          const kindFlags = Number(this.#events[i * 3 + 1]!);
          const pointer = Deno.UnsafePointer.create(this.#events[i * 3 + 2]!);
          const handlers = this.#handlers.get(tag);
          if (handlers === undefined) continue;
          const kind = kindFlags & 0xff;
          const flags = kindFlags >> 8;
          try {
            if (kind === EVENT_RESPONSE) handlers.response(pointer, flags);
            else if (kind === EVENT_RELEASE) handlers.release(pointer, flags);
          } catch (error) {
            // A handler bug must not stop the pump that every other request depends on.
            console.error("DenoTriton completion handler failed:", error);
          }
        }
      }
    } finally {
      this.#pump = undefined;
      // A request registered while the last wait was finishing needs a fresh pump.
      if (this.#handlers.size > 0 && !this.#closed) this.#pump = this.#run();
    }
  }
}
