/**
 * The batch doorbell: how Triton's instance threads wake this isolate when they park a batch in
 * a slot of the bridge (`ffi/dt_backend.c`). One thread-safe FFI callback per isolate, never
 * closed (instance threads may ring it until the process ends), is handed to every channel; an
 * instance thread rings it with `(channel, slot)` and Deno runs it on this isolate's event loop.
 * That is one thread hop per batch, where a nonblocking FFI wait cost a thread-pool dispatch, a
 * condition-variable wake-up and a promise per batch.
 *
 * The callback is unref'd: a consumer waiting for a batch keeps the event loop alive with its
 * fallback timer, which also notices a finalized instance or a closed channel (nothing rings
 * for those).
 *
 * @module
 */

import type { BridgeLibrary } from "./ffi.ts";

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
 * Waits until the slot is rung or `fallbackMs` pass, whichever comes first.
 *
 * @param channel The channel id.
 * @param slot The slot index.
 * @param fallbackMs The longest wait.
 * @returns Resolves when it is time to look at the slot again.
 */
export function rung(channel: bigint, slot: number, fallbackMs: number): Promise<void> {
  const key = keyOf(Number(channel), slot);
  if (waiting.get(key) === true) {
    waiting.delete(key);
    return Promise.resolve();
  }
  return new Promise((resolve) => {
    const timer = setTimeout(() => {
      waiting.delete(key);
      resolve();
    }, fallbackMs);
    waiting.set(key, () => {
      clearTimeout(timer);
      resolve();
    });
  });
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
