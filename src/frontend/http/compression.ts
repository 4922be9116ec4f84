/**
 * Request bodies in and response bodies out: reading a body with a size limit (after
 * `Content-Encoding: gzip|deflate` decompression too) and compressing a response for a client
 * that sent `Accept-Encoding: gzip|deflate`, as Triton's HTTP front end does.
 *
 * @module
 */

import { badRequest, HttpError } from "./errors.ts";

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
  throw badRequest(
    `Unsupported Content-Encoding '${header}': expected gzip, deflate or identity`,
    "UNSUPPORTED",
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
  if (chunks.length === 1) return chunks[0]!;
  const out = new Uint8Array(size);
  let offset = 0;
  for (const chunk of chunks) {
    out.set(chunk, offset);
    offset += chunk.byteLength;
  }
  return out;
}

/**
 * Reads a request body, decompressing `Content-Encoding: gzip|deflate`, and enforces a size
 * limit on both the received and the decompressed bytes.
 *
 * @param request The request.
 * @param limit The largest body accepted, in bytes.
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
 */
export async function readRequestBody(request: Request, limit: number): Promise<Uint8Array> {
  const encoding = requestEncoding(request.headers.get("content-encoding"));
  const declared = request.headers.get("content-length");
  if (declared !== null && Number(declared) > limit) throw tooLarge(limit, "body");
  if (request.body === null) return new Uint8Array(0);
  if (encoding === undefined) {
    if (declared !== null) {
      // A known length within the limit: the fast path without a stream reader.
      const bytes = await request.bytes();
      if (bytes.byteLength > limit) throw tooLarge(limit, "body");
      return bytes;
    }
    return await collect(request.body, limit, "body");
  }
  const raw = declared !== null
    ? await request.bytes()
    : await collect(request.body, limit, "body");
  try {
    const stream = new Blob([raw as Uint8Array<ArrayBuffer>]).stream().pipeThrough(
      new DecompressionStream(encoding),
    );
    return await collect(stream, limit, "decompressed body");
  } catch (error) {
    if (error instanceof HttpError) throw error;
    throw badRequest(
      `Unable to decompress the ${encoding} request body: ${
        error instanceof Error ? error.message : String(error)
      }`,
    );
  }
}

/**
 * Picks the response compression from an `Accept-Encoding` header, the way Triton does:
 * gzip or deflate when listed (and not refused with `q=0`), gzip first.
 *
 * @param header The `Accept-Encoding` header.
 * @returns The encoding, or `undefined` to answer uncompressed.
 *
 * @example
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
