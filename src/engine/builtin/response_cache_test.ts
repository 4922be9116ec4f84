import assert from "node:assert/strict";
import { type NDArray, ndarray } from "../../tensor/ndarray.ts";
import { cacheKey, ResponseCache } from "./response_cache.ts";

const input = (values: number[], shape?: number[]): Map<string, NDArray> =>
  new Map([["x", ndarray(new Int32Array(values), shape ?? [values.length])]]);
const output = (bytes: number): Map<string, NDArray> =>
  new Map([["y", ndarray(new Uint8Array(bytes))]]);

Deno.test("cacheKey() covers model, version, names, dtypes, shapes, bytes and outputs", () => {
  const base = cacheKey({ name: "m", version: 1 }, input([1, 2]), ["y"]).id;
  assert.equal(cacheKey({ name: "m", version: 1 }, input([1, 2]), ["y"]).id, base);
  for (
    const other of [
      cacheKey({ name: "n", version: 1 }, input([1, 2]), ["y"]),
      cacheKey({ name: "m", version: 2 }, input([1, 2]), ["y"]),
      cacheKey({ name: "m", version: 1 }, input([1, 3]), ["y"]),
      cacheKey({ name: "m", version: 1 }, input([1, 2], [2, 1]), ["y"]),
      cacheKey({ name: "m", version: 1 }, new Map([["x", ndarray(new Uint32Array([1, 2]))]]), [
        "y",
      ]),
      cacheKey({ name: "m", version: 1 }, new Map([["w", ndarray(new Int32Array([1, 2]))]]), ["y"]),
      cacheKey({ name: "m", version: 1 }, input([1, 2]), ["z"]),
    ]
  ) {
    assert.notEqual(other.id, base);
  }
});

Deno.test("ResponseCache evicts the least recently used entries to fit its budget", () => {
  const keys = [1, 2, 3].map((v) => cacheKey({ name: "m", version: 1 }, input([v]), ["y"]));
  const entrySize = keys[0]!.bytes.byteLength + 100;
  const cache = new ResponseCache(entrySize * 2);
  cache.insert(keys[0]!, output(100));
  cache.insert(keys[1]!, output(100));
  assert.equal(cache.usedBytes, entrySize * 2);
  assert.ok(cache.lookup(keys[0]!)); // now the most recently used
  cache.insert(keys[2]!, output(100));
  assert.equal(cache.size, 2);
  assert.ok(cache.lookup(keys[0]!));
  assert.equal(cache.lookup(keys[1]!), undefined);
  assert.ok(cache.lookup(keys[2]!));
});

Deno.test("ResponseCache skips entries larger than its budget and copies outputs", () => {
  const key = cacheKey({ name: "m", version: 1 }, input([1]), ["y"]);
  const small = new ResponseCache(10);
  small.insert(key, output(100));
  assert.equal(small.size, 0);
  const cache = new ResponseCache(1 << 20);
  const outputs = output(4);
  cache.insert(key, outputs);
  (outputs.get("y")!.data as Uint8Array)[0] = 9;
  assert.equal((cache.lookup(key)!.get("y")!.data as Uint8Array)[0], 0);
});

Deno.test("ResponseCache compares keys exactly, not just by hash", () => {
  const cache = new ResponseCache(1 << 20);
  const key = cacheKey({ name: "m", version: 1 }, input([1]), ["y"]);
  cache.insert(key, output(1));
  const forged = { id: key.id, bytes: key.bytes.slice() };
  const last = forged.bytes.length - 1;
  forged.bytes[last] = forged.bytes[last]! ^ 1;
  assert.equal(cache.lookup(forged), undefined);
});
