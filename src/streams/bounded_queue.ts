/**
 * A bounded queue between one producer and one consumer, built on a `ReadableStream` whose
 * `highWaterMark` is the bound. It carries the steps of a decoupled request (engine → front end)
 * and the messages of a stream (grpc-js events → client), with one set of rules:
 *
 * - **End**: after {@linkcode BoundedQueue.end}, the consumer reads what is queued, then the
 *   stream closes.
 * - **Error after values**: after {@linkcode BoundedQueue.fail}, the consumer still reads what
 *   is queued, then the read rejects with the error (a plain `controller.error()` would drop
 *   the queued values).
 * - **Cancel by the consumer**: cancelling the readable (or leaving a `for await` loop early)
 *   drops what is queued and calls the `cancel` option once, unless the producer had already
 *   ended or failed: this is where a request is aborted.
 * - **Backpressure**: {@linkcode BoundedQueue.push} resolves once the queue is below its bound
 *   again, so an `async` producer that awaits it runs no further ahead of the consumer than
 *   the bound. Event-driven producers (which cannot await) check
 *   {@linkcode BoundedQueue.desiredSize} to pause their source and resume it from the `pull`
 *   option.
 *
 * After the end, a failure or a cancel, pushes are dropped and further `end`/`fail` calls do
 * nothing.
 *
 * @module
 */

/** Options of {@linkcode BoundedQueue}. */
export interface BoundedQueueOptions {
  /**
   * How many values may wait for the consumer before {@linkcode BoundedQueue.push} waits: the
   * readable's `highWaterMark`. At least 1.
   *
   * @default {16}
   */
  highWaterMark?: number;
  /**
   * Called whenever the queue is below its bound and the consumer wants more, e.g. to resume a
   * paused source. Also called once at the start.
   *
   * @default {undefined}
   */
  pull?: () => void;
  /**
   * Called once when the consumer cancels before the producer ended or failed: stop producing
   * (abort the request, cancel the call).
   *
   * @default {undefined}
   */
  cancel?: (reason: unknown) => void;
}

const DEFAULT_HIGH_WATER_MARK = 16;

/**
 * A bounded single-producer, single-consumer queue whose consumer side is a `ReadableStream`.
 *
 * @typeParam T The values.
 *
 * @example A producer that waits for its consumer
 * ```ts
 * import { BoundedQueue } from "./bounded_queue.ts";
 * import assert from "node:assert/strict";
 *
 * const queue = new BoundedQueue<number>({ highWaterMark: 2 });
 * const produced: number[] = [];
 * const producer = (async () => {
 *   for (let i = 0; i < 5; i++) {
 *     await queue.push(i);
 *     produced.push(i);
 *   }
 *   queue.end();
 * })();
 * await new Promise((resolve) => setTimeout(resolve, 10));
 * // The second value fills the queue: its push waits until the consumer reads.
 * assert.deepEqual(produced, [0]);
 * assert.deepEqual(await Array.fromAsync(queue.readable), [0, 1, 2, 3, 4]);
 * await producer;
 * ```
 *
 * @example An error after values, and a cancel that aborts
 * ```ts
 * import { BoundedQueue } from "./bounded_queue.ts";
 * import assert from "node:assert/strict";
 *
 * const failing = new BoundedQueue<string>();
 * void failing.push("a");
 * failing.fail(new Error("model failed"));
 * const seen: string[] = [];
 * await assert.rejects(async () => {
 *   for await (const value of failing.readable) seen.push(value);
 * }, /model failed/);
 * assert.deepEqual(seen, ["a"]);
 *
 * const controller = new AbortController();
 * const cancelled = new BoundedQueue<string>({ cancel: (reason) => controller.abort(reason) });
 * void cancelled.push("a");
 * void cancelled.push("b");
 * for await (const _ of cancelled.readable) break;
 * assert.ok(controller.signal.aborted);
 * ```
 */
export class BoundedQueue<T> {
  /** The consumer side: read it, iterate it with `for await`, or cancel it. */
  readonly readable: ReadableStream<T>;
  #controller!: ReadableStreamDefaultController<T>;
  #highWaterMark: number;
  #pull: (() => void) | undefined;
  #cancel: ((reason: unknown) => void) | undefined;
  // Set once the producer ended or failed, or the consumer cancelled: pushes are dropped.
  #closed = false;
  #failure: { error: unknown } | undefined;
  #room: PromiseWithResolvers<void> | undefined;

  /**
   * Creates an empty queue.
   *
   * @param options The bound, and the `pull` and `cancel` hooks.
   * @throws {RangeError} When `highWaterMark` is not an integer of at least 1.
   */
  constructor(options: BoundedQueueOptions = {}) {
    const highWaterMark = options.highWaterMark ?? DEFAULT_HIGH_WATER_MARK;
    if (!Number.isInteger(highWaterMark) || highWaterMark < 1) {
      throw new RangeError(
        `Cannot create a bounded queue: highWaterMark must be an integer of at least 1, got ${highWaterMark}`,
      );
    }
    this.#highWaterMark = highWaterMark;
    this.#pull = options.pull;
    this.#cancel = options.cancel;
    this.readable = new ReadableStream<T>({
      start: (controller): void => {
        this.#controller = controller;
      },
      pull: (): void => this.#onPull(),
      cancel: (reason): void => this.#onCancel(reason),
    }, new CountQueuingStrategy({ highWaterMark }));
  }

  /**
   * How many more values fit before the queue is full: at most the high-water mark, 0 or less
   * when full, and 0 once it is closed, failed or cancelled.
   */
  get desiredSize(): number {
    return this.#closed ? 0 : this.#controller.desiredSize ?? 0;
  }

  /** Whether the producer ended or failed, or the consumer cancelled. */
  get closed(): boolean {
    return this.#closed;
  }

  /**
   * Queues a value for the consumer.
   *
   * @param value The value; dropped after the end, a failure or a cancel.
   * @returns Resolves once the queue is below its bound (at once when it is), or once it is
   *   closed; never rejects.
   */
  push(value: T): Promise<void> {
    if (this.#closed) return Promise.resolve();
    this.#controller.enqueue(value);
    if (this.#controller.desiredSize! > 0) return Promise.resolve();
    this.#room ??= Promise.withResolvers<void>();
    return this.#room.promise;
  }

  /** Ends the queue: the consumer reads what is queued, then the stream closes. */
  end(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#controller.close();
    this.#wakeProducer();
  }

  /**
   * Fails the queue: the consumer reads what is queued, then its read rejects with `error`.
   *
   * @param error The failure.
   */
  fail(error: unknown): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#wakeProducer();
    if (this.#isEmpty()) this.#controller.error(error);
    else this.#failure = { error };
  }

  #isEmpty(): boolean {
    return this.#controller.desiredSize === this.#highWaterMark;
  }

  #wakeProducer(): void {
    const room = this.#room;
    this.#room = undefined;
    room?.resolve();
  }

  // The stream calls pull after a read leaves it below the bound, and when a read waits.
  #onPull(): void {
    if (this.#failure !== undefined) {
      if (this.#isEmpty()) this.#controller.error(this.#failure.error);
      return;
    }
    if (this.#closed) return;
    this.#wakeProducer();
    this.#pull?.();
  }

  #onCancel(reason: unknown): void {
    const producing = !this.#closed;
    this.#closed = true;
    this.#failure = undefined;
    this.#wakeProducer();
    if (producing) this.#cancel?.(reason);
  }
}
