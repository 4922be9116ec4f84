/**
 * A one-way lane of records between two isolates over a `SharedArrayBuffer`: one writer, one
 * reader, no `postMessage`.
 *
 * A `postMessage` between a Worker and the main isolate costs each side a structured clone, a
 * trip through Deno's message port and an event dispatch: on the 2-core VM about half of what
 * the main isolate spent per request it ran for an HTTP thread (`ffi/README.md`, "Per-request
 * cost, twelfth round"). Here the writer copies a record into shared memory and the reader reads
 * it in place; the reader sleeps in `Atomics.waitAsync` only when the ring is empty, and the
 * writer calls `Atomics.notify` only when it sleeps, so that a busy reader takes every record
 * waiting at once, woken once.
 *
 * Layout: three counters, each on a cache line of its own (the reader's position, the writer's,
 * and the reader's "asleep" flag, plus "closed"), then the data. Positions count bytes
 * monotonically modulo 2³²; a record is an 8-byte header (payload length, kind) and its payload,
 * padded to 8 bytes, and never straddles the end: a record that does not fit there is preceded
 * by a wrap marker that sends the reader back to the start.
 *
 * @module
 */

import { sleepUnless, wakeIfAsleep } from "./signal.ts";

const HEAD = 0; // the reader's position (Int32 index; byte 0)
const TAIL = 16; // the writer's position (byte 64)
const ASLEEP = 32; // 1 while the reader waits, or is about to (byte 128)
const CLOSED = 33;
const DATA = 192; // bytes of control before the data
const WRAP = 0xffffffff;

/** The bytes a record of `size` payload bytes takes. */
function recordBytes(size: number): number {
  return (8 + size + 7) & ~7;
}

/** A ring's shared memory and its views, for either end. */
class RingMemory {
  readonly control: Int32Array<SharedArrayBuffer>;
  readonly bytes: Uint8Array;
  readonly words: Uint32Array;
  readonly capacity: number;
  readonly mask: number;

  constructor(buffer: SharedArrayBuffer) {
    const capacity = buffer.byteLength - DATA;
    if (capacity < 64 || (capacity & (capacity - 1)) !== 0) {
      throw new RangeError(
        `A ring's buffer must hold ${DATA} bytes of control and a power of two (at least 64) of data, got ${buffer.byteLength} bytes`,
      );
    }
    this.control = new Int32Array(buffer, 0, DATA / 4);
    this.bytes = new Uint8Array(buffer, DATA, capacity);
    this.words = new Uint32Array(buffer, DATA, capacity / 4);
    this.capacity = capacity;
    this.mask = capacity - 1;
  }
}

/**
 * A fresh ring's memory: hand it to both ends (post it to the other isolate).
 *
 * @param capacity Data bytes, a power of two; a record may take at most half.
 * @returns The buffer.
 */
export function ringBuffer(capacity: number): SharedArrayBuffer {
  return new SharedArrayBuffer(DATA + capacity);
}

/**
 * The writing end of a ring: {@linkcode RingWriter.claim} room, fill it, then
 * {@linkcode RingWriter.commit}.
 *
 * @example A record crosses
 * ```ts
 * import { RingReader, RingWriter, ringBuffer } from "./ring.ts";
 * import assert from "node:assert/strict";
 *
 * const buffer = ringBuffer(1024);
 * const writer = new RingWriter(buffer);
 * const reader = new RingReader(buffer);
 * const room = writer.claim(3)!;
 * room.set([1, 2, 3]);
 * writer.commit(7, 3);
 * const seen: number[][] = [];
 * reader.drain((kind, payload) => seen.push([kind, ...payload]));
 * assert.deepEqual(seen, [[7, 1, 2, 3]]);
 * ```
 */
export class RingWriter {
  #memory: RingMemory;
  #tail: number;
  #claimed = -1;

  /** @param buffer The ring's memory ({@linkcode ringBuffer}). */
  constructor(buffer: SharedArrayBuffer) {
    this.#memory = new RingMemory(buffer);
    this.#tail = Atomics.load(this.#memory.control, TAIL);
  }

  /** The largest payload a record may have: half the ring, less its header. */
  get maxPayload(): number {
    return this.#memory.capacity / 2 - 8;
  }

