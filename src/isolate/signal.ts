/**
 * A wake-up call between isolates over a `SharedArrayBuffer`: one isolate listens, others ring.
 *
 * It carries nothing but "look again": what to look at is elsewhere (the Triton core's event
 * queue of an HTTP thread, which the engine's isolate fills while it runs a batch). As on a
 * ring's reader (`ring.ts`), the listener sleeps in `Atomics.waitAsync` and a ringer calls
 * `Atomics.notify` only when it sleeps, so rings that come while the listener is busy cost no
 * wake and are folded into one look.
 *
 * Layout: two 32-bit words, the count of rings and the listener's "asleep" flag.
 *
 * @module
 */

const RINGS = 0;
const ASLEEP = 1;

/**
 * A fresh signal's memory: hand it to the listener and to the ringers.
 *
 * @returns The buffer.
 */
export function signalBuffer(): SharedArrayBuffer {
  return new SharedArrayBuffer(8);
}

/**
 * Rings a signal: its listener looks again, waking if it sleeps.
 *
 * @param words The signal's memory as an `Int32Array` (made once by the ringer).
 */
export function ringSignal(words: Int32Array<SharedArrayBuffer>): void {
  Atomics.add(words, RINGS, 1);
  // After the add: a listener going to sleep either sees the new count or is seen asleep (both
  // accesses are sequentially consistent). Taking the flag makes this the only notify of its
  // sleep.
  if (Atomics.compareExchange(words, ASLEEP, 1, 0) === 1) Atomics.notify(words, ASLEEP);
}

/**
 * Listens to a signal until {@linkcode SignalListener.stop}: calls `onSignal` after each ring
 * (once for all the rings that came since it last ran). Between rings the isolate's event loop
 * runs on, and the wait does not keep the isolate alive. A signal has one listener at a time:
 * the "asleep" flag is one listener's.
 *
 * @example A ring from the same isolate
 * ```ts
 * import { ringSignal, signalBuffer, SignalListener } from "./signal.ts";
 * import assert from "node:assert/strict";
 *
 * const buffer = signalBuffer();
 * const rung = Promise.withResolvers<void>();
 * let looks = 0;
 * const listener = new SignalListener(buffer, () => {
 *   looks++;
 *   rung.resolve();
 * }, () => {});
 * ringSignal(new Int32Array(buffer));
 * await rung.promise;
 * await listener.stop();
 * assert.equal(looks, 1);
 * ```
 */
export class SignalListener {
  #words: Int32Array<SharedArrayBuffer>;
  #stopping = false;
  // A notify from this isolate to itself resolves its wait only once the event loop turns
  // again, which it may not: stop() ends the wait directly.
  #stopped = Promise.withResolvers<void>();
  #loop: Promise<void>;

  /**
   * Starts listening.
   *
   * @param buffer The signal's memory ({@linkcode signalBuffer}).
   * @param onSignal Called after rings.
   * @param onError Called with what `onSignal` throws; listening goes on.
   */
  constructor(
    buffer: SharedArrayBuffer,
    onSignal: () => void,
    onError: (error: unknown) => void,
  ) {
    this.#words = new Int32Array(buffer);
    this.#loop = this.#listen(onSignal, onError);
  }

  async #listen(onSignal: () => void, onError: (error: unknown) => void): Promise<void> {
    const words = this.#words;
    let seen = Atomics.load(words, RINGS);
    while (!this.#stopping) {
      Atomics.store(words, ASLEEP, 1);
      // A ring before the flag was set is seen in the count; one after it clears the flag, and
      // the wait (for the flag still set) returns at once.
      if (Atomics.load(words, RINGS) === seen) {
        const wait = Atomics.waitAsync(words, ASLEEP, 1);
        if (wait.async) await Promise.race([wait.value, this.#stopped.promise]);
      }
      Atomics.store(words, ASLEEP, 0);
      const rings = Atomics.load(words, RINGS);
      if (rings === seen || this.#stopping) continue;
      seen = rings;
      try {
        onSignal();
      } catch (error) {
        onError(error);
      }
    }
  }

  /**
   * Stops listening; resolves once the listener is done (`onSignal` is not called after).
   *
   * @returns Resolves when stopped.
   */
  stop(): Promise<void> {
    if (!this.#stopping) {
      this.#stopping = true;
      this.#stopped.resolve();
      // The wait left behind ends at the event loop's next turn instead of staying queued.
      if (Atomics.compareExchange(this.#words, ASLEEP, 1, 0) === 1) {
        Atomics.notify(this.#words, ASLEEP);
      }
    }
    return this.#loop;
  }
}
