import assert from "node:assert/strict";
import { decodeHttpInferResponse, encodeHttpInferRequest } from "./http_codec.ts";
import { ClientInferenceServerError } from "./errors.ts";
import { ndarray } from "../tensor/ndarray.ts";

const text = new TextEncoder();
const decode = (bytes: Uint8Array): string => new TextDecoder().decode(bytes);

Deno.test("encodeHttpInferRequest() writes the JSON header then each input's bytes", () => {
  const { body, headerLength } = encodeHttpInferRequest({
    modelName: "m",
    modelVersion: undefined,
    id: "7",
    parameters: { flag: true, n: 2 },
    inputs: [
      ["a", ndarray(new Float32Array([1, -2]), [1, 2])],
      ["s", ndarray(["a\0", ""], [1, 2])],
    ],
    outputs: ["y"],
  });
  const json = '{"id":"7","parameters":{"flag":true,"n":2},"inputs":[' +
    '{"name":"a","datatype":"FP32","shape":[1,2],"parameters":{"binary_data_size":8}},' +
    '{"name":"s","datatype":"BYTES","shape":[1,2],"parameters":{"binary_data_size":10}}],' +
    '"outputs":[{"name":"y","parameters":{"binary_data":true}}]}';
  assert.equal(headerLength, json.length);
  assert.equal(decode(body.subarray(0, headerLength)), json);
  assert.deepEqual([...body.subarray(headerLength)], [
    ...[0, 0, 128, 63, 0, 0, 0, 192],
    ...[2, 0, 0, 0, 97, 0, 0, 0, 0, 0],
  ]);
});

Deno.test("encodeHttpInferRequest() asks for binary outputs when none are named", () => {
  const { body, headerLength } = encodeHttpInferRequest({
    modelName: "m",
    modelVersion: "1",
    id: "1",
    parameters: {},
    inputs: [["b", ndarray([true, false], [2], { dtype: "bool" })]],
    outputs: [],
  });
  assert.equal(
    decode(body.subarray(0, headerLength)),
    '{"id":"1","parameters":{"binary_data_output":true},"inputs":[' +
      '{"name":"b","datatype":"BOOL","shape":[2],"parameters":{"binary_data_size":2}}]}',
  );
  assert.deepEqual([...body.subarray(headerLength)], [1, 0]);
});

function responseBody(header: unknown, ...data: number[][]): [Uint8Array, number] {
  const json = text.encode(JSON.stringify(header));
  return [new Uint8Array([...json, ...data.flat()]), json.byteLength];
}

Deno.test("decodeHttpInferResponse() reads binary outputs of every kind", () => {
  const [body, length] = responseBody(
    {
      model_name: "m",
      model_version: "1",
      id: "3",
      parameters: { p: "v" },
      outputs: [
        { name: "i", datatype: "INT64", shape: [1], parameters: { binary_data_size: 8 } },
        { name: "h", datatype: "FP16", shape: [2], parameters: { binary_data_size: 4 } },
        { name: "s", datatype: "BYTES", shape: [1], parameters: { binary_data_size: 6 } },
        { name: "e", datatype: "FP32", shape: [0, 3], parameters: { binary_data_size: 0 } },
        { name: "b", datatype: "BOOL", shape: [1], parameters: { binary_data_size: 1 } },
      ],
    },
    [1, 0, 0, 0, 0, 0, 32, 0], // 2^53 + 1
    [0, 60, 0, 192], // 1.0, -2.0
    [2, 0, 0, 0, 0, 120],
    [],
    [1],
  );
  const response = decodeHttpInferResponse(body, length);
  assert.equal(response.modelName, "m");
  assert.equal(response.modelVersion, "1");
  assert.equal(response.id, "3");
  assert.deepEqual(response.parameters, { p: "v" });
  assert.deepEqual(Object.keys(response.outputs), ["i", "h", "s", "e", "b"]);
  assert.deepEqual([...(response.outputs.i!.data as BigInt64Array)], [9007199254740993n]);
  assert.deepEqual([...(response.outputs.h!.data as Float16Array)], [1, -2]);
  assert.deepEqual((response.outputs.s!.data as Uint8Array[]).map((e) => [...e]), [[0, 120]]);
  assert.deepEqual(response.outputs.e!.shape, [0, 3]);
  assert.equal(response.outputs.e!.data.length, 0);
  assert.equal(response.outputs.b!.dtype, "bool");
  assert.deepEqual([...(response.outputs.b!.data as Uint8Array)], [1]);
});

