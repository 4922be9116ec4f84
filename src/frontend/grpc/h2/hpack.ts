/**
 * HPACK (RFC 7541), the header compression of HTTP/2: a decoder with the dynamic table and
 * Huffman strings, and an encoder that writes every field as a literal that is never indexed.
 *
 * The encoder keeps no table, so the decoder on the other side never has to evict for us; it
 * opens its first block with a table size update to 0 so the peer may drop its own table too.
 *
 * @module
 */

/** An error in a header block: the connection must end with COMPRESSION_ERROR. */
export class HpackError extends Error {
  /**
   * Makes the error.
   *
   * @param message What was wrong with the block.
   */
  constructor(message: string) {
    super(`Cannot decode HTTP/2 header block: ${message}`);
    this.name = "HpackError";
  }
}

/**
 * A block that decoded to more than the header list limit. The block was decoded to its end, so
 * the connection's table is intact and only the stream has to be refused.
 */
export class HeaderListTooLargeError extends HpackError {
  /**
   * Makes the error.
   *
   * @param limit The limit, bytes.
   */
  constructor(limit: number) {
    super(`header list larger than ${limit} bytes`);
    this.name = "HeaderListTooLargeError";
  }
}

/** A header field: lower-case name and value. */
export type HeaderField = readonly [name: string, value: string];

// RFC 7541 Appendix A.
const STATIC_TABLE: readonly HeaderField[] = [
  [":authority", ""],
  [":method", "GET"],
  [":method", "POST"],
  [":path", "/"],
  [":path", "/index.html"],
  [":scheme", "http"],
  [":scheme", "https"],
  [":status", "200"],
  [":status", "204"],
  [":status", "206"],
  [":status", "304"],
  [":status", "400"],
  [":status", "404"],
  [":status", "500"],
  ["accept-charset", ""],
  ["accept-encoding", "gzip, deflate"],
  ["accept-language", ""],
  ["accept-ranges", ""],
  ["accept", ""],
  ["access-control-allow-origin", ""],
  ["age", ""],
  ["allow", ""],
  ["authorization", ""],
  ["cache-control", ""],
  ["content-disposition", ""],
  ["content-encoding", ""],
  ["content-language", ""],
  ["content-length", ""],
  ["content-location", ""],
  ["content-range", ""],
  ["content-type", ""],
  ["cookie", ""],
  ["date", ""],
  ["etag", ""],
  ["expect", ""],
  ["expires", ""],
  ["from", ""],
  ["host", ""],
  ["if-match", ""],
  ["if-modified-since", ""],
  ["if-none-match", ""],
  ["if-range", ""],
  ["if-unmodified-since", ""],
  ["last-modified", ""],
  ["link", ""],
  ["location", ""],
  ["max-forwards", ""],
  ["proxy-authenticate", ""],
  ["proxy-authorization", ""],
  ["range", ""],
  ["referer", ""],
  ["refresh", ""],
  ["retry-after", ""],
  ["server", ""],
  ["set-cookie", ""],
  ["strict-transport-security", ""],
  ["transfer-encoding", ""],
  ["user-agent", ""],
  ["vary", ""],
  ["via", ""],
  ["www-authenticate", ""],
];

