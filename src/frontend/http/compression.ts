/**
 * Request bodies in and response bodies out: reading a body with a size limit (after
 * `Content-Encoding: gzip|deflate` decompression too) and compressing a response for a client
 * that sent `Accept-Encoding: gzip|deflate`, as Triton's HTTP front end does, but only where it
 * pays: bodies of 1 KiB and more that shrink.
 *
 * @module
 */

import { InferenceError, messageOf } from "../../errors.ts";
import { HttpError } from "./errors.ts";
import { concatBytes } from "../../tensor/bytes.ts";

const textEncoder = new TextEncoder();

/** A compression Triton's HTTP front end speaks. */
export type Encoding = "gzip" | "deflate";

function tooLarge(limit: number, what: string): HttpError {
  return new HttpError(
    413,
    `Request body too large: the ${what} exceeds the limit of ${limit} bytes`,
  );
}

function requestEncoding(header: string | null): Encoding | undefined {
  const value = header?.trim().toLowerCase() ?? "";
  if (value === "" || value === "identity") return undefined;
  if (value === "gzip" || value === "x-gzip") return "gzip";
  if (value === "deflate") return "deflate";
  throw InferenceError.unsupported(
    `Unsupported Content-Encoding '${header}': expected gzip, deflate or identity`,
  );
}

async function collect(
  stream: ReadableStream<Uint8Array>,
  limit: number,
  what: string,
): Promise<Uint8Array> {
  const chunks: Uint8Array[] = [];
  let size = 0;
  const reader = stream.getReader();
  try {
    while (true) {
      const { done, value } = await reader.read();
      if (done) break;
      size += value.byteLength;
      if (size > limit) {
        await reader.cancel().catch(() => {});
        throw tooLarge(limit, what);
      }
      chunks.push(value);
    }
  } finally {
    reader.releaseLock();
  }
  return concatBytes(chunks, size);
}

// A deflate stream expands at most about 1032:1, so feeding the inflater this many compressed
// bytes at a time bounds one synchronous inflate step to about 8 MiB of output: a step past
// the limit overshoots it by no more than that, and takes a few milliseconds.
const INFLATE_STEP_BYTES = 8 * 1024;
// Inflating gives the event loop back every this many milliseconds or output bytes, whichever
// comes first, so other requests (health probes too) are served while a large body inflates.
const INFLATE_SLICE_MS = 10;
const INFLATE_SLICE_BYTES = 16 * 1024 * 1024;

function yieldToEventLoop(): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, 0));
}

/**
 * Decompresses a body step by step, counting the output: it stops with 413 as soon as the
 * output passes `limit`, so a small body that inflates to gigabytes costs no more than the
 * limit in memory and time (like gRPC's limit on decompressed messages).
 */
async function inflateWithin(
  source: ReadableStream<Uint8Array>,
  encoding: Encoding,
  limit: number,
): Promise<Uint8Array> {
  const inflater = new DecompressionStream(encoding);
  const writer = inflater.writable.getWriter();
  const output = inflater.readable.getReader();
  const input = source.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  // Reads the inflater's output while the loop below writes to it (its queue holds nothing).
  const drained = (async (): Promise<void> => {
    while (true) {
      const { done, value } = await output.read();
      if (done) return;
      size += value.byteLength;
      if (size > limit) throw tooLarge(limit, "decompressed body");
      chunks.push(value);
    }
  })();
  drained.catch(() => {}); // awaited below; this only keeps an early failure from going unhandled
  let received = 0;
  let sliceStart = performance.now();
  let sliceSize = 0;
  try {
    while (true) {
      const { done, value } = await input.read();
      if (done) break;
      received += value.byteLength;
      if (received > limit) throw tooLarge(limit, "body");
      for (let offset = 0; offset < value.byteLength; offset += INFLATE_STEP_BYTES) {
        // The race ends the loop as soon as the output passed the limit or the data is corrupt.
        await Promise.race([
          writer.write(
            value.subarray(offset, offset + INFLATE_STEP_BYTES) as Uint8Array<ArrayBuffer>,
          ),
          drained,
        ]);
        if (
          performance.now() - sliceStart >= INFLATE_SLICE_MS ||
          size - sliceSize >= INFLATE_SLICE_BYTES
        ) {
          await yieldToEventLoop();
          sliceStart = performance.now();
          sliceSize = size;
        }
      }
    }
    await Promise.race([writer.close(), drained]);
    await drained;
  } catch (error) {
    await Promise.allSettled([
      input.cancel(),
      writer.abort(error),
      output.cancel(),
    ]);
    throw error;
  } finally {
    input.releaseLock();
  }
  return concatBytes(chunks, size);
}

