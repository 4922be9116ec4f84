import assert from "node:assert/strict";
import { joinChunks } from "./compression.ts";
import { classify, encodeInferResponse } from "./infer_response.ts";

const decoder = new TextDecoder();

// The encoder with its body joined, to compare bytes.
function encode(
  ...args: Parameters<typeof encodeInferResponse>
): { body: Uint8Array; headers: Record<string, string> } {
  const encoded = encodeInferResponse(...args);
  return { ...encoded, body: joinChunks(encoded.body) };
}

Deno.test("encodeInferResponse() writes literal JSON without binary outputs", () => {
  const { body, headers } = encode({
    modelName: "m",
    modelVersion: "3",
    id: "abc",
    parameters: { final: true },
    outputs: new Map([
      ["b", { dtype: "bool", shape: [2], data: new Uint8Array([1, 0]) }],
      ["s", { dtype: "bytes", shape: [1], data: [new Uint8Array([104, 0, 105])] }],
    ]),
  });
  assert.deepEqual(headers, { "content-type": "application/json" });
  // JSON alone stays text (Deno encodes it as it sends it).
  assert.equal(
    typeof encodeInferResponse({ modelName: "m", modelVersion: "1", outputs: new Map() }).body,
    "string",
  );
  assert.equal(
    decoder.decode(body),
    '{"model_name":"m","model_version":"3","id":"abc","parameters":{"final":true},"outputs":[' +
      '{"name":"b","datatype":"BOOL","shape":[2],"data":[true,false]},' +
      '{"name":"s","datatype":"BYTES","shape":[1],"data":["h\\u0000i"]}]}',
  );
});

Deno.test("encodeInferResponse() appends binary outputs in order with literal bytes", () => {
  const { body, headers } = encode({
    modelName: "m",
    modelVersion: "1",
    id: "",
    outputs: new Map([
      ["h", { dtype: "float16", shape: [2], data: new Float16Array([1, -2]) }],
      ["e", { dtype: "int32", shape: [0], data: new Int32Array(0) }],
      ["s", { dtype: "bytes", shape: [2], data: [new Uint8Array([0]), new Uint8Array([])] }],
      ["u", { dtype: "uint64", shape: [1], data: new BigUint64Array([2n ** 64n - 1n]) }],
    ]),
  }, { defaultBinary: true });
  const json = '{"model_name":"m","model_version":"1","outputs":[' +
    '{"name":"h","datatype":"FP16","shape":[2],"parameters":{"binary_data_size":4}},' +
    '{"name":"e","datatype":"INT32","shape":[0],"parameters":{"binary_data_size":0}},' +
    '{"name":"s","datatype":"BYTES","shape":[2],"parameters":{"binary_data_size":9}},' +
    '{"name":"u","datatype":"UINT64","shape":[1],"parameters":{"binary_data_size":8}}]}';
  assert.deepEqual(headers, {
    "content-type": "application/octet-stream",
    "inference-header-content-length": String(json.length),
  });
  assert.equal(decoder.decode(body.subarray(0, json.length)), json);
  assert.deepEqual(Array.from(body.subarray(json.length)), [
    0x00,
    0x3c,
    0x00,
    0xc0,
    1,
    0,
    0,
    0,
    0,
    0,
    0,
    0,
    0,
    255,
    255,
    255,
    255,
    255,
    255,
    255,
    255,
  ]);
});

Deno.test("encodeInferResponse() refuses FP16/BF16 as JSON and honours per-output formats", () => {
  const outputs = new Map([["h", {
    dtype: "bfloat16" as const,
    shape: [1],
    data: new Uint16Array([0x3f80]),
  }]]);
  assert.throws(
    () => encode({ modelName: "m", modelVersion: "1", outputs }),
    /Sending BF16 data via JSON is not supported: request output 'h'/,
  );
  const { body } = encode({ modelName: "m", modelVersion: "1", outputs }, {
    outputFormats: new Map([["h", { binary: true, classification: 0 }]]),
  });
  assert.deepEqual(Array.from(body.subarray(body.length - 2)), [0x80, 0x3f]);
});

Deno.test("classify() returns Triton's top-N strings per batch row", () => {
  const probs = {
    dtype: "float32" as const,
    shape: [2, 3],
    data: new Float32Array([0.1, 0.7, 0.2, 3, 1, 2]),
  };
  const batched = classify("p", probs, { count: 2, batching: true });
  assert.deepEqual(batched.shape, [2, 2]);
  assert.deepEqual(batched.data.map((b) => decoder.decode(b)), [
    "0.700000:1",
    "0.200000:2",
    "3.000000:0",
    "2.000000:2",
  ]);
  const flat = classify(
    "p",
    { dtype: "int32", shape: [3], data: new Int32Array([5, 9, -1]) },
    { count: 5, batching: false },
  );
  assert.deepEqual(flat.shape, [3]);
  assert.deepEqual(flat.data.map((b) => decoder.decode(b)), ["9:1", "5:0", "-1:2"]);
  const { body } = encode({
    modelName: "m",
    modelVersion: "1",
    outputs: new Map([["p", probs]]),
  }, {
    outputFormats: new Map([["p", { binary: false, classification: 1 }]]),
    batching: true,
  });
  assert.match(
    decoder.decode(body),
    /"name":"p","datatype":"BYTES","shape":\[2,1\],"data":\["0.700000:1","3.000000:0"\]/,
  );
  assert.throws(
    () =>
      classify("t", { dtype: "bytes", shape: [1], data: [new Uint8Array()] }, {
        count: 1,
        batching: false,
      }),
    /unsupported type 'BYTES'/,
  );
});
