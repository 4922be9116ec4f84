import assert from "node:assert/strict";
import {
  bytesResponse,
  compress,
  compressResponseBody,
  joinChunks,
  oneChunk,
  readRequestBody,
  responseEncoding,
} from "./compression.ts";
import { HttpError } from "./errors.ts";

const encoder = new TextEncoder();

function post(body: BodyInit, headers: Record<string, string> = {}): Request {
  return new Request("http://localhost/", { method: "POST", body, headers });
}

function streamOf(bytes: Uint8Array): ReadableStream<Uint8Array> {
  return new ReadableStream({
    start(controller): void {
      controller.enqueue(bytes.slice(0, 3));
      controller.enqueue(bytes.slice(3));
      controller.close();
    },
  });
}

Deno.test("readRequestBody() reads plain, chunked, gzip and deflate bodies", async () => {
  const text = encoder.encode("hello world");
  assert.deepEqual(await readRequestBody(post(text), 100), text);
  assert.deepEqual(await readRequestBody(post(streamOf(text)), 100), text);
  for (const encoding of ["gzip", "deflate"] as const) {
    const packed = await compress(text, encoding);
    assert.deepEqual(
      await readRequestBody(post(packed, { "content-encoding": encoding }), 100),
      text,
    );
  }
  assert.deepEqual(await readRequestBody(new Request("http://localhost/"), 100), new Uint8Array(0));
});

Deno.test("readRequestBody() answers 413 over the limit, before and after decompression", async () => {
  const big = new Uint8Array(1000);
  const isTooLarge = (pattern: RegExp) => (error: unknown): boolean => {
    assert.ok(error instanceof HttpError);
    assert.equal(error.status, 413);
    assert.match(error.message, pattern);
    return true;
  };
  await assert.rejects(
    readRequestBody(post(big), 999),
    isTooLarge(/the body exceeds the limit of 999 bytes/),
  );
  await assert.rejects(readRequestBody(post(streamOf(big)), 999), isTooLarge(/body exceeds/));
  const packed = await compress(big, "gzip");
  assert.ok(packed.byteLength < 100);
  await assert.rejects(
    readRequestBody(post(packed, { "content-encoding": "gzip" }), 500),
    isTooLarge(/the decompressed body exceeds the limit of 500 bytes/),
  );
});

Deno.test("readRequestBody() rejects corrupt and unknown encodings", async () => {
  await assert.rejects(
    readRequestBody(post(new Uint8Array([1, 2, 3]), { "content-encoding": "gzip" }), 100),
    /Unable to decompress the gzip request body/,
  );
  await assert.rejects(
    readRequestBody(post("x", { "content-encoding": "br" }), 100),
    /Unsupported Content-Encoding 'br'/,
  );
});

Deno.test("responseEncoding() picks gzip, then deflate, honouring q=0", () => {
  assert.equal(responseEncoding("gzip, deflate"), "gzip");
  assert.equal(responseEncoding("deflate"), "deflate");
  assert.equal(responseEncoding("GZIP"), "gzip");
  assert.equal(responseEncoding("gzip;q=0, deflate"), "deflate");
  assert.equal(responseEncoding("br, identity"), undefined);
  assert.equal(responseEncoding(null), undefined);
});

/** Gzip of `size` zero bytes, compressed as a stream so the zeros never exist at once. */
async function gzipZeros(size: number): Promise<Uint8Array<ArrayBuffer>> {
  const block = new Uint8Array(1 << 20);
  let left = size;
  const zeros = new ReadableStream<Uint8Array<ArrayBuffer>>({
    pull(controller): void {
      if (left <= 0) return controller.close();
      const take = Math.min(left, block.byteLength);
      controller.enqueue(block.subarray(0, take));
      left -= take;
    },
  });
  return await new Response(zeros.pipeThrough(new CompressionStream("gzip"))).bytes();
}

Deno.test("readRequestBody() inflates a gzip bomb in steps, serving the event loop, up to the limit", async () => {
  // 256 MiB of zeros in a 256 KiB body, against a 64 MiB limit.
  const limit = 64 * (1 << 20);
  const bomb = await gzipZeros(256 * (1 << 20));
  assert.ok(bomb.byteLength < limit);
  let turns = 0;
  let timer: ReturnType<typeof setTimeout> | undefined;
  const tick = (): void => {
    turns++;
    timer = setTimeout(tick, 0);
  };
  timer = setTimeout(tick, 0);
  try {
    await assert.rejects(
      readRequestBody(post(bomb, { "content-encoding": "gzip" }), limit),
      (error: unknown) => {
        assert.ok(error instanceof HttpError);
        assert.equal(error.status, 413);
        assert.equal(
          error.message,
          `Request body too large: the decompressed body exceeds the limit of ${limit} bytes`,
        );
        return true;
      },
    );
    // Other work ran while the body inflated: the inflater gives the event loop back once 16 MiB
    // have come out since it last did, which one inflate step (about 8 MiB) may overshoot, so by
    // every 24 MiB at most. 64 MiB were inflated before the limit stopped it: two turns at
    // least, even where each slice is faster than the 10 ms that would also end it.
    assert.ok(turns >= 2, `the event loop had ${turns} turns while the body inflated`);
  } finally {
    clearTimeout(timer);
  }
});

