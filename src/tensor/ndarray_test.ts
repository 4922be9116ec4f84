import assert from "node:assert/strict";
import { Buffer } from "node:buffer";
import {
  concatBatch,
  fromRawBytes,
  ndarray,
  rawByteSize,
  sliceBatch,
  toRawBytes,
} from "./ndarray.ts";

Deno.test("fromRawBytes() copies misaligned numeric data once, also from a Node Buffer", () => {
  const backing = Buffer.alloc(9);
  new DataView(backing.buffer, backing.byteOffset + 1, 8).setFloat32(0, 1.5, true);
  new DataView(backing.buffer, backing.byteOffset + 1, 8).setFloat32(4, -2, true);
  const misaligned = backing.subarray(1, 9);
  const tensor = fromRawBytes("float32", [2], misaligned);
  assert.deepEqual(Array.from(tensor.data as Float32Array), [1.5, -2]);
});

Deno.test("fromRawBytes() views aligned data without copying", () => {
  const bytes = new Uint8Array(new Float64Array([1, 2]).buffer);
  const tensor = fromRawBytes("float64", [2], bytes);
  assert.equal((tensor.data as Float64Array).buffer, bytes.buffer);
});

Deno.test("fromRawBytes() rejects a byte count that does not fit the shape", () => {
  assert.throws(
    () => fromRawBytes("int32", [3], new Uint8Array(8)),
    /expected 12 bytes, got 8/,
  );
});

Deno.test("ndarray() infers shapes from nested arrays and checks sizes", () => {
  assert.deepEqual(ndarray([[1n, 2n], [3n, 4n]]).shape, [2, 2]);
  assert.equal(ndarray([true, false]).dtype, "bool");
  assert.throws(() => ndarray(new Float32Array(3), [2, 2]), /needs 4 elements but the data has 3/);
  assert.throws(() => ndarray([1.5], undefined, { dtype: "int64" }), /not a bigint or integer/);
});

Deno.test("toRawBytes() and rawByteSize() agree for bytes tensors", () => {
  const tensor = ndarray(["ab", ""]);
  assert.deepEqual(Array.from(toRawBytes(tensor)), [2, 0, 0, 0, 97, 98, 0, 0, 0, 0]);
  assert.equal(rawByteSize(tensor), 10);
});

Deno.test("concatBatch() and sliceBatch() round trip along axis 0", () => {
  const a = ndarray(new Int32Array([1, 2, 3, 4]), [2, 2]);
  const b = ndarray(new Int32Array([5, 6]), [1, 2]);
  const joined = concatBatch([a, b]);
  assert.deepEqual(joined.shape, [3, 2]);
  assert.deepEqual(Array.from(sliceBatch(joined, 2, 3).data as Int32Array), [5, 6]);
  assert.throws(
    () => concatBatch([a, ndarray(new Int32Array([1, 2, 3]), [1, 3])]),
    /trailing dimensions differ/,
  );
});