// Binary tensor data starts on a multiple of this, so 64-bit elements can be viewed in place.
const ALIGNMENT = 8;
// Smaller bodies are usually buffered whole by Deno already, and copying them costs little.
const IN_PLACE_FROM_BYTES = 64 * 1024;
// Under Deno 2.9 a read into a view of all the bytes still missing took longer and more CPU than
// reads of at most this many (4 MiB bodies on a 2-core VM: a median of 2.0–4.4 ms per body
// against 1.9–2.0 ms, and about 40% more CPU; see ffi/README.md).
const READ_STEP_BYTES = 256 * 1024;

/**
 * Reads a body of known length into a buffer of its own, straight from the connection (a BYOB
 * reader: no intermediate chunks), placed so that body offset `alignAt` falls on an 8-byte
 * boundary of the buffer. Each read asks for at most {@linkcode READ_STEP_BYTES}.
 *
 * @returns The body, or `undefined` when the body is not a byte stream (Deno hands a body it has
 *   already buffered as a plain stream; `request.bytes()` then returns that buffer as it is).
 */
async function readInPlace(
  request: Request,
  length: number,
  alignAt: number,
): Promise<Uint8Array | undefined> {
  let reader: ReadableStreamBYOBReader;
  try {
    reader = request.body!.getReader({ mode: "byob" });
  } catch {
    return undefined;
  }
  const start = (ALIGNMENT - (alignAt % ALIGNMENT)) % ALIGNMENT;
  let buffer = new ArrayBuffer(start + length);
  let filled = 0;
  try {
    while (filled < length) {
      const view = new Uint8Array(
        buffer,
        start + filled,
        Math.min(READ_STEP_BYTES, length - filled),
      );
      const { done, value } = await reader.read(view);
      // Each read transfers the buffer, the last one too; keep the one handed back.
      if (value !== undefined) buffer = value.buffer as ArrayBuffer;
      if (done) break;
      filled += value.byteLength;
    }
  } finally {
    reader.releaseLock();
  }
  return new Uint8Array(buffer, start, filled);
}

/** Options of {@linkcode readRequestBody}. */
export interface ReadBodyOptions {
  /**
   * A body offset to place on an 8-byte boundary of the returned bytes' buffer, where binary
   * tensor data starts (`Inference-Header-Content-Length`), so tensors can be viewed in place.
   * Uncompressed bodies of 64 KiB and more with a `Content-Length` are read straight into such
   * a buffer; other bodies are copied once when they are not aligned already.
   *
   * @default {undefined}
   */
  alignAt?: number;
}

/**
 * Reads a request body, decompressing `Content-Encoding: gzip|deflate`, and enforces a size
 * limit on both the received and the decompressed bytes. Decompression runs in small steps
 * that give the event loop back regularly, and stops as soon as the output passes the limit.
 *
 * @param request The request.
 * @param limit The largest body accepted, in bytes.
 * @param options Where binary data starts, to align it.
 * @returns The (decompressed) body.
 * @throws {HttpError} 413 when the body or its decompressed form is over the limit.
 * @throws {InferenceError} 400 for corrupt compressed data, 501 for other encodings.
 *
 * @example Gzip body
 * ```ts
 * import { readRequestBody } from "./compression.ts";
 * import assert from "node:assert/strict";
 *
 * const zipped = await new Response(
 *   new Blob(["hello"]).stream().pipeThrough(new CompressionStream("gzip")),
 * ).bytes();
 * const request = new Request("http://x/", {
 *   method: "POST", body: zipped, headers: { "content-encoding": "gzip" },
 * });
 * assert.equal(new TextDecoder().decode(await readRequestBody(request, 100)), "hello");
 * ```
 *
 * @example Binary data after a 3-byte header lands on an 8-byte boundary
 * ```ts
 * import { readRequestBody } from "./compression.ts";
 * import assert from "node:assert/strict";
 *
 * const body = new Uint8Array(100_000).fill(7);
 * const request = new Request("http://x/", {
 *   method: "POST",
 *   body: new Blob([body]).stream(),
 *   headers: { "content-length": "100000" },
 * });
 * const read = await readRequestBody(request, 200_000, { alignAt: 3 });
 * assert.deepEqual(read, body);
 * assert.equal((read.byteOffset + 3) % 8, 0);
 * ```
 */
