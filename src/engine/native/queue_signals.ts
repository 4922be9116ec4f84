/**
 * The wakes of other isolates' completion queues, rung from the isolate that runs the batches.
 *
 * A thread sharing the core (an HTTP thread, `shared_client.ts`) submits its requests straight
 * into it, but their batches run here, and the responses and releases this isolate's `dt_send`
 * and `dt_batch_done` complete land in that thread's queue. Woken from C, each costs three
 * thread hand-offs: this thread wakes the thread's waiting pool thread, which ends its
 * nonblocking call and so wakes the thread's event loop, which starts the next wait on a pool
 * thread again. So the bridge leaves those wakes to this module: each shared queue has a token
 * and a signal (`src/isolate/signal.ts`), the bridge reports the tokens it pushed to
 * (`dt_events_signals`), and {@linkcode ringQueueSignals} rings their signals once per batch.
 *
 * Tokens are this isolate's: the bridge keeps the reported tokens per thread, and only this
 * isolate's thread runs the batches whose events it reports.
 *
 * @module
 */

import type { BridgeLibrary } from "../../native/ffi.ts";
import { ringSignal, signalBuffer } from "../../isolate/signal.ts";

/** A queue's signal: the memory its isolate listens on, and the token the bridge reports. */
export interface QueueSignal {
  /** The signal's memory (`signalBuffer`). */
  readonly buffer: SharedArrayBuffer;
  /** Non-zero: what `dt_events_signal` records and `dt_events_signals` reports. */
  readonly token: number;
}

// By token, from 1; never reused, so a late report of a closed token finds nothing.
const signals = new Map<number, Int32Array<SharedArrayBuffer>>();
let lastToken = 0;
const reported = new Uint32Array(64);

/**
 * Opens a signal for a queue another isolate will open.
 *
 * @returns The signal, for that isolate.
 */
export function openQueueSignal(): QueueSignal {
  const buffer = signalBuffer();
  const token = ++lastToken;
  signals.set(token, new Int32Array(buffer));
  return { buffer, token };
}

/**
 * Forgets a signal once its queue's isolate no longer listens; a late report of its token rings
 * nothing.
 *
 * @param signal The signal.
 */
export function closeQueueSignal(signal: QueueSignal): void {
  signals.delete(signal.token);
}

/**
 * Rings the signals of the queues this thread's `dt_send` and `dt_batch_done` pushed events to
 * since the last call. Call it after them, where this isolate drains its own queue.
 *
 * @param bridge The bridge library.
 */
export function ringQueueSignals(bridge: BridgeLibrary): void {
  let count: number;
  do {
    count = bridge.dt_events_signals(reported, reported.length);
    for (let i = 0; i < count; i++) {
      const words = signals.get(reported[i]!);
      if (words !== undefined) ringSignal(words);
    }
  } while (count === reported.length);
}
