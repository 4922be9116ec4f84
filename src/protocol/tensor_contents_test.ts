import assert from "node:assert/strict";
import { ndarray } from "../tensor/ndarray.ts";
import { tensorFromContents, tensorFromRaw, tensorToContents } from "./tensor_contents.ts";

Deno.test("tensorFromRaw copies misaligned numeric data and splits BYTES", () => {
  const buffer = new Uint8Array([9, 0, 0, 0x80, 0x3f]);
  const t = tensorFromRaw({ dtype: "float32", shape: [1] }, buffer.subarray(1), "input 'x'");
  assert.deepEqual([...(t.data as Float32Array)], [1]);
  const b = tensorFromRaw(
    { dtype: "bytes", shape: [2] },
    new Uint8Array([1, 0, 0, 0, 0, 0, 0, 0, 0]),
    "input 's'",
  );
  assert.deepEqual((b.data as Uint8Array[]).map((e) => [...e]), [[0], []]);
  assert.throws(
    () =>
      tensorFromRaw({ dtype: "bytes", shape: [3] }, new Uint8Array([1, 0, 0, 0, 0]), "input 's'"),
    /^InferenceError: Invalid data for input 's': Invalid BYTES data: expected 3 elements/,
  );
});

Deno.test("tensorFromContents checks field, count and range", () => {
  assert.deepEqual(
    [
      ...(tensorFromContents({ dtype: "uint8", shape: [2] }, { uint_contents: [0, 255] }, "x")
        .data as Uint8Array),
    ],
    [0, 255],
  );
  assert.deepEqual(
    [
      ...(tensorFromContents({ dtype: "int64", shape: [1] }, {
        int64_contents: ["-9007199254740993"],
      }, "x")
        .data as BigInt64Array),
    ],
    [-9007199254740993n],
  );
  assert.throws(
    () => tensorFromContents({ dtype: "int8", shape: [1] }, { int_contents: [200] }, "input 'x'"),
    /Invalid data for input 'x': element 0 \(200\) is out of range for INT8/,
  );
  assert.throws(
    () => tensorFromContents({ dtype: "int32", shape: [1] }, { fp32_contents: [1] }, "input 'x'"),
    /INT32 data goes in contents.int_contents, but contents.fp32_contents is set/,
  );
  assert.throws(
    () => tensorFromContents({ dtype: "bfloat16", shape: [1] }, {}, "input 'x'"),
    /BF16 tensors must be sent in raw_input_contents/,
  );
  const empty = tensorFromContents({ dtype: "float32", shape: [0, 3] }, {}, "x");
  assert.deepEqual(empty.shape, [0, 3]);
  assert.equal(empty.data.length, 0);
});

Deno.test("tensorToContents fills the dtype's list", () => {
  assert.deepEqual(tensorToContents(ndarray(new BigUint64Array([1n]))), {
    uint64_contents: [1n],
  });
  assert.deepEqual(tensorToContents(ndarray(new Int16Array([-1]))), { int_contents: [-1] });
  assert.deepEqual(tensorToContents(ndarray(["a"])), { bytes_contents: [new Uint8Array([97])] });
  assert.throws(() => tensorToContents(ndarray(new Float16Array([1]))), /FP16 .*use raw/);
});
