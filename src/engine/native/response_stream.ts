/**
 * The responses of one decoupled request on the Triton-core engine, between the two halves of
 * the bridge that both run on the JS thread: the backend half sends a step through the core, the
 * core hands the response to the completion callback, which pushes it into a
 * {@linkcode BoundedQueue} for the consumer. The callback cannot wait, so the backend half waits
 * instead: before it pulls the callable's next step it asks {@linkcode ResponseStream.room},
 * which counts the steps still on their way through the core as taken places. A slow consumer
 * thus slows the callable down by at most the queue's bound.
 *
 * The backend half finds a request's stream by the number the engine puts in the request's
 * {@linkcode STREAM_PARAMETER} (clients cannot send it: front ends refuse `triton_` names).
 *
 * @module
 */

import { BoundedQueue } from "../../streams/bounded_queue.ts";
import type { InferenceResponse } from "../engine.ts";

/** The request parameter that names a decoupled request's stream to the backend half. */
export const STREAM_PARAMETER = "triton_denotriton_stream";

/**
 * The request parameter that links an ensemble's steps to the ensemble's request (a number the
 * engine maps to that request's signal): the core passes it on to every step, but does not cancel
 * a running step when the ensemble's request is cancelled, so the step's callable learns it here.
 */
export const ENSEMBLE_SIGNAL_PARAMETER = "triton_denotriton_ensemble_signal";

/** Options of {@linkcode ResponseStream}. */
export interface ResponseStreamOptions {
  /**
   * Called once when the consumer stops reading before the end: cancel the request.
   *
   * @default {undefined}
   */
  cancel?: (reason: unknown) => void;
  /**
   * How many responses may wait for the consumer, counting those on their way.
   *
   * @default {16}
   */
  highWaterMark?: number;
}

/**
 * One decoupled request's responses, bounded.
 *
 * @example The producer waits while the consumer is behind
 * ```ts
 * import { ResponseStream } from "./response_stream.ts";
 * import assert from "node:assert/strict";
 *
 * const stream = new ResponseStream({ highWaterMark: 2 });
 * const response = { modelName: "m", modelVersion: "1", outputs: new Map() };
 * stream.sent();
 * assert.equal(stream.room(), undefined);
 * stream.sent(); // two on their way: the bound is reached
 * const room = stream.room();
 * assert.ok(room instanceof Promise);
 * stream.deliver(response);
 * stream.deliver(response);
 * stream.end();
 * assert.equal((await Array.fromAsync(stream.readable)).length, 2);
 * await room;
 * ```
 */
export class ResponseStream {
  #queue: BoundedQueue<InferenceResponse>;
  /** Steps sent by the backend half whose responses have not arrived yet. */
  #onTheirWay = 0;
  #room: PromiseWithResolvers<void> | undefined;

  /**
   * Creates an empty stream.
   *
   * @param options The cancel hook and the bound.
   */
  constructor(options: ResponseStreamOptions = {}) {
    const cancel = options.cancel;
    this.#queue = new BoundedQueue<InferenceResponse>({
      ...(options.highWaterMark === undefined ? {} : { highWaterMark: options.highWaterMark }),
      pull: () => this.#wake(),
      cancel: (reason) => {
        this.#wake();
        cancel?.(reason);
      },
    });
  }

  /** The consumer side. */
  get readable(): ReadableStream<InferenceResponse> {
    return this.#queue.readable;
  }

  /** Backend half: a step of this request was sent into the core. */
  sent(): void {
    this.#onTheirWay++;
  }

  /**
   * Backend half: whether the consumer has room for another step.
   *
   * @returns `undefined` when it has (or the stream is closed), else a promise that resolves
   *   once it has.
   */
  room(): Promise<void> | undefined {
    if (this.#hasRoom()) return undefined;
    this.#room ??= Promise.withResolvers<void>();
    return this.#room.promise;
  }

  /**
   * Completion callback: a response arrived.
   *
   * @param response The response, read out of the core.
   */
  deliver(response: InferenceResponse): void {
    if (this.#onTheirWay > 0) this.#onTheirWay--;
    // The callback cannot wait: the backend half waits in room() instead.
    void this.#queue.push(response);
  }

  /** Completion callback: the final flags arrived. */
  end(): void {
    this.#queue.end();
    this.#wake();
  }

  /**
   * Completion callback: the request failed (after the responses delivered so far).
   *
   * @param error The failure.
   */
  fail(error: unknown): void {
    this.#queue.fail(error);
    this.#wake();
  }

  #hasRoom(): boolean {
    return this.#queue.closed || this.#queue.desiredSize - this.#onTheirWay > 0;
  }

  #wake(): void {
    if (this.#room === undefined || !this.#hasRoom()) return;
    const room = this.#room;
    this.#room = undefined;
    room.resolve();
  }
}
