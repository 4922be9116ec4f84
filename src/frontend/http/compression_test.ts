import assert from "node:assert/strict";
import { compress, readRequestBody, responseEncoding } from "./compression.ts";
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