export async function readRequestBody(
  request: Request,
  limit: number,
  options: ReadBodyOptions = {},
): Promise<Uint8Array> {
  const bytes = await readBody(request, limit, options.alignAt);
  return options.alignAt === undefined ? bytes : alignedAt(bytes, options.alignAt);
}

async function readBody(
  request: Request,
  limit: number,
  alignAt: number | undefined,
): Promise<Uint8Array> {
  const encoding = requestEncoding(request.headers.get("content-encoding"));
  const declared = request.headers.get("content-length");
  if (declared !== null && Number(declared) > limit) throw tooLarge(limit, "body");
  if (encoding === undefined && declared !== null) {
    // Not `request.body` first: on a `Deno.serve` request that getter builds a ReadableStream
    // (about 4 µs and 1 KB per request on the 2-core VM) that `bytes()` would not need.
    const length = Number(declared);
    if (alignAt !== undefined && Number.isSafeInteger(length) && length >= IN_PLACE_FROM_BYTES) {
      const bytes = await readInPlace(request, length, alignAt);
      if (bytes !== undefined) return bytes;
    }
    // A known length within the limit: the fast path without a stream reader.
    const bytes = await request.bytes();
    if (bytes.byteLength > limit) throw tooLarge(limit, "body");
    return bytes;
  }
  if (request.body === null) return new Uint8Array(0);
  if (encoding === undefined) return await collect(request.body, limit, "body");
  try {
    return await inflateWithin(request.body, encoding, limit);
  } catch (error) {
    if (error instanceof HttpError) throw error;
    throw InferenceError.invalidArg(
      `Unable to decompress the ${encoding} request body: ${messageOf(error)}`,
    );
  }
}

/** The bytes, copied once when offset `alignAt` is not on an 8-byte boundary of their buffer. */
function alignedAt(bytes: Uint8Array, alignAt: number): Uint8Array {
  if ((bytes.byteOffset + alignAt) % ALIGNMENT === 0) return bytes;
  const start = (ALIGNMENT - (alignAt % ALIGNMENT)) % ALIGNMENT;
  const copy = new Uint8Array(new ArrayBuffer(start + bytes.byteLength), start, bytes.byteLength);
  copy.set(bytes);
  return copy;
}

/**
 * Picks the response compression from an `Accept-Encoding` header, the way Triton does:
 * gzip or deflate when listed (and not refused with `q=0`), gzip first.
 *
 * @param header The `Accept-Encoding` header.
 * @returns The encoding, or `undefined` to answer uncompressed.
 *
 * @example Pick an encoding by preference and quality
 * ```ts
 * import { responseEncoding } from "./compression.ts";
 * import assert from "node:assert/strict";
 *
 * assert.equal(responseEncoding("deflate"), "deflate");
 * assert.equal(responseEncoding("br, gzip;q=0.5"), "gzip");
 * assert.equal(responseEncoding("gzip;q=0"), undefined);
 * assert.equal(responseEncoding(null), undefined);
 * ```
 */
export function responseEncoding(header: string | null): Encoding | undefined {
  if (header === null) return undefined;
  // A client sends the same header with every request: the last answer is kept.
  if (header === lastAccepted.header) return lastAccepted.encoding;
  const encoding = parseAcceptEncoding(header);
  lastAccepted = { header, encoding };
  return encoding;
}

