/**
 * The output side of an HTTP/2 connection: frames queued by the session and written to the
 * socket in as few writes as make sense. What one turn of the event loop queues (the headers,
 * message and trailers of every call it answered) goes out together once the turn is over;
 * small segments are gathered into one buffer, and a large one (a message's body) is written
 * from the caller's own memory.
 *
 * @module
 */

import type { Http2Transport } from "./transport.ts";

/** Segments at least this large are written from the caller's buffer; smaller ones gathered. */
const GATHER_BELOW = 64 * 1024;
/** Unwritten replies (acknowledgements, resets) a connection may owe before it is closed. */
export const MAX_QUEUED_REPLIES = 1000;

/** One queued piece of output. */
interface Segment {
  readonly bytes: Uint8Array;
  readonly done: (() => void) | undefined;
}

/** Writes a connection's frames in order, gathering small ones (see the module's doc). */
export class FrameWriter {
  readonly #conn: Http2Transport;
  readonly #failed: () => void;
  readonly #drained: () => void;
  #out: Segment[] = [];
  #pumping = false;
  #pumpScheduled = false;
  #repliesQueued = 0;
  #closed = false;

  /**
   * Makes the writer of a connection.
   *
   * @param conn The connection.
   * @param failed Called when a write fails (the peer went away).
   * @param drained Called each time everything queued was written.
   */
  constructor(conn: Http2Transport, failed: () => void, drained: () => void) {
    this.#conn = conn;
    this.#failed = failed;
    this.#drained = drained;
  }

  /** Whether nothing is queued or being written. */
  get idle(): boolean {
    return !this.#pumping && !this.#pumpScheduled;
  }

  /**
   * Queues bytes.
   *
   * @param bytes The bytes, written as they are when their turn comes.
   * @param done Called once they were handed to the socket, or dropped.
   */
  enqueue(bytes: Uint8Array, done?: () => void): void {
    if (this.#closed) {
      done?.();
      return;
    }
    this.#out.push({ bytes, done });
    if (this.#pumping || this.#pumpScheduled) return;
    this.#pumpScheduled = true;
    setImmediate(() => {
      this.#pumpScheduled = false;
      if (!this.#pumping) this.#pump();
    });
  }

  /**
   * Queues a frame the peer's own frames call for (PING and SETTINGS acknowledgements, resets).
   * A peer that sends those without reading the answers would grow the queue without end.
   *
   * @param bytes The frame.
   * @returns False, and nothing queued, when {@linkcode MAX_QUEUED_REPLIES} are unwritten.
   */
  reply(bytes: Uint8Array): boolean {
    if (this.#repliesQueued >= MAX_QUEUED_REPLIES) return false;
    this.#repliesQueued++;
    this.enqueue(bytes, () => this.#repliesQueued--);
    return true;
  }

  /** Drops what is queued (calling its `done`) and takes nothing more. */
  close(): void {
    this.#closed = true;
    for (const segment of this.#out) segment.done?.();
    this.#out = [];
  }

  async #pump(): Promise<void> {
    this.#pumping = true;
    try {
      while (this.#out.length > 0 && !this.#closed) {
        // A large segment alone, or the run of small ones at the head gathered into one buffer.
        let count = 1;
        let bytes = this.#out[0]!.bytes;
        let total = bytes.length;
        if (bytes.length < GATHER_BELOW) {
          while (count < this.#out.length && this.#out[count]!.bytes.length < GATHER_BELOW) {
            total += this.#out[count++]!.bytes.length;
          }
        }
        const written = this.#out.splice(0, count);
        if (count > 1) {
          bytes = new Uint8Array(total);
          let at = 0;
          for (const segment of written) {
            bytes.set(segment.bytes, at);
            at += segment.bytes.length;
          }
        }
        for (let at = 0; at < bytes.length;) at += await this.#conn.write(bytes.subarray(at));
        for (const segment of written) segment.done?.();
      }
    } catch {
      this.#pumping = false;
      return this.#failed();
    }
    this.#pumping = false;
    this.#drained();
  }
}
