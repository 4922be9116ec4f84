import assert from "node:assert/strict";
import { ClientInvalidUrlError } from "./errors.ts";
import { parseTritonUrl } from "./url.ts";

Deno.test("parseTritonUrl() reads every accepted form", () => {
  const cases: [string, string, string, number][] = [
    ["localhost", "http", "localhost", 8000],
    ["localhost:9000", "http", "localhost", 9000],
    ["http://localhost", "http", "localhost", 8000],
    ["http://127.0.0.1:8010/", "http", "127.0.0.1", 8010],
    ["grpc://localhost", "grpc", "localhost", 8001],
    ["GRPC://example.com:9001", "grpc", "example.com", 9001],
    ["[::1]", "http", "::1", 8000],
    ["grpc://[::1]:9001", "grpc", "::1", 9001],
  ];
  for (const [url, scheme, hostname, port] of cases) {
    const parsed = parseTritonUrl(url);
    assert.deepEqual([parsed.scheme, parsed.hostname, parsed.port], [scheme, hostname, port], url);
  }
  assert.equal(parseTritonUrl("grpc://[::1]:9001").withoutScheme, "[::1]:9001");
  assert.equal(parseTritonUrl("localhost").withScheme, "http://localhost:8000");
});

Deno.test("parseTritonUrl() refuses other schemes, paths, bad ports and empty hosts", () => {
  for (
    const url of [
      "https://localhost",
      "ftp://localhost:21",
      "unix://socket",
      "http://localhost/v2",
      "localhost:port",
      "localhost:0",
      "localhost:70000",
      "http://",
      ":8000",
      "::1",
      "[::1",
      "user@host",
    ]
  ) {
    assert.throws(() => parseTritonUrl(url), ClientInvalidUrlError, url);
  }
  assert.throws(
    () => parseTritonUrl("https://localhost"),
    { message: 'Invalid server URL "https://localhost": scheme must be http or grpc, got https' },
  );
});