let lastAccepted: { header: string; encoding: Encoding | undefined } = {
  header: "",
  encoding: undefined,
};

function parseAcceptEncoding(header: string): Encoding | undefined {
  const accepted = new Set<string>();
  for (const part of header.split(",")) {
    const [name, ...params] = part.trim().toLowerCase().split(";");
    const refused = params.some((param) => /^\s*q\s*=\s*0(\.0*)?\s*$/.test(param));
    if (name !== undefined && !refused) accepted.add(name.trim());
  }
  if (accepted.has("gzip")) return "gzip";
  if (accepted.has("deflate")) return "deflate";
  return undefined;
}

/**
 * Compresses bytes.
 *
 * @param bytes The data.
 * @param encoding `gzip` or `deflate` (zlib format, what Triton and its clients use).
 * @returns The compressed data.
 *
 * @example Round trip
 * ```ts
 * import { compress } from "./compression.ts";
 * import assert from "node:assert/strict";
 *
 * const packed = await compress(new TextEncoder().encode("abc"), "deflate");
 * const back = await new Response(
 *   new Blob([packed]).stream().pipeThrough(new DecompressionStream("deflate")),
 * ).text();
 * assert.equal(back, "abc");
 * ```
 */
export async function compress(
  bytes: Uint8Array,
  encoding: Encoding,
): Promise<Uint8Array<ArrayBuffer>> {
  const stream = new Blob([bytes as Uint8Array<ArrayBuffer>]).stream().pipeThrough(
    new CompressionStream(encoding),
  );
  return await new Response(stream).bytes();
}

/**
 * Responses smaller than this many bytes are sent as they are, whatever the client accepts:
 * compressing a few hundred bytes costs more time than it saves (Hono's compress middleware
 * uses the same threshold).
 */
export const COMPRESS_MIN_BYTES = 1024;

// A body at least this large is compressed only when a sample of it shrinks, so incompressible
// binary tensors (most float data) do not cost a full deflate pass for nothing.
const SAMPLE_FROM_BYTES = 64 * 1024;
const SAMPLE_BYTES = 16 * 1024;
// The sample must shrink to at most this share of its size.
const SAMPLE_MAX_RATIO = 0.9;

/** A response body in pieces, sent in order without being joined. */
export interface BodyChunks {
  /** The pieces; they must not change until the response is sent. */
  readonly chunks: readonly Uint8Array<ArrayBuffer>[];
  /** Their total size in bytes. */
  readonly byteLength: number;
}

/**
 * A reply body: text (Deno encodes a string body as it sends it, where bytes given to `Response`
 * are copied), or bytes in pieces.
 */
export type ReplyBody = string | BodyChunks;

/**
 * A body of one piece.
 *
 * @param bytes The body.
 * @returns It as {@linkcode BodyChunks}.
 */
export function oneChunk(bytes: Uint8Array<ArrayBuffer>): BodyChunks {
  return { chunks: [bytes], byteLength: bytes.byteLength };
}

/**
 * A body's bytes in one buffer (the piece itself when there is one; text encoded as UTF-8).
 *
 * @param body The body.
 * @returns Its bytes.
 *
 * @example Join two chunks
 * ```ts
 * import { joinChunks } from "./compression.ts";
 * import assert from "node:assert/strict";
 *
 * const body = { chunks: [new Uint8Array([1]), new Uint8Array([2, 3])], byteLength: 3 };
 * assert.deepEqual(joinChunks(body), new Uint8Array([1, 2, 3]));
 * ```
 */
export function joinChunks(body: ReplyBody): Uint8Array<ArrayBuffer> {
  if (typeof body === "string") return textEncoder.encode(body);
  return concatBytes(body.chunks, body.byteLength) as Uint8Array<ArrayBuffer>;
}

// The last `size` bytes of a body (fewer when it is shorter), copied only when they span pieces.
function tail(body: BodyChunks, size: number): Uint8Array<ArrayBuffer> {
  const last = body.chunks.at(-1) ?? new Uint8Array(0);
  if (last.byteLength >= size) return last.subarray(last.byteLength - size);
  const whole = joinChunks(body);
  return whole.subarray(Math.max(0, whole.byteLength - size));
}