Deno.test("decodeHttpInferResponse() views aligned binary data without copying", () => {
  const header = JSON.stringify({
    model_name: "m",
    model_version: "1",
    outputs: [{ name: "y", datatype: "FP32", shape: [2], parameters: { binary_data_size: 8 } }],
  });
  const padded = header + " ".repeat((4 - header.length % 4) % 4);
  const body = new Uint8Array([...text.encode(padded), 0, 0, 128, 63, 0, 0, 0, 64]);
  const y = decodeHttpInferResponse(body, padded.length).outputs.y!;
  assert.equal((y.data as Float32Array).buffer, body.buffer);
  assert.deepEqual([...(y.data as Float32Array)], [1, 2]);
});

Deno.test("decodeHttpInferResponse() reads JSON outputs", () => {
  const body = text.encode(JSON.stringify({
    model_name: "m",
    model_version: "1",
    outputs: [
      { name: "f", datatype: "FP32", shape: [2, 1], data: [[1.5], [2]] },
      { name: "s", datatype: "BYTES", shape: [1], data: ["hi"] },
      { name: "b", datatype: "BOOL", shape: [2], data: [true, false] },
      { name: "i", datatype: "INT64", shape: [1], data: [5] },
    ],
  }));
  const { outputs } = decodeHttpInferResponse(body, undefined);
  assert.deepEqual([...(outputs.f!.data as Float32Array)], [1.5, 2]);
  assert.deepEqual(outputs.f!.shape, [2, 1]);
  assert.deepEqual(decode((outputs.s!.data as Uint8Array[])[0]!), "hi");
  assert.deepEqual([...(outputs.b!.data as Uint8Array)], [1, 0]);
  assert.deepEqual([...(outputs.i!.data as BigInt64Array)], [5n]);
});

Deno.test("decodeHttpInferResponse() refuses malformed bodies with clear errors", () => {
  const output = (extra: Record<string, unknown>): unknown => ({
    model_name: "m",
    model_version: "1",
    outputs: [{ name: "y", datatype: "FP32", shape: [1], ...extra }],
  });
  const cases: [Uint8Array, number | undefined, RegExp][] = [
    [text.encode("{"), undefined, /the JSON header does not parse/],
    [text.encode("[]"), undefined, /the JSON header is not an object/],
    [
      text.encode("{}"),
      5,
      /Invalid 'Inference-Header-Content-Length' header: expected an integer within \[0, 2\] \(the body size\), got '5'$/,
    ],
    [
      ...responseBody(output({ parameters: { binary_data_size: 8 } }), [0, 0, 0, 0]),
      /Unexpected size for output 'y': expecting 8 bytes but only 4 remain in the response body$/,
    ],
    [
      ...responseBody(output({ parameters: { binary_data_size: 2 } }), [0, 0]),
      /Unexpected size for output 'y': shape \[1\] of float32 needs 4 bytes, 'binary_data_size' is 2$/,
    ],
    [
      ...responseBody(output({ parameters: { binary_data_size: 1.5 } })),
      /Unable to parse 'binary_data_size' of output 'y': expected a non-negative integer$/,
    ],
    [...responseBody(output({ datatype: "FP8" })), /unknown datatype "FP8"/],
    [...responseBody(output({ shape: [-1] })), /bad shape/],
    [...responseBody(output({})), /output 'y' has neither data nor binary data/],
  ] as [Uint8Array, number | undefined, RegExp][];
  for (const [body, length, message] of cases) {
    assert.throws(() => decodeHttpInferResponse(body, length), (error: unknown) => {
      assert.ok(error instanceof ClientInferenceServerError);
      assert.match(error.message, /^Invalid inference response from server: /);
      assert.match(error.message, message);
      return true;
    });
  }
});