// RFC 7541 Appendix B: the code length of each symbol 0..255, then EOS (256). The code is
// canonical (codes of one length are consecutive, in symbol order), so the lengths define it.
// deno-fmt-ignore
const CODE_LENGTHS: readonly number[] = [
  13, 23, 28, 28, 28, 28, 28, 28, 28, 24, 30, 28, 28, 30, 28, 28, 28, 28, 28, 28, 28, 28, 30, 28,
  28, 28, 28, 28, 28, 28, 28, 28, 6, 10, 10, 12, 13, 6, 8, 11, 10, 10, 8, 11, 8, 6, 6, 6,
  5, 5, 5, 6, 6, 6, 6, 6, 6, 6, 7, 8, 15, 6, 12, 10, 13, 6, 7, 7, 7, 7, 7, 7,
  7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 8, 7, 8, 13, 19, 13, 14, 6,
  15, 5, 6, 5, 6, 5, 6, 6, 6, 5, 7, 7, 6, 6, 6, 5, 6, 7, 6, 5, 5, 6, 7, 7,
  7, 7, 7, 15, 11, 14, 13, 28, 20, 22, 20, 20, 22, 22, 22, 23, 22, 23, 23, 23, 23, 23, 24, 23,
  24, 24, 22, 23, 24, 23, 23, 23, 23, 21, 22, 23, 22, 23, 23, 24, 22, 21, 20, 22, 22, 23, 23, 21,
  23, 22, 22, 24, 21, 22, 23, 23, 21, 21, 22, 21, 23, 22, 23, 23, 20, 22, 22, 22, 23, 22, 22, 23,
  26, 26, 20, 19, 22, 23, 22, 25, 26, 26, 26, 27, 27, 26, 24, 25, 19, 21, 26, 27, 27, 26, 27, 24,
  21, 21, 26, 26, 28, 27, 27, 27, 20, 24, 20, 21, 22, 21, 21, 23, 22, 22, 25, 25, 24, 24, 26, 23,
  26, 27, 26, 26, 27, 27, 27, 27, 27, 28, 27, 27, 27, 27, 27, 26, 30,
];
const EOS = 256;

/**
 * The canonical Huffman code of each symbol.
 *
 * @returns The codes, by symbol.
 */
export function huffmanCodes(): number[] {
  const symbols = CODE_LENGTHS.map((_, symbol) => symbol).sort((a, b) =>
    CODE_LENGTHS[a]! - CODE_LENGTHS[b]! || a - b
  );
  const codes = new Array<number>(CODE_LENGTHS.length).fill(0);
  let code = 0;
  let length = CODE_LENGTHS[symbols[0]!]!;
  for (const symbol of symbols) {
    // Codes reach 30 bits: multiply rather than shift so they stay positive.
    code *= 2 ** (CODE_LENGTHS[symbol]! - length);
    length = CODE_LENGTHS[symbol]!;
    codes[symbol] = code++;
  }
  return codes;
}

/**
 * The decoding tree, walked a nibble at a time: `NEXT[node * 16 + nibble]` is the node after
 * those 4 bits, `EMIT[...]` the symbol completed on the way (or -1), and `ACCEPTS[node]` whether
 * a string may end there (the node lies on the all-ones EOS path, fewer than 8 bits deep).
 */
const { NEXT, EMIT, ACCEPTS } = (() => {
  // A binary tree first: children of node n at 2n, 2n+1 in `child`; `leaf` holds the symbol.
  const child: number[] = [0, 0];
  const leaf: number[] = [-1];
  const codes = huffmanCodes();
  codes.forEach((code, symbol) => {
    let node = 0;
    for (let bit = CODE_LENGTHS[symbol]! - 1; bit >= 0; bit--) {
      const slot = node * 2 + (Math.floor(code / 2 ** bit) % 2);
      if (child[slot] === 0) {
        child[slot] = leaf.length;
        leaf.push(-1);
        child.push(0, 0);
      }
      node = child[slot]!;
    }
    leaf[node] = symbol;
  });
  // Inner nodes only (leaves restart at the root).
  const inner = leaf.map((symbol, node) => symbol < 0 ? node : -1).filter((node) => node >= 0);
  const index = new Map(inner.map((node, i) => [node, i]));
  const next = new Int32Array(inner.length * 16);
  const emit = new Int32Array(inner.length * 16).fill(-1);
  const accepts = new Uint8Array(inner.length);
  inner.forEach((start, i) => {
    for (let nibble = 0; nibble < 16; nibble++) {
      let node = start;
      let emitted = -1;
      let failed = false;
      for (let bit = 3; bit >= 0; bit--) {
        node = child[node * 2 + ((nibble >> bit) & 1)]!;
        if (node === 0) {
          failed = true;
          break;
        }
        if (leaf[node]! >= 0) {
          // At most one symbol ends within 4 bits: every code is 5 bits or longer.
          emitted = leaf[node]!;
          node = 0;
        }
      }
      next[i * 16 + nibble] = failed ? -1 : index.get(node)!;
      emit[i * 16 + nibble] = failed ? -2 : emitted;
    }
  });
  // Accepting ends: the root, and nodes reached from it by up to 7 one-bits.
  let node = 0;
  accepts[0] = 1;
  for (let depth = 1; depth <= 7; depth++) {
    node = child[node * 2 + 1]!;
    accepts[index.get(node)!] = 1;
  }
  return { NEXT: next, EMIT: emit, ACCEPTS: accepts };
})();