/**
 * A response body as it goes on the wire.
 *
 * @typeParam B The body given to compress: sent as it is, or compressed into bytes.
 */
export interface ResponseBody<B extends ReplyBody = ReplyBody> {
  /** What to send. */
  readonly body: B | BodyChunks;
  /** The `Content-Encoding` of `body`, or `undefined` when it is sent as it is. */
  readonly encoding: Encoding | undefined;
}

/**
 * Compresses a response body for a client that accepts `encoding`, when that is worth it:
 * bodies under {@linkcode COMPRESS_MIN_BYTES} are sent as they are, large bodies only when a
 * sample of their end (where binary tensors are) compresses, and a compressed body that is
 * not smaller than the original is dropped for the original.
 *
 * @typeParam B The body given: text or bytes.
 * @param reply The encoded response body.
 * @param encoding What the client accepts (from {@linkcode responseEncoding}), or `undefined`.
 * @returns The body to send and its encoding.
 *
 * @example Small bodies stay as they are
 * ```ts
 * import { compressResponseBody, oneChunk } from "./compression.ts";
 * import assert from "node:assert/strict";
 *
 * const small = oneChunk(new TextEncoder().encode('{"outputs":[]}'));
 * assert.equal((await compressResponseBody(small, "gzip")).encoding, undefined);
 * const large = oneChunk(new TextEncoder().encode(JSON.stringify({ data: new Array(1000).fill(0) })));
 * const packed = await compressResponseBody(large, "gzip");
 * assert.equal(packed.encoding, "gzip");
 * assert.ok(packed.body.byteLength < large.byteLength);
 * ```
 */
export async function compressResponseBody<B extends ReplyBody>(
  reply: B,
  encoding: Encoding | undefined,
): Promise<ResponseBody<B>> {
  const plain = { body: reply, encoding: undefined };
  if (encoding === undefined) return plain;
  const body: BodyChunks = typeof reply === "string"
    ? oneChunk(textEncoder.encode(reply))
    : reply as BodyChunks;
  if (body.byteLength < COMPRESS_MIN_BYTES) return plain;
  if (body.byteLength >= SAMPLE_FROM_BYTES) {
    const sample = tail(body, SAMPLE_BYTES);
    const packedSample = await compress(sample, encoding);
    if (packedSample.byteLength > sample.byteLength * SAMPLE_MAX_RATIO) return plain;
  }
  const packed = await compress(joinChunks(body), encoding);
  return packed.byteLength < body.byteLength ? { body: oneChunk(packed), encoding } : plain;
}

// Deno copies a `Uint8Array` given to `Response`, but sends a stream's chunks as they are; below
// this size the copy costs less than the stream.
const STREAM_FROM_BYTES = 64 * 1024;

/**
 * A response with a reply body, without copying large bodies: those are sent as a stream of
 * their pieces, with their `Content-Length` set (it is not chunked); text is sent as text.
 *
 * @param body The body; its pieces must not change until they are sent.
 * @param headers The response headers.
 * @returns The response.
 *
 * @example Send a large body as a stream with its length
 * ```ts
 * import { bytesResponse } from "./compression.ts";
 * import assert from "node:assert/strict";
 *
 * const chunks = [new Uint8Array(10), new Uint8Array(100_000)];
 * const large = bytesResponse({ chunks, byteLength: 100_010 }, { "content-type": "application/octet-stream" });
 * assert.equal(large.headers.get("content-length"), "100010");
 * assert.equal((await large.bytes()).byteLength, 100_010);
 * ```
 */
export function bytesResponse(body: ReplyBody, headers: Record<string, string>): Response {
  if (typeof body === "string") return new Response(body, { headers });
  if (body.byteLength < STREAM_FROM_BYTES) return new Response(joinChunks(body), { headers });
  const stream = new ReadableStream<Uint8Array>({
    start(controller): void {
      for (const chunk of body.chunks) if (chunk.byteLength > 0) controller.enqueue(chunk);
      controller.close();
    },
  });
  return new Response(stream, {
    headers: { ...headers, "content-length": String(body.byteLength) },
  });
}
