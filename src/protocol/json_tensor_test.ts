import assert from "node:assert/strict";
import { jsonToNDArray, ndarrayToJson, parseJsonBytes, parseJsonExact } from "./json_tensor.ts";

const decoder = new TextDecoder();

Deno.test("parseJsonExact() keeps 64-bit integers exact and leaves others as numbers", () => {
  const value = parseJsonExact(
    '{"a":[9223372036854775807,-9223372036854775808,18446744073709551615,1,2.5,1e300]}',
  ) as { a: unknown[] };
  assert.deepEqual(value.a, [
    9223372036854775807n,
    -9223372036854775808n,
    18446744073709551615n,
    1,
    2.5,
    1e300,
  ]);
  assert.deepEqual(parseJsonExact('{"s":"12345678901234567890"}'), { s: "12345678901234567890" });
  assert.throws(() => parseJsonExact("{"), SyntaxError);
});

Deno.test("jsonToNDArray() decodes every JSON dtype, nested or flat", () => {
  const cases: [string, unknown, unknown[]][] = [
    ["int8", [[-128, 127]], [-128, 127]],
    ["int16", [-32768, 32767], [-32768, 32767]],
    ["int32", [[-2147483648], [2147483647]], [-2147483648, 2147483647]],
    ["uint8", [0, 255], [0, 255]],
    ["uint16", [0, 65535], [0, 65535]],
    ["uint32", [0, 4294967295], [0, 4294967295]],
    ["float32", [0.5, -1], [0.5, -1]],
    ["float64", [1e300, 2], [1e300, 2]],
  ];
  for (const [dtype, data, expected] of cases) {
    const array = jsonToNDArray("x", { dtype: dtype as "int8", shape: [2] }, data);
    assert.equal(array.dtype, dtype);
    assert.deepEqual(Array.from(array.data as Int8Array), expected, dtype);
  }
  const big = jsonToNDArray("x", { dtype: "int64", shape: [1, 3] }, [[
    9223372036854775807n,
    -5,
    2 ** 53,
  ]]);
  assert.deepEqual(Array.from(big.data as BigInt64Array), [9223372036854775807n, -5n, 2n ** 53n]);
  const ubig = jsonToNDArray("x", { dtype: "uint64", shape: [1] }, [18446744073709551615n]);
  assert.deepEqual(Array.from(ubig.data as BigUint64Array), [18446744073709551615n]);
  const flags = jsonToNDArray("x", { dtype: "bool", shape: [3] }, [true, false, true]);
  assert.deepEqual(Array.from(flags.data as Uint8Array), [1, 0, 1]);
  const text = jsonToNDArray("x", { dtype: "bytes", shape: [2] }, ["héllo", "a\u0000b"]);
  assert.deepEqual((text.data as Uint8Array[]).map((b) => Array.from(b)), [
    [104, 195, 169, 108, 108, 111],
    [97, 0, 98],
  ]);
  const scalar = jsonToNDArray("x", { dtype: "float32", shape: [] }, 3);
  assert.deepEqual(Array.from(scalar.data as Float32Array), [3]);
  const empty = jsonToNDArray("x", { dtype: "float32", shape: [0, 4] }, []);
  assert.equal(empty.data.length, 0);
});

Deno.test("jsonToNDArray() names the input and the problem", () => {
  const bad: [string, number[], unknown, RegExp][] = [
    ["float16", [1], [1], /Receiving FP16 data via JSON is not supported.*input 'x'/],
    ["bfloat16", [1], [1], /Receiving BF16 data via JSON is not supported/],
    ["int32", [3], [1, 2], /input 'x'.*shape \[3\] needs 3 elements but 'data' has 2/],
    ["int32", [1], [1.5], /element 0 is 1\.5, expected an integer in/],
    ["int8", [1], [128], /element 0 is 128, expected an integer in \[-128, 127\]/],
    ["uint8", [1], [-1], /expected an integer in \[0, 255\]/],
    ["uint64", [1], [-1], /expected a non-negative 64-bit integer/],
    ["int64", [1], ["1"], /element 0 is "1", expected a 64-bit integer/],
    ["bool", [1], [1], /element 0 is 1, expected true or false/],
    ["bytes", [1], [1], /element 0 is 1, expected a string/],
    ["float32", [1], ["x"], /element 0 is "x", expected a number/],
    ["float32", [1], [null], /element 0 is null/],
    ["float32", [1], [{}], /element 0 is an object/],
  ];
  for (const [dtype, shape, data, message] of bad) {
    assert.throws(
      () => jsonToNDArray("x", { dtype: dtype as "int8", shape }, data),
      (error: Error & { code?: string }) => {
        assert.equal(error.code, "INVALID_ARG");
        assert.match(error.message, message);
        return true;
      },
    );
  }
});