/**
 * Decodes a Huffman-coded string (RFC 7541 §5.2).
 *
 * @param bytes The coded string.
 * @returns The decoded text (each byte a Latin-1 character, as HTTP/2 header values are bytes).
 * @throws {HpackError} On EOS inside the string or padding that is not the EOS prefix.
 */
export function huffmanDecode(bytes: Uint8Array): string {
  let node = 0;
  let text = "";
  for (const byte of bytes) {
    for (const nibble of [byte >> 4, byte & 15]) {
      const slot = node * 16 + nibble;
      const emitted = EMIT[slot]!;
      if (emitted === -2 || emitted === EOS) throw new HpackError("invalid Huffman code");
      if (emitted >= 0) text += String.fromCharCode(emitted);
      node = NEXT[slot]!;
    }
  }
  if (ACCEPTS[node] !== 1) throw new HpackError("invalid Huffman padding");
  return text;
}

/** Options of {@linkcode HpackDecoder}. */
export interface HpackDecoderOptions {
  /**
   * The largest header list (RFC 7540 §6.5.2: names and values plus 32 bytes per field) a block
   * may decode to.
   *
   * @default {65536}
   */
  maxHeaderListSize?: number;
}

/**
 * Decodes header blocks of one connection, keeping its dynamic table (4,096 bytes, the
 * protocol's default, which the server never changes).
 *
 * @example Decoding a request (RFC 7541 C.4.1)
 * ```ts
 * import { HpackDecoder } from "./hpack.ts";
 * import assert from "node:assert/strict";
 *
 * const block = Uint8Array.from([
 *   0x82, 0x86, 0x84, 0x41, 0x8c, 0xf1, 0xe3, 0xc2, 0xe5, 0xf2, 0x3a, 0x6b, 0xa0, 0xab, 0x90, 0xf4,
 *   0xff,
 * ]);
 * assert.deepEqual(new HpackDecoder().decode(block), [
 *   [":method", "GET"],
 *   [":scheme", "http"],
 *   [":path", "/"],
 *   [":authority", "www.example.com"],
 * ]);
 * ```
 */
export class HpackDecoder {
  #table: HeaderField[] = [];
  #tableBytes = 0;
  #tableLimit = 4096;
  readonly #maxListSize: number;

  /**
   * Makes a decoder with an empty table.
   *
   * @param options The limits.
   */
  constructor(options: HpackDecoderOptions = {}) {
    this.#maxListSize = options.maxHeaderListSize ?? 65536;
  }