Deno.test("readRequestBody() stops reading a streamed gzip body once its output passes the limit", async () => {
  // An endless gzip stream of zeros: only a bounded inflater ever answers.
  let pulled = 0;
  const endless = new ReadableStream<Uint8Array<ArrayBuffer>>({
    pull(controller): void {
      controller.enqueue(new Uint8Array(1 << 16));
    },
  }).pipeThrough(new CompressionStream("gzip")).pipeThrough(
    new TransformStream<Uint8Array, Uint8Array>({
      transform(chunk, controller): void {
        pulled += chunk.byteLength;
        controller.enqueue(chunk);
      },
    }),
  );
  await assert.rejects(
    readRequestBody(post(endless, { "content-encoding": "gzip" }), 1 << 20),
    /the decompressed body exceeds the limit of 1048576 bytes/,
  );
  // 1 MiB of zeros is about 1 KiB of gzip; a few steps of slack, never the stream's worth.
  assert.ok(pulled < 256 * 1024, `${pulled} compressed bytes were read`);
});

Deno.test("readRequestBody() counts a streamed gzip body's received bytes against the limit", async () => {
  const random = new Uint8Array(4096);
  crypto.getRandomValues(random);
  const packed = await compress(random, "gzip");
  await assert.rejects(
    readRequestBody(post(streamOf(packed), { "content-encoding": "gzip" }), 1000),
    isTooLargeBody,
  );
});

function isTooLargeBody(error: unknown): boolean {
  assert.ok(error instanceof HttpError);
  assert.equal(error.status, 413);
  assert.match(error.message, /the body exceeds the limit of 1000 bytes/);
  return true;
}

Deno.test("compressResponseBody() leaves small and incompressible bodies as they are", async () => {
  const small = encoder.encode(JSON.stringify({ outputs: [{ data: new Array(100).fill(1) }] }));
  assert.ok(small.byteLength < 1024);
  assert.deepEqual(await compressResponseBody(oneChunk(small), "gzip"), {
    body: oneChunk(small),
    encoding: undefined,
  });
  assert.deepEqual(await compressResponseBody(oneChunk(small), undefined), {
    body: oneChunk(small),
    encoding: undefined,
  });

  const large = encoder.encode(JSON.stringify({ outputs: [{ data: new Array(2000).fill(1) }] }));
  for (const encoding of ["gzip", "deflate"] as const) {
    const packed = await compressResponseBody(oneChunk(large), encoding);
    assert.equal(packed.encoding, encoding);
    assert.ok(packed.body.byteLength < large.byteLength / 10);
    const back = await new Response(
      new Blob([...packed.body.chunks]).stream().pipeThrough(new DecompressionStream(encoding)),
    ).bytes();
    assert.deepEqual(back, large);
  }
  assert.equal((await compressResponseBody(oneChunk(large), undefined)).encoding, undefined);

  // Random bytes do not shrink: under the sampling size the whole is tried, above it a sample.
  for (const size of [4096, 256 * 1024]) {
    const noise = new Uint8Array(size);
    for (let i = 0; i < size; i += 65536) crypto.getRandomValues(noise.subarray(i, i + 65536));
    const result = await compressResponseBody(oneChunk(noise), "gzip");
    assert.equal(result.encoding, undefined, `size ${size}`);
    assert.equal(result.body.chunks[0], noise);
  }
});

Deno.test("compressResponseBody() samples the end of a body in pieces", async () => {
  const json = encoder.encode(JSON.stringify({ outputs: [{ data: new Array(2000).fill(1) }] }));
  const noise = new Uint8Array(128 * 1024);
  for (let i = 0; i < noise.byteLength; i += 65536) {
    crypto.getRandomValues(noise.subarray(i, i + 65536));
  }
  const body = { chunks: [json, noise], byteLength: json.byteLength + noise.byteLength };
  assert.deepEqual(await compressResponseBody(body, "gzip"), { body, encoding: undefined });
  const zeros = {
    chunks: [json, new Uint8Array(128 * 1024)],
    byteLength: json.byteLength + 131072,
  };
  const packed = await compressResponseBody(zeros, "deflate");
  assert.equal(packed.encoding, "deflate");
  const back = await new Response(
    new Blob([...packed.body.chunks]).stream().pipeThrough(new DecompressionStream("deflate")),
  ).bytes();
  assert.deepEqual(back, joinChunks(zeros));
});

