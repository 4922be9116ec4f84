/**
 * The client-side completion pump. The C bridge's response-complete and request-release
 * callbacks push `(tag, kind, flags, pointer)` events onto the engine's queue in C
 * (`ffi/dt_client.c`); this pump dispatches them to the request that owns the tag (it holds no
 * queue of its own). Most events are pushed on this thread, inside its own synchronous calls
 * (`dt_send` and `dt_batch_done` run the callbacks, and so does `ServerInferAsync` on a cache
 * hit): those wake nobody in C and are taken with {@linkcode CompletionPump.drain} right after
 * the call, with no thread hop. Events from Triton's threads (queue timeouts, cancellations,
 * errors the core answers itself) wake a nonblocking FFI wait that runs only while requests are
 * pending, so an idle engine leaves no wait in flight. A thread sharing the core gets most of its
 * events from the isolate that runs the batches, which rings the queue's signal for them
 * (`queue_signals.ts`) instead of waking that wait.
 *
 * @module
 */

import type { BridgeLibrary } from "../../native/ffi.ts";
import { SignalListener } from "../../isolate/signal.ts";
import { SlotTable } from "../../slot_set.ts";
import type { QueueSignal } from "./queue_signals.ts";

/** What a pending request does with its events. */
export interface CompletionHandlers {
  /** A response (null for a flags-only final) with its complete flags. */
  response(response: Deno.PointerValue, flags: number): void;
  /** The request is back in our hands (`RELEASE_ALL`). */
  release(request: Deno.PointerValue, flags: number): void;
  /**
   * A traced request's trace event: an activity (`kind` 3; `flags` the activity, `value` its
   * timestamp in ns), a tensor (4; `value` the address of the bridge's blob, freed after this
   * returns), or the trace's end (5).
   */
  trace?(kind: number, flags: number, value: bigint): void;
}

const EVENT_RESPONSE = 1;
const EVENT_RELEASE = 2;
/** Trace events (`ffi/dt_client.c`): an activity, a tensor's blob, the trace's end. */
export const EVENT_TRACE_ACTIVITY = 3;
/** A traced tensor: the event's value is the address of a blob the bridge allocated. */
export const EVENT_TRACE_TENSOR = 4;
/** The core released the trace (after `REQUEST_END`). */
export const EVENT_TRACE_END = 5;
const BATCH = 64;
// How long the wait stays parked after the last pending request ends: a request arriving
// meanwhile reuses it instead of starting a new nonblocking call.
const LINGER_MS = 50;

// The bridge routes each event by the queue id in a tag's top 16 bits; below it, the request's id
// in the handler table.
const QUEUE_SHIFT = 48n;
const ID_MASK = (1n << QUEUE_SHIFT) - 1n;

/**
 * Dispatches bridge events to pending requests, pumping only while any are pending. Each pump
 * has its own C-side queue, so engines sharing a process never see each other's events.
 */
export class CompletionPump implements Disposable {
  #bridge: BridgeLibrary;
  #id: bigint;
  // The handlers by id, in slots: not a Map, which every request adds to and deletes from (see
  // slot_set.ts). An event for an id no longer registered (a late trace event) finds nothing.
  #handlers = new SlotTable<CompletionHandlers>({ idBits: Number(QUEUE_SHIFT) });
  #base: bigint;
  #closed = false;
  #pump: Promise<void> | undefined;
  #polled = new BigUint64Array(BATCH * 3);
  #draining = false;
  #again = false;
  #linger: ReturnType<typeof setTimeout> | undefined;
  #idleSince = 0;
  #signal: SharedArrayBuffer | undefined;

