/**
 * A little-endian writer for the packed descriptions the bridge reads in one FFI call (see
 * `dt_infer` in `ffi/dt_client.c`): u32, u64, f64 and length-prefixed, NUL-terminated UTF-8
 * strings, into one buffer that grows and is reused call after call.
 *
 * @module
 */

const encoder = new TextEncoder();

/**
 * Writes values one after another into a reusable buffer.
 *
 * @example Writing a string and a number
 * ```ts
 * import { Packer } from "./packer.ts";
 * import assert from "node:assert/strict";
 *
 * const packer = new Packer();
 * packer.reset();
 * packer.string("ab");
 * packer.u32(7);
 * assert.deepEqual([...packer.bytes()], [2, 0, 0, 0, 97, 98, 0, 7, 0, 0, 0]);
 * ```
 */
export class Packer {
  #buffer: Uint8Array<ArrayBuffer>;
  #view: DataView;
  #length = 0;

  /**
   * Creates a writer.
   *
   * @param capacity The initial size in bytes.
   * @default {1024}
   */
  constructor(capacity = 1024) {
    this.#buffer = new Uint8Array(capacity);
    this.#view = new DataView(this.#buffer.buffer);
  }

  /** Starts over (the buffer is kept). */
  reset(): void {
    this.#length = 0;
  }

  /** What was written since the last reset: a view of the buffer, valid until the next write. */
  bytes(): Uint8Array<ArrayBuffer> {
    return this.#buffer.subarray(0, this.#length);
  }