Deno.test("compressResponseBody() and bytesResponse() keep a text reply as text, or compress its UTF-8", async () => {
  const small = '{"outputs":[{"data":["é"]}]}';
  assert.deepEqual(await compressResponseBody(small, undefined), {
    body: small,
    encoding: undefined,
  });
  assert.deepEqual(await compressResponseBody(small, "gzip"), { body: small, encoding: undefined });
  const sent = bytesResponse(small, { "content-type": "application/json" });
  assert.equal(sent.headers.get("content-type"), "application/json");
  assert.deepEqual(await sent.bytes(), encoder.encode(small));

  const large = JSON.stringify({ outputs: [{ data: new Array(2000).fill("é") }] });
  const packed = await compressResponseBody(large, "gzip");
  assert.equal(packed.encoding, "gzip");
  assert.notEqual(typeof packed.body, "string");
  const back = await new Response(
    bytesResponse(packed.body, {}).body!.pipeThrough(new DecompressionStream("gzip")),
  ).text();
  assert.equal(back, large);
});

Deno.test("bytesResponse() sends large bodies' pieces as they are, with their length", async () => {
  const small = bytesResponse({
    chunks: [encoder.encode("ab"), encoder.encode("c")],
    byteLength: 3,
  }, {});
  assert.equal(await small.text(), "abc");
  const large = new Uint8Array(100_000).fill(7);
  const response = bytesResponse({ chunks: [encoder.encode("{}"), large], byteLength: 100_002 }, {
    "content-type": "application/octet-stream",
  });
  assert.equal(response.headers.get("content-length"), "100002");
  const bytes = await response.bytes();
  assert.deepEqual([bytes.byteLength, bytes[0], bytes[1], bytes[2], bytes[100_001]], [
    100_002,
    123,
    125,
    7,
    7,
  ]);
});

Deno.test("readRequestBody() places a large body's binary section on an 8-byte boundary", async () => {
  const seen: { aligned: boolean; same: boolean }[] = [];
  const body = new Uint8Array(300_000);
  for (let i = 0; i < body.byteLength; i++) body[i] = i % 251;
  await using server = Deno.serve(
    { hostname: "127.0.0.1", port: 0, onListen(): void {} },
    async (r): Promise<Response> => {
      const alignAt = Number(new URL(r.url).searchParams.get("at"));
      const read = await readRequestBody(r, 1_000_000, { alignAt });
      seen.push({
        aligned: (read.byteOffset + alignAt) % 8 === 0,
        same: read.byteLength === body.byteLength && read.every((v, i) => v === body[i]),
      });
      return new Response(null, { status: 204 });
    },
  );
  for (const at of [0, 3, 5, 8, 13]) {
    const response = await fetch(`http://127.0.0.1:${server.addr.port}/?at=${at}`, {
      method: "POST",
      body,
    });
    assert.equal(response.status, 204);
  }
  assert.deepEqual(seen, new Array(5).fill({ aligned: true, same: true }));
});

Deno.test("readRequestBody() aligns small, chunked and compressed bodies by copying them", async () => {
  const text = encoder.encode("0123456789abcdef");
  for (const alignAt of [0, 1, 7, 9]) {
    const plain = await readRequestBody(post(text), 100, { alignAt });
    const chunked = await readRequestBody(post(streamOf(text)), 100, { alignAt });
    const packed = await compress(text, "gzip");
    const inflated = await readRequestBody(post(packed, { "content-encoding": "gzip" }), 100, {
      alignAt,
    });
    for (const bytes of [plain, chunked, inflated]) {
      assert.deepEqual(bytes, text);
      assert.equal((bytes.byteOffset + alignAt) % 8, 0, `alignAt ${alignAt}`);
    }
  }
});

Deno.test("readRequestBody() returns what came of a body shorter than its Content-Length", async () => {
  const data = new Uint8Array(70_000).fill(7);
  const body = new ReadableStream({
    type: "bytes",
    start(controller): void {
      controller.enqueue(data);
      controller.close();
    },
  });
  // Read in place (a byte stream of 64 KiB and more): the last read hands back the buffer too.
  const read = await readRequestBody(
    post(body, { "content-length": "100000" }),
    1_000_000,
    { alignAt: 3 },
  );
  assert.equal(read.byteLength, 70_000);
  assert.equal((read.byteOffset + 3) % 8, 0);
  // Every byte, without deepEqual's per-element walk of 70,000 elements.
  assert.ok(read.every((byte) => byte === 7));
});
