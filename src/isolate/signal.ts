/**
 * A wake-up call between isolates over a `SharedArrayBuffer`: one isolate listens, others ring.
 *
 * It carries nothing but "look again": what to look at is elsewhere (the Triton core's event
 * queue of an HTTP thread, which the engine's isolate fills while it runs a batch). The listener
 * sleeps in `Atomics.waitAsync` and a ringer calls `Atomics.notify` only when it sleeps, so rings
 * that come while the listener is busy cost no wake and are folded into one look. That rule
 * ({@linkcode sleepUnless}, {@linkcode wakeIfAsleep}) is also a ring's reader's (`ring.ts`).
 *
 * Layout: two 32-bit words, the count of rings and the listener's "asleep" flag.
 *
 * @module
 */

const RINGS = 0;
const ASLEEP = 1;

/**
 * Wakes a reader asleep on `control[asleep]` (see {@linkcode sleepUnless}), after the store it
 * must see. Both accesses are sequentially consistent, so a reader going to sleep either sees
 * that store or is seen asleep here; taking its flag makes this the only notify of its sleep.
 *
 * @param control The shared words.
 * @param asleep The index of the reader's "asleep" flag.
 */
export function wakeIfAsleep(control: Int32Array<SharedArrayBuffer>, asleep: number): void {
  if (Atomics.compareExchange(control, asleep, 1, 0) === 1) Atomics.notify(control, asleep);
}

/**
 * Sleeps until {@linkcode wakeIfAsleep} or `stopped`, unless `changed()` already holds once the
 * flag is up: a writer's store before the flag is seen by `changed()`, one after it takes the
 * flag down, and the wait (for the flag still up) returns at once. One reader per flag.
 *
 * @param control The shared words.
 * @param asleep The index of the reader's "asleep" flag.
 * @param changed Whether there is something to read.
 * @param stopped Ends the sleep from this isolate (a notify from an isolate to itself resolves
 * its wait only once the event loop turns again, which it may not).
 * @returns Resolves when awake.
 */
export async function sleepUnless(
  control: Int32Array<SharedArrayBuffer>,
  asleep: number,
  changed: () => boolean,
  stopped: Promise<void>,
): Promise<void> {
  Atomics.store(control, asleep, 1);
  if (!changed()) {
    const wait = Atomics.waitAsync(control, asleep, 1);
    if (wait.async) await Promise.race([wait.value, stopped]);
  }
  Atomics.store(control, asleep, 0);
}

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
  wakeIfAsleep(words, ASLEEP);
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
    const rung = (): boolean => Atomics.load(words, RINGS) !== seen;
    while (!this.#stopping) {
      await sleepUnless(words, ASLEEP, rung, this.#stopped.promise);
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
      wakeIfAsleep(this.#words, ASLEEP);
    }
    return this.#loop;
  }
}