  #room(size: number): void {
    if (this.#length + size <= this.#buffer.byteLength) return;
    let capacity = this.#buffer.byteLength * 2;
    while (capacity < this.#length + size) capacity *= 2;
    const grown = new Uint8Array(capacity);
    grown.set(this.#buffer.subarray(0, this.#length));
    this.#buffer = grown;
    this.#view = new DataView(grown.buffer);
  }

  /**
   * Writes an unsigned 32-bit integer.
   *
   * @param value The value.
   */
  u32(value: number): void {
    this.#room(4);
    this.#view.setUint32(this.#length, value, true);
    this.#length += 4;
  }

  /**
   * Writes a 64-bit integer (two's complement; a safe integer or a bigint).
   *
   * @param value The value.
   */
  i64(value: number | bigint): void {
    this.#room(8);
    if (typeof value === "bigint") {
      this.#view.setBigInt64(this.#length, value, true);
    } else if (value >= 0 && value <= Number.MAX_SAFE_INTEGER) {
      // Two halves, no bigint: addresses and sizes are safe integers.
      this.#view.setUint32(this.#length, value % 0x100000000, true);
      this.#view.setUint32(this.#length + 4, Math.floor(value / 0x100000000), true);
    } else {
      this.#view.setBigInt64(this.#length, BigInt(value), true);
    }
    this.#length += 8;
  }

  /**
   * Writes a 64-bit float.
   *
   * @param value The value.
   */
  f64(value: number): void {
    this.#room(8);
    this.#view.setFloat64(this.#length, value, true);
    this.#length += 8;
  }

  /**
   * Writes a string: its UTF-8 byte length (u32), the bytes and a NUL.
   *
   * @param text The string.
   */
  string(text: string): void {
    // UTF-8 needs at most 3 bytes per UTF-16 unit.
    this.#room(4 + text.length * 3 + 1);
    const start = this.#length + 4;
    // Names are short and ASCII: copied by hand, they need no call into the encoder.
    let written = text.length <= SHORT_STRING ? asciiInto(text, this.#buffer, start) : -1;
    if (written < 0) written = encoder.encodeInto(text, this.#buffer.subarray(start)).written;
    this.#view.setUint32(this.#length, written, true);
    this.#buffer[this.#length + 4 + written] = 0;
    this.#length += 4 + written + 1;
  }
}

const decoder = new TextDecoder();

// Strings up to this many units take the ASCII paths first (names, ids).
const SHORT_STRING = 64;

/** Writes `text` at `at` if it is all ASCII and returns its length; -1 (nothing usable) if not. */
function asciiInto(text: string, buffer: Uint8Array, at: number): number {
  for (let i = 0; i < text.length; i++) {
    const unit = text.charCodeAt(i);
    if (unit >= 0x80) return -1;
    buffer[at + i] = unit;
  }
  return text.length;
}

/** The ASCII string of `bytes[start, end)`, or undefined if a byte is not ASCII. */
function asciiAt(bytes: Uint8Array, start: number, end: number): string | undefined {
  let text = "";
  for (let i = start; i < end; i++) {
    const byte = bytes[i]!;
    if (byte >= 0x80) return undefined;
    text += String.fromCharCode(byte);
  }
  return text;
}

/** Typed parameter kinds in packed descriptions (`out_param` in `ffi/dt_pack.c`). */
const PARAMETER_STRING = 0;
const PARAMETER_INT = 1;
const PARAMETER_BOOL = 2;
const PARAMETER_DOUBLE = 3;

/**
 * Reads a packed description the bridge wrote (see `ffi/dt_pack.c`). Reading past its end
 * throws a `RangeError`, so a description cut short is caught, not misread.
 *
 * @example Reading a string and a number
 * ```ts
 * import { Unpacker } from "./packer.ts";
 * import assert from "node:assert/strict";
 *
 * const reader = new Unpacker(new Uint8Array([2, 0, 0, 0, 97, 98, 7, 0, 0, 0]));
 * assert.equal(reader.string(), "ab");
 * assert.equal(reader.u32(), 7);
 * assert.throws(() => reader.u32(), RangeError);
 * ```
 */
export class Unpacker {
  #bytes: Uint8Array;
  #view: DataView;
  #at = 0;

  /**
   * Reads `bytes` from the start.
   *
   * @param bytes The description.
   */
  constructor(bytes: Uint8Array) {
    this.#bytes = bytes;
    this.#view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  }

  /** Reads an unsigned 32-bit integer. */
  u32(): number {
    const value = this.#view.getUint32(this.#at, true);
    this.#at += 4;
    return value;
  }

  /** Reads a signed 32-bit integer. */
  i32(): number {
    const value = this.#view.getInt32(this.#at, true);
    this.#at += 4;
    return value;
  }

  /** Reads a signed 64-bit integer as a number (exact up to 2^53). */
  i64(): number {
    const low = this.#view.getUint32(this.#at, true);
    const high = this.#view.getInt32(this.#at + 4, true);
    this.#at += 8;
    return high * 0x100000000 + low;
  }

  /** Reads an unsigned 64-bit integer as a bigint (addresses). */
  u64(): bigint {
    const value = this.#view.getBigUint64(this.#at, true);
    this.#at += 8;
    return value;
  }

  /** Reads a string (u32 byte length, UTF-8 bytes). */
  string(): string {
    const length = this.u32();
    if (this.#at + length > this.#bytes.byteLength) {
      throw new RangeError("Cannot read a string past the end of the description");
    }
    const end = this.#at + length;
    const text = (length <= SHORT_STRING ? asciiAt(this.#bytes, this.#at, end) : undefined) ??
      decoder.decode(this.#bytes.subarray(this.#at, end));
    this.#at = end;
    return text;
  }

  /**
   * Reads a typed parameter value; `undefined` for a kind JavaScript does not read.
   *
   * @returns The value.
   */
  parameter(): string | number | boolean | undefined {
    const kind = this.u32();
    switch (kind) {
      case PARAMETER_STRING:
        return this.string();
      case PARAMETER_INT:
        return this.i64();
      case PARAMETER_BOOL:
        return this.u32() !== 0;
      case PARAMETER_DOUBLE: {
        const value = this.#view.getFloat64(this.#at, true);
        this.#at += 8;
        return value;
      }
      default:
        return undefined;
    }
  }
}
