/**
 * A small unbounded push/pull channel: the scheduler pushes a decoupled request's steps, the
 * engine's stream pulls them.
 *
 * @module
 */

/** What a pull returns: a value, the end, or a failure. */
export type ChannelEvent<T> =
  | { readonly kind: "value"; readonly value: T }
  | { readonly kind: "end" }
  | { readonly kind: "error"; readonly error: unknown };

/**
 * An unbounded single-consumer channel.
 *
 * @example
 * ```ts
 * import { StreamChannel } from "./stream_channel.ts";
 * import assert from "node:assert/strict";
 *
 * const channel = new StreamChannel<number>();
 * channel.push(1);
 * channel.end();
 * assert.deepEqual(await channel.pull(), { kind: "value", value: 1 });
 * assert.deepEqual(await channel.pull(), { kind: "end" });
 * ```
 */
export class StreamChannel<T> {
  #events: ChannelEvent<T>[] = [];
  #waiter: ((event: ChannelEvent<T>) => void) | undefined;
  #closed = false;

  #emit(event: ChannelEvent<T>): void {
    if (this.#closed) return;
    if (event.kind !== "value") this.#closed = true;
    const waiter = this.#waiter;
    if (waiter !== undefined) {
      this.#waiter = undefined;
      waiter(event);
    } else {
      this.#events.push(event);
    }
  }

  /**
   * Pushes a value (ignored after the end).
   *
   * @param value The value.
   */
  push(value: T): void {
    this.#emit({ kind: "value", value });
  }

  /** Ends the channel. */
  end(): void {
    this.#emit({ kind: "end" });
  }

  /**
   * Ends the channel with a failure.
   *
   * @param error The failure.
   */
  fail(error: unknown): void {
    this.#emit({ kind: "error", error });
  }

  /**
   * Waits for the next event.
   *
   * @returns The next event.
   */
  pull(): Promise<ChannelEvent<T>> {
    const event = this.#events.shift();
    if (event !== undefined) return Promise.resolve(event);
    return new Promise((resolve) => this.#waiter = resolve);
  }
}
