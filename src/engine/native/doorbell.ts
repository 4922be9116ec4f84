/**
 * The batch doorbell: how Triton's instance threads wake this isolate when they park a batch in
 * a slot of the bridge (`ffi/dt_backend.c`). One thread-safe FFI callback per isolate, never
 * closed (instance threads may ring it until the process ends), is handed to every channel; an
 * instance thread rings it with `(channel, slot)` and Deno runs it on this isolate's event loop.
 * That is one thread hop per batch, where a nonblocking FFI wait cost a thread-pool dispatch, a
 * condition-variable wake-up and a promise per batch.
 *
 * The callback is unref'd: a waiting consumer does not keep the event loop alive (pending
 * requests do, through the completion pump). Closing a channel rings each of its slots (the
 * bridge's `dt_channel_close`, called on this thread, where the ring runs synchronously); an
 * instance the core finalizes rings nothing, because the core finalizes on its own threads and
 * those must not wait for this isolate, so {@linkcode untilFinalized} looks while an unload
 * runs. No timer runs per batch.
 *
 * @module
 */

import type { BridgeLibrary } from "../../native/ffi.ts";

const DEFINITION = { parameters: ["u32", "u32"], result: "void" } as const;

let callback: Deno.UnsafeCallback<typeof DEFINITION> | undefined;
// A waiter per rung slot, or `true` for a ring that came before its waiter.
const waiting = new Map<number, (() => void) | true>();

// Channel ids and slot indices are small: one number keys both.
function keyOf(channel: number, slot: number): number {
  return channel * 0x10000 + slot;
}

function ring(channel: number, slot: number): void {
  const key = keyOf(channel, slot);
  const waiter = waiting.get(key);
  if (typeof waiter === "function") {
    waiting.delete(key);
    waiter();
  } else {
    waiting.set(key, true);
  }
}

/**
 * Hands the isolate's doorbell to a channel, creating it on first use.
 *
 * @param bridge The bridge library.
 * @param channel The channel id.
 */
export function connectDoorbell(bridge: BridgeLibrary, channel: bigint): void {
  if (callback === undefined) {
    callback = Deno.UnsafeCallback.threadSafe(DEFINITION, ring);
    callback.unref();
  }
  bridge.dt_channel_notify(channel, callback.pointer);
}

/**
 * Waits until the slot is rung (a batch was parked, or the channel closed).
 *
 * @param channel The channel id.
 * @param slot The slot index.
 * @returns Resolves when it is time to look at the slot again.
 */
export function rung(channel: bigint, slot: number): Promise<void> {
  const key = keyOf(Number(channel), slot);
  if (waiting.get(key) === true) {
    waiting.delete(key);
    return Promise.resolve();
  }
  return new Promise((resolve) => waiting.set(key, resolve));
}

/** Options of {@linkcode untilFinalized}. */
export interface UntilFinalizedOptions {
  /**
   * How often the consumers look, in milliseconds.
   *
   * @default {5}
   */
  readonly everyMs?: number;
}

/**
 * Waits for `ended` (a channel's consumers) while the core finalizes the channel's instances,
 * waking the consumers every `everyMs` to look at their slots: nothing rings for a finalized
 * instance.
 *
 * @param ended Settles when every consumer of the channel has ended.
 * @param channel The channel: its id and how many slots it has.
 * @param options How often the consumers look.
 */
export async function untilFinalized(
  ended: Promise<void>,
  channel: { readonly id: bigint; readonly slots: number },
  options: UntilFinalizedOptions = {},
): Promise<void> {
  const { slots } = channel;
  const { everyMs = 5 } = options;
  let done = false;
  const settled = ended.finally(() => done = true);
  while (!done) {
    // Only consumers that wait are woken: one running a batch looks at its slot when it is done,
    // and one that has ended must leave no mark behind.
    for (let slot = 0; slot < slots; slot++) {
      const key = keyOf(Number(channel.id), slot);
      const waiter = waiting.get(key);
      if (typeof waiter === "function") {
        waiting.delete(key);
        waiter();
      }
    }
    let timer: ReturnType<typeof setTimeout> | undefined;
    await Promise.race([settled, new Promise((resolve) => timer = setTimeout(resolve, everyMs))]);
    clearTimeout(timer);
  }
  await settled;
}

/**
 * Forgets a slot's state (its consumer ended).
 *
 * @param channel The channel id.
 * @param slot The slot index.
 */
export function forgetSlot(channel: bigint, slot: number): void {
  waiting.delete(keyOf(Number(channel), slot));
}