Deno.test("ndarrayToJson() gives literal JSON for every dtype", () => {
  const json = (array: Parameters<typeof ndarrayToJson>[1]): string =>
    JSON.stringify(ndarrayToJson("o", array));
  assert.equal(json({ dtype: "bool", shape: [2], data: new Uint8Array([0, 1]) }), "[false,true]");
  assert.equal(json({ dtype: "int8", shape: [2], data: new Int8Array([-1, 2]) }), "[-1,2]");
  assert.equal(
    json({ dtype: "uint32", shape: [1], data: new Uint32Array([4294967295]) }),
    "[4294967295]",
  );
  assert.equal(
    json({ dtype: "int64", shape: [2], data: new BigInt64Array([-(2n ** 63n), 3n]) }),
    "[-9223372036854775808,3]",
  );
  assert.equal(
    json({ dtype: "uint64", shape: [1], data: new BigUint64Array([2n ** 64n - 1n]) }),
    "[18446744073709551615]",
  );
  assert.equal(
    json({ dtype: "float32", shape: [1], data: new Float32Array([0.1]) }),
    "[0.10000000149011612]",
  );
  assert.equal(json({ dtype: "float64", shape: [1], data: new Float64Array([0.1]) }), "[0.1]");
  const bytes = {
    dtype: "bytes" as const,
    shape: [2],
    data: [new Uint8Array([97, 0, 98]), new Uint8Array([])],
  };
  assert.equal(json(bytes), '["a\\u0000b",""]');
  assert.equal(decoder.decode(bytes.data[0]), "a\0b");
  assert.throws(
    () => ndarrayToJson("half", { dtype: "float16", shape: [1], data: new Float16Array([1]) }),
    /Sending FP16 data via JSON is not supported: request output 'half' with parameters.binary_data/,
  );
});

Deno.test("jsonToNDArray() refuses FP32 and FP64 values that do not fit, naming the input", () => {
  // JSON.parse reads 1e400 as Infinity; a Float32Array stores 1e39 as Infinity.
  assert.throws(
    () => jsonToNDArray("w", { dtype: "float32", shape: [2] }, JSON.parse("[1, 1e400]")),
    {
      name: "InferenceError",
      message:
        "Unable to parse 'data' of input 'w': element 1 is Infinity, expected a finite number within FP32 range (about ±3.4028235e38) for FP32",
    },
  );
  assert.throws(
    () => jsonToNDArray("w", { dtype: "float32", shape: [1] }, [1e39]),
    /element 0 is 1e\+39, expected a finite number within FP32 range/,
  );
  assert.throws(
    () => jsonToNDArray("d", { dtype: "float64", shape: [1] }, JSON.parse("[-1e400]")),
    {
      message:
        "Unable to parse 'data' of input 'd': element 0 is -Infinity, expected a finite number for FP64",
    },
  );
  // The largest FP32 and values that round to it still fit; FP64 takes 1e300.
  const edge = jsonToNDArray("w", { dtype: "float32", shape: [2] }, [
    3.4028234663852886e38,
    -3.40282356e38,
  ]);
  assert.deepEqual([...(edge.data as Float32Array)], [
    3.4028234663852886e38,
    -3.4028234663852886e38,
  ]);
  assert.deepEqual([
    ...(jsonToNDArray("d", { dtype: "float64", shape: [1] }, [1e300]).data as Float64Array),
  ], [
    1e300,
  ]);
});

Deno.test("jsonToNDArray() refuses data nested 100k levels deep with a clear error", () => {
  let deep: unknown = 1;
  for (let i = 0; i < 100_000; i++) deep = [deep];
  assert.throws(() => jsonToNDArray("x", { dtype: "int32", shape: [1] }, deep), {
    name: "InferenceError",
    message: "Unable to parse 'data' of input 'x': arrays are nested more than 64 levels deep",
  });
  // Nesting up to the limit (or the shape's rank) is fine, as in Triton.
  let ok: unknown = 7;
  for (let i = 0; i < 64; i++) ok = [ok];
  assert.deepEqual(
    [...(jsonToNDArray("x", { dtype: "int32", shape: [1] }, ok).data as Int32Array)],
    [7],
  );
});

Deno.test("parseJsonBytes() refuses text that is not UTF-8 and names the byte", () => {
  const bytes = new Uint8Array([...new TextEncoder().encode('{"s":"a'), 0xc3, 0x28, 0x22, 0x7d]);
  assert.throws(() => parseJsonBytes(bytes), {
    name: "SyntaxError",
    message: "the JSON text is not valid UTF-8 (bytes 7-8 are not a valid UTF-8 sequence)",
  });
  assert.throws(
    () => parseJsonBytes(new Uint8Array([0x22, 0xe2, 0x82])),
    { message: "the JSON text is not valid UTF-8 (byte 1 starts a sequence the text cuts off)" },
  );
  assert.deepEqual(parseJsonBytes(new TextEncoder().encode('{"s":"héllo"}')), { s: "héllo" });
});

Deno.test("parseJsonBytes() keeps a client's own U+FFFD and drops a byte order mark", () => {
  // U+FFFD sent as its UTF-8 bytes (EF BF BD, bytes 7 to 9 here) is text like any other; a bad
  // byte after it is still refused.
  const replacement = new TextEncoder().encode('{"s":"a\uFFFDb"}');
  assert.deepEqual(parseJsonBytes(replacement), { s: "a\uFFFDb" });
  assert.throws(
    () => parseJsonBytes(new Uint8Array([...replacement.subarray(0, 10), 0xff, 0x22, 0x7d])),
    { message: "the JSON text is not valid UTF-8 (byte 10 is 0xff)" },
  );
  // A byte order mark is dropped, as the strict decoder did.
  assert.deepEqual(parseJsonBytes(new Uint8Array([0xef, 0xbb, 0xbf, 0x5b, 0x31, 0x5d])), [1]);
});