  /**
   * Room for a record's payload of at most `size` bytes, contiguous, or `undefined` when the
   * record is too large for this ring or the reader has not yet made room (send it another way).
   *
   * @param size The most bytes the payload will take.
   * @returns A view to write the payload into, valid until {@linkcode RingWriter.commit}.
   */
  claim(size: number): Uint8Array | undefined {
    if (size > this.maxPayload) return undefined;
    const memory = this.#memory;
    const needed = recordBytes(size);
    const used = (this.#tail - Atomics.load(memory.control, HEAD)) >>> 0;
    const offset = this.#tail & memory.mask;
    const toEnd = memory.capacity - offset;
    // Not enough before the end: the rest of it is skipped, and the record starts at 0.
    const skip = toEnd < needed ? toEnd : 0;
    if (memory.capacity - used < skip + needed) return undefined;
    if (skip !== 0) {
      memory.words[offset / 4] = 0;
      memory.words[offset / 4 + 1] = WRAP;
      this.#tail = (this.#tail + skip) | 0;
    }
    const start = this.#tail & memory.mask;
    this.#claimed = start;
    return memory.bytes.subarray(start + 8, start + 8 + size);
  }

  /**
   * Publishes the claimed record, and wakes the reader if it sleeps.
   *
   * @param kind The record's kind (any 32-bit number but 0xffffffff).
   * @param size The payload's bytes, at most what was claimed.
   */
  commit(kind: number, size: number): void {
    const memory = this.#memory;
    const start = this.#claimed;
    if (start < 0) throw new Error("RingWriter.commit without a claim");
    this.#claimed = -1;
    memory.words[start / 4] = size;
    memory.words[start / 4 + 1] = kind;
    this.#tail = (this.#tail + recordBytes(size)) | 0;
    Atomics.store(memory.control, TAIL, this.#tail);
    // After the store: no record is left unannounced.
    wakeIfAsleep(memory.control, ASLEEP);
  }
}

/**
 * The reading end of a ring: {@linkcode RingReader.drain} what is there, or
 * {@linkcode RingReader.pump} until {@linkcode RingReader.close}.
 */
export class RingReader {
  #memory: RingMemory;
  #head: number;
  // A notify from this isolate to itself resolves its wait only once the event loop turns again,
  // which it may not (nothing else pending): close() ends the wait directly.
  #closed = Promise.withResolvers<void>();

  /** @param buffer The ring's memory ({@linkcode ringBuffer}). */
  constructor(buffer: SharedArrayBuffer) {
    this.#memory = new RingMemory(buffer);
    this.#head = Atomics.load(this.#memory.control, HEAD);
  }

  /**
   * Reads every record written so far, in order. The payload is a view of the ring, valid only
   * during the call: copy what outlives it. A record whose callback throws is still consumed;
   * the error goes to `onError`, and reading goes on, or without it propagates.
   *
   * @param onRecord Called with each record's kind and payload.
   * @param onError Called with what `onRecord` throws.
   * @returns How many records were read.
   */
  drain(
    onRecord: (kind: number, payload: Uint8Array) => void,
    onError?: (error: unknown) => void,
  ): number {
    const memory = this.#memory;
    const tail = Atomics.load(memory.control, TAIL);
    let count = 0;
    while (this.#head !== tail) {
      const offset = this.#head & memory.mask;
      const size = memory.words[offset / 4]!;
      const kind = memory.words[offset / 4 + 1]!;
      if (kind === WRAP) {
        this.#head = (this.#head + memory.capacity - offset) | 0;
        Atomics.store(memory.control, HEAD, this.#head);
        continue;
      }
      const payload = memory.bytes.subarray(offset + 8, offset + 8 + size);
      count++;
      try {
        onRecord(kind, payload);
      } catch (error) {
        if (onError === undefined) throw error;
        onError(error);
      } finally {
        this.#head = (this.#head + recordBytes(size)) | 0;
        Atomics.store(memory.control, HEAD, this.#head);
      }
    }
    return count;
  }

  /**
   * Drains the ring whenever the writer commits, until {@linkcode RingReader.close}. Between
   * records the isolate's event loop runs on: the wait is `Atomics.waitAsync`, not a blocking
   * wait, and it does not keep the isolate alive.
   *
   * @param onRecord Called with each record, as for {@linkcode RingReader.drain}.
   * @param onError Called with what `onRecord` throws; the pump goes on.
   * @returns Resolves once closed.
   */
  async pump(
    onRecord: (kind: number, payload: Uint8Array) => void,
    onError: (error: unknown) => void,
  ): Promise<void> {
    const control = this.#memory.control;
    // A record committed, or a close: something to do.
    const changed = (): boolean =>
      Atomics.load(control, TAIL) !== this.#head || Atomics.load(control, CLOSED) !== 0;
    while (Atomics.load(control, CLOSED) === 0) {
      this.drain(onRecord, onError);
      await sleepUnless(control, ASLEEP, changed, this.#closed.promise);
    }
  }

  /** Ends {@linkcode RingReader.pump}; records left are not read. */
  close(): void {
    closeRing(this.#memory.control);
    this.#closed.resolve();
  }
}

function closeRing(control: Int32Array<SharedArrayBuffer>): void {
  Atomics.store(control, CLOSED, 1);
  wakeIfAsleep(control, ASLEEP);
}

/**
 * Closes a ring from its writing end, in another isolate than its reader's: the reader's pump
 * returns.
 *
 * @param buffer The ring's memory.
 */
export function closeRingBuffer(buffer: SharedArrayBuffer): void {
  closeRing(new Int32Array(buffer, 0, DATA / 4));
}