  /**
   * Creates the queue.
   *
   * @param bridge The bridge library.
   * @param signal Where the isolate that runs the batches rings this queue's completions, when
   * that is another isolate (a thread sharing the core): the pump then listens on it as well
   * as waiting in C, where only Triton's own threads wake it.
   */
  constructor(bridge: BridgeLibrary, signal?: QueueSignal) {
    this.#bridge = bridge;
    this.#id = bridge.dt_events_open();
    if (this.#id === 0n) throw new Error("Cannot open a DenoTriton event queue: out of memory");
    this.#base = this.#id << QUEUE_SHIFT;
    if (signal !== undefined) {
      bridge.dt_events_signal(this.#id, signal.token);
      this.#signal = signal.buffer;
    }
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
    const tag = this.#base | BigInt(this.#handlers.add(handlers));
    this.#pump ??= this.#run();
    return tag;
  }

  /**
   * Forgets a tag (after its release, or when submitting failed).
   *
   * @param tag The tag.
   */
  unregister(tag: bigint): void {
    if (this.#handlers.delete(Number(tag & ID_MASK)) === undefined) return;
    if (this.#handlers.size === 0 && this.#pump !== undefined) {
      this.#idleSince = performance.now();
      // One timer per linger period, not per request: it re-arms itself while requests keep
      // coming and going.
      this.#linger ??= this.#lingerFor(LINGER_MS);
    }
  }

  #lingerFor(ms: number): ReturnType<typeof setTimeout> {
    const linger = setTimeout(() => {
      this.#linger = undefined;
      if (this.#handlers.size > 0) return;
      const idle = performance.now() - this.#idleSince;
      if (idle >= LINGER_MS) this.#stopWaiting();
      else this.#linger = this.#lingerFor(LINGER_MS - idle);
    }, ms);
    Deno.unrefTimer(linger);
    return linger;
  }

  /**
   * Dispatches the events already queued, without waiting: call it after a synchronous bridge
   * or core call that may have completed requests on this thread. Reentrant calls (a handler
   * that completes another request) are folded into the running one.
   */
  drain(): void {
    if (this.#closed) return;
    if (this.#draining) {
      this.#again = true;
      return;
    }
    this.#draining = true;
    try {
      do {
        this.#again = false;
        let count: number;
        do {
          count = this.#bridge.dt_poll_events(this.#id, this.#polled, BATCH);
          this.#dispatch(this.#polled, count);
        } while (count === BATCH);
      } while (this.#again);
    } finally {
      this.#draining = false;
    }
  }

  /** Resolves when the pump has stopped (nothing pending). */
  async idle(): Promise<void> {
    if (this.#handlers.size === 0) this.#stopWaiting();
    while (this.#pump !== undefined) await this.#pump;
  }

  #stopWaiting(): void {
    if (this.#linger !== undefined) {
      clearTimeout(this.#linger);
      this.#linger = undefined;
    }
    if (this.#handlers.size === 0 && !this.#closed) this.#bridge.dt_wake_events(this.#id);
  }

  #dispatch(events: BigUint64Array, count: number): void {
    for (let i = 0; i < count; i++) {
      const tag = events[i * 3]!;
      const kindFlags = Number(events[i * 3 + 1]!);
      const value = events[i * 3 + 2]!;
      const handlers = this.#handlers.get(Number(tag & ID_MASK));
      const kind = kindFlags & 0xff;
      const flags = kindFlags >> 8;
      try {
        if (kind >= EVENT_TRACE_ACTIVITY) handlers?.trace?.(kind, flags, value);
        else if (handlers === undefined) continue;
        else if (kind === EVENT_RESPONSE) {
          handlers.response(Deno.UnsafePointer.create(value), flags);
        } else if (kind === EVENT_RELEASE) {
          handlers.release(Deno.UnsafePointer.create(value), flags);
        }
      } catch (error) {
        // A handler bug must not stop the pump that every other request depends on.
        console.error("DenoTriton completion handler failed:", error);
      } finally {
        // A tensor's blob is the bridge's allocation, whoever read it (or nobody).
        if (kind === EVENT_TRACE_TENSOR) this.#bridge.dt_free(Deno.UnsafePointer.create(value));
      }
    }
  }

  async #run(): Promise<void> {
    // Listening before the first wait starts: a ring before this was for events queued before
    // it, which that wait finds at once.
    const listener = this.#signal === undefined ? undefined : new SignalListener(
      this.#signal,
      () => this.drain(),
      (error) => console.error("DenoTriton completion pump failed:", error),
    );
    try {
      while (this.#handlers.size > 0) {
        // The wait only reports that events are queued; taking them here, on this thread, keeps
        // them in the order they were pushed.
        const count = await this.#bridge.dt_wait_events(this.#id, 1000);
        if (count < 0) break; // closed
        if (count > 0) this.drain();
      }
    } finally {
      if (listener !== undefined) await listener.stop();
      this.#pump = undefined;
      // A request registered while the last wait was finishing needs a fresh pump.
      if (this.#handlers.size > 0 && !this.#closed) this.#pump = this.#run();
    }
  }
}