  /**
   * Decodes one complete header block.
   *
   * @param block The block (HEADERS and CONTINUATION payloads joined).
   * @returns The fields, in order.
   * @throws {HpackError} When the block is malformed.
   * @throws {HeaderListTooLargeError} When it decodes to more than the list limit.
   */
  decode(block: Uint8Array): HeaderField[] {
    const fields: HeaderField[] = [];
    let at = 0;
    let listSize = 0;
    const integer = (prefixBits: number): number => {
      const mask = (1 << prefixBits) - 1;
      let value = block[at++]! & mask;
      if (value < mask) return value;
      for (let shift = 0;; shift += 7) {
        if (at >= block.length) throw new HpackError("truncated integer");
        if (shift > 28) throw new HpackError("integer too large");
        const byte = block[at++]!;
        value += (byte & 0x7f) * 2 ** shift;
        if ((byte & 0x80) === 0) return value;
      }
    };
    const string = (): string => {
      if (at >= block.length) throw new HpackError("truncated string");
      const huffman = (block[at]! & 0x80) !== 0;
      const length = integer(7);
      if (length > block.length - at) throw new HpackError("truncated string");
      const bytes = block.subarray(at, at + length);
      at += length;
      if (huffman) return huffmanDecode(bytes);
      let text = "";
      for (const byte of bytes) text += String.fromCharCode(byte);
      return text;
    };
    const entry = (index: number): HeaderField => {
      const field = index <= STATIC_TABLE.length
        ? STATIC_TABLE[index - 1]
        : this.#table[index - STATIC_TABLE.length - 1];
      if (index === 0 || field === undefined) throw new HpackError(`no table entry ${index}`);
      return field;
    };
    const push = (field: HeaderField): void => {
      listSize += field[0].length + field[1].length + 32;
      // Past the limit the block is still decoded, to keep the table in step, but not kept.
      if (listSize <= this.#maxListSize) fields.push(field);
    };
    while (at < block.length) {
      const first = block[at]!;
      if (first & 0x80) {
        push(entry(integer(7)));
      } else if (first & 0x40) {
        const index = integer(6);
        const field: HeaderField = [index === 0 ? string() : entry(index)[0], string()];
        this.#insert(field);
        push(field);
      } else if (first & 0x20) {
        if (fields.length > 0) throw new HpackError("table size update after a field");
        const size = integer(5);
        if (size > 4096) throw new HpackError(`table size ${size} above the 4096 allowed`);
        this.#tableLimit = size;
        this.#evict(0);
      } else {
        // Literal without indexing or never indexed: the same to a decoder that forwards nothing.
        const index = integer(4);
        push([index === 0 ? string() : entry(index)[0], string()]);
      }
    }
    if (listSize > this.#maxListSize) throw new HeaderListTooLargeError(this.#maxListSize);
    return fields;
  }

  #insert(field: HeaderField): void {
    const size = field[0].length + field[1].length + 32;
    this.#evict(size);
    // A field larger than the table empties it and is not kept (RFC 7541 §4.4).
    if (size > this.#tableLimit) return;
    this.#table.unshift(field);
    this.#tableBytes += size;
  }

  #evict(room: number): void {
    while (this.#tableBytes + room > this.#tableLimit && this.#table.length > 0) {
      const [name, value] = this.#table.pop()!;
      this.#tableBytes -= name.length + value.length + 32;
    }
  }
}

/**
 * Encodes header blocks as literals that are never indexed (no Huffman coding, no table). The
 * first block of a connection starts with a table size update to 0.
 *
 * @example Encoding a gRPC status
 * ```ts
 * import { HpackDecoder, HpackEncoder } from "./hpack.ts";
 * import assert from "node:assert/strict";
 *
 * const block = new HpackEncoder().encode([["grpc-status", "0"]]);
 * assert.deepEqual(new HpackDecoder().decode(block), [["grpc-status", "0"]]);
 * ```
 */
export class HpackEncoder {
  #first = true;

  /**
   * Encodes one header block.
   *
   * @param fields Lower-case names, values of Latin-1 characters (callers percent-encode text).
   * @returns The block.
   */
  encode(fields: readonly HeaderField[]): Uint8Array {
    let size = this.#first ? 1 : 0;
    for (const [name, value] of fields) size += 1 + 10 + name.length + value.length;
    const bytes = new Uint8Array(size);
    let at = 0;
    if (this.#first) {
      bytes[at++] = 0x20;
      this.#first = false;
    }
    const integer = (value: number): void => {
      if (value < 127) {
        bytes[at++] = value;
        return;
      }
      bytes[at++] = 127;
      value -= 127;
      while (value >= 128) {
        bytes[at++] = (value % 128) | 0x80;
        value = Math.floor(value / 128);
      }
      bytes[at++] = value;
    };
    const string = (text: string): void => {
      integer(text.length);
      for (let i = 0; i < text.length; i++) bytes[at++] = text.charCodeAt(i) & 0xff;
    };
    for (const [name, value] of fields) {
      if (name === ":status" && value === "200") {
        bytes[at++] = 0x88;
        continue;
      }
      bytes[at++] = 0x10;
      string(name);
      string(value);
    }
    return bytes.subarray(0, at);
  }
}
