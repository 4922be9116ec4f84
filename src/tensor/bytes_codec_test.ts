import assert from "node:assert/strict";
import { InferenceError } from "../errors.ts";
import { deserializeBytes, serializeBytes } from "./bytes_codec.ts";

Deno.test("deserializeBytes() stops at the shape's count instead of building every element", () => {
  // 64 MiB of zero length prefixes: 16M empty elements, for a one-element shape.
  const data = new Uint8Array(64 << 20);
  assert.throws(() => deserializeBytes(data, 1), (error: unknown) => {
    assert.ok(error instanceof InferenceError);
    assert.equal(error.code, "INVALID_ARG");
    assert.equal(
      error.message,
      "Invalid BYTES data: expected 1 element for the shape, found more (67108860 bytes follow element 0)",
    );
    return true;
  });
  assert.throws(
    () => deserializeBytes(serializeBytes([new Uint8Array(1), new Uint8Array(2)]), 1),
    /expected 1 element for the shape, found more \(6 bytes follow element 0\)/,
  );
});

Deno.test("deserializeBytes() still reads exact, short and unchecked data", () => {
  const wire = serializeBytes([new Uint8Array([1]), new Uint8Array(0), new Uint8Array([2, 3])]);
  assert.deepEqual(deserializeBytes(wire, 3).map((b) => [...b]), [[1], [], [2, 3]]);
  assert.deepEqual(deserializeBytes(wire).length, 3);
  assert.throws(
    () => deserializeBytes(wire, 4),
    /Invalid BYTES data: expected 4 elements for the shape, found 3/,
  );
  assert.throws(
    () => deserializeBytes(new Uint8Array([5, 0, 0, 0, 1]), 1),
    /element 0 claims 5 bytes at byte 4 but only 1 remain/,
  );
});
